"""The ``subagents.run`` task kind: one subagent, durable across a worker's death.

Input: ``{description, prompt, agent, systemPrompt, model, tools}`` (the agent definition is
resolved when the call is made and stored with the task, so recovery never depends on files that
may have changed). Phases:

* initial: create the owned conversation (docs/design/harness.md#owned-conversations) **atomically with the checkpoint**
  ``{"phase": "running", "child": id}`` — its model and ``selectedTools`` seeded, its system
  prompt a section seed — so a crash never makes a second child; the slot's first step
  (``starting``) rides in the same commit;
* ``running``: re-attach the child, send the prompt with the request id ``<task>:prompt`` (a
  resend after recovery is the same input, and the child's own turn resumes by itself), wait for
  the input's answer, and complete with ``{"report": <the child's final text>, "conversation"}``.
  While it waits, the current step (:class:`StepBoard`, fed by the feature's hooks) is written
  to the task's slot, which ``describe`` shows: :data:`STEP_INTERVAL` after it changes, the
  newest step then (at most one commit a second).

An abort ends the task; a conversation abort reaches the child through its foreground owner.
"""

from __future__ import annotations

from typing import Any

import anyio

from chord import Context
from pico3 import (
    Completion,
    Done,
    Next,
    OwnedConversation,
    Runtime,
    TaskInfo,
    TaskKind,
    Transaction,
    create_owned,
    define_task,
)

from .contract import SUBAGENT_KIND, SubagentStatus

__all__ = ["StepBoard", "final_text", "subagent_kind"]


class StepBoard:
    """The live step of each running subagent, by its conversation id (not durable: after a
    restart it starts again from ``resumed``).

    A subagent run by another subagent (a definition that lists ``agent``) has a parent on the
    board: while it runs, the parent's step ends with the child's (``running agent (1 tool
    call) › running grep (2 tool calls)``), so the tasks panel, which shows the first-level
    subagents, shows what the nested one is doing."""

    def __init__(self) -> None:
        self._own: dict[int, str] = {}  # each subagent's own step
        self._steps: dict[int, str] = {}  # its own step, then its running child's
        self._tools: dict[int, int] = {}
        self._parents: dict[int, int] = {}
        self._changed: dict[int, anyio.Event] = {}

    def follows(self, conversation_id: int) -> bool:
        return conversation_id in self._changed

    def start(self, conversation_id: int, step: str, parent: int | None = None) -> None:
        self._own[conversation_id] = self._steps[conversation_id] = step
        self._changed.setdefault(conversation_id, anyio.Event())
        if parent is not None and parent != conversation_id:
            # kept even if the parent is not (yet) on the board: a restart may resume it later
            self._parents[conversation_id] = parent
            self._show(conversation_id, step)

    def stop(self, conversation_id: int) -> None:
        self._own.pop(conversation_id, None)
        self._steps.pop(conversation_id, None)
        self._tools.pop(conversation_id, None)
        parent = self._parents.pop(conversation_id, None)
        event = self._changed.pop(conversation_id, None)
        if event is not None:
            event.set()
        if parent is not None and parent in self._own:  # the parent's own step again
            self._show(parent, self._own[parent])

    def step(self, conversation_id: int) -> str:
        return self._steps.get(conversation_id, "")

    def set(self, conversation_id: int, step: str) -> None:
        if conversation_id not in self._changed:
            return
        self._own[conversation_id] = step
        self._show(conversation_id, step)

    def _show(self, conversation_id: int, step: str) -> None:
        at = conversation_id
        for _ in range(8):  # up the chain of parents (a definition may nest a few levels)
            if at not in self._changed:
                return
            self._steps[at] = step
            event = self._changed[at]
            self._changed[at] = anyio.Event()
            event.set()
            parent = self._parents.get(at)
            if parent is None or parent not in self._own:
                return
            step = f"{self._own[parent]} › {step}"
            at = parent

    def tool(self, conversation_id: int, name: str) -> None:
        if conversation_id not in self._changed:
            return
        count = self._tools.get(conversation_id, 0) + 1
        self._tools[conversation_id] = count
        self.set(conversation_id, f"running {name} ({count} tool call{'s' if count > 1 else ''})")

    async def changed(self, conversation_id: int) -> None:
        event = self._changed.get(conversation_id)
        if event is not None:
            await event.wait()


STARTING = "starting"
"""The step a subagent shows until its first tool call (written with its conversation)."""
STEP_INTERVAL = 1.0
"""Seconds a step change waits before it is written (then the newest step is): a step is one
durable commit in the parent's conversation, and most of a subagent's tool calls (a read, a
grep) end within milliseconds, so each written at once would cost the session a commit per
tool call; this way a subagent writes at most one a second, and one that ends sooner none."""


def final_text(entry: Any) -> str:
    """The text blocks of an answer entry's assistant message."""
    parts: list[str] = []
    for message in getattr(entry, "model", None) or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
            continue
        for block in content or []:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
    return "".join(parts).strip()


def _describe(task: TaskInfo) -> SubagentStatus:
    inp = task.input if isinstance(task.input, dict) else {}
    slot = task.slot or {}
    status: SubagentStatus = {
        "label": str(inp.get("description", "subagent")),
        "agent": str(inp.get("agent", "")),
        "progress": str(slot.get("step") or (STARTING if task.checkpoint is None else "running")),
    }
    child = (task.checkpoint or {}).get("child")
    if type(child) is int:
        status["conversation"] = child
    return status


async def _abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
    return lambda tx, current, ctx: None


def subagent_kind(board: StepBoard) -> TaskKind:
    """The kind, reporting steps through ``board``."""

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
        inp: dict[str, Any] = task.input
        spec = {
            "rewindable": {"model": inp["model"], "selectedTools": list(inp["tools"])},
            "sections": [
                {"key": "subagent", "value": inp["agent"], "rendered": inp["systemPrompt"]}
            ],
        }

        async def create(tx: Transaction, current: Any, _ctx: Context) -> dict[str, Any]:
            child = await create_owned(tx, current, spec)
            tx.slot(current)["step"] = STARTING  # in this commit: no commit of its own
            return {"phase": "running", "child": child}

        return Next(create)

    async def write_step(rt: Runtime, child: int, shown: str, ctx: Context) -> None:
        while board.follows(child):
            step = board.step(child)
            if step and step != shown:
                shown = step

                def put(tx: Transaction, current: Any, _ctx: Context, step: str = step) -> None:
                    tx.slot(current)["step"] = step

                await rt.commit(put, ctx)
            await board.changed(child)
            await anyio.sleep(STEP_INTERVAL)  # the newest step then; at most one commit each

    async def running(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
        assert task.checkpoint is not None
        cid: int = task.checkpoint["child"]
        child = OwnedConversation(rt, cid)  # send checks the ownership (no read of its own)
        shown = str((task.slot or {}).get("step") or "")
        board.start(
            cid, "resumed" if shown and shown != STARTING else STARTING, task.conversation_id
        )
        try:
            sent = await child.send(task.input["prompt"], ctx, request_id=f"{task.id}:prompt")
            records: list[Any] = []
            async with anyio.create_task_group() as group:
                group.start_soon(write_step, rt, cid, shown, ctx)
                records.append(await sent.wait(ctx))
                group.cancel_scope.cancel()
            record = records[0]
        finally:
            board.stop(cid)
        answer = getattr(record, "answer", None)
        if record.status == "done" and type(answer) is int:

            async def complete(tx: Transaction, _current: Any, _ctx: Context) -> Completion:
                # the report is read in the commit that completes the task: no read of its own
                report = final_text(await tx.entry(answer))
                return Completion.completed({"report": report, "conversation": cid})

            return Done(complete)
        reason = str(getattr(record, "reason", None) or record.status)
        failure = {"reason": reason, "conversation": cid}
        return Done(lambda _tx, _cur, _c: Completion.failed(failure))

    return define_task(
        SUBAGENT_KIND,
        initial=initial,
        phases={"running": running},
        abort=_abort,
        describe=_describe,
    )
