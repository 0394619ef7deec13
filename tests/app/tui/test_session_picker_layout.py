"""The session picker at 80x24: its help line (the keys, and how many empty sessions are left
out) stays on screen below a long list, and sessions with no prompt are left out."""

from __future__ import annotations

from typing import Any

import pytest
from textual.containers import Vertical
from textual.widgets import OptionList, Static

from coding_agent.tui.widgets.session_picker import SessionPickerApp

pytestmark = pytest.mark.anyio


def _session(n: int, prompt: str | None) -> dict[str, Any]:
    return {
        "id": f"20261207-0100{n:02d}-aa11{n:02d}",
        "lastActivity": "2026-12-07T01:00:00+00:00",
        "firstPrompt": prompt,
        "model": "faux/faux-1",
        "size": 18_432,
    }


async def test_the_help_line_is_on_screen_at_80x24_under_a_long_list() -> None:
    sessions = [_session(n, f"prompt number {n}") for n in range(12)]
    sessions += [_session(n, None) for n in range(12, 15)]
    app = SessionPickerApp(sessions)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        box = app.screen.query_one(Vertical)
        help_line = app.screen.query_one("#picker-help", Static)
        listing = app.screen.query_one("#sessions", OptionList)
        assert listing.option_count == 12, "the three with no prompt are left out"
        assert "3 session(s) with no prompt hidden" in str(help_line.render())
        # the help line lies inside the dialog's box (it was clipped below a 20-row list)
        assert help_line.region.height == 2
        assert help_line.region.bottom <= box.content_region.bottom
