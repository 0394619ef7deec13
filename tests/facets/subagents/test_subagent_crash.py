"""A SIGKILL of the session worker in the middle of a subagent: the restarted worker resumes the
same subagent (one owned conversation, no second child), which finishes and reports to the
parent once."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

pytestmark = pytest.mark.anyio

WORKER = Path(__file__).with_name("subagent_worker.py")


async def _until(stream: BufferedByteReceiveStream, prefix: str) -> str:
    with anyio.fail_after(60):
        while True:
            line = (await stream.receive_until(b"\n", 65536)).decode()
            if line.startswith(prefix):
                return line


async def test_a_killed_worker_resumes_the_subagent(tmp_path: Path) -> None:
    argv = [sys.executable, str(WORKER), str(tmp_path)]
    first = await anyio.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert first.stdout is not None
        running = await _until(BufferedByteReceiveStream(first.stdout), "RUNNING")
        child = int(running.split()[1])
        first.send_signal(signal.SIGKILL)
        with anyio.fail_after(30):
            await first.wait()
    finally:
        await first.aclose()
    second = await anyio.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert second.stdout is not None
        stream = BufferedByteReceiveStream(second.stdout)
        again = await _until(stream, "RUNNING")
        assert int(again.split()[1]) == child  # the same subagent conversation carries on
        assert second.stdin is not None
        await second.stdin.send(b"open\n")
        done = json.loads((await _until(stream, "DONE")).split(" ", 1)[1])
        assert done["results"] == ["report: the gate opened"]
        assert done["conversations"] == 2  # the root and one subagent
    finally:
        assert second.stdin is not None
        await second.stdin.aclose()
        with anyio.fail_after(30):
            await second.wait()
        await second.aclose()
