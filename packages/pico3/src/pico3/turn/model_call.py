"""``pi.generation``: one model call of a turn, recoverable at every step (docs/design/turn.md#model-call).

The kind is the *model call* in Python (:data:`MODEL_CALL_KIND`, this module) because
"generation" is chord's word for a reload model call. The durable strings keep their old
spelling: the kind name ``pi.generation`` is stored in every session's task records, and the
view's ``turn.generation`` status and the ``generation.*`` events are read by clients.

Input ``{inputs: [input ids]}``: the model call owns the group of user inputs it answers.

Phases (the checkpoint is the recovery program counter)::

    (none)      preparation: snapshot settings + registries (the model: the config's, or the
                one the turn's first input asked for, ``Input.model``, shown as
                ``sticky.turn.model``), build the system entry, then
                commit "prepared" with Prep = {cutoff, system, model, thinkingLevel, tools,
                retry, attempt}. If anything moved meanwhile the builder says "retry" and
                preparation runs again.
    prepared    derive the request at `cutoff`, check overflow, attempt += 1, commit
                "requesting" (+ generation.started) BEFORE calling the provider, stream the
                answer into turn.message (coalesced, see pico3.turn.message_mirror), classify.
    requesting  in flight: entered only after a crash. The call may have happened; it counts
                as a failed attempt ("interrupted") and retries, or fails.
    retrying    sleep until untilMs, then back to "prepared" with the same Prep.
    deferred    the provider answered with a handle instead of a message (a batch or
                background job): {handle, pollAt} are persisted with the Prep. Sleep until
                pollAt, fetch_deferred(handle); another handle → refresh the checkpoint (new
                handle, new pollAt, generation.deferred again); a message → turn.message, then
                classify it exactly like a streamed one. Not in-flight: after a reopen the
                model call just polls again, it never re-sends the request. Abort gives the
                handle up with a best-effort cancel_deferred.

Classification of the terminal message (streamed, or fetched for a deferred handle):

* error (or a stream or fetch that raised) → ``pi.usage`` + ``retrying`` while the policy
  allows (a retry sends the request again); otherwise a display-only ``pi.assistant`` and the
  group fails;
* provider-side ``aborted`` (no abort mark) → display-only entry, the group fails ``provider``;
* tool calls → the assistant entry, one ``pi.tool`` per call and one ``pi.post_tools`` after
  them, atomically;
* a final answer → the assistant entry, inputs ``done``, the final boundary, and a successor
  model call for whatever the boundary placed.

Display-only assistants carry no ``model``, so they never reach a later request and never
create tools, by construction.

Why one module: it is one task kind: one function per phase of the state machine above, plus the
builders they commit; the phases hand each other the same Prep checkpoint, so the whole recovery
program reads top to bottom in one place.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from chord.context import Context
from chord.json import JsonError, copy_json
from pico3.kernel.tx import Transaction
from pico3.models.provider import (
    AssistantMessage,
    DeferringModelProvider,
    DoneEvent,
    ErrorEvent,
    MessageMemo,
    ModelProviderError,
    Request,
    ToolCall,
)
from pico3.session_data.entries import NewEntry
from pico3.storage.records import Task
from pico3.tasks.kinds import (
    RETRY,
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
from pico3.turn.collapse import (
    overflow_step,
    replacement_failed,
    start_collapse,
    threshold_through,
)
from pico3.turn.hook_points import chain_before_request, observe_after_response, runner
from pico3.turn.message_mirror import apply_partial, assistant_json, stream_message
from pico3.turn.models import DEFAULT_RETRY, ResolvedModel, resolve_model, retry_delay_ms
from pico3.turn.placement import boundary, user_message
from pico3.turn.state import (
    MODEL_CALL,
    POST_TOOLS,
    TOOL,
    append_interrupted,
    end_turn,
    newest_head,
    settle,
    settle_fault,
    start_model_call,
    turn_doc,
)
from pico3.turn.system import ToolsMemo, prepare_system, request_tools

__all__ = ["DEFAULT_POLL_MS", "MODEL_CALL_KIND", "settle_fault"]

_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")

DEFAULT_POLL_MS = 5000
"""How long a deferred handle waits before its first (and each next) poll when the provider
names no ``pollAfterMs``."""

_PHASE_KEYS = ("phase", "untilMs", "lastError", "handle", "pollAt")
"""Checkpoint keys that belong to one phase, not to the Prep."""


def _give_up(retry: dict[str, Any]) -> str:
    return "provider" if not retry.get("enabled", True) else "retries_exhausted"


# -- preparation -----------------------------------------------------------------------------
async def _initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
    cid = task.conversation_id
    replaced = await replacement_failed(task, rt, ctx)
    if replaced is not None:
        return replaced
    settings = await rt.rewindable(cid, ctx)
    sticky = await rt.sticky(cid, ctx)
    override = await _prompt_model(task, rt, ctx)
    if override is not None:
        if resolve_model(rt, override) is None:
            named = f"{override.get('provider')}/{override.get('modelId')}"
            detail = f"unknown model {named} (the prompt's own model: no such provider here)"
            return Done(_failure_closure(task, rt.now(), "no_model", detail, None))
    elif resolve_model(rt, settings.get("model")) is None:
        detail = "no model is configured" if settings.get("model") is None else "unknown model"
        return Done(_failure_closure(task, rt.now(), "no_model", detail, None))
    plan = await prepare_system(rt, cid, settings, ctx)
    now = rt.now()
    retry = copy_json(sticky.get("retry", DEFAULT_RETRY))

    async def prepare(tx: Transaction, current: Task, ctx: Context) -> Any:
        if not await plan.still_valid(tx, cid):
            return RETRY
        newest = await tx.newest_entry(cid)
        system = plan.append(tx, cid, now)
        cutoff = system if system is not None else (newest.id if newest is not None else 0)
        turn = turn_doc(tx, cid)
        if turn is not None:
            turn["tools"] = []
            if "message" in turn:
                del turn["message"]
            turn["generation"] = {"stage": "preparing"}
            if override is not None:
                turn["model"] = copy_json(override)
        return {
            "phase": "prepared",
            "cutoff": cutoff,
            "system": system,
            "model": copy_json(override if override is not None else plan.settings["model"]),
            "thinkingLevel": plan.settings.get("thinkingLevel") or "off",
            "tools": plan.tools,
            "retry": retry,
            "attempt": 0,
        }

    # "prepared" need not be durable before "requesting" is: nothing leaves the session in
    # between (the hooks before the request run again after a crash anyway), and a crash that
    # loses it prepares again. The two checkpoints then share one write.
    return Next(prepare, durable=False)


async def _prompt_model(task: TaskInfo, rt: Runtime, ctx: Context) -> dict[str, Any] | None:
    """The model the input that started this turn asked for (``Input.model``: a command's
    ``model:``), or ``None``: the config's. Read from the durable input record at every model
    call of the group, so the calls after tools and after a crash use it too; a later turn
    (another input first) never does. Inputs that joined the group later (a steer) do not
    change the turn's model."""
    inputs = (task.input or {}).get("inputs") or []
    if not inputs:
        return None

    async def read(tx: Transaction, current: Task, ctx: Context) -> Any:
        return await tx.input(inputs[0])

    record = await rt.commit(read, ctx)
    model = getattr(record, "model", None)
    return dict(model) if isinstance(model, dict) else None


# -- requesting ------------------------------------------------------------------------------
_MEMOS: OrderedDict[tuple[int, int], tuple[MessageMemo, ToolsMemo]] = OrderedDict()
_MEMO_CONVERSATIONS = 64


def _memo(harness: int, conversation_id: int) -> tuple[MessageMemo, ToolsMemo]:
    """The request-message and offered-tools memos of a conversation of the harness whose
    :attr:`~pico3.tasks.runtime.TaskHarness.key` is ``harness`` (the most recently used few are
    kept). Conversation ids are only unique within a harness's storage, so the key names the
    harness too: two sessions hosted by one process each keep their own. A memo only skips the
    messages its last call saw, compared by value when not the very same objects, so a stale one
    (a harness gone and its key reused) is harmless."""
    key = (harness, conversation_id)
    memo = _MEMOS.pop(key, None) or (MessageMemo(), ToolsMemo())
    _MEMOS[key] = memo
    if len(_MEMOS) > _MEMO_CONVERSATIONS:
        _MEMOS.popitem(last=False)
    return memo


async def _prepared(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
    cid = task.conversation_id
    prep: dict[str, Any] = dict(task.checkpoint or {})
    resolved = resolve_model(rt, prep["model"])
    if resolved is None:
        return Done(_failure_closure(task, rt.now(), "no_model", "unknown model", None))
    cutoff: int = prep["cutoff"]

    async def read(tx: Transaction, current: Task, ctx: Context) -> Any:
        if not cutoff:
            return [], 0
        derived = await tx.shared_context(cid, at=cutoff)
        return derived.messages, len(derived.messages)

    # sent only after "requesting" is
    shared, count = await rt.commit(read, ctx, durable=False)
    # The derived messages are the kernel's context builder's own list: read-only here, copied
    # for the hooks (which may change what they get) by chain_before_request, and only its
    # first `count` are this request's (a later read may extend it, never change them).
    raw: list[dict[str, Any]] = await chain_before_request(rt, task, shared, count, cutoff, ctx)
    if raw is shared and len(raw) != count:
        raw = raw[:count]
    harness = rt.harness  # a new window at every access
    message_memo, tools_memo = _memo(harness.key, cid)
    offered = request_tools(raw, getattr(harness, "tools", None), memo=tools_memo)
    level = prep.get("thinkingLevel", "off")
    messages, system, tokens = message_memo.convert(raw)
    request = Request(
        model=resolved.info.id,
        messages=messages,
        system=system,
        tools=offered.wire(),
        thinking_level=level if level in _LEVELS else "xhigh",
    )
    if tokens > resolved.overflow_limit:
        return await overflow_step(task, rt, ctx)
    attempt = prep["attempt"] + 1
    state = {**prep, "phase": "requesting", "attempt": attempt, "offered": offered.names}

    def begin(tx: Transaction, current: Task, ctx: Context) -> None:
        tx.checkpoint(state)
        turn = turn_doc(tx, cid)
        if turn is not None:
            turn["generation"] = {"stage": "requesting", "attempt": attempt}
        tx.emit_event(cid, {"type": "generation.started", "taskId": task.id, "attempt": attempt})

    await rt.commit(begin, ctx)
    streaming = [False]

    async def flush(partial: dict[str, Any]) -> None:
        first = not streaming[0]
        streaming[0] = True

        def write(tx: Transaction, current: Task, ctx: Context) -> None:
            turn = turn_doc(tx, cid)
            if turn is None:
                return
            apply_partial(turn, partial)
            if first:
                turn["generation"] = {"stage": "streaming", "attempt": attempt}

        await rt.commit(write, ctx)

    message, retryable = await stream_message(resolved.provider.stream(request, ctx), flush)
    if _is_deferred(message):
        return await _defer(task, rt, resolved, state, message, ctx)
    await observe_after_response(rt, task, assistant_json(message), attempt, ctx)
    return await _classify(task, rt, state, message, retryable, ctx)


# -- deferred answers ----------------------------------------------------------------------------
def _is_deferred(message: AssistantMessage) -> bool:
    return message.deferred is not None and message.stop_reason not in ("error", "aborted")


def _error(detail: str) -> AssistantMessage:
    return AssistantMessage(stop_reason="error", error_message=detail)


async def _defer(
    task: TaskInfo,
    rt: Runtime,
    resolved: ResolvedModel,
    state: dict[str, Any],
    message: AssistantMessage,
    ctx: Context,
) -> Step:
    """Persist a deferred answer's handle: ``deferred{handle, pollAt}`` + ``generation.deferred``.

    A handle the harness could never use (the provider cannot fetch, or the handle is not
    strict JSON) is a non-retryable provider error instead."""
    deferred = message.deferred
    assert deferred is not None
    problem: str | None = None
    handle: Any = None
    if not isinstance(resolved.provider, DeferringModelProvider):
        problem = f"provider {resolved.provider.name!r} deferred but cannot fetch_deferred"
    else:
        try:
            handle = copy_json(deferred.handle)
        except JsonError as exc:
            problem = f"deferred handle is not strict JSON: {exc}"
    if problem is not None:
        failed = _error(problem)
        await observe_after_response(rt, task, assistant_json(failed), state["attempt"], ctx)
        return await _classify(task, rt, state, failed, False, ctx)
    poll_at = rt.now() + max(0, deferred.poll_after_ms or DEFAULT_POLL_MS)
    return Next(_defer_builder(task, state, handle, poll_at))


def _defer_builder(
    task: TaskInfo, state: dict[str, Any], handle: Any, poll_at: int
) -> Callable[[Transaction, Task, Context], dict[str, Any]]:
    cid = task.conversation_id
    attempt = state["attempt"]

    def build(tx: Transaction, current: Task, ctx: Context) -> dict[str, Any]:
        turn = turn_doc(tx, cid)
        if turn is not None:
            if "message" in turn:
                del turn["message"]
            turn["generation"] = {"stage": "deferred", "attempt": attempt, "pollAt": poll_at}
        tx.emit_event(cid, {"type": "generation.deferred", "taskId": task.id, "pollAt": poll_at})
        kept = {k: v for k, v in state.items() if k not in _PHASE_KEYS}
        return {**kept, "phase": "deferred", "handle": handle, "pollAt": poll_at}

    return build


async def _deferred(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
    """Poll a deferred handle at ``pollAt`` (also the recovery path: nothing is re-sent)."""
    state: dict[str, Any] = dict(task.checkpoint or {})
    await rt.sleep(state["pollAt"], ctx)
    resolved = resolve_model(rt, state["model"])
    if resolved is None:
        return Done(_failure_closure(task, rt.now(), "no_model", "unknown model", None))
    message, retryable = await _fetch(resolved, state["handle"], ctx)
    if _is_deferred(message):
        return await _defer(task, rt, resolved, state, message, ctx)
    cid = task.conversation_id
    shown = assistant_json(message)

    def write(tx: Transaction, current: Task, ctx: Context) -> None:
        turn = turn_doc(tx, cid)
        if turn is not None:
            apply_partial(turn, {k: v for k, v in shown.items() if k in _PARTIAL_KEYS})

    await rt.commit(write, ctx)
    await observe_after_response(rt, task, shown, state["attempt"], ctx)
    return await _classify(task, rt, state, message, retryable, ctx)


_PARTIAL_KEYS = ("role", "content", "api", "provider", "model", "timestamp")
"""The keys of a streaming ``turn.message`` (what a fetched message shows there too)."""


async def _fetch(
    resolved: ResolvedModel, handle: Any, ctx: Context
) -> tuple[AssistantMessage, bool]:
    """The fetched terminal message and whether an error is retryable. A fetch that raises is
    an error message like a stream that raises: retryable unless a ``ModelProviderError`` says not."""
    provider = resolved.provider
    if not isinstance(provider, DeferringModelProvider):
        return _error(f"provider {provider.name!r} cannot fetch_deferred"), False
    try:
        answer: Any = await provider.fetch_deferred(resolved.info.id, handle, ctx)
    except ModelProviderError as exc:
        ctx.raise_if_cancelled()
        return _error(f"deferred fetch failed: {exc.message}"), exc.retryable
    except Exception as exc:
        ctx.raise_if_cancelled()
        return _error(f"deferred fetch raised: {exc}"), True
    if isinstance(answer, DoneEvent):
        return _copy_message(answer.message), False
    if isinstance(answer, ErrorEvent):
        return _copy_message(answer.error), answer.retryable
    kind = type(answer).__name__
    return _error(f"fetch_deferred returned {kind}; expected a done or error event"), False


def _copy_message(message: AssistantMessage) -> AssistantMessage:
    return msgspec.convert(msgspec.to_builtins(message), AssistantMessage)


async def _cancel_deferred(rt: Runtime, checkpoint: dict[str, Any], ctx: Context) -> None:
    """Best effort: give a deferred handle up. Failures are reported, never raised."""
    resolved = resolve_model(rt, checkpoint.get("model"))
    if resolved is None or not isinstance(resolved.provider, DeferringModelProvider):
        return
    try:
        await resolved.provider.cancel_deferred(resolved.info.id, checkpoint.get("handle"), ctx)
    except Exception as exc:
        kernel = getattr(getattr(rt, "harness", None), "kernel", None)
        report = getattr(kernel, "report", None)
        if callable(report):
            report(exc)


async def _classify(
    task: TaskInfo,
    rt: Runtime,
    state: dict[str, Any],
    message: AssistantMessage,
    retryable: bool,
    ctx: Context,
) -> Step:
    attempt: int = state["attempt"]
    retry: dict[str, Any] = state["retry"]
    now = rt.now()
    if message.stop_reason == "error":
        detail = message.error_message or "provider error"
        if not retryable:
            return Done(_failure_closure(task, now, "provider", detail, message))
        delay = retry_delay_ms(retry, attempt)
        if delay is None:
            return Done(_failure_closure(task, now, _give_up(retry), detail, message))
        return Next(_retry_builder(task, state, now + delay, message))
    if message.stop_reason == "aborted":
        return Done(_failure_closure(task, now, "provider", "the provider aborted", message))
    calls = [block for block in message.content if isinstance(block, ToolCall)]
    if calls:
        return Done(_tool_calls_closure(task, now, message, calls, state))
    continuation: str | None = None
    hooks = runner(rt, MODEL_CALL, task.id, task.conversation_id)
    if hooks is not None:
        answer = await hooks.on_yield(assistant_json(message), ctx)
        if isinstance(answer, dict) and isinstance(answer.get("continue"), str):
            continuation = answer["continue"]
    return Done(_final_closure(task, now, message, state, continuation))


# -- recovery and retry ----------------------------------------------------------------------
async def _requesting(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
    """Recovery only: the call may have happened. It counts as a failed attempt."""
    state: dict[str, Any] = dict(task.checkpoint or {})
    delay = retry_delay_ms(state["retry"], state["attempt"])
    if delay is None:
        return Done(_failure_closure(task, rt.now(), _give_up(state["retry"]), "interrupted", None))
    return Next(_retry_builder(task, state, rt.now() + delay, None))


def _retry_builder(
    task: TaskInfo, state: dict[str, Any], until: int, message: AssistantMessage | None
) -> Callable[[Transaction, Task, Context], dict[str, Any]]:
    cid = task.conversation_id
    attempt = state["attempt"]
    error = "interrupted" if message is None else (message.error_message or "provider error")

    def build(tx: Transaction, current: Task, ctx: Context) -> dict[str, Any]:
        data: dict[str, Any] = {"attempt": attempt, "error": error}
        if message is not None and message.usage is not None:
            data["usage"] = msgspec.to_builtins(message.usage)
        tx.append_entry(cid, NewEntry(kind="pi.usage", data=data))
        turn = turn_doc(tx, cid)
        if turn is not None:
            if "message" in turn:
                del turn["message"]
            turn["generation"] = {
                "stage": "retrying",
                "attempt": attempt,
                "retryAt": until,
                "lastError": error,
            }
        tx.emit_event(
            cid,
            {
                "type": "generation.retrying",
                "taskId": task.id,
                "attempt": attempt,
                "retryAt": until,
                "error": error,
            },
        )
        kept = {k: v for k, v in state.items() if k not in (*_PHASE_KEYS, "offered")}
        return {**kept, "phase": "retrying", "untilMs": until, "lastError": error}

    return build


async def _retrying(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
    state: dict[str, Any] = dict(task.checkpoint or {})
    await rt.sleep(state["untilMs"], ctx)
    cid = task.conversation_id

    def build(tx: Transaction, current: Task, ctx: Context) -> dict[str, Any]:
        turn = turn_doc(tx, cid)
        if turn is not None:
            if "message" in turn:
                del turn["message"]
            turn["generation"] = {"stage": "preparing"}
        prep = {k: v for k, v in state.items() if k not in ("untilMs", "lastError")}
        return {**prep, "phase": "prepared"}

    return Next(build)


# -- closures ------------------------------------------------------------------------------------
def _failure_closure(
    task: TaskInfo, now: int, reason: str, detail: str, message: AssistantMessage | None
) -> Callable[[Transaction, Task, Context], Awaitable[Completion]]:
    """Settle a failed model call: a display-only entry (when there is a message), inputs
    ``unanswered/failed``, ``turn.ended``, the final boundary and a successor for triggers."""
    cid = task.conversation_id
    inputs = list(task.input["inputs"])

    async def close(tx: Transaction, current: Task, ctx: Context) -> Completion:
        head = await newest_head(tx, cid)
        failure: dict[str, Any] = {"reason": reason, "detail": detail}
        event: dict[str, Any] = {
            "type": "generation.failed",
            "taskId": task.id,
            "reason": reason,
            "detail": detail,
        }
        if message is not None:
            checkpoint = current.checkpoint if isinstance(current.checkpoint, dict) else {}
            data = {
                "attempt": checkpoint.get("attempt", 0),
                "display": assistant_json(message),
                "reason": "error",
            }
            entry = tx.append_entry(cid, NewEntry(kind="pi.assistant", data=data))
            failure["assistant"] = entry.id
            event["entry"] = entry.id
        tx.emit_event(cid, event)
        await end_turn(tx, cid, inputs, head=head, now=now, reason="failed", detail=detail)
        return Completion.failed(failure)

    return close


def _assistant_entry(tx: Transaction, cid: int, message: AssistantMessage, attempt: int) -> int:
    entry = tx.append_entry(
        cid,
        NewEntry(kind="pi.assistant", model=[assistant_json(message)], data={"attempt": attempt}),
    )
    return entry.id


def _tool_calls_closure(
    task: TaskInfo,
    now: int,
    message: AssistantMessage,
    calls: list[ToolCall],
    state: dict[str, Any],
) -> Callable[[Transaction, Task, Context], Awaitable[Completion]]:
    cid = task.conversation_id
    inputs = list(task.input["inputs"])
    offered = list(state.get("offered", []))

    async def close(tx: Transaction, current: Task, ctx: Context) -> Completion:
        through = await threshold_through(tx, cid, message)
        assistant = _assistant_entry(tx, cid, message, state["attempt"])
        tools: list[int] = []
        slots: list[dict[str, Any]] = []
        for index, call in enumerate(calls):
            call_json = msgspec.to_builtins(call)
            tool_input = {
                "assistant": assistant,
                "call": call_json,
                "offered": offered,
                "index": index,
            }
            tools.append(tx.create_task(TOOL, tool_input))
            slots.append(
                {
                    "callId": call.id,
                    "name": call.name,
                    "args": copy_json(call.arguments),
                    "status": "pending",
                }
            )
        post_input = {"inputs": inputs, "assistant": assistant, "tools": tools}
        post = tx.create_task(POST_TOOLS, post_input, after=tools)
        tx.document("sticky", cid)["turn"] = {"inputs": inputs, "tools": slots}
        tx.emit_event(
            cid,
            {
                "type": "generation.completed",
                "taskId": task.id,
                "entry": assistant,
                "toolCalls": len(calls),
            },
        )
        if through is not None:
            start_collapse(tx, cid, "threshold", through)
        return Completion.completed({"assistant": assistant, "tools": tools, "postTools": post})

    return close


def _final_closure(
    task: TaskInfo,
    now: int,
    message: AssistantMessage,
    state: dict[str, Any],
    continuation: str | None,
) -> Callable[[Transaction, Task, Context], Awaitable[Completion]]:
    cid = task.conversation_id
    inputs = list(task.input["inputs"])

    async def close(tx: Transaction, current: Task, ctx: Context) -> Completion:
        through = await threshold_through(tx, cid, message)
        head = await newest_head(tx, cid)
        assistant = _assistant_entry(tx, cid, message, state["attempt"])
        tx.emit_event(
            cid,
            {"type": "generation.completed", "taskId": task.id, "entry": assistant, "toolCalls": 0},
        )
        if through is not None:
            start_collapse(tx, cid, "threshold", through)
        result: dict[str, Any] = {"assistant": assistant, "tools": []}
        placed = await boundary(tx, cid, "final", head, now)
        if continuation is not None and not placed.triggers and not placed.terminated:
            # yield continuation: placed writes land first, then the continuation
            tx.append_entry(
                cid,
                NewEntry(
                    kind="pi.user",
                    model=[user_message(continuation, now)],
                    data={"continuation": True, "from": assistant},
                ),
            )
            result["successor"] = start_model_call(tx, cid, inputs, new_turn=False)
            return Completion.completed(result)
        successor = await end_turn(
            tx, cid, inputs, head=placed.head, now=now, answer=assistant, placed=placed
        )
        if successor is not None:
            result["successor"] = successor
        return Completion.completed(result)

    return close


# -- abort and faults ------------------------------------------------------------------------------
async def _abort(task: TaskInfo, rt: Runtime, ctx: Context) -> AbortClosure:
    cid = task.conversation_id
    inputs = list(task.input["inputs"])
    if isinstance(task.checkpoint, dict) and task.checkpoint.get("phase") == "deferred":
        await _cancel_deferred(rt, task.checkpoint, ctx)

    now = rt.now()

    async def close(tx: Transaction, current: Task, ctx: Context) -> Any:
        # The answer as far as it streamed, or an empty one: either way the transcript keeps
        # a mark that the answer was interrupted (every client, and after a restart).
        turn = turn_doc(tx, cid)
        checkpoint = current.checkpoint if isinstance(current.checkpoint, dict) else {}
        shown: dict[str, Any] = {"role": "assistant", "content": [], "timestamp": now}
        if turn is not None and "message" in turn:
            shown = turn["message"].to_plain()
        elif isinstance(checkpoint.get("model"), dict):
            model = checkpoint["model"]
            shown["provider"] = str(model.get("provider") or "")
            shown["model"] = str(model.get("modelId") or model.get("id") or "")
        result: dict[str, Any] = {
            "assistant": append_interrupted(tx, cid, shown, checkpoint.get("attempt", 0))
        }
        await settle(tx, cid, inputs, "aborted", None)
        return result

    return close


MODEL_CALL_KIND: TaskKind = define_task(
    MODEL_CALL,
    initial=_initial,
    phases={
        "prepared": _prepared,
        "requesting": _requesting,
        "retrying": _retrying,
        "deferred": _deferred,
    },
    abort=_abort,
    inflight=("requesting",),
    turn=True,
    core=True,
    fault=settle_fault,
)
"""The model call kind, durable name ``pi.generation`` (registered by every :class:`~pico3.Harness`)."""
