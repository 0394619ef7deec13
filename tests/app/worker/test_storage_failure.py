"""A storage failure is never silent (issue 24 deliver 5).

The session lives on a small tmpfs (``mount -t tmpfs -o size=...``: needs root; skipped
elsewhere, failing in CI). Once the disk is full, the next commit that needs space fails with
ENOSPC. Then:

* every client sees why in the worker's status (``storageFailure``), the worker writes one line
  to its log and exits with code 5 instead of answering ``internal_error`` for ever;
* a worker started again once there is space resumes: everything acknowledged before is there;
* ``-p`` in the same situation prints one ``coding-agent: error:`` line and exits 5 (no hang).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from worker_support import TIMEOUT, Client, connected, text_of, worker_command, write_script

from chord.context import BACKGROUND
from coding_agent.session_files.folders import Session, create_session

pytestmark = pytest.mark.anyio

BIG = "x" * 400_000
"""A prompt larger than the free space and than the log's preallocated room."""


async def test_a_full_disk_is_reported_to_clients_and_the_worker_exits_then_resumes(
    small_disk: Path,
    fill_disk: Callable[[Path], Path],
    project: Path,
    agent_env: dict[str, str],
    tmp_path: Path,
) -> None:
    env = {**agent_env, "XDG_STATE_HOME": str(small_disk / "state")}
    session = create_session(project, env=env)
    script = write_script(
        tmp_path / "script.json", [{"text": "Stored."}, {"text": "Never."}, {"text": "Back."}]
    )
    argv = worker_command(session, "--faux-script", str(script), "--exit-on-stdin-eof")
    stderr = tmp_path / "worker.err"
    seen: dict[str, Any] = {}
    log = os.open(stderr, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        process = await anyio.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env
        )
    finally:
        os.close(log)
    async with process:
        assert process.stdout is not None
        with anyio.fail_after(TIMEOUT):
            socket = Path((await process.stdout.receive()).decode().split(" ", 1)[1].strip())
        client = Client()
        async with connected(client, socket):
            stop = client.status.state.subscribe(lambda *_: client.notify())
            await client.root.send({"content": "first"}, BACKGROUND)
            await client.wait_for(client.turn_ended)
            filler = await anyio.to_thread.run_sync(fill_disk, small_disk)
            try:
                await client.root.send({"content": BIG}, BACKGROUND)
            except Exception as error:  # the input's own commit failed: said with its code
                seen["send"] = error
            await client.wait_for(lambda: bool(client.status.state.value.get("storageFailure")))
            seen["status"] = client.status.state.value["storageFailure"]
            stop()
        with anyio.fail_after(TIMEOUT):
            seen["exit"] = await process.wait()
    lines = stderr.read_text().splitlines()
    assert seen["exit"] == 5, lines
    assert "No space left on device" in seen["status"], seen["status"]
    assert seen["status"].startswith("the session's storage failed: ")
    assert getattr(seen.get("send"), "code", "storage_failed") == "storage_failed"
    [line] = [line for line in lines if "storage failed" in line]
    assert line.startswith("coding-agent worker: the session's storage failed: ")
    assert "Traceback" not in stderr.read_text()

    filler.unlink()  # the cause is gone: a new worker resumes from what was stored
    async with await anyio.open_process(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    ) as again:
        assert again.stdout is not None and again.stdin is not None
        with anyio.fail_after(TIMEOUT):
            await again.stdout.receive()
        client = Client()
        async with connected(client, socket):
            users = [text_of(entry) for entry in client.entries("pi.user")]
            answers = [text_of(entry) for entry in client.entries("pi.assistant")]
            await client.root.send({"content": "after"}, BACKGROUND)
            await client.wait_for(lambda: len(client.entries("pi.assistant")) > len(answers))
            later = [text_of(entry) for entry in client.entries("pi.assistant")]
        await again.stdin.aclose()
        with anyio.fail_after(TIMEOUT):
            assert await again.wait() == 0
    assert users[0] == "first" and answers[0] == "Stored.", "everything acknowledged is there"
    assert BIG not in users, "the prompt that failed to store was never acknowledged"
    assert later[-1] in ("Never.", "Back."), later


async def test_print_mode_says_the_storage_failed_in_one_line_and_exits_5(
    small_disk: Path,
    fill_disk: Callable[[Path], Path],
    project: Path,
    agent_env: dict[str, str],
    tmp_path: Path,
) -> None:
    env = {**agent_env, "XDG_STATE_HOME": str(small_disk / "state")}
    session: Session = create_session(project, env=env)
    script = write_script(tmp_path / "script.json", [{"text": "Never."}])
    await anyio.to_thread.run_sync(fill_disk, small_disk)
    argv = [sys.executable, "-m", "coding_agent.cli.main", "--resume", session.id, "-p", "Read:"]
    with anyio.fail_after(TIMEOUT):
        done = await anyio.run_process(  # the big part of the prompt is piped in
            [*argv, "--faux-script", str(script)],
            input=BIG.encode(),
            env=env,
            cwd=project,
            check=False,
        )
    errors = done.stderr.decode().splitlines()
    assert done.returncode == 5, errors
    assert [line for line in errors if line.startswith("coding-agent: error:")] == [
        line for line in errors if "storage failed" in line
    ]
    [line] = [line for line in errors if "storage failed" in line]
    assert line.startswith("coding-agent: error: the session's storage failed: ")
    assert "No space left on device" in line and "Traceback" not in done.stderr.decode()
