"""The TUI's terminal notifications (:mod:`coding_agent.tui.notify`): which escape, the tmux
wrapping, and when a notification of the worker's status is written (new keys only, the
configured events, not while the terminal reports that the TUI has focus)."""

from __future__ import annotations

from typing import Any

import pytest
from textual import events
from textual.app import App

from coding_agent.settings.notifications import NotificationSettings
from coding_agent.tui.notify import TerminalNotifier, osc_style, terminal_notification

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("env", "style"),
    [
        ({"TERM_PROGRAM": "iTerm.app", "TERM": "xterm-256color"}, "osc9"),
        ({"TERM_PROGRAM": "WezTerm"}, "osc9"),
        ({"TERM": "xterm-kitty"}, "osc9"),
        ({"TERM": "rxvt-unicode-256color"}, "osc777"),
        ({"TERM": "foot"}, "osc777"),
        ({"TERM_PROGRAM": "ghostty", "TERM": "xterm-ghostty"}, "osc777"),
        ({"TERM_PROGRAM": "tmux", "TERM": "tmux-256color", "LC_TERMINAL": "iTerm2"}, "osc9"),
        ({}, "osc9"),
    ],
)
def test_the_escape_follows_what_the_terminal_says_it_is(env: dict[str, str], style: str) -> None:
    assert osc_style(env) == style


def test_the_escapes_and_the_tmux_passthrough() -> None:
    assert terminal_notification("t", "m", "osc9", tmux=False) == "\x1b]9;t: m\x07\x07"
    assert (
        terminal_notification("a;b", "m\x1b[31m", "osc777", tmux=False)
        == "\x1b]777;notify;a,b;m [31m\x07\x07"
    )
    assert (
        terminal_notification("t", "m", "osc777", tmux=True)
        == "\x1bPtmux;\x1b\x1b]777;notify;t;m\x07\x1b\\\x07"
    )
    assert terminal_notification("t", "m", "bell", tmux=True) == "\x07"


class Recording(TerminalNotifier):
    def __init__(self, app: App[Any], settings: NotificationSettings) -> None:
        super().__init__(app, settings, env={})
        self.written: list[tuple[str, str]] = []

    def write(self, title: str, message: str) -> None:
        self.written.append((title, message))


def _status(*keys: str, session: str = "s1", event: str = "attention") -> dict[str, Any]:
    return {
        "sessionId": session,
        "notifications": [
            {"key": k, "event": event, "title": "coding-agent: p", "message": f"m {k}"}
            for k in keys
        ],
    }


async def test_new_keys_are_written_unless_the_terminal_says_the_tui_has_focus() -> None:
    app: App[None] = App()
    async with app.run_test() as pilot:
        notifier = Recording(app, NotificationSettings())
        notifier.listener(_status("a"))  # the first word: what was there is seen
        notifier.listener(_status("a", "b"))  # no focus report yet: written
        assert notifier.written == [("coding-agent: p", "m b")]
        app.post_message(events.AppBlur())
        await pilot.pause()
        assert not notifier.looking
        notifier.listener(_status("a", "b", "c"))
        app.post_message(events.AppFocus())
        await pilot.pause()
        assert notifier.looking
        notifier.listener(_status("a", "b", "c", "d"))  # looked at: not written
        notifier.listener(_status("c", "d", "e", event="turn"))  # not a terminal event
        assert notifier.written == [("coding-agent: p", "m b"), ("coding-agent: p", "m c")]
        notifier.listener(_status("x", session="s2"))  # another session: its first word
        assert len(notifier.written) == 2


async def test_when_focused_and_the_events_are_configurable() -> None:
    app: App[None] = App()
    async with app.run_test() as pilot:
        settings = NotificationSettings(terminal=("turn",), when_focused=True)
        notifier = Recording(app, settings)
        app.post_message(events.AppBlur())
        await pilot.pause()
        app.post_message(events.AppFocus())
        await pilot.pause()
        notifier.listener(_status())
        notifier.listener(_status("a", event="attention"))
        notifier.listener(_status("a", "b", event="turn"))
        assert notifier.written == [("coding-agent: p", "m b")]
