"""The coding agent's system prompt: its sections and where each comes from.

The system prompt is a list of named sections (pico3 system sections, stored in ``pi.system``
entries so every request can be rebuilt from the session). In order:

``system``
    The base prompt: :data:`DEFAULT_SYSTEM_PROMPT`, or the text of ``SYSTEM.md``, which
    **replaces** it (and ``--system-prompt``'s, which replaces both), followed by the working
    folder. ``SYSTEM.md`` is looked for in a trusted
    project's ``.coding-agent/`` first, then its ``.pi/`` (pi's), then in
    ``$XDG_CONFIG_HOME/coding-agent/`` and last in pi's ``~/.pi/agent/`` (as pi does: the
    project's wins; of two folders in one place, ours).
``append-system``
    ``APPEND_SYSTEM.md``, **appended** after the base prompt (same places, same precedence),
    then ``--append-system-prompt``'s text (both, in that order).
``context-files``
    ``AGENTS.md`` / ``CLAUDE.md`` of the folder and its ancestors
    (:mod:`coding_agent.context.context_files`).
``skills``
    The names, descriptions and files of the available skills (:mod:`coding_agent.context.skills`).

:func:`build_sections` reads every file afresh; the worker calls it before each generation
(an edited ``SYSTEM.md`` applies from the next turn), and the TUI's ``/context`` uses it to
preview the prompt before the first request. :func:`estimate_tokens` is the size shown there.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from coding_agent.context.context_files import (
    SECTION_KEY as CONTEXT_FILES_KEY,
)
from coding_agent.context.context_files import (
    SkippedFile,
    render_context_files,
    scan_context_files,
)
from coding_agent.context.resources import Places, read_text
from coding_agent.context.skills import (
    SKILLS_SECTION_KEY,
    SkillSet,
    discover_skills,
    render_skills_section,
    skills_section_value,
)

if TYPE_CHECKING:  # start-up time: pico3.turn (the harness's turn machinery) loads where a
    # session's prompt is built, not in the TUI, whose commands read these modules too
    from pico3 import SystemSection

__all__ = [
    "APPEND_SYSTEM_FILE",
    "APPEND_SYSTEM_KEY",
    "DEFAULT_SYSTEM_PROMPT",
    "SECTION_ORDER",
    "SYSTEM_FILE",
    "SYSTEM_KEY",
    "BuiltSections",
    "build_sections",
    "estimate_tokens",
    "find_system_file",
    "prompt_sections",
    "render_append_system",
    "render_system",
]

SYSTEM_FILE = "SYSTEM.md"
APPEND_SYSTEM_FILE = "APPEND_SYSTEM.md"
SYSTEM_KEY = "system"
APPEND_SYSTEM_KEY = "append-system"
SECTION_ORDER = (SYSTEM_KEY, APPEND_SYSTEM_KEY, CONTEXT_FILES_KEY, SKILLS_SECTION_KEY)

DEFAULT_SYSTEM_PROMPT = """\
You are an expert coding assistant working in the user's project through a terminal coding \
agent. You help by reading files, running commands, editing code and writing new files with \
the tools you are given.

Guidelines:
- Read a file before you edit it; use edit for precise changes and write only for new files \
or complete rewrites.
- Prefer grep, find and ls over bash for exploring the project; use bash for builds, tests, \
git and everything else.
- Keep changes focused on what was asked; do not reformat or rewrite unrelated code.
- When a command or tool fails, read the error and fix the cause instead of repeating it.
- Be concise in your answers; show file paths clearly when you mention them."""


def estimate_tokens(text: str) -> int:
    """A provider-independent token estimate of ``text``: characters / 4, rounded up."""
    return math.ceil(len(text) / 4)


def find_system_file(places: Places, name: str) -> Path | None:
    """``name`` (``SYSTEM.md`` or ``APPEND_SYSTEM.md``) from the trusted project's
    ``.coding-agent/`` or ``.pi/``, else from the user's config folder or pi's
    ``~/.pi/agent/``; ``None`` when none has one."""
    candidates = [
        *places.project_dirs(f".coding-agent/{name}", f".pi/{name}"),
        places.config / name,
        places.pi_user / name,
    ]
    return next((path for path in candidates if path.is_file()), None)


def render_system(value: Any) -> str:
    """The ``system`` section: the base prompt and the working folder."""
    data = value if isinstance(value, dict) else {}
    text = str(data.get("text", DEFAULT_SYSTEM_PROMPT)).strip()
    cwd = data.get("cwd")
    return f"{text}\n\nCurrent working directory: {cwd}" if cwd else text


def render_append_system(value: Any) -> str:
    """The ``append-system`` section: ``APPEND_SYSTEM.md``'s text."""
    data = value if isinstance(value, dict) else {}
    return str(data.get("text", "")).strip()


def prompt_sections() -> dict[str, SystemSection]:
    """Every section of :data:`SECTION_ORDER` (key and renderer)."""
    from pico3 import define_section  # lazy: see the TYPE_CHECKING import above

    return {
        SYSTEM_KEY: define_section(SYSTEM_KEY, render_system),
        APPEND_SYSTEM_KEY: define_section(APPEND_SYSTEM_KEY, render_append_system),
        CONTEXT_FILES_KEY: define_section(CONTEXT_FILES_KEY, render_context_files),
        SKILLS_SECTION_KEY: define_section(SKILLS_SECTION_KEY, render_skills_section),
    }


class BuiltSections(msgspec.Struct, frozen=True):
    """The section values for one generation (``None``: the section is left out), where each
    came from (for ``/context``), the warnings met on the way, and the context files not read
    (another user could have written them)."""

    values: dict[str, Any]
    sources: dict[str, str]
    warnings: tuple[str, ...]
    skills: SkillSet
    skipped: tuple[SkippedFile, ...] = ()


def _file_text(path: Path, warnings: list[str]) -> str | None:
    try:
        return read_text(path)
    except OSError as error:
        warnings.append(f"{path}: cannot read it: {error.strerror or error}")
        return None


def build_sections(
    cwd: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    touched: Iterable[str] = (),
    *,
    system: str | None = None,
    append: str | None = None,
) -> BuiltSections:
    """Read every source of the system prompt for working folder ``cwd`` afresh (``touched``:
    the sub-folders the agent worked in, whose own context files join). ``system`` and
    ``append`` are this run's ``--system-prompt`` and ``--append-system-prompt`` texts
    (:mod:`coding_agent.settings.run_options`): ``system`` replaces the base prompt and
    ``SYSTEM.md`` (the flag wins); ``append`` comes after ``APPEND_SYSTEM.md``'s text (both)."""
    places = Places.find(cwd, env)
    warnings: list[str] = [places.problem] if places.problem else []
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    folder = str(Path(cwd).expanduser().resolve())

    system_file = find_system_file(places, SYSTEM_FILE) if system is None else None
    text = _file_text(system_file, warnings) if system_file is not None else None
    if system is not None:
        values[SYSTEM_KEY] = {"text": system, "path": "--system-prompt", "cwd": folder}
        sources[SYSTEM_KEY] = "--system-prompt"
    elif system_file is not None and text is not None and text.strip():
        values[SYSTEM_KEY] = {"text": text, "path": str(system_file), "cwd": folder}
        sources[SYSTEM_KEY] = str(system_file)
    else:
        values[SYSTEM_KEY] = {"text": DEFAULT_SYSTEM_PROMPT, "cwd": folder}
        sources[SYSTEM_KEY] = "built-in default"

    append_file = find_system_file(places, APPEND_SYSTEM_FILE)
    extra = _file_text(append_file, warnings) if append_file is not None else None
    appended = [
        (text, where)
        for text, where in ((extra, str(append_file)), (append, "--append-system-prompt"))
        if text is not None and text.strip()
    ]
    if appended:
        joined = "\n\n".join(text.strip() for text, _where in appended)
        where = ", ".join(where for _text, where in appended)
        values[APPEND_SYSTEM_KEY] = {"text": joined, "path": where}
        sources[APPEND_SYSTEM_KEY] = where
    else:
        values[APPEND_SYSTEM_KEY] = None

    scanned = scan_context_files(cwd, env=env, touched=touched)
    files = scanned.files
    warnings.extend(f"{skip.path}: not read: {skip.reason}" for skip in scanned.skipped)
    values[CONTEXT_FILES_KEY] = {"files": [f.to_json() for f in files]} if files else None
    if files:
        sources[CONTEXT_FILES_KEY] = ", ".join(f.path for f in files)

    skills = discover_skills(cwd, places=places)
    warnings.extend(skills.warnings)
    values[SKILLS_SECTION_KEY] = skills_section_value(skills)
    if values[SKILLS_SECTION_KEY] is not None:
        listed = [s for s in skills.skills if s.model_invocable]
        sources[SKILLS_SECTION_KEY] = f"{len(listed)} skill{'s' if len(listed) != 1 else ''}"
    return BuiltSections(values, sources, tuple(warnings), skills, tuple(scanned.skipped))
