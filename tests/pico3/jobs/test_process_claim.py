"""A supervisor's claim: a host SIGKILLed while it launches a supervisor never makes a later host
start the same key a second time (docs/design/turn.md#jobs).

Between the launch of ``_supervise.py`` and its first write (``supervisor.json``) a record has a
live supervisor and nothing on disk that says so. Before claims, a restarted worker read such a
record as lost, removed it and started the command again beside the first one (crash injection
saw a background ``bash`` token run twice). The claim, a file the host locks before the launch
and hands to the supervisor, says "alive" for the whole of that gap.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from chord.context import BACKGROUND
from pico3.process_host import LocalProcessHost, ProcessHostBusy, ProcessSpec

Gate = Any  # the ``gates`` fixture of conftest.py

pytestmark = pytest.mark.anyio

PY = sys.executable

HOLDER = (
    "import fcntl, os, sys\n"
    "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)\n"
    "fcntl.flock(fd, fcntl.LOCK_EX)\n"
    "print('held', flush=True)\n"
    "sys.stdin.read()\n"
)


async def _line(process: Process) -> bytes:
    assert process.stdout is not None
    return await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 100)


def _append(marker: Path) -> ProcessSpec:
    code = f"open({str(marker)!r}, 'a').write('ran\\n')"
    return ProcessSpec(PY, ("-c", code), str(marker.parent))


async def test_a_claimed_record_without_supervisor_json_reads_running_and_is_not_started_again(
    tmp_path: Path,
) -> None:
    """The state a host leaves when it is SIGKILLed right after the launch: a record, its spec,
    a claim held by the supervisor (here a real process standing in for it) and no
    ``supervisor.json`` yet."""
    state = tmp_path / "state"
    record = state / "job"
    record.mkdir(parents=True)
    marker = tmp_path / "marker"
    spec = _append(marker)
    (record / "spec.json").write_text(
        json.dumps({"command": spec.command, "args": list(spec.args), "cwd": spec.cwd, "env": None})
    )
    async with await anyio.open_process([PY, "-c", HOLDER, str(record / "claim")]) as holder:
        assert await _line(holder) == b"held"
        with LocalProcessHost(state) as host:
            assert (await host.status("job", BACKGROUND)).state == "running"
            await host.start("job", spec, BACKGROUND)  # a restarted job reconciling: a no-op
            assert not marker.exists() and not (record / "supervisor.log").exists()
            ended: list[str] = []

            async def wait() -> None:
                ended.append((await host.wait("job", BACKGROUND)).state)

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                assert holder.stdin is not None
                await holder.stdin.aclose()  # the stand-in exits without an exit code
            assert ended == ["unknown"]  # lost once its claim is released, and only then
            await host.start("job", spec, BACKGROUND)
            status = await host.wait("job", BACKGROUND)
            assert (status.state, status.exit_code) == ("exited", 0)
        assert marker.read_text() == "ran\n"


async def test_the_claim_is_held_by_the_supervisor_and_not_by_the_command(
    tmp_path: Path, gates: dict[str, Gate]
) -> None:
    state = tmp_path / "state"
    gate = gates["claim"]
    with LocalProcessHost(state) as host:
        await host.start("k", ProcessSpec(PY, ("-c", gate.reader), str(tmp_path)), BACKGROUND)
        record = state / "k"
        child = json.loads((record / "child.json").read_text())
        await gate.opened()  # the command is blocked in its read: its descriptors hold still
        fds = f"/proc/{child['pid']}/fd"
        assert str(record / "claim") not in {os.readlink(f"{fds}/{fd}") for fd in os.listdir(fds)}
        fd = os.open(record / "claim", os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        await gate.release()
        status = await host.wait("k", BACKGROUND)
        assert (status.state, status.exit_code) == ("exited", 0)


LAUNCHER = (
    "import anyio, sys\n"
    "from chord.context import BACKGROUND\n"
    "from pico3.process_host import LocalProcessHost, ProcessSpec\n"
    "async def main():\n"
    "    host = LocalProcessHost(sys.argv[1])\n"
    "    code = 'open(' + repr(sys.argv[2]) + ', \"a\").write(\"ran\\\\n\")'\n"
    "    print('go', flush=True)\n"
    "    await host.start('job', ProcessSpec(sys.executable, ('-c', code), '/'), BACKGROUND)\n"
    "    sys.stdin.read()\n"
    "anyio.run(main)\n"
)


async def _host_when_free(state: Path) -> LocalProcessHost:
    """The next host of ``state``. A host killed between a fork and its child's exec leaves the
    child holding the host's lock (a fork shares the open file) until the child execs or dies:
    a moment, longer on a loaded machine (polled, 30 s at most)."""
    with anyio.fail_after(30):
        while True:
            try:
                return LocalProcessHost(state)
            except ProcessHostBusy:
                await anyio.sleep(0.05)


async def test_a_host_sigkilled_at_any_point_of_a_start_runs_the_command_exactly_once(
    tmp_path: Path,
) -> None:
    """Kill the starting host at points spread over the launch; the next host reconciles the
    key the way ``pi.job`` does on resume (start it when it reads unknown, then wait)."""
    rng = random.Random(1001)
    for trial in range(12):
        state = tmp_path / f"state-{trial}"
        marker = tmp_path / f"marker-{trial}"
        async with await anyio.open_process(
            [PY, "-c", LAUNCHER, str(state), str(marker)]
        ) as launcher:
            assert await _line(launcher) == b"go"
            await anyio.sleep(rng.uniform(0, 0.06))  # places the kill; nothing waits on it
            launcher.kill()
            await launcher.wait()
        with await _host_when_free(state) as host:
            if (await host.status("job", BACKGROUND)).state == "unknown":
                await host.start("job", _append(marker), BACKGROUND)
            status = await host.wait("job", BACKGROUND)
            while status.state == "running":  # supervisor.json appeared while we waited
                status = await host.wait("job", BACKGROUND)
            assert status.state == "exited", (trial, status)
        runs = marker.read_text().count("ran")
        assert runs == 1, f"trial {trial}: the command ran {runs} times"
