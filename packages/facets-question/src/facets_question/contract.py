"""What every side of the question feature agrees on: JSON shapes and one service id.

The model calls the ``question`` tool (docs/design/harness.md#tools); while it waits, the session worker
offers one keyed instance of :data:`QuestionDialogs` per call, addressed
``f"{conversationId}:{callId}"`` (:func:`dialog_key`), whose replicated ``request`` is a
:class:`QuestionRequest`. Any presentation observing the service shows the question, with the
offered options and, when allowed, a free-text field, and calls :meth:`QuestionDialog.submit`
with a :class:`QuestionResponse` — an answer or a cancellation. The first *recorded* response
wins (a memo on the tool's slot in the session worker).

This module imports no host code (no Textual, no harness). A response arrives from another
process, so :func:`check_response` validates it against its request before anything is resolved
or recorded and raises :class:`~chord.remote.RemoteServiceError` (``service_invalid_value``)
naming the field otherwise::

    check_response({"outcome": "answered", "answer": "yes"}, request)   # -> checked copy
    check_response({"outcome": "answered", "answer": 42}, request)      # RemoteServiceError
"""

from __future__ import annotations

from typing import Literal, NotRequired, Protocol, TypedDict

from chord import Context, RemoteServiceError, ReplicatedState, define_service, dialog_key

__all__ = [
    "OUTCOMES",
    "Outcome",
    "QuestionDialog",
    "QuestionDialogs",
    "QuestionRequest",
    "QuestionResponse",
    "check_response",
    "dialog_key",
]

Outcome = Literal["answered", "cancelled"]
OUTCOMES: tuple[Outcome, ...] = ("answered", "cancelled")
"""The outcomes a response may have."""


class QuestionRequest(TypedDict):
    """The replicated ``request`` of one dialog.

    ``question`` is the text to show, ``options`` the answers offered (possibly none) and
    ``allowText`` whether a typed answer is accepted too. ``conversationId``, ``callId`` and
    ``taskId`` identify the waiting ``question`` call in the harness.
    """

    conversationId: int
    callId: str
    taskId: int
    question: str
    options: list[str]
    allowText: bool


class QuestionResponse(TypedDict):
    """The user's response: ``{"outcome": "answered", "answer": str}`` or
    ``{"outcome": "cancelled"}``; ``by`` optionally names the presentation that answered."""

    outcome: Outcome
    answer: NotRequired[str]
    by: NotRequired[str]


class QuestionDialog(Protocol):
    """One pending question (a keyed instance of :data:`QuestionDialogs`)."""

    @property
    def request(self) -> ReplicatedState:
        """Follows :class:`QuestionRequest`; set once when the dialog opens."""
        ...

    async def submit(self, response: QuestionResponse, ctx: Context) -> None:
        """Answer (or cancel) the question. Raises ``service_invalid_value`` for a response
        that does not fit the request, which is then not recorded."""
        ...


QuestionDialogs = define_service("pi.question-dialog", QuestionDialog)
"""Keyed by :func:`dialog_key` (chord's :func:`chord.dialog_key`, re-exported here); provided
by the session facet (:func:`chord.provide_dialogs`, answer method ``submit``) and shown by the
TUI facet (:func:`chord.textual.show_dialogs`)."""


def _invalid(message: str) -> RemoteServiceError:
    return RemoteServiceError("service_invalid_value", f"Invalid question response: {message}")


def check_response(value: object, request: QuestionRequest) -> QuestionResponse:
    """Return ``value`` as a checked :class:`QuestionResponse` (a fresh dict) for ``request``.

    Raises :class:`~chord.remote.RemoteServiceError` (``service_invalid_value``) naming the
    problem: not an object, an unknown field, an unknown ``outcome``, an ``answer`` that is
    missing, not a string or blank, an answer with a cancellation, an answer outside
    ``options`` when free text is not allowed, a ``by`` that is not a non-empty string.
    """
    if not isinstance(value, dict):
        raise _invalid(f"expected an object, got {type(value).__name__}")
    unknown = sorted(str(key) for key in value if key not in ("outcome", "answer", "by"))
    if unknown:
        raise _invalid(f"unknown field(s) {', '.join(unknown)} (allowed: outcome, answer, by)")
    outcome = value.get("outcome")
    if outcome not in OUTCOMES or not isinstance(outcome, str):
        raise _invalid(f"response.outcome must be 'answered' or 'cancelled', got {outcome!r}")
    checked: QuestionResponse = {"outcome": outcome}
    if outcome == "answered":
        if "answer" not in value:
            raise _invalid("response.answer is required when the outcome is 'answered'")
        answer = value["answer"]
        if not isinstance(answer, str):
            raise _invalid(f"response.answer must be a string, got {type(answer).__name__}")
        if not answer.strip():
            raise _invalid("response.answer must not be blank")
        if not request["allowText"] and answer not in request["options"]:
            raise _invalid(
                f"response.answer {answer!r} is not one of the options "
                f"{request['options']!r} and free text is not allowed"
            )
        checked["answer"] = answer
    elif "answer" in value:
        raise _invalid("response.answer must be absent when the outcome is 'cancelled'")
    if "by" in value:
        by = value["by"]
        if not isinstance(by, str) or not by:
            raise _invalid(f"response.by must be a non-empty string, got {by!r}")
        checked["by"] = by
    return checked
