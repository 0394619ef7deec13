"""One MCP server's connection, run in its observer task on the worker's loop.

:class:`ServerRunner` owns one server: it starts it (a subprocess over stdio, a streamable
HTTP endpoint or a legacy HTTP+SSE one, with OAuth when a remote server asks, see :mod:`.auth`),
initializes the MCP session, lists its tools, resources and prompts, reports each change through
``notify`` and serves :meth:`ServerRunner.call_tool`. When the server dies (its stdout closes,
a ping goes unanswered) or cannot be started, it is ``failed`` with the reason and the tail
of its stderr, and it is started again after a backoff (0.5 s, doubling, at most 30 s;
back to 0.5 s after it stayed ready for a minute). After :data:`GIVE_UP_AFTER` starts in a row
that never became ready (a missing binary, a server that exits at once) it is not started again
(``gaveUpAfter`` in its state); a server that needs a login waits for ``/mcp login`` instead of
retrying. :meth:`ServerRunner.restart` starts it again at once.

A stdio server can be put to sleep (:meth:`ServerRunner.suspend`, by :mod:`.idle` while no
client is attached to a lingering worker): its process is stopped, its state is ``stopped``, its
tools, resources, prompts and instructions stay known, and the next request
(:meth:`ServerRunner.call_tool`, a resource read, a prompt) or :meth:`ServerRunner.wake` starts
it again; the request waits for it to be ready (at most :data:`INIT_TIMEOUT`).

A call never takes more than the server's ``timeout``; a hang, an answer that is not JSON-RPC, a
result the SDK refuses or a dead server make that one call raise :class:`McpCallError` with a
message naming the server, the tool and what happened. The runner itself survives all of them.

Results are mapped to the harness's tool-result pieces by :func:`~.results.map_result`.

Why one module: :class:`ServerRunner` is one state machine, a server's life from start to
restart (the transport it opens, the session it initializes, the listings it refreshes, the
calls it serves, the login it waits for, the back-off it gives up after), and every branch reads
and writes the same few fields of it. What is not that machine already lives beside it (the size
caps in :mod:`.stdio` and :mod:`.http_bound`, OAuth in :mod:`.auth`, listings and results in
:mod:`.listing` and :mod:`.results`, the server's requests in :mod:`.callbacks`).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TextIO

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

if TYPE_CHECKING:  # the MCP SDK (and pydantic, and httpx with its rich CLI) cost a worker
    # start ~1 s of CPU: imported where a server is run or a result mapped, never at import time
    from mcp import ClientSession, StdioServerParameters, types
    from mcp.shared.message import SessionMessage

from pico3 import ChildEnvironment, Sandbox

from .auth import LOGIN_TIMEOUT, LoginFlow, TokenFile, login_problem, token_path
from .callbacks import elicitation_callback, roots_callback, sampling_callback
from .config import DEFAULT_MAX_MESSAGE_BYTES, ServerSpec
from .contract import (
    McpPrompt,
    McpResource,
    McpServer,
    McpTemplate,
    McpTool,
    ServerState,
    tool_name,
)
from .listing import list_prompts, list_resources, list_templates, list_tools, needs_task
from .problems import (
    GARBAGE_GRACE,
    NotJsonRpc,
    Worded,
    connect_problem,
    garbage_line,
    garbage_text,
    innermost,
    not_json_rpc,
    stderr_gist,
)
from .problems import describe as _describe
from .results import map_contents, map_result, progress_text, resource_text
from .stdio import TOO_LARGE_CODE, MessageTooLarge, ServerExited, bounded_stdio_client, exit_text

__all__ = [
    "GIVE_UP_AFTER",
    "INIT_TIMEOUT",
    "MAX_BACKOFF",
    "McpCallError",
    "ServerRunner",
]

INIT_TIMEOUT = 30.0
"""Seconds a server may take to start and answer ``initialize`` and the listings."""
MIN_BACKOFF = 0.5
MAX_BACKOFF = 30.0
GIVE_UP_AFTER = 5
"""Starts in a row that fail before the server is ready, after which it is not started again
until ``/mcp restart NAME`` (or the next session)."""
STABLE_AFTER = 60.0
"""A server ready this long gets its backoff reset."""
PING_EVERY = 15.0
"""HTTP servers are pinged this often (a stdio server's death shows as its stdout closing)."""
STDERR_TAIL = 2000
_REQUEST_TIMEOUT = 408
"""The code the MCP SDK gives a request that timed out (``httpx.codes.REQUEST_TIMEOUT``)."""


class McpCallError(Exception):
    """One tool call failed; the message is what the model reads."""


class _Gone(Worded):
    """The connection ended."""


class _Asleep(Exception):
    """The server was stopped to sleep (:meth:`ServerRunner.suspend`)."""


class _Unsandboxed(Worded):
    """A server configured with ``sandbox: true`` and no sandbox to run it in: never retried."""


UNSANDBOXED = (
    'MCP server {name!r} has "sandbox": true but the OS sandbox is not available in this '
    "session (see /sandbox or coding-agent config for why), so it is not started; remove "
    '"sandbox" from its entry to run it unconfined'
)
"""Why a ``sandbox: true`` server is not started where no sandbox can start."""


def _tail(text: str) -> str:
    text = text.strip()
    return text[-STDERR_TAIL:] if len(text) > STDERR_TAIL else text


def _schema(raw: Any) -> dict[str, Any]:
    schema: dict[str, Any] = dict(raw) if isinstance(raw, dict) else {}  # pyright: ignore[reportUnknownArgumentType]
    schema.setdefault("type", "object")
    if schema.get("type") == "object":
        schema.setdefault("properties", {})
    return schema


class ServerRunner:
    """One server's life (see the module docstring). Run it in its own task."""

    def __init__(
        self,
        spec: ServerSpec,
        notify: Callable[[McpServer, list[dict[str, Any]]], Awaitable[None]],
        *,
        cwd: str | None = None,
        environment: ChildEnvironment | None = None,
        auth_dir: str | None = None,
        inherit: Mapping[str, str] | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        root: str | None = None,
        sampler: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]] | None = None,
        sandbox: Sandbox | None = None,
    ) -> None:
        self.spec = spec
        self._sandbox = sandbox
        """The session's sandbox: a ``sandbox: true`` stdio server runs in it."""
        # OAuth (remote servers): the tokens' file under the agent's state, a login in progress
        self._tokens = TokenFile(
            token_path(auth_dir, spec.name, spec.url) if auth_dir and spec.url else None
        )
        self._login: LoginFlow | None = None
        self._attempt: LoginFlow | None = None
        """The login the current connection runs (``_login`` may be a newer one)."""
        self._needs_login = False
        self._notify = notify
        self._cwd = spec.cwd or cwd
        # a stdio server inherits the user's environment (``inherit``, default os.environ when
        # it starts) plus its ``env`` block, both scrubbed: a secret reaches it only when passed
        # through (as Claude Code does, minus the agent's own keys)
        self._environment = environment if environment is not None else ChildEnvironment.default()
        self._inherit = inherit
        self._max_bytes = max_message_bytes
        self._session: ClientSession | None = None
        self._state: ServerState = "starting"
        self._error = ""
        self._retry_in: float | None = None
        self._gave_up = False
        self._restarts = 0
        self._tools: list[types.Tool] = []
        self._resources: list[McpResource] = []
        self._prompts: list[McpPrompt] = []
        self._garbage = ""
        self._first_garbage = ""
        """While starting: the first line on stdout that was not JSON-RPC (before any that was)."""
        self._garbage_seen = anyio.Event()
        self._heard = False
        """A valid message came on this connection."""
        self._exit: ServerExited | None = None
        self._refused = ""
        self._root = root
        self._instructions = ""
        self._capabilities: types.ServerCapabilities | None = None
        self._templates: list[McpTemplate] = []
        self._notes: list[str] = []
        self._changed: set[str] = set()
        self._sampler = sampler
        self._askers: list[Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = []
        self._change = anyio.Event()
        self._restart_now = anyio.Event()
        self._stderr: TextIO | None = None
        self._sleep_now = anyio.Event()
        self._wake = anyio.Event()
        self.asleep = False
        """Stopped by :meth:`suspend` until the next use (state ``stopped``)."""
        self.busy = 0
        """Requests in flight."""
        self.last_used = time.monotonic()
        """When the last request ended (or the runner was made)."""
        self._published = anyio.Event()

    # -- what the panel shows ----------------------------------------------------------------
    def stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.flush()
            self._stderr.seek(0, 2)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - 4 * STDERR_TAIL))
            return _tail(self._stderr.read())
        except (OSError, ValueError):
            return ""

    def snapshot(self) -> McpServer:
        spec = self.spec
        tools: list[McpTool] = [
            {
                "name": tool_name(spec.name, t.name),
                "tool": t.name,
                "description": t.description or "",
            }
            for t in self._tools
        ]
        server: McpServer = {
            "name": spec.name,
            "transport": spec.transport,
            "source": spec.source,
            "state": self._state,
            "tools": tools,
            "resources": list(self._resources),
            "prompts": list(self._prompts),
            "restarts": self._restarts,
        }
        if self._templates:
            server["templates"] = list(self._templates)
        if self._notes:
            server["notes"] = list(self._notes)
        if self._error:
            server["error"] = self._error
        stderr = self.stderr_tail()
        if stderr and self._state == "failed":
            server["stderr"] = stderr
            server["stderrGist"] = stderr_gist(stderr)
        if self._retry_in is not None and self._state == "failed":
            server["retryInSeconds"] = self._retry_in
        if self._login is not None and self._login.authorization_url:
            server["loginUrl"] = self._login.authorization_url
        if self._gave_up and self._state == "failed":
            server["gaveUpAfter"] = GIVE_UP_AFTER
        if spec.sandbox:
            server["sandboxed"] = True
        return server

    def tool_schemas(self) -> list[dict[str, Any]]:
        return [
            {"tool": t.name, "description": t.description or "", "schema": _schema(t.inputSchema)}
            for t in self._tools
        ]

    def child_env(self) -> dict[str, str]:
        """A stdio server's whole environment: the user's, then its ``env`` block, scrubbed."""
        inherited = os.environ if self._inherit is None else self._inherit
        return self._environment.scrub({**inherited, **self.spec.env})

    def _stdio_parameters(self) -> StdioServerParameters:
        """How a stdio server is started: its command, or with ``sandbox: true`` the session's
        ``bwrap`` running it (:meth:`pico3.Sandbox.wrap`: the agent's command policy)."""
        from mcp import StdioServerParameters
        from mcp.client.stdio import get_default_environment

        spec = self.spec
        argv, environ = [spec.command, *spec.args], self.child_env()
        if spec.sandbox:
            if self._sandbox is None:
                raise _Unsandboxed(UNSANDBOXED.format(name=spec.name))
            cwd = self._cwd or os.getcwd()
            argv, environ = self._sandbox.wrap(
                argv, cwd=cwd, env={**get_default_environment(), **environ}
            )
        return StdioServerParameters(command=argv[0], args=argv[1:], env=environ, cwd=self._cwd)

    async def _publish(self) -> None:
        published, self._published = self._published, anyio.Event()
        published.set()
        await self._notify(self.snapshot(), self.tool_schemas())

    async def state_changed(self) -> None:
        """Wait for the next state the runner publishes."""
        await self._published.wait()

    @property
    def state(self) -> ServerState:
        return self._state

    def suspend(self) -> None:
        """Stop a ready stdio server's process until the next use (see the module
        docstring); anything else is left as it is."""
        if self.spec.transport == "stdio" and self._state == "ready" and not self.busy:
            self._sleep_now.set()

    def wake(self) -> None:
        """Start a sleeping server again (no-op when it is not asleep)."""
        self._wake.set()

    # -- the life ------------------------------------------------------------------------------
    def restart(self) -> None:
        """Start again now: drop the connection if any, skip the backoff."""
        self._restart_now.set()
        self._wake.set()

    async def run(self) -> None:
        backoff = MIN_BACKOFF
        failures = 0  # starts in a row that never became ready
        try:
            while True:
                self._state, self._retry_in, self._gave_up = "starting", None, False
                await self._publish()
                ready_at: list[float] = []
                login = self._attempt = self._login
                self._needs_login = False
                try:
                    await self._serve(ready_at)
                except Exception as exc:
                    inner = innermost(exc)
                    if isinstance(inner, _Asleep):
                        await self._sleep()
                        continue
                    if isinstance(inner, _Unsandboxed):  # not a failure a retry could mend
                        failures = GIVE_UP_AFTER - 1
                    problem = login_problem(exc, self.spec.name, logging_in=login is not None)
                    self._needs_login = problem is not None
                    if problem is None and self.spec.transport != "stdio":
                        problem = connect_problem(exc, self.spec.url, starting=not ready_at)
                    self._error = problem or _describe(exc)
                self._session = None
                if login is not None:  # that login is over, whatever happened
                    login.settle(self._error or "the connection ended")
                    await login.aclose()
                    if self._login is login:
                        self._login = None
                if ready_at and time.monotonic() - ready_at[0] >= STABLE_AFTER:
                    backoff = MIN_BACKOFF
                failures = 0 if ready_at else failures + 1
                self._state = "failed"
                if self._restart_now.is_set():
                    self._retry_in = 0.0
                    failures = 0
                elif self._needs_login:  # no retry loop: /mcp login (or restart) goes on
                    await self._publish()
                    await self._restart_now.wait()
                    failures, backoff = 0, MIN_BACKOFF
                elif failures >= GIVE_UP_AFTER:
                    # a missing binary, a server that exits at once: not retried forever
                    self._gave_up = True
                    await self._publish()
                    await self._restart_now.wait()
                    failures, backoff = 0, MIN_BACKOFF
                else:
                    self._retry_in = backoff
                    await self._publish()
                    with anyio.move_on_after(backoff):
                        await self._restart_now.wait()
                    backoff = min(backoff * 2, MAX_BACKOFF)
                self._restart_now = anyio.Event()
                self._restarts += 1
        finally:
            self._session = None
            if self._stderr is not None:
                self._stderr.close()

    async def _sleep(self) -> None:
        """Stay ``stopped`` until :meth:`wake` (or :meth:`restart`)."""
        self._session, self._state, self._error = None, "stopped", ""
        self.asleep = True
        if not self._wake.is_set():
            await self._publish()
            await self._wake.wait()
        self.asleep = False
        self._sleep_now, self._wake = anyio.Event(), anyio.Event()
        self._restart_now = anyio.Event()

    async def _serve(self, ready_at: list[float]) -> None:
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared.message import SessionMessage

        spec = self.spec
        self._garbage = self._first_garbage = ""
        self._garbage_seen, self._heard, self._exit = anyio.Event(), False, None
        async with AsyncExitStack() as stack:
            if spec.transport == "stdio":
                if self._stderr is not None:
                    self._stderr.close()
                self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
                # a sandboxed server's wrap may read the repository's submodules with git
                # first: in a thread, as the bash tool's
                params = (
                    await anyio.to_thread.run_sync(self._stdio_parameters)
                    if spec.sandbox
                    else self._stdio_parameters()
                )
                read, write = await stack.enter_async_context(
                    bounded_stdio_client(
                        params, self._stderr, max_bytes=self._max_bytes, name=spec.name
                    )
                )
            else:
                import httpx

                from .auth import oauth_provider
                from .http_bound import bounded_transport

                auth = oauth_provider(spec.name, spec.url, self._tokens, self._login)
                max_bytes = self._max_bytes

                def bounded_client(
                    headers: dict[str, str] | None = None,
                    timeout: httpx.Timeout | None = None,
                    auth: httpx.Auth | None = None,
                ) -> httpx.AsyncClient:
                    """An httpx client whose messages are held to the size cap."""
                    return httpx.AsyncClient(
                        headers=headers,
                        timeout=timeout if timeout is not None else httpx.Timeout(30.0, read=300.0),
                        auth=auth,
                        transport=bounded_transport(max_bytes, spec.name),
                    )

                if spec.transport == "sse":
                    from mcp.client.sse import sse_client

                    read, write = await stack.enter_async_context(
                        sse_client(
                            spec.url,
                            dict(spec.headers),
                            30.0,
                            300.0,
                            httpx_client_factory=bounded_client,
                            auth=auth,
                        )
                    )
                else:
                    client = bounded_client(dict(spec.headers), auth=auth)
                    await stack.enter_async_context(client)
                    read, write, _ = await stack.enter_async_context(
                        streamable_http_client(spec.url, http_client=client)
                    )
            inbound, session_read = anyio.create_memory_object_stream[SessionMessage | Exception](
                16
            )
            stack.push_async_callback(session_read.aclose)
            stack.push_async_callback(inbound.aclose)
            closed = anyio.Event()
            group = await stack.enter_async_context(anyio.create_task_group())
            group.start_soon(self._pump, read, inbound, closed)
            session = await stack.enter_async_context(
                ClientSession(
                    session_read,
                    write,
                    list_roots_callback=roots_callback(self._root),
                    message_handler=self._on_message,
                    elicitation_callback=elicitation_callback(self._askers),
                    sampling_callback=sampling_callback(self.spec.name, self._sampler),
                )
            )
            await self._initialize(session)
            self._session = session
            self._state, self._error = "ready", ""
            if self._attempt is not None:  # logged in, or the server did not ask
                self._attempt.settle()
                if self._login is self._attempt:
                    self._login = None
            ready_at.append(time.monotonic())
            await self._publish()
            async with anyio.create_task_group() as watch:
                if spec.transport != "stdio":
                    watch.start_soon(self._heartbeat, session, closed)

                async def ended() -> None:
                    await closed.wait()
                    watch.cancel_scope.cancel()

                async def restart() -> None:
                    await self._restart_now.wait()
                    watch.cancel_scope.cancel()

                async def sleep() -> None:
                    await self._sleep_now.wait()
                    watch.cancel_scope.cancel()

                watch.start_soon(ended)
                watch.start_soon(restart)
                watch.start_soon(sleep)
                watch.start_soon(self._follow_changes, session)
            self._session = None
            group.cancel_scope.cancel()
            if self._restart_now.is_set():
                raise _Gone("restarted on request")
            if self._sleep_now.is_set():
                raise _Asleep
            if spec.transport == "stdio":
                raise _Gone(f"the server {self._ended()}")
            raise _Gone(self._error or "the server stopped answering")

    def _ended(self) -> str:
        """How a stdio server's connection ended (its exit status when known)."""
        if self._exit is None or self._exit.code is None:
            return "exited (its output closed)"
        return exit_text(self._exit.code)

    async def _initialize(self, session: ClientSession) -> None:
        """``initialize`` and the listings, within :data:`INIT_TIMEOUT`; a stdio server that
        wrote only non-JSON-RPC on stdout fails :data:`~.problems.GARBAGE_GRACE` s after that,
        one whose output closed says how it ended, each with what it wrote."""
        from mcp import McpError
        from mcp.types import CONNECTION_CLOSED

        # a login happens inside the first request: the user gets LOGIN_TIMEOUT for it
        limit = INIT_TIMEOUT + (LOGIN_TIMEOUT if self._attempt else 0)
        stage = "initialize"
        try:
            with anyio.fail_after(limit):
                async with anyio.create_task_group() as starting:
                    if self.spec.transport == "stdio":
                        starting.start_soon(self._garbage_watch)
                    initialized = await session.initialize()
                    stage = "the listings"
                    self._instructions = (initialized.instructions or "").strip()
                    self._capabilities = initialized.capabilities
                    await self._refresh(session, {"tools", "resources", "prompts"})
                    starting.cancel_scope.cancel()
        except TimeoutError:
            wrote = f"; {not_json_rpc(self._first_garbage)}" if self._first_garbage else ""
            raise _Gone(f"did not answer {stage} within {limit:g} s{wrote}") from None
        except Exception as exc:
            inner = innermost(exc)  # the task group's
            closed = isinstance(inner, McpError) and inner.error.code == CONNECTION_CLOSED
            if self.spec.transport != "stdio" or not closed:
                raise
            wrote = f"; {not_json_rpc(self._first_garbage)}" if self._first_garbage else ""
            ended = self._ended() if self._exit is not None else "closed its output"
            raise _Gone(f"the server {ended} before it was ready{wrote}") from None

    async def _garbage_watch(self) -> None:
        """Fail the start :data:`~.problems.GARBAGE_GRACE` s after a line that is not
        JSON-RPC, unless a valid message came meanwhile."""
        await self._garbage_seen.wait()
        await anyio.sleep(GARBAGE_GRACE)
        if not self._heard:
            raise NotJsonRpc(not_json_rpc(self._first_garbage))

    async def _pump(
        self,
        read: MemoryObjectReceiveStream[SessionMessage | Exception],
        inbound: MemoryObjectSendStream[SessionMessage | Exception],
        closed: anyio.Event,
    ) -> None:
        """Forward the transport's messages to the session; notice the end and garbage."""
        try:
            async with inbound:
                async for message in read:
                    if isinstance(message, MessageTooLarge):
                        self._refused = str(message)
                        continue
                    if isinstance(message, ServerExited):
                        self._exit = message
                        continue
                    if isinstance(message, Exception):
                        self._garbage = garbage_text(message)
                        if not self._heard and not self._first_garbage:
                            await self._note_garbage(garbage_line(message))
                        continue  # the session would only log it; calls time out clearly
                    self._heard = True
                    await inbound.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            closed.set()
            read.close()

    async def _note_garbage(self, line: str) -> None:
        """A starting server's first line that is not JSON-RPC: shown as its ``error`` while it
        starts (a headless run's *not ready* line says it), and timed by :meth:`_garbage_watch`."""
        self._first_garbage = line
        self._garbage_seen.set()
        if self._state == "starting":
            self._error = not_json_rpc(line)
            await self._publish()

    async def _heartbeat(self, session: ClientSession, closed: anyio.Event) -> None:
        while True:
            await anyio.sleep(PING_EVERY)
            try:
                with anyio.fail_after(PING_EVERY):
                    await session.send_ping()
            except Exception as exc:
                self._error = f"ping failed: {_describe(exc)}"
                closed.set()
                return

    # -- what the server offers, and its changes -----------------------------------------------
    async def _refresh(self, session: ClientSession, kinds: set[str]) -> None:
        """List ``kinds`` (tools, resources, prompts) again; tools that need task-augmented
        execution are left out with a note."""
        caps = self._capabilities
        if caps is None:
            return
        if "tools" in kinds:
            tools = await list_tools(session) if caps.tools else []
            self._tools = [t for t in tools if not needs_task(t)]
            self._notes = [
                f"tool {t.name!r} is hidden: it requires task-augmented execution, which this "
                "client does not support"
                for t in tools
                if needs_task(t)
            ]
        if "resources" in kinds:
            self._resources = await list_resources(session) if caps.resources else []
            self._templates = await list_templates(session) if caps.resources else []
        if "prompts" in kinds:
            self._prompts = await list_prompts(session) if caps.prompts else []

    async def _on_message(self, message: Any) -> None:
        """The session's handler for what the server sends on its own: a ``list_changed``
        notification marks that list for :meth:`_follow_changes` (listing here would wait on
        the very loop that delivers the answer)."""
        from mcp import types

        if not isinstance(message, types.ServerNotification):
            return
        root = message.root
        if isinstance(root, types.ToolListChangedNotification):
            self._changed.add("tools")
        elif isinstance(root, types.ResourceListChangedNotification):
            self._changed.add("resources")
        elif isinstance(root, types.PromptListChangedNotification):
            self._changed.add("prompts")
        else:
            return
        self._change.set()

    async def _follow_changes(self, session: ClientSession) -> None:
        while True:
            await self._change.wait()
            self._change = anyio.Event()
            kinds, self._changed = self._changed, set()
            try:
                with anyio.fail_after(INIT_TIMEOUT):
                    await self._refresh(session, kinds)
            except Exception as exc:  # the connection's death shows elsewhere
                self._error = f"could not list {', '.join(sorted(kinds))} again: {_describe(exc)}"
            await self._publish()

    @property
    def instructions(self) -> str:
        """The server's ``instructions`` from ``initialize`` (empty when none, or not ready)."""
        return self._instructions if self._state == "ready" or self.asleep else ""

    async def login(self) -> str | None:
        """Start an OAuth login (``/mcp login``): drop the stored tokens, connect again with a
        loopback callback; the authorization URL to open, or ``None`` when the server connected
        without asking. Raises :class:`~.auth.LoginFailed` when the connection failed first."""
        if self.spec.transport == "stdio":
            raise ValueError(f"MCP server {self.spec.name!r} runs over stdio: it needs no login")
        if self._login is not None:
            await self._login.aclose()
        flow = LoginFlow(self.spec.name)
        await flow.open()
        self._tokens.forget_tokens()
        self._login = flow
        self.restart()
        with anyio.fail_after(INIT_TIMEOUT):
            url = await flow.url()
        if url is not None:
            await self._publish()  # the panel shows the URL until the browser comes back
        return url

    # -- calls ---------------------------------------------------------------------------------
    async def call_tool(
        self,
        tool: str,
        arguments: dict[str, Any],
        on_progress: Callable[[str], None] | None = None,
        on_elicit: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = None,
    ) -> dict[str, Any]:
        """Call ``tool``; returns :func:`map_result`'s pieces or raises :class:`McpCallError`.
        ``on_progress`` hears each progress notification as one line (``3/10 · message``);
        ``on_elicit`` answers the server's elicitations while the call runs (an
        :class:`~.contract.ElicitationRequest` without ``server`` in, an
        :class:`~.contract.ElicitationResponse` out)."""

        async def heard(progress: float, total: float | None, message: str | None) -> None:
            if on_progress is not None:
                on_progress(progress_text(progress, total, message))

        if on_elicit is not None:
            self._askers.append(on_elicit)
        try:
            result = await self._call(tool, arguments, heard if on_progress else None)
        finally:
            if on_elicit is not None:
                self._askers.remove(on_elicit)
        return map_result(result, server=self.spec.name, tool=tool)

    async def _call(self, tool: str, arguments: dict[str, Any], heard: Any) -> types.CallToolResult:
        timeout = self.spec.timeout
        return await self._request(
            tool,
            lambda session: session.call_tool(
                tool,
                arguments,
                read_timeout_seconds=timedelta(seconds=timeout),
                progress_callback=heard,
            ),
        )

    async def read_resource(self, uri: str) -> list[dict[str, Any]]:
        """``resources/read`` of ``uri`` (a listed resource, or a template filled in)."""
        from pydantic import AnyUrl, ValidationError

        try:
            url = AnyUrl(uri)
        except ValidationError:
            raise McpCallError(f"{uri!r} is not a URI (scheme://...)") from None
        result = await self._request(f"read {uri}", lambda session: session.read_resource(url))
        return map_contents(result)

    async def get_prompt(self, prompt: str, arguments: dict[str, str]) -> list[dict[str, Any]]:
        """``prompts/get``: the prompt's messages as ``{"role", "text"}`` (other content as a
        short note)."""
        from mcp import types

        result = await self._request(
            f"prompt {prompt}", lambda session: session.get_prompt(prompt, arguments)
        )
        messages: list[dict[str, Any]] = []
        for message in result.messages:
            content = message.content
            if isinstance(content, types.TextContent):
                text = content.text
            elif isinstance(content, types.EmbeddedResource):
                text = resource_text(content.resource)["text"]
            else:
                text = f"[{content.type} content, not shown]"
            messages.append({"role": message.role, "text": text})
        return messages

    async def _request(self, what: str, send: Callable[[ClientSession], Awaitable[Any]]) -> Any:
        """``send(session)`` bounded by the server's ``timeout``; every failure is an
        :class:`McpCallError` naming the server, ``what`` and what happened. A sleeping
        server is woken first."""
        self.busy += 1
        try:
            if self.asleep or self._sleep_now.is_set() or self._between_connections():
                await self._awake()
            return await self._send(what, send)
        finally:
            self.busy -= 1
            self.last_used = time.monotonic()

    def _between_connections(self) -> bool:
        """Whether a restart is under way: asked for (``/mcp`` restart) and not yet begun, or
        the connection dropped while the state still says ``ready``. A call then waits for the
        new connection instead of failing with "not ready (ready)"."""
        return self._restart_now.is_set() or (self._session is None and self._state == "ready")

    async def _awake(self) -> None:
        """Wake a sleeping server (or wait out a restart under way) until it is ready or
        failed (bounded)."""
        with anyio.move_on_after(INIT_TIMEOUT):
            while (
                self.asleep
                or self._sleep_now.is_set()
                or self._state == "starting"
                or self._between_connections()
            ):
                self.wake()
                await self.state_changed()

    async def _send(self, what: str, send: Callable[[ClientSession], Awaitable[Any]]) -> Any:
        from mcp import McpError

        name = self.spec.name
        session = self._session
        if session is None or self._state != "ready":
            why = f": {self._error}" if self._error else ""
            raise McpCallError(
                f"MCP server {name!r} is not ready ({self._state}{why}); "
                "it is started again automatically, try again shortly or see /mcp"
            )
        timeout = self.spec.timeout
        try:
            with anyio.fail_after(timeout):
                return await send(session)
        except TimeoutError:
            note = (
                f"; it also wrote output that is not JSON-RPC: {self._garbage}"
                if self._garbage
                else ""
            )
            if self._refused:
                note += f"; {self._refused}"
            raise McpCallError(
                f"MCP server {name!r} did not answer {what} within {timeout:g} s{note}"
            ) from None
        except McpError as exc:
            if exc.error.code == TOO_LARGE_CODE and exc.error.message.startswith("MCP server"):
                raise McpCallError(exc.error.message) from None  # it names the server and cap
            if exc.error.code == _REQUEST_TIMEOUT:
                raise McpCallError(
                    f"MCP server {name!r} did not answer {what} within {timeout:g} s"
                ) from None
            raise McpCallError(f"MCP server {name!r} failed {what}: {exc.error.message}") from None
        except Exception as exc:
            raise McpCallError(
                f"MCP server {name!r} gave an unusable answer to {what}: {_describe(exc)}"
            ) from None
