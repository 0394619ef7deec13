"""The consumer side of a replicated state: a read-only replica fed by the remote binding.

A :class:`ReplicaState` is cold (``value is None``) until ``hydrate`` installs a base batch
(``[("r", value), ...]``). After that it accepts only ``update(previous + 1, ops)``. A gap, a
duplicate or an invalid result clears it back to cold and raises; recovery needs a fresh
hydration (a reset, replacement or rebind). Subscribers follow it with the same bounded,
per-subscriber delivery as every other state; a cold replica hydrates its subscribers when it is
hydrated, and again after every ``clear``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from anyio.abc import TaskGroup

from chord.context import Context
from chord.delta.apply import apply_immutable
from chord.state._delivery import ErrorReporter, Listener, Publisher
from chord.state._ops import MISSING, check_batch, recall_revision
from chord.state._registry import register

__all__ = ["ReplicaError", "ReplicaState"]


class ReplicaError(ValueError):
    """A hydration or update that a replica cannot accept (bad base batch, gap, cold update)."""


class ReplicaState(Publisher):
    """A read-only replica: ``value`` is ``None`` until hydrated and after ``clear``.

    Cold is ``sequence is None``, not ``value is None``: a hydrated state may hold JSON ``null``
    (Chord's replicas do the same with ``undefined`` as their cold marker).
    """

    __slots__ = ("_epoch", "_sequence", "_value")

    def __init__(
        self, *, task_group: TaskGroup | None = None, on_error: ErrorReporter | None = None
    ) -> None:
        super().__init__(task_group, on_error)
        self._value: Any = None
        self._sequence = -1
        self._epoch = 0
        register(self)

    @property
    def value(self) -> Any:
        """The replicated revision, or ``None`` while cold."""
        return self._value

    @property
    def sequence(self) -> int | None:
        """The sequence of the current revision, or ``None`` while cold."""
        return None if self._sequence < 0 else self._sequence

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Follow the replica; a cold replica hydrates the listener when it is hydrated."""
        hydrated = None if self._sequence < 0 else (self._epoch, self._sequence, self._value)
        return self._unsubscriber(self._subscribe(listener, hydrated))

    def hydrate(
        self, sequence: int, ops: Iterable[Any], ctx: Context, *, trusted: bool = False
    ) -> None:
        """Install a base batch (first op ``r``) at ``sequence`` and hydrate every subscriber.

        ``trusted=True`` skips the shape and JSON-payload check of the batch, for ops handed over
        in-process by reference from a state that checked them on their way in (the loopback
        transport); ops that came over a wire are always checked."""
        batch = tuple(ops) if trusted else check_batch(ops)
        if not batch or batch[0][0] != "r":
            raise ReplicaError("replica hydration needs a base batch: not a base operation batch")
        value = batch[0][1]
        if len(batch) > 1:
            value = apply_immutable(value, list(batch[1:]))
        self._epoch += 1
        self._value = value
        self._sequence = sequence
        self._enqueue("hydrate", value, self._epoch, sequence, batch, ctx)

    def update(
        self, sequence: int, ops: Iterable[Any], ctx: Context, *, trusted: bool = False
    ) -> None:
        """Apply the revision ``sequence`` (exactly previous + 1); otherwise clear and raise.

        ``trusted`` as for :meth:`hydrate`; applying still refuses a path that does not resolve.
        A trusted batch that is the very one an in-process state published from the revision
        this replica holds takes that state's new revision over instead of applying it again
        (:func:`chord.state._ops.remember_revision`): the same value, without copying."""
        if self._sequence < 0:
            raise ReplicaError("replica update before hydration")
        if sequence != self._sequence + 1:
            expected = self._sequence + 1
            self.clear()
            raise ReplicaError(f"replica sequence has a gap: expected {expected}, got {sequence}")
        try:
            if trusted:
                batch = tuple(ops)
                value = recall_revision(batch, self._value)
                if value is MISSING:
                    value = apply_immutable(self._value, list(batch))
            else:
                batch = check_batch(ops)
                value = apply_immutable(self._value, list(batch))
        except BaseException:
            self.clear()
            raise
        self._value = value
        self._sequence = sequence
        self._enqueue("update", value, self._epoch, sequence, batch, ctx)

    def clear(self) -> None:
        """Go cold: drop the value and pending deliveries; a running callback is left to finish."""
        self._value = None
        self._sequence = -1
        self._drop_pending()

    def __repr__(self) -> str:
        state = "cold" if self._sequence < 0 else f"sequence={self._sequence}"
        return f"<ReplicaState {state}>"
