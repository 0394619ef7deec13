"""What the TUI makes of the worker's status document (client.app_main's status listener)."""

from __future__ import annotations

from typing import Any

import pytest

from coding_agent.tui import CodingAgentApp
from coding_agent.tui.status_toasts import WorkerStatusToasts

pytestmark = pytest.mark.anyio


async def test_the_tui_says_once_that_a_model_switched_to_text_tool_calls(
    conversation: Any,
) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.wait_rendered()
        toasts = WorkerStatusToasts(app)
        document = {"pid": 7, "reloads": [], "textToolCalling": ["openai/llama3.2"]}
        toasts.listener(document)
        toasts.listener(document)  # the next revision of the same status: no second toast
        await pilot.pause()
        warnings = [n.message for n in app._notifications if n.severity == "warning"]  # pyright: ignore[reportPrivateUsage]
    assert warnings == [
        "openai/llama3.2 does not take native tool calls: it now calls tools through text "
        "blocks (--tool-calling text skips the first refusal)"
    ]


async def test_a_toast_at_80x24_keeps_a_long_path_on_one_line(conversation: Any, docs: Any) -> None:
    """Textual's toast is at most half the screen: 40 columns at 80x24, where the skills
    folder ``~/.config/coding-agent/skills/NAME/SKILL.md`` broke into ``…/S`` and ``KILL.md``."""
    from textual.widgets._toast import Toast  # pyright: ignore[reportPrivateImportUsage]

    path = "~/.config/coding-agent/skills/NAME/SKILL.md"
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await app.wait_rendered()
        app.notify(f"Put one in {path} and run /skills again")
        await docs.until(pilot, lambda: bool(app.screen.query(Toast)))
        await pilot.pause()
        width = app.screen.query_one(Toast).region.width
    assert width - 2 > len(path), width  # the padding aside, the path fits on one line
