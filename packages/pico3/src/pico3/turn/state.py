"""Shared pieces of the turn kinds: ``sticky.turn``, turn events, successors, failure settling.

The model call's status stays under the key ``generation`` (a view field clients read), as its
kind keeps the durable name ``pi.generation``; in Python it is the model call throughout.

``sticky.turn`` is the turn's rendering-shaped working state, kept by the core kinds in the same
commits as their checkpoints so the view can show it without looking at task records::

    {"inputs": [input ids of the running group],
     "generation": ModelCallStatus,       # while a model call is live
     "message": AssistantMessage,          # the streaming partial
     "tools": [ToolSlot]}                  # one per call of the newest assistant message

It exists exactly while a turn task lives: a turn that ends deletes it (the view's ``turn``
disappears in that envelope) and a successor model call recreates it in the same commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pico3.kernel.proxy import TrackedDict
from pico3.kernel.tx import Transaction
from pico3.session_data.entries import NewEntry
from pico3.storage.records import Task
from pico3.turn.placement import BoundaryResult, InputReason, boundary, resolve_inputs

__all__ = [
    "MODEL_CALL",
    "POST_TOOLS",
    "TOOL",
    "append_interrupted",
    "end_turn",
    "newest_head",
    "settle",
    "settle_fault",
    "start_model_call",
    "turn_doc",
]

MODEL_CALL = "pi.generation"
"""The model call's task kind name. Durable (stored in sessions), so it keeps the old spelling."""
TOOL = "pi.tool"
POST_TOOLS = "pi.post_tools"


def turn_doc(tx: Transaction, conversation_id: int) -> TrackedDict | None:
    """The tracked ``sticky.turn`` (``None`` when no turn is running)."""
    sticky = tx.document("sticky", conversation_id)
    if "turn" not in sticky:
        return None
    turn = sticky["turn"]
    assert isinstance(turn, TrackedDict)
    return turn


def start_model_call(
    tx: Transaction,
    conversation_id: int,
    inputs: Sequence[int],
    *,
    after: Sequence[int] = (),
    new_turn: bool = True,
    waiting: bool = False,
) -> int:
    """Create a ``pi.generation`` owning ``inputs`` and (re)write ``sticky.turn`` for it.

    ``new_turn`` emits ``turn.started``; a model call that continues a group (after tools, a
    yield continuation, an overflow replacement) does not.
    """
    task_id = tx.create_task(
        MODEL_CALL, {"inputs": list(inputs)}, after=list(after), conversation_id=conversation_id
    )
    sticky = tx.document("sticky", conversation_id)
    status: dict[str, Any] = (
        {"stage": "waiting", "on": "compaction"} if waiting else {"stage": "preparing"}
    )
    if not new_turn and "turn" in sticky:
        turn = sticky["turn"]
        turn["inputs"] = list(inputs)
        turn["generation"] = status
    else:
        sticky["turn"] = {"inputs": list(inputs), "generation": status, "tools": []}
    if new_turn:
        tx.emit_event(conversation_id, {"type": "turn.started", "inputs": list(inputs)})
    return task_id


async def newest_head(tx: Transaction, conversation_id: int) -> int | None:
    """The target of the newest fork-visible head (read before any append in this commit)."""
    found = await tx.scan_entries(conversation_id, limit=1, with_head=True)
    if not found:
        return None
    head = found[0].head
    return head if isinstance(head, int) else None


async def end_turn(
    tx: Transaction,
    conversation_id: int,
    inputs: Sequence[int],
    *,
    head: int | None,
    now: int,
    answer: int | None = None,
    reason: InputReason | None = None,
    detail: Any = None,
    placed: BoundaryResult | None = None,
) -> int | None:
    """End the running group: resolve its inputs, ``turn.ended``, run the final boundary and
    start a successor model call for what it placed. Returns the successor's task id.

    ``head`` is the head boundary the caller read before appending anything in this commit.
    A caller that already ran the final boundary passes its result as ``placed``.
    """
    sticky = tx.document("sticky", conversation_id)
    if "turn" in sticky:
        del sticky["turn"]
    await resolve_inputs(tx, conversation_id, inputs, answer=answer, reason=reason, detail=detail)
    event: dict[str, Any] = {"type": "turn.ended", "inputs": list(inputs)}
    if reason is None:
        event.update(status="done", answer=answer)
    else:
        event.update(status="unanswered", reason=reason)
        if detail is not None:
            event["detail"] = detail
    tx.emit_event(conversation_id, event)
    if placed is None:
        placed = await boundary(tx, conversation_id, "final", head, now)
    if placed.triggers:
        return start_model_call(tx, conversation_id, placed.triggers)
    return None


def append_interrupted(tx: Transaction, cid: int, shown: dict[str, Any], attempt: int) -> int:
    """Append the display-only ``pi.assistant`` that marks a turn stopped by an abort (the
    answer as far as it streamed, or an empty one) and return its id. ``data``: ``display``
    (``shown`` with ``stopReason: "aborted"``), ``reason: "aborted"``, ``attempt``, and the
    running turn's ``stoppedBy`` when someone other than the user stopped it. Every turn a
    conversation abort ends gets exactly one: the model call's abort while it answers, else
    the post-tools abort (the tools ran or were stopped, and no answer came after), so every
    client shows the interruption once, and after a restart too."""
    display = {**shown, "stopReason": "aborted"}
    data: dict[str, Any] = {"attempt": attempt, "display": display, "reason": "aborted"}
    turn = turn_doc(tx, cid)
    stopped = turn.get("stoppedBy") if turn is not None else None
    if isinstance(stopped, str):  # stopped on someone's behalf (ConversationHandle.abort)
        data["stoppedBy"] = stopped
    return tx.append_entry(cid, NewEntry(kind="pi.assistant", data=data)).id


async def settle(
    tx: Transaction, cid: int, inputs: list[int], reason: InputReason, detail: str | None
) -> None:
    """End a group without an answer: delete ``sticky.turn``, inputs ``unanswered(reason)``,
    ``turn.ended``. No boundary runs (aborts and faults leave the queue for a later send). An
    abort of a turn someone stopped (its ``stoppedBy``) has the ``detail`` ``stopped by <who>``."""
    sticky = tx.document("sticky", cid)
    if "turn" in sticky:
        stopped = sticky["turn"].get("stoppedBy")  # an abort on someone's behalf (abort(by=))
        if reason == "aborted" and detail is None and isinstance(stopped, str):
            detail = f"stopped by {stopped}"
        del sticky["turn"]
    await resolve_inputs(tx, cid, inputs, reason=reason, detail=detail)
    event: dict[str, Any] = {
        "type": "turn.ended",
        "inputs": inputs,
        "status": "unanswered",
        "reason": reason,
    }
    if detail is not None:
        event["detail"] = detail
    tx.emit_event(cid, event)


async def settle_fault(tx: Transaction, current: Task, error: str) -> None:
    """A faulted turn task (model call or post-tools): reset the turn, its inputs
    ``unanswered/failed``, ``turn.ended``."""
    inputs = list((current.input or {}).get("inputs", []))
    await settle(tx, current.conversation_id, inputs, "failed", error)
