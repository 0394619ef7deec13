"""Real crashes: SIGKILL a committing process at random moments, reopen, check every commit.

``_crash_child.py`` forks one worker per round; the worker reopens the same directory, commits in
a loop with fsync off and acknowledges each commit on a pipe. This test kills it after a random
number of acknowledgements (sometimes zero: mid-replay), reopens the directory and asserts:

* every acknowledged commit is present (the seq never falls below an acknowledgement);
* at most the one commit in flight at the kill became visible without an acknowledgement;
* nothing is half-committed: the sticky document, the live task's checkpoint and the newest
  entry all describe the same commit, every entry appears once, retired task files are gone.

A shorter run does the same with ``fsync=True``, where main.jsonl is written into a preallocated
zero tail (``pico3.storage._log``): a kill leaves committed lines followed by zeros, and the reopen
must cut the zeros and keep every acknowledged commit.

docs/design/storage.md#fsync (fsync=False survives process death), #publication-point, #recovery.
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from chord.context import BACKGROUND
from pico3.storage import DocRef, EntryScan, JsonlStorage, TaskScan

CHILD = Path(__file__).with_name("_crash_child.py")
KILLS = 100
FSYNC_KILLS = 6
TIMEOUT = 20.0


class Lines:
    """Line reader over a raw pipe with a timeout (a hung child fails the test, never hangs it)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""

    def next(self) -> str:
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([self._fd], [], [], TIMEOUT)
            assert ready, "the crash child stopped talking"
            chunk = os.read(self._fd, 65536)
            assert chunk, "the crash child exited"
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()


async def verify(directory: Path) -> int:
    """Open the directory, check that it holds whole commits only, return its seq."""
    storage = JsonlStorage(directory, fsync=False)
    await storage.open(BACKGROUND)
    try:
        seq = storage.seq
        if seq == 0:
            return 0
        entries = await storage.scan_entries(EntryScan(conversation_id=1, limit=10**9), BACKGROUND)
        assert [e.data for e in reversed(entries)] == [{"n": n} for n in range(2, seq + 1)]
        log = await storage.doc(DocRef.sticky(1), BACKGROUND)
        assert log is not None and log[0][0][0] == "r"
        sticky: dict[str, object] = {}
        for ops in log:
            for op in ops:
                sticky = dict(op[1]) if op[0] == "r" else {**sticky, op[1][0]: op[2]}
        assert sticky == {"n": seq}
        tasks = await storage.scan_tasks(TaskScan(), BACKGROUND)
        live = [t for t in tasks if t.status != "terminal"]
        assert len(live) == 1 and live[0].checkpoint == {"n": seq}
        retired = [t.outcome for t in tasks if t.status == "terminal"]
        assert retired == [{"completed": True, "result": n} for n in range(5, seq + 1, 5)]
        files = {name for name in os.listdir(directory) if name.startswith("task-")}
        assert files <= {f"task-{live[0].id}.jsonl"}
        return seq
    finally:
        await storage.close(BACKGROUND)


def test_sigkill_at_random_moments_never_loses_an_ack_or_shows_half_a_commit(
    tmp_path: Path,
) -> None:
    committed, kills_mid_commit, _ = run_kills(tmp_path, KILLS, "nosync")
    assert committed > KILLS  # the runs made real progress across the kills
    print(f"{KILLS} kills, {committed} commits, {kills_mid_commit} published but unacked")


@pytest.mark.parametrize("write_path", ["direct", "prealloc"])
def test_sigkill_with_fsync_keeps_every_ack_and_cuts_the_zero_tail(
    tmp_path: Path, write_path: str
) -> None:
    committed, _, zero_tails = run_kills(tmp_path, FSYNC_KILLS, write_path)
    assert committed > FSYNC_KILLS
    assert zero_tails > 0  # the kills really landed while main.jsonl was preallocated
    data = (tmp_path / "session" / "main.jsonl").read_bytes()
    assert data.endswith(b"\n") and b"\0" not in data  # the last reopen closed it clean


def main_tail(directory: Path) -> bytes:
    """What follows the last newline of main.jsonl (a killed fsync writer leaves zeros)."""
    try:
        data = (directory / "main.jsonl").read_bytes()
    except FileNotFoundError:
        return b""
    return data[data.rfind(b"\n") + 1 :]


def run_kills(tmp_path: Path, kills: int, mode: str) -> tuple[int, int, int]:
    """Kill a committing worker ``kills`` times, verifying after each kill.

    ``mode`` is ``nosync`` (fsync off) or the durable write path, ``direct`` or ``prealloc``.

    Returns the final seq, how many kills left a published but unacknowledged commit, and how
    many left a zero tail in main.jsonl.
    """
    directory = tmp_path / "session"
    rng = random.Random(20261129)
    stderr = open(tmp_path / "child.stderr", "w+b")  # noqa: SIM115 - closed in finally
    child = subprocess.Popen(
        [sys.executable, str(CHILD)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        bufsize=0,
    )
    assert child.stdin is not None and child.stdout is not None
    lines = Lines(child.stdout.fileno())
    committed = 0
    kills_mid_commit = 0
    zero_tails = 0
    try:
        for _ in range(kills):
            child.stdin.write(f"{directory}\t{mode}\n".encode())
            first = lines.next()
            assert first.startswith("pid "), first
            pid = int(first.split()[1])
            wait_for = rng.choice([0, 1, 2, 3, 5, 8, 13, 21])
            acks: list[int] = []
            while len(acks) < wait_for:
                line = lines.next()
                assert line.startswith("ack "), (line, stderr.seek(0) or stderr.read())
                acks.append(int(line.split()[1]))
            os.kill(pid, signal.SIGKILL)
            while not (line := lines.next()).startswith("done"):
                acks.append(int(line.split()[1]))  # acknowledged before the kill landed
            assert line == f"done {signal.SIGKILL}", (line, stderr.seek(0) or stderr.read())
            acknowledged = max(acks, default=committed)
            tail = main_tail(directory)  # at most a torn line, then (fsync) preallocated zeros
            assert b"\0" not in tail.rstrip(b"\0"), tail[:80]
            assert mode != "nosync" or b"\0" not in tail
            zero_tails += tail.endswith(b"\0")
            seq = anyio.run(verify, directory)
            assert seq >= acknowledged, f"lost acknowledged commit(s) {seq + 1}..{acknowledged}"
            assert seq <= acknowledged + 1, "more than the in-flight commit became visible"
            kills_mid_commit += seq == acknowledged + 1
            committed = seq
            assert b"\0" not in (directory / "main.jsonl").read_bytes()  # the reopen cut them
        return committed, kills_mid_commit, zero_tails
    finally:
        child.stdin.close()
        child.wait(timeout=TIMEOUT)
        child.stdout.close()
        stderr.close()
