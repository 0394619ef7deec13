"""Permission modes in the coding agent itself: a real worker process and the real TUI (Pilot).

* ``--permission-mode plan`` (the supervisor passes it to the first worker): the label shows
  ``plan``, a ``write`` the model calls is blocked without a dialog and the file is not written;
* Shift+Tab in the app changes the mode in the worker; a SIGKILLed worker is restarted *without*
  the flag and the TUI shows the stored mode again (the durable value wins);
* the worker's command line refuses a value that is not a mode (exit status 2, a clear message).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from coding_agent.session_files.folders import Session, create_session
from coding_agent.supervisor import WorkerSupervisor, worker_command
from coding_agent.tui import CodingAgentApp, run_client
from coding_agent.worker.main import WorkerConfig, apply_permission_mode, open_session_host
from facets_approval.tui import MODE_PANEL_ID

pytestmark = pytest.mark.anyio

TIMEOUT = 60.0


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


@pytest.fixture
def session(project: Path, agent_env: dict[str, str]) -> Session:
    return create_session(project, env=agent_env)


async def wait_for(pilot: Any, predicate: Callable[[], object], what: str) -> None:
    """Let the app run until ``predicate()`` holds (between frames); fail naming ``what``."""
    try:
        with anyio.fail_after(TIMEOUT):
            while not predicate():
                await pilot.pause(0.02)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for: {what}") from None


def shown_mode(app: CodingAgentApp) -> str | None:
    # The app imports each facet package under a private generation name, so the label is not
    # an instance of this test's ``ModeLabel`` class: read it by id and attribute.
    found = app.query(f"#{MODE_PANEL_ID}")
    return getattr(found.first(), "permission_mode", None) if found else None


def tool_results(app: CodingAgentApp) -> list[dict[str, Any]]:
    view = app.view
    entries = list(view["entries"]) if isinstance(view, dict) else []
    return [
        message
        for entry in entries
        for message in entry.get("model", [])
        if message.get("role") == "toolResult"
    ]


async def drive(
    session: Session, keeper: WorkerSupervisor, test: Callable[[Any], Awaitable[None]]
) -> None:
    async def pilot_then_exit(pilot: Any) -> None:
        await test(pilot)
        pilot.app.exit()

    with anyio.fail_after(TIMEOUT * 4):
        await run_client(
            session,
            supervisor=keeper,
            headless=True,
            size=(110, 45),
            auto_pilot=pilot_then_exit,
        )


async def test_the_flag_sets_plan_mode_shift_tab_changes_it_and_a_restart_keeps_it(
    session: Session, agent_env: dict[str, str], tmp_path: Path, project: Path
) -> None:
    steps = [
        {
            "text": "I will write a file.",
            "toolCalls": [{"name": "write", "arguments": {"path": "notes.txt", "content": "hi"}}],
        },
        {"text": "Here is my plan instead."},
        {
            "text": "Writing it now.",
            "toolCalls": [{"name": "write", "arguments": {"path": "notes2.txt", "content": "yes"}}],
        },
        {"text": "Done."},
    ]
    faux = tmp_path / "faux-script.json"
    faux.write_text(json.dumps(steps))
    keeper = WorkerSupervisor(
        session,
        exit_with_parent=True,
        env=agent_env,
        faux_script=faux,
        permission_mode="plan",
        on_event=lambda line: print(f"supervisor: {line}"),
    )
    assert keeper.command()[-2:] == ["--permission-mode", "plan"]

    async def test(pilot: Any) -> None:
        app = pilot.app
        assert isinstance(app, CodingAgentApp)
        await wait_for(pilot, lambda: shown_mode(app) == "plan", "the plan mode label")
        await pilot.pause()
        shown = app.query_one(f"#{MODE_PANEL_ID}")
        assert shown.region.height == 1 and shown.region.width > 0  # on screen, one line
        assert "mode: plan" in str(shown.render())
        await pilot.press(*"write notes", "enter")
        await wait_for(pilot, lambda: tool_results(app), "the blocked write's result")
        (result,) = tool_results(app)
        assert result["isError"] is True
        assert "plan mode" in "".join(b.get("text", "") for b in result["content"])
        assert not (project / "notes.txt").exists()  # blocked without a dialog: nothing ran
        assert app.screen is app.screen_stack[0]
        await pilot.press("shift+tab")  # plan -> auto
        await wait_for(pilot, lambda: shown_mode(app) == "auto", "the auto mode label")
        assert app.editor.text == ""  # the editor never saw the key
        # The restarted worker gets no --permission-mode: the stored mode wins.
        assert "--permission-mode" not in keeper.command()
        pid = keeper.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        await wait_for(pilot, lambda: keeper.restarts == 1, "the restarted worker")
        client: Any = app.client  # the remote conversation client counts its attachments
        await wait_for(pilot, lambda: client.attachments == 2, "the reconnected view")
        await wait_for(pilot, lambda: shown_mode(app) == "auto", "the mode after the restart")
        # The new worker decides in the stored mode (auto): the next write runs, unasked.
        await pilot.press(*"do it", "enter")
        await wait_for(pilot, lambda: len(tool_results(app)) == 2, "the second write's result")
        assert tool_results(app)[1]["isError"] is False
        assert (project / "notes2.txt").read_text() == "yes"
        assert app.screen is app.screen_stack[0]  # no dialog was ever shown

    await drive(session, keeper, test)


def test_the_worker_refuses_a_value_that_is_not_a_mode(
    session: Session, agent_env: dict[str, str]
) -> None:
    argv = worker_command(session.path, exit_with_parent=True, permission_mode="yolo")
    done = subprocess.run(
        argv, env=agent_env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "argument --permission-mode: invalid choice: 'yolo'" in done.stderr
    assert "ask" in done.stderr and "accept-edits" in done.stderr and "auto" in done.stderr
    assert "READY" not in done.stdout


async def test_the_session_host_stores_the_flag_before_resume_and_refuses_bad_values(
    session: Session, agent_env: dict[str, str]
) -> None:
    # open_session_host (what the worker and the headless modes run) with a permission mode.
    async def mode_of(runtime: Any) -> Any:
        root = await runtime.harness.harness.root(BACKGROUND)
        plugins = await root.commit(
            lambda tx, _ctx: tx.snapshot("session").get("plugins", {}), BACKGROUND
        )
        return plugins.get("approval", {}).get("mode")

    config = WorkerConfig(session=session, fsync=False, env=agent_env, permission_mode="auto")
    async with open_session_host(config) as runtime:
        assert await mode_of(runtime) == "auto"
        with pytest.raises(ValueError, match="Invalid permission mode 'sometimes'"):
            await apply_permission_mode(runtime.host, "sometimes")
        assert await mode_of(runtime) == "auto"
    plain = WorkerConfig(session=session, fsync=False, env=agent_env)
    async with open_session_host(plain) as runtime:
        assert await mode_of(runtime) == "auto"  # no flag: the stored mode stands
    bare = WorkerConfig(session=session, fsync=False, env=agent_env, installed_features=False)
    async with open_session_host(bare) as runtime:
        with pytest.raises(ValueError, match="needs the approval feature"):
            await apply_permission_mode(runtime.host, "plan")
