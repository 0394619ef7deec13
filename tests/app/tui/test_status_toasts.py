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
