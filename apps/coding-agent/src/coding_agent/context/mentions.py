"""``@file`` in a prompt: the file's text goes to the model with the prompt, as Claude Code does.

:func:`mention_blocks` finds the ``@`` mentions of a prompt (``@src/app.py``, ``@"my notes.md"``,
``@docs/``) and makes one text block per mention, sent after the prompt's own text:

* a file inside the project: its text in a fence naming it (:func:`fenced`, the same fence a
  prompt template's ``@path`` puts in place), cut at :data:`MAX_INCLUDED_CHARS` with a note;
* a folder inside the project: its entries, one a line (sub-folders end in ``/``), at most
  :data:`MAX_FOLDER_ENTRIES`;
* a missing file, a file outside the project (``@/etc/passwd``, ``@../other``), a binary file:
  a line saying so, so the prompt still goes and the model knows what was not attached (it can
  still ``read`` the file, asking as for any read outside the project).

Images are not mentioned here: :mod:`coding_agent.context.images` prepares them and the TUI
attaches them as image blocks, each after a text block made by :func:`image_mark`.

Every attachment block starts with one line, its **mark**: ``[📎 src/app.py (120 lines)]``,
``[📎 docs/ (12 entries)]``, ``[📎 nope.txt: no such file or folder, not attached]``,
``[🖼 screenshot.png]``. The transcript shows that mark instead of the block
(:func:`attachment_mark`), so the conversation stays readable and a restart or another
client shows the same; the model reads the whole block. (:func:`attachment_mark` lives in
:mod:`coding_agent.marks`, below this layer, so the export reads marks too.)

A mention that does not look like a path (``@alice``: no ``/`` and no ``.``) is left alone, and
so is one that names nothing and has no file type's extension (``@pytest.fixture`` in pasted
code): only ``@src/nope.py`` or ``@notes.md`` is said to be missing.
"""

from __future__ import annotations

import mimetypes
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from coding_agent.context.images import IMAGE_SUFFIXES
from coding_agent.marks import attachment_mark
from coding_agent.settings.trust import project_root_for

__all__ = [
    "MAX_FOLDER_ENTRIES",
    "MAX_INCLUDED_CHARS",
    "MENTION",
    "attachment_mark",
    "fenced",
    "image_mark",
    "mention_blocks",
    "mentioned",
    "names_paths",
]

MAX_INCLUDED_CHARS = 100_000
"""A mentioned (or template-included) file longer than this is cut, with a note."""

MAX_FOLDER_ENTRIES = 500
"""A mentioned folder lists at most this many entries."""

MENTION = re.compile(r'(?<!\S)@(?:"((?:[^"\\]|\\.)*)"|(\S+))')
"""An ``@`` mention: ``@path`` or ``@"a path with spaces"`` (after a space or at the start)."""

_TRAILING = ".,;:!?)]}'\""


def mentioned(text: str) -> Iterator[str]:
    """The names ``text`` mentions with ``@``, in order (quotes and escapes removed; trailing
    punctuation of a bare name dropped)."""
    for match in MENTION.finditer(text):
        quoted, bare = match.group(1), match.group(2)
        if quoted is not None:
            yield re.sub(r"\\(.)", r"\1", quoted)
        else:
            yield bare.rstrip(_TRAILING)


def fenced(name: str, text: str) -> str:
    """``text`` in a Markdown fence under ``name:`` (a longer fence when it holds one), cut at
    :data:`MAX_INCLUDED_CHARS` with a note."""
    if len(text) > MAX_INCLUDED_CHARS:
        text = text[:MAX_INCLUDED_CHARS] + f"\n[{name} cut at {MAX_INCLUDED_CHARS} characters]"
    fence = "````" if "```" in text else "```"
    return f"{name}:\n{fence}\n{text.rstrip()}\n{fence}\n"


def _lines(text: str) -> str:
    count = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    return f"{count} line{'' if count == 1 else 's'}"


def _read(path: Path) -> str | None:
    """The file's text (UTF-8, undecodable bytes replaced), or ``None`` for a binary file; at
    most a little over :data:`MAX_INCLUDED_CHARS` is read."""
    with path.open("rb") as handle:
        data = handle.read(MAX_INCLUDED_CHARS * 4 + 1)
    if b"\0" in data[:8192]:
        return None
    text = data.decode("utf-8", errors="replace")
    if len(data) > MAX_INCLUDED_CHARS * 4:
        text = text[: MAX_INCLUDED_CHARS + 1]  # cut (with its note) by fenced()
    return text


def _block(name: str, target: Path, root: Path) -> str:
    """The attachment block of mention ``name`` (module docstring)."""
    shown = name.rstrip("/") + ("/" if target.is_dir() else "")
    if not target.exists():
        return f"[📎 {name}: no such file or folder, not attached]"
    real = Path(os.path.realpath(target))
    if real != root and root not in real.parents:
        return (
            f"[📎 {name}: outside the project ({root}), not attached]\n"
            "Files outside the project are not attached to a prompt; read them with the read "
            "tool, which asks first."
        )
    try:
        if real.is_dir():
            entries = sorted(real.iterdir(), key=lambda entry: entry.name)
            names = [e.name + ("/" if e.is_dir() else "") for e in entries[:MAX_FOLDER_ENTRIES]]
            more = len(entries) - len(names)
            listing = "\n".join(names) + (f"\n[{more} more entries not listed]" if more else "")
            count = f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"
            return f"[📎 {shown} ({count})]\n" + fenced(shown, listing or "(empty)")
        text = _read(real)
    except OSError as error:
        return f"[📎 {name}: cannot read it ({error.strerror or error}), not attached]"
    if text is None:
        return f"[📎 {name}: a binary file, not attached]"
    return f"[📎 {shown} ({_lines(text)})]\n" + fenced(shown, text)


def mention_blocks(text: str, cwd: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """One text block per file or folder ``text`` mentions (module docstring), each mention once,
    in order; images and names that are not paths are skipped."""
    folder = Path(cwd)
    root = project_root_for(folder)
    blocks: list[dict[str, Any]] = []
    seen: set[Path] = set()
    for name in mentioned(text):
        if not name or ("/" not in name and "." not in name):
            continue  # @alice, @here: not a path
        if Path(name).suffix.lower() in IMAGE_SUFFIXES:
            continue  # attached as an image
        target = Path(os.path.expanduser(name))
        if not target.is_absolute():
            target = folder / target
        if not target.exists() and not _looks_like_a_file(name):
            continue  # @pytest.fixture, @app.route("/") in pasted code: not a file at all
        key = Path(os.path.abspath(target))
        if key in seen:
            continue
        seen.add(key)
        blocks.append({"type": "text", "text": _block(name, target, root)})
    return blocks


def names_paths(text: str) -> bool:
    """Whether ``text`` has an ``@`` mention that looks like a path (``@src/app.py``,
    ``@notes.md``), without looking at any file (a prompt for a session on a server, whose
    files are not here)."""
    return any("/" in name or "." in name for name in mentioned(text))


def _looks_like_a_file(name: str) -> bool:
    """Whether a name that names nothing was meant as a file: a path (``src/nope.py``) or a
    name with a file type's extension (``notes.md``), not a decorator or an address."""
    if re.fullmatch(r"[\w.~/+-]+", name) is None:
        return False
    return "/" in name or mimetypes.guess_type(name)[0] is not None


def image_mark(name: str, note: str = "") -> dict[str, Any]:
    """The text block sent before an attached image: its mark and, for the model, ``note``
    (the image's size: :meth:`~coding_agent.context.images.PreparedImage.note`)."""
    return {"type": "text", "text": f"[🖼 {name}]" + (f"\n{note}" if note else "")}
