"""A panel removed and mounted again at once (a reloaded facet) may reuse its widget id."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from chord.textual import TextualTui

pytestmark = pytest.mark.anyio


class PanelApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.tui = TextualTui(self)

    def compose(self) -> ComposeResult:
        yield Vertical(id="panels")


async def test_a_panel_remounted_while_its_old_widget_leaves_replaces_it() -> None:
    app = PanelApp()
    async with app.run_test() as pilot:
        remove = app.tui.mount_panel("mode", lambda: Static("old", id="mode"))
        await pilot.pause()
        # What a facet reload does: the old facet's disposal, then the new facet's activation,
        # with no pause between (the old widget is still in the DOM).
        remove()
        app.tui.mount_panel("mode", lambda: Static("new", id="mode"))
        await pilot.pause()
        await pilot.pause()
        shown = [str(widget.render()) for widget in app.query("#mode").results(Static)]
        assert shown == ["new"]
