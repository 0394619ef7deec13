"""The frontmatter fields of an agent definition beyond name, description, tools and model:
each read as Claude Code writes it, a value that cannot be honoured left out with a warning
naming the file and line and saying what happens instead (:mod:`.definitions` calls them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

__all__ = [
    "AGENT_HOOK_EVENTS",
    "EFFORT_LEVELS",
    "LOOSER_MODES",
    "PERMISSION_MODES",
    "effort",
    "hooks",
    "max_turns",
    "mcp_servers",
    "memory",
    "names",
    "permission_mode",
    "skills",
]

PERMISSION_MODES: Mapping[str, str | None] = {
    "plan": "plan",
    "ask": "ask",
    "default": None,
}
"""``permissionMode`` values honoured, and the mode each gives the subagent: ``plan`` (Claude
Code's and ours) makes it read-only, our ``ask`` makes what needs approval ask; Claude Code's
``default`` is the session's mode. Looser values (:data:`LOOSER_MODES`) are not honoured: a
subagent never gets more authority than the session."""

LOOSER_MODES = frozenset({"acceptEdits", "accept-edits", "bypassPermissions", "auto", "sandbox"})
"""``permissionMode`` values that would let the subagent do what the session might not: the
subagent runs in the session's mode, with one warning."""

EFFORT_LEVELS: Mapping[str, str] = {
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "xhigh",
    "max": "xhigh",
    "off": "off",
    "minimal": "minimal",
}
"""``effort`` (Claude Code's ``low``, ``medium``, ``high``, ``xhigh``, ``max``; our ``off`` and
``minimal`` too) → the thinking level the subagent's conversation runs at (``/thinking``'s
levels). ``max`` is our highest, ``xhigh``. No ``effort``: the caller's level, as Claude Code's
subagents inherit the session's effort."""


def permission_mode(
    fields: Mapping[str, Any], lines: Mapping[str, int], source: str, warnings: list[str]
) -> str | None:
    """The mode ``permissionMode`` gives the subagent (:data:`PERMISSION_MODES`); a looser or
    unknown value gives ``None`` (the session's mode) and a warning in ``warnings``."""
    value = fields.get("permissionMode")
    if value is None:
        return None
    line = lines.get("permissionMode", 1)
    written = str(value).strip()
    if written in PERMISSION_MODES:
        return PERMISSION_MODES[written]
    if written in LOOSER_MODES:
        warnings.append(
            f"{source}:{line}: permissionMode: {written} is not honoured: a subagent never gets "
            "more authority than the session; it runs in the session's mode"
        )
    elif written == "dontAsk":
        warnings.append(
            f"{source}:{line}: permissionMode: dontAsk is not honoured yet: the subagent runs in "
            "the session's mode (a call that needs approval asks rather than being refused)"
        )
    else:
        warnings.append(
            f"{source}:{line}: permissionMode: {written} is not a permission mode (plan, "
            "default, acceptEdits, bypassPermissions, dontAsk); the subagent runs in the "
            "session's mode"
        )
    return None


def max_turns(
    fields: Mapping[str, Any], lines: Mapping[str, int], source: str, warnings: list[str]
) -> int | None:
    """``maxTurns`` as a whole number of turns; another value gives ``None`` (no limit) and a
    warning in ``warnings``."""
    value = fields.get("maxTurns")
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if type(value) is not int or value < 1:
        warnings.append(
            f"{source}:{lines.get('maxTurns', 1)}: maxTurns must be a whole number of turns (1 "
            f"or more), got {value!r}; the subagent runs without a limit"
        )
        return None
    return value


def skills(
    fields: Mapping[str, Any], lines: Mapping[str, int], source: str, warnings: list[str]
) -> tuple[str, ...]:
    """``skills`` as names (a YAML list or a comma-separated string, as published agents write
    it; a plugin's skill as ``plugin:skill``); another value gives none and a warning."""
    value = fields.get("skills")
    if value is None:
        return ()
    items: list[Any] = cast(list[Any], value) if isinstance(value, list) else []
    if not isinstance(value, str) and not (
        isinstance(value, list) and all(isinstance(item, str) for item in items)
    ):
        warnings.append(
            f"{source}:{lines.get('skills', 1)}: skills must be a list of skill names, got "
            f"{value!r}; the subagent runs without preloaded skills"
        )
        return ()
    return tuple(dict.fromkeys(names(value) or ()))


def effort(
    fields: Mapping[str, Any], lines: Mapping[str, int], source: str, warnings: list[str]
) -> str | None:
    """``effort`` as our thinking level (:data:`EFFORT_LEVELS`); an unknown value gives
    ``None`` (the caller's level) and a warning."""
    value = fields.get("effort")
    if value is None:
        return None
    written = str(value).strip()
    level = EFFORT_LEVELS.get(written.lower())
    if level is None:
        warnings.append(
            f"{source}:{lines.get('effort', 1)}: effort: {written!r} is not an effort level "
            "(low, medium, high, xhigh, max); the subagent runs at the caller's thinking level"
        )
    return level


AGENT_HOOK_EVENTS: Mapping[str, str] = {
    "PreToolUse": "PreToolUse",
    "PermissionRequest": "PermissionRequest",
    "PostToolUse": "PostToolUse",
    "PostToolUseFailure": "PostToolUseFailure",
    "Notification": "Notification",
    "Stop": "SubagentStop",
    "SubagentStop": "SubagentStop",
}
"""The events an agent's own ``hooks`` run on → the event they run as: its tool calls (before,
when one would ask for approval, after), its calls that wait for the user (``Notification``),
and its end (``Stop`` in a subagent's frontmatter is its ``SubagentStop``, as Claude Code
converts it). Claude Code takes every event in an agent file; the others are left out with a
warning: ``UserPromptSubmit`` (nobody types to a subagent), ``SessionStart``, ``SessionEnd`` and
``SubagentStart`` (the session's, not a subagent's), ``PreCompact`` (not run for an agent's own
hooks here)."""


def hooks(
    fields: Mapping[str, Any], lines: Mapping[str, int], source: str, warnings: list[str]
) -> dict[str, Any] | None:
    """``hooks`` in the settings files' shape, with only :data:`AGENT_HOOK_EVENTS` (renamed);
    each other event, or a value of another shape, is left out with a warning. The entries
    themselves are checked by the hooks feature, which names what it skips."""
    value = fields.get("hooks")
    if value in (None, {}, ""):
        return None
    line = lines.get("hooks", 1)
    if not isinstance(value, dict):
        warnings.append(
            f"{source}:{line}: hooks must be an object {{event: [{{matcher, hooks: [...]}}]}} "
            f"as settings.json writes it, got {value!r}; no hook runs for this subagent"
        )
        return None
    kept: dict[str, Any] = {}
    for event, groups in cast(dict[Any, Any], value).items():
        as_event = AGENT_HOOK_EVENTS.get(str(event))
        if as_event is None:
            warnings.append(
                f"{source}:{line}: hooks.{event} is not run for a subagent's own hooks (only "
                f"{', '.join(AGENT_HOOK_EVENTS)}); put it in settings.json to run it for every "
                "conversation"
            )
            continue
        if not isinstance(groups, list):
            warnings.append(
                f"{source}:{line}: hooks.{event} must be a list of {{matcher, hooks: [...]}}; "
                "left out"
            )
            continue
        kept[as_event] = [*kept.get(as_event, []), *cast(list[Any], groups)]
    return kept or None


def mcp_servers(
    fields: Mapping[str, Any], lines: Mapping[str, int], source: str, warnings: list[str]
) -> tuple[Any, ...]:
    """``mcpServers`` as Claude Code takes it: a list whose items are a configured server's
    name or ``{name: entry}`` (an object of several names is split into one item each); an
    object ``{name: entry}`` is read as that list. Another item is left out with a warning."""
    value = fields.get("mcpServers")
    if value in (None, [], {}, ""):
        return ()
    line = lines.get("mcpServers", 1)
    items: list[Any] = (
        [{k: v} for k, v in cast(dict[str, Any], value).items()]
        if isinstance(value, dict)
        else cast(list[Any], value)
        if isinstance(value, list)
        else [value]
    )
    kept: list[Any] = []
    for item in items:
        if isinstance(item, str) and item.strip():
            kept.append(item.strip())
        elif isinstance(item, dict) and item:
            for name, entry in cast(dict[Any, Any], item).items():
                if isinstance(entry, dict):
                    kept.append({str(name): entry})
                else:
                    warnings.append(
                        f"{source}:{line}: mcpServers: server {str(name)!r} must be an object "
                        f'as .mcp.json writes one ({{"command": ..., "args": [...]}} or '
                        f'{{"type": "http", "url": ...}}), got {entry!r}; it is left out'
                    )
        else:
            warnings.append(
                f"{source}:{line}: mcpServers: {item!r} is neither a configured server's name "
                "nor {name: server}; it is left out"
            )
    return tuple(kept)


def names(value: Any) -> list[str] | None:
    """A comma-separated string's or a list's names (``None`` for another value)."""
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    if isinstance(value, list):
        return [str(t).strip() for t in value if str(t).strip()]  # pyright: ignore[reportUnknownVariableType,reportUnknownArgumentType]
    return None


def memory(
    fields: Mapping[str, Any], lines: Mapping[str, int], source: str, warnings: list[str]
) -> str | None:
    """``memory``: ``user``, ``project`` or ``local`` (:mod:`.memory`); another value gives
    ``None`` (no memory) and a warning."""
    value = fields.get("memory")
    if value in (None, "", False, "none"):
        return None
    written = str(value).strip()
    if written in ("user", "project", "local"):
        return written
    warnings.append(
        f"{source}:{lines.get('memory', 1)}: memory: {written!r} is not a memory scope (user, "
        "project, local); the subagent runs without memory"
    )
    return None
