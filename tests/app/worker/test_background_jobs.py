"""A background job of the real worker survives the worker's ``SIGKILL`` and completes once.

``bash {background: true}`` makes a ``pi.job`` whose process runs under the session's process
host (``<session>/processes``), detached from the worker. The worker is killed while the job
runs; a new worker on the same session re-finds the process by its key, the job completes
with its exit code, and its effect happened exactly once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from worker_support import Client, allow, connected, text_of, worker_process, write_script

from chord.context import BACKGROUND
from coding_agent.session_files.folders import Session

pytestmark = pytest.mark.anyio


def _jobs(view: Any) -> list[str]:
    return [key for key, task in view["tasks"].items() if task["kind"] == "pi.job"]


def _notices(client: Client) -> list[str]:
    return [text_of(entry) for entry in client.entries("pi.notice")]


async def test_a_background_job_survives_a_worker_kill_and_completes_exactly_once(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    effects, gate = tmp_path / "effects.log", tmp_path / "gate"
    command = f"echo once >> {effects}; while [ ! -e {gate} ]; do sleep 0.02; done; echo finished"
    script = write_script(
        tmp_path / "script.json",
        [
            {
                "text": "Starting.",
                "toolCalls": [
                    {"name": "bash", "arguments": {"command": command, "background": True}}
                ],
            },
            {"text": "Started."},
        ],
    )
    args = ("--faux-script", str(script))
    client = Client(approve=allow)
    async with worker_process(session, agent_env, *args) as first, connected(client, first.socket):
        await client.root.send({"content": "start the watcher"}, BACKGROUND)
        await client.wait_for(lambda: client.turn_ended() and bool(_jobs(client.view)))
        (job,) = _jobs(client.view)
        (result,) = client.entries("pi.tool_result")
        assert text_of(result).startswith(f"Started background job {job}: ")
        await first.kill()
        await client.wait_for(lambda: client.root_closed)
        async with worker_process(session, agent_env, *args):
            await client.wait_for(lambda: not client.root_closed and job in _jobs(client.view))
            gate.touch()  # the job's process outlived the worker: it ends only now
            await client.wait_for(lambda: not _jobs(client.view) and bool(_notices(client)))
            assert _notices(client) == [f"Job `bash -c {command}` exited with code 0."]
    record = session.path / "processes" / f"{job}%3A1"
    assert (record / "stdout").read_text() == "finished\n"
    assert effects.read_text() == "once\n"  # started once, never again after the restart
