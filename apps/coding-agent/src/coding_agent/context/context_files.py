"""Project instructions: ``AGENTS.md`` / ``CLAUDE.md`` from the folder and its ancestors.

Coding agents read a project's standing instructions from a Markdown file next to the code. We
read both common names. Walking from the filesystem root down to the project folder, each folder
contributes its ``AGENTS.md`` or, when it has none, its ``CLAUDE.md`` (many projects keep one as a
link to the other, so reading both would say everything twice). Outer folders come first, so the
most specific instructions are read last and win when they disagree::

    /home/me/AGENTS.md              # personal defaults
    /home/me/work/repo/AGENTS.md    # the project
    /home/me/work/repo/pkg/CLAUDE.md

**Whose files are read.** The folders from the project root down (:func:`~coding_agent.settings.trust.
project_root_for`: the git root, or the working folder) are the project's, and their files are
read. A file *above* the project root is read only when nobody but the user could have put it
there (:func:`context_file_problem`): the file and the folder holding it are owned by the user
and writable by nobody else, and every folder above that is owned by the user or by root and
writable by nobody else, unless it has the sticky bit (``/tmp``: others cannot rename or
replace what is in it; but a file directly in ``/tmp`` is skipped, its folder is writable by
everyone). Symlinks are resolved first. Another user's ``AGENTS.md`` in a shared ancestor
folder therefore never becomes the system prompt; :func:`scan_context_files` returns each
skipped file with the reason, the worker logs it once, and ``/context`` lists it.

The files are a system section of the conversation, ``context-files``, whose value is
``{"files": [{"path", "content"}]}``. A ``system_instructions`` hook
(:mod:`coding_agent.worker.system_prompt_facet`) reads them afresh before every generation, so editing ``AGENTS.md`` mid-session takes effect on the next turn (the harness
stores a delta entry only when the text changed). Each file is capped at
:data:`MAX_FILE_CHARS` characters so a runaway file cannot fill the context window.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import msgspec

from coding_agent.settings.trust import folder_owner, folder_problem, project_root_for
from pico3 import SystemSection, define_section

__all__ = [
    "CONTEXT_FILE_NAMES",
    "MAX_FILE_CHARS",
    "SECTION_KEY",
    "ContextFile",
    "ContextFiles",
    "SkippedFile",
    "context_file_problem",
    "context_files_section",
    "find_context_files",
    "render_context_files",
    "scan_context_files",
]

CONTEXT_FILE_NAMES = ("AGENTS.md", "CLAUDE.md")
"""The names looked for in each folder, in order of preference."""

MAX_FILE_CHARS = 100_000
"""Longest file content kept; the rest is replaced by a note."""

SECTION_KEY = "context-files"


class ContextFile(msgspec.Struct, frozen=True):
    """One instruction file: its absolute path and (possibly capped) text."""

    path: str
    content: str

    def to_json(self) -> dict[str, str]:
        """The section value's shape."""
        return {"path": self.path, "content": self.content}


def _read(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if len(text) > MAX_FILE_CHARS:
        text = text[:MAX_FILE_CHARS] + f"\n\n[{path.name} truncated at {MAX_FILE_CHARS} characters]"
    return text


class SkippedFile(msgspec.Struct, frozen=True):
    """A context file that was not read: its absolute path and why."""

    path: str
    reason: str


class ContextFiles(msgspec.Struct, frozen=True):
    """What :func:`scan_context_files` found: the files read, outermost first, and the ones
    skipped because someone other than the user could have written them."""

    files: list[ContextFile]
    skipped: list[SkippedFile]


def _others_may_write(info: os.stat_result) -> bool:
    return bool(info.st_mode & (stat.S_IWOTH | stat.S_IWGRP))


def context_file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path``, a context file above the project, may not be read (``None``: it may).

    The real file and the folder holding it must be the user's and writable by nobody else
    (:func:`coding_agent.settings.trust.folder_problem`, which allows group write for the user's own
    private group); each folder above must be owned by the user or root and writable by nobody
    else, unless it is sticky (``/tmp``)."""
    real = Path(os.path.realpath(path))
    shown = f" ({real})" if str(real) != os.path.abspath(path) else ""
    problem = folder_problem(real)
    if problem is not None:
        return f"the file{shown} {problem}"
    problem = folder_problem(real.parent)
    if problem is not None:
        return f"its folder {real.parent} {problem}"
    me = os.geteuid()
    for folder in real.parent.parents:
        try:
            info = os.stat(folder)
        except OSError as error:
            return f"{folder} cannot be examined ({error.strerror})"
        if info.st_mode & stat.S_ISVTX:
            continue  # others may add files here, but not rename or replace ours
        if info.st_uid not in (0, me):
            return f"{folder} is owned by {folder_owner(folder)}, not by you or root"
        if _others_may_write(info) and (info.st_uid != me or folder_problem(folder) is not None):
            return f"{folder} is writable by other users (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def scan_context_files(cwd: str | os.PathLike[str]) -> ContextFiles:
    """The instruction files for project folder ``cwd``, outermost folder first, and the files
    above the project root that were skipped (module docstring). A folder whose ``AGENTS.md``
    is skipped may still contribute its ``CLAUDE.md``."""
    start = Path(cwd).expanduser().resolve()
    root = project_root_for(start)
    folders = [start, *start.parents]
    found: list[ContextFile] = []
    skipped: list[SkippedFile] = []
    for folder in reversed(folders):
        inside = folder == root or root in folder.parents
        for name in CONTEXT_FILE_NAMES:
            candidate = folder / name
            if not candidate.is_file():
                continue
            problem = None if inside else context_file_problem(candidate)
            if problem is not None:
                skipped.append(SkippedFile(str(candidate), problem))
                continue
            text = _read(candidate)
            if text is not None and text.strip():
                found.append(ContextFile(str(candidate), text))
                break
    return ContextFiles(found, skipped)


def find_context_files(cwd: str | os.PathLike[str]) -> list[ContextFile]:
    """The instruction files for project folder ``cwd`` that may be read, outermost first."""
    return scan_context_files(cwd).files


def render_context_files(value: Any) -> str:
    """The section text: each file under a heading naming it."""
    files = value.get("files", []) if isinstance(value, dict) else []
    parts = [
        "Project instructions from context files (follow them; later files are more specific):"
    ]
    for item in files:
        if isinstance(item, dict):
            parts.append(f"### {item.get('path', '?')}\n\n{str(item.get('content', '')).strip()}")
    return "\n\n".join(parts)


def context_files_section() -> SystemSection:
    """The ``context-files`` section (key and renderer)."""
    return define_section(SECTION_KEY, render_context_files)
