"""Where MCP servers are configured, and the checked shape of one server.

Our own files, and Claude Code's, in Claude Code's ``mcpServers`` shape::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@scope/server"], "env": {"TOKEN": "${TOKEN}"}},
        "web":   {"type": "http", "url": "http://127.0.0.1:8000/mcp",
                  "headers": {"Authorization": "Bearer ${API_KEY}"}}
    }}

* the user's ``$XDG_CONFIG_HOME/coding-agent/mcp.json`` (default ``~/.config``);
* the project's ``.mcp.json`` at its root, read only when the project is trusted, and of it
  only the servers the user approved as they are written (``project_approved``: the app keeps
  the approvals; a server added or changed since is reported and not started);
* Claude Code's ``~/.claude.json`` (``$CLAUDE_CONFIG_DIR/.claude.json`` when that variable is
  set, as Claude Code does; :func:`claude_json_path`): its top-level ``mcpServers`` (what
  ``claude mcp add --scope user`` writes) and ``projects[<this project>].mcpServers`` (the
  default *local* scope, the user's own servers for one folder; the key is the absolute path of
  the project root, or of the session's folder when that differs). Only those two keys are read:
  the file's many others (history, tips, …) are ignored whatever their shape. The local scope is
  the user's own file, so it loads in an untrusted project too.

The servers of the Claude Code plugins the app loads (the ``claude_plugins`` harness service:
each plugin's ``.mcp.json``, ``${CLAUDE_PLUGIN_ROOT}`` its folder; :func:`plugin_servers`) come
before all of these. On a name clash the later source in this list wins, lowest first:

0. the plugins' servers;
1. ``~/.claude.json``, user scope;
2. our ``mcp.json`` (ours replaces Claude Code's user-scope server of the same name);
3. a trusted project's ``.mcp.json``;
4. ``~/.claude.json``, local scope of this project (Claude Code's order: local > project >
   user; the user's own choice for this folder is not replaced by what a repository ships);
   the session's folder's entry wins over the project root's when both are present.

Each server keeps its source (the file, and for ``~/.claude.json`` the scope), shown by ``/mcp``.

``type`` is ``stdio`` (the default when ``command`` is given), ``http`` (``streamable-http`` is
accepted too; the default when ``url`` is given) or ``sse`` (the legacy HTTP+SSE transport: ``url`` is the SSE endpoint, as
Claude Code writes it). An ``http`` or ``sse`` server that answers 401 is logged in to with OAuth
(:mod:`.auth`): no configuration. ``${VAR}`` and ``${VAR:-default}`` are
expanded in ``command``, ``args``, ``env``, ``url`` and ``headers``. Our own optional keys:
``timeout``, the seconds one tool call may take (default 120), and, for a stdio server,
``sandbox: true``: the server runs in the session's OS sandbox (:class:`pico3.Sandbox`, the
policy of the agent's commands: the project and ``$TMPDIR`` writable, credentials hidden, no
network but ``sandbox.allow_domains``); where no sandbox can start such a server is not started.

Two settings of our own may sit next to ``mcpServers`` (a trusted project's replace the user's):
``startup_timeout`` (seconds ``-p``/``--json`` wait for the servers to be ready or failed before
the first request, default 30) and ``max_message_bytes`` (the largest message a server may send,
default 32 MiB: a larger one fails that call, or the connection, with a message naming the cap).
A third, ``idle_timeout`` (seconds, default 60; 0 never), is how long a lingering worker keeps its
stdio servers running with no client attached and no request (:mod:`.idle`).

A file that is missing is no error; one that is not JSON, or an entry that is not valid, is
reported (:attr:`McpConfig.errors`, naming the file, the server and the fix) and skipped: the
other servers load.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "CLIENT_SERVERS_SERVICE",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_STARTUP_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "McpConfig",
    "ServerSpec",
    "claude_json_path",
    "load_config",
    "parse_servers",
    "parse_settings",
    "plugin_servers",
    "project_config_path",
    "user_config_path",
    "with_client_servers",
]

DEFAULT_TIMEOUT = 120.0
"""Seconds one tool call may take unless the server's ``timeout`` says otherwise."""

DEFAULT_STARTUP_TIMEOUT = 30.0
"""Seconds ``-p``/``--json`` wait for the servers before the first request."""
DEFAULT_IDLE_TIMEOUT = 60.0
"""Seconds a stdio server keeps running with no client attached and no request (0: always)."""
DEFAULT_MAX_MESSAGE_BYTES = 32 * 1024 * 1024
"""The largest message a server may send unless ``max_message_bytes`` says otherwise."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """One checked server entry."""

    name: str
    transport: Literal["stdio", "http", "sse"]
    source: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict[str, str])
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict[str, str])
    timeout: float = DEFAULT_TIMEOUT
    sandbox: bool = False
    """A stdio server that runs in the session's OS sandbox (``"sandbox": true``)."""


@dataclass(frozen=True, slots=True)
class McpConfig:
    servers: tuple[ServerSpec, ...]
    errors: tuple[str, ...]
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT


def user_config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/coding-agent/mcp.json`` (``~/.config`` when unset or empty)."""
    environ = os.environ if env is None else env
    base = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "coding-agent" / "mcp.json"


def claude_json_path(env: Mapping[str, str] | None = None) -> Path:
    """Claude Code's ``.claude.json``: in ``$CLAUDE_CONFIG_DIR`` when that is set (as Claude Code
    keeps it there then), else ``~/.claude.json`` (``$HOME``, else the account's home)."""
    environ = os.environ if env is None else env
    configured = environ.get("CLAUDE_CONFIG_DIR")
    if configured:
        return Path(configured).expanduser() / ".claude.json"
    return Path(environ.get("HOME") or os.path.expanduser("~")) / ".claude.json"


def project_config_path(project: str | os.PathLike[str]) -> Path:
    """The project's ``.mcp.json``."""
    return Path(project) / ".mcp.json"


def _expand(value: str, environ: Mapping[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        found = environ.get(match.group(1))
        if found is None:
            return match.group(2) if match.group(2) is not None else ""
        return found

    return _VAR.sub(one, value)


def _strings(value: object, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):  # pyright: ignore[reportUnknownVariableType]
        raise ValueError(f"{what} must be a list of strings")
    return list(value)  # pyright: ignore[reportUnknownArgumentType]


def _string_map(value: object, what: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str)
        for k, v in value.items()  # pyright: ignore[reportUnknownVariableType]
    ):
        raise ValueError(f"{what} must be an object of strings")
    return dict(value)  # pyright: ignore[reportUnknownArgumentType]


def _server(name: str, raw: object, source: str, environ: Mapping[str, str]) -> ServerSpec:
    if not _NAME.match(name):
        raise ValueError("the name must be 1-40 letters, digits, '_' or '-'")
    if not isinstance(raw, dict):
        raise ValueError("the entry must be an object")
    entry: dict[str, Any] = dict(raw)  # pyright: ignore[reportUnknownArgumentType]
    kind = entry.get("type")
    if kind is None:
        kind = "http" if "url" in entry and "command" not in entry else "stdio"
    if kind == "streamable-http":
        kind = "http"
    if kind not in ("stdio", "http", "sse"):
        raise ValueError(f'type must be "stdio", "http" or "sse", got {kind!r}')
    timeout = entry.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    allowed = {"type", "timeout", "disabled"} | (
        {"command", "args", "env", "cwd", "sandbox"} if kind == "stdio" else {"url", "headers"}
    )
    if kind != "stdio" and "sandbox" in entry:
        raise ValueError(
            f'"sandbox" is for stdio servers only (a {kind} server is not a process the agent '
            "starts); remove it"
        )
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(unknown)} for a {kind} server "
            f"(allowed: {', '.join(sorted(allowed))})"
        )
    if kind == "stdio":
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ValueError('a stdio server needs "command" (the program to run)')
        args = [_expand(a, environ) for a in _strings(entry.get("args", []), '"args"')]
        env = {
            k: _expand(v, environ) for k, v in _string_map(entry.get("env", {}), '"env"').items()
        }
        cwd = entry.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise ValueError('"cwd" must be a string')
        sandbox = entry.get("sandbox", False)
        if not isinstance(sandbox, bool):
            raise ValueError(f'"sandbox" must be true or false, got {sandbox!r}')
        return ServerSpec(
            name,
            "stdio",
            source,
            command=_expand(command, environ),
            args=tuple(args),
            env=env,
            cwd=cwd,
            timeout=float(timeout),
            sandbox=sandbox,
        )
    url = entry.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f'an {kind} server needs "url" (http:// or https://)')
    headers = {
        k: _expand(v, environ)
        for k, v in _string_map(entry.get("headers", {}), '"headers"').items()
    }
    return ServerSpec(
        name,
        "sse" if kind == "sse" else "http",
        source,
        url=_expand(url, environ),
        headers=headers,
        timeout=float(timeout),
    )


def parse_servers(
    data: object, source: str, environ: Mapping[str, str] | None = None
) -> tuple[list[ServerSpec], list[str]]:
    """The servers of one decoded file and the problems found (each naming ``source``)."""
    environ = os.environ if environ is None else environ
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):  # pyright: ignore[reportUnknownMemberType]
        return [], [f'{source}: expected an object with "mcpServers": {{name: server}}']
    servers: list[ServerSpec] = []
    errors: list[str] = []
    entries: dict[str, Any] = data.get("mcpServers", {})  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
    for name, raw in entries.items():
        if isinstance(raw, dict) and raw.get("disabled") is True:  # pyright: ignore[reportUnknownMemberType]
            continue
        try:
            servers.append(_server(str(name), raw, source, environ))
        except ValueError as exc:
            errors.append(f"{source}: server {name!r}: {exc}; it is skipped")
    return servers, errors


def parse_settings(data: object, source: str) -> tuple[dict[str, Any], list[str]]:
    """Our settings next to ``mcpServers`` (``startup_timeout``, ``max_message_bytes``,
    ``idle_timeout``) and the problems found; a bad value is reported and the default kept."""
    if not isinstance(data, dict):
        return {}, []
    found: dict[str, Any] = {}
    errors: list[str] = []
    raw: dict[str, Any] = data  # pyright: ignore[reportUnknownVariableType]
    timeout = raw.get("startup_timeout")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
            errors.append(
                f"{source}: startup_timeout must be a number of seconds >= 0, got {timeout!r}; "
                f"the default {DEFAULT_STARTUP_TIMEOUT:g} is used"
            )
        else:
            found["startup_timeout"] = float(timeout)
    idle = raw.get("idle_timeout")
    if idle is not None:
        if isinstance(idle, bool) or not isinstance(idle, int | float) or idle < 0:
            errors.append(
                f"{source}: idle_timeout must be a number of seconds >= 0 (0: never stop), got "
                f"{idle!r}; the default {DEFAULT_IDLE_TIMEOUT:g} is used"
            )
        else:
            found["idle_timeout"] = float(idle)
    cap = raw.get("max_message_bytes")
    if cap is not None:
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1024:
            errors.append(
                f"{source}: max_message_bytes must be a whole number of bytes >= 1024, got "
                f"{cap!r}; the default {DEFAULT_MAX_MESSAGE_BYTES} is used"
            )
        else:
            found["max_message_bytes"] = cap
    return found, errors


def _decode(path: Path) -> tuple[object, list[str]]:
    """The decoded file (``None`` when it is missing or bad) and the problem, naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, []
    except (OSError, UnicodeDecodeError) as exc:
        return None, [f"{path}: cannot be read ({exc}); its servers are skipped"]
    try:
        return json.loads(text), []
    except json.JSONDecodeError as exc:
        return None, [f"{path}: not valid JSON ({exc}); fix the file, its servers are skipped"]


def _read(
    path: Path,
    environ: Mapping[str, str],
    settings: dict[str, Any],
    approved: Mapping[str, Any] | None = None,
) -> tuple[list[ServerSpec], list[str]]:
    data, problems = _decode(path)
    if data is None:
        return [], problems
    found, problems = parse_settings(data, str(path))
    settings.update(found)
    if approved is not None:
        data, waiting = _only_approved(data, approved, path)
        problems += waiting
    servers, errors = parse_servers(data, str(path), environ)
    return servers, problems + errors


def _only_approved(data: Any, approved: Mapping[str, Any], path: Path) -> tuple[Any, list[str]]:
    """``data`` keeping only the servers whose entry is exactly the approved one, and a line for
    each other (an entry that is not an object is left for :func:`parse_servers` to report)."""
    entries = data.get("mcpServers") if isinstance(data, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not isinstance(entries, dict):
        return data, []
    kept: dict[str, Any] = {}
    waiting: list[str] = []
    for name, entry in entries.items():  # pyright: ignore[reportUnknownVariableType]
        disabled = isinstance(entry, dict) and entry.get("disabled") is True  # pyright: ignore[reportUnknownMemberType]
        if not isinstance(entry, dict) or disabled or approved.get(name) == entry:
            kept[name] = entry
        else:
            waiting.append(
                f"{path}: server {name!r} is new or changed since you approved this project's "
                "servers: not started (/trust shows it and asks; coding-agent --trust approves it)"
            )
    return {**data, "mcpServers": kept}, waiting  # pyright: ignore[reportUnknownVariableType]


def _servers_at(
    holder: Mapping[str, Any], source: str, environ: Mapping[str, str]
) -> tuple[list[ServerSpec], list[str]]:
    if "mcpServers" not in holder:
        return [], []
    return parse_servers({"mcpServers": holder["mcpServers"]}, source, environ)


def _read_claude_json(
    path: Path, folders: list[Path], environ: Mapping[str, str]
) -> tuple[list[ServerSpec], list[ServerSpec], list[str]]:
    """``(user-scope servers, local-scope servers of folders, problems)`` of Claude Code's
    ``.claude.json``; only ``mcpServers`` and ``projects[folder].mcpServers`` are looked at."""
    data, problems = _decode(path)
    if data is None:
        return [], [], problems
    if not isinstance(data, dict):
        return [], [], [f"{path}: expected a JSON object; its MCP servers are skipped"]
    raw: dict[str, Any] = data  # pyright: ignore[reportUnknownVariableType]
    user, errors = _servers_at(raw, f"{path} (user scope)", environ)
    local: list[ServerSpec] = []
    projects = raw.get("projects")
    if projects is None or not folders:
        return user, local, errors
    if not isinstance(projects, dict):
        return (
            user,
            local,
            [
                *errors,
                f'{path}: "projects" is not an object; its local-scope MCP servers are skipped',
            ],
        )
    by_path: dict[str, Any] = {
        os.path.normpath(str(key)): entry
        for key, entry in projects.items()  # pyright: ignore[reportUnknownVariableType]
        if isinstance(key, str)
    }
    for folder in folders:
        key = next(
            (
                k
                for k in (os.path.normpath(folder), os.path.normpath(folder.resolve()))
                if k in by_path
            ),
            None,
        )
        if key is None:
            continue
        entry = by_path[key]
        if not isinstance(entry, dict):
            errors.append(
                f'{path}: projects["{key}"] is not an object; its MCP servers are skipped'
            )
            continue
        found, problems = _servers_at(entry, f"{path} (local scope of {key})", environ)  # pyright: ignore[reportUnknownArgumentType]
        local += found
        errors += problems
    return user, local, errors


def load_config(
    *,
    project: str | os.PathLike[str] | None = None,
    project_trusted: bool = False,
    project_approved: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    plugins: object = None,
) -> McpConfig:
    """Every source in the module's order, lowest first: Claude Code's user scope, our
    ``mcp.json``, (when ``project_trusted``) the project's ``.mcp.json``, then Claude Code's local
    scope of ``project`` and ``cwd``; a later server replaces an earlier one of the same name.

    ``project_approved`` (name -> entry as written), when given, is every project server the
    user approved: any other server of ``.mcp.json``, or one whose entry differs, is one error
    line and is not loaded. ``None`` loads them all. ``plugins`` (the ``claude_plugins`` harness
    service: :func:`plugin_servers`) come first, so any file's server of the same name wins."""
    environ = os.environ if env is None else env
    by_name: dict[str, ServerSpec] = {}
    errors: list[str] = []
    for spec in plugin_servers(plugins, environ, errors):
        by_name[spec.name] = spec
    settings: dict[str, Any] = {}
    folders: list[Path] = []
    for folder in (project, cwd):
        if folder is not None and Path(folder).absolute() not in folders:
            folders.append(Path(folder).absolute())
    claude_user, claude_local, problems = _read_claude_json(
        claude_json_path(environ), folders, environ
    )
    errors += problems
    for spec in claude_user:
        by_name[spec.name] = spec
    servers, problems = _read(user_config_path(environ), environ, settings)
    errors += problems
    for spec in servers:
        by_name[spec.name] = spec
    if project is not None:
        path = project_config_path(project)
        if project_trusted:
            servers, problems = _read(path, environ, settings, project_approved)
            errors += problems
            for spec in servers:
                by_name[spec.name] = spec
        elif path.is_file():
            errors.append(
                f"{path}: not loaded because the project is not trusted "
                "(coding-agent --trust, or /trust, then restart)"
            )
    for spec in claude_local:
        by_name[spec.name] = spec
    return McpConfig(tuple(by_name.values()), tuple(errors), **settings)


def plugin_servers(
    plugins: object, environ: Mapping[str, str], errors: list[str]
) -> list[ServerSpec]:
    """The servers of the Claude Code plugins the app loads (the ``claude_plugins`` harness
    service, ``[{"id", "root", "mcpServers": [file path or inline object, ...]}, ...]``; the
    app decides which, from the user's ``enabledPlugins``). A plugin's ``.mcp.json`` is
    ``{"mcpServers": {...}}`` or the servers object itself, as Claude Code takes both;
    ``${CLAUDE_PLUGIN_ROOT}`` is the plugin's folder, and a stdio server gets that variable
    too. Problems (naming the file) go to ``errors``."""
    found: list[ServerSpec] = []
    for plugin in plugins if isinstance(plugins, list) else []:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(plugin, dict) or not isinstance(plugin.get("root"), str):  # pyright: ignore[reportUnknownMemberType]
            continue
        root: str = plugin["root"]
        items: Any = plugin.get("mcpServers") or []  # pyright: ignore[reportUnknownMemberType]
        for item in items if isinstance(items, list) else []:  # pyright: ignore[reportUnknownVariableType]
            if isinstance(item, str):
                (data, problems), source = _decode(Path(item)), item
                errors += problems
            else:
                data, source = item, os.path.join(root, ".claude-plugin", "plugin.json")  # pyright: ignore[reportUnknownVariableType]
            if data is None:
                continue
            if isinstance(data, dict) and "mcpServers" not in data:
                data = {"mcpServers": data}
            variables = {**environ, "CLAUDE_PLUGIN_ROOT": root}
            servers, problems = parse_servers(data, source, variables)
            errors += problems
            found += [
                replace(spec, env={"CLAUDE_PLUGIN_ROOT": root, **spec.env})
                if spec.transport == "stdio"
                else spec
                for spec in servers
            ]
    return found


CLIENT_SERVERS_SERVICE = "mcp_client_servers"
"""The harness service holding the servers a client brought for this session (an editor's
``mcpServers`` in ACP's ``session/new``, the command line's ``--mcp-config``): ``{"source":
"<who>", "mcpServers": {name: entry}}``, entries in this module's shape. Started like the
configured servers, under the same rules (the approval of every call, a ``"sandbox": true`` entry
in the OS sandbox, the scrubbed environment); one with a configured server's name replaces it for
this session. With ``"strict": true`` (``--strict-mcp-config``) they are the only servers: the
configured ones (and their files' problems) are left out."""


def with_client_servers(
    config: McpConfig, brought: object, environ: Mapping[str, str] | None = None
) -> McpConfig:
    """``config`` with the servers of :data:`CLIENT_SERVERS_SERVICE`'s value ``brought`` added
    last (``None``: ``config`` as it is); a bad entry is one more error naming ``source``."""
    if brought is None:
        return config
    source = "the client's servers"
    if isinstance(brought, Mapping):
        named = brought.get("source")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        source = named if isinstance(named, str) and named else source
    servers, problems = parse_servers(brought, source, environ)
    strict = isinstance(brought, Mapping) and brought.get("strict") is True  # pyright: ignore[reportUnknownMemberType]
    if strict:
        config = replace(config, servers=(), errors=())
    by_name = {spec.name: spec for spec in config.servers}
    for spec in servers:
        by_name[spec.name] = spec
    return replace(config, servers=tuple(by_name.values()), errors=(*config.errors, *problems))
