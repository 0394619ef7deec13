"""What a ``permission_request`` answer does: Claude Code's ``PermissionRequest`` hooks.

pico3's ``permission_request`` point of ``pi.tool`` runs right before the approval hook would
ask (the hooks feature answers there for Claude Code's ``PermissionRequest`` hooks);
:func:`hook_decision` turns its answer into the decision memo: ``allow`` runs the call,
``deny`` refuses it with the hook's message. Two more parts of an answer:

**Rules to keep.** An allow's ``rules`` (``[{"rule": "Bash(npm test)", "kind": "allow"}]``, the
hook's ``updatedPermissions``) are kept by :func:`keep_hook_rules` as session rules, as
``/permissions KIND RULE --session`` keeps them: in the user's conversation (rewound with it),
from the next call on. A rule that does not parse is not kept, nor an allow rule for a whole
tool that asks (``Bash``, ``Edit``, ``Write``, ``mcp__server``, ``WebFetch`` without a domain:
:func:`~.permissions.wide_allow`), which a person adds only after a second question. And no
allow rule, a hook's or a person's, covers what asks in every mode: an edit of ``.git/``, of
the agent's configuration or outside the project, a command leaving the sandbox. The worker's
log says what was kept and what was not.

**Interrupt.** An answer ``{"behavior": "deny", "interrupt": true, ...}`` (the hooks feature
gives it for a hook's ``"interrupt": true``) refuses the call as any deny does — the model
reads the hook's message as the call's result — and then ends the turn the way Esc ends it:
pico3's conversation abort (:meth:`pico3.ConversationHandle.abort`, the public way every
client interrupts a turn) of the user's conversation (for a subagent's call, the conversation
at the top of its owner chain: the whole turn stops, as in Claude Code). The inputs end
``unanswered/aborted`` (``turn.ended`` says so, as after Esc while the model thinks), and the
session waits for the next prompt, whose model call reads the refusal with the rest.

The order is what makes the model read the refusal: aborting while the refused call's task is
still live would replace its result with "Tool call aborted.". So the abort waits for the turn
to go on past the refusal: :meth:`Interrupts.before_request`, a ``before_request`` handler of
``pi.generation``, aborts when the conversation's next model call is about to continue right
after the refused call's result (the request's newest message is a tool result and one of the
results after the newest assistant message is the refused call's). No model call runs after
the refusal. Meanwhile the other calls of the same message are not run: a call of that
conversation that reaches the approval hook is blocked (:func:`sibling_reason`), and one whose
dialog is open is closed unanswered and blocked (:meth:`Interrupts.unless_interrupted`). A call
that was already running when the hook answered finishes first (its result is kept).

**Durable.** The pending interrupt is stored as well as the refusal: the decision memo (on the
call's slot) holds it until the refused result is committed, and :meth:`Interrupts.start`
commits it, before the result, as the ``interrupt`` key of the namespace's *sticky* slice of the
refused call's conversation (``{"callId", "top", "by", "turn"}``: ``turn`` the id of the input
that started the running turn, :meth:`pico3.Transaction.turn_input`). A crash between the memo
and that commit runs ``before_tool`` again, which finds the memo and starts the interrupt again
(idempotent). A worker restarted anywhere between the refusal and the next model call reads the
stored interrupt once per conversation (:meth:`Interrupts.pending`, lazily: the first
``before_tool`` or ``before_request`` there) and the turn ends exactly as without the restart:
the other calls of the message are blocked, and the next model call aborts the turn on the
hook's behalf before anything is sent to the model. From the abort on, pico3's own durability
finishes the turn truthfully (the abort mark and ``sticky.turn.stoppedBy`` are one commit; a
marked task runs its abort after a reopen, so the turn still ends "stopped by" the hook). A
stored interrupt whose turn is over (another input started the running turn, or none runs) is
stale: the read clears it and nothing is stopped.

A steer typed while the refused call's siblings finish is placed after the results, so the
request's newest message is the user's: the person is there, and the turn goes on with it; the
pending interrupt is dropped (and cleared from storage).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio

from chord import Context
from pico3 import Harness, Namespace, Transaction

from .contract import ApprovalDecision
from .permissions import RuleStore, wide_allow
from .rules import RuleError, parse_rule

__all__ = [
    "INTERRUPT_KEY",
    "Interrupts",
    "Pending",
    "continues_after",
    "hook_decision",
    "keep_hook_rules",
    "sibling_reason",
    "stored_pending",
]

_log = logging.getLogger("facets_approval")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Pending:
    """An interrupt waiting for the turn to go on past the refused call ``call_id``; ``top`` is
    the conversation to abort (the user's), ``by`` who interrupted."""

    call_id: str
    top: int
    by: str


def sibling_reason(tool: str, pending: Pending) -> str:
    """The block reason the model reads for another call of a turn a hook interrupted."""
    return (
        f"{tool} was not run: {pending.by} refused another call of this turn and interrupted "
        "the turn. Wait for the user's next message."
    )


def continues_after(messages: Sequence[Any], call_id: str) -> bool:
    """True when the request ``messages`` continue the turn right after the result of the
    call ``call_id``: the newest message (system messages aside) is a tool result, and the
    results after the newest assistant message include that call's."""
    told = [m for m in messages if isinstance(m, dict) and m.get("role") != "system"]
    if not told or told[-1].get("role") != "toolResult":
        return False
    for message in reversed(told):
        if message.get("role") == "assistant":
            return False
        if message.get("toolCallId") == call_id:
            return True
    return False


def hook_decision(answer: object) -> ApprovalDecision | None:
    """The decision a ``permission_request`` answer makes (pico3's point of ``pi.tool``, run
    right before the dialog would open: Claude Code's ``PermissionRequest`` hooks answer there),
    or ``None`` — the dialog asks — for no answer or one not in the shape ``{"behavior": "allow"
    | "deny", "by": "<who>", "message"?: "<why>"}`` (never an allow made of a malformed value).
    A deny keeps its ``message`` beside the decision, for the reason the model reads, and its
    ``interrupt`` (the turn stops after the refusal: :class:`Interrupts`); an allow keeps the
    session rules the hook asked to add (``rules``: ``[{"rule", "kind"}]``) as ``hookRules``,
    which the approval hook keeps after checking each (:func:`keep_hook_rules`)."""
    if not isinstance(answer, dict):
        return None
    behavior: Any = answer.get("behavior")  # pyright: ignore[reportUnknownMemberType]
    by: Any = answer.get("by")  # pyright: ignore[reportUnknownMemberType]
    if behavior not in ("allow", "deny") or not isinstance(by, str) or not by:
        return None
    decision: Any = {"decision": behavior, "by": by}
    message: Any = answer.get("message")  # pyright: ignore[reportUnknownMemberType]
    if behavior == "deny" and isinstance(message, str) and message:
        decision["message"] = message
    if behavior == "deny" and answer.get("interrupt") is True:  # pyright: ignore[reportUnknownMemberType]
        decision["interrupt"] = True
    rules: Any = answer.get("rules")  # pyright: ignore[reportUnknownMemberType]
    if behavior == "allow" and isinstance(rules, list):
        kept = [
            {"rule": r["rule"], "kind": r["kind"]}
            for r in rules  # pyright: ignore[reportUnknownVariableType]
            if isinstance(r, dict)
            and isinstance(r.get("rule"), str)  # pyright: ignore[reportUnknownMemberType]
            and r.get("kind") in ("allow", "ask", "deny")  # pyright: ignore[reportUnknownMemberType]
        ]
        if kept:
            decision["hookRules"] = kept
    return decision


async def keep_hook_rules(
    store: RuleStore, decision: ApprovalDecision, conversation_id: int, ctx: Context, *, say: bool
) -> None:
    """Keep the session rules a ``PermissionRequest`` hook's allow asked for (``hookRules``),
    as ``/permissions KIND RULE --session`` keeps them: in the user's conversation, from the
    next call on. A rule that does not parse is not kept; nor is an allow rule for a whole tool
    that asks (:func:`~.permissions.wide_allow`: ``Bash``, ``Edit``, ``mcp__server``...), which a
    person adds only after a second question. No allow rule, a hook's or a person's, covers
    what asks in every mode (confinement, leaving the sandbox). Idempotent (a restarted worker
    that finds the decision keeps them again); ``say`` logs what was and was not kept."""
    by = decision.get("by", "a PermissionRequest hook")
    for item in decision.get("hookRules") or []:
        text, kind = item["rule"], item["kind"]
        try:
            parsed = parse_rule(text)
        except RuleError as error:
            if say:
                _log.warning("%s: %s rule %r not kept: %s", by, kind, text, error)
            continue
        wide = wide_allow(parsed, kind)
        if wide is not None:
            if say:
                _log.warning(
                    "%s: allow rule %s not kept: it allows %s without asking, which only a "
                    "person may add (/permissions, after a second question)",
                    by,
                    parsed.text,
                    wide[0],
                )
            continue
        await store.keep(parsed.text, "session", conversation_id, ctx, kind=kind)
        if say:
            _log.warning("%s: %s rule %s kept for this session", by, kind, parsed.text)


INTERRUPT_KEY = "interrupt"
"""The key of the namespace's sticky slice that stores a conversation's pending interrupt
(``{}``, its default: none)."""


def stored_pending(stored: object, turn: int | None) -> Pending | None:
    """The :class:`Pending` a stored ``interrupt`` value holds while its turn runs (``turn``: the
    id of the input that started the conversation's running turn, ``None`` when none runs);
    ``None`` for no value, a malformed one, or one of a turn that is over (stale)."""
    if not isinstance(stored, Mapping) or turn is None:
        return None
    call_id: Any = stored.get("callId")  # pyright: ignore[reportUnknownMemberType]
    top: Any = stored.get("top")  # pyright: ignore[reportUnknownMemberType]
    by: Any = stored.get("by")  # pyright: ignore[reportUnknownMemberType]
    if stored.get("turn") != turn:  # pyright: ignore[reportUnknownMemberType]
        return None
    if not isinstance(call_id, str) or type(top) is not int or not isinstance(by, str):
        return None
    return Pending(call_id, top, by)


class Interrupts:
    """The pending interrupts of one installation, by the refused call's conversation: kept in
    memory and stored (the namespace ``ns``'s sticky ``interrupt`` key), so a restarted worker
    finds them (see the module docstring, **Durable**)."""

    def __init__(self, harness: Harness, ns: Namespace) -> None:
        self._harness = harness
        self._ns = ns
        self._pending: dict[int, Pending] = {}
        self._stops: dict[int, anyio.Event] = {}
        self._read: set[int] = set()  # conversations whose stored interrupt this one has read

    async def start(self, conversation_id: int, pending: Pending, ctx: Context) -> None:
        """The call ``pending.call_id`` of ``conversation_id`` was refused with an interrupt:
        close the open dialogs of its turn, store the interrupt (before the refused result is
        committed: the caller returns the block afterwards), and end the turn before its next
        model call."""
        self._pending[conversation_id] = pending
        self._stop(conversation_id).set()
        self._read.add(conversation_id)
        conversation = await self._harness.conversation(conversation_id, ctx)
        if conversation is None:  # pragma: no cover - the hosting task's conversation exists
            return
        ns = self._ns

        async def keep(tx: Transaction, _ctx: Context) -> None:
            started = await tx.turn_input(conversation_id)
            tx.plugins(ns)[INTERRUPT_KEY] = {
                "callId": pending.call_id,
                "top": pending.top,
                "by": pending.by,
                "turn": started.id if started is not None else None,
            }

        await conversation.commit(keep, ctx)

    async def pending(self, conversation_id: int, ctx: Context) -> Pending | None:
        """The interrupt pending in ``conversation_id`` (``None``: none); the first ask for a
        conversation reads the stored one (a worker restarted after the refusal), and clears it
        when its turn is over."""
        if conversation_id not in self._read:
            await self._load(conversation_id, ctx)
        return self._pending.get(conversation_id)

    def known(self, conversation_id: int) -> Pending | None:
        """The interrupt pending in ``conversation_id`` as this installation knows it (no read:
        for a conversation :meth:`pending` was already asked about)."""
        return self._pending.get(conversation_id)

    async def _load(self, conversation_id: int, ctx: Context) -> None:
        conversation = await self._harness.conversation(conversation_id, ctx)
        if conversation is None:  # pragma: no cover - the hosting task's conversation exists
            return
        ns = self._ns

        async def read(tx: Transaction, _ctx: Context) -> Pending | None:
            stored = tx.plugins(ns)[INTERRUPT_KEY]
            started = await tx.turn_input(conversation_id)
            found = stored_pending(stored, started.id if started is not None else None)
            if found is None and stored:  # its turn is over (or it is malformed): forget it
                tx.plugins(ns)[INTERRUPT_KEY] = {}
            return found

        found = await conversation.commit(read, ctx)
        if conversation_id in self._read:  # started meanwhile: this installation knows better
            return
        self._read.add(conversation_id)
        if found is not None:
            _log.warning("%s interrupted the turn before a restart: it stops", found.by)
            self._pending[conversation_id] = found
            self._stop(conversation_id).set()

    async def _clear(self, conversation_id: int, pending: Pending, ctx: Context) -> None:
        """Forget the stored interrupt of ``conversation_id`` if it is still ``pending``'s."""
        conversation = await self._harness.conversation(conversation_id, ctx)
        if conversation is None:  # pragma: no cover - the hosting task's conversation exists
            return
        ns = self._ns

        def clear(tx: Transaction, _ctx: Context) -> None:
            stored = tx.plugins(ns)[INTERRUPT_KEY]
            if isinstance(stored, Mapping) and stored.get("callId") == pending.call_id:  # pyright: ignore[reportUnknownMemberType]
                tx.plugins(ns)[INTERRUPT_KEY] = {}

        await conversation.commit(clear, ctx)

    def _stop(self, conversation_id: int) -> anyio.Event:
        return self._stops.setdefault(conversation_id, anyio.Event())

    async def unless_interrupted(
        self, conversation_id: int, wait: Callable[[], Awaitable[T]]
    ) -> T | None:
        """``await wait()``, or ``None`` as soon as a call of ``conversation_id`` is refused
        with an interrupt (``wait`` is then cancelled: a dialog closes unanswered)."""
        stop = self._stop(conversation_id)
        if stop.is_set():
            return None
        result: T | None = None
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                await stop.wait()
                group.cancel_scope.cancel()

            group.start_soon(watch)
            result = await wait()
            group.cancel_scope.cancel()
        return result if not stop.is_set() else None

    async def before_request(self, request: Any, api: Any, ctx: Context) -> None:
        """The ``before_request`` handler of ``pi.generation``: abort the user's conversation
        when this model call would continue the turn past a refusal with an interrupt (the
        pending interrupt is dropped either way: it is about this model call only). The stored
        interrupt stays until the turn is over when it aborts (a crash before the abort's
        commit stops the turn after the restart; after it, pico3 finishes the abort), and is
        cleared when the turn goes on (a steer came first)."""
        await self.pending(api.conversation_id, ctx)  # a restarted worker reads it first
        pending = self._pending.pop(api.conversation_id, None)
        if pending is None:
            return None
        self._stops.pop(api.conversation_id, None)
        messages: Any = request.get("messages") if isinstance(request, dict) else None
        if not isinstance(messages, list) or not continues_after(messages, pending.call_id):  # pyright: ignore[reportUnknownArgumentType]
            await self._clear(api.conversation_id, pending, ctx)
            return None
        top = await self._harness.conversation(pending.top, ctx)
        if top is None:  # pragma: no cover - the user's conversation exists while it runs
            return None
        _log.warning("%s interrupted the turn: it stops as Esc stops it", pending.by)
        await top.abort(ctx, by=pending.by)  # marks this model call too: its ctx is cancelled
        return None
