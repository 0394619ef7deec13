"""The question TUI facet in a real Textual app (Pilot), against the dialog contract.

The session side is a scripted provider of ``pi.question-dialog`` in its own facet host, reached
through chord's loopback source like a TUI process reaches the session worker. (The real
session facet and the ``question`` tool are in ``test_question_session.py``.)
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from textual.widgets import Input

from chord.facets import create_facet_host
from facets_question.tui import response_for, tui_facet

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("request_kwargs", "keys", "response"),
    [
        ({}, ["enter"], {"outcome": "answered", "answer": "red", "by": "tui"}),
        ({}, ["down", "enter"], {"outcome": "answered", "answer": "green", "by": "tui"}),
        ({}, ["tab", *"blue", "enter"], {"outcome": "answered", "answer": "blue", "by": "tui"}),
        ({}, [*"blue", "enter"], {"outcome": "answered", "answer": "blue", "by": "tui"}),
        ({}, ["2", "enter"], {"outcome": "answered", "answer": "green", "by": "tui"}),
        ({"options": ()}, [*"Ada", "enter"], {"outcome": "answered", "answer": "Ada", "by": "tui"}),
        ({}, ["escape"], {"outcome": "cancelled", "by": "tui"}),
    ],
    ids=[
        "first-option",
        "second-option",
        "free-text",
        "free-text-no-tab",
        "number",
        "text-only",
        "escape-cancels",
    ],
)
async def test_the_modal_offers_options_and_free_text_and_submits_the_answer(
    kit: Any, request_kwargs: dict[str, Any], keys: list[str], response: dict[str, Any]
) -> None:
    app = kit.DialogApp()
    scripted = kit.ScriptedDialogs()
    async with kit.shown(app, scripted, [tui_facet]) as pilot:
        request = kit.question_request(**request_kwargs)
        dialog, _close = scripted.open("1:call-1", request)
        screen = await app.shown_dialog(pilot)
        assert kit.title(screen) == "Which colour?"
        if request["options"]:
            numbered = [f"{n}. {o}" for n, o in enumerate(request["options"], 1)]
            assert kit.options(screen) == numbered
        assert len(screen.query(Input)) == 1  # free text allowed
        await pilot.press(*keys)
        with anyio.fail_after(10):
            await dialog.answered.wait()
        assert dialog.answers == [response]
        await app.until(lambda: app.dialog() is None)


async def test_options_only_questions_have_no_text_field(kit: Any) -> None:
    app = kit.DialogApp()
    scripted = kit.ScriptedDialogs()
    async with kit.shown(app, scripted, [tui_facet]) as pilot:
        dialog, _ = scripted.open("1:call-1", kit.question_request(allow_text=False))
        screen = await app.shown_dialog(pilot)
        assert len(screen.query(Input)) == 0
        await pilot.press("down", "enter")
        with anyio.fail_after(10):
            await dialog.answered.wait()
        assert dialog.answers == [{"outcome": "answered", "answer": "green", "by": "tui"}]


async def test_closing_the_instance_dismisses_the_question(kit: Any) -> None:
    app = kit.DialogApp()
    scripted = kit.ScriptedDialogs()
    async with kit.shown(app, scripted, [tui_facet]) as pilot:
        dialog, close = scripted.open("1:call-1", kit.question_request())
        await app.shown_dialog(pilot)
        close()
        await app.until(lambda: app.dialog() is None)
        assert dialog.answers == []


async def test_a_presentation_that_connects_late_sees_and_answers_an_open_question(
    kit: Any,
) -> None:
    # docs/design/chord.md#observe: late-joiner hydration of an open dialog instance
    app = kit.DialogApp()
    scripted = kit.ScriptedDialogs()
    async with (
        create_facet_host([scripted.facet]) as session,
        anyio.create_task_group() as group,
    ):
        dialog, _ = scripted.open("1:call-1", kit.question_request(question="Ship it?"))
        async with (
            app.run_test() as pilot,
            kit.presentation(session, [tui_facet], app.tui, group),
        ):
            screen = await app.shown_dialog(pilot)
            assert kit.title(screen) == "Ship it?"
            await pilot.press("enter")
            with anyio.fail_after(10):
                await dialog.answered.wait()
        assert dialog.answers == [{"outcome": "answered", "answer": "red", "by": "tui"}]
        group.cancel_scope.cancel()


def test_escape_is_a_cancellation_and_a_choice_an_answer() -> None:
    assert response_for(None) == {"outcome": "cancelled", "by": "tui"}
    assert response_for("x") == {"outcome": "answered", "answer": "x", "by": "tui"}
