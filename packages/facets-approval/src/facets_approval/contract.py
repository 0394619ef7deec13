"""What every side of the approval feature agrees on: JSON shapes and one service id.

The approval feature has three parts (seed-plugins §4.2, §6.2). The session worker's
``before_tool`` hook asks before a tool runs; the question is a keyed instance of
:data:`ApprovalDialogs`, one per pending call, addressed ``f"{conversationId}:{callId}"``
(:func:`dialog_key`); every presentation that observes the service shows a dialog and calls
:meth:`ApprovalDialog.decide`. The processes share nothing but this module, so it imports no
host code (no Textual, no harness): only chord's service and state types.

The shapes are plain JSON (``TypedDict`` for the type checker). A decision comes from another
process, so the session side never trusts it: :func:`check_decision` turns anything that is not
exactly an :class:`ApprovalDecision` into a :class:`~chord.remote.RemoteServiceError` with code
``service_invalid_value`` and a message naming the field, *before* anything is resolved or
recorded::

    check_decision({"decision": "allow", "by": "tui"})     # -> the same dict, checked
    check_decision({"decision": "maybe"})                  # RemoteServiceError: decision.decision ...
"""

from __future__ import annotations

from typing import Literal, NotRequired, Protocol, TypedDict

from chord.context import Context
from chord.json import JsonValue
from chord.remote import RemoteServiceError
from chord.services import define_service
from chord.state import ReplicatedState

__all__ = [
    "DECISIONS",
    "ApprovalDecision",
    "ApprovalDialog",
    "ApprovalDialogs",
    "ApprovalRequest",
    "Decision",
    "check_decision",
    "dialog_key",
]

Decision = Literal["allow", "deny"]
DECISIONS: tuple[Decision, ...] = ("allow", "deny")
"""The decisions a dialog accepts."""


class ApprovalRequest(TypedDict):
    """The replicated ``request`` of one dialog: which call waits for approval.

    ``conversationId`` and ``taskId`` are the harness ids of the conversation and of the
    ``pi.tool`` task; ``callId`` is the model's id for the call; ``args`` its arguments.
    """

    conversationId: int
    callId: str
    taskId: int
    name: str
    args: JsonValue


class ApprovalDecision(TypedDict):
    """A presentation's answer. ``always`` (only with ``allow``) also adds the tool to the
    conversation's ``autoAllow`` list, so it is not asked about again; ``by`` names who decided
    (shown in a block reason: ``"denied by tui"``)."""

    decision: Decision
    by: NotRequired[str]
    always: NotRequired[bool]


class ApprovalDialog(Protocol):
    """One pending approval (a keyed instance of :data:`ApprovalDialogs`)."""

    @property
    def request(self) -> ReplicatedState:
        """Follows :class:`ApprovalRequest`; set once when the dialog opens."""
        ...

    async def decide(self, decision: ApprovalDecision, ctx: Context) -> None:
        """Answer the dialog. The first *recorded* decision wins (a memo in the session worker);
        a later ``decide`` is harmless. Raises ``service_invalid_value`` for a malformed
        decision, which is then not recorded."""
        ...


ApprovalDialogs = define_service("pi.approval-dialog", ApprovalDialog)
"""Keyed by :func:`dialog_key`; provided (``provide_many``) by the session facet."""


def dialog_key(conversation_id: int, call_id: str) -> str:
    """The instance key of the dialog for one call: ``"<conversationId>:<callId>"``."""
    if type(conversation_id) is not int or conversation_id < 0:
        raise ValueError(f"conversation id must be a non-negative int, got {conversation_id!r}")
    if not isinstance(call_id, str) or not call_id:
        raise ValueError(f"call id must be a non-empty str, got {call_id!r}")
    return f"{conversation_id}:{call_id}"


def _invalid(message: str) -> RemoteServiceError:
    return RemoteServiceError("service_invalid_value", f"Invalid approval decision: {message}")


def check_decision(value: object) -> ApprovalDecision:
    """Return ``value`` as a checked :class:`ApprovalDecision` (a fresh dict).

    Raises :class:`~chord.remote.RemoteServiceError` (``service_invalid_value``) naming the
    problem: not an object, an unknown key, a ``decision`` other than ``"allow"``/``"deny"``,
    a ``by`` that is not a non-empty string, an ``always`` that is not a bool or comes with
    ``deny``.
    """
    if not isinstance(value, dict):
        raise _invalid(f"expected an object, got {type(value).__name__}")
    unknown = sorted(str(key) for key in value if key not in ("decision", "by", "always"))
    if unknown:
        raise _invalid(f"unknown field(s) {', '.join(unknown)} (allowed: decision, by, always)")
    if "decision" not in value:
        raise _invalid("decision.decision is required ('allow' or 'deny')")
    decision = value["decision"]
    if decision not in DECISIONS or not isinstance(decision, str):
        raise _invalid(f"decision.decision must be 'allow' or 'deny', got {decision!r}")
    checked: ApprovalDecision = {"decision": decision}
    if "by" in value:
        by = value["by"]
        if not isinstance(by, str) or not by:
            raise _invalid(f"decision.by must be a non-empty string, got {by!r}")
        checked["by"] = by
    if "always" in value:
        always = value["always"]
        if type(always) is not bool:
            raise _invalid(f"decision.always must be a bool, got {always!r}")
        if always and decision != "allow":
            raise _invalid("decision.always applies only to 'allow'")
        checked["always"] = always
    return checked
