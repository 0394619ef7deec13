"""A slash command that did not do its job, in the real TUI over a real worker (a newcomer's
first day): its line stays in the editor to be fixed, as Claude Code and pi keep it; a command
that did its job clears the editor."""

from __future__ import annotations

from typing import Any

import pytest

from coding_agent.session_files.folders import Session

pytestmark = pytest.mark.anyio


async def test_a_refused_command_keeps_its_line_and_a_done_one_clears_it(
    kit: Any, session: Session, agent_env: dict[str, str]
) -> None:
    keeper = kit.supervisor(session, agent_env)
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        await kit.wait_for(pilot, lambda: "model" in app.tui.commands, "the /model command")
        await pilot.press(*"/model nosuchmodel", "enter")
        await kit.wait_for(
            pilot,
            lambda: any("not provider/id" in m for _s, m in kit.toasts(app)),
            "the refusal",
        )
        await kit.wait_for(pilot, lambda: app.editor.text, "the line back in the editor")
        seen["kept"] = app.editor.text
        app.editor.load_text("")
        await pilot.press(*"/model faux/faux-1", "enter")
        await kit.wait_for(
            pilot, lambda: ("information", "Model: faux/faux-1") in kit.toasts(app), "the switch"
        )
        seen["after_done"] = app.editor.text

    await kit.drive(session, keeper, test)
    assert seen["kept"] == "/model nosuchmodel"
    assert seen["after_done"] == ""
