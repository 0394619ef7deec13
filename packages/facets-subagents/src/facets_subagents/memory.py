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

A ``local`` memory is not for version control. Claude Code's documentation says only that
``.claude/agent-memory-local/`` should not be checked in; it documents no step that ignores it
(as it does for ``settings.local.json``), so the project's ``.gitignore`` is left alone here too:
when :func:`prepare` first creates ``.claude/agent-memory-local/`` in a git work tree whose
ignore rules (``.gitignore``, ``.git/info/exclude``) do not cover it, one warning
(:func:`unignored_note`) says so and names the line to add.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pico3 import run_git

__all__ = [
    "LOCAL_FOLDER",
    "MEMORY_BYTES",
    "MEMORY_LINES",
    "MEMORY_NOTE",
    "SCOPES",
    "memory_folder",
    "prepare",
    "unignored_note",
]

LOCAL_FOLDER = ".claude/agent-memory-local"
"""Where the ``local`` scope's folders are, relative to the project."""

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
    if scope == "project":
        return base / ".claude" / "agent-memory" / agent, base
    return base / LOCAL_FOLDER / agent, base


def unignored_note(project: str | os.PathLike[str]) -> str | None:
    """The warning for a project whose ``.claude/agent-memory-local/`` git would offer to
    commit (the project is a git work tree and no ignore rule of its covers the folder);
    ``None`` when it is ignored, or the project is not a git work tree (or git is missing).
    Read-only git (:func:`pico3.run_git`): no program the repository configures runs."""
    try:
        listed = run_git(
            project,
            "ls-files",
            "--others",
            "--exclude-standard",
            "--directory",
            "--",
            LOCAL_FOLDER,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if listed.returncode != 0 or not listed.stdout.strip():
        return None
    return (
        f"memory: local keeps {Path(project) / LOCAL_FOLDER}/ on this machine, but git would "
        f"commit it: add the line {LOCAL_FOLDER}/ to the project's .gitignore (Claude Code's "
        "local memory is not for version control either)"
    )


def _in_place(folder: Path, base: Path) -> bool:
    """Whether ``folder`` (existing or not) resolves to ``base``'s real path plus the same
    names: no symlink on the way from ``base``."""
    relative = os.path.relpath(folder, base)
    return os.path.realpath(folder) == os.path.join(os.path.realpath(base), relative)


def prepare(
    scope: str,
    agent: str,
    project: str | os.PathLike[str] | None,
    env: Mapping[str, str],
    notes: list[str] | None = None,
) -> tuple[dict[str, Any], str] | str:
    """Create the memory folder if needed and read its ``MEMORY.md``: the task input's entry
    and the text for the system prompt, or a warning saying why the subagent runs without.
    Warnings that do not stop it (:func:`unignored_note`) are appended to ``notes``."""
    found = memory_folder(scope, agent, project, env)
    if found is None:
        return f"memory: {scope} needs a project folder; the subagent runs without memory"
    folder, base = found
    first_local = scope == "local" and not (base / LOCAL_FOLDER).exists()
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
    if first_local and notes is not None:
        note = unignored_note(base)
        if note is not None:
            notes.append(note)
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
