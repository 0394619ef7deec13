"""``pi.collapse``: summarize the older part of a conversation and move its head
(docs/design/turn.md#collapse).

A collapse replaces everything through entry ``through`` with one ``pi.summary`` entry whose
``head`` is the first entry kept, so the model's context starts at the summary. It is core but
not a turn kind: it never makes a conversation busy. Three reasons create one:

* ``threshold`` — after a model call, when ``threshold > 0`` and the context exceeds it
  (foreground: reached by conversation abort, counted by idle);
* ``overflow`` — a request does not fit the model; a replacement model call waits for the
  collapse (``after``) and reads its outcome first (docs/design/decisions.md#d8-g13);
* ``manual`` — :meth:`ConversationHandle.collapse` (background).

Phases: ``summarizing`` (in flight: the summarizer call), ``retrying``, ``prepared{summary}``.
The closure re-reads the newest head: if another head landed meanwhile the collapse fails
``stale`` (entries and edits appended meanwhile do not stale it).

:func:`choose_through` picks the cut: context entries are grouped into exchanges (an assistant
with its tool results; anything else alone) and kept from the newest while they fit
``keepRecent`` tokens; ``through`` is the last entry before the kept suffix.

``sticky.compaction`` mirrors the live collapse for the view: ``{taskId, reason, stage,
attempt, retryAt?}``, present exactly while one lives.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from msgspec import UNSET

from chord.context import Context
from chord.json import copy_json
from pico3.kernel.errors import KernelError
from pico3.kernel.tx import Transaction
from pico3.models.provider import (
    AssistantMessage,
    Request,
    TextContent,
    ToolCall,
    estimate_tokens,
    messages_from_json,
)
from pico3.session_data.entries import NewEntry
from pico3.storage.records import Entry, Task
from pico3.tasks.kinds import (
    AbortClosure,
    Completion,
    Done,
    Next,
    Step,
    TaskInfo,
    TaskKind,
    define_task,
)
from pico3.tasks.runtime import Runtime
from pico3.turn.hook_points import runner
from pico3.turn.message_mirror import stream_message
from pico3.turn.models import DEFAULT_RETRY, resolve_model, retry_delay_ms
from pico3.turn.placement import user_message
from pico3.turn.state import end_turn, newest_head, start_model_call

__all__ = [
    "COLLAPSE",
    "COLLAPSE_KIND",
    "CollapseInProgress",
    "NothingToCollapse",
    "choose_through",
    "overflow_step",
    "start_collapse",
    "threshold_through",
]

COLLAPSE = "pi.collapse"
DEFAULT_INSTRUCTIONS = (
    "Summarize the conversation so far for continuation: the goal, decisions made, the current "
    "state of the work and anything still open. Reply with the summary only."
)


class NothingToCollapse(KernelError):
    """A manual collapse found everything within ``keepRecent``; nothing was written."""


class CollapseInProgress(KernelError):
    """A collapse is already live in this conversation; nothing was written."""


def _tokens(entry: Entry) -> int:
    if entry.model is UNSET or not entry.model:
        return 0
    try:
        return estimate_tokens(messages_from_json(entry.model))
    except ValueError:
        return 0


def choose_through(entries: Sequence[Entry], keep_recent: int) -> int | None:
    """The id of the last entry to summarize, or ``None`` when everything fits."""
    exchanges: list[list[Entry]] = []
    for entry in entries:
        if entry.kind == "pi.tool_result" and exchanges and exchanges[-1][0].kind == "pi.assistant":
            exchanges[-1].append(entry)
        else:
            exchanges.append([entry])
    total = 0
    kept = 0
    for exchange in reversed(exchanges):
        size = sum(_tokens(entry) for entry in exchange)
        if kept and total + size > keep_recent:
            break
        total += size
        kept += 1
        if total > keep_recent:
            break
    if kept >= len(exchanges):
        return None
    return exchanges[len(exchanges) - kept - 1][-1].id


def _live_collapse(tx: Transaction, cid: int) -> bool:
    return "compaction" in tx.document("sticky", cid)


async def threshold_through(tx: Transaction, cid: int, message: AssistantMessage) -> int | None:
    """Read before any append: the ``through`` of a threshold collapse, when one is due."""
    threshold = tx.config(cid).get("threshold") or 0
    if threshold <= 0 or _live_collapse(tx, cid):
        return None
    derived = await tx.context(cid)
    used = estimate_tokens([*messages_from_json(derived.messages), message])
    if message.usage is not None:
        used = max(used, message.usage.input + message.usage.output)
    if used <= threshold:
        return None
    return choose_through(derived.entries, tx.config(cid).get("keepRecent") or 0)


def start_collapse(
    tx: Transaction,
    cid: int,
    reason: str,
    through: int,
    *,
    instructions: str | None = None,
    background: bool = False,
) -> int:
    """Create a ``pi.collapse`` (``compaction.started``; ``sticky.compaction`` for the view)."""
    if _live_collapse(tx, cid):
        raise CollapseInProgress(f"conversation {cid} already has a live collapse")
    task_input: dict[str, Any] = {"reason": reason, "through": through}
    if instructions is not None:
        task_input["instructions"] = instructions
    task_id = tx.create_task(COLLAPSE, task_input, background=background)
    tx.document("sticky", cid)["compaction"] = {
        "taskId": task_id,
        "reason": reason,
        "stage": "summarizing",
        "attempt": 0,
    }
    tx.emit_event(
        cid, {"type": "compaction.started", "taskId": task_id, "reason": reason, "through": through}
    )
    return task_id


# -- overflow (called by pi.generation) ----------------------------------------------------------
async def overflow_step(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
    """The request does not fit: collapse and retry in a replacement model call, or fail."""
    cid = task.conversation_id
    inputs = list(task.input["inputs"])
    cutoff = (task.checkpoint or {}).get("cutoff") or None
    now = rt.now()

    async def close(tx: Transaction, current: Task, ctx: Context) -> Completion:
        head = await newest_head(tx, cid)
        derived = await tx.context(cid, at=cutoff)
        keep = tx.config(cid).get("keepRecent") or 0
        through = None if _live_collapse(tx, cid) else choose_through(derived.entries, keep)
        failure = {"reason": "overflow", "detail": "the request does not fit the model"}
        tx.emit_event(cid, {"type": "generation.failed", "taskId": task.id, **failure})
        if through is None:
            tx.write(
                cid,
                "pi.notice",
                model=[
                    user_message("The context is too large and there is nothing to compact.", now)
                ],
            )
            await end_turn(tx, cid, inputs, head=head, now=now, reason="failed", detail="overflow")
            return Completion.failed(failure)
        collapse = start_collapse(tx, cid, "overflow", through)
        start_model_call(tx, cid, inputs, after=[collapse], new_turn=False, waiting=True)
        return Completion.failed(failure)

    return Done(close)


async def replacement_failed(task: TaskInfo, rt: Runtime, ctx: Context) -> Done | None:
    """docs/design/decisions.md#d8-g13: a model call created after an overflow collapse reads its outcome first; when the
    collapse did not complete, the group fails with a notice instead of looping."""
    if not task.after:
        return None
    record = await rt.task(task.after[0], ctx)
    if record is None or record.kind != COLLAPSE:
        return None
    outcome: dict[str, Any] = record.outcome if isinstance(record.outcome, dict) else {}
    if outcome.get("status") == "completed":
        return None
    failure = outcome.get("failure")
    reason = (failure.get("reason") if isinstance(failure, dict) else None) or outcome.get(
        "status", "failed"
    )
    cid = task.conversation_id
    inputs = list(task.input["inputs"])
    now = rt.now()

    async def close(tx: Transaction, current: Task, ctx: Context) -> Completion:
        head = await newest_head(tx, cid)
        tx.write(cid, "pi.notice", model=[user_message(f"compaction failed: {reason}", now)])
        detail = f"compaction failed: {reason}"
        tx.emit_event(
            cid,
            {
                "type": "generation.failed",
                "taskId": task.id,
                "reason": "overflow",
                "detail": detail,
            },
        )
        await end_turn(tx, cid, inputs, head=head, now=now, reason="failed", detail=detail)
        return Completion.failed({"reason": "overflow", "detail": detail})

    return Done(close)


# -- the kind ------------------------------------------------------------------------------------
def _finish_view(tx: Transaction, cid: int) -> None:
    sticky = tx.document("sticky", cid)
    if "compaction" in sticky:
        del sticky["compaction"]


def _failed(task: TaskInfo, reason: str, detail: str) -> Done:
    cid = task.conversation_id

    def close(tx: Transaction, current: Task, ctx: Context) -> Completion:
        _finish_view(tx, cid)
        tx.emit_event(
            cid,
            {"type": "compaction.failed", "taskId": task.id, "reason": reason, "detail": detail},
        )
        return Completion.failed({"reason": reason, "detail": detail})

    return Done(close)


async def _initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
    cid = task.conversation_id
    settings = await rt.rewindable(cid, ctx)
    sticky = await rt.sticky(cid, ctx)
    if resolve_model(rt, settings.get("model")) is None:
        return _failed(task, "no_model", "no model is configured")
    through = task.input["through"]

    async def read(tx: Transaction, current: Task, ctx: Context) -> tuple[int | None, list[Entry]]:
        return await newest_head(tx, cid), (await tx.context(cid, at=through)).entries

    head, entries = await rt.commit(read, ctx)
    base: dict[str, Any] = {
        "expectedHead": head,
        "model": copy_json(settings["model"]),
        "thinkingLevel": settings.get("thinkingLevel") or "off",
        "retry": copy_json(sticky.get("retry", DEFAULT_RETRY)),
        "attempt": 0,
    }
    instructions = task.input.get("instructions")
    hooks = runner(rt, COLLAPSE, task.id, cid)
    answer = None
    if hooks is not None:
        answer = await hooks.before_collapse(task.input["reason"], through, entries, ctx)
    if isinstance(answer, dict):
        if answer.get("decline"):
            return _failed(task, "declined", "a before_collapse hook declined")
        if isinstance(answer.get("instructions"), str):
            instructions = answer["instructions"]
        if isinstance(answer.get("summary"), str):
            summary = answer["summary"]
            return Next(_guarded(task, {**base, "phase": "prepared", "summary": summary}))
    if instructions is not None:
        base["instructions"] = instructions
    summarizing = {**base, "phase": "summarizing", "attempt": 1}
    stale = await rt.commit(_guarded(task, summarizing, inline=True), ctx)
    if stale:
        return _failed(task, "stale", "the head moved")
    return await _summarize(task, rt, summarizing, ctx)


def _guarded(
    task: TaskInfo, checkpoint: dict[str, Any], *, inline: bool = False
) -> Callable[[Transaction, Task, Context], Awaitable[Any]]:
    """A builder that checkpoints unless the head moved (then: ``stale``)."""
    cid = task.conversation_id

    async def build(tx: Transaction, current: Task, ctx: Context) -> Any:
        if await newest_head(tx, cid) != checkpoint["expectedHead"]:
            if inline:
                return True
            _finish_view(tx, cid)
            tx.emit_event(
                cid,
                {
                    "type": "compaction.failed",
                    "taskId": task.id,
                    "reason": "stale",
                    "detail": "the head moved",
                },
            )
            return Completion.failed({"reason": "stale", "detail": "the head moved"})
        if inline:
            tx.checkpoint(checkpoint)
            compaction = tx.document("sticky", cid).get("compaction")
            if compaction is not None:
                compaction["stage"] = "summarizing"
                compaction["attempt"] = checkpoint["attempt"]
                if "retryAt" in compaction:
                    del compaction["retryAt"]
            return False
        return checkpoint

    return build


async def _summarize(task: TaskInfo, rt: Runtime, state: dict[str, Any], ctx: Context) -> Any:
    cid = task.conversation_id
    resolved = resolve_model(rt, state["model"])
    if resolved is None:
        return _failed(task, "no_model", "unknown model")
    through = task.input["through"]

    async def read(tx: Transaction, current: Task, ctx: Context) -> list[dict[str, Any]]:
        return copy_json((await tx.context(cid, at=through)).messages)

    raw = await rt.commit(read, ctx)
    instruction = state.get("instructions") or DEFAULT_INSTRUCTIONS
    messages = [m for m in raw if m.get("role") != "system"]
    messages.append(user_message(instruction, rt.now()))
    request = Request(
        model=resolved.info.id,
        messages=messages_from_json(messages),
        system=["You write summaries of conversations. Tools are not available."],
        tools=[],
    )

    async def ignore(_partial: dict[str, Any]) -> None:
        return None

    message, retryable = await stream_message(resolved.provider.stream(request, ctx), ignore)
    error: str | None = None
    if message.stop_reason == "error":
        error = message.error_message or "provider error"
    elif message.stop_reason == "aborted":
        error, retryable = "the provider aborted", False
    elif any(isinstance(block, ToolCall) for block in message.content):
        error, retryable = "the summarizer replied with tool calls", True
    if error is None:
        text = "".join(b.text for b in message.content if isinstance(b, TextContent))
        return Next({**state, "phase": "prepared", "summary": text})
    delay = retry_delay_ms(state["retry"], state["attempt"]) if retryable else None
    if delay is None:
        reason = (
            "provider"
            if not retryable or not state["retry"].get("enabled", True)
            else "retries_exhausted"
        )
        return _failed(task, reason, error)
    return Next(_retry(task, state, rt.now() + delay, error))


def _retry(
    task: TaskInfo, state: dict[str, Any], until: int, error: str
) -> Callable[[Transaction, Task, Context], dict[str, Any]]:
    cid = task.conversation_id

    def build(tx: Transaction, current: Task, ctx: Context) -> dict[str, Any]:
        compaction = tx.document("sticky", cid).get("compaction")
        if compaction is not None:
            compaction["stage"] = "retrying"
            compaction["attempt"] = state["attempt"]
            compaction["retryAt"] = until
        tx.emit_event(
            cid,
            {
                "type": "compaction.retrying",
                "taskId": task.id,
                "attempt": state["attempt"],
                "retryAt": until,
                "error": error,
            },
        )
        return {**state, "phase": "retrying", "untilMs": until, "lastError": error}

    return build


async def _summarizing(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
    """Recovery: the interrupted call counts as a failed attempt, never replayed as itself."""
    state: dict[str, Any] = dict(task.checkpoint or {})
    delay = retry_delay_ms(state["retry"], state["attempt"])
    if delay is None:
        return _failed(task, "provider", "interrupted")
    return Next(_retry(task, state, rt.now() + delay, "interrupted"))


async def _retrying(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
    state: dict[str, Any] = dict(task.checkpoint or {})
    await rt.sleep(state["untilMs"], ctx)
    following = {k: v for k, v in state.items() if k not in ("untilMs", "lastError")}
    following.update(phase="summarizing", attempt=state["attempt"] + 1)
    stale = await rt.commit(_guarded(task, following, inline=True), ctx)
    if stale:
        return _failed(task, "stale", "the head moved")
    return await _summarize(task, rt, following, ctx)


async def _prepared(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
    cid = task.conversation_id
    state: dict[str, Any] = dict(task.checkpoint or {})
    through = task.input["through"]
    now = rt.now()

    async def close(tx: Transaction, current: Task, ctx: Context) -> Completion:
        if await newest_head(tx, cid) != state.get("expectedHead"):
            _finish_view(tx, cid)
            tx.emit_event(
                cid,
                {
                    "type": "compaction.failed",
                    "taskId": task.id,
                    "reason": "stale",
                    "detail": "the head moved",
                },
            )
            return Completion.failed({"reason": "stale", "detail": "the head moved"})
        transcript = await tx.visible_transcript(cid)
        kept = [entry.id for entry in transcript if entry.id > through]
        if not kept:
            _finish_view(tx, cid)
            return Completion.failed({"reason": "stale", "detail": "nothing follows through"})
        summary = tx.append_entry(
            cid,
            NewEntry(
                kind="pi.summary",
                model=[user_message(state.get("summary", ""), now)],
                data={"through": through},
                head=kept[0],
            ),
        )
        _finish_view(tx, cid)
        tx.emit_event(
            cid, {"type": "compaction.finished", "taskId": task.id, "summary": summary.id}
        )
        return Completion.completed({"summary": summary.id})

    return Done(close)


async def _abort(task: TaskInfo, rt: Runtime, ctx: Context) -> AbortClosure:
    cid = task.conversation_id

    def close(tx: Transaction, current: Task, ctx: Context) -> None:
        _finish_view(tx, cid)
        tx.emit_event(
            cid,
            {
                "type": "compaction.failed",
                "taskId": task.id,
                "reason": "aborted",
                "detail": "aborted",
            },
        )
        return None

    return close


def _fault(tx: Transaction, current: Task, error: str) -> None:
    _finish_view(tx, current.conversation_id)


COLLAPSE_KIND: TaskKind = define_task(
    COLLAPSE,
    initial=_initial,
    phases={"summarizing": _summarizing, "retrying": _retrying, "prepared": _prepared},
    abort=_abort,
    inflight=("summarizing",),
    core=True,
    fault=_fault,
)
"""The ``pi.collapse`` kind (registered by :func:`pico3.turn.install`)."""
