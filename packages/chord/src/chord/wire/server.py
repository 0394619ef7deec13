"""Serving a provider to one peer over a frame connection.

:func:`serve_provider` runs one peer until it disconnects: it reads frames, runs requests, and
writes results and subscription updates. Every peer gets its own
:class:`~chord.remote.endpoint.RemoteServiceEndpoint`, so its subscriptions are its own, while
the :class:`~chord.remote.RemoteServiceProvider` and everything it owns are shared.

Requests
    Each request gets a fresh ``with_cancel(BACKGROUND)`` context. Control calls and
    synchronous methods are answered inline, in frame order, as the request is read (they cannot
    suspend, so a task would only cost event-loop passes). An async method runs in its own task,
    inside an anyio cancel scope tied to its context (:func:`chord.context.cancel_scope`); a
    ``cancel`` frame cancels that request's context and nothing else. Results and errors go back as ``result``
    frames; errors are ``{code, message}`` (:mod:`chord.wire.errors`), never a stack trace. At
    most ``max_concurrent_requests`` run at once; a request beyond that is refused at once with
    ``too_many_requests`` (the server never stops reading, so it always notices a disconnect).

Subscriptions
    ``$chord.service.subscribe`` gets a per-subscription state encoder (docs/design/chord.md#path-codec). The
    endpoint activates the provider subscription before it returns the snapshot, so updates
    published in between are *held* and written right after the subscribe result. Updates are
    encoded in provider order as they are published and queued for the writer task.

Slow peers (docs/design/chord.md#provider-queue, per client, in Chord 0.87.1's own grammar)
    Each subscription may have at most ``queue_limit`` update frames waiting to be written. When
    another update arrives, the waiting frames are dropped and the subscription is *collapsed*:
    the server takes a fresh snapshot (:meth:`~chord.remote.ProviderSubscription.reset`) and
    sends the difference from what the peer last received as ordinary updates — a ``replaced``
    for a singleton (``unavailable`` if it is gone), and for a keyed service a ``closed`` for each
    instance the peer holds that is gone or behind plus a ``spawned`` for each instance that is
    new or was behind. An instance the peer is current on is left alone. No ``reset`` update
    ever goes on the wire (Chord 0.87.1 has none); a ``reset`` from the provider's own queue is
    collapsed the same way. Updates are encoded when they are written, so path dictionaries on
    both ends only ever see what was sent.

Back-pressure (per client)
    Results waiting to be written are counted in bytes; above ``max_pending_bytes`` the server
    stops reading that client until they drain to half. A write that cannot complete within
    ``send_timeout`` seconds (the client stopped reading) disconnects the client: its queue is
    dropped, its requests cancelled and its endpoint disposed, so its memory is returned.

Ending
    A clean end of stream or a ``closed`` frame ends the peer quietly. A protocol violation (a
    frame that is not strict JSON, an unknown or malformed frame, a ``call`` that is not a service
    call, a duplicate in-flight request id, an oversized frame, a frame after ``closed``) gets a
    ``result`` error for the offending request when there is one, then a ``closed`` frame whose
    ``reason`` names the problem, then the connection is closed. Either way the peer's in-flight
    calls are cancelled and its endpoint disposed (its subscriptions close); the provider and
    the other peers are untouched. A call that breaks the provider's contract — a service
    outside its catalogue, an unknown member, a wrong argument count
    (:class:`~chord.remote.errors.CallRejected`) — is answered with its error and then ends the
    connection the same way. Failures that are normal between well-behaved peers (a withdrawn
    service, a closed or stale instance, a method's own error) are ordinary error results.

Why one module: it serves one peer: ``_Peer`` owns the connection's frame reader, the in-flight
requests and the subscriptions' outgoing streams, and the ordering guarantees above (inline answers
in frame order, one collapsed update stream per subscription) come from those sharing one writer.
The small helpers are the update collapsing that only this writer uses.
"""

from __future__ import annotations

import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Final

import anyio

from chord.context import BACKGROUND, Context, cancel_scope, with_cancel
from chord.json import lone_surrogate
from chord.remote.codec import ServiceStateEncoder, create_service_state_encoder
from chord.remote.endpoint import RemoteServiceEndpoint, create_remote_service_endpoint
from chord.remote.errors import CallRejected, ServiceGrammarError
from chord.remote.grammar import (
    CatalogueControlCall,
    ServiceCatalogueEntry,
    ServiceClosedUpdate,
    ServiceControlCall,
    ServiceInstanceSnapshot,
    ServiceProviderUpdate,
    ServiceReplacedUpdate,
    ServiceResetUpdate,
    ServiceSpawnedUpdate,
    ServiceStateSnapshot,
    ServiceStateUpdate,
    ServiceSubscriptionSnapshot,
    ServiceUnavailableUpdate,
    SubscribeControlCall,
    UnsubscribeControlCall,
    decode_service_control_call,
    parse_service_call,
)
from chord.remote.provider import RemoteServiceProvider
from chord.services import InstanceAddress
from chord.transport.frames import (
    CancelFrame,
    ClosedFrame,
    ErrorInfo,
    FrameError,
    RequestFrame,
    ResultFrame,
    UpdateFrame,
    encode_frame,
)
from chord.transport.streams import FrameConnection
from chord.wire.errors import INTERNAL_ERROR, INVALID_REQUEST, TOO_MANY_REQUESTS, error_info

__all__ = [
    "DEFAULT_MAX_CONCURRENT_REQUESTS",
    "DEFAULT_MAX_PENDING_BYTES",
    "DEFAULT_PEER_QUEUE_LIMIT",
    "DEFAULT_SEND_TIMEOUT",
    "provider_handler",
    "serve_provider",
]

DEFAULT_PEER_QUEUE_LIMIT: Final = 100
"""Update frames per subscription waiting to be written before the subscription collapses."""

DEFAULT_MAX_PENDING_BYTES: Final = 8 * 1024 * 1024
"""Bytes of results waiting to be written above which the server stops reading a client."""

DEFAULT_SEND_TIMEOUT: Final = 60.0
"""Seconds a write to a client may block before that client is disconnected as too slow."""

DEFAULT_MAX_CONCURRENT_REQUESTS: Final = 1024
"""Requests of one peer running at once; a further one is refused with ``too_many_requests``."""

_FLUSH_SECONDS = 1.0
_COALESCE_BYTES = 64 * 1024
"""Frames waiting in a peer's queue are written together, in one send of at most about this
many bytes (a group commit delivers several views' updates at once: one wake-up of the client,
not one per frame)."""
_BROKEN = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)
_logger = logging.getLogger("chord.wire")

ErrorReporter = Callable[[BaseException], None]


def _default_report(error: BaseException) -> None:
    _logger.error("chord wire server error: %r", error, exc_info=error)


_View = dict[str | None, tuple[InstanceAddress | None, dict[str, int]]]
"""What a peer holds of one subscription, as of the frames written to it: per instance key
(``None`` for a singleton) its address and the sequence of each state member."""


def _sequences(instance: ServiceInstanceSnapshot) -> dict[str, int]:
    return {m.name: m.sequence for m in instance.members if isinstance(m, ServiceStateSnapshot)}


def _same_sequences(
    fresh: dict[str, int],
    held: dict[str, int],
    address: InstanceAddress | None,
    unfollowed: Callable[[InstanceAddress | None, str], bool] | None,
) -> bool:
    """Whether the peer's ``held`` sequences are current, the members it does not receive aside."""
    if fresh == held:
        return True
    if unfollowed is None or fresh.keys() != held.keys():
        return False
    return all(
        sequence == held[member] or unfollowed(address, member)
        for member, sequence in fresh.items()
    )


def _view_of(snapshot: ServiceSubscriptionSnapshot) -> _View:
    return {
        (i.instance.key if i.instance is not None else None): (i.instance, _sequences(i))
        for i in snapshot.instances
    }


def _apply_to_view(view: _View, update: ServiceProviderUpdate) -> None:
    if isinstance(update, ServiceStateUpdate):
        entry = view.get(update.instance.key if update.instance is not None else None)
        if entry is not None and entry[0] == update.instance:
            entry[1][update.member] = update.sequence
    elif isinstance(update, ServiceSpawnedUpdate):
        address = update.instance.instance
        if address is not None:
            view[address.key] = (address, _sequences(update.instance))
    elif isinstance(update, ServiceClosedUpdate):
        entry = view.get(update.instance.key)
        if entry is not None and entry[0] == update.instance:
            del view[update.instance.key]
    elif isinstance(update, ServiceReplacedUpdate):
        view.clear()
        view[None] = (None, _sequences(update.snapshot))
    elif isinstance(update, ServiceUnavailableUpdate):
        view.clear()
    else:  # a reset (never written, but kept exact): the snapshot is the view
        view.clear()
        view.update(_view_of(update.snapshot))


def _collapse_updates(
    view: _View,
    snapshot: ServiceSubscriptionSnapshot,
    unfollowed: Callable[[InstanceAddress | None, str], bool] | None = None,
) -> list[ServiceProviderUpdate]:
    """The updates, in Chord 0.87.1's grammar, that take a peer holding ``view`` to ``snapshot``.

    ``unfollowed(address, member)`` names the members the peer muted and does not follow
    (docs/wire.md#lazy-state): the peer's copy of those is stale by design, so a change to one
    alone does not close and respawn its instance (which would send its whole value once).
    """
    if snapshot.mode == "singleton":
        if snapshot.instances:
            return [ServiceReplacedUpdate(snapshot.instances[0])]
        return [ServiceUnavailableUpdate()] if view else []
    fresh = {i.instance.key: i for i in snapshot.instances if i.instance is not None}
    current: set[str] = set()
    out: list[ServiceProviderUpdate] = []
    for key, (address, sequences) in view.items():
        instance = fresh.get(key) if key is not None else None
        if (
            instance is not None
            and instance.instance == address
            and _same_sequences(_sequences(instance), sequences, address, unfollowed)
        ):
            current.add(key)  # type: ignore[arg-type]
            continue
        if address is not None:
            out.append(ServiceClosedUpdate(address))
    for instance in snapshot.instances:
        if instance.instance is not None and instance.instance.key not in current:
            out.append(ServiceSpawnedUpdate(instance))
    return out


class _Stream:
    """One subscription of this peer: its encoder, its view and its place in the queue."""

    __slots__ = ("encoder", "epoch", "held", "pending", "subscription_id", "view")

    def __init__(self, subscription_id: str) -> None:
        self.subscription_id = subscription_id
        self.encoder: ServiceStateEncoder = create_service_state_encoder()
        self.held: list[ServiceProviderUpdate] | None = []
        self.pending = 0
        self.epoch = 0
        self.view: _View = {}


class _Outgoing:
    __slots__ = ("counted", "data", "epoch", "stream", "update")

    def __init__(
        self,
        data: bytes | None,
        stream: _Stream | None,
        update: ServiceProviderUpdate | None = None,
        counted: bool = False,
    ) -> None:
        self.data = data
        self.stream = stream
        self.update = update
        self.epoch = stream.epoch if stream is not None else 0
        self.counted = counted


class _Peer:
    def __init__(
        self,
        conn: FrameConnection,
        endpoint: RemoteServiceEndpoint,
        report: ErrorReporter,
        queue_limit: int,
        max_concurrent_requests: int,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        send_timeout: float = DEFAULT_SEND_TIMEOUT,
    ) -> None:
        self._conn = conn
        self._endpoint = endpoint
        self._report = report
        self._queue_limit = queue_limit
        self._max_requests = max_concurrent_requests
        self._max_pending_bytes = max_pending_bytes
        self._send_timeout = send_timeout
        self._pending_bytes = 0
        self._drained: anyio.Event | None = None
        self._slow = False
        self._queue: deque[_Outgoing] = deque()
        self._wake = anyio.Event()
        self._writer_done = anyio.Event()
        self._stopping = False
        self._inflight: dict[int, Callable[..., None]] = {}
        self._streams: dict[str, _Stream] = {}
        self._failure: str | None = None
        self._read_scope = anyio.CancelScope()
        self._requests: anyio.abc.TaskGroup | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            await self._conn.aclose()  # shielded inside; idempotent after close()

    async def _run(self) -> None:
        reason: str | None = None
        async with anyio.create_task_group() as outer:
            outer.start_soon(self._write_loop)
            try:
                async with anyio.create_task_group() as requests:
                    self._requests = requests
                    with self._read_scope:
                        reason = await self._read_loop()
                    if self._failure is not None:
                        reason = self._failure
                    self._cancel_requests("peer disconnected")
                    requests.cancel_scope.cancel()
            finally:
                self._endpoint.dispose()
                self._streams.clear()
                if reason is None or self._slow:
                    self._queue.clear()
                    self._pending_bytes = 0
                self._stopping = True
                self._wake.set()
            with anyio.move_on_after(_FLUSH_SECONDS):
                await self._writer_done.wait()
            outer.cancel_scope.cancel()
        self._queue.clear()
        if reason is None or self._slow:
            await self._conn.aclose()  # a client that stopped reading cannot take a goodbye
        else:
            await self._conn.close(reason)

    def _fail(self, reason: str) -> None:
        """Close this peer with ``reason`` (callable from synchronous code)."""
        if self._failure is None:
            self._failure = reason
        self._read_scope.cancel()

    def _cancel_requests(self, reason: str) -> None:
        for cancel in list(self._inflight.values()):
            cancel(reason)

    # -- reading ------------------------------------------------------------------------------

    async def _read_loop(self) -> str | None:
        while True:
            if self._pending_bytes > self._max_pending_bytes:
                # Back-pressure: read nothing more from this client until its results drain.
                self._drained = anyio.Event()
                await self._drained.wait()
            try:
                frame = await self._conn.receive()
            except anyio.EndOfStream:
                return None
            except FrameError as error:
                return f"{error.code}: {error.message}"
            if isinstance(frame, RequestFrame):
                problem = await self._start_request(frame)
                if problem is not None:
                    return problem
            elif isinstance(frame, CancelFrame):
                cancel = self._inflight.get(frame.id)
                if cancel is not None:
                    cancel("cancelled by the client")
            elif isinstance(frame, ClosedFrame):
                # The peer said goodbye: stop its work now; any further frame is an error.
                self._cancel_requests("peer closed the connection")
                self._endpoint.dispose()
            else:
                return f"protocol_error: a client may not send {type(frame).__name__} frames"

    async def _start_request(self, frame: RequestFrame) -> str | None:
        request_id = frame.id
        if request_id in self._inflight:
            return f"protocol_error: request id {request_id} is already in flight"
        try:
            call = parse_service_call(frame.call)
        except ServiceGrammarError as error:
            self._push_result(request_id, None, ErrorInfo(code=INVALID_REQUEST, message=str(error)))
            return f"{INVALID_REQUEST}: request {request_id}: {error}"
        problem = lone_surrogate(list(call.args), "args")
        if problem is not None:  # text no UTF-8 encoder takes: refused here, the peer stays
            message = f"{call.service_id}.{call.member} {problem}: not valid Unicode; replace it"
            self._push_result(request_id, None, ErrorInfo("service_invalid_value", message))
            return None
        if len(self._inflight) >= self._max_requests:
            # Refuse rather than stop reading: a reader blocked on a full peer could no longer
            # notice that peer's disconnect, and its blocked calls would never be cancelled.
            self._push_result(
                request_id,
                None,
                ErrorInfo(
                    code=TOO_MANY_REQUESTS,
                    message=f"More than {self._max_requests} requests in flight on this connection",
                ),
            )
            return None
        ctx, cancel = with_cancel(BACKGROUND)
        control = decode_service_control_call(call)
        stream: _Stream | None = None
        if (
            isinstance(control, SubscribeControlCall)
            and control.subscription_id not in self._streams
        ):
            stream = self._streams[control.subscription_id] = _Stream(control.subscription_id)
        try:
            result = self._endpoint.start(call, self._publish, ctx)
        except Exception as error:
            self._request_failed(request_id, stream, error)
            return None
        if inspect.isawaitable(result):  # an async method: it runs in a task of its own
            self._inflight[request_id] = cancel
            assert self._requests is not None
            self._requests.start_soon(self._await_request, request_id, control, stream, result, ctx)
        else:  # a control call or a synchronous method: answered inline, no task
            self._request_done(request_id, control, stream, result)
        return None

    async def _await_request(
        self,
        request_id: int,
        control: ServiceControlCall | None,
        stream: _Stream | None,
        awaitable: Awaitable[Any],
        ctx: Context,
    ) -> None:
        try:
            try:
                with cancel_scope(ctx):
                    result = await awaitable
            except Exception as error:
                self._request_failed(request_id, stream, error)
                return
            self._request_done(request_id, control, stream, result)
        finally:
            self._inflight.pop(request_id, None)

    def _request_failed(self, request_id: int, stream: _Stream | None, error: Exception) -> None:
        if stream is not None and self._streams.get(stream.subscription_id) is stream:
            del self._streams[stream.subscription_id]
        info = error_info(error)
        if info.code == INTERNAL_ERROR:
            self._report(error)
        self._push_result(request_id, None, info)
        if isinstance(error, CallRejected):
            self._fail(f"{info.code}: request {request_id}: {info.message}")

    def _request_done(
        self,
        request_id: int,
        control: ServiceControlCall | None,
        stream: _Stream | None,
        result: Any,
    ) -> None:
        if stream is not None:
            assert isinstance(result, ServiceSubscriptionSnapshot)
            self._push_subscribed(request_id, stream, result)
        elif isinstance(control, CatalogueControlCall):
            assert isinstance(result, tuple)
            entries: tuple[ServiceCatalogueEntry, ...] = result
            self._push_result(request_id, [entry.to_json() for entry in entries], None)
        else:
            if isinstance(control, UnsubscribeControlCall):
                self._streams.pop(control.subscription_id, None)
            self._push_result(request_id, result, None)

    # -- writing ------------------------------------------------------------------------------

    def _push(self, data: bytes) -> None:
        if self._stopping:
            return
        if not self._queue:
            # Nothing waits before it: write it now when the socket takes it, sparing the writer
            # task's wake-up. The reader never waits here; a full socket is the writer's job.
            try:
                written = self._conn.send_nowait(data)
            except _BROKEN:  # the client is gone: end this peer as the writer would
                self._queue.clear()
                self._stopping = True
                self._read_scope.cancel()
                self._wake.set()
                return
            if written == "sent":
                return
            if written == "partial":  # the writer finishes this frame before anything else
                self._queue.append(_Outgoing(None, None))
                self._wake.set()
                return
        self._pending_bytes += len(data)
        self._queue.append(_Outgoing(data, None))
        self._wake.set()

    def _push_result(self, request_id: int, result: Any, error: ErrorInfo | None) -> None:
        if error is not None:
            frame = ResultFrame(id=request_id, ok=False, error=error)
        else:
            frame = ResultFrame(id=request_id, ok=True, result=result)
        try:
            data = encode_frame(frame)
        except FrameError as problem:
            data = encode_frame(
                ResultFrame(
                    id=request_id,
                    ok=False,
                    error=ErrorInfo(
                        code=INTERNAL_ERROR,
                        message=f"The remote service result is not strict JSON ({problem.message})",
                    ),
                )
            )
        self._push(data)  # a result over the frame size limit is written in parts

    def _push_subscribed(
        self, request_id: int, stream: _Stream, snapshot: ServiceSubscriptionSnapshot
    ) -> None:
        try:
            encoded = stream.encoder.encode_snapshot(snapshot)
        except Exception as error:  # pragma: no cover - a provider snapshot always encodes
            self._report(error)
            self._fail(f"{INTERNAL_ERROR}: could not encode subscription snapshot")
            return
        self._push_result(request_id, encoded.to_json(), None)
        stream.view = _view_of(snapshot)
        held, stream.held = stream.held, None
        for update in held or ():
            self._push_update(stream, update)

    def _publish(self, subscription_id: str, update: ServiceProviderUpdate, ctx: Context) -> None:
        del ctx  # the publisher's context does not travel; the client delivers with its own
        stream = self._streams.get(subscription_id)
        if stream is None:
            return
        if stream.held is not None:
            stream.held.append(update)
            return
        self._push_update(stream, update)

    def _push_update(self, stream: _Stream, update: ServiceProviderUpdate) -> None:
        if self._stopping:
            return
        if isinstance(update, ServiceResetUpdate):
            self._collapse(stream, update.snapshot)
            return
        if stream.pending >= self._queue_limit:
            subscription = self._endpoint.subscription(stream.subscription_id)
            if subscription is None:
                return
            # The fresh snapshot covers the waiting frames and this update: drop them all.
            self._collapse(stream, subscription.reset())
            return
        stream.pending += 1
        self._queue.append(_Outgoing(None, stream, update, counted=True))
        self._wake.set()

    def _collapse(self, stream: _Stream, snapshot: ServiceSubscriptionSnapshot) -> None:
        stream.epoch += 1  # the frames still waiting are skipped by the writer
        stream.pending = 0
        unfollowed = self._endpoint.unfollowed(stream.subscription_id)
        for update in _collapse_updates(stream.view, snapshot, unfollowed):
            self._queue.append(_Outgoing(None, stream, update))
        self._wake.set()

    def _encode_update(self, stream: _Stream, update: ServiceProviderUpdate) -> bytes | None:
        """Encode ``update`` as it is written: the encoder only ever sees what the peer gets."""
        try:
            encoded = stream.encoder.encode_update(update)
            data = encode_frame(
                UpdateFrame(subscription_id=stream.subscription_id, update=encoded.to_json())
            )
        except Exception as error:
            self._report(error)
            self._fail(f"{INTERNAL_ERROR}: could not encode an update of {stream.subscription_id}")
            return None
        _apply_to_view(stream.view, update)
        return data

    def _blocked_write(self) -> None:
        """A write blocked for the send timeout: the connection ends as a slow consumer."""
        self._slow = True
        self._fail(
            f"slow_consumer: a write blocked for {self._send_timeout:g} s; "
            "the client stopped reading"
        )

    def _take_frames(self) -> list[bytes] | None:
        """The encoded frames at the head of the queue, up to :data:`_COALESCE_BYTES` (and up
        to the rest of a ``send_nowait``, which is written on its own); ``None`` when an update
        could not be encoded (the peer is ended)."""
        frames: list[bytes] = []
        size = 0
        queue = self._queue
        while queue and size < _COALESCE_BYTES:
            item = queue[0]
            stream = item.stream
            if stream is None and item.data is None:
                break
            queue.popleft()
            if stream is None:
                data = item.data
                assert data is not None
                self._pending_bytes -= len(data)
                if (
                    self._drained is not None
                    and self._pending_bytes <= self._max_pending_bytes // 2
                ):
                    self._drained.set()
            else:
                if item.epoch != stream.epoch:
                    continue  # dropped by a collapse
                if item.counted:
                    stream.pending -= 1
                assert item.update is not None
                data = self._encode_update(stream, item.update)
                if data is None:
                    return None
            frames.append(data)
            size += len(data)
        return frames

    async def _write_loop(self) -> None:
        try:
            while True:
                while self._queue:
                    item = self._queue[0]
                    if item.stream is None and item.data is None:  # the rest of a send_nowait
                        self._queue.popleft()
                        with anyio.move_on_after(self._send_timeout) as scope:
                            await self._conn.flush()
                        if scope.cancelled_caught:
                            self._blocked_write()
                            return
                        continue
                    frames = self._take_frames()
                    if frames is None:
                        return
                    if not frames:
                        continue
                    with anyio.move_on_after(self._send_timeout) as scope:
                        await self._conn.send_encoded_many(frames)
                    if scope.cancelled_caught:
                        self._blocked_write()
                        return
                if self._stopping:
                    return
                self._wake = anyio.Event()
                await self._wake.wait()
        except _BROKEN:
            self._queue.clear()
            self._stopping = True
            self._read_scope.cancel()
        finally:
            self._writer_done.set()


async def serve_provider(
    conn: FrameConnection,
    provider: RemoteServiceProvider,
    *,
    on_error: ErrorReporter | None = None,
    queue_limit: int = DEFAULT_PEER_QUEUE_LIMIT,
    max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS,
    max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
    send_timeout: float = DEFAULT_SEND_TIMEOUT,
) -> None:
    """Serve ``provider`` to the peer at the other end of ``conn`` until it goes away.

    ``on_error`` hears failures that have no caller (a method's unexpected exception, which the
    peer only sees as ``internal_error``); the default logs them on ``chord.wire``. The
    connection is closed when this returns. See the module docstring for the protocol.
    """
    if queue_limit < 1:
        raise ValueError("queue_limit must be at least 1")
    if max_concurrent_requests < 1:
        raise ValueError("max_concurrent_requests must be at least 1")
    if max_pending_bytes < 1 or send_timeout <= 0:
        raise ValueError("max_pending_bytes and send_timeout must be positive")
    peer = _Peer(
        conn,
        create_remote_service_endpoint(provider),
        on_error if on_error is not None else _default_report,
        queue_limit,
        max_concurrent_requests,
        max_pending_bytes,
        send_timeout,
    )
    await peer.run()


def provider_handler(
    provider: RemoteServiceProvider,
    *,
    on_error: ErrorReporter | None = None,
    queue_limit: int = DEFAULT_PEER_QUEUE_LIMIT,
    max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS,
    max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
    send_timeout: float = DEFAULT_SEND_TIMEOUT,
) -> Callable[[FrameConnection], Awaitable[None]]:
    """A connection handler for :func:`~chord.transport.serve_unix`/``serve_tcp``::

    await task_group.start(serve_unix, path, provider_handler(host.services))
    """

    async def handle(conn: FrameConnection) -> None:
        await serve_provider(
            conn,
            provider,
            on_error=on_error,
            queue_limit=queue_limit,
            max_concurrent_requests=max_concurrent_requests,
            max_pending_bytes=max_pending_bytes,
            send_timeout=send_timeout,
        )

    return handle
