"""Project instructions: ``AGENTS.md`` / ``CLAUDE.md`` from the folder and its ancestors.

Coding agents read a project's standing instructions from a Markdown file next to the code. We
read both common names. Walking from the filesystem root down to the project folder, each folder
contributes its ``AGENTS.md`` or, when it has none, its ``CLAUDE.md`` (many projects keep one as a
link to the other, so reading both would say everything twice). Outer folders come first, so the
most specific instructions are read last and win when they disagree::

    /home/me/AGENTS.md              # personal defaults
    /home/me/work/repo/AGENTS.md    # the project
    /home/me/work/repo/pkg/CLAUDE.md

The files are a system section of the conversation, ``context-files``, whose value is
``{"files": [{"path", "content"}]}``. A ``system_instructions`` hook
(:mod:`coding_agent.worker.system_prompt_facet`) reads them afresh before every generation, so editing ``AGENTS.md`` mid-session takes effect on the next turn (the harness
stores a delta entry only when the text changed). Each file is capped at
:data:`MAX_FILE_CHARS` characters so a runaway file cannot fill the context window.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from pico3 import SystemSection, define_section

__all__ = [
    "CONTEXT_FILE_NAMES",
    "MAX_FILE_CHARS",
    "SECTION_KEY",
    "ContextFile",
    "context_files_section",
    "find_context_files",
    "render_context_files",
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


def find_context_files(cwd: str | os.PathLike[str]) -> list[ContextFile]:
    """The instruction files for project folder ``cwd``, outermost folder first."""
    start = Path(cwd).expanduser().resolve()
    folders = [start, *start.parents]
    found: list[ContextFile] = []
    for folder in reversed(folders):
        for name in CONTEXT_FILE_NAMES:
            candidate = folder / name
            if candidate.is_file():
                text = _read(candidate)
                if text is not None and text.strip():
                    found.append(ContextFile(str(candidate), text))
                    break
    return found


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
