"""An allowed ``git status`` in an untrusted repository whose ``.git/config`` sets
``core.fsmonitor`` to a script asks instead of running, through the real worker process and its
real ``bash`` tool; in a trusted project it runs (facets_approval.gitconfig).

The allow rule is the user's own (``Bash(git status)`` in ``config.toml``), the commonest rule
there is; the script leaves a marker file, so "it never ran" is a fact on disk.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from worker_support import Client, connected, deny, text_of, worker_process, write_script

from chord.context import BACKGROUND
from coding_agent.cli.headless import run_headless
from coding_agent.session_files.folders import Session
from coding_agent.settings.trust import TrustStore, trust_path
from coding_agent.worker.main import WorkerConfig

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]


@pytest.fixture
def env(agent_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The worker's environment with a private home and configuration folder, and the user's
    ``Bash(git status)`` allow rule."""
    found = {
        **agent_env,
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    config = tmp_path / "config" / "coding-agent" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[permissions]\nallow = ["Bash(git status)"]\n')
    return found


def arm(repo: Path, marker: Path) -> None:
    subprocess.run(["git", "init", "-q", "."], cwd=repo, check=True, capture_output=True)
    hidden = repo / ".hidden"
    hidden.mkdir()
    (hidden / "run.sh").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (hidden / "run.sh").chmod(0o755)
    command = ["git", "config", "core.fsmonitor", "./.hidden/run.sh"]
    subprocess.run(command, cwd=repo, check=True, capture_output=True)


@pytest.mark.parametrize("trusted", [False, True], ids=["untrusted", "trusted"])
async def test_an_allowed_git_status_asks_where_the_repository_runs_a_script(
    session: Session, env: dict[str, str], tmp_path: Path, trusted: bool
) -> None:
    marker = tmp_path / "FSMONITOR-RAN"
    arm(session.cwd, marker)
    if trusted:
        TrustStore(trust_path(env)).set(session.cwd, True)
    steps = [{"toolCalls": [{"name": "bash", "arguments": {"command": "git status"}}]}]
    script = write_script(tmp_path / "script.json", [*steps, {"text": "done"}])
    client = Client(approve=deny)
    async with (
        worker_process(session, env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "run git status"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        (result,) = [text_of(entry) for entry in client.entries("pi.tool_result")]
    if trusted:  # a trusted project's git configuration is trusted with it
        assert client.approvals == []
        assert marker.exists()
        return
    (dialog,) = client.approvals
    request: Any = dialog.request
    assert request["reason"] == (
        "This asks because this repository's git configuration runs ./.hidden/run.sh "
        "(core.fsmonitor in .git/config). Trusting the project (/trust) lets its git "
        "configuration run unasked."
    )
    assert result == "Tool call blocked: denied by test"
    assert not marker.exists()


async def test_headless_refuses_it_and_says_how_to_proceed(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    # auto mode would run any command unasked; the repository's fsmonitor still asks, and -p
    # asks nobody: the one line says what to do
    marker = tmp_path / "FSMONITOR-RAN"
    arm(session.cwd, marker)
    steps = [{"toolCalls": [{"name": "bash", "arguments": {"command": "git status"}}]}]
    script = write_script(tmp_path / "script.json", [*steps, {"text": "done"}])
    config = WorkerConfig(session, faux_script=script, permission_mode="auto", env=agent_env)
    out, err = io.StringIO(), io.StringIO()
    assert await run_headless("run git status", config, mode="print", out=out, err=err) == 3
    assert err.getvalue() == (
        "coding-agent: error: blocked the bash call (git status): it needs approval: this "
        "repository's git configuration runs ./.hidden/run.sh (core.fsmonitor in .git/config), "
        "and -p/--json asks nobody; allow it with --approve allow, or trust the project "
        "(coding-agent --trust, or /trust in the TUI), or allow it in the TUI always while its "
        "git configuration stays as is (then -p runs it too)\n"
    )
    assert not marker.exists()


async def test_headless_offers_no_always_where_the_dialog_would_not(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    # a hook linked to /dev/stdin: its content cannot be pinned, so the dialog offers no
    # "always", and -p's line does not send the user looking for it
    init = ["git", "init", "-q", "."]
    await anyio.run_process(init, cwd=session.cwd, check=True)
    (session.cwd / ".git" / "hooks" / "pre-commit").symlink_to("/dev/stdin")
    command = "git commit --allow-empty -m x"
    steps = [{"toolCalls": [{"name": "bash", "arguments": {"command": command}}]}]
    script = write_script(tmp_path / "script.json", [*steps, {"text": "done"}])
    config = WorkerConfig(session, faux_script=script, permission_mode="auto", env=agent_env)
    out, err = io.StringIO(), io.StringIO()
    assert await run_headless("commit", config, mode="print", out=out, err=err) == 3
    line = err.getvalue()
    assert "pre-commit" in line and "trust the project" in line, line
    assert "always" not in line, line
