"""Context: the immutable, explicitly passed companion of every chord and pico3 operation.

A :class:`Context` carries three things and nothing else:

* **cancellation**: an :class:`AbortSignal` that fires once, with a *reason*;
* an optional **deadline** (``time.monotonic()`` seconds), after which the context counts as
  cancelled with the reason :class:`DeadlineExceeded`;
* **typed values**, looked up by :class:`ContextKey` identity.

Contexts are never mutated. Deriving one (:func:`with_value`, :func:`with_cancel`,
:func:`with_deadline`, :func:`with_abort_signal`, :func:`without_abort_signal`) returns a child
and leaves the parent as it was. Cancelling a child never reaches its parent or siblings; a parent's
cancellation reaches every child with the parent's reason.

``ctx`` is always the *last* argument of the function that receives it. :data:`BACKGROUND` is the
root for work that no caller owns; :data:`TODO` marks a call site whose context is not yet plumbed.

Interplay with anyio
--------------------
anyio cancels *lexically*: a ``CancelScope`` reaches only the code inside its ``with`` block. A
context crosses non-lexical boundaries (a key press in the TUI aborting a turn running elsewhere, a
remote peer's ``cancel`` frame). The two meet in :func:`cancel_scope`::

    with cancel_scope(ctx):          # an anyio CancelScope tied to ctx's signal and deadline
        await do_work()              # cancelled at its next await once ctx is cancelled

Leaving the block after the context was cancelled raises :class:`ContextCancelled` (carrying the
reason) instead of silently swallowing the cancellation. :func:`run_with_context` is the
one-call form, and :meth:`Context.wait_cancelled` waits for cancellation itself. Cancelling an
enclosing anyio scope works as usual and has no effect on the context.
"""

from __future__ import annotations

import inspect
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar, cast, overload

import anyio

__all__ = [
    "BACKGROUND",
    "BACKGROUND_CONTEXT",
    "TODO",
    "TODO_CONTEXT",
    "AbortController",
    "AbortSignal",
    "Context",
    "ContextCancelled",
    "ContextKey",
    "DeadlineExceeded",
    "await_with_context",
    "cancel_scope",
    "create_context_key",
    "run_with_context",
    "with_abort_signal",
    "with_cancel",
    "with_deadline",
    "with_timeout",
    "with_value",
    "without_abort_signal",
]

T = TypeVar("T")
_log = logging.getLogger("chord.context")


class ContextCancelled(Exception):
    """Raised where work stops because its context was cancelled; ``reason`` says why."""

    def __init__(self, reason: object = None) -> None:
        self.reason = reason
        super().__init__("context cancelled" if reason is None else f"context cancelled: {reason}")


class DeadlineExceeded(ContextCancelled):
    """The context's deadline passed. It is also the *reason* of a context past its deadline."""

    def __init__(self) -> None:
        super().__init__("deadline exceeded")
        self.reason = self


class AbortSignal:
    """A one-shot cancellation flag with a reason and listeners.

    Listeners run synchronously, exactly once, when the signal aborts (or at once when added to
    an already aborted signal is *not* done: check :attr:`aborted` first). A listener that raises
    is logged and does not stop the others.
    """

    __slots__ = ("_event", "_listeners", "_reason", "aborted")

    def __init__(self) -> None:
        self.aborted = False
        self._reason: object = None
        self._listeners: list[Callable[[object], None]] = []
        self._event: anyio.Event | None = None

    @property
    def reason(self) -> object:
        """The value given to :meth:`AbortController.abort` (``None`` until aborted)."""
        return self._reason

    def add_listener(self, listener: Callable[[object], None]) -> Callable[[], None]:
        """Call ``listener(reason)`` when the signal aborts. Returns an idempotent remover."""
        if self.aborted:
            return _noop
        self._listeners.append(listener)

        def remove() -> None:
            try:
                self._listeners.remove(listener)
            except ValueError:
                pass

        return remove

    async def wait(self) -> object:
        """Wait until the signal aborts and return its reason."""
        if not self.aborted:
            if self._event is None:
                self._event = anyio.Event()
            await self._event.wait()
        return self._reason

    def _abort(self, reason: object) -> None:
        if self.aborted:
            return
        self.aborted = True
        self._reason = reason
        listeners, self._listeners = self._listeners, []
        if self._event is not None:
            self._event.set()
        for listener in listeners:
            try:
                listener(reason)
            except Exception:
                _log.exception("abort listener failed")

    @staticmethod
    def any(signals: list[AbortSignal]) -> AbortSignal:
        """A signal that aborts when the first of ``signals`` does, with that one's reason."""
        controller = AbortController()
        for signal in signals:
            if signal.aborted:
                controller.abort(signal.reason)
                return controller.signal
        for signal in signals:
            signal.add_listener(controller.abort)
        return controller.signal

    def __repr__(self) -> str:
        return f"<AbortSignal aborted={self.aborted} reason={self._reason!r}>"


def _noop() -> None:
    return None


class AbortController:
    """Owns an :class:`AbortSignal`; :meth:`abort` fires it (idempotent)."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: object = None) -> None:
        """Abort the signal with ``reason`` (``None`` becomes ``"aborted"``). Later calls do nothing."""
        self.signal._abort("aborted" if reason is None else reason)


class ContextKey(Generic[T]):
    """A typed key for :func:`with_value` and :meth:`Context.value`; compared by identity."""

    __slots__ = ("description",)

    def __init__(self, description: str) -> None:
        self.description = description

    def __repr__(self) -> str:
        return f"ContextKey({self.description!r})"

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other


def create_context_key(description: str) -> ContextKey[Any]:
    """Create a new, unique :class:`ContextKey`; two keys with one description are still distinct."""
    return ContextKey(description)


class Context:
    """An immutable bag of cancellation, deadline and typed values. Derive, never mutate."""

    __slots__ = ("_deadline", "_key", "_label", "_parent", "_signal", "_value")

    def __init__(
        self,
        *,
        _parent: Context | None = None,
        _signal: AbortSignal | None = None,
        _deadline: float | None = None,
        _key: ContextKey[Any] | None = None,
        _value: object = None,
        _label: str,
    ) -> None:
        init = object.__setattr__  # the guarded __setattr__ below refuses every later write
        init(self, "_parent", _parent)
        init(self, "_signal", _signal)
        init(self, "_deadline", _deadline)
        init(self, "_key", _key)
        init(self, "_value", _value)
        init(self, "_label", _label)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Context is immutable; derive a new one with with_value/with_cancel")

    # -- cancellation -------------------------------------------------------------------------
    @property
    def abort_signal(self) -> AbortSignal | None:
        """The signal that cancels this context, or ``None`` when nothing can (besides a deadline)."""
        return self._signal

    @property
    def deadline(self) -> float | None:
        """Absolute ``time.monotonic()`` deadline, or ``None``."""
        return self._deadline

    @property
    def cancelled(self) -> bool:
        """True once the signal aborted or the deadline passed."""
        if self._signal is not None and self._signal.aborted:
            return True
        return self._deadline is not None and time.monotonic() >= self._deadline

    @property
    def reason(self) -> object:
        """Why the context is cancelled (``None`` while it is not)."""
        if self._signal is not None and self._signal.aborted:
            return self._signal.reason
        if self._deadline is not None and time.monotonic() >= self._deadline:
            return DeadlineExceeded()
        return None

    def raise_if_cancelled(self) -> None:
        """Raise :class:`ContextCancelled` (or the reason, when it is an exception) if cancelled."""
        if self.cancelled:
            raise _as_exception(self.reason)

    async def wait_cancelled(self) -> object:
        """Wait until the context is cancelled (signal or deadline) and return the reason.

        A context with neither a signal nor a deadline never returns: cancel the caller instead.
        """
        if self.cancelled:
            return self.reason
        with anyio.CancelScope(deadline=_to_anyio_deadline(self._deadline)):
            if self._signal is not None:
                return await self._signal.wait()
            await anyio.sleep_forever()
        return self.reason

    # -- values -------------------------------------------------------------------------------
    def value(self, key: ContextKey[T]) -> T | None:
        """The innermost value stored under ``key``, or ``None``."""
        node: Context | None = self
        while node is not None:
            if node._key is key:
                return node._value  # type: ignore[return-value]
            node = node._parent
        return None

    def has_value(self, key: ContextKey[Any]) -> bool:
        """True when some ancestor (or this context) stores ``key``, even with value ``None``."""
        node: Context | None = self
        while node is not None:
            if node._key is key:
                return True
            node = node._parent
        return False

    def __str__(self) -> str:
        parts: list[str] = []
        node: Context | None = self
        while node is not None:  # each context keeps only its own step; the path is built here
            parts.append(str(node._label))
            node = node._parent
        return f"[Context {'.'.join(reversed(parts))}]"

    def __repr__(self) -> str:
        return str(self)


def _derive(parent: Context, label: str, **changes: Any) -> Context:
    fields: dict[str, Any] = {
        "_parent": parent,
        "_signal": parent._signal,
        "_deadline": parent._deadline,
    }
    fields.update(changes)
    return Context(_label=label, **fields)


_new_context = Context.__new__
_set_parent = Context._parent.__set__  # type: ignore[attr-defined]  # slot descriptors
_set_signal = Context._signal.__set__  # type: ignore[attr-defined]
_set_deadline = Context._deadline.__set__  # type: ignore[attr-defined]
_set_key = Context._key.__set__  # type: ignore[attr-defined]
_set_value = Context._value.__set__  # type: ignore[attr-defined]
_set_label = Context._label.__set__  # type: ignore[attr-defined]


BACKGROUND = Context(_label="BACKGROUND_CONTEXT")
"""The root context: no signal, no deadline, no values. For work that no caller owns."""
TODO = Context(_label="TODO_CONTEXT")
"""A second, distinct root that marks "the context is not plumbed here yet"."""
BACKGROUND_CONTEXT = BACKGROUND
TODO_CONTEXT = TODO


def with_value(key: ContextKey[T], value: T, ctx: Context) -> Context:
    """A child of ``ctx`` that stores ``value`` under ``key`` (shadowing an outer one)."""
    # the hot derivation (every commit makes one): built slot by slot, the label kept lazy
    child = _new_context(Context)
    _set_parent(child, ctx)
    _set_signal(child, ctx._signal)
    _set_deadline(child, ctx._deadline)
    _set_key(child, key)
    _set_value(child, value)
    _set_label(child, _ValueLabel(key))
    return child


class _ValueLabel:
    """The label of a :func:`with_value` context, rendered only when printed."""

    __slots__ = ("_key",)

    def __init__(self, key: ContextKey[Any]) -> None:
        self._key = key

    def __str__(self) -> str:
        return f"WithValue({self._key.description})"


def _child_signal(ctx: Context, own: AbortSignal) -> AbortSignal:
    if ctx._signal is None:
        return own
    return AbortSignal.any([ctx._signal, own])


def with_cancel(ctx: Context) -> tuple[Context, Callable[..., None]]:
    """A cancellable child of ``ctx`` and the function that cancels it: ``cancel(reason=None)``.

    Cancelling the child leaves ``ctx`` and its other children alone; cancelling ``ctx`` cancels
    the child with ``ctx``'s reason.
    """
    controller = AbortController()
    signal = _child_signal(ctx, controller.signal)
    return _derive(ctx, "WithCancel", _signal=signal), controller.abort


def with_abort_signal(signal: AbortSignal, ctx: Context) -> Context:
    """A child of ``ctx`` that is cancelled when either ``ctx`` or ``signal`` aborts."""
    return _derive(ctx, "WithAbortSignal", _signal=_child_signal(ctx, signal))


def without_abort_signal(ctx: Context) -> Context:
    """A child that keeps ``ctx``'s values but can no longer be cancelled (mandatory cleanup only)."""
    return _derive(ctx, "WithoutAbortSignal", _signal=None, _deadline=None)


def with_deadline(deadline: float, ctx: Context) -> tuple[Context, Callable[..., None]]:
    """A child cancelled at ``deadline`` (``time.monotonic()`` seconds) or by the returned function.

    The earlier of ``deadline`` and the parent's deadline wins.
    """
    if not math.isfinite(deadline):
        raise ValueError(f"deadline must be a finite time.monotonic() value, got {deadline!r}")
    child, cancel = with_cancel(ctx)
    effective = deadline if ctx._deadline is None else min(deadline, ctx._deadline)
    return _derive(child, "WithDeadline", _deadline=effective), cancel


def with_timeout(seconds: float, ctx: Context) -> tuple[Context, Callable[..., None]]:
    """:func:`with_deadline` at ``time.monotonic() + seconds``."""
    return with_deadline(time.monotonic() + seconds, ctx)


def _to_anyio_deadline(deadline: float | None) -> float:
    if deadline is None:
        return math.inf
    return anyio.current_time() + (deadline - time.monotonic())


def _as_exception(reason: object) -> BaseException:
    if isinstance(reason, BaseException):
        return reason
    return ContextCancelled(reason)


@contextmanager
def cancel_scope(ctx: Context) -> Iterator[anyio.CancelScope]:
    """An anyio ``CancelScope`` cancelled when ``ctx`` is (signal or deadline).

    Enter it in the task doing the work. When the block ends because the context was cancelled,
    :class:`ContextCancelled` (or the abort reason, if it is an exception) is raised in place of
    anyio's silent scope exit. Cancellation from an outer anyio scope propagates unchanged.
    """
    if ctx.cancelled:
        raise _as_exception(ctx.reason)
    scope = anyio.CancelScope(deadline=_to_anyio_deadline(ctx._deadline))
    remove = _noop
    if ctx._signal is not None:
        remove = ctx._signal.add_listener(lambda _reason: scope.cancel())
    try:
        with scope:
            yield scope
    finally:
        remove()
    if scope.cancelled_caught or (scope.cancel_called and ctx.cancelled):
        raise _as_exception(ctx.reason)


@overload
async def run_with_context(fn: Callable[..., Awaitable[T]], ctx: Context, *args: Any) -> T: ...
@overload
async def run_with_context(fn: Awaitable[T], ctx: Context) -> T: ...
async def run_with_context(fn: Any, ctx: Context, *args: Any) -> Any:
    """Run ``fn(*args)`` (or await an awaitable) so that it is cancelled when ``ctx`` is.

    Raises :class:`ContextCancelled` (or the abort reason) if the context is cancelled first.
    """
    if ctx.cancelled and not callable(fn) and inspect.iscoroutine(fn):
        fn.close()  # never started: close it so it is not reported as "never awaited"
    with cancel_scope(ctx):
        awaitable = cast("Awaitable[Any]", fn(*args) if callable(fn) else fn)
        return await awaitable
    raise AssertionError("unreachable")  # pragma: no cover - cancel_scope raised


async def await_with_context(awaitable: Awaitable[T], ctx: Context) -> T:
    """Await ``awaitable`` unless ``ctx`` is cancelled first; then raise its reason.

    The awaitable is run in the caller's task, so on cancellation it is cancelled with the wait
    (Python cannot abandon a coroutine). Use :func:`run_with_context` when you start the work.
    """
    return await run_with_context(awaitable, ctx)
