"""The MCP session facet: MCP servers' tools for the model, and the ``mcp.servers`` service.

When the facet activates it reads the configuration (:mod:`.config`: the user's ``mcp.json`` and,
when the project is trusted, its ``.mcp.json``), starts the MCP event loop — an anyio blocking
portal, a thread of its own, so no server can stall the worker's loop — and one
:class:`~.client.ServerRunner` per server there. Activation does not wait for any server: the
agent is usable at once and each server's tools appear when it is ready.

Each ready server's tools are registered on the harness as ``mcp__<server>__<tool>`` with the
server's JSON Schema (a tool whose schema the harness refuses is left out and named in the
server's ``error``), ``replay="unsafe"`` (a call interrupted by a crash is not sent again), and
added to the root conversation's ``selectedTools``. The calls go through the approval feature
like any other tool; its default rules ask for every ``mcp__*`` tool. A call is sent to the
server's current connection on the MCP loop and awaited without blocking the worker; a failure
(the server hung, answered garbage, died) is that call's error result. While a server restarts
its tools stay registered and a call says so.

The service's replicated ``state`` (:class:`~.contract.McpState`) follows every server. Nothing
here is durable: a hot reload disposes the facet (the portal stops and the servers with it) and
the new generation starts them again; the conversation is untouched.

Where things are comes from the harness's ``services``: ``workspace`` (the working folder, the
servers' working directory), ``project_root`` (where ``.mcp.json`` is looked for, default the
workspace) and ``project_trusted`` (default ``False``); ``mcp_env`` may replace ``os.environ``
(tests).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from contextlib import AbstractContextManager
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from chord.context import BACKGROUND, Context, cancel_scope
from chord.facets import FacetEnvironment, define_facet
from chord.remote import RemoteServiceError
from chord.state import MutableReplicatedState
from pico3 import ToolApi, ToolDeclaration, ToolResult
from pico3.chord import Harness, HarnessService

from .client import McpCallError, ServerRunner
from .config import load_config
from .contract import McpServer, McpServers, McpState, tool_name

__all__ = ["McpHost", "session_facet"]

_log = logging.getLogger("facets_mcp")


async def _await_future(future: Future[Any], ctx: Context) -> Any:
    """Await a portal future from the worker's loop without blocking it (cancel → cancel)."""
    if not future.done():
        done = anyio.Event()
        token = anyio.lowlevel.current_token()
        loop_thread = threading.get_ident()

        def wake(_future: Future[Any]) -> None:
            if threading.get_ident() == loop_thread:
                done.set()
                return
            try:
                anyio.from_thread.run_sync(done.set, token=token)
            except RuntimeError:  # the worker's loop is gone
                pass

        future.add_done_callback(wake)
        try:
            with cancel_scope(ctx):
                await done.wait()
        finally:
            if not future.done():
                future.cancel()
    return future.result()


class McpHost:
    """The live MCP side of one facet activation: the portal, the runners, the registrations,
    and the :data:`~.contract.McpServers` provider (``state`` and ``restart``)."""

    def __init__(self, harness: HarnessService, state: MutableReplicatedState) -> None:
        self._harness = harness
        self.state = state
        self._portal_cm: AbstractContextManager[anyio.from_thread.BlockingPortal] | None = None
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._runners: dict[str, ServerRunner] = {}
        self._futures: list[Future[Any]] = []
        self._servers: dict[str, McpServer] = {}
        self._errors: list[str] = []
        self._order: list[str] = []
        self._registered: dict[str, tuple[Any, Callable[[], None]]] = {}
        self._closing = False
        self._lock = anyio.Lock()

    # -- the service ---------------------------------------------------------------------------
    async def restart(self, name: Any, ctx: Context) -> None:
        runner = self._runners.get(name) if isinstance(name, str) else None
        portal = self._portal
        if runner is None or portal is None:
            known = ", ".join(self._order) or "none"
            raise RemoteServiceError(
                "service_invalid_value", f"Unknown MCP server {name!r} (configured: {known})"
            )
        portal.call(runner.restart)

    # -- lifecycle -----------------------------------------------------------------------------
    def _services(self) -> Mapping[str, Any]:
        return self._harness.harness.scheduler.services

    async def start(self) -> None:
        services = self._services()
        workspace = services.get("workspace")
        project = services.get("project_root") or workspace
        env = services.get("mcp_env")
        config = load_config(
            project=project,
            project_trusted=bool(services.get("project_trusted", False)),
            env=env,
        )
        self._errors = list(config.errors)
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
        self._publish_state()
        if not config.servers:
            return
        token = anyio.lowlevel.current_token()
        self._portal_cm = anyio.from_thread.start_blocking_portal("asyncio")
        portal = self._portal = self._portal_cm.__enter__()
        cwd = str(workspace) if workspace is not None else None
        for spec in config.servers:
            notify = self._notifier(token)
            runner = portal.call(
                lambda spec=spec, notify=notify: ServerRunner(spec, notify, cwd=cwd)
            )
            self._runners[spec.name] = runner
            self._futures.append(portal.start_task_soon(runner.run))

    def _notifier(self, token: Any) -> Callable[[McpServer, list[dict[str, Any]]], Any]:
        """What a runner calls (on the MCP loop) to hand its news to the worker's loop."""

        async def notify(server: McpServer, tools: list[dict[str, Any]]) -> None:
            if self._closing:
                return

            def hand_over() -> None:
                try:
                    anyio.from_thread.run(self._apply, server, tools, token=token)
                except Exception as exc:  # the worker's loop is closing
                    _log.debug("MCP update for %s dropped: %s", server["name"], exc)

            await anyio.to_thread.run_sync(hand_over, abandon_on_cancel=True)

        return notify

    async def stop(self) -> None:
        self._closing = True
        for future in self._futures:
            future.cancel()
        cm, self._portal_cm, self._portal = self._portal_cm, None, None
        if cm is not None:
            await anyio.to_thread.run_sync(cm.__exit__, None, None, None)
        for _schemas, remove in self._registered.values():
            remove()
        self._registered.clear()
        self._runners.clear()

    # -- news from a runner (on the worker's loop) ----------------------------------------------
    def _publish_state(self) -> None:
        value: McpState = {
            "servers": [self._servers[name] for name in self._order if name in self._servers],
            "errors": list(self._errors),
        }
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
                await self._select(self._names(name))
            self._servers[name] = shown
            self._publish_state()

    def _names(self, server: str) -> list[str]:
        registered = self._registered.get(server)
        return [] if registered is None else [d.name for d in registered[0]]

    def _register(self, server: str, tools: list[dict[str, Any]]) -> list[str]:
        skipped: list[str] = []
        declarations: list[ToolDeclaration] = []
        for tool in tools:
            name = tool_name(server, tool["tool"])
            if any(d.name == name for d in declarations):
                skipped.append(f"tool {tool['tool']!r} skipped: its name clashes as {name}")
                continue
            try:
                declarations.append(
                    ToolDeclaration(
                        name=name,
                        description=tool["description"] or f"{tool['tool']} (MCP server {server})",
                        parameters=tool["schema"],
                        execute=self._execute(server, tool["tool"]),
                        replay="unsafe",
                    )
                )
            except (ValueError, TypeError) as exc:
                skipped.append(f"tool {tool['tool']!r} skipped: {exc}")
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
    def _execute(self, server: str, tool: str) -> Any:
        async def execute(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
            runner, portal = self._runners.get(server), self._portal
            if runner is None or portal is None or self._closing:
                return ToolResult.text(
                    f"MCP server {server!r} is not running (the MCP feature is reloading or "
                    "stopped); try again",
                    is_error=True,
                )
            try:
                future = portal.start_task_soon(runner.call_tool, tool, dict(args))
            except RuntimeError:
                return ToolResult.text(f"MCP server {server!r} is not running", is_error=True)
            try:
                piece = await _await_future(future, ctx)
            except McpCallError as exc:
                return ToolResult.text(str(exc), is_error=True)
            return ToolResult(
                content=piece["content"], is_error=piece["is_error"], details=piece["details"]
            )

        return execute


@define_facet("@pi/mcp")
def session_facet(env: FacetEnvironment) -> None:
    """Start the configured MCP servers in the background; offer their tools; provide
    ``mcp.servers``."""
    harness = env.use(Harness)
    host = McpHost(harness, env.replicated_state({"servers": [], "errors": []}))
    env.provide(McpServers, host)

    async def activate() -> None:
        env.own(host.stop)
        await host.start()

    env.on_activate(activate)
