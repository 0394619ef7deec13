"""Images named in a prompt are attached to it.

Before a prompt is sent, :func:`image_paths` looks for image files (``.png``, ``.jpg``,
``.jpeg``, ``.gif``, ``.webp``) the text names:

* an ``@`` mention: ``@shots/bug.png`` or ``@"my shots/bug.png"`` (relative to the project);
* a pasted path: an absolute path, ``~/…``, ``./…`` or ``../…``, or a ``file://`` URL, as a
  terminal writes a dropped file: bare, in single or double quotes, or with ``\\``-escaped
  spaces (``/tmp/my\\ shot.png``).

Only names of existing files count; each file is attached once, in the order named. The text
is sent unchanged, followed by the files and folders it mentions
(:func:`coding_agent.context.mentions.mention_blocks`) and the images, each after its mark
(:func:`coding_agent.context.mentions.image_mark`;
:func:`coding_agent.context.images.prepare_image_file` scales each to fit 2000×2000).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

from coding_agent.context.images import IMAGE_SUFFIXES
from coding_agent.context.mentions import MENTION

__all__ = ["image_paths"]

_QUOTED = re.compile(r"""(?<!\S)(['"])((?:~|\.{1,2})?/[^'"\n]*|file://[^'"\n]*)\1""")
_BARE = re.compile(r"(?<![\S])((?:~|\.{1,2})?/(?:\\ |\S)+|file://\S+)")
_TRAILING = ".,;:!?)]}"


def _candidate(raw: str, cwd: Path) -> Path | None:
    text = raw
    if text.startswith("file://"):
        text = unquote(urlparse(text).path)
    text = text.replace("\\ ", " ")
    if Path(text).suffix.lower() not in IMAGE_SUFFIXES:
        text = text.rstrip(_TRAILING)
        if Path(text).suffix.lower() not in IMAGE_SUFFIXES:
            return None
    path = Path(os.path.expanduser(text))
    if not path.is_absolute():
        path = cwd / path
    return path if path.is_file() else None


def image_paths(text: str, cwd: str | os.PathLike[str]) -> list[Path]:
    """The existing image files ``text`` mentions or pastes (see the module docstring)."""
    folder = Path(cwd)
    found: list[Path] = []
    raws: list[str] = []
    for match in MENTION.finditer(text):
        quoted, bare = match.group(1), match.group(2)
        raws.append(re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare)
    raws += [match.group(2) for match in _QUOTED.finditer(text)]
    raws += [match.group(1) for match in _BARE.finditer(text)]
    for raw in raws:
        path = _candidate(raw, folder)
        if path is not None:
            resolved = path.resolve()
            if resolved not in found:
                found.append(resolved)
    return found
