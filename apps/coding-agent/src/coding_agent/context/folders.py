"""Walking the folders of prompt material: command (prompt template) files and skill folders.

One walker, so what is loaded and what is counted agree: :mod:`coding_agent.context.prompt_templates`
loads the files :func:`markdown_files` finds, :mod:`coding_agent.context.skills` the ones
:func:`skill_files` finds, and :mod:`coding_agent.context.waiting` counts the same files in an
untrusted project (what ``/trust`` would load). Both skip hidden folders (``.git``, ``.cache``)
and the folders tools fill (``node_modules``, ``__pycache__``), follow symbolic links (a folder
of commands shared by linking it in works), and list in name order, so the first of two files
with one name is the same on every machine. A folder that cannot be read is skipped, never an
error.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["SKILL_FILE", "SKIPPED_DIRS", "markdown_files", "skill_files"]

SKILL_FILE = "SKILL.md"
"""The file that makes a folder a skill."""

SKIPPED_DIRS = frozenset({"node_modules", "__pycache__"})
"""Folders never searched (besides hidden ones)."""


def _searched(name: str) -> bool:
    return not name.startswith(".") and name not in SKIPPED_DIRS


def markdown_files(root: Path) -> list[tuple[Path, str]]:
    """``(file, name)`` of every ``.md`` file under ``root``, sub-folders namespacing the name
    as Claude Code does (``tools/api-scaffold.md`` is ``tools:api-scaffold``)."""
    found: list[tuple[Path, str]] = []
    for folder, subfolders, files in os.walk(root, followlinks=True):
        subfolders[:] = sorted(d for d in subfolders if _searched(d))
        relative = Path(folder).relative_to(root).parts
        for file in sorted(files):
            if file.endswith(".md") and (Path(folder) / file).is_file():
                found.append((Path(folder) / file, ":".join([*relative, file[:-3]])))
    return found


def skill_files(root: Path, *, root_files: bool = False) -> Iterator[Path]:
    """Every ``SKILL.md`` under ``root`` (sorted; a skill's own sub-folders are its files,
    not more skills). With ``root_files``, each other ``.md`` file directly in ``root`` is a
    skill too, as pi reads ``~/.pi/agent/skills/notes.md`` and ``.pi/skills/notes.md``."""
    try:
        entries = sorted(root.iterdir(), key=lambda entry: entry.name)
    except OSError:
        return
    marker = root / SKILL_FILE
    if marker.is_file():
        yield marker
        return
    for entry in entries:
        if not _searched(entry.name):
            continue
        if entry.is_dir():
            yield from skill_files(entry)
        elif root_files and entry.name.endswith(".md") and entry.is_file():
            yield entry
