"""The MCP session facet: MCP servers' tools for the model, and the ``mcp.servers`` service.

When the facet activates it reads the configuration (:mod:`.config`: the user's ``mcp.json`` and,
when the project is trusted, its ``.mcp.json``) and opens one local keyed instance of
:data:`McpConnections` per server; :func:`connections_facet` observes them and runs each
server's :class:`~.client.ServerRunner` in its observer task, on the worker's loop (no thread
hop in the call path). Activation does not wait for any server: the agent is usable at once and
each server's tools appear when it is ready.

Each ready server's tools are registered on the harness as ``mcp__<server>__<tool>`` with the
server's JSON Schema (a tool whose schema the harness refuses is left out and named in the
server's ``error``), ``replay="unsafe"`` (a call interrupted by a crash is not sent again), and
added to the root conversation's ``selectedTools``. The calls go through the approval feature
like any other tool; its default rules ask for every ``mcp__*`` tool. A call is sent to the
server's current connection; a failure
(the server hung, answered garbage, died) is that call's error result. While a server restarts
its tools stay registered and a call says so. Beside them (:mod:`.offers`): the servers'
``instructions`` as a system section, ``mcp__list_resources``/``mcp__read_resource`` once a
server offers resources, ``@server:uri`` mentions in a prompt resolved (:mod:`.mentions`), a call's progress in its slot, a server's elicitation during a call as
a keyed :data:`~.contract.McpElicitations` dialog (its answer a memo on the call's slot), and
its sampling requests through :mod:`.sampling` (a :data:`~.contract.McpSampling` approval, then
the root conversation's model).

The service's replicated ``state`` (:class:`~.contract.McpState`) follows every server. Nothing
here is durable: a hot reload disposes the facet (the instances close, which stops the servers) and
the new generation starts them again; the conversation is untouched.

Where things are comes from the harness's ``services``: ``workspace`` (the working folder, the
servers' working directory), ``project_root`` (where ``.mcp.json`` is looked for, default the
workspace), ``project_trusted`` (default ``False``) and ``project_mcp_approved`` (the project
servers the user approved, name -> entry as written; absent: all of them); ``agent_state_dir`` (else ``state_dir``)
holds remote servers' OAuth tokens (:mod:`.auth`, in ``mcp-auth/``); ``mcp_env`` may replace
``os.environ`` (tests); ``mcp_client_servers`` (:data:`~.config.CLIENT_SERVERS_SERVICE`) adds the
servers a client brought for this session (an editor's, over ACP), after the configured ones; ``sandbox`` (a :class:`pico3.Sandbox`) runs the stdio servers whose
entry says ``"sandbox": true``; ``attendance`` (a :class:`pico3.Attendance`, the worker's
clients) lets :mod:`.idle` stop stdio servers while nobody is attached. A stdio server inherits that environment (a certificate file, a proxy, a
token the user exported) with its ``env`` block on top, both scrubbed by the session's
:class:`~pico3.ChildEnvironment` (service ``child_environment``): a secret variable, or a value
holding one (``"${ANTHROPIC_API_KEY}"``), reaches the server only when the user passed it through.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio

from chord import (
    BACKGROUND,
    Context,
    FacetEnvironment,
    MutableReplicatedState,
    RemoteServiceError,
    ServiceSpawner,
    cancel_scope,
    define_facet,
    define_service,
)
from pico3 import (
    ATTENDANCE_SERVICE,
    SANDBOX_SERVICE,
    Attendance,
    ChildEnvironment,
    HarnessService,
    HarnessServiceApi,
    Sandbox,
    ToolApi,
    ToolResult,
)

if TYPE_CHECKING:
    from .client import ServerRunner

from .config import CLIENT_SERVERS_SERVICE, load_config, with_client_servers
from .contract import (
    McpElicitations,
    McpHookTools,
    McpSampling,
    McpServer,
    McpServers,
    McpState,
)
from .hook_tools import HookTools
from .mentions import mentions_registration
from .offers import ProgressSlot, elicitation_asker, instructions_registration, resource_tools
from .results import tool_declarations
from .sampling import session_sampler

__all__ = ["McpConnections", "McpHost", "connections_facet", "session_facet"]

_log = logging.getLogger("facets_mcp")


McpConnections = define_service("mcp.connection", local=True)
"""One local keyed instance per configured server (its :class:`~.client.ServerRunner`); the
``@pi/mcp-connections`` facet observes them and runs each server's life in its observer task,
on the worker's own loop, for as long as the instance is open."""


class McpHost:
    """The live MCP side of one facet activation: the runners, the registrations,
    and the :data:`~.contract.McpServers` provider (``state`` and ``restart``)."""

    def __init__(
        self,
        harness: HarnessServiceApi,
        state: MutableReplicatedState,
        connections: ServiceSpawner[Any],
        elicitations: ServiceSpawner[Any] | None = None,
        states: Callable[[dict[str, Any]], MutableReplicatedState] | None = None,
        sampling: ServiceSpawner[Any] | None = None,
    ) -> None:
        self._harness = harness
        self._elicitations = elicitations
        self._states = states
        self._sampler = (
            session_sampler(harness, sampling, states)
            if sampling is not None and states is not None
            else None
        )
        self.state = state
        self._connections = connections
        self._runners: dict[str, ServerRunner] = {}
        self._closers: list[Callable[[], None]] = []
        self._servers: dict[str, McpServer] = {}
        self._errors: list[str] = []
        self._startup_timeout: float | None = None
        self._order: list[str] = []
        self._registered: dict[str, tuple[Any, Callable[[], None]]] = {}
        self._closing = False
        self._lock = anyio.Lock()
        self._extras: list[Callable[[], None]] = []
        self._resource_tools = False
        self._runner_args: dict[str, Any] = {}
        self._env: Mapping[str, str] | None = None
        self._scoped_order: list[str] = []
        from .scoped import ScopedServers

        self._scoped = ScopedServers(_ScopedPort(self))
        """The servers of running subagents' definitions (:mod:`.scoped`)."""

    # -- the service ---------------------------------------------------------------------------
    async def restart(self, name: Any, ctx: Context) -> None:
        self._runner(name).restart()

    def _runner(self, name: Any) -> ServerRunner:
        """The runner of server ``name``: the session's, or a running subagent's own
        (:mod:`.scoped`); a one-line error naming the problem otherwise."""
        if isinstance(name, str) and not self._closing:
            runner = self._runners.get(name) or self._scoped.runner(name)
            if runner is not None:
                return runner
            ended = self._scoped.not_running(name)
            if ended is not None:
                raise RemoteServiceError("service_invalid_value", ended)
        known = ", ".join(self._order) or "none"
        raise RemoteServiceError(
            "service_invalid_value",
            f"Unknown MCP server {name!r} (configured: {known}; a subagent's own servers are "
            "known while it runs)",
        )

    async def login(self, name: Any, ctx: Context) -> str | None:
        runner = self._runner(name)
        from .auth import LoginFailed

        try:
            return await runner.login()
        except (ValueError, LoginFailed) as exc:
            raise RemoteServiceError("service_invalid_value", str(exc)) from None
        except TimeoutError:
            raise RemoteServiceError(
                "service_invalid_value",
                f"MCP server {name!r} did not ask for a login in time; see /mcp",
            ) from None

    async def get_prompt(self, server: Any, prompt: Any, arguments: Any, ctx: Context) -> Any:
        runner = self._runners.get(server) if isinstance(server, str) else None
        if runner is None or self._closing:
            known = ", ".join(self._order) or "none"
            raise RemoteServiceError(
                "service_invalid_value", f"Unknown MCP server {server!r} (configured: {known})"
            )
        from .client import McpCallError  # imported already: a runner exists

        wanted = {str(k): str(v) for k, v in dict(arguments or {}).items()}
        try:
            return {"messages": await runner.get_prompt(str(prompt), wanted)}
        except McpCallError as exc:
            return {"error": str(exc)}

    # -- lifecycle -----------------------------------------------------------------------------
    def _services(self) -> Mapping[str, Any]:
        # the handle's: readable while suspended (a reload with invocations running activates
        # this facet between suspend and reopen)
        return self._harness.handle.services

    async def start(self) -> None:
        services = self._services()
        workspace = services.get("workspace")
        project = services.get("project_root") or workspace
        env = services.get("mcp_env")
        config = with_client_servers(
            load_config(
                project=project,
                project_trusted=bool(services.get("project_trusted", False)),
                project_approved=services.get("project_mcp_approved"),
                env=env,
                cwd=workspace,
                plugins=services.get("claude_plugins"),
            ),
            services.get(CLIENT_SERVERS_SERVICE),
            env,
        )
        self._errors = list(config.errors)
        self._startup_timeout = config.startup_timeout
        for message in config.errors:
            _log.warning("%s", message)
        self._order = [spec.name for spec in config.servers]
        self._servers = {
            spec.name: {
                "name": spec.name,
                "transport": spec.transport,
                "source": spec.source,
                "state": "starting",
                "tools": [],
                "resources": [],
                "prompts": [],
                "restarts": 0,
            }
            for spec in config.servers
        }
        cwd = str(workspace) if workspace is not None else None
        # OAuth tokens live under the agent's state (all sessions), else the session's
        auth_dir = services.get("agent_state_dir") or services.get("state_dir")
        sandbox = services.get(SANDBOX_SERVICE)  # for the servers with "sandbox": true
        self._runner_args = {
            "cwd": cwd,
            "environment": ChildEnvironment.of(services),
            "auth_dir": str(auth_dir) if auth_dir else None,
            "inherit": env,
            "max_message_bytes": config.max_message_bytes,
            "root": str(project) if project is not None else cwd,
            "sampler": self._sampler,
            "sandbox": sandbox if isinstance(sandbox, Sandbox) else None,
        }
        self._env = env
        # a subagent's own servers (its definition's mcpServers): started for it alone
        self._extras.append(self._harness.add_registration(self._scoped.registration()))
        self._publish_state()
        if not config.servers:
            return
        from .client import ServerRunner  # the MCP SDK: imported only when a server is configured

        self._extras.append(
            self._harness.add_registration(instructions_registration(lambda: self._runners))
        )
        self._extras.append(  # @server:uri in a prompt attaches the resource (.mentions)
            self._harness.add_registration(
                mentions_registration(self._harness, lambda: self._runners)
            )
        )

        # who is attached (a worker's clients): stdio servers sleep while nobody is (.idle)
        attendance = services.get(ATTENDANCE_SERVICE)
        attendance = attendance if isinstance(attendance, Attendance) else None
        for spec in config.servers:
            runner = ServerRunner(spec, self._apply, **self._runner_args)
            self._runners[spec.name] = runner
            connection = _Connection(runner, attendance, config.idle_timeout)
            self._closers.append(self._connections.spawn(spec.name, connection))

    def _running(self) -> Mapping[str, ServerRunner]:
        """The session's server runners by name (none once it stops)."""
        return {} if self._closing else self._runners

    async def stop(self) -> None:
        self._closing = True
        self._scoped.stop()
        for close in reversed(self._closers):
            close()
        self._closers.clear()
        for _declarations, remove in self._registered.values():
            remove()
        self._registered.clear()
        for remove in reversed(self._extras):
            remove()
        self._extras.clear()
        self._runners.clear()

    # -- news from a runner (on the worker's loop) ----------------------------------------------
    def _publish_state(self) -> None:
        value: McpState = {
            "servers": [
                self._servers[name]
                for name in (*self._order, *self._scoped_order)
                if name in self._servers
            ],
            "errors": list(self._errors),
        }
        if self._startup_timeout is not None:
            value["startupTimeout"] = self._startup_timeout
        self.state.replace(BACKGROUND, value)

    async def _apply(self, server: McpServer, tools: list[dict[str, Any]]) -> None:
        if self._closing:
            return
        async with self._lock:
            name = server["name"]
            shown: McpServer = dict(server)  # type: ignore[assignment]
            if server["state"] == "ready":
                skipped = self._register(name, tools)
                if skipped:
                    shown["error"] = "; ".join(skipped)
                    shown["tools"] = [t for t in server["tools"] if t["name"] in self._names(name)]
            elif name in self._registered:  # keep the tools while it restarts: calls say why
                kept = self._names(name)
                shown["tools"] = [
                    t for t in self._servers.get(name, server)["tools"] if t["name"] in kept
                ]
            if server["state"] == "ready":  # selected before the state says ready
                names = self._names(name)
                if not self._resource_tools and (server["resources"] or server.get("templates")):
                    self._resource_tools = True
                    names += self._add_resource_tools()
                await self._select(names)
            self._servers[name] = shown
            self._publish_state()

    def _add_resource_tools(self) -> list[str]:
        """Register ``mcp__list_resources`` and ``mcp__read_resource`` (once a server offers
        resources); returns their names."""
        declarations = resource_tools(lambda: self._runners)

        def install(h: Any) -> Callable[[], None]:
            removers = [h.register_tool(d) for d in declarations if d.name not in h.tools.names()]

            def undo() -> None:
                for remove in reversed(removers):
                    remove()

            return undo

        self._extras.append(self._harness.add_registration(install))
        return [d.name for d in declarations]

    def _asker(self, server: str, api: ToolApi, ctx: Context) -> Any:
        if self._elicitations is None or self._states is None:
            return None
        return elicitation_asker(server, api, ctx, self._elicitations, self._states)

    def _names(self, server: str) -> list[str]:
        registered = self._registered.get(server)
        return [] if registered is None else [d.name for d in registered[0]]

    def _register(self, server: str, tools: list[dict[str, Any]]) -> list[str]:
        declarations, skipped = tool_declarations(
            server, tools, lambda tool: self._execute(server, tool)
        )
        current = self._registered.get(server)
        wire = [d.wire() for d in declarations]
        if current is not None and [d.wire() for d in current[0]] == wire:
            return skipped
        if current is not None:
            current[1]()

        def install(h: Any) -> Callable[[], None]:
            removers: list[Callable[[], None]] = []
            try:
                for declaration in declarations:
                    if declaration.name in h.tools.names():
                        _log.error(
                            "MCP tool %s clashes with a tool already registered", declaration.name
                        )
                        continue
                    removers.append(h.register_tool(declaration))
            except BaseException:
                for remove in removers:
                    remove()
                raise

            def undo() -> None:
                for remove in reversed(removers):
                    remove()

            return undo

        self._registered[server] = (declarations, self._harness.add_registration(install))
        return skipped

    async def _select(self, names: list[str]) -> None:
        """Add ``names`` to the root conversation's ``selectedTools`` (one commit, or none)."""
        if not names or not self._harness.is_open:
            return
        try:
            root = await self._harness.harness.root(BACKGROUND)
            config = await root.config(BACKGROUND)
            selected = list(config.get("selectedTools") or [])
            wanted = selected + [n for n in names if n not in selected]
            if wanted != selected:
                await root.set_config({"selectedTools": wanted}, BACKGROUND)
        except Exception as exc:  # a closing harness: the next start selects them
            _log.warning("could not select the MCP tools %s: %s", names, exc)

    # -- calls ------------------------------------------------------------------------------
    def _execute(
        self,
        server: str,
        tool: str,
        runners: Callable[[], Mapping[str, ServerRunner]] | None = None,
    ) -> Any:
        """The ``execute`` of ``mcp__<server>__<tool>``: the call sent to the server's runner
        (looked up in ``runners()``, default the session's; a subagent's servers have theirs)."""
        lookup = runners or (lambda: self._runners)

        async def execute(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
            runner = lookup().get(server)
            if runner is None or self._closing:
                return ToolResult.text(
                    f"MCP server {server!r} is not running (the MCP feature is reloading or "
                    "stopped); try again",
                    is_error=True,
                )
            from .client import McpCallError  # imported already: a runner exists

            progress = ProgressSlot(api)
            piece: dict[str, Any] = {}
            failed: list[str] = []
            with cancel_scope(ctx):
                async with anyio.create_task_group() as group:
                    group.start_soon(progress.run, ctx)
                    try:  # caught here: a task group would wrap it in a group
                        piece = await runner.call_tool(
                            tool, dict(args), progress.heard, self._asker(server, api, ctx)
                        )
                    except McpCallError as exc:
                        failed.append(str(exc))
                    group.cancel_scope.cancel()
            if failed:
                return ToolResult.text(failed[0], is_error=True)
            return ToolResult(
                content=piece["content"], is_error=piece["is_error"], details=piece["details"]
            )

        return execute


class _ScopedPort:
    """What :mod:`.scoped` (a subagent's own servers) uses of an :class:`McpHost`: kept off the
    host, whose public members the ``mcp.servers`` service exposes."""

    def __init__(self, host: McpHost) -> None:
        self._host = host

    @property
    def harness(self) -> HarnessServiceApi:
        return self._host._harness

    @property
    def env(self) -> Mapping[str, str] | None:
        """The environment the configuration expands ``${VAR}`` with (``mcp_env``)."""
        return self._host._env

    @property
    def startup_timeout(self) -> float | None:
        return self._host._startup_timeout

    def configured(self) -> list[str]:
        """The session's servers (the configuration's, not a subagent's)."""
        return list(self._host._order)

    def project_trusted(self) -> bool:
        """Whether the project is trusted now (the ``project_trusted`` harness service)."""
        return self._host._services().get("project_trusted") is True

    def only_given(self) -> str | None:
        """Who said that only the servers it brought run this session (``--mcp-config`` with
        ``--strict-mcp-config``: ``"strict": true`` in :data:`~.config.CLIENT_SERVERS_SERVICE`),
        else ``None``."""
        brought = self._host._services().get(CLIENT_SERVERS_SERVICE)
        if not isinstance(brought, Mapping) or brought.get("strict") is not True:  # pyright: ignore[reportUnknownMemberType]
            return None
        source = brought.get("source")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        return source if isinstance(source, str) and source else "the client's servers"

    def new_runner(self, spec: Any, notify: Any) -> ServerRunner:
        """A runner for ``spec`` started as the session's servers are (same working folder,
        environment scrubbing, sandbox, OAuth folder), telling ``notify`` its news."""
        from .client import ServerRunner

        return ServerRunner(spec, notify, **self._host._runner_args)

    def spawn(self, key: str, connection: Any) -> Callable[[], None]:
        """Run ``connection.run(ctx)`` as an :data:`McpConnections` instance until closed."""
        return self._host._connections.spawn(key, connection)

    def show(self, server: McpServer) -> None:
        """Publish a subagent's server in ``state`` (after the session's)."""
        if self._host._closing:
            return
        self._host._servers[server["name"]] = server
        if server["name"] not in self._host._scoped_order:
            self._host._scoped_order.append(server["name"])
        self._host._publish_state()

    def hide(self, name: str) -> None:
        """A subagent's server is gone: drop it from ``state``."""
        if name in self._host._scoped_order:
            self._host._scoped_order.remove(name)
            self._host._servers.pop(name, None)
            if not self._host._closing:
                self._host._publish_state()

    def tool_names(self, server: str) -> list[str]:
        """The registered tool names of the session's server ``server``."""
        return self._host._names(server)

    def executor(self, server: str, tool: str, runners: Callable[[], Mapping[str, Any]]) -> Any:
        """The ``execute`` of a subagent's server's tool (the session's call path)."""
        return self._host._execute(server, tool, runners)


@define_facet("@pi/mcp")
def session_facet(env: FacetEnvironment) -> None:
    """Start the configured MCP servers in the background; offer their tools; provide
    ``mcp.servers``."""
    harness = env.use(HarnessService)
    connections = env.provide_many(McpConnections)
    hook_tools = env.provide_many(McpHookTools)
    elicitations = env.provide_many(McpElicitations)
    sampling = env.provide_many(McpSampling)
    host = McpHost(
        harness,
        env.replicated_state({"servers": [], "errors": []}),
        connections,
        elicitations,
        env.replicated_state,
        sampling,
    )
    env.provide(McpServers, host)

    async def activate() -> None:
        env.own(host.stop)
        await host.start()
        env.own(hook_tools.spawn("session", HookTools(host._running)))

    env.on_activate(activate)


class _Connection:
    """The implementation of one :data:`McpConnections` instance: the runner, and with an
    attendance the watch that stops its server while nobody is attached (:mod:`.idle`)."""

    def __init__(
        self, runner: ServerRunner, attendance: Attendance | None, idle_timeout: float
    ) -> None:
        self._runner = runner
        self._attendance = attendance
        self._idle_timeout = idle_timeout

    async def run(self, ctx: Context) -> None:
        with cancel_scope(ctx):
            async with anyio.create_task_group() as group:
                if self._attendance is not None:
                    from .idle import stop_while_unattended

                    group.start_soon(
                        stop_while_unattended, self._runner, self._attendance, self._idle_timeout
                    )
                await self._runner.run()
                group.cancel_scope.cancel()


@define_facet("@pi/mcp-connections")
def connections_facet(env: FacetEnvironment) -> None:
    """Run every server's life (its :class:`~.client.ServerRunner`) while its instance is open."""

    async def run(connection: Any, ctx: Context) -> None:
        try:
            await connection.run(ctx)
        except Exception:  # a runner never raises; if it did, that server stops alone
            _log.exception("an MCP server's runner failed")

    env.observe(McpConnections, run)
