"""Serving a provider to one peer over a frame connection.

:func:`serve_provider` runs one peer until it disconnects: it reads frames, runs requests, and
writes results and subscription updates. Every peer gets its own
:class:`~chord.remote.endpoint.RemoteServiceEndpoint`, so its subscriptions are its own, while
the :class:`~chord.remote.RemoteServiceProvider` and everything it owns are shared.

Requests
    Each request runs in its own task with a fresh ``with_cancel(BACKGROUND)`` context, inside
    an anyio cancel scope tied to it (:func:`chord.context.cancel_scope`). A ``cancel`` frame
    cancels that request's context and nothing else. Results and errors go back as ``result``
    frames; errors are ``{code, message}`` (:mod:`chord.wire.errors`), never a stack trace. At
    most ``max_concurrent_requests`` run at once; a request beyond that is refused at once with
    ``too_many_requests`` (the server never stops reading, so it always notices a disconnect).

Subscriptions
    ``$chord.service.subscribe`` gets a per-subscription state encoder (chord-spec §4.12). The
    endpoint activates the provider subscription before it returns the snapshot, so updates
    published in between are *held* and written right after the subscribe result. Updates are
    encoded in provider order as they are published and queued for the writer task.

Slow peers (chord-spec §4.8, per client)
    Each subscription may have at most ``queue_limit`` update frames waiting to be written. When
    another update arrives, the waiting frames are dropped and replaced by one ``reset`` carrying a
    fresh snapshot (:meth:`~chord.remote.ProviderSubscription.reset`), encoded with the same
    encoder so both ends restart their path dictionaries together. Memory per peer stays bounded
    and the peer still converges.

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
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Final

import anyio

from chord.context import BACKGROUND, Context, cancel_scope, with_cancel
from chord.remote.codec import ServiceStateEncoder, create_service_state_encoder
from chord.remote.endpoint import RemoteServiceEndpoint, create_remote_service_endpoint
from chord.remote.errors import CallRejected, ServiceGrammarError
from chord.remote.grammar import (
    CatalogueControlCall,
    ServiceCall,
    ServiceCatalogueEntry,
    ServiceProviderUpdate,
    ServiceResetUpdate,
    ServiceSubscriptionSnapshot,
    SubscribeControlCall,
    UnsubscribeControlCall,
    decode_service_control_call,
    parse_service_call,
)
from chord.remote.provider import RemoteServiceProvider
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
    "DEFAULT_PEER_QUEUE_LIMIT",
    "provider_handler",
    "serve_provider",
]

DEFAULT_PEER_QUEUE_LIMIT: Final = 100
"""Update frames per subscription waiting to be written before they collapse into a reset."""

DEFAULT_MAX_CONCURRENT_REQUESTS: Final = 1024
"""Requests of one peer running at once; a further one is refused with ``too_many_requests``."""

_FLUSH_SECONDS = 1.0
_BROKEN = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)
_logger = logging.getLogger("chord.wire")

ErrorReporter = Callable[[BaseException], None]


def _default_report(error: BaseException) -> None:
    _logger.error("chord wire server error: %r", error, exc_info=error)


class _Stream:
    """One subscription of this peer: its encoder and its place in the outgoing queue."""

    __slots__ = ("encoder", "epoch", "held", "pending", "subscription_id")

    def __init__(self, subscription_id: str) -> None:
        self.subscription_id = subscription_id
        self.encoder: ServiceStateEncoder = create_service_state_encoder()
        self.held: list[ServiceProviderUpdate] | None = []
        self.pending = 0
        self.epoch = 0


class _Outgoing:
    __slots__ = ("data", "epoch", "stream")

    def __init__(self, data: bytes, stream: _Stream | None, epoch: int) -> None:
        self.data = data
        self.stream = stream
        self.epoch = epoch


class _Peer:
    def __init__(
        self,
        conn: FrameConnection,
        endpoint: RemoteServiceEndpoint,
        report: ErrorReporter,
        queue_limit: int,
        max_concurrent_requests: int,
    ) -> None:
        self._conn = conn
        self._endpoint = endpoint
        self._report = report
        self._queue_limit = queue_limit
        self._max_requests = max_concurrent_requests
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
                if reason is None:
                    self._queue.clear()
                self._stopping = True
                self._wake.set()
            with anyio.move_on_after(_FLUSH_SECONDS):
                await self._writer_done.wait()
            outer.cancel_scope.cancel()
        if reason is None:
            await self._conn.aclose()
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
        self._inflight[request_id] = cancel
        assert self._requests is not None
        self._requests.start_soon(self._run_request, request_id, call, ctx)
        return None

    async def _run_request(self, request_id: int, call: ServiceCall, ctx: Context) -> None:
        try:
            control = decode_service_control_call(call)
            stream: _Stream | None = None
            if (
                isinstance(control, SubscribeControlCall)
                and control.subscription_id not in self._streams
            ):
                stream = self._streams[control.subscription_id] = _Stream(control.subscription_id)
            try:
                with cancel_scope(ctx):
                    result = await self._endpoint.invoke(call, self._publish, ctx)
            except Exception as error:
                if stream is not None and self._streams.get(stream.subscription_id) is stream:
                    del self._streams[stream.subscription_id]
                info = error_info(error)
                if info.code == INTERNAL_ERROR:
                    self._report(error)
                self._push_result(request_id, None, info)
                if isinstance(error, CallRejected):
                    self._fail(f"{info.code}: request {request_id}: {info.message}")
                return
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
        finally:
            self._inflight.pop(request_id, None)

    # -- writing ------------------------------------------------------------------------------

    def _push(self, data: bytes, stream: _Stream | None) -> None:
        if self._stopping:
            return
        if stream is not None:
            stream.pending += 1
            self._queue.append(_Outgoing(data, stream, stream.epoch))
        else:
            self._queue.append(_Outgoing(data, None, 0))
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
        if len(data) - 1 > self._conn.max_frame_size:
            data = encode_frame(
                ResultFrame(
                    id=request_id,
                    ok=False,
                    error=ErrorInfo(
                        code=INTERNAL_ERROR,
                        message=f"The remote service result of {len(data) - 1} bytes exceeds the "
                        f"frame size limit of {self._conn.max_frame_size}",
                    ),
                )
            )
        self._push(data, None)

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
        if stream.pending >= self._queue_limit:
            subscription = self._endpoint.subscription(stream.subscription_id)
            if subscription is None:
                return
            # The fresh snapshot covers the waiting frames and this update: drop them all.
            update = ServiceResetUpdate(subscription.reset())
            stream.epoch += 1
            stream.pending = 0
        try:
            encoded = stream.encoder.encode_update(update)
            data = encode_frame(
                UpdateFrame(subscription_id=stream.subscription_id, update=encoded.to_json())
            )
        except Exception as error:
            self._report(error)
            self._fail(f"{INTERNAL_ERROR}: could not encode an update of {stream.subscription_id}")
            return
        if len(data) - 1 > self._conn.max_frame_size:
            self._fail(
                f"frame_too_large: an update of {stream.subscription_id} is {len(data) - 1} bytes, "
                f"over the limit of {self._conn.max_frame_size}"
            )
            return
        self._push(data, stream)

    async def _write_loop(self) -> None:
        try:
            while True:
                while self._queue:
                    item = self._queue.popleft()
                    stream = item.stream
                    if stream is not None:
                        if item.epoch != stream.epoch:
                            continue  # replaced by a reset
                        stream.pending -= 1
                    await self._conn.send_encoded(item.data)
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
    peer = _Peer(
        conn,
        create_remote_service_endpoint(provider),
        on_error if on_error is not None else _default_report,
        queue_limit,
        max_concurrent_requests,
    )
    await peer.run()


def provider_handler(
    provider: RemoteServiceProvider,
    *,
    on_error: ErrorReporter | None = None,
    queue_limit: int = DEFAULT_PEER_QUEUE_LIMIT,
    max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS,
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
        )

    return handle
