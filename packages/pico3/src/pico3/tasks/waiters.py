"""Waiters: wait for a task to end, an input to resolve, or a conversation to go idle (docs/design/harness.md#waiters).

Registration happens *on the line*: read the state; if the wait is already satisfied, return at
once; otherwise install the waiter before leaving the line. Resolution happens off the line in
the kernel's commit listener, after the commit that satisfied it. Because every commit runs on
the line and updates the kernel's indexes there, a completion can never fall between the read
and the installation: no lost wake-up.

Cancelling a wait's ``ctx`` removes only that waiter, never durable work; an already-cancelled
``ctx`` rejects immediately. On close or fault every waiter rejects with ``Closed`` /
``Faulted``.

Idle (a conversation): no live non-background task in it, nor in the conversations it owns
through live foreground tasks (recursively). Session idle: no live non-background task anywhere.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from chord.context import Context, cancel_scope
from pico3.kernel.tx import Batch
from pico3.storage.records import Input, Task

if TYPE_CHECKING:
    from pico3.kernel.commit import Kernel

__all__ = ["UnknownTask", "Waiters", "conversation_idle"]


class UnknownTask(LookupError):
    """No task (or input) with that id exists in this session."""


class _Waiter:
    __slots__ = ("error", "event", "value")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.value: Any = None
        self.error: BaseException | None = None

    def resolve(self, value: Any) -> None:
        if not self.event.is_set():
            self.value = value
            self.event.set()

    def fail(self, error: BaseException) -> None:
        if not self.event.is_set():
            self.error = error
            self.event.set()


def conversation_idle(kernel: Kernel, conversation_id: int | None) -> bool:
    """True when no live non-background task keeps ``conversation_id`` (or, for ``None``, the
    session) from being idle."""
    live = [t for t in kernel.live_tasks() if t.background is not True]
    if conversation_id is None:
        return not live
    scope = {conversation_id}
    changed = True
    while changed:
        changed = False
        owners = {t.id for t in live if t.conversation_id in scope}
        for record in kernel.conversations.values():
            if record.id not in scope and record.owner in owners:
                scope.add(record.id)
                changed = True
    return not any(t.conversation_id in scope for t in live)


class Waiters:
    """All pending waits of one session."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self._tasks: dict[int, list[_Waiter]] = {}
        self._inputs: dict[int, list[_Waiter]] = {}
        self._idle: list[tuple[int | None, _Waiter]] = []
        self._error: BaseException | None = None

    @property
    def pending(self) -> int:
        """How many waiters are installed (tests)."""
        return (
            sum(len(v) for v in self._tasks.values())
            + sum(len(v) for v in self._inputs.values())
            + len(self._idle)
        )

    async def _wait(
        self,
        install: Callable[[], Awaitable[Any]],
        remove: Callable[[_Waiter], None],
        ctx: Context,
    ) -> Any:
        ctx.raise_if_cancelled()

        async def on_line() -> Any:
            if self._error is not None:
                raise self._error
            return await install()

        found = await self._kernel.on_line(on_line, ctx)
        if not isinstance(found, _Waiter):
            return found
        try:
            with cancel_scope(ctx):
                await found.event.wait()
        finally:
            remove(found)
        if found.error is not None:
            raise found.error
        return found.value

    async def wait_for_task(self, task_id: int, ctx: Context) -> Task:
        """The task's terminal record, once it is terminal."""
        kernel = self._kernel

        async def read() -> Task | _Waiter:
            task = kernel.task_index.get(task_id)
            if task is None:
                task = await kernel.storage.task(task_id, ctx)
            if task is None:
                raise UnknownTask(f"task {task_id} does not exist")
            if task.status == "terminal":
                return task
            waiter = _Waiter()
            self._tasks.setdefault(task_id, []).append(waiter)
            return waiter

        def remove(waiter: _Waiter) -> None:
            _discard(self._tasks, task_id, waiter)

        return await self._wait(read, remove, ctx)

    async def wait_for_input(self, input_id: int, ctx: Context) -> Input:
        """The input's record once it is terminal (``done`` or ``unanswered``)."""
        kernel = self._kernel

        async def read() -> Input | _Waiter:
            record = await kernel.storage.input(input_id, ctx)
            if record is None:
                raise UnknownTask(f"input {input_id} does not exist")
            if record.status in ("done", "unanswered"):
                return record
            waiter = _Waiter()
            self._inputs.setdefault(input_id, []).append(waiter)
            return waiter

        def remove(waiter: _Waiter) -> None:
            _discard(self._inputs, input_id, waiter)

        return await self._wait(read, remove, ctx)

    async def wait_for_idle(self, conversation_id: int | None, ctx: Context) -> None:
        """Return once the conversation (or, for ``None``, the session) is idle."""

        async def read() -> _Waiter | None:
            if conversation_idle(self._kernel, conversation_id):
                return None
            waiter = _Waiter()
            self._idle.append((conversation_id, waiter))
            return waiter

        def remove(waiter: _Waiter) -> None:
            self._idle = [(c, w) for c, w in self._idle if w is not waiter]

        await self._wait(read, remove, ctx)

    def on_commit(self, batch: Batch) -> None:
        """Resolve what this persisted commit satisfied (off the line)."""
        ended = False
        for task in batch.tasks.values():
            if task.status == "terminal":
                ended = True
                for waiter in self._tasks.pop(task.id, []):
                    waiter.resolve(task)
        for record in batch.inputs.values():
            if record.status in ("done", "unanswered"):
                for waiter in self._inputs.pop(record.id, []):
                    waiter.resolve(record)
        if ended and self._idle:
            keep: list[tuple[int | None, _Waiter]] = []
            for cid, waiter in self._idle:
                if conversation_idle(self._kernel, cid):
                    waiter.resolve(None)
                else:
                    keep.append((cid, waiter))
            self._idle = keep

    def close(self, error: BaseException) -> None:
        """Reject every waiter (and every later registration) with ``error``."""
        self._error = error
        waiters = [w for ws in self._tasks.values() for w in ws]
        waiters += [w for ws in self._inputs.values() for w in ws]
        waiters += [w for _, w in self._idle]
        self._tasks.clear()
        self._inputs.clear()
        self._idle.clear()
        for waiter in waiters:
            waiter.fail(error)


def _discard(table: dict[int, list[_Waiter]], key: int, waiter: _Waiter) -> None:
    found = table.get(key)
    if found is not None and waiter in found:
        found.remove(waiter)
        if not found:
            del table[key]
