"""The client half: a :class:`~chord.remote.RemoteServiceTransport` over a frame connection.

:class:`RemoteConnection` multiplexes calls and subscriptions over one
:class:`~chord.transport.FrameConnection`. A reader task (:meth:`RemoteConnection.run`) routes
every incoming frame:

* a ``result`` completes the waiting call with its id;
* an ``update`` goes to its subscription, decoded by that subscription's own state decoder
  (docs/design/chord.md#path-codec) in arrival order, before any later frame is looked at.

Calls
    :meth:`~RemoteConnection.invoke` sends a ``request`` and waits for its ``result``. If the
    caller's context is cancelled first, a ``cancel`` frame for that request id goes out (the
    provider cancels the method's context) and the call raises the cancellation. An error result
    raises :class:`~chord.remote.RemoteServiceError` for chord's codes and
    :class:`~chord.wire.RemoteCallError` for every other code.

Subscriptions
    :meth:`~RemoteConnection.subscribe` is a coroutine function: the binding calls it, then awaits
    it. The subscribe result carries the snapshot; it is decoded by the reader itself, so the
    decoder sees the snapshot before the updates that follow it. Updates arriving before
    ``activate()`` are buffered and delivered, in order, when it is called.

Disconnect
    When the stream ends (or the peer violates the protocol) every waiting call fails at once with
    :class:`~chord.wire.RemoteCallError` ``unavailable``, subscriptions stop, later calls fail the
    same way, and :meth:`~RemoteConnection.wait_closed` returns. Nothing is retried or replayed.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio

from chord.context import BACKGROUND, Context, cancel_scope
from chord.json import JsonValue
from chord.remote.codec import ServiceStateDecoder, create_service_state_decoder
from chord.remote.errors import RemoteServiceError
from chord.remote.grammar import (
    ServiceCall,
    ServiceCatalogueEntry,
    ServiceProviderUpdate,
    ServiceStateUpdate,
    ServiceSubscriptionSnapshot,
    parse_service_catalogue,
    parse_wire_service_provider_update,
    parse_wire_service_subscription_snapshot,
    service_catalogue_call,
    service_follow_call,
    service_mute_call,
    service_subscribe_call,
    service_unsubscribe_call,
)
from chord.remote.source import ServiceUpdateListener
from chord.services import InstanceAddress, ServiceMode
from chord.transport.frames import (
    CancelFrame,
    ClosedFrame,
    FrameError,
    RequestFrame,
    ResultFrame,
    UpdateFrame,
    encode_frame,
)
from chord.transport.streams import FrameConnection
from chord.wire.errors import UNAVAILABLE, RemoteCallError, error_from_info

__all__ = ["RemoteConnection", "RemoteSubscription", "open_remote_connection"]

_BROKEN = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)
_logger = logging.getLogger("chord.wire")

ErrorReporter = Callable[[BaseException], None]


def _default_report(error: BaseException) -> None:
    _logger.error("chord wire client error: %r", error, exc_info=error)


class _ProtocolViolation(Exception):
    pass


class _Pending:
    """A call waiting for its result. ``transform`` runs in the reader, in frame order."""

    __slots__ = ("done", "error", "transform", "value")

    def __init__(self, transform: Callable[[Any], Any] | None) -> None:
        self.done = anyio.Event()
        self.transform = transform
        self.value: Any = None
        self.error: Exception | None = None

    def succeed(self, value: Any) -> None:
        if self.transform is not None:
            try:
                value = self.transform(value)
            except Exception as error:
                self.fail(error)
                return
        self.value = value
        self.done.set()

    def fail(self, error: Exception) -> None:
        self.error = error
        self.done.set()


class RemoteSubscription:
    """A subscription seen through a :class:`RemoteConnection` (a ``ServiceSubscription``)."""

    __slots__ = (
        "_active",
        "_buffer",
        "_closed",
        "_connection",
        "_listener",
        "_snapshot",
        "decoder",
        "subscription_id",
    )

    def __init__(
        self, connection: RemoteConnection, subscription_id: str, listener: ServiceUpdateListener
    ) -> None:
        self._connection = connection
        self.subscription_id = subscription_id
        self._listener = listener
        self.decoder: ServiceStateDecoder = create_service_state_decoder()
        self._snapshot: ServiceSubscriptionSnapshot | None = None
        self._buffer: list[ServiceProviderUpdate] = []
        self._active = False
        self._closed = False

    @property
    def snapshot(self) -> ServiceSubscriptionSnapshot:
        """The decoded snapshot the provider took when the subscription opened."""
        if self._snapshot is None:
            raise RuntimeError("Remote subscription has no snapshot yet")
        return self._snapshot

    @property
    def closed(self) -> bool:
        return self._closed

    def activate(self) -> None:
        """Deliver the buffered updates, then every later one as it arrives. Idempotent."""
        if self._active or self._closed:
            return
        self._active = True
        buffered, self._buffer = self._buffer, []
        for update in buffered:
            if self._closed:
                return
            self._connection._deliver(self._listener, update)

    async def close(self, ctx: Context | None = None) -> None:
        """Stop delivery and tell the provider (best effort). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._buffer.clear()
        await self._connection._unsubscribe(self, BACKGROUND if ctx is None else ctx)

    # -- lazy state (docs/wire.md#lazy-state) -------------------------------------------------

    async def mute(self, member: str, ctx: Context) -> None:
        """Ask the provider to stop sending ``member``'s state updates on this subscription,
        except for the instances it follows (:meth:`follow`). A provider without the extension (Chord
        0.87.1) refuses: the call raises and every update keeps coming."""
        await self._connection._request(service_mute_call(self.subscription_id, member), ctx, None)

    async def follow(
        self, instance: InstanceAddress | None, member: str, follow: bool, ctx: Context
    ) -> None:
        """Follow (``follow=True``) or unfollow one muted member of one instance.

        The provider answers a follow with the member's current sequence and value; the reader
        hands them to the listener, as a ``state`` update whose ops are one ``r`` (a rebaseline),
        before it reads the updates that continue it."""
        call = service_follow_call(self.subscription_id, instance, member, follow)

        def rebaseline(result: Any) -> None:
            if not follow or result is None:
                return
            sequence = result.get("sequence") if isinstance(result, dict) else None
            if type(sequence) is not int or sequence < 0 or "value" not in result:
                raise RemoteServiceError(
                    "service_invalid_value", f"Invalid follow result for {member}: {result!r}"
                )
            self._receive(ServiceStateUpdate(member, sequence, (("r", result["value"]),), instance))

        await self._connection._request(call, ctx, rebaseline)

    # -- reader side --------------------------------------------------------------------------

    def _install(self, result: Any) -> RemoteSubscription:
        snapshot = parse_wire_service_subscription_snapshot(result)
        self._snapshot = self.decoder.decode_snapshot(snapshot)
        return self

    def _receive(self, update: ServiceProviderUpdate) -> None:
        if self._closed:
            return
        if self._active:
            self._connection._deliver(self._listener, update)
        else:
            self._buffer.append(update)


class RemoteConnection:
    """Calls and subscriptions over one frame connection. Run :meth:`run` in a task group
    (or use :func:`open_remote_connection`)."""

    def __init__(self, conn: FrameConnection, *, on_error: ErrorReporter | None = None) -> None:
        self._conn = conn
        self._report = on_error if on_error is not None else _default_report
        self._next_request = 0
        self._next_subscription = 0
        self._pending: dict[int, _Pending] = {}
        self._streams: dict[str, RemoteSubscription] = {}
        self._lost: str | None = None
        self._closed = anyio.Event()

    @property
    def connection(self) -> FrameConnection:
        return self._conn

    @property
    def closed(self) -> bool:
        """True once the connection is gone; calls then fail with ``unavailable``."""
        return self._lost is not None

    @property
    def close_reason(self) -> str | None:
        return self._lost

    async def wait_closed(self) -> None:
        """Return once the connection is gone."""
        await self._closed.wait()

    async def aclose(self, reason: str = "client closed the connection") -> None:
        """Say ``closed`` to the provider and drop the connection. Idempotent."""
        self._lose(reason)
        await self._conn.close(reason)

    # -- calls --------------------------------------------------------------------------------

    async def invoke(self, call: ServiceCall, ctx: Context) -> JsonValue | None:
        """Run ``call`` at the provider; ``ctx`` cancels this request only."""
        return await self._request(call, ctx, None)

    async def catalogue(self, ctx: Context) -> tuple[ServiceCatalogueEntry, ...]:
        """The provider's catalogue (``$chord.service.catalogue``)."""
        return await self._request(service_catalogue_call(), ctx, parse_service_catalogue)

    async def subscribe(
        self,
        service_id: str,
        mode: ServiceMode,
        listener: ServiceUpdateListener,
        ctx: Context,
    ) -> RemoteSubscription:
        """Open a subscription; its updates reach ``listener`` after ``activate()``."""
        subscription_id = f"s{self._next_subscription}"
        self._next_subscription += 1
        stream = RemoteSubscription(self, subscription_id, listener)
        self._streams[subscription_id] = stream
        try:
            return await self._request(
                service_subscribe_call(subscription_id, service_id, mode), ctx, stream._install
            )
        except BaseException as error:
            self._streams.pop(subscription_id, None)
            if self._lost is None and not isinstance(error, (RemoteServiceError, RemoteCallError)):
                # Cancelled (or an unreadable snapshot): the provider may have subscribed.
                await self._forget(subscription_id)
            raise

    async def _request(
        self, call: ServiceCall, ctx: Context, transform: Callable[[Any], Any] | None
    ) -> Any:
        self._assert_connected()
        ctx.raise_if_cancelled()
        request_id = self._next_request
        self._next_request += 1
        pending = self._pending[request_id] = _Pending(transform)
        try:
            try:
                data = encode_frame(RequestFrame(id=request_id, call=call.to_json()))
                # Written at once when the socket takes it (no event-loop pass: the wait for the
                # result is the checkpoint); otherwise shielded, as a frame cut in half by a
                # cancellation would corrupt the stream.
                written = self._conn.send_nowait(data)
                if written != "sent":
                    with anyio.CancelScope(shield=True):
                        if written == "partial":
                            await self._conn.flush()
                        else:
                            await self._conn.send_encoded(data)
            except FrameError as error:
                raise RemoteServiceError(
                    "service_invalid_value", f"Remote service call cannot be sent: {error.message}"
                ) from None
            except _BROKEN:
                self._assert_connected()
                raise RemoteCallError(UNAVAILABLE, self._unavailable_message()) from None
            try:
                if ctx.abort_signal is None and ctx.deadline is None:
                    await pending.done.wait()  # nothing can cancel ctx: no scope to tie to it
                else:
                    with cancel_scope(ctx):
                        await pending.done.wait()
            except BaseException:
                if not pending.done.is_set() and self._lost is None:
                    await self._send_quietly(CancelFrame(id=request_id))
                raise
        finally:
            self._pending.pop(request_id, None)
        if pending.error is not None:
            raise pending.error
        return pending.value

    async def _unsubscribe(self, stream: RemoteSubscription, ctx: Context) -> None:
        if self._streams.get(stream.subscription_id) is stream:
            del self._streams[stream.subscription_id]
        if self._lost is not None:
            return
        try:
            await self._request(service_unsubscribe_call(stream.subscription_id), ctx, None)
        except RemoteCallError as error:
            if error.code != UNAVAILABLE:
                self._report(error)
        except Exception as error:
            self._report(error)

    async def _forget(self, subscription_id: str) -> None:
        """Unsubscribe without waiting for the answer (its result is ignored as unknown)."""
        request_id = self._next_request
        self._next_request += 1
        call = service_unsubscribe_call(subscription_id).to_json()
        await self._send_quietly(RequestFrame(id=request_id, call=call))

    async def _send_quietly(self, frame: CancelFrame | RequestFrame) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(1):
            try:
                await self._conn.send(frame)
            except _BROKEN:
                pass

    def _assert_connected(self) -> None:
        if self._lost is not None:
            raise RemoteCallError(UNAVAILABLE, self._unavailable_message())

    def _unavailable_message(self) -> str:
        return f"Remote service connection is unavailable ({self._lost or 'connection lost'})"

    # -- reading ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Read and route frames until the connection ends; then fail what is still waiting."""
        reason = "the provider closed the connection"
        try:
            while True:
                try:
                    frame = await self._conn.receive()
                except anyio.EndOfStream:
                    break
                except FrameError as error:
                    reason = f"bad frame from the provider: {error}"
                    await self._conn.close(f"{error.code}: {error.message}")
                    break
                try:
                    if isinstance(frame, ResultFrame):
                        self._on_result(frame)
                    elif isinstance(frame, UpdateFrame):
                        self._on_update(frame)
                    elif isinstance(frame, ClosedFrame):
                        if frame.reason:
                            reason = f"the provider closed the connection: {frame.reason}"
                        break
                    else:
                        raise _ProtocolViolation(
                            f"protocol_error: a provider may not send {type(frame).__name__} frames"
                        )
                except _ProtocolViolation as violation:
                    reason = str(violation)
                    await self._conn.close(reason)
                    break
        finally:
            self._lose(reason)
            await self._conn.aclose()

    def _on_result(self, frame: ResultFrame) -> None:
        pending = self._pending.get(frame.id)
        if pending is None or pending.done.is_set():
            return  # a call we gave up on
        if frame.ok:
            pending.succeed(frame.result)
        else:
            assert frame.error is not None
            pending.fail(error_from_info(frame.error))

    def _on_update(self, frame: UpdateFrame) -> None:
        stream = self._streams.get(frame.subscription_id)
        if stream is None:
            return  # unsubscribed (or a subscribe we gave up on): late frames are dropped
        if stream._snapshot is None:
            raise _ProtocolViolation(
                f"protocol_error: update for {frame.subscription_id} before its snapshot"
            )
        try:
            update = stream.decoder.decode_update(parse_wire_service_provider_update(frame.update))
        except Exception as error:
            raise _ProtocolViolation(
                f"protocol_error: bad update for {frame.subscription_id}: {error}"
            ) from None
        stream._receive(update)

    def _deliver(self, listener: ServiceUpdateListener, update: ServiceProviderUpdate) -> None:
        try:
            listener(update, BACKGROUND)
        except Exception as error:
            self._report(error)

    def _lose(self, reason: str) -> None:
        if self._lost is not None:
            return
        self._lost = reason
        streams, self._streams = self._streams, {}
        for stream in streams.values():
            stream._closed = True
        error_message = self._unavailable_message()
        for pending in list(self._pending.values()):
            if not pending.done.is_set():
                pending.fail(RemoteCallError(UNAVAILABLE, error_message))
        self._closed.set()


@asynccontextmanager
async def open_remote_connection(
    conn: FrameConnection, *, on_error: ErrorReporter | None = None
) -> AsyncIterator[RemoteConnection]:
    """Run a :class:`RemoteConnection`'s reader for the duration of the block, then close."""
    remote = RemoteConnection(conn, on_error=on_error)
    async with anyio.create_task_group() as group:
        group.start_soon(remote.run)
        try:
            yield remote
        finally:
            await remote.aclose()
            group.cancel_scope.cancel()
