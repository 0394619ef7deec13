"""A command's ``model:`` and ``allowed-tools:`` in the real TUI over a real worker (issue 39
deliver 2): the command's turn answers on its model and runs its allowed ``echo`` without a
dialog, the transcript says which model answered; the next prompt is the conversation's again
and the same command asks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coding_agent.session_files.folders import Session
from coding_agent.tui.widgets.messages import entry_widget
from pico3 import ViewDecoder

pytestmark = pytest.mark.anyio

COMMAND = """---
description: Say hello quickly
model: faux/faux-big
allowed-tools: Bash(echo:*)
---
Say hello.
"""


def _models(kit: Any, app: Any) -> list[tuple[str, str]]:
    """``(text, model)`` of every finished answer with text."""
    found: list[tuple[str, str]] = []
    for entry in kit.entries(app):
        for message in entry.get("model", []) if entry["kind"] == "pi.assistant" else []:
            text = "".join(b["text"] for b in message["content"] if b["type"] == "text")
            if text:
                found.append((text, message["model"]))
    return found


async def test_a_commands_model_and_allowed_tools_hold_for_its_turn_only(
    kit: Any,
    session: Session,
    agent_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", agent_env["CLAUDE_CONFIG_DIR"])  # this TUI's too
    commands = Path(agent_env["CLAUDE_CONFIG_DIR"]) / "commands"
    commands.mkdir(parents=True)
    (commands / "hello.md").write_text(COMMAND)
    echo = {"toolCalls": [{"name": "bash", "arguments": {"command": "echo granted"}}]}
    steps = [echo, {"text": "hello done"}, echo, {"text": "second done"}]
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, steps))
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        await pilot.press(*"/hello", "enter")
        await kit.wait_for(pilot, lambda: "hello done" in kit.assistant_texts(app), "the answer")
        seen["results"] = [r["content"][0]["text"] for r in kit.tool_results(app)]
        user = next(e for e in kit.entries(app) if e["kind"] == "pi.user")
        widget = entry_widget(ViewDecoder().entry(user))
        seen["user_line"] = str(widget.render()) if widget is not None else ""
        await pilot.press(*"again", "enter")
        await kit.wait_for(pilot, lambda: kit.dialog_ready(app), "the approval dialog")
        seen["asked"] = True
        await pilot.press("escape")  # no: the call is denied, the turn goes on
        await kit.wait_for(pilot, lambda: "second done" in kit.assistant_texts(app), "answer 2")
        seen["models"] = _models(kit, app)

    await kit.drive(session, keeper, test)
    assert seen["results"] == ["granted"]  # ran without a dialog
    assert seen["user_line"] == "Say hello.\n↳ model for this turn: faux/faux-big"
    assert seen["asked"]
    assert seen["models"] == [("hello done", "faux-big"), ("second done", "faux-1")]
