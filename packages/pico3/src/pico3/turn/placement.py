"""Admission and boundary placement: where user input and passive writes land in a transcript.

A conversation is *busy* while a turn task (``pi.generation``, ``pi.tool``, ``pi.post_tools``)
lives in it. Nothing may split an assistant message from its tool results, so input that
arrives while busy waits in ``sticky.inbox`` and is placed only at a *boundary*
(docs/design/turn.md#boundaries):

* ``"postTools"`` — after every tool result of an assistant message: queued writes land, and
  steering messages join the running group (the next model call sees them);
* ``"final"`` — when a turn ends (answer, terminate, handoff, failure) and on an idle send:
  follow-ups are placed too and start a new group.

:func:`boundary` does the placement in four steps:

1. sort the inbox by id (= admission order); find the newest queued *self-head* write ``R``
   (a queued reset or handoff); every steer/follow-up admitted before ``R`` is ``unanswered /
   stale``: it was typed into a context that no longer exists;
2. select every queued write, steering messages per ``steeringMode`` (``all`` or the oldest
   one) and, at ``final``, follow-ups per ``followUpMode``;
3. place the selection strictly in id order: a write becomes its entry (a write whose explicit
   ``head`` lies before the current head boundary is ``stale``), a steer/follow-up becomes a
   ``pi.user`` entry and a *trigger*;
4. remove what was placed or staled; report ``(triggers, terminated)``.

Every function here runs inside a builder with core authority and is synchronous apart from
input record reads. Inputs move only forward: ``queued → placed → done | unanswered`` or
``queued → done | unanswered``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import msgspec
from msgspec import UNSET

from chord.json import copy_json
from pico3.kernel.errors import KernelError
from pico3.kernel.tx import Transaction
from pico3.session_data.entries import NewEntry
from pico3.storage.records import Input

__all__ = [
    "BoundaryResult",
    "ConversationBusy",
    "InputReason",
    "boundary",
    "queue_input",
    "replace_input",
    "resolve_inputs",
    "user_entry",
    "user_message",
]

InputReason = Literal["aborted", "stale", "terminated", "failed"]


class ConversationBusy(KernelError):
    """``send(..., when_busy="reject")`` while a turn is running; nothing was written."""


class BoundaryResult(msgspec.Struct, frozen=True):
    """What a boundary placed.

    ``triggers`` are the placed steer/follow-up inputs (in id order); ``terminated`` is true
    when a queued self-head write (reset/handoff) was found, which ends the running group;
    ``head`` is the head boundary after placement (the newest self-head placed, else the one
    passed in).
    """

    triggers: list[int]
    terminated: bool
    head: int | None


def user_message(content: Any, now: int) -> dict[str, Any]:
    """The model message of a user input."""
    return {"role": "user", "content": copy_json(content), "timestamp": now}


def user_entry(content: Any, now: int, model: Any = None) -> NewEntry:
    """The ``pi.user`` entry of a placed input; an input with its own model says which in
    ``data.model`` (``provider/modelId``), so a transcript shows what answered that prompt."""
    data = None
    if isinstance(model, dict) and "provider" in model and "modelId" in model:
        data = {"model": f"{model['provider']}/{model['modelId']}"}
    return NewEntry(kind="pi.user", model=[user_message(content, now)], data=data)


def queue_input(
    tx: Transaction, conversation_id: int, record: Input, mode: str, content: Any
) -> None:
    """Put a steer/follow-up into the inbox as ``queued`` (event ``input.queued``)."""
    sticky = tx.document("sticky", conversation_id)
    if "inbox" not in sticky:
        sticky["inbox"] = []
    sticky["inbox"].append({"id": record.id, "mode": mode, "input": {"content": content}})
    tx.put_input(record)
    tx.emit_event(conversation_id, {"type": "input.queued", "input": record.id, "mode": mode})


async def resolve_inputs(
    tx: Transaction,
    conversation_id: int,
    ids: Sequence[int],
    *,
    answer: int | None = None,
    reason: InputReason | None = None,
    detail: Any = None,
) -> None:
    """Resolve every non-terminal input of ``ids`` (of ``conversation_id``): ``done(answer)``
    or ``unanswered(reason)``. Terminal inputs never change again."""
    for input_id in ids:
        record = await tx.input(input_id)
        if record is None or record.conversation_id != conversation_id:
            continue
        if record.status in ("done", "unanswered"):
            continue
        if reason is None:
            tx.put_input(replace_input(record, status="done", answer=answer))
        else:
            tx.put_input(
                replace_input(
                    record,
                    status="unanswered",
                    reason=reason,
                    detail=UNSET if detail is None else detail,
                )
            )


def replace_input(record: Input, **changes: Any) -> Input:
    """A copy of an input record with ``changes`` (inputs are replaced whole)."""
    fields: dict[str, Any] = {
        "id": record.id,
        "conversation_id": record.conversation_id,
        "status": record.status,
        "request_id": record.request_id,
        "entry": record.entry,
        "answer": record.answer,
        "reason": record.reason,
        "detail": record.detail,
        "model": record.model,
        "allow": record.allow,
    }
    for name, value in changes.items():
        fields[name] = UNSET if value is None and name in ("answer", "entry") else value
    return Input(**fields)


async def boundary(
    tx: Transaction,
    conversation_id: int,
    at: Literal["postTools", "final"],
    head_boundary: int | None,
    now: int,
) -> BoundaryResult:
    """Place queued inbox items at a boundary (see the module docstring)."""
    sticky = tx.document("sticky", conversation_id)
    raw = sticky.get("inbox")
    items: list[dict[str, Any]] = [] if raw is None else list(raw.to_plain())
    if not items:
        return BoundaryResult([], False, head_boundary)
    items.sort(key=lambda item: item["id"])
    config = tx.config(conversation_id)
    reset_at = None
    for item in items:
        if item["mode"] == "write" and item["entry"].get("head") == "self":
            reset_at = item["id"]
    gone: set[int] = set()
    if reset_at is not None:
        for item in items:
            if item["mode"] != "write" and item["id"] < reset_at:
                gone.add(item["id"])
                await _unanswer(tx, conversation_id, item["id"], "stale")
    selected: list[dict[str, Any]] = []
    steering_all = config.get("steeringMode") == "all"
    follow_all = config.get("followUpMode") == "all"
    took_steer = took_follow = False
    for item in items:
        if item["id"] in gone:
            continue
        mode = item["mode"]
        if mode == "write":
            selected.append(item)
        elif mode == "steer" and (steering_all or not took_steer):
            selected.append(item)
            took_steer = True
        elif mode == "followUp" and at == "final" and (follow_all or not took_follow):
            selected.append(item)
            took_follow = True
    triggers: list[int] = []
    head = head_boundary
    for item in selected:
        input_id = item["id"]
        gone.add(input_id)
        record = await tx.input(input_id)
        if record is None or record.status != "queued":
            continue
        if item["mode"] == "write":
            spec = item["entry"]
            explicit = spec.get("head")
            if isinstance(explicit, int) and head is not None and explicit < head:
                await _unanswer(tx, conversation_id, input_id, "stale")
                continue
            entry = tx.append_entry(
                conversation_id,
                NewEntry(
                    kind=spec["kind"],
                    model=spec.get("model"),
                    data=spec.get("data"),
                    head=explicit,
                    edits=spec.get("edits"),
                ),
            )
            if explicit == "self":
                head = entry.id
            tx.put_input(replace_input(record, status="done", entry=entry.id))
        else:
            model = record.model if record.model is not UNSET else None
            entry = tx.append_entry(
                conversation_id, user_entry(item["input"]["content"], now, model)
            )
            tx.put_input(replace_input(record, status="placed", entry=entry.id))
            triggers.append(input_id)
        tx.emit_event(
            conversation_id, {"type": "input.placed", "input": input_id, "entry": entry.id}
        )
    inbox = sticky["inbox"]
    for index in range(len(inbox) - 1, -1, -1):
        if inbox[index]["id"] in gone:
            del inbox[index]
    return BoundaryResult(triggers, reset_at is not None, head)


async def _unanswer(tx: Transaction, conversation_id: int, input_id: int, reason: str) -> None:
    record = await tx.input(input_id)
    if record is None or record.status != "queued":
        return
    tx.put_input(replace_input(record, status="unanswered", reason=reason))
    tx.emit_event(conversation_id, {"type": "input.aborted", "input": input_id})
