"""A replicated state fed by an external commit stream (docs/design/chord.md#replicated-state, "attached source").

Some owners already have an exact op log: every commit comes with its ops and a gapless cursor
(pico3's conversation view is one). Re-deriving ops from a draft or a diff would waste work and
lose exactness, so :func:`replicated_state_from_source` publishes the source's frames *as they
are*: each frame's ``value`` and ``ops`` references become one revision, with no apply and no
re-diff.

The source protocol splits attaching into two steps so nothing is lost or repeated:
``attach()`` captures a snapshot (every commit up to the boundary) and starts buffering later
commits; ``activate(listener)`` drains that buffer in order and then forwards live frames. The
state's own sequence starts at 0 at attach, independent of the source's cursor.

A frame whose cursor is not exactly ``previous + 1`` (or not an int) is reported to ``on_error``;
the attachment is then disposed and the value stays at the last good revision. Listener failures
go to ``on_error`` and never reach the source.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import msgspec
from anyio.abc import TaskGroup

from chord.context import Context
from chord.state._delivery import ErrorReporter, Listener, Publisher
from chord.state._registry import register

__all__ = [
    "AttachedReplicatedState",
    "ReplicatedStateSource",
    "ReplicatedStateSourceAttachment",
    "SourceFrame",
    "SourceSnapshot",
    "replicated_state_from_source",
]

T = TypeVar("T")


class SourceSnapshot(msgspec.Struct, Generic[T], frozen=True):
    """The value at the attach boundary and the cursor of the last commit it includes."""

    value: T
    cursor: int


class SourceFrame(msgspec.Struct, Generic[T], frozen=True):
    """One commit after the boundary: its cursor, resulting value, exact ops and context."""

    cursor: int
    value: T
    ops: tuple[tuple[Any, ...], ...]
    context: Context


class ReplicatedStateSourceAttachment(Protocol):
    """One attachment to a source: a snapshot, then frames once activated."""

    @property
    def snapshot(self) -> SourceSnapshot[Any]: ...

    def activate(self, listener: Callable[[SourceFrame[Any]], None]) -> None: ...

    def dispose(self) -> None: ...


class ReplicatedStateSource(Protocol):
    """Anything that can be attached to: ``attach()`` captures a snapshot and buffers frames."""

    def attach(self) -> ReplicatedStateSourceAttachment: ...


class AttachedReplicatedState(Publisher):
    """A read-only replicated state that republishes a source's frames exactly."""

    __slots__ = ("_attachment", "_cursor", "_disposed", "_sequence", "_value")

    def __init__(
        self,
        source: ReplicatedStateSource,
        *,
        task_group: TaskGroup | None = None,
        on_error: ErrorReporter | None = None,
    ) -> None:
        super().__init__(task_group, on_error)
        attachment = source.attach()
        snapshot = attachment.snapshot
        self._attachment = attachment
        self._value: Any = snapshot.value
        self._cursor = snapshot.cursor
        self._sequence = 0
        self._disposed = False
        register(self)
        attachment.activate(self._on_frame)

    @property
    def value(self) -> Any:
        """The latest revision (the source's own object)."""
        return self._value

    @property
    def sequence(self) -> int:
        """0 at attach, +1 per frame."""
        return self._sequence

    @property
    def disposed(self) -> bool:
        return self._disposed

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Follow the value, with the same delivery rules as every state."""
        sub = self._subscribe(listener, (0, self._sequence, self._value))
        return self._unsubscriber(sub)

    def dispose(self) -> None:
        """Detach from the source (idempotent); the value stays at the last revision."""
        if self._disposed:
            return
        self._disposed = True
        self._attachment.dispose()

    def _on_frame(self, frame: SourceFrame[Any]) -> None:
        if self._disposed:
            return
        cursor = frame.cursor
        if type(cursor) is not int or cursor != self._cursor + 1:
            self._runtime.report(
                ValueError(
                    f"replicated state source cursor gap: expected {self._cursor + 1}, "
                    f"got {cursor!r}; the attachment is disposed"
                )
            )
            self.dispose()
            return
        self._cursor = cursor
        self._value = frame.value
        self._sequence += 1
        try:
            self._enqueue("update", frame.value, 0, self._sequence, frame.ops, frame.context)
        except Exception as error:  # source listener failures never reach the source
            self._runtime.report(error)

    def __repr__(self) -> str:
        return f"<AttachedReplicatedState sequence={self._sequence} cursor={self._cursor}>"


def replicated_state_from_source(
    source: ReplicatedStateSource,
    *,
    task_group: TaskGroup | None = None,
    on_error: ErrorReporter | None = None,
) -> AttachedReplicatedState:
    """Attach to ``source`` and publish its frames as they are (see the module docstring)."""
    return AttachedReplicatedState(source, task_group=task_group, on_error=on_error)
