"""The view bridge: a bounded ordered adapter from a conversation's watch to its replicated view.

The harness delivers one raw :class:`~pico3.kernel.view.Envelope` per commit that changes a
conversation, synchronously, off the line, inside the committing task (docs/design/view.md#watch).
Publishing a Chord revision there would run the provider's listeners inside somebody else's
commit call. So the watch listener (:meth:`ViewBridge.push`) only *queues* the envelope, and the
bridge's own task (:meth:`ViewBridge.run`) publishes it::

    view.apply(ctx, envelope.ops + [("s", ("commit", "events"), envelope.events)])

one envelope = one ``apply`` = one publish = one Chord sequence (docs/design/decisions.md#d3). Applying and
publishing are one synchronous call, so nothing can interleave between them.

The queue is bounded (:data:`BRIDGE_QUEUE_LIMIT`). When it would overflow, or when ``apply``
raises (a bad op, or a provider listener that failed), the bridge *fails*: it stops its watch,
closes its service instance and tells its owner, which respawns the instance from a fresh
snapshot. The persisted commit is never touched: a failing bridge only ever loses its own
incarnation, and consumers see a ``closed`` then a new instance that hydrates at the present.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import anyio

from chord.context import BACKGROUND
from chord.state import MutableReplicatedState
from pico3.kernel.view import Envelope, Watch

__all__ = ["BRIDGE_QUEUE_LIMIT", "BridgeFailure", "ViewBridge"]

BRIDGE_QUEUE_LIMIT = 256
"""Envelopes a bridge queues before its task publishes them; one more fails the bridge."""

_COMMIT_EVENTS = ("commit", "events")


class BridgeFailure(RuntimeError):
    """A bridge gave up its incarnation (overflow or a publish error); reported, then respawned."""

    def __init__(self, conversation_id: int, reason: str) -> None:
        super().__init__(f"conversation {conversation_id}: view bridge failed: {reason}")
        self.conversation_id = conversation_id
        self.reason = reason


FailureHandler = Callable[["ViewBridge", BridgeFailure], None]


class ViewBridge:
    """One instance incarnation's adapter: envelopes in (:meth:`push`), revisions out (:meth:`run`).

    ``attach`` hands it the watch it follows and the close function of the service instance it
    feeds; :meth:`close` (idempotent) releases both. ``on_failure`` is called once, after the
    bridge closed itself, with the :class:`BridgeFailure`; it must not raise. ``report``
    receives errors that have no caller (a provider listener failing while the instance closes).
    """

    __slots__ = (
        "_close_instance",
        "_held",
        "_limit",
        "_on_failure",
        "_queue",
        "_report",
        "_wake",
        "_watch",
        "closed",
        "conversation_id",
        "failure",
        "published",
        "view",
    )

    def __init__(
        self,
        conversation_id: int,
        view: MutableReplicatedState,
        *,
        on_failure: FailureHandler,
        report: Callable[[BaseException], None],
        limit: int = BRIDGE_QUEUE_LIMIT,
    ) -> None:
        if type(limit) is not int or limit < 1:
            raise ValueError(f"limit must be a positive int, got {limit!r}")
        self.conversation_id = conversation_id
        self.view = view
        self.closed = False
        self.failure: BridgeFailure | None = None
        self.published = 0
        self._limit = limit
        self._on_failure = on_failure
        self._report = report
        self._queue: deque[Envelope] = deque()
        self._wake = anyio.Event()
        self._held = 0
        self._watch: Watch | None = None
        self._close_instance: Callable[[], None] | None = None

    def attach(self, watch: Watch, close_instance: Callable[[], None]) -> None:
        """Remember what :meth:`close` releases (closing at once if already closed)."""
        self._watch = watch
        self._close_instance = close_instance
        if self.closed:
            self._release()

    @property
    def pending(self) -> int:
        """Envelopes queued and not yet published."""
        return len(self._queue)

    # -- producer side (the watch listener; never raises) ------------------------------------
    def push(self, envelope: Envelope) -> None:
        """Queue one envelope for publication; on overflow, fail the bridge instead."""
        if self.closed:
            return
        if len(self._queue) >= self._limit:
            self._fail(f"more than {self._limit} envelopes were waiting to be published")
            return
        self._queue.append(envelope)
        self._wake.set()

    # -- consumer side (the bridge's task) -------------------------------------------------
    async def run(self) -> None:
        """Publish queued envelopes in order until the bridge closes."""
        while not self.closed:
            if self._queue and not self._held:
                self._publish_queued()
                continue
            self._wake = anyio.Event()
            await self._wake.wait()

    def _publish_queued(self) -> None:
        while self._queue and not self.closed and not self._held:
            envelope = self._queue.popleft()
            ops = [*envelope.ops, ("s", _COMMIT_EVENTS, envelope.events)]
            try:
                # apply + publish: one synchronous call. Trusted: the kernel built these ops
                # from records its storage checked as strict JSON on the way in
                self.view.apply(BACKGROUND, ops, trusted=True)
            except Exception as exc:
                self._fail(f"publishing revision {envelope.revision} raised {exc!r}")
                return
            self.published += 1

    # -- control ------------------------------------------------------------------------------
    def hold(self) -> Callable[[], None]:
        """Stop publishing (envelopes keep queueing, up to the bound) until the returned
        idempotent release is called. For diagnostics and tests of the overflow path."""
        released = False
        self._held += 1

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self._held -= 1
            self._wake.set()

        return release

    def close(self) -> None:
        """Stop the watch, close the service instance and end :meth:`run` (idempotent)."""
        if self.closed:
            return
        self.closed = True
        self._queue.clear()
        self._release()
        self._wake.set()

    def _release(self) -> None:
        watch, self._watch = self._watch, None
        close_instance, self._close_instance = self._close_instance, None
        if watch is not None:
            watch.stop()
        if close_instance is not None:
            try:
                close_instance()
            except Exception as exc:  # a provider listener failed on `closed`: not ours to raise
                self._report(exc)

    def _fail(self, reason: str) -> None:
        if self.closed:
            return
        failure = BridgeFailure(self.conversation_id, reason)
        self.failure = failure
        self.close()
        self._on_failure(self, failure)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"pending={len(self._queue)}"
        return f"<ViewBridge conversation={self.conversation_id} {state}>"
