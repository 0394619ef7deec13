"""Fixtures for the question feature: the contract's scripted provider and request, plus the
shared dialog helpers of :mod:`dialog_support` (the Textual app, the scripted ``Tui``, the
presentation host), handed to tests as ``kit``.

The session side is either the real session facet over a harness (``test_question_session``)
or, for presentation-only tests, a small provider of the same contract (:class:`ScriptedDialogs`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio
import dialog_support
import pytest

from chord.context import Context
from chord.facets import FacetEnvironment, define_facet
from chord.facets.environment import ServiceSpawner
from facets_question.contract import QuestionDialogs, QuestionResponse, check_response


class ScriptedDialog:
    """A contract-conforming question instance that records the responses it receives.

    Only ``implementation`` (the request state and ``submit``) is spawned; the recording stays
    on this object, out of the service's members.
    """

    def __init__(self, env: FacetEnvironment, request: dict[str, Any]) -> None:
        self.responses: list[QuestionResponse] = []
        self.submitted = anyio.Event()

        async def submit(response: Any, ctx: Context) -> None:
            self.responses.append(check_response(response, request))  # type: ignore[arg-type]
            self.submitted.set()

        self.implementation = {"request": env.replicated_state(request), "submit": submit}


class ScriptedDialogs:
    """A stand-in session host: spawns :class:`ScriptedDialog` instances on demand."""

    def __init__(self) -> None:
        self.env: FacetEnvironment | None = None
        self.spawner: ServiceSpawner[Any] | None = None

        def setup(env: FacetEnvironment) -> None:
            self.env = env
            self.spawner = env.provide_many(QuestionDialogs)

        self.facet = define_facet("test/question-session", setup)

    def open(self, key: str, request: dict[str, Any]) -> tuple[ScriptedDialog, Callable[[], None]]:
        assert self.env is not None and self.spawner is not None
        dialog = ScriptedDialog(self.env, request)
        return dialog, self.spawner.spawn(key, dialog.implementation)


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
    title = staticmethod(dialog_support.dialog_title)
    body = staticmethod(dialog_support.dialog_body)
    options = staticmethod(dialog_support.dialog_options)


@pytest.fixture
def kit() -> type[Kit]:
    return Kit
