"""The turn operations of a conversation: send, reset/handoff, collapse, input abort, entries.

These are what :class:`~pico3.harness.ConversationHandle` exposes; each is one commit (or a
read), taken with core authority because admission writes the inbox, the turn and input records.

``send`` (docs/design/harness.md#public-api):

* when the conversation is **idle**, one commit places older queued items (a final boundary),
  appends the ``pi.user`` entry, marks the input ``placed`` and creates the model call that
  owns ``triggers + [new input]`` (events ``input.placed``, ``entry.added``, ``turn.started``);
* when it is **busy**, the input is queued as ``followUp`` (default) or ``steer``, or
  ``when_busy="reject"`` raises :class:`~pico3.turn.placement.ConversationBusy` and writes
  nothing;
* a ``request_id`` already accepted in this conversation returns the original input and writes
  nothing.

It never waits for the model call: the returned :class:`InputHandle` does that on request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from chord.context import Context
from chord.json import JsonError, copy_json
from pico3.kernel.tx import Authority, Transaction
from pico3.storage.records import Entry, EntryScan, Input
from pico3.turn.collapse import (
    CollapseInProgress,
    NothingToCollapse,
    choose_through,
    start_collapse,
)
from pico3.turn.placement import (
    ConversationBusy,
    boundary,
    queue_input,
    replace_input,
    user_entry,
    user_message,
)
from pico3.turn.state import newest_head, start_model_call

if TYPE_CHECKING:
    from pico3.kernel.commit import Kernel
    from pico3.tasks.scheduler import Scheduler

__all__ = [
    "InputHandle",
    "WhenBusy",
    "abort_input",
    "collapse",
    "entries",
    "reset",
    "send",
]

WhenBusy = Literal["followUp", "steer", "reject"]


def _clock_now(kernel: Kernel) -> int:
    kinds = kernel.kinds
    scheduler = getattr(kinds, "scheduler", None)
    clock = getattr(scheduler, "clock", None)
    if clock is None:
        raise RuntimeError("this session has no task layer (no clock)")
    return int(clock.now())


def _scheduler(kernel: Kernel) -> Scheduler:
    scheduler = getattr(kernel.kinds, "scheduler", None)
    if scheduler is None:
        raise RuntimeError("this session has no task layer")
    return scheduler


class InputHandle(msgspec.Struct, frozen=True):
    """A user input's id and ways to follow it."""

    id: int
    conversation_id: int
    _kernel: Any

    async def result(self, ctx: Context) -> Input | None:
        """A point read of the input record."""
        return await self._kernel.commit(lambda tx, _ctx: tx.input(self.id), ctx)

    async def wait(self, ctx: Context) -> Input:
        """The input's terminal record (``done`` or ``unanswered``), once it has one."""
        return await _scheduler(self._kernel).waiters.wait_for_input(self.id, ctx)

    async def abort(self, ctx: Context) -> str:
        """Withdraw the input if still queued (see ``abort_input``)."""
        return await abort_input(self._kernel, self.conversation_id, self.id, ctx)


def _check_content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    try:
        value = copy_json(content, ("content",))
    except JsonError as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(value, list) or not value:
        raise ValueError("content must be a str or a non-empty list of content blocks")
    for index, block in enumerate(value):
        if not isinstance(block, dict) or block.get("type") not in ("text", "image"):
            raise ValueError(f"content[{index}] must be a text or image block")
    return value


def _prompt_options(model: Mapping[str, Any] | None, allow: Sequence[str] | None) -> dict[str, Any]:
    """The checked ``model``/``allow`` members of a new input record (absent when not given)."""
    extra: dict[str, Any] = {}
    if model is not None:
        if (
            not isinstance(model, Mapping)
            or not isinstance(model.get("provider"), str)
            or not model.get("provider")
            or not isinstance(model.get("modelId"), str)
            or not model.get("modelId")
        ):
            raise ValueError(f'model must be {{"provider": str, "modelId": str}}, got {model!r}')
        extra["model"] = {"provider": model["provider"], "modelId": model["modelId"]}
    if allow is not None:
        if isinstance(allow, str) or not all(isinstance(r, str) and r for r in allow):
            raise ValueError(f"allow must be a list of non-empty rule strings, got {allow!r}")
        if allow:
            extra["allow"] = list(allow)
    return extra


async def send(
    kernel: Kernel,
    conversation_id: int,
    content: Any,
    ctx: Context,
    *,
    request_id: str | None = None,
    when_busy: WhenBusy = "followUp",
    model: Mapping[str, Any] | None = None,
    allow: Sequence[str] | None = None,
) -> InputHandle:
    """Admit a user input (see the module docstring). ``model`` and ``allow`` ride on the input
    record (:class:`~pico3.storage.records.Input`): the turn this input starts uses that model
    instead of the config's, and the approval authority may let those rules' calls run without
    asking, for that turn only."""
    if when_busy not in ("followUp", "steer", "reject"):
        raise ValueError(f"when_busy must be followUp, steer or reject, got {when_busy!r}")
    if request_id is not None and (not isinstance(request_id, str) or not request_id):
        raise ValueError("request_id must be a non-empty str")
    content = _check_content(content)
    extra = _prompt_options(model, allow)
    now = _clock_now(kernel)
    cid = conversation_id

    async def build(tx: Transaction, _ctx: Context) -> int:
        if request_id is not None:
            existing = await tx.input_by_request(cid, request_id)
            if existing is not None:
                return existing.id
        if tx.is_busy(cid):
            if when_busy == "reject":
                raise ConversationBusy(f"conversation {cid} is busy")
            input_id = kernel.mint_id()
            record = Input(id=input_id, conversation_id=cid, status="queued", **extra)
            if request_id is not None:
                record = replace_input(record, request_id=request_id)
            queue_input(tx, cid, record, when_busy, content)
            return input_id
        head = await newest_head(tx, cid)
        placed = await boundary(tx, cid, "final", head, now)
        input_id = kernel.mint_id()
        entry = tx.append_entry(cid, user_entry(content, now, extra.get("model")))
        record = Input(id=input_id, conversation_id=cid, status="placed", entry=entry.id, **extra)
        if request_id is not None:
            record = replace_input(record, request_id=request_id)
        tx.put_input(record)
        tx.emit_event(cid, {"type": "input.placed", "input": input_id, "entry": entry.id})
        start_model_call(tx, cid, [*placed.triggers, input_id])
        return input_id

    input_id = await kernel.commit(build, ctx, conversation_id=cid, authority=Authority.CORE)
    return InputHandle(input_id, cid, kernel)


async def reset(kernel: Kernel, conversation_id: int, handoff: str | None, ctx: Context) -> int:
    """Write ``pi.reset{head: self}`` — or ``pi.handoff{head: self}`` carrying ``handoff`` as a
    user message — now when idle (staling older queued steer/follow-ups in the same commit), or
    queued for the next boundary when busy. Returns the input id."""
    if handoff is not None and not isinstance(handoff, str):
        raise ValueError("handoff must be a str")
    now = _clock_now(kernel)
    cid = conversation_id

    async def build(tx: Transaction, _ctx: Context) -> int:
        idle = not tx.is_busy(cid)
        if handoff is None:
            input_id = tx.write(cid, "pi.reset", head="self")
        else:
            model = [user_message(handoff, now)]
            input_id = tx.write(cid, "pi.handoff", model=model, head="self")
        if idle:
            await _stale_queued(tx, cid)
        return input_id

    return await kernel.commit(build, ctx, conversation_id=cid, authority=Authority.CORE)


async def _stale_queued(tx: Transaction, cid: int) -> None:
    sticky = tx.document("sticky", cid)
    inbox = sticky.get("inbox")
    if inbox is None:
        return
    for index in range(len(inbox) - 1, -1, -1):
        item = inbox[index]
        if item["mode"] == "write":
            continue
        record = await tx.input(item["id"])
        if record is not None and record.status == "queued":
            tx.put_input(replace_input(record, status="unanswered", reason="stale"))
            tx.emit_event(cid, {"type": "input.aborted", "input": record.id})
        del inbox[index]


async def abort_input(kernel: Kernel, conversation_id: int, input_id: int, ctx: Context) -> str:
    """``"aborted"`` (it was queued: removed, ``unanswered/aborted``), ``"already_placed"``
    or ``"not_found"``."""
    cid = conversation_id

    async def build(tx: Transaction, _ctx: Context) -> str:
        record = await tx.input(input_id)
        if record is None or record.conversation_id != cid:
            return "not_found"
        if record.status != "queued":
            return "already_placed"
        inbox = tx.document("sticky", cid).get("inbox")
        if inbox is not None:
            for index in range(len(inbox)):
                if inbox[index]["id"] == input_id:
                    del inbox[index]
                    break
        tx.put_input(replace_input(record, status="unanswered", reason="aborted"))
        tx.emit_event(cid, {"type": "input.aborted", "input": input_id})
        return "aborted"

    return await kernel.commit(build, ctx, conversation_id=cid, authority=Authority.CORE)


async def collapse(
    kernel: Kernel, conversation_id: int, instructions: str | None, ctx: Context
) -> int:
    """Start a background manual collapse; returns its task id. Raises
    :class:`~pico3.turn.collapse.NothingToCollapse` or
    :class:`~pico3.turn.collapse.CollapseInProgress` (nothing written)."""
    if instructions is not None and not isinstance(instructions, str):
        raise ValueError("instructions must be a str")
    cid = conversation_id

    async def build(tx: Transaction, _ctx: Context) -> int:
        if "compaction" in tx.document("sticky", cid):
            raise CollapseInProgress(f"conversation {cid} already has a live collapse")
        derived = await tx.context(cid)
        through = choose_through(derived.entries, tx.config(cid).get("keepRecent") or 0)
        if through is None:
            raise NothingToCollapse(f"conversation {cid}: everything fits keepRecent")
        return start_collapse(
            tx, cid, "manual", through, instructions=instructions, background=True
        )

    return await kernel.commit(build, ctx, conversation_id=cid, authority=Authority.CORE)


async def entries(
    kernel: Kernel,
    conversation_id: int,
    ctx: Context,
    *,
    limit: int = 100,
    before: int | None = None,
    kind: str | None = None,
) -> list[Entry]:
    """Newest-first, fork-aware history (beyond the active transcript), one page."""
    if type(limit) is not int or limit < 1:
        raise ValueError(f"limit must be a positive int, got {limit!r}")
    scan = EntryScan(conversation_id=conversation_id, limit=limit, kind=kind, before=before)

    async def read() -> list[Entry]:
        return await kernel.storage.scan_entries(scan, ctx)

    return await kernel.on_line(read, ctx)
