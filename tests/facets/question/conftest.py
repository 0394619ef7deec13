"""Fixtures for the question feature: the contract's scripted provider and request, plus the
shared dialog helpers of :mod:`dialog_support` (the Textual app, the scripted ``Tui``, the
presentation host), handed to tests as ``kit``.

The session side is either the real session facet over a harness (``test_question_session``)
or, for presentation-only tests, a small provider of the same contract (:class:`ScriptedDialogs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dialog_support
import pytest

from facets_question.contract import QuestionDialogs, QuestionResponse, check_response


def _check(response: Any, request: dict[str, Any]) -> QuestionResponse:
    return check_response(response, request)  # type: ignore[arg-type]


class ScriptedDialogs(dialog_support.ScriptedDialogs[QuestionResponse]):
    """A stand-in session host of ``QuestionDialogs`` (:mod:`dialog_support`): each dialog it opens
    records the responses its ``submit`` receives, checked by ``check_response``."""

    def __init__(self) -> None:
        super().__init__(QuestionDialogs, "submit", _check, "question")


def question_request(
    call_id: str = "call-1",
    question: str = "Which colour?",
    options: Sequence[str] = ("red", "green"),
    allow_text: bool = True,
) -> dict[str, Any]:
    return {
        "conversationId": 1,
        "callId": call_id,
        "taskId": 7,
        "question": question,
        "options": list(options),
        "allowText": allow_text,
    }


class ScriptedTui(dialog_support.ScriptedTui):
    """The scripted ``Tui`` (:mod:`dialog_support`), naming the question facet in its errors."""

    feature = "question"


class Kit:
    """The helpers above, handed to tests through the ``kit`` fixture (importlib mode cannot
    import a conftest module by name)."""

    DialogApp = dialog_support.DialogApp
    ScriptedDialogs = ScriptedDialogs
    ScriptedTui = ScriptedTui
    question_request = staticmethod(question_request)
    presentation = staticmethod(dialog_support.presentation)
    shown = staticmethod(dialog_support.shown)
    title = staticmethod(dialog_support.dialog_title)
    body = staticmethod(dialog_support.dialog_body)
    options = staticmethod(dialog_support.dialog_options)


@pytest.fixture
def kit() -> type[Kit]:
    return Kit
