"""A service source over the wire that reconnects: what a facet host needs from another process.

:func:`connect_service_source` returns a :class:`WireServiceSource`, a
:class:`~chord.remote.RemoteServiceSource` built on a *connect function* (for example
``lambda: connect_unix(path)``). A supervisor task in the given task group keeps one
:class:`~chord.wire.RemoteConnection` open:

* ``catalogue(ctx)`` asks the connected provider (waiting for the first connection);
* ``open(...)`` returns a :class:`~chord.remote.RemoteServiceBinding` whose transport is this
  source, so every call and subscription goes to whichever connection is current.

When the connection is lost, calls in flight fail at once with ``unavailable`` and every binding
is rebound with ``rebind(False)``: facade values become ``None``, keyed observer tasks abort and
new calls are refused at once (nothing is queued or replayed; docs/design/chord.md#connection-close). The supervisor
reconnects with jittered exponential backoff (:class:`~chord.backoff.Backoff`) and then calls
``rebind(True)`` on every binding, so each facade re-hydrates from a fresh snapshot (a ``hydrate`` delivery) and keyed
instances reappear as new observations. Whoever knows the provider is back (a supervisor that
restarted the worker and read its ready line) calls :meth:`WireServiceSource.retry_now`: the
next attempt is made at once instead of at the end of the backoff's current wait.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

import anyio
from anyio.abc import TaskGroup

from chord.backoff import Backoff
from chord.context import BACKGROUND, Context, run_with_context
from chord.json import JsonValue
from chord.remote.binding import RemoteServiceBinding, create_remote_service_binding
from chord.remote.grammar import ServiceCall, ServiceCatalogueEntry
from chord.remote.source import ServiceSubscription, ServiceUpdateListener
from chord.services import ServiceMode
from chord.transport.streams import FrameConnection
from chord.wire.client import RemoteConnection
from chord.wire.errors import UNAVAILABLE, RemoteCallError

__all__ = ["Backoff", "WireServiceSource", "connect_service_source"]

_logger = logging.getLogger("chord.wire")

ErrorReporter = Callable[[BaseException], None]
Connect = Callable[[], Awaitable[FrameConnection]]


def _default_report(error: BaseException) -> None:
    _logger.error("chord wire source error: %r", error, exc_info=error)


RECONNECT_BACKOFF = Backoff()
"""Reconnect delays: 50 ms doubling to 2 s, jittered (:class:`~chord.backoff.Backoff`)."""


class WireServiceSource:
    """A reconnecting :class:`~chord.remote.RemoteServiceSource`. See the module docstring."""

    def __init__(
        self,
        connect: Connect,
        *,
        task_group: TaskGroup,
        on_error: ErrorReporter | None = None,
        retry: Backoff = RECONNECT_BACKOFF,
        accepts_unavailable_services: bool = False,
    ) -> None:
        self._connect = connect
        self._task_group = task_group
        self._report = on_error if on_error is not None else _default_report
        self._retry = retry
        self._accepts_unavailable = accepts_unavailable_services
        self._bindings: list[RemoteServiceBinding] = []
        self._remote: RemoteConnection | None = None
        self._connected = anyio.Event()
        self._disconnected = anyio.Event()
        self._disconnected.set()
        self._started = False
        self._closing = False
        self._scope = anyio.CancelScope()
        self._stopped = anyio.Event()
        self._retry_now = anyio.Event()
        self.connections = 0
        """How many connections were established so far (1 after the first, 2 after a
        reconnect)."""

    # -- RemoteServiceSource ----------------------------------------------------------------

    @property
    def accepts_unavailable_services(self) -> bool:
        return self._accepts_unavailable

    async def catalogue(self, ctx: Context) -> Sequence[ServiceCatalogueEntry]:
        """The connected provider's catalogue (waits for a connection)."""
        while True:
            remote = await self._current(ctx)
            try:
                return await remote.catalogue(ctx)
            except RemoteCallError as error:
                if error.code != UNAVAILABLE:
                    raise

    def open(
        self,
        *,
        services: Sequence[str],
        assert_access: Callable[[], None],
        on_error: Callable[[BaseException], None],
    ) -> RemoteServiceBinding:
        """A binding for ``services`` whose calls and subscriptions use the live connection."""
        self.start()
        binding = create_remote_service_binding(
            services=services,
            transport=self,
            bound=self.connected,
            on_error=on_error,
            assert_access=assert_access,
            task_group=self._task_group,
            # The connection checked every snapshot and update on its way in (the frame's
            # strict-JSON decode, the grammar and the op decode): the replicas need not again.
            trusted=True,
        )
        self._bindings.append(binding)
        return binding

    # -- RemoteServiceTransport (for the bindings) -------------------------------------------

    def invoke(self, call: ServiceCall, ctx: Context) -> Awaitable[JsonValue | None]:
        """Send ``call`` over the current connection; ``unavailable`` at once without one."""
        remote = self._remote
        if remote is None or remote.closed:
            raise RemoteCallError(UNAVAILABLE, "Remote service connection is unavailable")
        return remote.invoke(call, ctx)

    def subscribe(
        self,
        service_id: str,
        mode: ServiceMode,
        listener: ServiceUpdateListener,
        ctx: Context,
    ) -> Awaitable[ServiceSubscription]:
        """Subscribe over the current connection; ``unavailable`` at once without one."""
        remote = self._remote
        if remote is None or remote.closed:
            raise RemoteCallError(UNAVAILABLE, "Remote service connection is unavailable")
        return remote.subscribe(service_id, mode, listener, ctx)

    # -- connection state ---------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """True while a connection is up and every binding has been rebound to it."""
        return self._connected.is_set()

    @property
    def connection(self) -> RemoteConnection | None:
        """The current connection (``None`` between connections)."""
        return self._remote

    async def wait_connected(self, ctx: Context = BACKGROUND) -> None:
        """Return once connected and every binding is bound (hydrating) to the connection."""
        self.start()
        await run_with_context(self._connected.wait, ctx)

    async def wait_disconnected(self, ctx: Context = BACKGROUND) -> None:
        """Return once disconnected and every binding is unbound (values ``None``)."""
        await run_with_context(self._disconnected.wait, ctx)

    def retry_now(self) -> None:
        """Connect again at once if the loop is waiting out a backoff delay (the provider is
        known to be back); the backoff goes on from its start if that attempt fails too.
        Nothing happens while connected."""
        self._retry_now.set()

    def start(self) -> None:
        """Start the connect/reconnect loop (idempotent; ``catalogue`` and ``open`` call it)."""
        if self._started:
            return
        self._started = True
        self._task_group.start_soon(self._supervise)

    async def aclose(self) -> None:
        """Stop reconnecting, dispose the bindings and close the connection. Idempotent."""
        if self._closing:
            return
        self._closing = True
        self._scope.cancel()
        if self._started:
            await self._stopped.wait()
        for binding in self._bindings:
            try:
                await binding.dispose(BACKGROUND)
            except Exception as error:
                self._report(error)

    # -- internals ----------------------------------------------------------------------------

    async def _current(self, ctx: Context) -> RemoteConnection:
        while True:
            await self.wait_connected(ctx)
            remote = self._remote
            if remote is not None and not remote.closed:
                return remote
            await self.wait_disconnected(ctx)

    async def _supervise(self) -> None:
        try:
            with self._scope:
                delays = self._retry.delays()
                while True:
                    self._retry_now = anyio.Event()
                    try:
                        conn = await self._connect()
                    except OSError:
                        with anyio.move_on_after(next(delays)):
                            await self._retry_now.wait()
                        if self._retry_now.is_set():
                            delays = self._retry.delays()
                        continue
                    delays = self._retry.delays()
                    await self._serve(RemoteConnection(conn, on_error=self._report))
        finally:
            remote, self._remote = self._remote, None
            if remote is not None:
                with anyio.CancelScope(shield=True):
                    await remote.aclose()
            self._stopped.set()

    async def _serve(self, remote: RemoteConnection) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(remote.run)
            self._remote = remote
            self.connections += 1
            for binding in list(self._bindings):
                if not binding.disposed and not binding.bound:
                    await self._rebind(binding, True)
            self._disconnected = anyio.Event()
            self._connected.set()
            await remote.wait_closed()
            self._remote = None
            self._connected = anyio.Event()
            for binding in list(self._bindings):
                if not binding.disposed and binding.bound:
                    await self._rebind(binding, False)
            self._disconnected.set()

    async def _rebind(self, binding: RemoteServiceBinding, bound: bool) -> None:
        try:
            await binding.rebind(bound, BACKGROUND)
        except Exception as error:
            self._report(error)


def connect_service_source(
    connect: Connect,
    *,
    task_group: TaskGroup,
    on_error: ErrorReporter | None = None,
    retry: Backoff = RECONNECT_BACKOFF,
    accepts_unavailable_services: bool = False,
) -> WireServiceSource:
    """A reconnecting service source over ``connect()`` (see the module docstring).

    ``task_group`` runs the supervisor, subscription starts and keyed observer tasks; close the
    source with :meth:`WireServiceSource.aclose` (or cancel the group). ``on_error`` hears
    connection and rebind failures (default: logged on ``chord.wire``).
    """
    return WireServiceSource(
        connect,
        task_group=task_group,
        on_error=on_error,
        retry=retry,
        accepts_unavailable_services=accepts_unavailable_services,
    )
