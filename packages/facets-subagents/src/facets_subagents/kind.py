"""The ``subagents.run`` task kind: one subagent, durable across a worker's death.

Input: ``{description, prompt, agent, systemPrompt, model, tools}`` and optionally
``thinkingLevel``, ``maxTurns``, ``permissionMode``, ``allow`` (rules its prompt's turn may
use without asking: a forked command's ``allowed-tools``) (the agent definition is
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
    assistant_text,
    create_owned,
    define_task,
)

from .contract import ALLOW_KEY, MAX_TURNS_KEY, SUBAGENT_KIND, THINKING_KEY, SubagentStatus

__all__ = ["STOPPED_AT_LIMIT", "StepBoard", "subagent_kind"]


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
        self._over: dict[int, anyio.Event] = {}  # past its maxTurns: its task stops it

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

    def over_limit(self, conversation_id: int) -> None:
        """The subagent made a model call past its ``maxTurns``: its task stops it."""
        self._over.setdefault(conversation_id, anyio.Event()).set()

    async def wait_over_limit(self, conversation_id: int) -> None:
        await self._over.setdefault(conversation_id, anyio.Event()).wait()

    def forget_limit(self, conversation_id: int) -> None:
        self._over.pop(conversation_id, None)

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


STOPPED_AT_LIMIT = (
    "[The subagent stopped at its limit of {limit} turns (maxTurns) before it finished; the "
    "above is what it had.]"
)
"""Ends the report of a subagent its ``maxTurns`` stopped."""


def _calls_tools(entry: Any) -> bool:
    """True when an answer entry's assistant message calls tools (a turn ended by a
    ``terminate``, not by the model's final answer)."""
    for message in getattr(entry, "model", None) or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "toolCall" for b in content
        ):
            return True
    return False


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
        rewindable = {"model": inp["model"], "selectedTools": list(inp["tools"])}
        if isinstance(inp.get(THINKING_KEY), str):
            rewindable[THINKING_KEY] = inp[THINKING_KEY]
        spec = {
            "rewindable": rewindable,
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
        limit = task.input.get(MAX_TURNS_KEY)
        limit = limit if type(limit) is int and limit > 0 else None
        stopped: list[bool] = []

        async def stop_at_limit() -> None:
            # a model call past maxTurns (the limit's turn ran no tool: its calls were
            # blocked, so nothing ended the turn there): abort the child's turn
            await board.wait_over_limit(cid)
            stopped.append(True)
            await child.abort(ctx)

        try:
            allow = task.input.get(ALLOW_KEY)  # a forked command's allowed-tools
            sent = await child.send(
                task.input["prompt"], ctx, request_id=f"{task.id}:prompt",
                allow=allow if isinstance(allow, list) and allow else None,
            )  # fmt: skip
            records: list[Any] = []
            async with anyio.create_task_group() as group:
                group.start_soon(write_step, rt, cid, shown, ctx)
                if limit is not None:
                    group.start_soon(stop_at_limit)
                records.append(await sent.wait(ctx))
                group.cancel_scope.cancel()
            record = records[0]
        finally:
            board.stop(cid)
            board.forget_limit(cid)
        answer = getattr(record, "answer", None)
        if (record.status == "done" and type(answer) is int) or stopped:

            async def complete(tx: Transaction, _current: Any, _ctx: Context) -> Completion:
                # the report is read in the commit that completes the task: no read of its own
                turns = await tx.scan_entries(cid, limit=(limit or 0) + 1, kind="pi.assistant")
                last = await tx.entry(answer) if type(answer) is int else None
                report = assistant_text(last) if last is not None else ""
                if limit is not None and len(turns) >= limit and (stopped or _calls_tools(last)):
                    if not report:  # what it said last, if its last turn said nothing
                        report = next((t for t in map(assistant_text, turns) if t), "")
                    note = STOPPED_AT_LIMIT.format(limit=limit)
                    report = f"{report}\n\n{note}" if report else note
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
