"""The authoritative, writable replicated state (docs/design/chord.md#replicated-state, #drafts, #publication, docs/design/decisions.md#d3).

``MutableReplicatedState`` holds ``(value, sequence)``. Every published revision is an immutable
JSON value; a new revision shares every untouched subtree with the previous one, and the previous
one is never mutated, so listeners and replicas may keep any revision they were handed.

Three ways to write, each publishing at most one revision:

* ``change(ctx, mutate)`` hands ``mutate`` a copy-on-write draft of the root. The draft records
  ops as it is mutated (see :mod:`chord.delta.track`), so a change costs what it changes.
* ``replace(ctx, value)`` publishes ``[("r", value)]`` unless ``value`` is deep-equal.
* ``apply(ctx, ops)`` publishes exactly the given ops (validated first), without diffing.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from anyio.abc import TaskGroup

from chord.context import Context
from chord.delta.apply import apply_immutable
from chord.delta.track import DraftDict, DraftList, open_draft, revoke
from chord.json import JsonError, equal_json, validate_json
from chord.state._delivery import ErrorReporter, Listener, Publisher
from chord.state._ops import check_batch, remember_revision
from chord.state._registry import register

__all__ = ["MutableReplicatedState", "replicated_state"]


def _check_root(value: Any) -> None:
    if type(value) is not dict and type(value) is not list:
        raise JsonError(
            f"the root of a replicated state must be an object or an array, "
            f"not {type(value).__name__}"
        )


class MutableReplicatedState(Publisher):
    """The single writer of one replicated JSON value. Create with :func:`replicated_state`."""

    __slots__ = ("_busy", "_sequence", "_value")

    def __init__(
        self,
        initial: Any,
        *,
        task_group: TaskGroup | None = None,
        on_error: ErrorReporter | None = None,
        trusted: bool = False,
    ) -> None:
        _check_root(initial)
        if not trusted:
            validate_json(initial)
        super().__init__(task_group, on_error)
        self._value: Any = initial
        self._sequence = 0
        self._busy = False
        register(self)

    @property
    def value(self) -> Any:
        """The current revision (never ``None``). Do not mutate it."""
        return self._value

    @property
    def sequence(self) -> int:
        """0 at creation, +1 per published revision."""
        return self._sequence

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Follow the value: ``listener(value, ctx, delivery)``; returns an idempotent unsubscribe.

        The first call is ``Delivery("hydrate", sequence)`` with the current value (inline for a
        synchronous listener); later revisions arrive as ``update`` deliveries.
        """
        sub = self._subscribe(listener, (0, self._sequence, self._value))
        return self._unsubscriber(sub)

    def change(self, ctx: Context, mutate: Callable[[DraftDict | DraftList], Any]) -> None:
        """Mutate a draft of the root in ``mutate`` and publish the result as one revision.

        Nothing is published when the result equals the current value. If ``mutate`` raises (or
        returns an awaitable: it must be synchronous) nothing changes and the error propagates.
        The draft and every handle read from it are revoked when ``mutate`` returns.
        """
        if self._busy:
            raise RuntimeError(
                "replicated state cannot be changed reentrantly from a change callback"
            )
        self._busy = True
        try:
            draft, finish = open_draft(self._value)
            try:
                result = mutate(draft)
                if result is not None and inspect.isawaitable(result):
                    if inspect.iscoroutine(result):
                        result.close()
                    raise TypeError("a replicated state change callback must be synchronous")
            except BaseException:
                revoke(draft)
                raise
            value, ops = finish()  # revokes the draft
        finally:
            self._busy = False
        if ops:
            batch = tuple(ops)
            remember_revision(batch, self._value, value)
            self._commit(value, batch, ctx)

    def replace(self, ctx: Context, value: Any) -> None:
        """Publish ``value`` (validated, then owned: do not mutate it) as the whole new value.

        A value deep-equal to the current one is a no-op that keeps the current object.
        """
        if self._busy:
            raise RuntimeError("replicated state cannot be replaced from a change callback")
        _check_root(value)
        validate_json(value)
        if equal_json(value, self._value):
            return
        self._commit(value, (("r", value),), ctx)

    def apply(self, ctx: Context, ops: Iterable[Any], *, trusted: bool = False) -> None:
        """Publish exactly ``ops`` as one revision (docs/design/decisions.md#d3); no diffing, no normalising.

        Every op is validated (shape, paths, JSON payloads) and applied to a copy-on-write
        revision before anything is published; a bad op raises and changes nothing.
        ``trusted=True`` skips the shape and JSON-payload check, for ops a caller built from
        values it has already validated (pico3's view bridge: the kernel's own ops); applying
        still refuses a path that does not resolve.
        """
        if self._busy:
            raise RuntimeError("replicated state cannot be applied to from a change callback")
        batch = tuple(ops) if trusted else check_batch(ops)
        if not batch:
            return
        value = apply_immutable(self._value, list(batch))
        _check_root(value)
        remember_revision(batch, self._value, value)
        self._commit(value, batch, ctx)

    def _commit(self, value: Any, ops: tuple[Any, ...], ctx: Context) -> None:
        self._value = value
        self._sequence += 1
        self._enqueue("update", value, 0, self._sequence, ops, ctx)

    def __repr__(self) -> str:
        return f"<MutableReplicatedState sequence={self._sequence}>"


def replicated_state(
    initial: Any,
    *,
    task_group: TaskGroup | None = None,
    on_error: ErrorReporter | None = None,
    trusted: bool = False,
) -> MutableReplicatedState:
    """A standalone mutable replicated state whose value starts as ``initial`` (dict or list).

    ``initial`` is validated as strict JSON unless ``trusted=True`` and is owned by the state
    afterwards. ``task_group`` runs async listeners (see ``bind_runtime``); ``on_error`` receives
    listener failures (default: logged on the ``chord`` logger).
    """
    return MutableReplicatedState(
        initial, task_group=task_group, on_error=on_error, trusted=trusted
    )
