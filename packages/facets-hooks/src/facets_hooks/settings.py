"""Reading hooks from the files Claude Code reads them from, and from our own.

The files, in the order their hooks run:

1. the user's Claude Code settings, ``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR/settings.json``
   when that variable is set, as Claude Code does);
2. our own, ``$XDG_CONFIG_HOME/coding-agent/hooks.json`` (default ``~/.config``), in exactly the
   same shape (``{"hooks": {...}}``), so a user moves a block between the two unchanged;
3. in a *trusted* project only, ``.claude/settings.json`` and ``.claude/settings.local.json``.
   An untrusted project's files are not read for their hooks; :attr:`LoadedHooks.waiting` names
   those that exist;
4. the ``hooks/hooks.json`` (same shape) of each Claude Code plugin the app loads (the
   ``claude_plugins`` harness service: the plugins enabled in the user's ``enabledPlugins``),
   its commands run with ``CLAUDE_PLUGIN_ROOT`` set to the plugin's folder
   (:func:`plugin_hooks`).

A settings object the user gave for this run (Claude Code's ``--settings``, the harness service
``claude_run_settings``: :data:`~.contract.RUN_SETTINGS_SERVICE`) is read after 3., as a file is,
named by its ``source``.

The shape is Claude Code's::

    {"hooks": {"PreToolUse": [{"matcher": "Edit|Write",
                               "hooks": [{"type": "command", "command": "...", "timeout": 30}]}]}}

Nothing is silently dropped and nothing is fatal: a file that is not JSON, or a part of one that
is not in this shape (an unknown event, a matcher that is not a regular expression, a hook whose
``type`` is not ``"command"``, ``"http"`` (:mod:`.http_hooks`), ``"mcp_tool"``
(:mod:`.mcp_hooks`: a ``server`` and a ``tool`` needed, ``input`` an object; every event but
``SessionEnd``), ``"prompt"`` (:mod:`.prompt_hooks`) or ``"agent"`` (:mod:`.hook_agents`;
these two on :data:`PROMPT_EVENTS` only), a missing ``command``, a bad
``timeout`` or ``model``), becomes one line of
:attr:`LoadedHooks.problems` naming the file and the problem; the rest of the file loads. So does
what this agent does not honour: a Claude Code event it does not run (with why), a matcher of an
event it runs for every occurrence, an entry field such as ``if`` or ``async`` (with what
happens instead: :data:`ENTRY_FIELDS`).

An entry's ``onFailure`` (:mod:`.on_failure`) is read into :attr:`HookSpec.on_failure`: a value
other than ``"continue"`` and ``"block"`` is a problem and reads as ``"block"`` (fail closed).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .contract import EVENTS, NOT_RUN_EVENTS
from .http_hooks import http_command
from .mcp_hooks import McpToolCall
from .on_failure import BLOCK, CONTINUE, ON_FAILURE_TYPES

__all__ = [
    "DEFAULT_TIMEOUT",
    "HookSpec",
    "LoadedHooks",
    "load_hooks",
    "parse_settings",
    "plugin_hooks",
    "settings_files",
]

DEFAULT_TIMEOUT = 60.0
"""Seconds a hook command may run when its entry sets no ``timeout`` (Claude Code's default)."""

PROMPT_TIMEOUT = 30.0
"""Seconds a prompt hook's model may take when its entry sets no ``timeout`` (Claude Code's)."""

AGENT_TIMEOUT = 60.0
"""Seconds an agent hook's subagent may take when its entry sets no ``timeout`` (Claude
Code's)."""

PROMPT_EVENTS = frozenset(
    {
        "PreToolUse",
        "PermissionRequest",
        "PostToolUse",
        "PostToolUseFailure",
        "UserPromptSubmit",
        "Stop",
        "SubagentStop",
    }
)
"""The events a ``"type": "prompt"`` hook runs for (:mod:`.prompt_hooks`), as Claude Code."""

MATCHED_EVENTS = frozenset(
    {
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "PermissionRequest",
        "PreCompact",
        "SessionStart",
    }
)
"""The events with a ``matcher``, as Claude Code: a tool-name pattern (``PreToolUse``,
``PostToolUse``, ``PostToolUseFailure``, ``PermissionRequest``), the trigger (``PreCompact``: ``manual``/``auto``) or
the source (``SessionStart``: ``startup``/``resume``). Claude Code's ``Notification``,
``SubagentStop`` and ``SessionEnd`` matchers (notification type, agent type, reason) are not
honoured: such a hook runs for every one, and a problem says so."""

OCCURRENCES: dict[str, tuple[str, ...]] = {
    "SessionStart": ("startup", "resume"),
    "PreCompact": ("manual", "auto"),
}
"""What a ``SessionStart`` (source) or ``PreCompact`` (trigger) matcher can meet here. Claude
Code's ``clear`` and ``compact`` sources do not happen (no ``SessionStart`` after ``/new`` or a
compaction): a matcher taking none of these is a problem, since its hooks would never run."""

ENTRY_FIELDS: dict[str, str] = {
    "if": "the hook runs for every call its matcher takes (its own checks decide)",
    "async": "it runs before the call goes on, as a synchronous hook, and its exit 2 blocks",
    "asyncRewake": "it runs before the call goes on, as a synchronous hook",
    "once": "it runs every time its event fires, not once a session",
    "shell": "it runs with $SHELL when that is a POSIX shell, else /bin/sh",
}
"""Claude Code hook-entry fields this agent does not honour, each with what happens instead:
each one set is one problem line (the hook still loads). ``statusMessage`` is accepted and not
shown (the worker shows no hook progress)."""


@dataclass(frozen=True)
class HookSpec:
    """One hook command: its event, matcher, command, timeout (seconds) and source file."""

    event: str
    matcher: str
    command: str
    timeout: float
    source: str
    position: int
    """Its place among the file's hooks (two identical entries stay two hooks)."""
    pattern: re.Pattern[str] | None = field(default=None, compare=False)
    shown: str = ""
    """How ``/hooks`` and the log name it when that is not :attr:`command` (an HTTP hook:
    ``POST <url>``, its command being the program that posts)."""
    env: tuple[tuple[str, str], ...] = ()
    """Variables its command gets on top of the session's: a plugin's hook gets
    ``CLAUDE_PLUGIN_ROOT`` (its folder), which its command names as ``${CLAUDE_PLUGIN_ROOT}``."""
    kind: str = "command"
    """``"command"`` (an HTTP hook too: its command is the program that posts), ``"mcp_tool"``
    (:mod:`.mcp_hooks`: :attr:`command` is the encoded call), ``"prompt"``
    (:mod:`.prompt_hooks`: :attr:`command` is the prompt a model reads) or ``"agent"``
    (:mod:`.hook_agents`: :attr:`command` is the prompt a read-only subagent gets)."""
    model: str | None = None
    """A prompt or agent hook's ``model`` as written (``haiku``, ``provider/id``, ...):
    :func:`.prompt_hooks.hook_model` resolves it; ``None``: the session's model."""
    on_failure: str = CONTINUE
    """``"continue"`` (a failure is a non-blocking error) or ``"block"`` (it blocks as exit 2
    does): the entry's ``onFailure`` (:mod:`.on_failure`)."""

    @property
    def label(self) -> str:
        """What the user wrote: the command, or ``POST <url>`` for an HTTP hook."""
        return self.shown or self.command

    def environ(self, base: dict[str, str]) -> dict[str, str]:
        """The environment its command runs with: ``base`` (the session's), plus :attr:`env`."""
        return {**base, **dict(self.env)} if self.env else base

    @property
    def key(self) -> str:
        """A stable name for this hook (memo keys): same file, event, matcher, command, place."""
        text = "\0".join((self.source, self.event, self.matcher, self.command, str(self.position)))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def matches(self, names: tuple[str, ...]) -> bool:
        """Whether the matcher takes a tool known by any of ``names`` (Claude Code's names).
        ``""`` and ``"*"`` take every tool; otherwise the matcher is a regular expression that
        must match a whole name (``Edit|Write``, ``mcp__github__.*``)."""
        if self.pattern is None:
            return True
        return any(self.pattern.fullmatch(name) for name in names)


@dataclass(frozen=True)
class LoadedHooks:
    hooks: tuple[HookSpec, ...] = ()
    problems: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()

    def for_event(self, event: str) -> list[HookSpec]:
        return [hook for hook in self.hooks if hook.event == event]


def _claude_dir(env: Mapping[str, str]) -> Path:
    configured = env.get("CLAUDE_CONFIG_DIR")
    if configured:
        return Path(configured).expanduser()
    return Path(env.get("HOME") or os.path.expanduser("~")) / ".claude"


def _our_file(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".config"
    )
    return Path(base) / "coding-agent" / "hooks.json"


def settings_files(
    env: Mapping[str, str], project: str | os.PathLike[str] | None, trusted: bool
) -> tuple[list[Path], list[Path]]:
    """``(files to read, untrusted project files left unread)``, each existing file once."""
    user = [_claude_dir(env) / "settings.json", _our_file(env)]
    project_files: list[Path] = []
    if project is not None:
        folder = Path(project) / ".claude"
        project_files = [folder / "settings.json", folder / "settings.local.json"]
    seen: set[str] = set()
    read: list[Path] = []
    waiting: list[Path] = []
    for path, is_project in [*((p, False) for p in user), *((p, True) for p in project_files)]:
        if not path.is_file():
            continue
        real = os.path.realpath(path)
        if real in seen:  # a project at home: its .claude/settings.json is the user's
            continue
        seen.add(real)
        (waiting if is_project and not trusted else read).append(path)
    return read, waiting


def _matcher(value: object, where: str, problems: list[str]) -> tuple[str, re.Pattern[str] | None]:
    if value is None:
        return "", None
    if not isinstance(value, str):
        problems.append(f"{where}: matcher must be a string, got {json.dumps(value)}; skipped")
        raise ValueError
    if value in ("", "*"):
        return value, None
    try:
        return value, re.compile(value)
    except re.error as exc:
        problems.append(f"{where}: matcher {value!r} is not a regular expression ({exc}); skipped")
        raise ValueError from None


def _timeout(value: object, where: str, problems: list[str], kind: str = "command") -> float:
    default = {"prompt": PROMPT_TIMEOUT, "agent": AGENT_TIMEOUT}.get(kind, DEFAULT_TIMEOUT)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        problems.append(
            f"{where}: timeout must be a positive number of seconds, got {json.dumps(value)}; "
            f"it runs with the default {default:g} s"
        )
        return default
    return float(value)


def parse_settings(data: object, source: str) -> tuple[list[HookSpec], list[str]]:
    """The hooks of one parsed settings file, and its problems (each ``<source>: ...``)."""
    problems: list[str] = []
    hooks: list[HookSpec] = []
    if not isinstance(data, dict):
        return [], [f"{source}: expected a JSON object, got {type(data).__name__}; not loaded"]
    table: Any = data.get("hooks")  # pyright: ignore[reportUnknownMemberType]
    if table is None:
        return [], []
    if not isinstance(table, dict):
        return [], [f'{source}: "hooks" must be an object of events; not loaded']
    position = 0
    for event, groups in table.items():  # pyright: ignore[reportUnknownVariableType]
        where = f"{source}: hooks.{event}"
        if event in NOT_RUN_EVENTS:
            problems.append(f"{where}: not run by this agent ({NOT_RUN_EVENTS[event]}); skipped")
            continue
        if event not in EVENTS:
            problems.append(f"{where}: unknown event (known: {', '.join(EVENTS)}); skipped")
            continue
        if not isinstance(groups, list):
            problems.append(f"{where}: must be a list of matcher groups; skipped")
            continue
        for g, group in enumerate(groups):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
            at = f"{where}[{g}]"
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):  # pyright: ignore[reportUnknownMemberType]
                problems.append(f'{at}: expected {{"matcher": ..., "hooks": [...]}}; skipped')
                continue
            try:
                matcher, pattern = _matcher(group.get("matcher"), at, problems)  # pyright: ignore[reportUnknownMemberType]
            except ValueError:
                continue
            seen = OCCURRENCES.get(event, ())
            if pattern is not None and seen and not any(pattern.fullmatch(v) for v in seen):
                problems.append(
                    f"{at}: matcher {matcher!r} takes none of {', '.join(seen)}, the only "
                    f"{event} {'sources' if event == 'SessionStart' else 'triggers'} here "
                    "(no SessionStart after /new or a compaction); its hooks never run"
                )
            if event not in MATCHED_EVENTS:
                if matcher not in ("", "*") and event in (
                    "Notification",
                    "SubagentStop",
                    "SessionEnd",
                ):
                    problems.append(
                        f"{at}: matcher {matcher!r} is not honoured for {event} here; its hooks "
                        f"run for every {event}"
                    )
                pattern = None  # the other events have no matcher
            for h, hook in enumerate(group["hooks"]):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
                here = f"{at}.hooks[{h}]"
                if not isinstance(hook, dict):
                    problems.append(f"{here}: expected an object; skipped")
                    continue
                kind = hook.get("type", "command")  # pyright: ignore[reportUnknownMemberType]
                on_failure = _on_failure(hook, kind, here, problems)  # pyright: ignore[reportUnknownArgumentType]
                if kind not in ("command", "http", "mcp_tool", "prompt", "agent"):
                    problems.append(
                        f'{here}: type {json.dumps(kind)} is not supported (only "command", '
                        '"http", "mcp_tool", "prompt" and "agent"); skipped'
                    )
                    continue
                shown = ""
                if kind == "mcp_tool":
                    posted = _mcp_tool(hook, event, here, problems)  # pyright: ignore[reportUnknownArgumentType]
                    if posted is None:
                        continue
                    command, shown = posted
                elif kind in ("prompt", "agent"):
                    posted = _prompt(hook, event, here, problems)  # pyright: ignore[reportUnknownArgumentType]
                    if posted is None:
                        continue
                    command, shown = posted
                elif kind == "http":
                    posted = _http(hook, here, problems)  # pyright: ignore[reportUnknownArgumentType]
                    if posted is None:
                        continue
                    command, shown = posted
                else:
                    command = hook.get("command")  # pyright: ignore[reportUnknownMemberType]
                if not isinstance(command, str) or not command.strip():
                    problems.append(f'{here}: "command" must be a non-empty string; skipped')
                    continue
                timeout = _timeout(hook.get("timeout"), here, problems, kind)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
                problems += [
                    f"{here}: {key!r} is not supported here: {instead}"
                    for key, instead in ENTRY_FIELDS.items()
                    if hook.get(key) not in (None, False)  # pyright: ignore[reportUnknownMemberType]
                ]
                spec = HookSpec(event, matcher, command, timeout, source, position, pattern, shown)  # pyright: ignore[reportUnknownArgumentType]
                spec = replace(spec, on_failure=on_failure)
                if kind == "mcp_tool":
                    spec = replace(spec, kind=kind)
                if kind in ("prompt", "agent"):
                    model = _model(hook.get("model"), here, problems)  # pyright: ignore[reportUnknownMemberType]
                    spec = replace(spec, kind=kind, model=model)
                hooks.append(spec)
                position += 1
    return hooks, problems


def _on_failure(hook: dict[str, Any], kind: object, here: str, problems: list[str]) -> str:
    """The entry's ``onFailure`` (:mod:`.on_failure`): ``"continue"`` unless it says
    ``"block"``; any other value is read as ``"block"`` (fail closed), with a problem."""
    value = hook.get("onFailure")
    if value is None or value == CONTINUE:
        return CONTINUE
    if kind not in ON_FAILURE_TYPES and kind in ("prompt", "agent"):  # as Claude Code
        problems.append(
            f'{here}: "onFailure" applies to command, http and mcp_tool hooks only (as in '
            f"Claude Code); a {kind} hook's error already gives no verdict, never a pass: "
            "ignored"
        )
        return CONTINUE
    if value == BLOCK:
        return BLOCK
    problems.append(
        f'{here}: onFailure must be "continue" or "block", got {json.dumps(value)}; it is read '
        'as "block" (fail closed: a failure of this hook blocks what it guards). Write "block" '
        'or "continue" to say which you mean'
    )
    return BLOCK


def _prompt(
    hook: dict[str, Any], event: str, here: str, problems: list[str]
) -> tuple[str, str] | None:
    """A prompt hook's ``(prompt, shown)`` (:mod:`.prompt_hooks`), or ``None`` with a
    problem."""
    kind = str(hook.get("type"))
    if event not in PROMPT_EVENTS:
        problems.append(
            f"{here}: type {json.dumps(kind)} is not supported for {event} (only for "
            f"{', '.join(sorted(PROMPT_EVENTS))}, as in Claude Code); skipped"
        )
        return None
    prompt = hook.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        problems.append(f'{here}: a {kind} hook needs "prompt" (a non-empty string); skipped')
        return None
    first = prompt.strip().splitlines()[0]
    more = len(first) > 60 or "\n" in prompt.strip()
    return prompt, f"{kind}: {first[:60]}{'…' if more else ''}"


def _mcp_tool(
    hook: dict[str, Any], event: str, here: str, problems: list[str]
) -> tuple[str, str] | None:
    """An ``mcp_tool`` hook's ``(command, shown)`` (:mod:`.mcp_hooks`: the command is the
    encoded call), or ``None`` with a problem."""
    if event == "SessionEnd":
        problems.append(
            f"{here}: an mcp_tool hook cannot run at SessionEnd here (the worker is leaving "
            'and its MCP servers with it); use a "command" hook; skipped'
        )
        return None
    server, tool, template = hook.get("server"), hook.get("tool"), hook.get("input", {})
    if not isinstance(server, str) or not server.strip():
        problems.append(
            f'{here}: an mcp_tool hook needs "server" (an MCP server name, as /mcp lists it); '
            "skipped"
        )
        return None
    if not isinstance(tool, str) or not tool.strip():
        problems.append(
            f'{here}: an mcp_tool hook needs "tool" (the server\'s tool name, without '
            "mcp__<server>__); skipped"
        )
        return None
    if not isinstance(template, dict):
        problems.append(f'{here}: an mcp_tool hook\'s "input" must be an object; skipped')
        return None
    call = McpToolCall(server, tool, template)  # pyright: ignore[reportUnknownArgumentType]
    return call.encode(), f"mcp_tool {server} {tool}"


def _model(value: object, here: str, problems: list[str]) -> str | None:
    """A prompt or agent hook's ``model`` (``None``: the session's), a bad one a problem."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        problems.append(
            f"{here}: model must be a model name (haiku, sonnet, opus, inherit or "
            f"provider/id), got {json.dumps(value)}; the session's model answers"
        )
        return None
    return value.strip()


def _http(hook: dict[str, Any], here: str, problems: list[str]) -> tuple[str, str] | None:
    """An HTTP hook's ``(command, shown)`` (:mod:`.http_hooks`), or ``None`` with a problem."""
    url = hook.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        problems.append(f'{here}: an http hook needs "url" (http:// or https://); skipped')
        return None
    headers: Any = hook.get("headers", {})
    allowed: Any = hook.get("allowedEnvVars", [])
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str)
        for k, v in headers.items()  # pyright: ignore[reportUnknownVariableType]
    ):
        problems.append(f'{here}: "headers" must be an object of strings; skipped')
        return None
    if not isinstance(allowed, list) or not all(isinstance(n, str) for n in allowed):  # pyright: ignore[reportUnknownVariableType]
        problems.append(f'{here}: "allowedEnvVars" must be a list of names; skipped')
        return None
    return http_command(url, headers, allowed), f"POST {url}"  # pyright: ignore[reportUnknownArgumentType]


def load_hooks(
    *,
    env: Mapping[str, str],
    project: str | os.PathLike[str] | None = None,
    project_trusted: bool = False,
    plugins: object = None,
    given: object = None,
) -> LoadedHooks:
    """Every hook of the files :func:`settings_files` names, in that order, then those of the
    Claude Code ``plugins`` the app loads (the ``claude_plugins`` harness service:
    :func:`plugin_hooks`); never raises for a file's content (its problems are in the
    result). ``given``: this run's ``--settings`` (``{"source", "settings"}``), read after the
    files."""
    read, waiting = settings_files(env, project, project_trusted)
    hooks: list[HookSpec] = []
    problems: list[str] = []
    for path in read:
        data = _read(path, problems)
        if data is not None:
            found, trouble = parse_settings(data, str(path))
            hooks.extend(found)
            problems.extend(trouble)
    if isinstance(given, dict) and isinstance(given.get("source"), str):  # pyright: ignore[reportUnknownMemberType]
        found, trouble = parse_settings(given.get("settings"), str(given["source"]))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        hooks.extend(found)
        problems.extend(trouble)
    hooks.extend(plugin_hooks(plugins, problems))
    held = [str(path) for path in waiting if _has_hooks(path)]
    return LoadedHooks(tuple(hooks), tuple(problems), tuple(held))


def _read(path: Path, problems: list[str]) -> object:
    """``path``'s JSON, or ``None`` with a problem naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        problems.append(
            f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}); its hooks are not loaded"
        )
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{path}: cannot be read ({exc}); its hooks are not loaded")
    return None


def plugin_hooks(plugins: object, problems: list[str]) -> list[HookSpec]:
    """The hooks of the ``claude_plugins`` service's plugins (``[{"root": folder, "hooks":
    [file path or inline {"hooks": {...}} object, ...]}, ...]``; the app decides which plugins,
    from the user's ``enabledPlugins``): each file read as a settings file is, each command
    run with ``CLAUDE_PLUGIN_ROOT`` set to the plugin's folder."""
    found: list[HookSpec] = []
    for plugin in plugins if isinstance(plugins, list) else []:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(plugin, dict) or not isinstance(plugin.get("root"), str):  # pyright: ignore[reportUnknownMemberType]
            continue
        root: str = plugin["root"]
        items: Any = plugin.get("hooks") or []  # pyright: ignore[reportUnknownMemberType]
        for item in items if isinstance(items, list) else []:  # pyright: ignore[reportUnknownVariableType]
            if isinstance(item, str):
                data, source = _read(Path(item), problems), item
            else:
                data, source = item, os.path.join(root, ".claude-plugin", "plugin.json")  # pyright: ignore[reportUnknownVariableType]
            if data is None:
                continue
            specs, trouble = parse_settings(data, source)
            problems.extend(trouble)
            env = (("CLAUDE_PLUGIN_ROOT", root),)
            found += [replace(spec, env=env) for spec in specs]
    return found


def _has_hooks(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return True  # unread, so unknown: say it waits
    return isinstance(data, dict) and bool(data.get("hooks"))  # pyright: ignore[reportUnknownMemberType]
