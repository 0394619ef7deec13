"""A subagent's own MCP servers: Claude Code's ``mcpServers`` in an agent definition.

The subagents feature stores a definition's ``mcpServers`` in its task's input under
:data:`SCOPED_KEY` (``["github", {"scratch": {"command": ..., "args": [...]}}]``: a configured
server's name, or a server written as ``.mcp.json`` writes one). This feature reads it by that
name — features never import each other — from the task that owns a conversation, in a
``system_instructions`` hook that runs before each of its model calls:

* the first time, each inline server is started — unless the run allows only the servers it
  brought (``--strict-mcp-config``: :meth:`ScopedHost.only_given`), which no agent definition
  widens: then a warning names the flag and the subagent runs without it; nor is the server of
  a project's own agent file (:data:`PROJECT_AGENT_KEY`) while the project is not trusted,
  after a restart too — (a :class:`~.client.ServerRunner` made as the
  session's are: the same working folder, scrubbed environment, sandbox and OAuth folder) and
  the call waits until each is ready or failed, at most the configuration's
  ``startup_timeout``; a second subagent running the same server (same name, same entry) shares
  it; a name the session's configuration already has is the session's server (one warning);
* the conversation's tools are its loadout plus every tool of its servers, inline or named
  (``mcp__<server>__<tool>``): only that conversation is offered them, the root and other
  subagents are not. The tools are registered as the session's MCP tools are, so calls go
  through the approval feature's rules for ``mcp__*`` tools like any other;
* when the task ends (completed, failed or aborted: a watch waits on it), its servers stop
  (once no other running subagent shares them) and their tools are removed.

The servers show in the ``mcp.servers`` state after the session's, their ``source`` naming the
agent; ``/mcp restart NAME`` restarts one while its subagent runs (:meth:`ScopedServers.runner`),
and after it ended says, in one line, whose it was and that it is not running
(:meth:`ScopedServers.not_running`). Nothing here is durable: after a restart, the resumed subagent's next model call starts
them again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

import anyio

from chord import Context, cancel_scope
from pico3 import MODEL_CALL_KIND, ToolDeclaration

from .config import DEFAULT_STARTUP_TIMEOUT, parse_servers
from .contract import McpServer
from .results import tool_declarations

if TYPE_CHECKING:
    from pico3 import HarnessServiceApi

    from .client import ServerRunner
    from .config import ServerSpec

__all__ = ["SCOPED_KEY", "ScopedHost", "ScopedServers"]

_log = logging.getLogger("facets_mcp")

SCOPED_KEY = "mcpServers"
"""The key of a task's input (the subagents feature's ``subagents.run``) listing the servers of
the conversation it owns: names of configured servers, or ``{name: entry}``."""
PROJECT_AGENT_KEY = "projectAgent"
"""``true`` in that input when the definition is one of the project's own agent files: its
inline servers start only while the project is trusted (the input outlives the session)."""
SUBAGENT_KIND = "subagents.run"
"""The only task kind whose input's servers are started (the subagents feature's)."""


class ScopedHost(Protocol):
    """What this module needs of the MCP session facet's host (``session._ScopedPort``)."""

    @property
    def harness(self) -> HarnessServiceApi: ...

    @property
    def env(self) -> Mapping[str, str] | None: ...

    @property
    def startup_timeout(self) -> float | None: ...

    def configured(self) -> list[str]: ...

    def only_given(self) -> str | None: ...

    def project_trusted(self) -> bool: ...

    def new_runner(self, spec: Any, notify: Any) -> ServerRunner: ...

    def spawn(self, key: str, connection: Any) -> Callable[[], None]: ...

    def show(self, server: McpServer) -> None: ...

    def hide(self, name: str) -> None: ...

    def tool_names(self, server: str) -> list[str]: ...

    def executor(self, server: str, tool: str, runners: Callable[[], Mapping[str, Any]]) -> Any: ...


@dataclass
class _Scoped:
    """One running subagent server and the tasks using it."""

    spec: ServerSpec
    entry: str
    """Its entry as JSON (two subagents share a server only when their entries are equal)."""
    source: str
    settled: anyio.Event = field(default_factory=anyio.Event)
    """Set once it was ready or failed (the first model call waits for it)."""
    users: set[int] = field(default_factory=set[int])
    runner: Any = None
    close: Callable[[], None] = lambda: None
    tools: list[ToolDeclaration] = field(default_factory=list[ToolDeclaration])
    unregister: Callable[[], None] = lambda: None


@dataclass(frozen=True)
class _Owner:
    task: int
    entries: list[Any]
    agent: str
    project: bool = False
    """The definition is one of the project's own agent files (:data:`PROJECT_AGENT_KEY`)."""


class ScopedServers:
    """The subagents' servers of one MCP facet activation (see the module docstring)."""

    def __init__(self, host: ScopedHost) -> None:
        self._host = host
        self._servers: dict[str, _Scoped] = {}
        self._tasks: dict[int, list[str]] = {}
        self._owners: dict[int, _Owner | None] = {}
        self._watches: dict[int, Callable[[], None]] = {}
        self._warned: set[str] = set()
        self._lock = anyio.Lock()
        self._ended: dict[str, str] = {}
        """The servers that ran for a subagent and stopped with it: name → its source."""

    def _warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            _log.warning("%s", message)

    def runner(self, name: str) -> ServerRunner | None:
        """The runner of the running subagent server ``name`` (``None`` when none runs)."""
        scoped = self._servers.get(name)
        return scoped.runner if scoped is not None else None

    def not_running(self, name: str) -> str | None:
        """Why ``name`` cannot be restarted when it is a subagent's server that stopped with its
        subagent (one line), else ``None``."""
        source = self._ended.get(name)
        if source is None or name in self._servers:
            return None
        return (
            f"MCP server {name!r} is {source.removesuffix(' (mcpServers)')}'s own (mcpServers): "
            "it runs only while that subagent runs, and it is not running now"
        )

    def registration(self) -> Callable[[Any], Callable[[], None]]:
        """The harness registration of the ``system_instructions`` hook."""

        def install(h: Any) -> Callable[[], None]:
            ns = h.namespace("mcp-subagent")
            try:
                remove = h.hooks(ns, MODEL_CALL_KIND, {"system_instructions": self._offer})
            except BaseException:
                ns.unregister()
                raise

            def undo() -> None:
                remove()
                ns.unregister()

            return undo

        return install

    async def _owner(self, conversation_id: int, ctx: Context) -> _Owner | None:
        """The task owning the conversation, when its input lists servers (read once)."""
        if conversation_id in self._owners:
            return self._owners[conversation_id]
        found: _Owner | None = None
        task = await self._host.harness.harness.owner_task(conversation_id, ctx)
        given: Any = task.input if task is not None and task.kind == SUBAGENT_KIND else None
        entries = given.get(SCOPED_KEY) if isinstance(given, dict) else None
        if task is not None and isinstance(entries, list) and entries:
            agent = str(cast(dict[str, Any], given).get("agent") or "subagent")
            project = cast(dict[str, Any], given).get(PROJECT_AGENT_KEY) is True
            found = _Owner(task.id, cast(list[Any], entries), agent, project)
        self._owners[conversation_id] = found
        return found

    async def _offer(self, payload: dict[str, Any], api: Any, ctx: Context) -> Any:
        owner = await self._owner(api.conversation_id, ctx)
        if owner is None:
            return None
        async with self._lock:
            names = self._acquire(owner)
        timeout = self._host.startup_timeout
        with anyio.move_on_after(DEFAULT_STARTUP_TIMEOUT if timeout is None else timeout):
            for name in names:
                scoped = self._servers.get(name)
                if scoped is not None:
                    await scoped.settled.wait()
        tools = [str(t) for t in payload.get("tools") or []]
        for entry in owner.entries:
            server = entry if isinstance(entry, str) else next(iter(cast(dict[str, Any], entry)))
            scoped = self._servers.get(server)
            found = [d.name for d in scoped.tools] if scoped else self._host.tool_names(server)
            tools += [t for t in found if t not in tools]
        return {"tools": tools}

    def _acquire(self, owner: _Owner) -> list[str]:
        """Start the task's inline servers not running yet and watch the task; returns their
        names (once per task: later calls return the same)."""
        if owner.task in self._tasks:
            return self._tasks[owner.task]
        configured = self._host.configured()
        only = self._host.only_given()  # strict: nothing beyond the run's own servers starts
        trusted = self._host.project_trusted()  # now, not when the task was written
        names: list[str] = []
        source = f"agent {owner.agent} (mcpServers)"
        for entry in owner.entries:
            if isinstance(entry, str):
                if entry not in configured:
                    self._warn(
                        f"{source}: no MCP server named {entry!r} is configured (this "
                        f"session's: {', '.join(configured) or 'none'}); the subagent runs "
                        "without it"
                    )
                continue
            specs, errors = parse_servers({"mcpServers": entry}, source, self._host.env)
            for problem in errors:
                self._warn(problem)
            for spec in specs:
                if owner.project and spec.name not in configured and not trusted:
                    self._warn(
                        f"{source}: {spec.name!r} is not started: the agent is the project's "
                        "own and the project is not trusted now; the subagent runs without it "
                        "(trust the project to start it)"
                    )
                    continue
                if only is not None and spec.name not in configured:
                    self._warn(
                        f"{source}: {spec.name!r} is not started: this run uses only the servers "
                        f"of {only} (--strict-mcp-config); the subagent runs without it (add the "
                        "server there and name it in mcpServers)"
                    )
                    continue
                if spec.name in configured:
                    self._warn(
                        f"{source}: {spec.name!r} is a server of this session's configuration "
                        "too; the subagent uses the session's"
                    )
                    continue
                written = json.dumps(cast(dict[str, Any], entry)[spec.name], sort_keys=True)
                scoped = self._servers.get(spec.name)
                if scoped is not None and scoped.entry != written:
                    self._warn(
                        f"{source}: another running subagent has a different server named "
                        f"{spec.name!r} ({scoped.source}); this one runs without it"
                    )
                    continue
                if scoped is None:
                    scoped = self._start(spec, written, source)
                scoped.users.add(owner.task)
                names.append(spec.name)
        self._tasks[owner.task] = names
        watch = _Watch(self._host, owner.task, self._release)
        self._watches[owner.task] = self._host.spawn(f"subagent-task:{owner.task}", watch)
        return names

    def _start(self, spec: ServerSpec, entry: str, source: str) -> _Scoped:
        scoped = _Scoped(spec, entry, source)

        async def notify(server: McpServer, tools: list[dict[str, Any]]) -> None:
            await self._apply(scoped, server, tools)

        scoped.runner = self._host.new_runner(spec, notify)
        self._servers[spec.name] = scoped
        self._host.show(_shown(spec.name, spec.transport, source))
        connection = _Connection(scoped.runner, lambda: self._gone(scoped))
        scoped.close = self._host.spawn(f"subagent:{spec.name}", connection)
        return scoped

    async def _apply(self, scoped: _Scoped, server: McpServer, tools: list[dict[str, Any]]) -> None:
        if self._servers.get(scoped.spec.name) is not scoped:
            return  # stopped meanwhile
        shown: McpServer = {**server, "source": scoped.source}  # type: ignore[typeddict-item]
        if server["state"] == "ready":
            skipped = self._register(scoped, tools)
            if skipped:
                shown["error"] = "; ".join(skipped)
        if server["state"] in ("ready", "failed"):
            scoped.settled.set()
        self._host.show(shown)

    def _register(self, scoped: _Scoped, tools: list[dict[str, Any]]) -> list[str]:
        server = scoped.spec.name

        def runners() -> Mapping[str, ServerRunner]:
            return {name: s.runner for name, s in self._servers.items()}

        declarations, skipped = tool_declarations(
            server, tools, lambda tool: self._host.executor(server, tool, runners)
        )
        if [d.wire() for d in declarations] == [d.wire() for d in scoped.tools]:
            return skipped
        scoped.unregister()

        def install(h: Any) -> Callable[[], None]:
            removers = [h.register_tool(d) for d in declarations if d.name not in h.tools.names()]

            def undo() -> None:
                for remove in reversed(removers):
                    remove()

            return undo

        scoped.tools = declarations
        scoped.unregister = self._host.harness.add_registration(install)
        return skipped

    def _release(self, task: int) -> None:
        """The task ended: stop the servers no other running task uses."""
        for name in self._tasks.pop(task, []):
            scoped = self._servers.get(name)
            if scoped is None:
                continue
            scoped.users.discard(task)
            if not scoped.users:
                del self._servers[name]
                self._ended[name] = scoped.source
                scoped.unregister()
                scoped.close()  # the runner's task is cancelled: the server stops
        for conversation, owner in list(self._owners.items()):
            if owner is not None and owner.task == task:
                del self._owners[conversation]
        close = self._watches.pop(task, None)
        if close is not None:
            close()

    def _gone(self, scoped: _Scoped) -> None:
        """A server's runner returned (its process ended): out of the state, unless a new
        server of that name runs already."""
        if scoped.spec.name not in self._servers:
            self._host.hide(scoped.spec.name)

    def stop(self) -> None:
        """The facet stops: every subagent server stops."""
        for close in list(self._watches.values()):
            close()
        self._watches.clear()
        for scoped in self._servers.values():
            scoped.unregister()
            scoped.close()
        self._servers.clear()
        self._tasks.clear()
        self._owners.clear()


def _shown(name: str, transport: Any, source: str) -> McpServer:
    return {
        "name": name,
        "transport": transport,
        "source": source,
        "state": "starting",
        "tools": [],
        "resources": [],
        "prompts": [],
        "restarts": 0,
    }


class _Connection:
    """A subagent server's :data:`~.session.McpConnections` instance: its runner's life, then
    ``ended`` (its process is gone)."""

    def __init__(self, runner: Any, ended: Callable[[], None]) -> None:
        self._runner = runner
        self._ended = ended

    async def run(self, ctx: Context) -> None:
        try:
            with cancel_scope(ctx):
                await self._runner.run()
        finally:
            self._ended()


class _Watch:
    """Waits for one subagent's task to end, then releases its servers (an
    :data:`~.session.McpConnections` instance: the facet's observer runs it)."""

    def __init__(self, host: ScopedHost, task: int, release: Callable[[int], None]) -> None:
        self._host = host
        self._task = task
        self._release = release

    async def run(self, ctx: Context) -> None:
        ended = False
        try:
            await self._host.harness.harness.wait_for_task(self._task, ctx)
            ended = True
        except Exception as exc:  # a closing harness: its servers stop with the facet anyway
            _log.info("stopped following subagent task %s: %s", self._task, exc)
            ended = True
        finally:
            if ended:
                self._release(self._task)
