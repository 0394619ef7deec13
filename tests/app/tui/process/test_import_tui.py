"""An imported Claude Code session opens in the TUI like any other: its conversation is shown
(tool calls, a tool we do not have as text, thinking) and the next prompt continues it. The real
worker process and the real TUI, driven with Textual's Pilot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coding_agent.importing.store import import_session, read_session_file

from .test_tree_commands import keeper, turn, user_texts

pytestmark = pytest.mark.anyio

SOURCE = Path(__file__).parents[2] / "fixtures" / "session_imports" / "claude_tools.jsonl"


async def test_an_imported_session_shows_its_conversation_and_continues(
    kit: Any, project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    session = await import_session(read_session_file(SOURCE), cwd=project, env=agent_env)
    seen: dict[str, Any] = {}

    async def resumed(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app) and kit.entries(app), "the conversation")
        seen["prompts"] = user_texts(kit, app)
        seen["answers"] = kit.assistant_texts(app)
        seen["results"] = [r["toolName"] for r in kit.tool_results(app)]
        await turn(kit, pilot, "thanks", "Noted.")

    steps = [{"text": "unused"}] * 4 + [{"text": "Noted."}]  # four answers were imported
    await kit.drive(session, keeper(kit, session, agent_env, steps, tmp_path), resumed)
    assert seen["prompts"][0] == "The checkout test is flaky, see the screenshot."
    assert seen["answers"][-1] == "The test passes now."
    assert "It sleeps; I will track this." in seen["answers"]
    assert seen["results"] == ["read", "edit", "bash"]
