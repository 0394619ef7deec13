"""The runtime ``rt`` handed to a task's handlers (docs/design/harness.md#runtime).

One :class:`Runtime` per handler call, bound to that call's :class:`Invocation` token. Every
method that touches the session checks the token first, and the kernel checks it again on the
line, so a runtime used after its handler returned (or after the task was marked for abort)
raises :class:`~pico3.kernel.errors.Forbidden` instead of writing.

``rt.commit(builder, ctx)`` runs ``builder(tx, current, ctx)`` with the task's authority: its
own conversation and owned subtree, its own slot (``tx.slot(current)``), its checkpoint
(``tx.checkpoint({...})``, run mode only). ``current`` is the fresh task record, not the
handler's (possibly stale) ``task`` argument.

Time comes from the harness clock: ``rt.now()`` for durable timestamps, ``rt.sleep(until_ms,
ctx)`` to wait for an absolute time (cancellable; a suspend or abort wakes it).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from chord.context import Context
from pico3.kernel.errors import Forbidden
from pico3.kernel.tx import Authority, Transaction
from pico3.session_data.context import DerivedContext
from pico3.storage.records import Entry, Input, Task
from pico3.tasks.invocation import Invocation, InvocationMode

if TYPE_CHECKING:
    from pico3.kernel.commit import Kernel
    from pico3.tasks.clock import Clock
    from pico3.tasks.waiters import Waiters

__all__ = ["DeadlockError", "Runtime", "RuntimeHost", "TaskHarness"]


class RuntimeHost(Protocol):
    """What a :class:`Runtime` reaches through: the session's scheduler, seen from a task.

    A protocol here, so this module does not import the scheduler that imports it
    (:class:`~pico3.tasks.scheduler.Scheduler` is the one implementation).
    """

    @property
    def kernel(self) -> Kernel: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def services(self) -> Mapping[str, Any]: ...
    @property
    def harness(self) -> Any: ...
    @property
    def waiters(self) -> Waiters: ...
    @property
    def hooks_factory(self) -> Callable[[Any, int, int], Any] | None: ...
    async def abort_task(self, task_id: int, ctx: Context) -> str: ...


class DeadlockError(ValueError):
    """A wait that could never end: a task waiting on itself, or on a task whose unresolved
    ``after`` chain reaches the waiter."""


class TaskHarness:
    """A task's window on its harness: the registries it reads, nothing that commits.

    ``tools`` and ``sections`` are the harness's :class:`~pico3.tools.ToolRegistry` and
    :class:`~pico3.turn.sections.SectionRegistry` (``None`` on a bare scheduler without a
    harness): the model call reads the tool loadout and the system sections from them.
    ``approval`` is its approval gate, which ``pi.tool`` applies.
    """

    __slots__ = ("_harness",)

    def __init__(self, harness: Any) -> None:
        self._harness = harness

    @property
    def tools(self) -> Any:
        """The harness's tool registry (or ``None``)."""
        return getattr(self._harness, "tools", None)

    @property
    def sections(self) -> Any:
        """The harness's section registry (or ``None``)."""
        return getattr(self._harness, "sections", None)

    @property
    def approval(self) -> Any:
        """The harness's approval gate (``pi.tool`` reads it; docs/design/harness.md#approval-gate),
        or ``None`` on a bare scheduler without a harness."""
        return getattr(self._harness, "approval", None)

    @property
    def key(self) -> int:
        """The same for every window on one harness while it lives (a new window is made at each
        :attr:`Runtime.harness` access): what a per-harness cache keys by."""
        return id(self._harness)

    def __repr__(self) -> str:
        return "<TaskHarness: tools and sections>"


class Runtime:
    """What a handler may do, bound to one invocation."""

    __slots__ = ("_kind", "_scheduler", "_token", "conversation_id", "task_id")

    def __init__(self, scheduler: RuntimeHost, task: Task, token: Invocation, kind: Any) -> None:
        self._scheduler = scheduler
        self._token = token
        self._kind = kind
        self.task_id = task.id
        self.conversation_id = task.conversation_id

    @property
    def kind(self) -> str:
        """The kind's name."""
        return self._kind.name

    @property
    def mode(self) -> InvocationMode:
        """``"run"`` for phase handlers, ``"abort"`` for the abort handler."""
        return self._token.mode

    @property
    def alive(self) -> bool:
        """False once the handler this runtime was made for has returned."""
        return self._token.alive

    @property
    def harness(self) -> TaskHarness:
        """What this task may see of its harness: the tool and section registries.

        Not the :class:`~pico3.harness.Harness` itself: that one is the host's, and through it
        (its kernel, its conversation handles) any code could commit with host or core
        authority. A task writes only through :meth:`commit` and the other methods here.
        """
        return TaskHarness(self._scheduler.harness)

    @property
    def services(self) -> Mapping[str, Any]:
        """Host-provided services (``HarnessOptions.services``: models, process host, ...)."""
        return self._scheduler.services

    @property
    def hooks(self) -> Any:
        """The hook runner for this kind and task (installed by the hooks layer through
        ``Scheduler.hooks_factory``), or ``None`` when no hooks layer is present."""
        factory = self._scheduler.hooks_factory
        return None if factory is None else factory(self._kind, self.task_id, self.conversation_id)

    def _live(self) -> None:
        if not self._token.alive:
            raise Forbidden(f"task {self.task_id}: this runtime's handler has returned")

    # -- commits ---------------------------------------------------------------------------
    async def commit(
        self,
        builder: Callable[[Transaction, Task, Context], Any],
        ctx: Context,
        *,
        durable: bool = True,
    ) -> Any:
        """Run ``builder(tx, current, ctx)`` as one commit with this task's authority.

        ``durable=False``: return before the batch is durable, and do not wait for the queued
        batches a read saw (see :meth:`pico3.kernel.commit.Kernel.commit`): the handler's next
        commit that waits makes them durable, and until then it must not report them or act
        outside the session on them."""
        self._live()
        task_id = self.task_id

        async def build(tx: Transaction, line_ctx: Context) -> Any:
            current = await tx.task(task_id)
            assert current is not None
            result = builder(tx, current, line_ctx)
            if inspect.isawaitable(result):
                result = await result
            return result

        authority = Authority.CORE if self._kind.core and not self._kind.builtin else Authority.TASK
        return await self._scheduler.kernel.commit(
            build,
            ctx,
            conversation_id=self.conversation_id,
            authority=authority,
            invoker=self._token,
            durable=durable,
        )

    # -- time ------------------------------------------------------------------------------
    def now(self) -> int:
        """Epoch milliseconds from the harness clock (use it for anything durable)."""
        return self._scheduler.clock.now()

    async def sleep(self, until_ms: int, ctx: Context) -> None:
        """Sleep until the clock reads ``until_ms`` (absolute); cancellable through ``ctx``."""
        self._live()
        await self._scheduler.clock.sleep_until(until_ms, ctx)

    # -- waits and aborts ------------------------------------------------------------------
    async def wait_for_task(self, task_id: int, ctx: Context) -> Task:
        """Wait for another task to end; rejects a wait that could never end."""
        self._live()
        if task_id == self.task_id:
            raise DeadlockError(f"task {task_id} cannot wait for itself")
        self._check_dependency_path(task_id)
        return await self._scheduler.waiters.wait_for_task(task_id, ctx)

    def _check_dependency_path(self, target: int) -> None:
        index = self._scheduler.kernel.task_index
        stack, seen = [target], set[int]()
        while stack:
            current = index.get(stack.pop())
            if current is None or current.status == "terminal" or current.id in seen:
                continue
            seen.add(current.id)
            for dep in current.after:
                if dep == self.task_id:
                    raise DeadlockError(
                        f"task {target} depends (through 'after') on the waiting task {self.task_id}"
                    )
                stack.append(dep)

    async def wait_for_input(self, input_id: int, ctx: Context) -> Input:
        """Wait until an input is terminal (``done`` / ``unanswered``)."""
        self._live()
        return await self._scheduler.waiters.wait_for_input(input_id, ctx)

    async def abort_task(self, task_id: int, ctx: Context) -> str:
        """Mark a task of this task's subtree for abort (``"marked"`` / ``"terminal"``)."""
        self._live()
        task = self._scheduler.kernel.task_index.get(task_id)
        if task is not None and not await self._in_subtree(task.conversation_id, ctx):
            raise Forbidden(f"task {task_id} is outside task {self.task_id}'s subtree")
        return await self._scheduler.abort_task(task_id, ctx)

    async def _in_subtree(self, conversation_id: int, ctx: Context) -> bool:
        token = self._token
        return await self._scheduler.kernel.commit(
            lambda tx, _ctx: tx.in_subtree(token.task_id, conversation_id),
            ctx,
            authority=Authority.CORE,
        )

    # -- reads -----------------------------------------------------------------------------
    async def _read(
        self, conversation_id: int, fn: Callable[[Transaction], Any], ctx: Context
    ) -> Any:
        self._live()
        task_id = self.task_id

        async def build(tx: Transaction, _ctx: Context) -> Any:
            if not tx.in_subtree(task_id, conversation_id):
                raise Forbidden(
                    f"conversation {conversation_id} is outside task {task_id}'s subtree"
                )
            await tx.load(conversation_id)
            result = fn(tx)
            return await result if inspect.isawaitable(result) else result

        return await self._scheduler.kernel.commit(
            build, ctx, conversation_id=conversation_id, authority=Authority.CORE
        )

    async def rewindable(self, conversation_id: int, ctx: Context) -> dict[str, Any]:
        """A plain snapshot of a rewindable document (config and kind defaults filled in)."""
        return await self._read(conversation_id, lambda tx: tx.snapshot("rewindable"), ctx)

    async def sticky(self, conversation_id: int, ctx: Context) -> dict[str, Any]:
        """A plain snapshot of a sticky document (config and kind defaults filled in)."""
        return await self._read(conversation_id, lambda tx: tx.snapshot("sticky"), ctx)

    async def config(self, conversation_id: int, ctx: Context) -> dict[str, Any]:
        """Resolved config of a conversation (every declared key, this kind's included)."""
        return await self._read(
            conversation_id, lambda tx: tx.config(conversation_id).resolved(), ctx
        )

    async def rewindable_as_of(self, conversation_id: int, at: int, ctx: Context) -> dict[str, Any]:
        """The rewindable document as of the commit that appended entry ``at``."""
        return await self._read(
            conversation_id, lambda tx: tx.rewindable_as_of(conversation_id, at), ctx
        )

    async def context(
        self, conversation_id: int, ctx: Context, at: int | None = None
    ) -> DerivedContext:
        """Derived model context of a conversation (through ``at``)."""
        return await self._read(conversation_id, lambda tx: tx.context(conversation_id, at), ctx)

    async def newest_entry(
        self, conversation_id: int, ctx: Context, kind: str | None = None
    ) -> Entry | None:
        """The newest fork-visible entry (of ``kind``)."""
        return await self._read(
            conversation_id, lambda tx: tx.newest_entry(conversation_id, kind), ctx
        )

    async def task(self, task_id: int, ctx: Context) -> Task | None:
        """A task record (point read)."""
        self._live()
        return await self._scheduler.kernel.commit(
            lambda tx, _c: tx.task(task_id), ctx, authority=Authority.CORE
        )
