"""Task records inside a commit (docs/design/harness.md#tasks): create, read, scan, slot, checkpoint, finish, busy.

``create_task`` (with ``after`` dependencies and ``background``), ``task`` (direct read,
batch-aware), ``tasks`` (a scan), ``slot`` (working state that retires with the terminal
record), ``checkpoint`` (the kind's program counter), the core-only ``set_task``, ``mark_task``
and ``finish_task``, and the prospective busy judgement (docs/design/turn.md#busy) the entry writes consult.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from msgspec import UNSET

from chord.json import JsonError, copy_json
from pico3.kernel.errors import Forbidden, ReadAfterWrite
from pico3.kernel.proxy import TrackedDict
from pico3.kernel.tx.authority import TURN_KINDS, VIEW_HIDDEN_KINDS, Authority
from pico3.kernel.tx.base import TxBase
from pico3.storage.records import (
    DocRef,
    Task,
    TaskPatch,
    TaskPatchWrite,
    TaskScan,
    TaskWrite,
    patched,
)

__all__ = ["TaskOps"]


class TaskOps(TxBase):
    """Task records, slots and checkpoints, and the busy judgement."""

    async def task(self, task_id: int) -> Task | None:
        """One task record (this batch's creations and patches included)."""
        self._check()
        found = self._task_record(task_id)
        if found is None:
            found = await self._kernel.storage.task(task_id, self._ctx)
        return found

    async def tasks(
        self,
        conversation_id: int | None = None,
        *,
        status: Sequence[str] | None = None,
        kind: str | None = None,
    ) -> list[Task]:
        """Committed tasks in creation order (a scan: it rejects after any task write in this
        batch with :class:`ReadAfterWrite`, which poisons the transaction)."""
        self._check()
        if self._batch.tasks:
            error = ReadAfterWrite("tasks() after a task create/patch in the same commit")
            self._batch.poison = error
            raise error
        scan = TaskScan(
            conversation_id=conversation_id,
            status=None if status is None else frozenset(status),
            kind=kind,
        )
        return await self._kernel.storage.scan_tasks(scan, self._ctx)

    def create_task(
        self,
        kind: object,
        input: Any = None,
        *,
        after: Sequence[int] = (),
        background: bool = False,
        conversation_id: int | None = None,
    ) -> int:
        """Create a task of ``kind`` (the registered kind object; core callers may also pass a
        core kind's name) in the bound conversation (or ``conversation_id``); returns its id.

        ``after`` lists tasks that must be terminal (any outcome) before this one starts; they
        must exist. The task is dispatched by the scheduler after this commit; when nothing
        stands in the way (no ``after``, dispatch enabled, the kind registered) it is created
        ``running``: its claim rides in this commit instead of a commit of its own (a pending
        task and a running one without a checkpoint recover alike: the handler runs from its
        start).
        """
        self._check()
        lookup = self._kernel.kinds
        if lookup is None:
            raise Forbidden("create_task: this session has no task layer")
        name = lookup.resolve(kind, core=self._authority is Authority.CORE)
        cid = self._bound() if conversation_id is None else conversation_id
        self._may_create(cid, name)
        try:
            payload = copy_json(input, ("task", "input"))
        except JsonError as exc:
            raise ValueError(f"create_task({name}): {exc}") from None
        deps = self._task_deps(name, after)
        task_id = self._kernel.mint_id()
        record = Task(
            id=task_id,
            conversation_id=cid,
            kind=name,
            input=payload,
            status="running" if not deps and lookup.starts_at_once(name) else "pending",
            after=deps,
            background=True if background else UNSET,
        )
        self._batch.tasks[task_id] = record
        self._batch.task_conversations.add(cid)
        self._batch.writes.append(TaskWrite(task=record))
        initial = lookup.initial_slot(name, payload)
        if initial is not None and name != "pi.tool":
            tasks = self._sticky_tasks(cid)
            tasks[str(task_id)] = initial
        if name not in VIEW_HIDDEN_KINDS:
            event: dict[str, Any] = {"type": "task.started", "taskId": task_id, "kind": name}
            if background:
                event["background"] = True
            self._batch.events.setdefault(cid, []).append(event)
        return task_id

    def _may_create(self, cid: int, name: str) -> None:
        """Refuse a task in a conversation outside this transaction's scope, or of a core kind
        (``pi.*`` but the ordinary ``pi.job``/``pi.plugin``) without core authority."""
        self._known(cid)
        self._task_scope(cid, "create_task")
        ordinary_builtin = name in ("pi.job", "pi.plugin")
        if (
            name.startswith("pi.")
            and self._authority is not Authority.CORE
            and not ordinary_builtin
        ):
            raise Forbidden(f"create_task: core kind {name!r} requires core authority")

    def _task_deps(self, name: str, after: Sequence[int]) -> list[int]:
        """``after`` checked (every target exists) and deduplicated, in order."""
        deps: list[int] = []
        for dep in after:
            exists = type(dep) is int and (
                self._task_record(dep) is not None or self._kernel.task_exists(dep)
            )
            if not exists:
                raise ValueError(f"create_task({name}): after target {dep!r} does not exist")
            if dep not in deps:
                deps.append(dep)
        return deps

    def _sticky_tasks(self, conversation_id: int) -> TrackedDict:
        sticky = self._doc_root(DocRef.sticky(conversation_id))
        if "tasks" not in sticky:
            sticky["tasks"] = {}
        return sticky["tasks"]

    def slot(self, task: Task | int) -> TrackedDict:
        """The task's slot: working state that dies with the task (progress, memos).

        Ordinary tasks live at ``sticky.tasks["<id>"]`` (created lazily from the kind's
        ``slot(input)`` or ``{}``); ``pi.tool`` tasks at ``sticky.turn.tools[input.index]``.
        TASK authority reaches only its own task; hosts have no slot access.
        """
        self._check()
        task_id = task if isinstance(task, int) else task.id
        if self._authority is Authority.HOST:
            raise Forbidden("slot(): hosts cannot reach task slots")
        if self._authority is Authority.TASK:
            assert self._invoker is not None
            if task_id != self._invoker.task_id:
                raise Forbidden(f"slot(): task {self._invoker.task_id} may reach only its own slot")
        record = self._task_record(task_id)
        if record is None or record.status == "terminal":
            raise Forbidden(f"slot(): task {task_id} is not live")
        sticky = self._doc_root(DocRef.sticky(record.conversation_id))
        if record.kind == "pi.tool":
            index = record.input["index"] if isinstance(record.input, dict) else None
            turn = sticky.get("turn")
            tools = turn["tools"] if turn is not None and "tools" in turn else None
            if type(index) is not int or tools is None or not 0 <= index < len(tools):
                raise Forbidden(f"slot(): tool task {task_id} has no slot in turn.tools")
            return tools[index]
        tasks = self._sticky_tasks(record.conversation_id)
        key = str(task_id)
        if key not in tasks:
            lookup = self._kernel.kinds
            initial = None if lookup is None else lookup.initial_slot(record.kind, record.input)
            tasks[key] = {} if initial is None else initial
        return tasks[key]

    def checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Replace the own task's checkpoint (TASK authority, run mode). The kind's recovery
        program counter: ``{"phase": name, ...}``, strict JSON."""
        self._check()
        if self._invoker is None or self._authority is Authority.HOST:
            raise Forbidden("checkpoint(): only a task invocation checkpoints (core: set_task)")
        if self._invoker.mode != "run":
            raise Forbidden("checkpoint(): an abort invocation may not checkpoint")
        self._put_checkpoint(self._invoker.task_id, checkpoint)

    def _put_checkpoint(self, task_id: int, checkpoint: Any) -> None:
        if type(checkpoint) is not dict or type(checkpoint.get("phase")) is not str:
            raise ValueError(
                f"a checkpoint must be a JSON object with a str 'phase', got {checkpoint!r}"
            )
        try:
            value = copy_json(checkpoint, ("checkpoint",))
        except JsonError as exc:
            raise ValueError(str(exc)) from None
        self._patch(TaskPatch(id=task_id, checkpoint=value))

    def _patch(self, patch: TaskPatch) -> Task:
        record = self._task_record(patch.id)
        if record is None:
            raise ValueError(f"task {patch.id} is not live in this session")
        if record.status == "terminal":
            raise ValueError(f"task {patch.id} is terminal")
        updated = patched(record, patch)
        self._batch.tasks[patch.id] = updated
        self._batch.task_conversations.add(record.conversation_id)
        self._batch.writes.append(TaskPatchWrite(patch=patch))
        return updated

    def set_task(self, patch: TaskPatch) -> Task:
        """Core: patch a live task record (status, checkpoint, owns). Terminal patches go
        through :meth:`finish_task`."""
        self._require(Authority.CORE, "set_task")
        if patch.outcome is not UNSET or patch.status == "terminal":
            raise ValueError("set_task: use finish_task() to terminalize")
        return self._patch(patch)

    def mark_task(self, task_id: int) -> bool:
        """Core: set the durable abort mark (idempotent). False when the task is terminal or
        already marked."""
        self._require(Authority.CORE, "mark_task")
        record = self._task_record(task_id)
        if record is None or record.status == "terminal" or record.abort is True:
            return False
        self._patch(TaskPatch(id=task_id, abort=True))
        return True

    def finish_task(self, task_id: int, outcome: dict[str, Any]) -> Task:
        """Core: terminalize a task with ``outcome`` (``{"status": ..., ...}``), retire its slot
        in the same commit and emit ``task.ended`` for kinds shown under ``tasks``."""
        self._require(Authority.CORE, "finish_task")
        return self._finish(task_id, outcome)

    def _finish(self, task_id: int, outcome: dict[str, Any]) -> Task:
        status = outcome.get("status") if type(outcome) is dict else None
        if status not in ("completed", "failed", "aborted", "orphaned", "faulted"):
            raise ValueError(f"invalid task outcome {outcome!r}")
        try:
            value = copy_json(outcome, ("outcome",))
        except JsonError as exc:
            raise ValueError(str(exc)) from None
        record = self._task_record(task_id)
        if record is None:
            raise ValueError(f"task {task_id} is not live in this session")
        updated = self._patch(TaskPatch(id=task_id, status="terminal", outcome=value))
        if record.kind != "pi.tool":
            sticky = self._doc_root(DocRef.sticky(record.conversation_id))
            if "tasks" in sticky and str(task_id) in sticky["tasks"]:
                del sticky["tasks"][str(task_id)]
        if record.kind not in VIEW_HIDDEN_KINDS:
            event = {
                "type": "task.ended",
                "taskId": task_id,
                "kind": record.kind,
                "outcome": status,
            }
            self._batch.events.setdefault(record.conversation_id, []).append(event)
        self._claim_dependents(task_id)
        return updated

    def _claim_dependents(self, task_id: int) -> None:
        """Claim the tasks that wait on ``task_id`` alone (their other ``after`` tasks terminal)
        when they are dispatched as soon as this commit is durable: each turns ``running`` in
        this commit instead of in a drain commit of its own (as :meth:`create_task` claims a
        task with nothing to wait for; a pending task and a running one without a checkpoint
        recover alike). A tool call's last result claims its turn's ``pi.post_tools`` so."""
        lookup = self._kernel.kinds
        if lookup is None:
            return
        waiting = [
            t
            for source in (self._kernel.task_index, self._batch.tasks)
            for t in source.values()
            if t.status == "pending" and task_id in t.after
        ]
        for task in waiting:
            if (
                self._task_record(task.id) is not task  # the batch's version wins (seen once)
                or task.abort is True
                or not lookup.starts_at_once(task.kind)
                or any(
                    (dep := self._task_record(other)) is not None and dep.status != "terminal"
                    for other in task.after
                )
            ):
                continue
            self._patch(TaskPatch(id=task.id, status="running"))

    def live_tasks(self, conversation_id: int) -> list[Task]:
        """Live tasks of a conversation as of this batch (committed index plus overlay); a
        direct read, not a scan."""
        self._check()
        out: dict[int, Task] = {
            t.id: t
            for t in self._kernel.task_index.values()
            if t.conversation_id == conversation_id
        }
        for t in self._batch.tasks.values():
            if t.conversation_id == conversation_id:
                out[t.id] = t
        return [t for t in sorted(out.values(), key=lambda t: t.id) if t.status != "terminal"]

    def is_busy(self, conversation_id: int) -> bool:
        """Prospective busy of a conversation judged against this batch (docs/design/turn.md#busy)."""
        self._check()
        closing = self._closing
        for source in (self._kernel.task_index, self._batch.tasks):
            for t in source.values():
                if (
                    t.conversation_id == conversation_id
                    and t.kind in TURN_KINDS
                    and t.background is not True
                    and t.id != closing
                    and t.status != "terminal"
                    and self._task_record(t.id) is t  # the batch's version wins
                ):
                    return True
        return False
