"""An enabled Claude Code plugin's commands in the real TUI over a real worker: a real published
plugin (example-plugin, anthropics/claude-plugins-official: tests/app/fixtures/claude_plugins)
installed in the session's ``~/.claude/plugins``; ``/example-plugin:example-command`` and its
plain name are in the palette and expand; a plugin ``help.md`` leaves the app's own ``/help``
alone, without a warning. Driven through the keyboard with Textual's Pilot."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from coding_agent.session_files.folders import Session

pytestmark = pytest.mark.anyio


async def test_a_plugins_commands_are_in_the_palette_and_expand(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, claude_plugins: Callable[..., Path],
) -> None:  # fmt: skip
    claude = Path(agent_env["CLAUDE_CONFIG_DIR"])
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))  # the TUI's and the worker's
    folder = claude_plugins(claude, "example-plugin")
    commands = folder / "commands"
    shutil.copy(commands / "example-command.md", commands / "help.md")  # as hookify ships one
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, [{"text": "ok"}]))
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        await kit.wait_for(
            pilot, lambda: "example-plugin:example-command" in app.tui.commands, "the commands"
        )
        seen["commands"] = set(app.tui.commands)
        await pilot.press(*"/example-plugin:ex")
        await kit.wait_for(pilot, lambda: app.editor.palette.display, "the palette")
        seen["rows"] = [(s.label, s.hint, s.description) for s in app.editor.palette.suggestions]
        await pilot.press("tab", *"hello there", "enter")
        await kit.wait_for(pilot, lambda: "ok" in kit.assistant_texts(app), "the answer")
        seen["user"] = [
            e["model"][0]["content"] for e in kit.entries(app) if e["kind"] == "pi.user"
        ]
        seen["toasts"] = kit.toasts(app)

    await kit.drive(session, keeper, test)
    assert {"example-plugin:example-command", "example-command", "example-plugin:help"} <= seen[
        "commands"
    ]
    label, hint, description = seen["rows"][0]
    assert label == "/example-plugin:example-command"
    assert hint == "<required-arg> [optional-arg]"
    assert description.startswith("An example slash command")
    (sent,) = seen["user"]
    text = sent if isinstance(sent, str) else sent[0]["text"]
    assert "The user invoked this command with: hello there" in text
    assert not [m for _, m in seen["toasts"] if "help.md" in m]
