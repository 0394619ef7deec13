"""Helpers for the session worker tests: real worker processes and a client over the wire.

* :func:`worker_process` — ``python -m coding_agent.worker.main`` as a child process; waits for
  its ``READY <socket>`` line (bounded), and is stopped through stdin EOF afterwards.
* :class:`Client` — what a TUI does, minus the screen: a facet host whose facets reach the
  worker through :func:`chord.wire.connect_service_source`; it follows the root conversation's
  ``view`` and sees the feature dialogs (``pi.approval-dialog``, ``pi.question-dialog``), which
  a test answers by hand or with an automatic policy.

Waiting is always on state (view deliveries, dialogs, lines the child prints), never on time.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from chord.context import BACKGROUND, Context
from chord.facets import Facet, FacetEnvironment, create_facet_host, define_facet
from chord.services import define_service
from chord.state import Delivery
from chord.transport import connect_unix
from chord.wire import connect_service_source
from coding_agent.session_files.folders import Session
from pico3 import ConversationService

TIMEOUT = 60.0
"""Bound of any single wait (starting a worker on a busy two-core machine is the slow part)."""

APPROVALS = define_service("pi.approval-dialog")
QUESTIONS = define_service("pi.question-dialog")
STATUS = define_service("coding-agent.worker")
MCP_SERVERS = define_service("mcp.servers")


def write_script(path: Path, steps: list[dict[str, Any]]) -> Path:
    """A faux script file for ``--faux-script``."""
    path.write_text(json.dumps(steps))
    return path


# -- the worker process ---------------------------------------------------------------------------
@dataclass
class WorkerProcess:
    process: anyio.abc.Process
    socket: Path

    async def kill(self) -> None:
        """SIGKILL, and wait for it to be gone."""
        self.process.send_signal(signal.SIGKILL)
        with anyio.fail_after(TIMEOUT):
            await self.process.wait()

    async def terminate(self) -> int:
        """SIGTERM; returns the exit code."""
        self.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(TIMEOUT):
            return await self.process.wait()


def worker_command(session: Session, *args: str) -> list[str]:
    return [sys.executable, "-m", "coding_agent.worker.main", str(session.path), *args]


@asynccontextmanager
async def worker_process(
    session: Session,
    env: dict[str, str],
    *args: str,
    on_stderr: Callable[[str], None] | None = None,
) -> AsyncIterator[WorkerProcess]:
    """Run a worker for ``session``; yields once it printed ``READY <socket>``.

    With ``on_stderr``, the worker's stderr is read line by line and handed to it."""
    process = await anyio.open_process(
        worker_command(session, "--exit-on-stdin-eof", *args),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if on_stderr is not None else None,
        env=env,
        cwd=str(session.cwd),
    )
    try:
        async with anyio.create_task_group() as group:
            if on_stderr is not None:
                assert process.stderr is not None
                group.start_soon(_read_lines, BufferedByteReceiveStream(process.stderr), on_stderr)
            assert process.stdout is not None
            lines = BufferedByteReceiveStream(process.stdout)
            with anyio.fail_after(TIMEOUT):
                line = (await lines.receive_until(b"\n", 4096)).decode()
            verb, _, path = line.partition(" ")
            assert verb == "READY", line
            yield WorkerProcess(process, Path(path))
            group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                assert process.stdin is not None
                await process.stdin.aclose()
                with anyio.fail_after(TIMEOUT):
                    await process.wait()
            await process.aclose()


async def _read_lines(stream: BufferedByteReceiveStream, deliver: Callable[[str], None]) -> None:
    try:
        while True:
            deliver((await stream.receive_until(b"\n", 1 << 20)).decode(errors="replace"))
    except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError):
        return


# -- the client -----------------------------------------------------------------------------------
Policy = Callable[[Any, dict[str, Any], Context], Awaitable[None]]
"""``policy(dialog, request, ctx)``: answers a dialog automatically."""


@dataclass(eq=False)
class Dialog:
    """A dialog the client saw: the facade, its request, and whether it is still open."""

    facade: Any
    request: dict[str, Any]
    open: bool = True


@dataclass
class Client:
    """A TUI without a screen (see the module docstring)."""

    approve: Policy | None = None
    answer: Policy | None = None
    views: list[tuple[str, Any]] = field(default_factory=list[tuple[str, Any]])
    events: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    approvals: list[Dialog] = field(default_factory=list[Dialog])
    questions: list[Dialog] = field(default_factory=list[Dialog])
    root: Any = None
    root_closed: bool = False
    status: Any = None
    _changed: anyio.Event = field(default_factory=anyio.Event)

    def notify(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        with anyio.fail_after(TIMEOUT):
            while not predicate():
                await self._changed.wait()

    @property
    def view(self) -> Any:
        return self.views[-1][1]

    def facet(self) -> Any:
        def setup(env: FacetEnvironment) -> None:
            async def on_conversation(instance: Any, ctx: Context) -> None:
                mine = False

                def deliver(value: Any, _ctx: Context, delivery: Delivery) -> None:
                    nonlocal mine
                    shown = value["conversation"]  # the root: neither a fork nor owned
                    if delivery.kind == "hydrate" and not {"parent", "owner"} & set(shown):
                        mine = True
                        self.root, self.root_closed = instance, False
                    if mine:
                        self.views.append((delivery.kind, value))
                        if delivery.kind == "update":
                            self.events.extend(value["commit"]["events"])
                        self.notify()

                stop = instance.view.subscribe(deliver)
                try:
                    await ctx.wait_cancelled()
                finally:
                    stop()
                    if mine:
                        self.root_closed = True
                        self.notify()

            def dialogs(seen: list[Dialog], policy: Callable[[], Policy | None]) -> Any:
                async def on_dialog(facade: Any, ctx: Context) -> None:
                    dialog = Dialog(facade, dict(facade.request.value))
                    seen.append(dialog)
                    self.notify()
                    try:
                        chosen = policy()
                        if chosen is not None:
                            await chosen(facade, dialog.request, ctx)
                        await ctx.wait_cancelled()
                    finally:
                        dialog.open = False
                        self.notify()

                return on_dialog

            self.status = env.use(STATUS)
            env.observe(ConversationService, on_conversation)
            env.observe(APPROVALS, dialogs(self.approvals, lambda: self.approve))
            env.observe(QUESTIONS, dialogs(self.questions, lambda: self.answer))

        return define_facet("test/client", setup)

    def event_types(self) -> list[str]:
        return [event["type"] for event in self.events]

    def turn_ended(self, count: int = 1) -> bool:
        return self.event_types().count("turn.ended") >= count

    def entries(self, kind: str) -> list[dict[str, Any]]:
        return [entry for entry in self.view["entries"] if entry["kind"] == kind]


def text_of(entry: dict[str, Any]) -> str:
    """The text of an entry's messages (string contents and text blocks)."""
    parts: list[str] = []
    for message in entry.get("model") or []:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
            continue
        for block in content or []:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
    return "".join(parts)


@asynccontextmanager
async def connected(client: Client, socket: Path, *extra: Facet) -> AsyncIterator[Client]:
    """Run ``client`` (and the ``extra`` facets) against the worker on ``socket`` (reconnecting
    across restarts).

    The host's start waits for the worker's service list; a worker that is gone for good
    (crashed, or stopped by ``--linger``) fails the test after ``TIMEOUT`` instead of hanging."""
    async with anyio.create_task_group() as group:
        attached = anyio.Event()

        async def watchdog() -> None:
            with anyio.move_on_after(TIMEOUT):
                await attached.wait()
                return
            raise TimeoutError(f"no worker served a client on {socket} within {TIMEOUT} s")

        group.start_soon(watchdog)
        source = connect_service_source(
            lambda: connect_unix(socket), task_group=group, on_error=lambda _error: None
        )
        try:
            async with create_facet_host([client.facet(), *extra], service_sources=[source]):
                await client.wait_for(lambda: client.root is not None and not client.root_closed)
                attached.set()
                yield client
        finally:
            await source.aclose()


async def until_mcp_ready(client: Client, socket: Path, name: str) -> None:
    """Watch the worker's ``mcp.servers`` state at ``socket`` over a connection of its own until
    the MCP server ``name`` is ready (its tools are offered); ``client`` is woken at each value
    (:meth:`Client.wait_for`), so its deadline bounds the wait."""
    seen: list[Any] = []

    def watcher(fenv: FacetEnvironment) -> None:
        servers = fenv.use(MCP_SERVERS)

        def deliver(value: Any, _ctx: Context, _d: Delivery) -> None:
            seen.append(value)
            client.notify()

        async def follow() -> None:
            fenv.own(servers.state.subscribe(deliver))

        fenv.on_activate(follow)

    def ready() -> bool:
        return any(
            s["name"] == name and s["state"] == "ready"
            for v in seen
            for s in (v or {}).get("servers", [])
        )

    async with anyio.create_task_group() as group:
        source = connect_service_source(lambda: connect_unix(socket), task_group=group)
        async with create_facet_host(
            [define_facet("test/mcp-watcher", watcher)], service_sources=[source]
        ):
            await client.wait_for(ready)
            await source.aclose()
        group.cancel_scope.cancel()


async def allow(facade: Any, request: dict[str, Any], ctx: Context) -> None:
    await facade.decide({"decision": "allow", "by": "test"}, BACKGROUND)


async def deny(facade: Any, request: dict[str, Any], ctx: Context) -> None:
    await facade.decide({"decision": "deny", "by": "test"}, BACKGROUND)
