"""Keyboard scrolling of the transcript and its follow-the-bottom mode."""

from __future__ import annotations

from typing import Any

import pytest

from coding_agent.tui import CodingAgentApp

pytestmark = pytest.mark.anyio


def _long_view(docs: Any, count: int = 30) -> dict[str, Any]:
    entries: list[dict[str, Any]] = []
    for n in range(count):
        entries.append(docs.user_entry(2 * n + 1, f"question {n}"))
        message = docs.assistant_message(docs.text_block(f"answer {n}\n\nline two of {n}"))
        entries.append(docs.assistant_entry(2 * n + 2, message))
    return docs.empty_view(entries)


def _add_reply(docs: Any, conversation: Any, text: str) -> None:
    entry_id = conversation.next_id()

    def add(doc: Any) -> None:
        message = docs.assistant_message(docs.text_block(text))
        doc["entries"].append(docs.assistant_entry(entry_id, message))

    conversation.change(add)


async def _settle(pilot: Any, app: CodingAgentApp) -> None:
    await app.wait_rendered()
    await pilot.pause()
    await pilot.pause()


async def test_page_up_leaves_follow_mode_and_end_returns_to_it(docs) -> None:
    conversation = docs.FakeConversation(_long_view(docs))
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot, app)
        transcript = app.transcript
        assert transcript.following and transcript.scroll_y == transcript.max_scroll_y > 0

        await pilot.press("pageup")
        await _settle(pilot, app)
        assert not transcript.following
        held = transcript.scroll_y
        assert held < transcript.max_scroll_y
        assert app.query_one("#scroll-hint").display  # "scrolled up · end returns…"

        _add_reply(docs, conversation, "a reply while reading")
        await _settle(pilot, app)
        assert transcript.scroll_y == held, "a new reply does not yank a reader"

        await pilot.press("end")  # the editor is empty: End scrolls the transcript
        await _settle(pilot, app)
        assert transcript.following and transcript.scroll_y == transcript.max_scroll_y
        assert not app.query_one("#scroll-hint").display
        _add_reply(docs, conversation, "and another")
        await _settle(pilot, app)
        assert transcript.scroll_y == transcript.max_scroll_y, "following again"


async def test_page_down_to_the_bottom_follows_again_and_home_goes_to_the_top(docs) -> None:
    conversation = docs.FakeConversation(_long_view(docs))
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot, app)
        transcript = app.transcript
        await pilot.press("home")
        await _settle(pilot, app)
        assert transcript.scroll_y == 0 and not transcript.following
        for _ in range(200):
            if transcript.following:
                break
            await pilot.press("pagedown")
            await _settle(pilot, app)
        assert transcript.following and transcript.scroll_y == transcript.max_scroll_y


async def test_home_and_end_move_the_cursor_while_the_editor_holds_text(docs) -> None:
    conversation = docs.FakeConversation(_long_view(docs))
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot, app)
        await pilot.press(*"abc", "home")
        await _settle(pilot, app)
        assert app.editor.cursor_location == (0, 0)
        assert app.transcript.following  # the transcript did not move


async def test_home_typed_in_one_burst_after_text_moves_the_cursor_not_the_transcript(
    docs,
) -> None:
    """Home is the app's own (priority) binding while typed keys go on to the editor's queue:
    read in one burst (a loaded machine, a fast typist), it must act on what was typed before
    it — the editor holds text, so the cursor goes to the line's start."""
    conversation = docs.FakeConversation(_long_view(docs))
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot, app)
        for key in [*"abc", "home"]:  # all queued before any of them is handled
            app.simulate_key(key)
        await _settle(pilot, app)
        assert app.editor.text == "abc"
        assert app.editor.cursor_location == (0, 0)
        assert app.transcript.following  # the transcript did not move
        for key in ["end", "x"]:
            app.simulate_key(key)
        await _settle(pilot, app)
        assert app.editor.text == "abcx"


async def test_ctrl_up_and_down_step_message_by_message(docs) -> None:
    conversation = docs.FakeConversation(_long_view(docs, 12))
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot, app)
        transcript = app.transcript
        tops = sorted({c.virtual_region.y for c in transcript.children if c.display})
        await pilot.press("ctrl+up")
        await _settle(pilot, app)
        first = transcript.scroll_y
        assert first in tops and not transcript.following
        await pilot.press("ctrl+up")
        await _settle(pilot, app)
        second = transcript.scroll_y
        assert second in tops and second == tops[tops.index(round(first)) - 1]
        await pilot.press("ctrl+down")
        await _settle(pilot, app)
        assert transcript.scroll_y == first
        for _ in range(len(tops) + 1):
            await pilot.press("ctrl+down")
            await _settle(pilot, app)
        assert transcript.following and transcript.scroll_y == transcript.max_scroll_y


async def test_ctrl_o_keeps_a_following_view_at_the_bottom(docs) -> None:
    entries: list[dict[str, Any]] = []
    for n in range(6):
        call = {"type": "toolCall", "id": f"c{n}", "name": "bash", "arguments": {"command": "ls"}}
        entries.append(docs.assistant_entry(3 * n + 1, docs.assistant_message(call)))
        output = "\n".join(f"file{i}.txt" for i in range(30))
        entries.append(docs.tool_result_entry(3 * n + 2, f"c{n}", "bash", output))
        entries.append(docs.user_entry(3 * n + 3, f"next {n}"))
    conversation = docs.FakeConversation(docs.empty_view(entries))
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot, app)
        transcript = app.transcript
        for _ in range(2):  # expand, then collapse again
            await pilot.press("ctrl+o")
            await _settle(pilot, app)
            assert transcript.following and transcript.scroll_y == transcript.max_scroll_y
        _add_reply(docs, conversation, "the reply after collapsing")
        await _settle(pilot, app)
        assert transcript.scroll_y == transcript.max_scroll_y, "later replies land on screen"


async def test_scroll_keys_leave_a_dialog_alone(conversation, docs) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.wait_rendered()
        await pilot.press("f1")
        await docs.until(pilot, lambda: app.screen is not app.screen_stack[0])
        assert not app.check_action("scroll", ("page_up",))


@pytest.mark.parametrize("size", [(160, 45), (100, 30), (80, 24)])
async def test_the_help_screen_scrolls_with_the_keys_its_footer_names(
    conversation, docs, size: tuple[int, int]
) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=size) as pilot:
        await app.wait_rendered()
        for n in range(40):  # as many as the feature packages register
            app.tui.register_command(f"command{n}", f"what command {n} does", lambda *_: None)
        await pilot.press("f1")
        await docs.until(pilot, lambda: app.screen is not app.screen_stack[0])
        await pilot.pause()
        scroll = app.screen.query_one("#help-scroll")
        assert scroll.max_scroll_y > 0, "the key list is longer than the screen"
        await pilot.press("down", "down", "down")
        await docs.until(pilot, lambda: scroll.scroll_y == 3)
        await pilot.press("up")
        await docs.until(pilot, lambda: scroll.scroll_y == 2)
        await pilot.press("home")
        await docs.until(pilot, lambda: scroll.scroll_y == 0)
        await pilot.press("pagedown")
        await docs.until(pilot, lambda: scroll.scroll_y > 1)
        await pilot.press("end")
        await docs.until(pilot, lambda: scroll.scroll_y == scroll.max_scroll_y)
        await pilot.press("pageup")
        await docs.until(pilot, lambda: scroll.scroll_y < scroll.max_scroll_y)
        await pilot.press("home")
        await docs.until(pilot, lambda: scroll.scroll_y == 0)


async def test_page_keys_read_in_one_burst_each_scroll_a_page(docs) -> None:
    """Keys read in one burst (a held PgUp, a loaded machine) each move a page from where the
    previous one is taking the transcript, not from the last painted position."""
    conversation = docs.FakeConversation(_long_view(docs, count=60))
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot, app)
        transcript = app.transcript
        bottom = transcript.max_scroll_y
        page = transcript.scrollable_content_region.height
        assert bottom > 4 * page
        for _ in range(3):  # queued before any of them is handled
            app.simulate_key("pageup")
        await _settle(pilot, app)
        assert transcript.scroll_y == bottom - 3 * page
        assert not transcript.following
