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
The hooks live in the process that runs the session, so the limit is for a run in this process:
``--server`` (a session on ``coding-agent serve``) and ``--wait-for-approval`` (a worker of its
own) refuse ``--max-turns`` with a usage error (:mod:`coding_agent.cli.main`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace
from typing import Any

import anyio

from chord import Context, Facet, FacetEnvironment, define_facet
from pico3 import MODEL_CALL_KIND, TOOL_KIND, HarnessService, ToolResult

__all__ = ["NAMESPACE", "TurnLimit"]

NAMESPACE = "coding-agent-max-turns"
"""The harness namespace of the limit's hooks (process state only: nothing is stored)."""


class TurnLimit:
    """``--max-turns``: stop :attr:`conversation`'s turn after :attr:`limit` model calls.

    :attr:`conversation` is set by the run before it sends the prompt (``None``: nothing is
    counted). :attr:`turns` is the model calls counted, :attr:`stopped` whether the limit ended
    the turn (the model still calling tools), and :attr:`over` is set at a call past the limit:
    the run then aborts the turn."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"--max-turns must be a whole number of 1 or more, got {limit}")
        self.limit = limit
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
        ns = h.namespace(NAMESPACE)
        with ExitStack() as undo:  # on a failure, what was registered is undone
            undo.callback(ns.unregister)
            undo.callback(h.hooks(ns, MODEL_CALL_KIND, {"after_response": self.after_response}))
            tools = {"before_tool": self.before_tool, "after_tool": self.after_tool}
            undo.callback(h.hooks(ns, TOOL_KIND, tools))
            return undo.pop_all().close
