"""``-p --max-turns N``: a headless run stops after ``N`` model turns, as Claude Code's does.

A *turn* is one model call of the run's conversation (Claude Code's agentic iteration: the model
answers, its tool calls run, their results go back for the next call). The limit is enforced in
the harness, by hooks a facet of the headless host registers (:class:`TurnLimit`), so it is exact
and the worker needs no new state:

* ``after_response`` (``pi.generation``) counts the conversation's model calls from the send on;
* ``after_tool`` (``pi.tool``): once the ``N``-th call's tools ran, their results end the turn
  (``control: {"terminate": true}``, the harness's own way to stop after a tool; the turn ends
  ``done`` with that call as its answer), so no ``N+1``-th call is made;
* a call past ``N`` (the ``N``-th call's tools were all blocked, so none of them ended the turn)
  has its tools blocked at ``before_tool`` and the run aborts the turn (:attr:`TurnLimit.over`).

Other conversations (a subagent's) are not counted: the limit is the run's, as in Claude Code.
The hooks live in the process that runs the session. A ``-p`` run without a worker of its own
is that process (:func:`coding_agent.cli.headless.run_headless` adds :meth:`TurnLimit.facet`);
``--server`` (a session on ``coding-agent serve``) and ``--wait-for-approval`` (a worker of its
own) are clients of a worker, so they send the prompt through the worker's
:data:`~coding_agent.contracts.TurnLimitService` (:func:`turn_limit_facet`): the worker installs
a :class:`TurnLimit` for that conversation, sends the input itself, and keeps the limit until
the conversation is idle again (the turn ended, however), aborting the turn at a call past the
limit as the local run does. The limit is that turn's alone: a later prompt in the session is
not limited, and a dropped connection does not lift it (the turn goes on, limited, and the
client reconnects).

**Durable with the turn.** A worker that restarts mid-turn (a crash, a failover to another
server) finishes the interrupted turn from storage, so the worker's limit is stored with it:
the session document's :data:`STORE_NAMESPACE` slice holds ``turns: {"<conversation>":
{"limit": N, "after": E}}`` from before the input is sent until the conversation is idle again
(``E`` is the conversation's newest entry before the send). A worker opening the session holds
dispatch (:meth:`pico3.Harness.hold`) until it has read that slice, so no recovered model call
or tool runs unlimited: each stored turn gets its :class:`TurnLimit` back, counting the answers
already made (the ``pi.assistant`` entries with a model message after ``E``), and the remainder
is enforced as before. A model call cut off by the crash has no answer and is not counted (it is
made again). This module is the slice's one owner; nothing else reads or writes it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace
from typing import Any

import anyio
import anyio.abc

from chord import BACKGROUND, Context, Facet, FacetEnvironment, RemoteServiceError, define_facet
from coding_agent.contracts import TurnLimitService
from pico3 import (
    MODEL_CALL_KIND,
    TOOL_KIND,
    ConversationHandle,
    Harness,
    HarnessService,
    HarnessServiceApi,
    Namespace,
    ToolResult,
)

__all__ = ["NAMESPACE", "STORE_NAMESPACE", "TurnLimit", "turn_limit_facet"]

NAMESPACE = "coding-agent-max-turns"
"""The harness namespace of the limit's hooks (process state only: nothing is stored)."""

STORE_NAMESPACE = "coding-agent-turn-limit"
"""The namespace whose session slice holds the worker's limited turns in progress
(``{"turns": {"<conversation>": {"limit": N, "after": E}}}``, module docstring)."""

_ANSWER_KIND = "pi.assistant"
"""The entry kind of a model call's answer (one per call that answered)."""


class TurnLimit:
    """``--max-turns``: stop :attr:`conversation`'s turn after :attr:`limit` model calls.

    :attr:`conversation` is set by the run before it sends the prompt (``None``: nothing is
    counted). :attr:`turns` is the model calls counted, :attr:`stopped` whether the limit ended
    the turn (the model still calling tools), and :attr:`over` is set at a call past the limit:
    the run then aborts the turn."""

    def __init__(self, limit: int, namespace: str = NAMESPACE) -> None:
        if limit < 1:
            raise ValueError(f"--max-turns must be a whole number of 1 or more, got {limit}")
        self.limit = limit
        self.namespace = namespace
        """The harness namespace of the hooks (one per limit installed at once)."""
        self.conversation: int | None = None
        self.turns = 0
        self.stopped = False
        self.over = anyio.Event()

    def reset(self) -> None:
        """Count from zero again: the next prompt of a stream-json run is a run of its own, as
        each query is to Claude Code (:mod:`coding_agent.cli.claude_control`)."""
        self.turns = 0
        self.stopped = False
        self.over = anyio.Event()

    def facet(self) -> Facet:
        """The facet registering the hooks on the session's harness (``pi.harness``)."""

        def setup(env: FacetEnvironment) -> None:
            harness = env.use(HarnessService)
            env.on_activate(lambda: env.own(harness.add_registration(self.install)))

        return define_facet("coding-agent/headless-max-turns", setup)

    def _ours(self, api: Any) -> bool:
        return self.conversation is not None and api.conversation_id == self.conversation

    async def after_response(self, message: Any, api: Any, ctx: Context) -> None:
        if not self._ours(api):
            return
        self.turns += 1
        if self.turns > self.limit:
            self.stopped = True
            self.over.set()

    async def before_tool(self, call: dict[str, Any], api: Any, ctx: Context) -> Any:
        if self._ours(api) and self.turns > self.limit:
            return {"block": f"the run's --max-turns {self.limit} is reached"}
        return None

    async def after_tool(
        self, call: dict[str, Any], result: ToolResult, api: Any, ctx: Context
    ) -> ToolResult:
        if not self._ours(api) or self.turns < self.limit:
            return result
        self.stopped = True  # the limit's turn: its tools ran, and the turn ends here
        return replace(result, control={**(result.control or {}), "terminate": True})

    def install(self, h: Any) -> Callable[[], None]:
        """Register the hooks on the harness ``h`` (harness-wide; they filter by conversation)."""
        ns = h.namespace(self.namespace)
        with ExitStack() as undo:  # on a failure, what was registered is undone
            undo.callback(ns.unregister)
            undo.callback(h.hooks(ns, MODEL_CALL_KIND, {"after_response": self.after_response}))
            tools = {"before_tool": self.before_tool, "after_tool": self.after_tool}
            undo.callback(h.hooks(ns, TOOL_KIND, tools))
            return undo.pop_all().close


def _invalid(message: str) -> RemoteServiceError:
    """A refusal said to the client as it is (one line), not as an internal error."""
    return RemoteServiceError("service_invalid_value", message)


async def _answers_since(handle: ConversationHandle, after: int) -> int:
    """How many model calls of ``handle``'s conversation answered after entry ``after``: its
    ``pi.assistant`` entries carrying a model message (a failed or aborted call's entry has
    none), read newest first until ``after``."""
    counted, before = 0, None
    while True:
        page = await handle.entries(BACKGROUND, limit=100, before=before, kind=_ANSWER_KIND)
        for entry in page:
            if entry.id <= after:
                return counted
            counted += isinstance(entry.model, list)
        if len(page) < 100:
            return counted
        before = page[-1].id


def _stored_turns(tx: Any, _ctx: Any) -> dict[str, Any]:
    """A commit builder reading the stored limited turns (it writes nothing)."""
    slice_ = tx.snapshot("session").get("plugins", {}).get(STORE_NAMESPACE, {})
    turns = slice_.get("turns") if isinstance(slice_, dict) else None
    return dict(turns) if isinstance(turns, dict) else {}


def _limit_of(record: Any) -> tuple[int | None, int]:
    """``(limit, after)`` of a stored record; ``(None, 0)`` when it is not one this module
    wrote (a whole ``limit`` of 1 or more, a whole ``after``)."""
    if isinstance(record, dict):
        limit, after = record.get("limit"), record.get("after")
        if type(limit) is int and limit >= 1 and type(after) is int:
            return limit, after
    return None, 0


class _Limits:
    """:data:`~coding_agent.contracts.TurnLimitService`: a limited send per conversation at a
    time, each stored (:data:`STORE_NAMESPACE`) and watched in ``group`` (the worker's) until
    the conversation is idle again; :meth:`install` gives a reopened session its stored limits
    back before anything is dispatched."""

    def __init__(self, harness: HarnessServiceApi, group: anyio.abc.TaskGroup) -> None:
        self._harness = harness
        self._group = group
        self._held: set[int] = set()
        self._store: Namespace | None = None

    def install(self, h: Harness) -> Callable[[], None]:
        """The harness registration: :data:`STORE_NAMESPACE`, and a hold on dispatch until the
        stored limits are installed again (:meth:`_recover`). Applied before ``resume``, when
        nothing runs yet; were something running, the hold raises and the worker fails to
        start rather than run a limited turn unlimited."""
        store = h.namespace(STORE_NAMESPACE, {"session": {"turns": {}}})
        self._store = store
        try:
            release = h.hold()
        except BaseException:
            store.unregister()
            raise
        self._group.start_soon(self._recover, h, release)

        def uninstall() -> None:
            release()
            store.unregister()
            if self._store is store:
                self._store = None

        return uninstall

    async def _recover(self, h: Harness, release: Callable[[], None]) -> None:
        """Install a :class:`TurnLimit` for each stored limited turn not held already (a
        restart, a failover: the turn resumes from storage), counting its answers made so
        far, then release dispatch."""
        try:
            root = await h.root(BACKGROUND)
            for key, record in (await root.commit(_stored_turns, BACKGROUND)).items():
                if not key.isdigit():  # no conversation's: nothing it could limit
                    await self._forget(root, key)
                    continue
                conversation = int(key)
                if conversation in self._held:
                    continue  # this process placed it (a reopen after a reload)
                handle = await h.conversation(conversation, BACKGROUND)
                if handle is None:
                    await self._forget(root, key)
                    continue
                stored, after = _limit_of(record)
                limit = TurnLimit(stored or 1, namespace=f"{NAMESPACE}.{conversation}")
                limit.conversation = conversation
                # unreadable (written by something else): fail closed, the turn is stopped
                limit.turns = 2 if stored is None else await _answers_since(handle, after)
                if limit.turns > limit.limit:  # past it already: the recovered turn is aborted
                    limit.stopped = True
                    limit.over.set()
                self._held.add(conversation)
                remove = self._harness.add_registration(limit.install)
                self._group.start_soon(self._watch, limit, handle, remove)
        finally:
            release()

    async def _remember(self, handle: ConversationHandle, limit: int, after: int) -> None:
        """Store ``handle``'s conversation's limit (before its input is sent)."""
        store = self._store
        if store is None:
            raise RuntimeError("the session is not open (it is reloading): run again")

        def write(tx: Any, _ctx: Any) -> None:
            turns = tx.plugins(store)["turns"]
            turns[str(handle.id)] = {"limit": limit, "after": after}

        await handle.commit(write, BACKGROUND)

    async def _forget(self, handle: ConversationHandle, conversation: int | str) -> None:
        """Remove ``conversation``'s stored limit (its turn ended, however)."""
        store = self._store
        if store is None or not store.alive:
            return  # the session closed meanwhile: a reopening recovers, then forgets it

        def write(tx: Any, _ctx: Any) -> None:
            turns = tx.plugins(store)["turns"]
            if str(conversation) in turns:
                del turns[str(conversation)]

        await handle.commit(write, BACKGROUND)

    async def send(self, conversation: int, input: Any, turns: int, ctx: Context) -> int:
        if type(conversation) is not int or type(turns) is not int or turns < 1:
            raise _invalid("send(conversation, input, turns): turns is a whole number, 1 or more")
        if not isinstance(input, dict) or "content" not in input:
            raise _invalid('input must be {"content": ..., ...} (SendInputJson)')
        handle = await self._harness.harness.conversation(conversation, ctx)
        if handle is None:
            raise _invalid(f"no conversation {conversation} in this session")
        if conversation in self._held:
            raise _invalid(
                f"conversation {conversation} runs a --max-turns turn already (another client's "
                "run): wait for it to end, then run again"
            )
        limit = TurnLimit(turns, namespace=f"{NAMESPACE}.{conversation}")
        limit.conversation = conversation
        self._held.add(conversation)
        remove = self._harness.add_registration(limit.install)  # before the input is placed
        try:
            newest = await handle.entries(ctx, limit=1)
            await self._remember(handle, turns, newest[0].id if newest else 0)
            sent = await handle.send(
                input["content"],
                ctx,
                request_id=input.get("requestId"),
                when_busy=input.get("whenBusy", "followUp"),
                model=input.get("model"),
                allow=input.get("allow"),
            )
        except BaseException:
            remove()
            self._held.discard(conversation)
            with anyio.CancelScope(shield=True):
                await self._forget(handle, conversation)
            raise
        self._group.start_soon(self._watch, limit, handle, remove)
        return sent.id

    async def _watch(
        self, limit: TurnLimit, handle: ConversationHandle, remove: Callable[[], None]
    ) -> None:
        """Keep ``limit`` until the conversation is idle again; abort the turn at a model call
        past it (its tools are blocked: :meth:`TurnLimit.before_tool`). Then forget it, in
        storage too."""
        try:
            async with anyio.create_task_group() as group:

                async def over() -> None:
                    await limit.over.wait()
                    await handle.abort(BACKGROUND, by=f"--max-turns {limit.limit}")

                group.start_soon(over)
                await handle.wait_for_idle(BACKGROUND)
                group.cancel_scope.cancel()
            await self._forget(handle, handle.id)
        finally:
            remove()
            self._held.discard(limit.conversation or -1)


def turn_limit_facet(group: anyio.abc.TaskGroup) -> Facet:
    """The worker's :data:`~coding_agent.contracts.TurnLimitService` (module docstring); each
    limit is watched in ``group``, the worker's task group."""

    def setup(env: FacetEnvironment) -> None:
        harness = env.use(HarnessService)
        limits = _Limits(harness, group)
        env.on_activate(lambda: env.own(harness.add_registration(limits.install)))
        env.provide(TurnLimitService, limits)

    return define_facet("coding-agent/turn-limit", setup)
