"""``/sessions`` and ``/resume`` switch the running TUI to another session (issue 8 §5).

Real worker processes, driven through Textual's Pilot: the TUI starts on one session, switches
to another whose transcript was written before (a headless turn), and shows it; the worker the
TUI had started for the first session stops, as it would on quit, while a worker it only
reused keeps running. The label helpers are checked on their own.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from coding_agent.cli.headless import run_print
from coding_agent.session_files.folders import Session, create_session
from coding_agent.session_files.index import first_prompt
from coding_agent.settings.run_options import RunFlags
from coding_agent.supervisor import WorkerSupervisor
from coding_agent.tui.commands.sessions import session_age, session_label, summarize_reload

pytestmark = pytest.mark.anyio


async def _earlier_session(project: Path, agent_env: dict[str, str], tmp_path: Path) -> Session:
    """Another session of the project with one finished turn in its storage."""
    other = create_session(project, env=agent_env)
    script = tmp_path / "other-script.json"
    script.write_text('[{"text": "The other answer."}]')
    out = io.StringIO()
    code = await run_print(
        "hello from the other session", other, out=out, model="faux/faux-1", faux_script=script
    )
    assert code == 0, out.getvalue()
    return other


async def test_resume_switches_the_running_tui_to_another_session(
    kit: Any,
    session: Session,
    agent_env: dict[str, str],
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", agent_env["XDG_STATE_HOME"])
    other = await _earlier_session(project, agent_env, tmp_path)
    keeper = kit.supervisor(session, agent_env)
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the first session's view")
        seen["before"] = kit.assistant_texts(app)
        await pilot.press(*f"/resume {other.id}", "enter")
        await kit.wait_for(
            pilot, lambda: "The other answer." in kit.assistant_texts(app), "the other transcript"
        )
        seen["session"] = app.client.session.session_id
        await kit.wait_for(pilot, lambda: app.client.status is not None, "the new status")
        seen["status"] = app.client.status["sessionId"]
        # Quitting stops the worker this TUI started; leaving the session does the same.
        await kit.wait_for(pilot, lambda: not session.worker_running(), "the old worker to stop")
        await kit.wait_for(
            pilot, lambda: any("Resumed session" in m for _, m in kit.toasts(app)), "the toast"
        )
        await pilot.press(*"/resume nosuchsession", "enter")
        await kit.wait_for(
            pilot,
            lambda: any(s == "error" and "nosuchsession" in m for s, m in kit.toasts(app)),
            "the unknown-id error",
        )
        seen["after_error"] = app.client.session.session_id

    run = await kit.drive(session, keeper, test)
    assert seen["before"] == []
    assert seen["session"] == other.id
    assert seen["status"] == other.id
    assert seen["after_error"] == other.id
    assert run.session is not None and run.session.id == other.id and run.switches == 1
    assert not other.worker_running()  # the TUI started the new worker too, and quit stopped it


async def test_sessions_picker_lists_both_sessions_and_switches_to_the_choice(
    kit: Any,
    session: Session,
    agent_env: dict[str, str],
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", agent_env["XDG_STATE_HOME"])
    other = await _earlier_session(project, agent_env, tmp_path)
    keeper = kit.supervisor(session, agent_env)
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the first session's view")
        await pilot.press(*"/sessions", "enter")
        await kit.wait_for(pilot, lambda: kit.picker_open(app, "Sessions of"), "the picker")
        seen["options"] = kit.options(app)
        index = next(i for i, o in enumerate(seen["options"]) if o.startswith(other.id))
        await pilot.press(*["down"] * index, "enter")
        await kit.wait_for(
            pilot, lambda: "The other answer." in kit.assistant_texts(app), "the other transcript"
        )
        seen["session"] = app.client.session.session_id

    run = await kit.drive(session, keeper, test)
    mine = next(o for o in seen["options"] if o.startswith(session.id))
    theirs = next(o for o in seen["options"] if o.startswith(other.id))
    assert len(seen["options"]) == 2
    assert mine.endswith("(this session)") and "(no prompt yet)" in mine
    assert "hello from the other session" in theirs and "just now" in theirs
    assert seen["session"] == other.id
    assert run.session is not None and run.session.id == other.id


async def test_first_prompt_and_labels_read_the_head_of_the_storage(
    session: Session, agent_env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    other = await _earlier_session(project, agent_env, tmp_path)
    assert first_prompt(other) == "hello from the other session"
    assert first_prompt(other, width=10) == "hello fro…"
    assert first_prompt(session) is None  # no storage yet
    label = session_label(other, current=session.id, now=other.created + timedelta(hours=5))
    assert label == f"{other.id}  5 h ago  hello from the other session"


def test_session_age_uses_the_largest_whole_unit() -> None:
    now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    assert session_age(now - timedelta(seconds=59), now) == "just now"
    assert session_age(now - timedelta(minutes=3, seconds=5), now) == "3 min ago"
    assert session_age(now - timedelta(hours=2, minutes=59), now) == "2 h ago"
    assert session_age(now - timedelta(days=9), now) == "9 d ago"
    assert session_age(now + timedelta(minutes=1), now) == "just now"  # a clock step back


def test_reload_summary_names_what_reloaded_and_every_problem() -> None:
    ok = {"package": "greeter", "outcome": "reloaded", "ok": True, "message": "fine"}
    bad = {"package": "broken", "outcome": "failed", "ok": False, "message": "SyntaxError: x"}
    new = {"package": "fresh", "outcome": "restart_required", "ok": False, "message": "new"}
    text, severity = summarize_reload([ok], [ok])  # type: ignore[list-item]
    assert (text, severity) == ("Reloaded — worker: greeter; TUI: greeter", "information")
    text, severity = summarize_reload([ok, new], [ok])  # type: ignore[list-item]
    assert severity == "warning" and text.splitlines()[1] == "fresh (worker): new"
    text, severity = summarize_reload(None, [bad], worker_error="unavailable")  # type: ignore[list-item]
    assert severity == "error"
    assert text.splitlines() == [
        "Reloaded — TUI: nothing",
        "worker: unavailable",
        "broken (TUI): SyntaxError: x",
    ]


async def test_a_tui_that_starts_no_workers_switches_only_to_served_sessions(
    kit: Any,
    session: Session,
    agent_env: dict[str, str],
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A TUI without a supervisor (it only attaches) never starts workers: switching to a
    session nobody serves is refused and the TUI stays where it was; switching to a served one
    works, and the worker left behind keeps running (this TUI did not start it)."""
    monkeypatch.setenv("XDG_STATE_HOME", agent_env["XDG_STATE_HOME"])
    other = create_session(project, env=agent_env)
    keeper = WorkerSupervisor(session, exit_with_parent=True, env=agent_env)
    other_keeper = WorkerSupervisor(other, exit_with_parent=True, env=agent_env)
    await keeper.ensure_started()
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the view")
        await pilot.press(*f"/resume {other.id}", "enter")
        await kit.wait_for(
            pilot,
            lambda: any(s == "error" and "no running worker" in m for s, m in kit.toasts(app)),
            "the refusal",
        )
        seen["refused"] = app.client.session.session_id
        typed = f"/resume {other.id}"
        await kit.wait_for(pilot, lambda: app.editor.text == typed, "the refused line kept")
        await other_keeper.ensure_started()
        await pilot.press("enter")  # the same line again, now that the worker serves
        await kit.wait_for(
            pilot,
            lambda: (
                app.client.session.session_id == other.id
                and kit.idle(app)
                and app.client.status is not None
                and app.client.status["sessionId"] == other.id
            ),
            "the switch to the served session",
        )
        seen["left_running"] = session.worker_running()

    try:
        await kit.drive(session, None, test)
        assert other.worker_running()  # quitting leaves it running too
    finally:
        await keeper.stop()
        await other_keeper.stop()
    assert seen["refused"] == session.id
    assert seen["left_running"]


async def test_resume_refuses_a_served_session_when_the_run_has_run_scoped_flags(
    kit: Any,
    session: Session,
    agent_env: dict[str, str],
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A TUI started with ``--disallowedTools`` (its supervisor's run flags) does not switch to a
    session whose worker already runs without them: the deny rule would not hold there. It
    stays where it was, saying why."""
    monkeypatch.setenv("XDG_STATE_HOME", agent_env["XDG_STATE_HOME"])
    other = create_session(project, env=agent_env)
    keeper = kit.supervisor(session, agent_env)
    keeper.run = RunFlags(disallowed=("Bash",))
    other_keeper = WorkerSupervisor(other, exit_with_parent=True, env=agent_env)
    await other_keeper.ensure_started()
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the view")
        await pilot.press(*f"/resume {other.id}", "enter")
        await kit.wait_for(
            pilot,
            lambda: any(
                s == "error" and "--disallowedTools apply to a worker this command starts" in m
                for s, m in kit.toasts(app)
            ),
            "the refusal",
        )
        seen["stayed"] = app.client.session.session_id

    try:
        await kit.drive(session, keeper, test)
    finally:
        await other_keeper.stop()
    assert seen["stayed"] == session.id
