"""What an untrusted project holds that waits for ``/trust``, named and counted.

A project's own setup is read only once the user trusts its folder (:mod:`coding_agent.settings.
trust`): its commands, skills, subagents, hooks, MCP servers, permission rules, system prompt
files, config and facet packages. Leaving them out silently is how a Claude Code user's project
"does not work" here; :func:`waiting_for_trust` lists what exists, so the TUI can say, in one
line at start, what ``/trust`` would load::

    This project's own setup waits for /trust: .claude/commands (57), .mcp.json (2 servers),
    .claude/agents (4)

Each :class:`Waiting` also says whether ``/trust`` loads it in the running session
(``live``: commands and skills are scanned again, the system prompt files are read before each
request) or whether it loads at the next start (subagents, hooks, MCP servers, permission rules,
config and facet packages are set up when the session worker starts).

Commands, skills and agents are counted with the walker that loads them
(:mod:`coding_agent.context.folders`), so the count is what ``/trust`` loads.

:func:`waiting_command` finds the one file behind a ``/NAME`` that waits: a user who types
``/test`` in an untrusted project holding ``.claude/commands/test.md`` is told that ``/test`` is
the project's command and loads after ``/trust`` (the TUI's unknown-command toast, ``-p``'s
error), not offered the closest built-in commands as if it were a typo.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import msgspec

from coding_agent.context.folders import SKILL_FILE, markdown_files, skill_files
from coding_agent.context.resources import Places
from coding_agent.settings.trust import LOCAL_CONFIG_DIR, local_facets_dirs

__all__ = ["Waiting", "describe_waiting", "waiting_command", "waiting_for_trust"]

COMMAND_PLACES = (".claude/commands", f"{LOCAL_CONFIG_DIR}/prompts", ".pi/prompts")
"""A project's command (prompt template) folders, read once it is trusted."""
SKILL_PLACES = (".claude/skills", f"{LOCAL_CONFIG_DIR}/skills", ".agents/skills", ".pi/skills")
"""A project's skill folders, read once it is trusted (``.pi/skills`` takes loose ``.md``
files as skills too, as pi does)."""


class Waiting(msgspec.Struct, frozen=True):
    """One kind of project setup that waits for trust: where it is, how many, of what."""

    place: str
    """The project-relative path (``.claude/commands``, ``.mcp.json``)."""
    count: int
    unit: str
    """What is counted (``command``, ``server``); empty when counting means nothing."""
    live: bool
    """Whether ``/trust`` loads it in the running session (else at the next start)."""

    def describe(self) -> str:
        """``.claude/commands (57)``, ``.mcp.json (2 servers)``, ``.coding-agent/SYSTEM.md``."""
        if not self.unit:
            return self.place
        if self.unit in ("command", "skill", "agent"):
            return f"{self.place} ({self.count})"
        return f"{self.place} ({self.count} {self.unit}{'' if self.count == 1 else 's'})"


def _markdown_files(folder: Path) -> int:
    return len(markdown_files(folder))


def _skills(folder: Path, *, root_files: bool = False) -> int:
    return sum(1 for _ in skill_files(folder, root_files=root_files))


def _json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _count_entries(value: object) -> int:
    return len(value) if isinstance(value, (dict, list)) else 0  # pyright: ignore[reportUnknownArgumentType]


def waiting_for_trust(root: str | os.PathLike[str]) -> list[Waiting]:
    """What the project at ``root`` holds that is read only once it is trusted, in the order a
    user cares about (module docstring). Unreadable or malformed files count as present with
    nothing in them; nothing here raises."""
    project = Path(root)
    found: list[Waiting] = []

    def add(place: str, count: int, unit: str, live: bool) -> None:
        if count:
            found.append(Waiting(place, count, unit, live))

    for place in COMMAND_PLACES:
        add(place, _markdown_files(project / place), "command", True)
    for place in SKILL_PLACES:
        add(place, _skills(project / place, root_files=place == ".pi/skills"), "skill", True)
    for place in (".claude/agents", f"{LOCAL_CONFIG_DIR}/agents"):
        add(place, _markdown_files(project / place), "agent", False)
    mcp = _json(project / ".mcp.json")
    if (project / ".mcp.json").is_file():
        servers = mcp.get("mcpServers") if isinstance(mcp, dict) else None
        add(".mcp.json", max(_count_entries(servers), 1), "server", False)
    for place in (".claude/settings.json", ".claude/settings.local.json"):
        settings = _json(project / place)
        if not isinstance(settings, dict):
            continue
        hooks = settings.get("hooks")
        add(
            f"{place} hooks",
            sum(_count_entries(v) for v in hooks.values()) if isinstance(hooks, dict) else 0,  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
            "hook",
            False,
        )
        permissions = settings.get("permissions")
        rules = (
            sum(
                _count_entries(permissions.get(kind))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
                for kind in ("allow", "ask", "deny")
            )
            if isinstance(permissions, dict)
            else 0
        )
        add(f"{place} permissions", rules, "rule", False)
    for name in ("SYSTEM.md", "APPEND_SYSTEM.md"):
        for folder in (LOCAL_CONFIG_DIR, ".pi"):
            if (project / folder / name).is_file():
                found.append(Waiting(f"{folder}/{name}", 1, "", True))
    for place in (f"{LOCAL_CONFIG_DIR}/config.toml", ".pi/settings.json"):
        if (project / place).is_file():
            found.append(Waiting(place, 1, "", False))
    add(f"{LOCAL_CONFIG_DIR}/facets", len(local_facets_dirs(project)), "package", False)
    return found


def describe_waiting(items: list[Waiting]) -> str:
    """``.claude/commands (57), .mcp.json (2 servers)``: the items, comma-separated."""
    return ", ".join(item.describe() for item in items)


def waiting_command(
    cwd: str | os.PathLike[str], name: str, env: Mapping[str, str] | None = None
) -> str | None:
    """The project-relative file (``.claude/commands/test.md``) that makes ``/name`` a command
    once the project of working folder ``cwd`` is trusted; ``None`` when the project is trusted
    already (its commands are loaded: ``/name`` is simply unknown) or holds no such command.

    ``name`` is what was typed after ``/``: a command (``test``, ``tools:scaffold`` for
    ``tools/scaffold.md``), a skill's folder name, or ``skill:NAME``. Only file and folder
    names are looked at: nothing of an untrusted project is read."""
    places = Places.find(cwd, env)
    if places.trusted:
        return None
    project = places.project
    skill = name.removeprefix("skill:")
    if skill == name:
        for place in COMMAND_PLACES:
            for path, command in markdown_files(project / place):
                if command == name:
                    return str(path.relative_to(project))
    for place in SKILL_PLACES:
        for path in skill_files(project / place, root_files=place == ".pi/skills"):
            named = path.parent.name if path.name == SKILL_FILE else path.stem
            if named == skill:
                return str(path.relative_to(project))
    return None
