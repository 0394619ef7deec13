"""The approval session facet: a ``before_tool`` hook that asks, and a dialog per question.

Two layers, as in seed-plugins §4.2 and §6.2.

:func:`install_approval` is the harness extension, usable without chord (a test wires ``ask`` to
a future). It registers the namespace ``approval`` with a *sticky* ``autoAllow`` list (per
conversation, not rewound by forks: which tools this conversation never asks about again) and a
``before_tool`` hook on ``pi.tool``. For a call whose tool the :class:`ApprovalRules` say needs
approval, the hook

1. allows at once when the tool is in ``autoAllow``;
2. reads the decision memo (``api.memo("decision")`` on the tool task's slot: decided before a
   crash or a reload?);
3. otherwise commits ``waiting`` (the view shows ``turn.tools[i].waitingOn = "approval"``), asks,
   and stores the answer with ``api.memo("decision", candidate)`` — first writer wins, and every
   racer gets the winner;
4. adds the tool to ``autoAllow`` when the winning decision says ``always``, and blocks the call
   (``"denied"`` / ``"denied by <who>"``) when it says ``deny``.

The memo lives in the tool task's slot and is deleted with it; nothing needs cleaning up. The
hook runs again after a crash or a suspend/reopen (it runs before ``started``), finds the memo and
does not ask twice. Asking again after a crash between ``waiting`` and the memo is harmless.

:func:`session_facet` wires ``ask`` to chord: each question becomes a keyed instance of
:data:`~.contract.ApprovalDialogs` under ``"<conversationId>:<callId>"``, spawned *before*
waiting, closed by the single ``finally`` whatever happens (answer, abort, suspend), which
dismisses the dialog in every presentation. ``decide`` only validates and resolves the local wait;
the durable first-writer rule is the memo, where the durability is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio

from chord.context import Context, cancel_scope
from chord.facets import Facet, FacetEnvironment, ServiceSpawner, define_facet
from chord.state import MutableReplicatedState
from pico3.chord.contract import Harness
from pico3.harness import Harness as OpenHarness
from pico3.kernel.tx import Transaction
from pico3.tools import MISSING
from pico3.turn.tool import TOOL_KIND

from .contract import (
    ApprovalDecision,
    ApprovalDialogs,
    ApprovalRequest,
    check_decision,
    dialog_key,
)

__all__ = [
    "DEFAULT_RULES",
    "NAMESPACE",
    "ApprovalRules",
    "Ask",
    "approval_session_facet",
    "install_approval",
    "session_facet",
]

NAMESPACE = "approval"
"""The namespace string: memo keys and the ``autoAllow`` slice are stored under it."""

Ask = Callable[[ApprovalRequest, Context], Awaitable[ApprovalDecision]]
"""``ask(request, ctx) -> decision``: how a decision is obtained (a dialog, a test's future)."""


@dataclass(frozen=True, slots=True)
class ApprovalRules:
    """Which tools need approval: those named in ``ask`` (``"*"`` means every tool).

    The default asks for the tools with effects outside the conversation (``bash``, ``write``,
    ``edit``); read-only tools run without asking.
    """

    ask: frozenset[str] = field(default_factory=lambda: frozenset({"bash", "write", "edit"}))

    def __post_init__(self) -> None:
        names: Iterable[object] = self.ask
        if isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
            raise TypeError("ApprovalRules.ask must be a set of non-empty tool names")
        object.__setattr__(self, "ask", frozenset(self.ask))

    def needs_approval(self, tool: str) -> bool:
        """True when a call of ``tool`` must be approved."""
        return "*" in self.ask or tool in self.ask


DEFAULT_RULES = ApprovalRules()
"""``bash``, ``write`` and ``edit`` ask; everything else runs."""


def _block_reason(decision: ApprovalDecision) -> str:
    by = decision.get("by")
    return f"denied by {by}" if by else "denied"


def install_approval(
    harness: OpenHarness, ask: Ask, rules: ApprovalRules = DEFAULT_RULES
) -> Callable[[], None]:
    """Register the ``approval`` namespace and its ``before_tool`` hook on ``harness``.

    Returns the uninstaller (idempotent): it removes the hook and retires the namespace token;
    the stored ``autoAllow`` lists and decision memos stay, so a re-installation finds them.
    """
    ns = harness.namespace(NAMESPACE, {"sticky": {"autoAllow": []}})

    def auto_allowed(tool: str) -> Callable[[Transaction, Context], bool]:
        def read(tx: Transaction, _ctx: Context) -> bool:
            return tool in list(tx.plugins(ns)["autoAllow"])

        return read

    def remember(tool: str) -> Callable[[Transaction, Context], None]:
        def write(tx: Transaction, _ctx: Context) -> None:
            allowed = list(tx.plugins(ns)["autoAllow"])
            if tool not in allowed:
                tx.plugins(ns)["autoAllow"] = [*allowed, tool]

        return write

    async def before_tool(call: dict[str, Any], api: Any, ctx: Context) -> dict[str, str] | None:
        tool = call["name"]
        if not rules.needs_approval(tool):
            return None
        conversation = await harness.conversation(api.conversation_id, ctx)
        if conversation is None:  # pragma: no cover - the hosting task's conversation exists
            raise RuntimeError(f"conversation {api.conversation_id} is not open")
        if await conversation.commit(auto_allowed(tool), ctx):
            return None
        decision = await api.memo("decision", ctx)
        if decision is MISSING:
            await api.waiting(ctx)
            request: ApprovalRequest = {
                "conversationId": api.conversation_id,
                "callId": api.call_id,
                "taskId": api.task_id,
                "name": tool,
                "args": call.get("arguments", {}),
            }
            candidate = check_decision(await ask(request, ctx))
            decision = await api.memo("decision", candidate, ctx)
        if decision["decision"] == "deny":
            return {"block": _block_reason(decision)}
        if decision.get("always"):
            await conversation.commit(remember(tool), ctx)
        return None

    try:
        unhook = harness.hooks(ns, TOOL_KIND, {"before_tool": before_tool})
    except BaseException:
        ns.unregister()
        raise

    def uninstall() -> None:
        unhook()
        ns.unregister()

    return uninstall


class _Dialog:
    """One open dialog: the replicated request and ``decide``, which resolves the wait."""

    def __init__(self, request: MutableReplicatedState) -> None:
        self.request = request
        self._decided = anyio.Event()
        self._decision: ApprovalDecision | None = None

    async def decide(self, decision: Any, ctx: Context) -> None:
        checked = check_decision(decision)  # raises before anything is resolved
        if self._decision is None:
            self._decision = checked
            self._decided.set()

    async def _wait(self, ctx: Context) -> ApprovalDecision:
        with cancel_scope(ctx):
            await self._decided.wait()
        assert self._decision is not None
        return self._decision


def _dialog_ask(env: FacetEnvironment, dialogs: ServiceSpawner[Any]) -> Ask:
    async def ask(request: ApprovalRequest, ctx: Context) -> ApprovalDecision:
        dialog = _Dialog(env.replicated_state(dict(request)))
        close = dialogs.spawn(dialog_key(request["conversationId"], request["callId"]), dialog)
        try:
            return await dialog._wait(ctx)
        finally:
            close()

    return ask


def approval_session_facet(rules: ApprovalRules = DEFAULT_RULES) -> Facet:
    """The session facet with ``rules`` (the entry point serves :data:`session_facet`)."""

    def setup(env: FacetEnvironment) -> None:
        harness = env.use(Harness)
        dialogs = env.provide_many(ApprovalDialogs)
        ask = _dialog_ask(env, dialogs)

        def activate() -> None:
            env.own(harness.add_registration(lambda h: install_approval(h, ask, rules)))

        env.on_activate(activate)

    return define_facet("@pi/approval", setup)


session_facet = approval_session_facet()
"""The approval session facet with :data:`DEFAULT_RULES`."""
