"""The scheduler: one per session, dispatching every task of every conversation (docs/design/harness.md#scheduler).

It is disabled until :meth:`Scheduler.resume`. After that, every commit that touched a task, and
every invocation that returns, *kicks* it: mark dirty and, unless a drain is already running or
the scheduler is held, start one. A drain repeats while dirty:

1. on the line, *reserve* every eligible task (one commit: pending tasks turn ``running``);
2. off the line, start one invocation per reserved task in the harness's task group.

Eligibility (tasks whose kind is not registered are skipped and stay as they are):

* marked for abort, no run invocation active → a fresh **abort** invocation (ignores ``after``);
* marked with a run invocation still unwinding → wait; the abort follows when it returns;
* pending, unmarked, every ``after`` task terminal (any outcome) → **run** from the start;
* running, unmarked, no invocation (found so at open, or left by a suspend) → **run** into the
  current checkpoint: recovery.

One invocation per task at a time. An invocation owns its task id until its handler *and* its
closure commit return; that is the abort join. A run invocation loops: handler → step →
transition commit → next handler, until ``Done``. Each handler call, transition and closure gets
a fresh :class:`Invocation` token, revoked as soon as it returns.

Contract faults (docs/design/decisions.md#d8-g6): a handler or builder that raises (other than by the scheduler's own
cancellation) or returns a bad step ends the task ``{"status": "faulted", "error"}``, reported
through ``on_report``; the session carries on.

Quiescence (docs/design/decisions.md#d8-g8): :meth:`quiescent` is true when no invocation exists — no phase handler, no
sleep inside one, no waiting hook. :meth:`hold` (only when quiescent, else
:class:`NotQuiescent`) stops reservation and dispatch until released; commits continue.
:meth:`suspend` cancels every invocation, waits for them to unwind, clears ``waitingOn`` on live
tool slots in one commit, and leaves every task record live for the next open.

Why one module: ``Scheduler`` is one state machine (disabled, draining, held, suspended) whose
reservation, dispatch, phase transitions, contract faults and quiescence all share the private set
of running invocations and the dirty flag; the rules above are properties of that one object, and
moving methods out would only pass its private state around.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup
from msgspec import UNSET

from chord.context import BACKGROUND, Context, ContextCancelled, cancel_scope, with_cancel
from pico3.kernel.commit import Kernel
from pico3.kernel.errors import Closed, Faulted, Forbidden, KernelError
from pico3.kernel.tx import Authority, Batch, Transaction
from pico3.storage.records import DocRef, Input, Task, TaskPatch
from pico3.tasks.clock import Clock
from pico3.tasks.invocation import Invocation, InvocationMode
from pico3.tasks.kinds import RETRY, Completion, Done, KindRegistry, Next, TaskInfo, TaskKind
from pico3.tasks.runtime import Runtime
from pico3.tasks.waiters import UnknownTask, Waiters

__all__ = ["ContractFault", "NotQuiescent", "Scheduler", "TaskFaulted"]


class NotQuiescent(RuntimeError):
    """``hold()`` was called while an invocation exists (docs/design/decisions.md#d8-g8)."""


class ContractFault(Exception):
    """A handler broke the task contract (bad step, unknown phase, Next into an in-flight
    phase, invalid completion or checkpoint)."""


class TaskFaulted(Exception):
    """Reported through ``on_report`` when a task ends ``faulted``; ``__cause__`` is the error."""

    def __init__(self, task_id: int, kind: str, error: str) -> None:
        super().__init__(f"task {task_id} ({kind}) faulted: {error}")
        self.task_id = task_id
        self.kind = kind
        self.error = error


class _Retry(Exception):
    """Raised inside a transition builder to discard its batch (the step said ``"retry"``)."""


@dataclass(eq=False)
class _Running:
    task_id: int
    mode: InvocationMode
    kind: TaskKind
    ctx: Context
    cancel: Callable[..., None]
    done: anyio.Event = field(default_factory=anyio.Event)
    cancelled: bool = False

    def stop(self, reason: str) -> None:
        self.cancelled = True
        self.cancel(ContextCancelled(reason))


class Scheduler:
    """Dispatches task invocations of one kernel."""

    def __init__(
        self,
        kernel: Kernel,
        clock: Clock,
        *,
        services: Mapping[str, Any] | None = None,
        harness: Any = None,
    ) -> None:
        self.kernel = kernel
        self.clock = clock
        self.services: Mapping[str, Any] = dict(services or {})
        self.harness = harness
        self.kinds = KindRegistry(kernel.config_keys, self)
        self.waiters = Waiters(kernel)
        self._tg: TaskGroup | None = None
        self._enabled = False
        self._holds = 0
        self._dirty = False
        self._draining = False
        self._running: dict[int, _Running] = {}
        self._idle_event = anyio.Event()
        self.hooks_factory: Callable[[TaskKind, int, int], Any] | None = None
        kernel.kinds = self.kinds
        kernel.describe = self._describe
        kernel.add_commit_listener(self._on_commit)
        kernel.add_fault_listener(self.close)

    # -- wiring ----------------------------------------------------------------------------
    def attach(self, task_group: TaskGroup) -> None:
        """Run invocations in ``task_group`` (the harness's; entered by ``async with h``)."""
        self._tg = task_group

    @property
    def enabled(self) -> bool:
        """True between :meth:`resume` and :meth:`suspend`."""
        return self._enabled

    def register(self, kind: TaskKind) -> Callable[[], None]:
        """Register ``kind`` (see :class:`KindRegistry`) and kick: pending tasks of that name
        may now dispatch."""
        unregister = self.kinds.register(kind)
        views = self.kernel.views
        views.mark_stale()  # statuses come from the kind's describe: shown again in full

        def undo() -> None:
            unregister()
            views.mark_stale()

        self.kick()
        return undo

    def _describe(self, task: Task, slot: dict[str, Any] | None) -> Any:
        kind = self.kinds.get(task.kind)
        if kind is not None and kind.describe is not None:
            return kind.describe(TaskInfo.of(task, slot))
        if task.checkpoint is not UNSET:
            return {"phase": task.checkpoint.get("phase")}
        return {"phase": task.status}

    def _on_commit(self, batch: Batch) -> None:
        self.waiters.on_commit(batch)
        # only creations, ends and marks change what is eligible (a checkpoint does not); a
        # task created running (claimed at creation) is one not yet dispatched
        running = self._running
        if any(
            t.status != "running" or t.abort is True or t.id not in running
            for t in batch.tasks.values()
        ):
            self.kick()

    # -- resume / kick / drain ---------------------------------------------------------------
    async def resume(self, ctx: Context) -> list[int]:
        """Orphan live tasks whose kind is not registered (one commit), then enable dispatch.
        Returns the orphaned ids. Orphaning happens here only, never on a later unregister."""
        if self._tg is None:
            raise RuntimeError("enter the harness (`async with harness:`) before resume()")
        if self._enabled:
            raise RuntimeError("resume() was already called")

        async def orphan(tx: Transaction, _ctx: Context) -> list[int]:
            ids: list[int] = []
            for task in self.kernel.live_tasks():
                if self.kinds.get(task.kind) is None:
                    await tx.load(task.conversation_id)
                    tx._finish(task.id, {"status": "orphaned"})  # pyright: ignore[reportPrivateUsage]
                    ids.append(task.id)
            # registered live foreground work in conversations an orphan owned is marked
            owners = set(ids)
            while owners:
                owned = [r.id for r in self.kernel.conversations.values() if r.owner in owners]
                owners = set()
                for cid in owned:
                    for task in tx.live_tasks(cid):
                        if task.background is not True:
                            tx.mark_task(task.id)
                            owners.add(task.id)
            return ids

        orphaned = await self.kernel.commit(orphan, ctx, authority=Authority.CORE)
        self._enabled = True
        self._dirty = True
        self.kick()
        return orphaned

    def kick(self) -> None:
        """Mark dirty; start a drain if enabled, not held and not already draining."""
        self._dirty = True
        if self._can_dispatch() and not self._draining:
            self._draining = True
            assert self._tg is not None
            self._tg.start_soon(self._drain)

    def dispatches_at_once(self) -> bool:
        """Whether a new eligible task is dispatched once its creating commit is durable."""
        return self._can_dispatch()

    def _can_dispatch(self) -> bool:
        return self._enabled and self._holds == 0 and self._tg is not None

    async def _drain(self) -> None:
        try:
            while self._dirty and self._can_dispatch():
                self._dirty = False
                reserved = await self.kernel.commit(
                    self._reserve, BACKGROUND, authority=Authority.CORE
                )
                if not self._can_dispatch():
                    self._dirty = True  # held or suspended meanwhile: running tasks wait
                    break
                for task_id, mode, kind in reserved:
                    self._start(task_id, mode, kind)
        except (Closed, Faulted):
            pass
        except Exception as exc:  # a scheduler bug must not take the session down silently
            self.kernel.report(exc)
        finally:
            self._draining = False

    def _reserve(
        self, tx: Transaction, _ctx: Context
    ) -> list[tuple[int, InvocationMode, TaskKind]]:
        out: list[tuple[int, InvocationMode, TaskKind]] = []
        index = self.kernel.task_index
        for task in self.kernel.live_tasks():
            if task.id in self._running:
                continue
            kind = self.kinds.get(task.kind)
            if kind is None:
                continue
            if task.abort is True:
                if task.status == "pending":
                    tx.set_task(TaskPatch(id=task.id, status="running"))
                out.append((task.id, "abort", kind))
                continue
            if task.status == "pending":
                blocked = any(
                    (dep_task := index.get(dep)) is not None and dep_task.status != "terminal"
                    for dep in task.after
                )
                if blocked:
                    continue
                tx.set_task(TaskPatch(id=task.id, status="running"))
            out.append((task.id, "run", kind))
        return out

    def _start(self, task_id: int, mode: InvocationMode, kind: TaskKind) -> None:
        if task_id in self._running:
            return
        ctx, cancel = with_cancel(BACKGROUND)
        running = _Running(task_id, mode, kind, ctx, cancel)
        self._running[task_id] = running
        assert self._tg is not None
        self._tg.start_soon(self._invoke, running)

    # -- invocations -----------------------------------------------------------------------
    async def _invoke(self, running: _Running) -> None:
        try:
            error: BaseException | None = None
            try:
                with cancel_scope(running.ctx):
                    if running.mode == "run":
                        await self._run(running)
                    else:
                        await self._abort(running)
            except (Closed, Faulted):
                pass
            except anyio.get_cancelled_exc_class():
                if not running.cancelled:
                    raise
            except Exception as exc:
                if not running.cancelled:
                    error = exc
            if error is not None:
                # still holding the task's invocation slot: nothing can re-dispatch it meanwhile
                with anyio.CancelScope(shield=True):
                    await self._fault(running, error)
        finally:
            del self._running[running.task_id]
            running.done.set()
            if not self._running:
                self._idle_event.set()
                self._idle_event = anyio.Event()
        self.kick()

    def _authority(self, kind: TaskKind) -> Authority:
        return Authority.CORE if kind.core and not kind.builtin else Authority.TASK

    async def _snapshot(
        self, task_id: int, conversation_id: int, ctx: Context, *, durable: bool = True
    ) -> tuple[Task, dict[str, Any] | None] | None:
        def read(tx: Transaction, _ctx: Context) -> tuple[Task, dict[str, Any] | None] | None:
            task = self.kernel.task_index.get(task_id)
            if task is None or task.status == "terminal":
                return None
            sticky = self.kernel.documents.get(DocRef.sticky(conversation_id)) or {}
            slots = sticky.get("tasks")
            slot = slots.get(str(task_id)) if type(slots) is dict else None
            return task, (dict(slot) if type(slot) is dict else None)

        return await self.kernel.commit(
            read, ctx, conversation_id=conversation_id, authority=Authority.CORE, durable=durable
        )

    async def _run(self, running: _Running) -> None:
        kind, task_id, ctx = running.kind, running.task_id, running.ctx
        allow_inflight = True  # the first entry of an invocation is the recovery entry
        durable = True  # False right after a Next(durable=False): its phase reads it as is
        while True:
            start = self.kernel.task_index.get(task_id)
            if start is None or start.status == "terminal" or start.abort is True:
                return
            snap = await self._snapshot(task_id, start.conversation_id, ctx, durable=durable)
            if snap is None:
                return
            task, slot = snap
            if task.abort is True:
                return
            if task.checkpoint is UNSET:
                handler = kind.initial
            else:
                phase = task.checkpoint.get("phase")
                found = kind.phases.get(phase) if isinstance(phase, str) else None
                if found is None:
                    raise ContractFault(
                        f"checkpoint phase {phase!r} has no handler in {kind.name!r}"
                    )
                if phase in kind.inflight and not allow_inflight:
                    raise ContractFault(f"in-flight phase {phase!r} entered outside recovery")
                handler = found
            token = Invocation(task_id, "run")
            rt = Runtime(self, task, token, kind)
            try:
                step = await handler(TaskInfo.of(task, slot), rt, ctx)
            finally:
                token.revoke()
            if isinstance(step, Next):
                outcome = await self._transition(running, task, step, ctx)
                durable = True
                if outcome == "retry":
                    continue
                if outcome == "stop":
                    if not step.durable:
                        await self.kernel.settle()  # the task ended: durable before it returns
                    return
                allow_inflight = False
                durable = step.durable
                continue
            if isinstance(step, Done):
                await self._close(running, task, step, ctx)
                return
            raise ContractFault(f"handler returned {step!r}; expected Next(...) or Done(...)")

    def _check_phase(self, kind: TaskKind, checkpoint: Any) -> None:
        if type(checkpoint) is not dict or type(checkpoint.get("phase")) is not str:
            raise ContractFault(
                f"a checkpoint must be an object with a str 'phase', got {checkpoint!r}"
            )
        phase = checkpoint["phase"]
        if phase not in kind.phases:
            raise ContractFault(f"checkpoint phase {phase!r} is not a phase of {kind.name!r}")
        if phase in kind.inflight:
            raise ContractFault(
                f"Next into in-flight phase {phase!r}: write it with rt.commit right before the effect"
            )

    async def _transition(self, running: _Running, task: Task, step: Next, ctx: Context) -> str:
        kind, task_id = running.kind, running.task_id
        target = step.target
        token = Invocation(task_id, "run")

        async def build(tx: Transaction, line_ctx: Context) -> str:
            current = await tx.task(task_id)
            assert current is not None
            if callable(target):
                result = target(tx, current, line_ctx)
                if inspect.isawaitable(result):
                    result = await result
            else:
                result = target
            if isinstance(result, str) and result == RETRY:
                raise _Retry
            if isinstance(result, Completion):
                tx._closing = task_id  # pyright: ignore[reportPrivateUsage]
                tx._finish(task_id, _outcome(result))  # pyright: ignore[reportPrivateUsage]
                return "stop"
            self._check_phase(kind, result)
            tx._put_checkpoint(task_id, result)  # pyright: ignore[reportPrivateUsage]
            return "advanced"

        try:
            return await self.kernel.commit(
                build,
                ctx,
                conversation_id=task.conversation_id,
                authority=self._authority(kind),
                invoker=token,
                durable=step.durable,
            )
        except _Retry:
            return "retry"
        except Forbidden:
            if self._gone_or_marked(task_id):
                return "stop"  # a mark (or the end) won the race: discard the transition
            raise
        finally:
            token.revoke()

    def _gone_or_marked(self, task_id: int) -> bool:
        current = self.kernel.task_index.get(task_id)
        return current is None or current.status == "terminal" or current.abort is True

    async def _close(self, running: _Running, task: Task, step: Done, ctx: Context) -> None:
        task_id, closure = running.task_id, step.closure
        token = Invocation(task_id, "run")

        async def build(tx: Transaction, line_ctx: Context) -> None:
            current = await tx.task(task_id)
            assert current is not None
            tx._closing = task_id  # pyright: ignore[reportPrivateUsage]
            result = closure(tx, current, line_ctx)
            if inspect.isawaitable(result):
                result = await result
            if not isinstance(result, Completion):
                raise ContractFault(f"Done closure returned {result!r}; expected a Completion")
            tx._finish(task_id, _outcome(result))  # pyright: ignore[reportPrivateUsage]

        try:
            await self.kernel.commit(
                build,
                ctx,
                conversation_id=task.conversation_id,
                authority=self._authority(running.kind),
                invoker=token,
            )
        except Forbidden:
            if not self._gone_or_marked(task_id):
                raise
        finally:
            token.revoke()

    async def _abort(self, running: _Running) -> None:
        kind, task_id, ctx = running.kind, running.task_id, running.ctx
        start = self.kernel.task_index.get(task_id)
        if start is None or start.status == "terminal":
            return
        snap = await self._snapshot(task_id, start.conversation_id, ctx)
        if snap is None:
            return
        task, slot = snap
        token = Invocation(task_id, "abort")
        try:
            closure = await kind.abort(
                TaskInfo.of(task, slot), Runtime(self, task, token, kind), ctx
            )
        finally:
            token.revoke()
        if not callable(closure):
            raise ContractFault(f"abort returned {closure!r}; expected an abort closure")
        token = Invocation(task_id, "abort")

        async def build(tx: Transaction, line_ctx: Context) -> None:
            current = await tx.task(task_id)
            assert current is not None
            tx._closing = task_id  # pyright: ignore[reportPrivateUsage]
            result = closure(tx, current, line_ctx)
            if inspect.isawaitable(result):
                result = await result
            try:
                outcome = {"status": "aborted", "result": result}
                tx._finish(task_id, outcome)  # pyright: ignore[reportPrivateUsage]
            except ValueError as exc:
                raise ContractFault(f"abort closure result: {exc}") from None

        try:
            await self.kernel.commit(
                build,
                ctx,
                conversation_id=task.conversation_id,
                authority=self._authority(kind),
                invoker=token,
            )
        finally:
            token.revoke()

    async def _fault(self, running: _Running, error: BaseException) -> None:
        task_id, kind = running.task_id, running.kind
        message = f"{type(error).__name__}: {error}"
        task = self.kernel.task_index.get(task_id)
        if task is None or task.status == "terminal":
            self.kernel.report(error)
            return

        def build(with_hook: bool) -> Callable[[Transaction, Context], Any]:
            async def run(tx: Transaction, _ctx: Context) -> None:
                current = await tx.task(task_id)
                if current is None or current.status == "terminal":
                    return
                tx._closing = task_id  # pyright: ignore[reportPrivateUsage]
                if with_hook and kind.fault is not None:
                    result = kind.fault(tx, current, message)
                    if inspect.isawaitable(result):
                        await result
                tx._finish(task_id, {"status": "faulted", "error": message})  # pyright: ignore[reportPrivateUsage]

            return run

        fault = TaskFaulted(task_id, kind.name, message)
        fault.__cause__ = error
        try:
            try:
                await self.kernel.commit(
                    build(True),
                    BACKGROUND,
                    conversation_id=task.conversation_id,
                    authority=Authority.CORE,
                )
            except (Closed, Faulted):
                raise
            except Exception as hook_error:  # the kind's fault hook failed: terminalize anyway
                self.kernel.report(hook_error)
                await self.kernel.commit(
                    build(False),
                    BACKGROUND,
                    conversation_id=task.conversation_id,
                    authority=Authority.CORE,
                )
        except KernelError:
            pass
        self.kernel.report(fault)

    # -- aborts ----------------------------------------------------------------------------
    async def abort_task(self, task_id: int, ctx: Context) -> str:
        """Durably mark ``task_id`` (``"marked"``; ``"terminal"`` if it already ended), cancel its
        run invocation and let the scheduler run the kind's abort."""

        async def mark(tx: Transaction, _ctx: Context) -> str:
            task = await tx.task(task_id)
            if task is None:
                raise UnknownTask(f"task {task_id} does not exist")
            if task.status == "terminal":
                return "terminal"
            tx.mark_task(task_id)
            return "marked"

        result = await self.kernel.commit(mark, ctx, authority=Authority.CORE)
        if result == "marked":
            self._cancel_run(task_id, "aborted")
        return result

    def _cancel_run(self, task_id: int, reason: str) -> None:
        running = self._running.get(task_id)
        if running is not None and running.mode == "run":
            running.stop(reason)

    async def abort_conversation(
        self, conversation_id: int, ctx: Context, *, by: str | None = None
    ) -> None:
        """Conversation abort (docs/design/harness.md#abort): one commit withdraws queued steer/followUp inputs (queued
        writes stay) and marks every live foreground task of the conversation and, through live
        foreground owners, of its owned conversations. Returns once every marked task ended.
        ``by`` names who stopped the turn when it was not the user (``PermissionRequest hook
        `<command>```): kept on the running turn as ``stoppedBy``, which the turn's end reads."""

        async def build(tx: Transaction, _ctx: Context) -> list[int]:
            sticky = tx.document("sticky", conversation_id)
            if by is not None and "turn" in sticky:
                sticky["turn"]["stoppedBy"] = by
            if "inbox" in sticky:
                inbox = sticky["inbox"]
                for index in reversed(range(len(inbox))):
                    item = inbox[index]
                    if item["mode"] in ("steer", "followUp"):
                        input_id = item["id"]
                        del inbox[index]
                        old = await tx.input(input_id)
                        tx.put_input(
                            Input(
                                id=input_id,
                                conversation_id=conversation_id,
                                status="unanswered",
                                reason="aborted",
                                request_id=UNSET if old is None else old.request_id,
                            )
                        )
                        tx.emit_event(conversation_id, {"type": "input.aborted", "input": input_id})
            marked: list[int] = []
            queue = [conversation_id]
            seen: set[int] = set()
            while queue:
                cid = queue.pop()
                if cid in seen:
                    continue
                seen.add(cid)
                for task in tx.live_tasks(cid):
                    if task.background is True:
                        continue
                    tx.mark_task(task.id)
                    marked.append(task.id)
                    for record in self.kernel.conversations.values():
                        if record.owner == task.id:
                            queue.append(record.id)
            return marked

        marked = await self.kernel.commit(
            build, ctx, conversation_id=conversation_id, authority=Authority.CORE
        )
        for task_id in marked:
            self._cancel_run(task_id, "conversation aborted")
        for task_id in marked:
            await self.waiters.wait_for_task(task_id, ctx)

    # -- quiescence ------------------------------------------------------------------------
    def quiescent(self) -> bool:
        """True when no invocation exists (live task records may)."""
        return not self._running

    def hold(self) -> Callable[[], None]:
        """Stop reserving and dispatching until the returned (idempotent) release is called.
        Raises :class:`NotQuiescent` when an invocation exists. Holds nest."""
        if not self.quiescent():
            raise NotQuiescent(
                f"{len(self._running)} invocation(s) running (tasks {sorted(self._running)})"
            )
        self._holds += 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self._holds -= 1
            if self._holds == 0 and self._dirty:
                self.kick()

        return release

    async def wait_quiescent(self) -> None:
        """Wait until no invocation exists (tests, hosts)."""
        while self._running:
            await self._idle_event.wait()

    async def suspend(self, ctx: Context, *, abort_removed: bool = False) -> None:
        """Stop dispatch, cancel and join every invocation, clear ``waitingOn`` on live tool
        slots in one commit. Task records stay live (nothing is terminalized), unless
        ``abort_removed``: then live tasks whose kind is no longer registered end ``aborted``
        (an explicit host policy; their abort handlers are gone, so nothing is cleaned up)."""
        self._enabled = False
        for running in list(self._running.values()):
            running.stop("suspended")
        with anyio.CancelScope(shield=True):
            for running in list(self._running.values()):
                await running.done.wait()
        if self.kernel.faulted:
            return

        async def clear(tx: Transaction, _ctx: Context) -> None:
            for task in self.kernel.live_tasks():
                if abort_removed and self.kinds.get(task.kind) is None:
                    await tx.load(task.conversation_id)
                    tx._finish(task.id, {"status": "aborted", "result": None})  # pyright: ignore[reportPrivateUsage]
                    continue
                if task.kind != "pi.tool" or type(task.input) is not dict:
                    continue
                await tx.load(task.conversation_id)
                sticky = tx.document("sticky", task.conversation_id)
                index = task.input.get("index")
                turn = sticky.get("turn")
                tools = turn["tools"] if turn is not None and "tools" in turn else None
                if type(index) is int and tools is not None and 0 <= index < len(tools):
                    slot = tools[index]
                    if "waitingOn" in slot:
                        del slot["waitingOn"]

        try:
            await self.kernel.commit(clear, ctx, authority=Authority.CORE)
        except KernelError:
            pass

    def close(self, error: BaseException) -> None:
        """Reject every waiter (session closed or faulted)."""
        self._enabled = False
        self.waiters.close(error)


def _outcome(completion: Completion) -> dict[str, Any]:
    try:
        return completion.outcome()
    except ValueError as exc:
        raise ContractFault(str(exc)) from None
