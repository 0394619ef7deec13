"""``pi.post_tools``: after every tool of an assistant message, decide how the turn goes on
(docs/design/turn.md#post-tools).

Input ``{inputs, assistant, tools: [tool task ids]}``; created with ``after = tools``, so the
scheduler dispatches it exactly once, when the last tool task is terminal (in any order).

The handler takes a read-only snapshot of the tool tasks and runs the ``after_tools`` observers.
The closure then, in one commit and in this order:

1. reads the newest head and ``selectedTools`` (fresh, not from the snapshot);
2. folds the tools' ``control`` values in call order: ``addTools`` append with stable dedupe,
   any ``terminate`` terminates, the last ``handoff`` wins and beats ``terminate``;
3. writes ``selectedTools`` when it changed (the only rewindable write, before any entry);
4. synthesizes an error result for each call without one (an aborted or orphaned tool task),
   with a ``warning``;
5. on handoff appends ``pi.handoff{head: self}`` first, so whatever this commit places lands in
   the fresh context; on handoff or terminate the group ends ``done(answer: assistant)`` with a
   final boundary;
6. otherwise runs the post-tools boundary: placed steering joins the group and a successor
   model call continues it; a placed reset/handoff ends the group ``unanswered/terminated`` and
   only what was placed after it starts a new turn.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from chord.context import Context
from pico3.kernel.tx import Transaction
from pico3.session_data.context import MISSING_RESULT_TEXT
from pico3.session_data.entries import NewEntry
from pico3.storage.records import Task
from pico3.tasks.kinds import (
    AbortClosure,
    Closure,
    Completion,
    Done,
    Step,
    TaskInfo,
    TaskKind,
    define_task,
)
from pico3.tasks.runtime import Runtime
from pico3.turn.hook_points import runner
from pico3.turn.placement import boundary, resolve_inputs, user_message
from pico3.turn.state import (
    POST_TOOLS,
    append_interrupted,
    end_turn,
    newest_head,
    settle,
    settle_fault,
    start_model_call,
)

__all__ = ["POST_TOOLS_KIND", "fold_controls"]


def fold_controls(controls: list[dict[str, Any] | None]) -> tuple[list[str], bool, str | None]:
    """``(addTools, terminate, handoff)`` folded in call order."""
    add: list[str] = []
    terminate = False
    handoff: str | None = None
    for control in controls:
        if not control:
            continue
        for name in control.get("addTools") or []:
            if isinstance(name, str) and name not in add:
                add.append(name)
        if control.get("terminate"):
            terminate = True
        if isinstance(control.get("handoff"), str):
            handoff = control["handoff"]
    return add, terminate, handoff


async def _initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
    tool_ids: list[int] = list(task.input["tools"])

    async def read(tx: Transaction, current: Task, ctx: Context) -> list[Task | None]:
        return [await tx.task(tool_id) for tool_id in tool_ids]

    records = await rt.commit(read, ctx)
    results: list[int] = []
    for record in records:
        outcome = record.outcome if record is not None and record.outcome is not UNSET else None
        value = (outcome or {}).get("result")
        if isinstance(value, dict) and isinstance(value.get("entry"), int):
            results.append(value["entry"])
    hooks = runner(rt, POST_TOOLS, task.id, task.conversation_id)
    if hooks is not None:
        await hooks.after_tools(task.input["assistant"], results, ctx)
    return Done(_closure(task, rt.now()))


def _closure(task: TaskInfo, now: int) -> Closure:
    cid = task.conversation_id
    inputs: list[int] = list(task.input["inputs"])
    assistant: int = task.input["assistant"]

    async def close(tx: Transaction, current: Task, ctx: Context) -> Completion:
        head = await newest_head(tx, cid)
        config = tx.config(cid)
        selected = list(config.get("selectedTools") or [])
        records = [await tx.task(tool_id) for tool_id in task.input["tools"]]
        controls: list[dict[str, Any] | None] = []
        missing: list[dict[str, Any]] = []
        for record in records:
            outcome = record.outcome if record is not None and record.outcome is not UNSET else None
            value = (outcome or {}).get("result")
            if isinstance(value, dict) and isinstance(value.get("entry"), int):
                control = value.get("control")
                controls.append(control if isinstance(control, dict) else None)
            elif record is not None:
                missing.append(record.input["call"])
                controls.append(None)
        add, terminate, handoff = fold_controls(controls)
        merged = selected + [name for name in add if name not in selected]
        if merged != selected:
            config.set({"selectedTools": merged})
        for call in missing:
            message = {
                "role": "toolResult",
                "toolCallId": call["id"],
                "toolName": call.get("name", ""),
                "content": [{"type": "text", "text": MISSING_RESULT_TEXT}],
                "isError": True,
                "timestamp": now,
            }
            tx.append_entry(
                cid,
                NewEntry(kind="pi.tool_result", model=[message], data={"synthesized": True}),
            )
            tx.emit_event(
                cid,
                {
                    "type": "warning",
                    "source": "post_tools",
                    "message": f"tool call {call['id']} ended without a result",
                },
            )
        if handoff is not None:
            entry = tx.append_entry(
                cid,
                NewEntry(kind="pi.handoff", model=[user_message(handoff, now)], head="self"),
            )
            head = entry.id
        if handoff is not None or terminate:
            successor = await end_turn(tx, cid, inputs, head=head, now=now, answer=assistant)
            ended = "handoff" if handoff is not None else "terminate"
            result: dict[str, Any] = {"ended": ended}
            if successor is not None:
                result["successor"] = successor
            return Completion.completed(result)
        placed = await boundary(tx, cid, "postTools", head, now)
        if placed.terminated:
            sticky = tx.document("sticky", cid)
            if "turn" in sticky:
                del sticky["turn"]
            await resolve_inputs(tx, cid, inputs, reason="terminated")
            tx.emit_event(
                cid,
                {
                    "type": "turn.ended",
                    "inputs": inputs,
                    "status": "unanswered",
                    "reason": "terminated",
                },
            )
            final = await boundary(tx, cid, "final", placed.head, now)
            triggers = placed.triggers + final.triggers
            if triggers:
                return Completion.completed({"successor": start_model_call(tx, cid, triggers)})
            return Completion.completed({})
        group = inputs + placed.triggers
        successor = start_model_call(tx, cid, group, new_turn=False)
        return Completion.completed({"successor": successor})

    return close


async def _abort(task: TaskInfo, rt: Runtime, ctx: Context) -> AbortClosure:
    cid = task.conversation_id
    inputs: list[int] = list(task.input["inputs"])
    # A conversation abort marks the tools and this task together. Settle only once the tools
    # have ended: settling deletes ``sticky.turn``, and with it the slots whose streamed output
    # each aborted tool's result keeps for the model.
    for tool_id in task.input["tools"]:
        await rt.wait_for_task(tool_id, ctx)

    now = rt.now()

    async def close(tx: Transaction, current: Task, ctx: Context) -> dict[str, Any]:
        # The turn stops with no answer after the tools (whether they ran to the end or the
        # abort stopped them): an empty interrupted answer marks it, as a model call aborted
        # before its first word does; it is this turn's only mark.
        shown: dict[str, Any] = {"role": "assistant", "content": [], "timestamp": now}
        assistant = append_interrupted(tx, cid, shown, 0)
        await settle(tx, cid, inputs, "aborted", None)
        return {"assistant": assistant}

    return close


POST_TOOLS_KIND: TaskKind = define_task(
    POST_TOOLS,
    initial=_initial,
    phases={},
    abort=_abort,
    turn=True,
    core=True,
    fault=settle_fault,
)
"""The ``pi.post_tools`` kind (registered by :func:`pico3.turn.install`)."""
