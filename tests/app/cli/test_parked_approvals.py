"""Parked approvals (issue 43 deliver 3): ``-p --wait-for-approval`` leaves a dialog open for
another client instead of denying it, through a worker restart, and answers it as ``--approve``
says when the wait runs out. The real binary; the other client is a chord wire client of the
session's worker, as ``coding-agent attach`` is."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import anyio
import pytest

from coding_agent.session_files.folders import list_sessions
from tests.app.cli._parked import BINARY, STEPS, TIMEOUT, answer, start

pytestmark = pytest.mark.anyio


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (tmp_path / "script.json").write_text(json.dumps(STEPS))
    return folder


async def test_a_parked_approval_is_answered_by_another_client_even_after_a_worker_restart(
    project: Path, agent_env: dict[str, str]
) -> None:
    with anyio.fail_after(TIMEOUT):
        run = await start(project, agent_env, "--linger", "0.5", "--wait-for-approval")
        async with run.process:
            await run.line_with("waiting for approval of the bash call (touch parked.txt)")
            (session,) = list_sessions(project, env=agent_env)
            assert f"coding-agent attach {session.id}" in run.lines[-1]
            # The worker dies while the dialog waits: it is restarted and the dialog reopens.
            pid = int(session.lock_path.read_text().split()[0])
            os.kill(pid, signal.SIGKILL)
            await run.line_with("waiting for approval of the bash call", count=2)
            assert not (project / "parked.txt").exists()
            await answer(session, "allow")
            result = await run.result()
    assert run.process.returncode == 0, "\n".join(run.lines)
    assert result["ok"] is True and result["text"] == "Touched."
    assert (project / "parked.txt").exists()


async def test_a_parked_approval_nobody_answers_is_denied_when_the_wait_runs_out(
    project: Path, agent_env: dict[str, str]
) -> None:
    with anyio.fail_after(TIMEOUT):
        run = await start(project, agent_env, "--linger", "0.5", "--wait-for-approval", "0.2")
        async with run.process:
            result = await run.result()
            await run.line_with("blocked the bash call")
    assert run.process.returncode == 3
    assert result["blocked"] == ["bash (touch parked.txt)"]
    assert any("waiting 0.2 s" in line for line in run.lines)
    assert not (project / "parked.txt").exists()


def test_wait_for_approval_needs_a_headless_run(agent_env: dict[str, str], project: Path) -> None:
    done = subprocess.run(
        [str(BINARY), "--wait-for-approval"], cwd=project, env=agent_env, capture_output=True,
        text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--wait-for-approval is for -p/--json" in done.stderr
