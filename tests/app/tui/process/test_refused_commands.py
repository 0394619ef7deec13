"""A slash command that did not do its job, in the real TUI over a real worker (a newcomer's
first day): its line stays in the editor to be fixed, as Claude Code and pi keep it; a command
that did its job clears the editor."""

from __future__ import annotations

from pathlib import Path
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


async def test_a_project_command_waiting_for_trust_is_named_not_fuzzy_matched(
    kit: Any,
    session: Session,
    project: Path,
    agent_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``/test`` of an untrusted project's ``.claude/commands/test.md``: the toast says it loads
    after ``/trust`` (was: "did you mean /trust, /context, /tree?"), and the line stays."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # a private trust store
    (project / ".claude" / "commands").mkdir(parents=True)
    (project / ".claude" / "commands" / "test.md").write_text("Run the tests.\n")
    keeper = kit.supervisor(session, agent_env)
    said: list[str] = []

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        await kit.wait_for(pilot, lambda: "trust" in app.tui.commands, "the worker's commands")
        await pilot.press(*"/test", "enter")
        await kit.wait_for(
            pilot, lambda: any("/test" in m for _s, m in kit.toasts(app)), "the toast on /test"
        )
        said.extend(m for _s, m in kit.toasts(app) if "/test" in m)
        said.append(app.editor.text)

    await kit.drive(session, keeper, test)
    toast, kept = said
    assert toast.startswith(
        "/test is this project's command (.claude/commands/test.md); it loads after /trust"
    ), toast
    assert "did you mean" not in toast
    assert kept == "/test"
