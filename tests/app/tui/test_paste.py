"""Large pastes in the prompt editor: folded into a marker, sent whole (Textual Pilot)."""

from __future__ import annotations

import pytest
from textual import events

from coding_agent.tui import CodingAgentApp
from coding_agent.tui.widgets.pastes import Pastes

pytestmark = pytest.mark.anyio

SIXTY = "".join(f"line {n} of the log\n" for n in range(1, 61))


async def _paste(app: CodingAgentApp, pilot: object, text: str) -> None:
    app.post_message(events.Paste(text))  # as the terminal's bracketed paste arrives
    await pilot.pause()  # type: ignore[attr-defined]


async def test_a_sixty_line_paste_shows_as_a_marker_and_is_sent_whole(conversation, docs) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.wait_rendered()
        await pilot.press(*"explain ")
        await _paste(app, pilot, SIXTY)
        await pilot.press(*" please")
        assert app.editor.text == "explain [Pasted text #1 +60 lines] please"
        assert app.editor.document.line_count == 1
        await pilot.press("enter")
        await docs.until(pilot, lambda: conversation.sent)
        assert conversation.sent == [(f"explain {SIXTY} please", "prompt")]
        assert app.editor.text == ""
        await pilot.press("up")  # the history shows it folded, and sends it whole again
        assert app.editor.text == "explain [Pasted text #1 +60 lines] please"


async def test_a_small_paste_goes_in_as_it_is(conversation, docs) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.wait_rendered()
        small = "".join(f"{n}\n" for n in range(10))
        await _paste(app, pilot, small)
        assert app.editor.text == small
        await _paste(app, pilot, "x" * 1001)  # one long line: folded by its size
        assert app.editor.text == small + "[Pasted text #1 1,001 chars]"


async def test_backspace_deletes_the_marker_whole_and_nothing_of_it_is_sent(
    conversation, docs
) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.wait_rendered()
        await pilot.press(*"see ")
        await _paste(app, pilot, SIXTY)
        await pilot.press("backspace")
        assert app.editor.text == "see "
        await _paste(app, pilot, SIXTY)
        await pilot.press("home", "right", "right", "right", "right", "delete")
        assert app.editor.text == "see "
        await _paste(app, pilot, SIXTY)
        await pilot.press("left", "backspace")  # inside the marker: still all of it
        assert app.editor.text == "see "
        await pilot.press(*"this", "enter")
        await docs.until(pilot, lambda: conversation.sent)
        assert conversation.sent == [("see this", "prompt")]


def test_a_prompt_put_back_is_folded_again_where_the_paste_is_whole() -> None:
    pastes = Pastes()
    marker = pastes.marker_for(SIXTY.replace("\n", "\r\n"))
    assert marker == "[Pasted text #1 +60 lines]"
    sent = pastes.expand(f"a {marker} b")
    assert sent == f"a {SIXTY} b"
    assert pastes.fold(sent) == f"a {marker} b"
    assert pastes.expand("[Pasted text #9 +60 lines]") == "[Pasted text #9 +60 lines]"
