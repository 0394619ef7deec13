"""A subagent's persistent memory: Claude Code's ``memory: user | project | local``.

Each scope is one folder per agent, as Claude Code keeps them:

=========== ============================================== =====================================
``user``    ``~/.claude/agent-memory/<agent>/``              every project's (keep it general)
``project`` ``<project>/.claude/agent-memory/<agent>/``      the project's, for version control
``local``   ``<project>/.claude/agent-memory-local/<agent>/`` the project's, this machine only
=========== ============================================== =====================================

When a subagent with ``memory`` is started (:func:`prepare`), its folder is created if it is not
there, and the system prompt gets :data:`MEMORY_NOTE` with the folder's path and the first
:data:`MEMORY_LINES` lines (at most :data:`MEMORY_BYTES` bytes) of its ``MEMORY.md``. The folder
is named in the task's input (:data:`~.contract.MEMORY_KEY`: ``{"folder", "base", "scope"}``),
where the approval feature finds it: for this subagent alone, reads and edits inside it are the
agent's own files and do not ask.

A folder that is not where it is written — the project's ``.claude`` or ``agent-memory`` a
symlink to elsewhere, checked before it is created and again after — is not used: the subagent
runs without memory, with a warning; so is a ``MEMORY.md`` that is a symlink out of the folder
(a project's memory comes with the repository, and its ``MEMORY.md`` goes into the prompt).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["MEMORY_BYTES", "MEMORY_LINES", "MEMORY_NOTE", "SCOPES", "memory_folder", "prepare"]

MEMORY_LINES = 200
"""How many lines of ``MEMORY.md`` go into the system prompt (Claude Code's number)."""
MEMORY_BYTES = 25_000
"""And at most this many bytes of them."""

SCOPES: Mapping[str, str] = {
    "user": "your memory across all projects: keep it general",
    "project": "this project's memory, shared with its team through version control: keep "
    "it about the project",
    "local": "this project's memory on this machine only (not shared): keep it about the project",
}
"""The scopes, each with what the prompt says of it."""

MEMORY_NOTE = """

# Persistent agent memory

You have a persistent memory folder: {folder} ({about}). What you save there is there the next
time you run. Before you start, consult it; as you work, save what would help next time
(patterns, conventions, decisions, pitfalls you found), and correct what turns out wrong.
MEMORY.md is its index: its first {lines} lines are put in this prompt each run, so keep it
concise and move details into topic files next to it, named from it. You read and write in this
folder without asking: it is yours.

## MEMORY.md

{text}"""
"""Added to the system prompt of a subagent with ``memory``."""


def memory_folder(
    scope: str, agent: str, project: str | os.PathLike[str] | None, env: Mapping[str, str]
) -> tuple[Path, Path] | None:
    """``(folder, base)`` of ``agent``'s memory in ``scope``: ``base`` is where the folder must
    stay (``~/.claude``, or the project); ``None`` for a project scope without a project."""
    if scope == "user":
        base = Path(env.get("HOME") or Path.home()) / ".claude"
        return base / "agent-memory" / agent, base
    if project is None:
        return None
    base = Path(project)
    name = "agent-memory" if scope == "project" else "agent-memory-local"
    return base / ".claude" / name / agent, base


def _in_place(folder: Path, base: Path) -> bool:
    """Whether ``folder`` (existing or not) resolves to ``base``'s real path plus the same
    names: no symlink on the way from ``base``."""
    relative = os.path.relpath(folder, base)
    return os.path.realpath(folder) == os.path.join(os.path.realpath(base), relative)


def prepare(
    scope: str, agent: str, project: str | os.PathLike[str] | None, env: Mapping[str, str]
) -> tuple[dict[str, Any], str] | str:
    """Create the memory folder if needed and read its ``MEMORY.md``: the task input's entry
    and the text for the system prompt, or a warning saying why the subagent runs without."""
    found = memory_folder(scope, agent, project, env)
    if found is None:
        return f"memory: {scope} needs a project folder; the subagent runs without memory"
    folder, base = found
    moved = (
        f"memory: {folder} is not where it is written (a symlink on the way leads elsewhere); "
        "the subagent runs without memory (make it a real folder to use it)"
    )
    if not _in_place(folder, base):
        return moved
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"memory: cannot create {folder} ({exc}); the subagent runs without memory"
    if not _in_place(folder, base) or not folder.is_dir():
        return moved
    text = "(empty: nothing saved yet)"
    index = folder / "MEMORY.md"
    if index.is_symlink() or (index.exists() and not index.is_file()):
        text = "(MEMORY.md is not a regular file of this folder, so it is not read)"
    elif index.exists():
        try:
            with index.open("rb") as f:
                raw = f.read(MEMORY_BYTES)
        except OSError as exc:
            text = f"(MEMORY.md cannot be read: {exc})"
        else:
            lines = raw.decode("utf-8", "replace").splitlines()
            text = "\n".join(lines[:MEMORY_LINES]).strip() or text
    note = MEMORY_NOTE.format(folder=folder, about=SCOPES[scope], lines=MEMORY_LINES, text=text)
    entry = {"folder": str(folder), "base": str(base), "scope": scope}
    return entry, note
