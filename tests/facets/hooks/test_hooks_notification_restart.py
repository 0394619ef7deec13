"""A waiting call's ``Notification`` hooks run once, even across a worker SIGKILLed while the
approval dialog still waits (issue 43 deliver 4: "not again after a restart"). The real worker
process; the hook appends its JSON to a file."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from coding_agent.session_files.folders import Session, create_session

sys.path.insert(0, str(Path(__file__).parents[2] / "app" / "worker"))  # worker_support
from worker_support import (  # pyright: ignore[reportMissingImports]
    TIMEOUT,
    Client,
    connected,
    worker_process,
)

pytestmark = pytest.mark.anyio


def _recorded(session: Session) -> bool:
    """Whether the session stored a ``hooks.notified`` key (the commit after the hooks)."""
    for log in session.storage_dir.glob("*.jsonl"):
        for line in log.read_text().splitlines():
            if '["plugins","hooks","notified"]' in line:
                return True
    return False


async def _until(condition: Any) -> None:
    with anyio.fail_after(TIMEOUT):
        while not condition():  # noqa: ASYNC110 - other processes' files: polled with a deadline
            await anyio.sleep(0.05)


async def test_a_notification_hook_is_not_run_again_by_a_restarted_worker(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    home = tmp_path / "home"
    env = {
        **agent_env,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
    }
    told = tmp_path / "told.log"
    hook = {"type": "command", "command": f"cat >> {told}; echo >> {told}"}
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(
        json.dumps({"hooks": {"Notification": [{"hooks": [hook]}]}})
    )
    steps = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo one >> ran.txt"}}]},
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo two >> ran.txt"}}]},
        {"text": "done"},
    ]
    (tmp_path / "script.json").write_text(json.dumps(steps))
    project = tmp_path / "project"
    project.mkdir()
    session = create_session(project, env=env)
    args = ("--faux-script", str(tmp_path / "script.json"), "--permission-mode", "ask")

    def lines() -> list[str]:
        return told.read_text().splitlines() if told.exists() else []

    client = Client()
    async with worker_process(session, env, *args) as worker, connected(client, worker.socket):
        await client.root.send({"content": "go"}, BACKGROUND)
        await _until(lambda: lines() and _recorded(session))  # run, and recorded as run
        await worker.kill()
    client = Client()
    async with worker_process(session, env, *args) as worker, connected(client, worker.socket):
        await client.wait_for(lambda: bool(client.approvals))  # the first call waits again
        await client.approvals[0].facade.decide({"decision": "allow", "by": "test"}, BACKGROUND)
        await client.wait_for(lambda: len(client.approvals) == 2)
        await _until(lambda: len(lines()) >= 2)  # the second call's: told once, after the first
        await client.approvals[1].facade.decide({"decision": "allow", "by": "test"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
    assert (project / "ran.txt").read_text() == "one\ntwo\n"
    assert [json.loads(line)["message"] for line in lines()] == [
        "Claude needs your permission to use Bash"
    ] * 2
