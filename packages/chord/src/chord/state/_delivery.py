"""Value-level delivery to public subscribers (docs/design/chord.md#public-delivery) and the publication queue (docs/design/chord.md#publication).

Every subscription owns a FIFO and runs one callback at a time. A synchronous callback runs inline,
inside the publishing call; an asynchronous one (a callback that *returns* an awaitable) is
awaited in the runtime's task group before the next delivery starts. A slow subscriber never holds
back the others, because each subscription drains on its own.

A subscription keeps at most :data:`MAX_PENDING_DELIVERIES` pending deliveries besides the running
one. When one more arrives, every pending delivery is dropped except a hydration that has not
started yet, and the newest is appended: a subscriber may skip sequences, but always ends on the
latest value.

The publisher side is :class:`Publisher`: it numbers revisions, queues publications so a revision
published from inside a listener is delivered after the current one (in order), calls the internal
*source listeners* (exact op streams that never skip) and then the subscriptions.
"""

from __future__ import annotations

import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol, TypeAlias

import msgspec
from anyio.abc import TaskGroup

from chord.context import BACKGROUND, Context

__all__ = [
    "MAX_PENDING_DELIVERIES",
    "Delivery",
    "ErrorReporter",
    "Listener",
    "ReplicatedState",
    "SourceListener",
]

MAX_PENDING_DELIVERIES = 100
"""Pending deliveries a subscription keeps besides the running one (docs/design/chord.md#public-delivery)."""

_logger = logging.getLogger("chord")


class Delivery(msgspec.Struct, frozen=True):
    """What a listener call carries besides the value: first sight (``hydrate``) or a revision."""

    kind: Literal["hydrate", "update"]
    sequence: int


Listener: TypeAlias = Callable[[Any, Context, Delivery], "Awaitable[None] | None"]
SourceListener: TypeAlias = Callable[[tuple[tuple[Any, ...], ...], int, Context], None]
ErrorReporter: TypeAlias = Callable[[BaseException], None]


class ReplicatedState(Protocol):
    """Anything that holds a replicated JSON value and lets listeners follow it."""

    @property
    def value(self) -> Any: ...

    def subscribe(self, listener: Listener) -> Callable[[], None]: ...


def default_error_reporter(error: BaseException) -> None:
    """Log a listener failure on the ``chord`` logger with its traceback."""
    _logger.error("replicated state listener failed: %r", error, exc_info=error)


class _Runtime:
    """Where async callbacks run and where listener errors go; attachable after creation."""

    __slots__ = ("on_error", "task_group")

    def __init__(self, task_group: TaskGroup | None, on_error: ErrorReporter | None) -> None:
        self.task_group = task_group
        self.on_error: ErrorReporter = on_error if on_error is not None else default_error_reporter

    def report(self, error: BaseException) -> None:
        try:
            self.on_error(error)
        except Exception as failure:  # a broken reporter must not break delivery
            default_error_reporter(failure)


_Item: TypeAlias = tuple[Any, Context, Delivery]


class Subscription:
    """One subscriber's FIFO: one callback at a time, bounded, independent of the others."""

    __slots__ = ("_listener", "_queue", "_running", "_runtime", "active", "epoch", "sequence")

    def __init__(self, listener: Listener, runtime: _Runtime) -> None:
        self._listener = listener
        self._runtime = runtime
        self._queue: deque[_Item] = deque()
        self._running = False
        self.active = True
        # The hydration this subscriber has seen (epoch, sequence); -1 = not hydrated yet.
        self.epoch = -1
        self.sequence = -1

    def unsubscribe(self) -> None:
        """Drop pending work and stop new callbacks; a running callback is left to finish."""
        self.active = False
        self._queue.clear()

    def drop_pending(self) -> None:
        self._queue.clear()

    def push(self, value: Any, ctx: Context, delivery: Delivery) -> None:
        if not self.active:
            return
        queue = self._queue
        if len(queue) >= MAX_PENDING_DELIVERIES:
            keep = queue[0] if queue[0][2].kind == "hydrate" else None
            queue.clear()
            if keep is not None:
                queue.append(keep)
        queue.append((value, ctx, delivery))
        if not self._running:
            self._drain()

    def _drain(self) -> None:
        self._running = True
        try:
            while self.active and self._queue:
                value, ctx, delivery = self._queue.popleft()
                pending = self._call(value, ctx, delivery)
                if pending is not None and self._start_async(pending):
                    return  # still running: the task drains the rest and clears the flag
        except BaseException:
            self._running = False
            raise
        self._running = False

    def _call(self, value: Any, ctx: Context, delivery: Delivery) -> Awaitable[Any] | None:
        try:
            result = self._listener(value, ctx, delivery)
        except Exception as error:
            self._runtime.report(error)
            return None
        if result is not None and inspect.isawaitable(result):
            return result
        return None

    def _start_async(self, pending: Awaitable[Any]) -> bool:
        group = self._runtime.task_group
        problem: Exception | None = None
        if group is None:
            problem = TypeError(
                "a replicated state listener returned an awaitable, but the state has no "
                "task group to run it (pass task_group= or call bind_runtime)"
            )
        else:
            try:
                group.start_soon(self._drain_async, pending)
                return True
            except RuntimeError as error:  # the task group has already closed
                problem = error
        if inspect.iscoroutine(pending):
            pending.close()
        self._runtime.report(problem)
        return False

    async def _drain_async(self, pending: Awaitable[Any]) -> None:
        try:
            while True:
                try:
                    await pending
                except Exception as error:
                    self._runtime.report(error)
                next_pending: Awaitable[Any] | None = None
                while next_pending is None:
                    if not (self.active and self._queue):
                        return
                    value, ctx, delivery = self._queue.popleft()
                    next_pending = self._call(value, ctx, delivery)
                pending = next_pending
        finally:
            self._running = False


class _Source:
    """One registration of a source listener (the same function may be registered twice)."""

    __slots__ = ("listener",)

    def __init__(self, listener: SourceListener) -> None:
        self.listener = listener


class Publisher:
    """Sequence, publication queue, source listeners and subscriptions of one state."""

    __slots__ = ("__weakref__", "_delivering", "_pending", "_runtime", "_sources", "_subs")

    def __init__(self, task_group: TaskGroup | None, on_error: ErrorReporter | None) -> None:
        self._runtime = _Runtime(task_group, on_error)
        self._subs: list[Subscription] = []
        self._sources: list[_Source] = []
        self._pending: deque[tuple[str, Any, int, int, tuple[Any, ...], Context]] = deque()
        self._delivering = False

    def bind_runtime(
        self, task_group: TaskGroup | None, on_error: ErrorReporter | None = None
    ) -> None:
        """Attach the task group that runs async listeners (and optionally an error reporter)."""
        self._runtime.task_group = task_group
        if on_error is not None:
            self._runtime.on_error = on_error

    def add_source_listener(self, listener: SourceListener) -> Callable[[], None]:
        """Call ``listener(ops, sequence, ctx)`` for every published revision, in order.

        Internal (the remote provider's op stream): never skips; an exception it raises is
        collected and raised from the publishing call after the revision is fully delivered.
        """
        entry = _Source(listener)
        self._sources.append(entry)

        def remove() -> None:
            for index, item in enumerate(self._sources):
                if item is entry:
                    del self._sources[index]
                    return

        return remove

    def _subscribe(self, listener: Listener, hydrated: tuple[int, int, Any] | None) -> Subscription:
        sub = Subscription(listener, self._runtime)
        self._subs.append(sub)
        if hydrated is not None:
            epoch, sequence, value = hydrated
            sub.epoch, sub.sequence = epoch, sequence
            sub.push(value, BACKGROUND, Delivery("hydrate", sequence))
        return sub

    def _unsubscriber(self, sub: Subscription) -> Callable[[], None]:
        def unsubscribe() -> None:
            if sub.active:
                sub.unsubscribe()
                try:
                    self._subs.remove(sub)
                except ValueError:
                    pass

        return unsubscribe

    def _enqueue(
        self,
        kind: str,
        value: Any,
        epoch: int,
        sequence: int,
        ops: tuple[Any, ...],
        ctx: Context,
    ) -> None:
        """Queue one publication and deliver, unless a delivery is already running (reentrancy).

        Raises the source listeners' failures once everything queued has been delivered.
        """
        self._pending.append((kind, value, epoch, sequence, ops, ctx))
        if self._delivering:
            return
        self._delivering = True
        errors: list[Exception] = []
        try:
            while self._pending:
                kind, value, epoch, sequence, ops, ctx = self._pending.popleft()
                if kind == "update":
                    for source in list(self._sources):
                        try:
                            source.listener(ops, sequence, ctx)
                        except Exception as error:
                            errors.append(error)
                for sub in list(self._subs):
                    if kind == "hydrate":
                        if sub.epoch < epoch:
                            sub.epoch, sub.sequence = epoch, sequence
                            sub.push(value, BACKGROUND, Delivery("hydrate", sequence))
                    elif sub.epoch == epoch and sub.sequence < sequence:
                        sub.sequence = sequence
                        sub.push(value, ctx, Delivery("update", sequence))
        finally:
            self._delivering = False
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise ExceptionGroup("Replicated state listeners failed", errors)

    def _drop_pending(self) -> None:
        self._pending.clear()
        for sub in self._subs:
            sub.drop_pending()
            sub.epoch, sub.sequence = -1, -1
