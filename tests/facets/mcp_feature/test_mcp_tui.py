"""The ``/mcp`` panel in a real Textual app (Pilot), over the loopback source: each server's
state, tools, resources and prompts; a failed server with its stderr; ``/mcp restart``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from mcp_support import SDK_LEAKS, session, stdio_server, write_config
from textual.app import App, ComposeResult
from textual.containers import Vertical

from chord.context import BACKGROUND
from chord.facets import create_facet_host
from chord.remote import LoopbackServiceSource
from chord.textual import TextualTui, tui_facet
from facets_mcp.tui import McpPanel, panel_text
from facets_mcp.tui import tui_facet as mcp_tui_facet

pytestmark = [pytest.mark.anyio, *SDK_LEAKS]


class PanelApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.tui = TextualTui(self, ready=False)

    def compose(self) -> ComposeResult:
        yield Vertical(id="panels")

    def on_mount(self) -> None:
        self.tui.mark_ready()

    def panel(self) -> McpPanel:
        return self.query_one(McpPanel)

    async def shows(self, predicate: Callable[[str], bool]) -> str:
        panel = self.panel()
        changed = anyio.Event()

        def notify() -> None:
            changed.set()

        stop = panel.listen(notify)
        try:
            with anyio.fail_after(20):
                while not predicate(panel.text):
                    await changed.wait()
                    changed = anyio.Event()
        finally:
            stop()
        return panel.text


async def test_the_panel_shows_states_tools_resources_prompts_and_stderr(tmp_path: Path) -> None:
    write_config(tmp_path / "config", {"echo": stdio_server(), "broken": stdio_server("--fail")})
    app = PanelApp()
    async with session(tmp_path) as s, app.run_test() as pilot:
        source = LoopbackServiceSource(s.host.services, task_group=s.group)
        async with create_facet_host([tui_facet(app.tui), mcp_tui_facet], service_sources=[source]):
            assert "mcp" in app.tui.commands
            await pilot.pause()
            assert app.panel().display is False
            assert await app.tui.run_command("/mcp", BACKGROUND) is True
            assert app.panel().display is True
            text = await app.shows(lambda t: "● echo (stdio) ready" in t and "✗ broken" in t)
            assert "echo (stdio) ready · 7 tools" in text
            assert "tools: echo, add, pixel, hang, garbage, boom, die" in text
            assert "resource: greeting <memo://greeting>" in text
            assert "prompt: review(code)" in text
            assert "stderr| cannot start: missing API key" in text
            assert "retrying in" in text
            assert await app.tui.run_command("/mcp restart echo", BACKGROUND) is True
            await app.shows(lambda t: "echo (stdio) ready · 7 tools · 1 restart" in t)
            assert await app.tui.run_command("/mcp", BACKGROUND) is True
            assert app.panel().display is False


def test_panel_text_without_servers_says_where_to_configure() -> None:
    text = panel_text({"servers": [], "errors": ["x.json: not valid JSON"]})
    assert "! x.json: not valid JSON" in text
    assert "~/.config/coding-agent/mcp.json" in text and ".mcp.json" in text
