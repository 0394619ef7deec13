"""``pi.tool``: run one tool call, with its ``started`` checkpoint as effect evidence
(docs/design/turn.md#tool).

Input ``{assistant, call, offered, index}``; the task's slot is ``sticky.turn.tools[index]``.

Before anything can have happened (no checkpoint), the call is checked in order and any failure
becomes a *synthetic error result* — a model-visible ``pi.tool_result`` with ``isError`` — never
a fault:

1. not in ``offered`` (the request's tools) → "not offered" (the registry is not consulted);
2. not registered → "missing tool";
3. arguments invalid against the schema → "invalid arguments";
4. a call that needs approval (not declared ``replay="safe"``) with no live approval
   authority → "blocked: <the gate's reason>" (code ``unapproved``,
   docs/design/harness.md#approval-gate);
5. ``before_tool`` hooks: a block, a raise or a changed call identity → "blocked: …";
6. the final (possibly rewritten) arguments are validated again;
7. a call that needs approval runs only if a live authority ran in the chain and did not
   block it (it may have been retired meanwhile) → else "blocked" as in 4.

Then one commit writes ``started{replay, call}``, ``status = running``, clears ``waitingOn`` and
emits ``tool.started``. That commit is the evidence that the effect may have begun: after a
crash in ``started`` the hooks never run again, and the tool is re-invoked with the persisted
call **only** when both the persisted and the current declaration say ``replay: "safe"`` and the
persisted arguments still validate; anything else ends as an "interrupted" error result, which
says the call started and may have had partial effects — written by the declaration's
``interrupted`` callback when it has one (it sees the interrupted run's memos, so it can clean
up and tell what it knows), else :data:`INTERRUPTED`. A crash before ``started`` simply runs
the checks, hooks and tool again.

The tool's output goes through :class:`~pico3.tools.ToolApi` (bounded stream buffer, flushed to
``slot.output``), then ``after_tool`` hooks may replace the result, then the closure bounds the
content (lines first, then bytes; head or tail), appends the result entry, marks the slot
``done``/``error`` and deletes its memos (docs/design/decisions.md#d8-g10) in one commit.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

from chord.context import Context
from chord.json import JsonError, copy_json
from pico3.approval import ApprovalGate, needs_approval
from pico3.kernel.tx import Transaction
from pico3.owned import create_owned_conversation
from pico3.session_data.entries import NewEntry
from pico3.storage.records import Task
from pico3.tasks.kinds import AbortClosure, Completion, Done, Step, TaskInfo, TaskKind, define_task
from pico3.tasks.runtime import Runtime
from pico3.tools import (
    InvalidArguments,
    OutputBounds,
    OutputBuffer,
    RuntimeTools,
    SlotCommit,
    ToolApi,
    ToolDeclaration,
    ToolRegistry,
    ToolResult,
)
from pico3.tools.claude_code import CLAUDE_CODE_TOOLS
from pico3.turn.hook_points import runner
from pico3.turn.state import TOOL

__all__ = ["INTERRUPTED", "TOOL_KIND", "bound_content", "tool_slot"]

INTERRUPTED = (
    "Tool call interrupted by a restart after it had started: it may have had partial effects. "
    "It is not repeated automatically; check its effects before calling it again."
)
"""The result of an interrupted ``"unsafe"`` call whose tool has no ``interrupted`` callback."""


def tool_slot(tx: Transaction, task: TaskInfo) -> MutableMapping[str, Any]:
    """The tracked slot of a tool task: ``sticky.turn.tools[index]`` (checked by call id)."""
    sticky = tx.document("sticky", task.conversation_id)
    index = task.input["index"]
    call_id = task.input["call"]["id"]
    turn = sticky.get("turn")
    tools = None if turn is None else turn.get("tools")
    if tools is None or index >= len(tools) or tools[index].get("callId") != call_id:
        raise LookupError(f"tool slot {index} ({call_id}) is not in sticky.turn.tools")
    return tools[index]


def _registry(rt: Runtime) -> ToolRegistry | None:
    return getattr(getattr(rt, "harness", None), "tools", None)


def _declaration(rt: Runtime, name: str) -> ToolDeclaration | None:
    registry = _registry(rt)
    found = registry.get(name) if registry is not None else None
    return found if isinstance(found, ToolDeclaration) else None


def _slot_commit(rt: Runtime, task: TaskInfo) -> SlotCommit:
    async def commit(
        fn: Callable[[Transaction, MutableMapping[str, Any]], Any], ctx: Context
    ) -> Any:
        return await rt.commit(lambda tx, _current, _ctx: fn(tx, tool_slot(tx, task)), ctx)

    return commit


def _not_offered(name: str, offered: Sequence[str]) -> str:
    """The model's answer to a call of a tool it was not offered; for Claude Code's name of an
    offered tool (``Task``, ``Read``: what published commands, agents and skills tell it to
    call), which tool to call instead."""
    ours = CLAUDE_CODE_TOOLS.get(name)
    if ours is not None and ours in offered:
        return (
            f"Tool {name!r} was not offered to the model. Claude Code's {name} is the {ours!r} "
            f"tool here: call {ours!r} instead, with the parameters its definition names."
        )
    return f"Tool {name!r} was not offered to the model."


# -- the normal path ---------------------------------------------------------------------------
async def _initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
    call: dict[str, Any] = dict(task.input["call"])
    name = call.get("name", "")
    if name not in task.input["offered"]:
        return _synthetic(task, rt, _not_offered(name, task.input["offered"]), "not_offered")
    declaration = _declaration(rt, name)
    if declaration is None:
        return _synthetic(task, rt, f"Tool {name!r} is not available (missing tool).", "missing")
    problem = _invalid(declaration, call.get("arguments"))
    if problem is not None:
        return _synthetic(task, rt, problem, "invalid")
    gate = _gate(rt) if needs_approval(declaration) else None
    if gate is not None and not gate.live():  # nobody can approve: block before any hook
        return _unapproved(task, rt, gate, call)
    hooks = runner(rt, TOOL, task.id, task.conversation_id)
    ruled: tuple[Any, ...] = ()
    if hooks is not None:
        outcome = await hooks.before_tool(call, _slot_commit(rt, task), ctx)
        if outcome.blocked:
            return _synthetic(task, rt, f"Tool call blocked: {outcome.block}", "blocked")
        call = outcome.call
        ruled = outcome.ruled
        problem = _invalid(declaration, call.get("arguments"))
        if problem is not None:
            return _synthetic(task, rt, problem, "invalid")
    if gate is not None and not gate.ruled(ruled):  # the authority left, or never ruled
        return _unapproved(task, rt, gate, call)
    started = {"phase": "started", "replay": declaration.replay, "call": copy_json(call)}

    def start(tx: Transaction, current: Task, ctx: Context) -> None:
        tx.checkpoint(started)
        slot = tool_slot(tx, task)
        slot["status"] = "running"
        if "waitingOn" in slot:
            del slot["waitingOn"]
        tx.emit_event(
            task.conversation_id,
            {"type": "tool.started", "taskId": task.id, "callId": call["id"], "name": name},
        )

    await rt.commit(start, ctx)
    return await _invoke(task, rt, declaration, call, ctx)


def _gate(rt: Any) -> ApprovalGate | None:
    """The harness's approval gate when it is on (docs/design/harness.md#approval-gate). A
    runtime with a tool registry but no gate (not a :class:`~pico3.Harness`) gets a closed one."""
    gate = getattr(getattr(rt, "harness", None), "approval", None)
    if not isinstance(gate, ApprovalGate):
        return ApprovalGate()
    return gate if gate.required else None


def _unapproved(task: Any, rt: Any, gate: ApprovalGate, call: dict[str, Any]) -> Done:
    """The block of a call that needs approval when no approval authority ruled on it."""
    reason = gate.reason({k: call.get(k) for k in ("id", "name", "arguments")})
    return _synthetic(task, rt, f"Tool call blocked: {reason}", "unapproved")


def _invalid(declaration: ToolDeclaration, arguments: Any) -> str | None:
    """The model-visible message of :class:`~pico3.tools.InvalidArguments`, or ``None``."""
    try:
        declaration.validate(arguments)
    except InvalidArguments as exc:
        return str(exc)
    return None


async def _started(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
    """Recovery after a crash in ``started``: replay only when it is safe."""
    checkpoint = task.checkpoint
    assert checkpoint is not None  # the started phase runs from its checkpoint
    call = dict(checkpoint["call"])
    declaration = _declaration(rt, call.get("name", ""))
    if declaration is None:
        return _synthetic(task, rt, "Tool unavailable after restart.", "unavailable")
    if checkpoint.get("replay") != "safe" or declaration.replay != "safe":
        if declaration.interrupted is not None:
            return await _report_interrupted(task, rt, declaration, call, ctx)
        return _synthetic(task, rt, INTERRUPTED, "interrupted")
    if _invalid(declaration, call.get("arguments")) is not None:
        return _synthetic(
            task, rt, "Tool call interrupted: its arguments no longer fit the tool.", "interrupted"
        )
    return await _invoke(task, rt, declaration, call, ctx)


async def _report_interrupted(
    task: TaskInfo, rt: Runtime, declaration: ToolDeclaration, call: dict[str, Any], ctx: Context
) -> Step:
    """The declaration's ``interrupted`` callback closes the call (as an error); if it fails,
    the generic :data:`INTERRUPTED` result does, naming the failure."""
    assert declaration.interrupted is not None
    api = _api(task, rt, declaration, call)
    try:
        result = await declaration.interrupted(copy_json(call.get("arguments", {})), api, ctx)
        if not isinstance(result, ToolResult):
            raise TypeError(f"interrupted returned {type(result).__name__}, not a ToolResult")
    except Exception as raised:
        if ctx.cancelled:
            raise
        exc = _unwrap(raised)
        text = f"{INTERRUPTED} (Its clean-up failed: {type(exc).__name__}: {exc})"
        return _synthetic(task, rt, text, "interrupted")
    closure = _result_closure(
        task, rt, call, result, declaration.output, code="interrupted", writes=api.result_writes
    )
    return Done(closure)


def _api(
    task: TaskInfo, rt: Runtime, declaration: ToolDeclaration, call: dict[str, Any]
) -> ToolApi:
    return ToolApi(
        task_id=task.id,
        conversation_id=task.conversation_id,
        call_id=call["id"],
        slot=_slot_commit(rt, task),
        runtime=RuntimeTools(rt, owned=create_owned_conversation),
        bounds=declaration.output,
    )


async def _invoke(
    task: TaskInfo, rt: Runtime, declaration: ToolDeclaration, call: dict[str, Any], ctx: Context
) -> Step:
    api = _api(task, rt, declaration, call)
    arguments = copy_json(call.get("arguments", {}))
    try:
        async with api.streaming(ctx):
            result = await declaration.execute(arguments, api, ctx)
        if not isinstance(result, ToolResult):
            raise TypeError(f"execute returned {type(result).__name__}, not a ToolResult")
    except Exception as raised:
        if ctx.cancelled:
            raise
        exc = _unwrap(raised)
        result = ToolResult(
            content=[{"type": "text", "text": f"Tool threw: {type(exc).__name__}: {exc}"}],
            is_error=True,
            diagnostics=[{"severity": "error", "message": str(exc), "code": "threw"}],
        )
    dropped: dict[str, int] | None = None
    if result.content is None and api.streamed:
        diagnostics = list(result.diagnostics or [])
        if api.buffer.truncated:
            diagnostics.append(_truncation_diagnostic(api.buffer))
            dropped = {"bytes": api.buffer.dropped_bytes, "lines": api.buffer.dropped_lines}
        result = ToolResult(
            content=[{"type": "text", "text": api.buffer.text()}],
            is_error=result.is_error,
            details=result.details,
            diagnostics=diagnostics or None,
            control=result.control,
        )
    hooks = runner(rt, TOOL, task.id, task.conversation_id)
    if hooks is not None:
        result = await hooks.after_tool(call, result, ctx)
    closure = _result_closure(
        task, rt, call, result, declaration.output, dropped=dropped, writes=api.result_writes
    )
    return Done(closure)


def _unwrap(exc: BaseException) -> BaseException:
    """The single error inside task-group wrappers (the stream flusher runs in one)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _truncation_diagnostic(buffer: OutputBuffer) -> dict[str, Any]:
    return {
        "severity": "warning",
        "message": f"output truncated: {buffer.dropped_bytes} bytes "
        f"({buffer.dropped_lines} lines) dropped",
        "code": "truncated",
    }


def bound_content(
    content: list[dict[str, Any]], bounds: OutputBounds
) -> tuple[list[dict[str, Any]], dict[str, int] | None]:
    """Bound the text of a result (lines first, then bytes; head or tail). Images pass
    through. Returns the bounded content and ``{bytes, lines}`` dropped, or ``None``."""
    texts = [block.get("text", "") for block in content if block.get("type") == "text"]
    if not texts:
        return content, None
    buffer = OutputBuffer(bounds)
    buffer.push("\n".join(texts))
    if not buffer.truncated:
        return content, None
    others = [block for block in content if block.get("type") != "text"]
    bounded = [{"type": "text", "text": buffer.text()}, *others]
    return bounded, {"bytes": buffer.dropped_bytes, "lines": buffer.dropped_lines}


def _message_content(
    content: list[dict[str, Any]], diagnostics: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """docs/design/decisions.md#d8-g11: diagnostics become a trailing ``<harness>`` text block of the model message."""
    if not diagnostics:
        return content
    lines = [f"[{d.get('severity', 'info')}] {d.get('message', '')}" for d in diagnostics]
    return [*content, {"type": "text", "text": "<harness>\n" + "\n".join(lines) + "\n</harness>"}]


def _result_closure(
    task: TaskInfo,
    rt: Runtime,
    call: dict[str, Any],
    result: ToolResult,
    bounds: OutputBounds,
    *,
    code: str | None = None,
    dropped: dict[str, int] | None = None,
    writes: Sequence[Callable[[Transaction], None]] = (),
):
    cid = task.conversation_id
    now = rt.now()

    def close(tx: Transaction, current: Task, ctx: Context) -> Completion:
        for build in writes:  # ToolApi.with_result: durable with the result, no commit of its own
            build(tx)
        content = result.content or [{"type": "text", "text": ""}]
        if code == "interrupted":  # a restart cut the call short: keep what it had printed
            content = _with_partial_output(content, _slot_output(tx, task))
        try:
            content = copy_json(content, ("result", "content"))
        except JsonError as exc:
            content = [{"type": "text", "text": f"Tool returned invalid content: {exc}"}]
        content, truncated = bound_content(content, bounds)
        if truncated is None:
            truncated = dropped
        diagnostics = list(result.diagnostics or [])
        if code is not None and not diagnostics:
            diagnostics.append({"severity": "error", "message": content[0]["text"], "code": code})
        data: dict[str, Any] = {}
        if result.details is not None:
            data["details"] = result.details
        if diagnostics:
            data["diagnostics"] = diagnostics
        if result.control:
            data["control"] = result.control
        if truncated is not None:
            data["truncated"] = truncated
        message = {
            "role": "toolResult",
            "toolCallId": call["id"],
            "toolName": call.get("name", ""),
            "content": _message_content(content, diagnostics if code is None else None),
            "isError": bool(result.is_error or code is not None),
            "timestamp": now,
        }
        entry = tx.append_entry(
            cid, NewEntry(kind="pi.tool_result", model=[message], data=data or None)
        )
        slot = tool_slot(tx, task)
        slot["status"] = "error" if message["isError"] else "done"
        slot["entry"] = entry.id
        for key in ("waitingOn", "memos"):
            if key in slot:
                del slot[key]
        event: dict[str, Any] = {
            "type": "tool.finished",
            "taskId": task.id,
            "callId": call["id"],
            "entry": entry.id,
            "isError": message["isError"],
        }
        if result.control:
            event["control"] = copy_json(result.control)
        tx.emit_event(cid, event)
        if truncated is not None:
            tx.emit_event(
                cid,
                {
                    "type": "warning",
                    "source": "tool",
                    "message": f"{call.get('name')} output truncated ({truncated['bytes']} bytes)",
                },
            )
        outcome: dict[str, Any] = {"entry": entry.id}
        if result.control:
            outcome["control"] = copy_json(result.control)
        return Completion.completed(outcome)

    return close


def _synthetic(task: TaskInfo, rt: Runtime, text: str, code: str) -> Done:
    call = dict(task.input["call"])
    result = ToolResult.text(text, is_error=True)
    return Done(_result_closure(task, rt, call, result, OutputBounds(), code=code))


def _slot_output(tx: Transaction, task: TaskInfo) -> str:
    """The output the call had streamed into its slot (``""``: none, or no slot)."""
    try:
        output = tool_slot(tx, task).get("output")
    except LookupError:
        return ""
    return output if isinstance(output, str) else ""


def _with_partial_output(content: list[dict[str, Any]], partial: str) -> list[dict[str, Any]]:
    """``content`` with the streamed ``partial`` output appended (an abort or a restart cut
    the call short: what it printed is kept for the model and the user)."""
    if not partial.strip():
        return content
    return [*content, {"type": "text", "text": f"Output before it stopped:\n{partial}"}]


# -- abort -----------------------------------------------------------------------------------------
async def _abort(task: TaskInfo, rt: Runtime, ctx: Context) -> AbortClosure:
    """Mark the live foreground tasks of the conversations this call owns (their queues stay),
    then close with an aborted result."""
    cid = task.conversation_id
    call = dict(task.input["call"])
    now = rt.now()
    owned: list[int] = list(task.owns)

    def live(tx: Transaction, current: Task, ctx: Context) -> list[int]:
        out: list[int] = []
        for child in current.owns or owned:
            out.extend(t.id for t in tx.live_tasks(child) if t.background is not True)
        return out

    if owned:
        for child_task in await rt.commit(live, ctx):
            await rt.abort_task(child_task, ctx)

    def close(tx: Transaction, current: Task, ctx: Context) -> Any:
        try:
            slot = tool_slot(tx, task)
        except LookupError:
            slot = None
        partial = slot.get("output") if slot is not None else None
        content = _with_partial_output(
            [{"type": "text", "text": "Tool call aborted."}],
            partial if isinstance(partial, str) else "",
        )
        message = {
            "role": "toolResult",
            "toolCallId": call["id"],
            "toolName": call.get("name", ""),
            "content": content,
            "isError": True,
            "timestamp": now,
        }
        entry = tx.append_entry(cid, NewEntry(kind="pi.tool_result", model=[message]))
        if slot is not None:
            slot["status"] = "aborted"
            slot["entry"] = entry.id
            for key in ("waitingOn", "memos"):
                if key in slot:
                    del slot[key]
        tx.emit_event(
            cid,
            {"type": "tool.aborted", "taskId": task.id, "callId": call["id"], "entry": entry.id},
        )
        return {"entry": entry.id}

    return close


TOOL_KIND: TaskKind = define_task(
    TOOL,
    initial=_initial,
    phases={"started": _started},
    abort=_abort,
    inflight=("started",),
    turn=True,
    core=True,
)
"""The ``pi.tool`` kind (registered by every :class:`~pico3.Harness`)."""
