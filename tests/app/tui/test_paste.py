"""Large pastes in the prompt editor: folded into a marker, sent whole (Textual Pilot)."""

from __future__ import annotations

import pytest
from rich.text import Text
from textual import events

from coding_agent.tui import CodingAgentApp
from coding_agent.tui.widgets.pastes import Pastes
from coding_agent.tui.widgets.user_message import UserMessage

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


def _shown(message: UserMessage) -> str:
    content = message.content
    return content.plain if isinstance(content, Text) else str(content)


async def test_a_sent_paste_stays_folded_in_the_transcript_and_expands_on_click_or_key(
    conversation, docs
) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.wait_rendered()
        await pilot.press(*"explain ")
        await _paste(app, pilot, SIXTY)
        await pilot.press(*" please", "enter")
        await docs.until(pilot, lambda: conversation.sent)
        assert conversation.sent == [(f"explain {SIXTY} please", "prompt")]  # the model: all
        await app.wait_rendered()
        [message] = app.query(UserMessage)
        assert _shown(message).splitlines() == [
            "explain [Pasted text #1 +60 lines] please",
            "▸ click or ctrl+o to show all 61 lines",
        ]
        await pilot.press("ctrl+o")  # as it expands tool output
        assert "line 30 of the log" in _shown(message) and "[Pasted" not in _shown(message)
        assert _shown(message).endswith("▾ click or ctrl+o to fold")
        await pilot.press("ctrl+o")
        assert "line 30 of the log" not in _shown(message)
        await pilot.click(message)
        await docs.until(pilot, lambda: "line 30 of the log" in _shown(message))


async def test_a_big_message_whose_paste_is_not_known_here_keeps_its_head(
    conversation, docs
) -> None:
    """Sent from another terminal, or before a restart: no marker is known, so the message
    keeps its first lines and one marker line for the rest."""
    conversation.change(lambda doc: doc["entries"].append(docs.user_entry(1, f"why?\n{SIXTY}")))
    conversation.change(lambda doc: doc["entries"].append(docs.user_entry(2, "x" * 1_500)))
    conversation.change(lambda doc: doc["entries"].append(docs.user_entry(3, "short\n" * 10)))
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.wait_rendered()
        lines, long, short = app.query(UserMessage)
        assert _shown(lines).splitlines() == [
            "why?",
            "line 1 of the log",
            "line 2 of the log",
            "[+58 more lines]",
            "▸ click or ctrl+o to show all 61 lines",
        ]
        assert _shown(long).startswith("x" * 300 + " [+1,200 more chars]\n▸ click")
        assert short.folded_text is None and _shown(short) == "short\n" * 10
        await pilot.press("ctrl+o")
        assert _shown(lines).startswith(f"why?\n{SIXTY}")


async def test_a_paste_sent_while_the_worker_is_away_shows_folded_as_pending(
    conversation, docs
) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.wait_rendered()
        app.apply_view(None)  # the worker went away: what is sent is held, shown pending
        await app.wait_rendered()
        await pilot.press(*"explain ")
        await _paste(app, pilot, SIXTY)
        await pilot.press("enter")
        await docs.until(pilot, lambda: app._pending.display)
        pending = app._pending.content
        assert isinstance(pending, Text)
        assert pending.plain.startswith("explain [Pasted text #1 +60 lines]\npending")
        app.apply_view(conversation.view.value, rebaseline=True)  # back: it goes out whole
        await docs.until(pilot, lambda: conversation.sent)
        assert conversation.sent == [(f"explain {SIXTY}", "prompt")]
