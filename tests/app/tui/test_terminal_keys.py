"""Keys as a real terminal sends them: ESC Enter, typeahead, hints that name only deliverable keys,
and submissions made while the worker is unavailable."""

from __future__ import annotations

import os
import pty
import select
import termios
from typing import Any

import pytest
from textual import events

from coding_agent.tui import CodingAgentApp
from coding_agent.tui.keybindings import parse_keybindings
from coding_agent.tui.terminal import (
    AgentParser,
    TerminalKeys,
    _pending,  # pyright: ignore[reportPrivateUsage]
    fix_typeahead,
)

pytestmark = pytest.mark.anyio


def _keys(data: str) -> list[str]:
    parser = AgentParser()
    return [e.key for e in [*parser.feed(data), *parser.feed("")] if isinstance(e, events.Key)]


def _busy(doc: Any) -> None:
    doc["turn"] = {"inputs": [1], "generation": {"stage": "requesting", "attempt": 1}, "tools": []}


async def _feed(pilot: Any, app: CodingAgentApp, data: str) -> None:
    """Bytes as the terminal sends them, through the app's parser, into the app."""
    parser = AgentParser()
    for event in [*parser.feed(data), *parser.feed("")]:
        if isinstance(event, events.Key) and event.key != "<ignore>":
            app.post_message(event)
            await pilot.pause()


def test_esc_enter_is_alt_enter_and_the_kitty_reply_is_swallowed() -> None:
    assert _keys("\x1b\r") == ["alt+enter"]
    assert _keys("a\x1b\rb") == ["a", "alt+enter", "b"]
    assert _keys("\r") == ["enter"]
    assert _keys("\x1b[13;2u") == ["shift+enter"]
    reported: list[int] = []
    AgentParser.on_protocol = reported.append
    try:
        assert _keys("\x1b[?1u") == []  # never typed into the editor
    finally:
        AgentParser.on_protocol = None
    assert reported == [1]


def test_typeahead_read_in_cooked_mode_turns_back_into_enter() -> None:
    master, slave = pty.openpty()
    try:
        attrs = termios.tcgetattr(slave)
        assert attrs[3] & termios.ICANON and attrs[0] & termios.ICRNL  # a fresh, cooked pty
        os.write(master, b"hello\r")  # the user typed "hello" and Enter before raw mode
        readable, _, _ = select.select([slave], [], [], 10)  # the line discipline got it
        assert readable
        typed = _pending(slave)
        assert typed == b"hello\n"  # the line discipline made the Enter a newline (Ctrl+J)
        assert _keys(fix_typeahead(typed.decode())) == [*"hello", "enter"]
        assert _pending(slave) == b""
    finally:
        os.close(master)
        os.close(slave)


async def test_alt_enter_via_esc_enter_breaks_the_line_when_idle_and_follows_up_when_busy(
    conversation, docs
) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.wait_rendered()
        await _feed(pilot, app, "one\x1b\rtwo")
        assert app.editor.text == "one\ntwo" and conversation.sent == []
        await _feed(pilot, app, "\r")
        await docs.until(pilot, lambda: conversation.sent)
        assert conversation.sent == [("one\ntwo", "prompt")]
        await app.wait_rendered()
        assert app.busy
        await _feed(pilot, app, "later\x1b\r")
        await docs.until(pilot, lambda: len(conversation.sent) == 2)
        assert conversation.sent[1] == ("later", "followUp")


async def test_hints_name_only_keys_this_terminal_delivers(conversation) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.wait_rendered()
        assert app.editor.border_subtitle == "enter sends · alt+enter newline"
        assert "shift+enter" not in str(app.editor.border_subtitle)
        await pilot.press("shift+enter")  # it arrived: this terminal speaks the protocol
        assert app.editor.border_subtitle == "enter sends · shift+enter newline"
        conversation.change(_busy)
        await app.wait_rendered()
        assert app.editor.border_subtitle == "enter steers · alt+enter follows up"


async def test_hints_follow_rebound_keys(conversation) -> None:
    bindings = parse_keybindings('submit = "ctrl+s"\nfollow_up = "f5"\nnewline = "ctrl+n"\n')
    app = CodingAgentApp(conversation, keybindings=bindings)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.wait_rendered()
        assert app.editor.border_subtitle == "ctrl+s sends · ctrl+n newline"
        await pilot.press("a", "f5", "b")
        assert app.editor.text == "a\nb"
        conversation.change(_busy)
        await app.wait_rendered()
        assert app.editor.border_subtitle == "ctrl+s steers · f5 follows up"
        assert "esc to interrupt" in str(app.query_one("#turn-status").render())


def test_terminal_keys_modified_enter_needs_the_protocol() -> None:
    keys = TerminalKeys()
    assert keys.can_deliver("alt+enter") and keys.can_deliver("ctrl+j")
    assert not keys.can_deliver("shift+enter") and not keys.can_deliver("ctrl+enter")
    assert keys.saw("shift+enter") and keys.can_deliver("shift+enter")
    assert not keys.saw("shift+enter")


async def test_text_submitted_while_unavailable_is_sent_once_the_worker_is_back(
    conversation, docs
) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.wait_rendered()
        conversation.relay.detach()  # the worker restarts
        await app.wait_rendered()
        await pilot.press(*"typed ahead", "enter")
        assert app.held == ["typed ahead"] and conversation.sent == []
        assert app.editor.text == ""  # not left in the editor, nor a newline inserted
        conversation.relay.follow(conversation.state)  # back
        await docs.until(pilot, lambda: conversation.sent)
        assert conversation.sent == [("typed ahead", "prompt")] and app.held == []


async def test_the_esc_hint_is_not_shown_while_a_dialog_has_the_keys(conversation, docs) -> None:
    from chord.textual import ConfirmScreen

    conversation.change(_busy)
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.wait_rendered()
        status = app.query_one("#turn-status")
        await docs.until(pilot, lambda: "esc to interrupt" in str(status.render()))
        dialog = ConfirmScreen("Sure?", "", "Yes", "No")
        app.push_screen(dialog)
        await docs.until(pilot, lambda: "esc to interrupt" not in str(status.render()))
        await docs.until(pilot, lambda: dialog.armed)  # it answers no key before
        await pilot.press("escape")
        await docs.until(pilot, lambda: "esc to interrupt" in str(status.render()))


async def test_the_status_timer_ticking_while_the_app_closes_paints_nothing(conversation) -> None:
    """The status line's timer belongs to the app and can fire once more while the app closes,
    after its screens are gone (a CI run under load caught it: ``ScreenStackError`` raised from
    the tick ended the app with a traceback). Such a tick paints nothing and raises nothing."""
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.wait_rendered()
        conversation.change(_busy)  # a status line to paint: the tick reaches the dialog check
        await app.wait_rendered()
        await pilot.pause()
    assert not app.screen_stack
    app._tick()  # pyright: ignore[reportPrivateUsage] - the timer's callback, as it fires
