"""``"type": "agent"`` hooks: a read-only subagent investigates, then answers ``{"ok", "reason"}``.

Claude Code's agent hooks take the fields of a prompt hook (``prompt`` with ``$ARGUMENTS``,
``model``, ``timeout``, default 60 s) and run on the same events (:data:`~.settings.PROMPT_EVENTS`),
but instead of one answer a subagent gets the prompt and may look before it decides, with Read,
Grep and Glob, for up to :data:`MAX_TURNS` (50) turns. Its last answer is read as a prompt hook's
(:func:`~.prompt_hooks.read_answer`), and so is everything else: ``ok: false`` blocks as exit 2
does, and an error, a timeout or an answer that is not that JSON gives no verdict and is logged
(:func:`~.prompt_hooks.verdict_run`).

**How it runs.** The subagents feature offers no service that runs a subagent for another
feature (features never import each other), so this one runs it as that feature does, with
pico3's public API: a background task of kind :data:`HOOK_AGENT_KIND` in the root conversation
creates an owned conversation (:func:`pico3.create_owned`) whose model is the hook's
(:func:`~.prompt_hooks.hook_model`: its ``model``, else the provider's fast model or the
session's), whose tools are ours for Read, Grep and Glob (``read``, ``grep``, ``find``) and whose system prompt is
:data:`AGENT_SYSTEM`, sends it the prompt and completes with its last answer. The hook waits
for the task, at most its ``timeout``; a hook that gives up (a timeout, the call aborted)
aborts the task. Its owned conversation is in the session like a subagent's (``/tree`` lists
it). A run resumed after the worker died ends at once (no hook waits for its answer: the hook
runs again, with a run of its own), so a restart never spends a model call on it.

**Safety.** The task's input names ``permissionMode: plan`` (the approval feature reads it up
the owner chain, as for a subagent's ``permissionMode``), so even a tool outside the three could
change nothing; and the session's hooks do not run for the hook agent's own calls and its stop
(:class:`~.agent_hooks.AgentHooks` leaves its conversation out), so an agent hook on ``Read``
cannot call itself.

**Limits.** Its ``timeout`` (default 60 s) bounds the whole run, and its turns are counted
(:class:`HookAgents`, on ``after_response``): a 50th answer that still calls tools ends the
run, which then gives no verdict ("it did not decide within 50 turns").
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import anyio

from chord import BACKGROUND, Context
from pico3 import (
    CLAUDE_CODE_TOOLS,
    MODEL_CALL_KIND,
    Completion,
    Done,
    HarnessServiceApi,
    Next,
    OwnedConversation,
    Runtime,
    TaskInfo,
    TaskKind,
    Transaction,
    assistant_text,
    create_owned,
    define_task,
)

from .agent_hooks import HOOK_AGENT_KIND
from .prompt_hooks import hook_model, prompt_for, verdict_run
from .protocol import HookRun
from .settings import HookSpec

__all__ = [
    "AGENT_SYSTEM",
    "AGENT_TOOLS",
    "HOOK_AGENT_KIND",
    "MAX_TURNS",
    "HookAgents",
    "ask_agent",
    "hook_agent_kind",
]

AGENT_TOOLS = ("Read", "Grep", "Glob")
"""Claude Code's tools an agent hook's subagent gets (ours: ``CLAUDE_CODE_TOOLS``)."""

AGENT_SYSTEM = (
    "You verify one event of a coding agent for a hook its user configured. Read the user's "
    "instructions and the event's JSON; you may read, search and list files to check what they "
    "ask (you cannot change anything). When you have decided, answer with only a JSON object, "
    'nothing else: {"ok": true} when the agent may go on, or {"ok": false, "reason": "<why, '
    'for the agent to read>"} when it must not.'
)
"""The system prompt of an agent hook's subagent."""

MAX_TURNS = 50
"""The model turns an agent hook's subagent may take (Claude Code's)."""

ORPHANED = "no hook waits for it any more (the worker restarted); the hook runs again"
"""Why a run whose hook's worker died ends at once when it is resumed."""

PLAN_MODE = "plan"
"""The mode its conversation runs in (the approval feature's ``OWNER_MODE_KEY``)."""


def _calls_tools(message: Any) -> bool:
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "toolCall"
        for b in content  # pyright: ignore[reportUnknownVariableType]
    )


class HookAgents:
    """The :data:`HOOK_AGENT_KIND` task kind and its turn count: :meth:`install` registers
    both; the kind's running phase follows its conversation here while it waits, and an
    ``after_response`` hook counts that conversation's answers, ending the wait at the
    :data:`MAX_TURNS`-th that still calls tools."""

    def __init__(self, max_turns: int = MAX_TURNS) -> None:
        self.max_turns = max_turns
        self._turns: dict[int, int] = {}
        self._over: dict[int, anyio.Event] = {}
        self.waiting: set[str] = set()
        """The ``waiter`` tokens of the runs a hook of this process waits for."""
        self.kind = hook_agent_kind(self)

    def follow(self, conversation_id: int) -> anyio.Event:
        """Count ``conversation_id``'s turns; the event is set when it reaches the limit."""
        self._turns[conversation_id] = 0
        return self._over.setdefault(conversation_id, anyio.Event())

    def forget(self, conversation_id: int) -> None:
        self._turns.pop(conversation_id, None)
        self._over.pop(conversation_id, None)

    async def after_response(self, message: Any, api: Any, ctx: Context) -> None:
        cid = api.conversation_id
        if cid not in self._turns:
            return
        self._turns[cid] += 1
        if self._turns[cid] >= self.max_turns and _calls_tools(message):
            self._over[cid].set()

    def install(self, h: Any, ns: Any) -> Callable[[], None]:
        """Register the kind and the turn count on the harness ``h`` (namespace ``ns``)."""
        undo = [h.register_task_kind(self.kind)]
        try:
            undo.append(h.hooks(ns, MODEL_CALL_KIND, {"after_response": self.after_response}))
        except BaseException:
            undo[0]()
            raise

        def uninstall() -> None:
            for fn in reversed(undo):
                fn()

        return uninstall


def hook_agent_kind(agents: HookAgents) -> TaskKind:
    """The :data:`HOOK_AGENT_KIND` task kind (input: ``{"prompt", "model", "tools",
    "permissionMode", "hook"}``): create the owned conversation atomically with the checkpoint
    that names it, send the prompt (request id ``<task>:prompt``, so a resend after a restart
    is the same input), and complete with ``{"text": <its last answer>}``; fail when the
    subagent reaches ``agents.max_turns`` still calling tools (its turn is aborted)."""

    def orphan(task: TaskInfo) -> Done | None:
        """A run no hook waits for any more (the worker that started it died): it ends at
        once, without a model call, since nothing would read its answer."""
        if task.input.get("waiter") in agents.waiting:
            return None
        return Done(lambda _tx, _cur, _c: Completion.failed({"reason": ORPHANED}))

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
        inp: dict[str, Any] = task.input
        if (ended := orphan(task)) is not None:
            return ended
        spec = {
            "rewindable": {"model": inp["model"], "selectedTools": list(inp["tools"])},
            "sections": [{"key": "hook-agent", "value": inp["hook"], "rendered": AGENT_SYSTEM}],
        }

        async def create(tx: Transaction, current: Any, _ctx: Context) -> dict[str, Any]:
            return {"phase": "running", "child": await create_owned(tx, current, spec)}

        return Next(create)

    async def running(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
        assert task.checkpoint is not None
        if (ended := orphan(task)) is not None:
            return ended
        cid: int = task.checkpoint["child"]
        child = OwnedConversation(rt, cid)
        over = agents.follow(cid)
        records: list[Any] = []

        async def stop_at_limit() -> None:
            await over.wait()
            await child.abort(ctx)

        try:
            sent = await child.send(task.input["prompt"], ctx, request_id=f"{task.id}:prompt")
            async with anyio.create_task_group() as group:
                group.start_soon(stop_at_limit)
                records.append(await sent.wait(ctx))
                group.cancel_scope.cancel()
        finally:
            agents.forget(cid)
        record = records[0]
        answer = getattr(record, "answer", None)
        if over.is_set():
            limit = f"it did not decide within {agents.max_turns} turns"
            return Done(lambda _tx, _cur, _c: Completion.failed({"reason": limit}))
        if record.status == "done" and type(answer) is int:

            async def complete(tx: Transaction, _current: Any, _ctx: Context) -> Completion:
                last = await tx.entry(answer)
                return Completion.completed({"text": assistant_text(last) if last else ""})

            return Done(complete)
        reason = str(getattr(record, "reason", None) or record.status)
        return Done(lambda _tx, _cur, _c: Completion.failed({"reason": reason}))

    async def abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
        return lambda tx, current, ctx: None

    def describe(task: TaskInfo) -> dict[str, str]:
        inp = task.input if isinstance(task.input, dict) else {}
        return {"label": str(inp.get("hook", "")), "progress": "investigating"}

    return define_task(
        HOOK_AGENT_KIND,
        initial=initial,
        phases={"running": running},
        abort=abort,
        describe=describe,
    )


async def _investigate(
    harness: HarnessServiceApi,
    agents: HookAgents,
    hook: HookSpec,
    prompt: str,
    warn: Callable[[str], None],
    ctx: Context,
) -> str:
    """The subagent's last answer; raises ``RuntimeError`` naming why there is none."""
    model, resolved = await hook_model(harness, hook, warn)
    if resolved is None:
        raise RuntimeError("the session has no model to ask")
    registry: Any = harness.harness.tools
    tools = [CLAUDE_CODE_TOOLS[n] for n in AGENT_TOOLS if CLAUDE_CODE_TOOLS[n] in registry]
    task_input = {
        "prompt": prompt,
        "model": model,
        "tools": tools,
        "permissionMode": PLAN_MODE,
        "hook": hook.label,
        "waiter": uuid.uuid4().hex,
    }
    root = await harness.harness.root(ctx)

    def start(tx: Any, _ctx: Context) -> int:
        return tx.create_task(agents.kind, task_input, background=True)

    agents.waiting.add(task_input["waiter"])
    try:
        task_id: int = await root.commit(start, ctx)
        ended = False
        try:
            task = await harness.harness.wait_for_task(task_id, ctx)
            ended = True
        finally:
            if not ended:  # the hook gave up (its timeout, the call aborted): so does its agent
                with anyio.CancelScope(shield=True):
                    await harness.harness.abort_task(task_id, BACKGROUND)
    finally:
        agents.waiting.discard(task_input["waiter"])
    outcome: Any = task.outcome if isinstance(task.outcome, dict) else {}
    if outcome.get("status") == "completed":
        return str((outcome.get("result") or {}).get("text") or "")
    failure = outcome.get("failure") or outcome.get("error") or outcome.get("status")
    if isinstance(failure, dict) and failure.get("reason"):  # pyright: ignore[reportUnknownMemberType]
        failure = failure["reason"]
    raise RuntimeError(f"its subagent did not finish: {failure}")


async def ask_agent(
    harness: HarnessServiceApi,
    agents: HookAgents,
    hook: HookSpec,
    payload: dict[str, Any],
    ctx: Context,
    warn: Callable[[str], None],
) -> HookRun:
    """Run the agent hook ``hook`` on the event ``payload`` (module docstring) with the task
    kind of ``agents`` (registered): a :class:`HookRun` as a prompt hook's."""
    prompt = prompt_for(hook.command, payload)
    return await verdict_run(
        hook, ctx, lambda: _investigate(harness, agents, hook, prompt, warn, ctx)
    )
