"""``!cmd`` and ``!!cmd`` in the real TUI over a real worker (issue 18 item 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coding_agent.session_files.folders import Session
from coding_agent.tui.commands.shell import SHELL_PANEL_ID

pytestmark = pytest.mark.anyio


def shell_entries(kit: Any, app: Any) -> list[dict[str, Any]]:
    return [e for e in kit.entries(app) if e["kind"] == "coding-agent.shell"]


async def test_bang_runs_in_the_project_and_double_bang_stays_out_of_the_context(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, [{"text": "ok"}]))
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        await pilot.press(*"!cat README.md; echo made > made.txt", "enter")
        await kit.wait_for(pilot, lambda: len(shell_entries(kit, app)) == 1, "the ! entry")
        await pilot.press(*"!!echo private; exit 3", "enter")
        await kit.wait_for(pilot, lambda: len(shell_entries(kit, app)) == 2, "the !! entry")
        await app.wait_rendered()
        seen["shown"] = [
            str(w.render()) for w in app.transcript.query(".shell") if w.id != SHELL_PANEL_ID
        ]
        seen["before"] = shell_entries(kit, app)
        kit.kill_worker(keeper)  # durable: a new worker shows the same entries
        await kit.wait_for(pilot, lambda: app.view is None or not shell_entries(kit, app), "gone")
        await kit.wait_for(pilot, lambda: len(shell_entries(kit, app)) == 2, "entries again")
        seen["after"] = shell_entries(kit, app)

    await kit.drive(session, keeper, test)
    included, excluded = seen["before"]
    assert (session.cwd / "made.txt").read_text() == "made\n"  # ran in the project folder
    assert included["data"]["command"] == "cat README.md; echo made > made.txt"
    assert included["data"]["exitCode"] == 0 and not included["data"]["excluded"]
    assert "A project for the client tests." in included["data"]["output"]
    (message,) = included["model"]
    assert message["role"] == "user"
    assert message["content"].startswith("Ran `cat README.md; echo made > made.txt`\n```\n")
    assert "A project for the client tests." in message["content"]
    assert "model" not in excluded or not excluded["model"]  # !! is never sent to the model
    assert excluded["data"]["excluded"] and excluded["data"]["exitCode"] == 3
    assert excluded["data"]["output"] == "private\n\nCommand exited with code 3"
    assert seen["after"] == seen["before"]
    assert seen["shown"][0].startswith("! $ cat README.md")
    assert seen["shown"][1].startswith("!! $ echo private; exit 3  (not sent to the model)  exit 3")


async def test_a_running_command_streams_and_esc_stops_it(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, [{"text": "ok"}]))
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        await pilot.press(*"!echo started; sleep 60; echo never", "enter")

        def live() -> str:
            panels = app.query(f"#{SHELL_PANEL_ID}")
            return str(panels.first().render()) if panels else ""

        await kit.wait_for(pilot, lambda: "started" in live(), "the streamed output")
        seen["live"] = live()
        await pilot.press("escape")
        await kit.wait_for(pilot, lambda: shell_entries(kit, app), "the stopped command's entry")
        await kit.wait_for(pilot, lambda: not app.query(f"#{SHELL_PANEL_ID}"), "the panel gone")

        seen["entry"] = shell_entries(kit, app)[0]

    await kit.drive(session, keeper, test)
    assert seen["live"].startswith("! $ echo started; sleep 60; echo never  running")
    data = seen["entry"]["data"]
    assert data["cancelled"] is True
    assert data["output"] == "started\n\nCommand aborted"
    assert "never" not in data["output"]
