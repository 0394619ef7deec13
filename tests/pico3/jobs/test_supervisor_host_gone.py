"""The supervisor of a job outlives a host that died before reading its report.

:meth:`LocalProcessHost.start` launches the supervisor and reads its one-line report from a
pipe. When the host's process is killed in between (a worker ``SIGKILL``ed mid-start, which
the crash-injection suite does), nobody reads that pipe any more: the report's write fails
with ``EPIPE``. The supervisor must shrug that off and go on to record the exit code;
otherwise the key reads "lost" (``unknown``) and a job with ``rerun`` starts the command a
second time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

import pico3.process_host
from chord.context import BACKGROUND
from pico3.process_host import LocalProcessHost

Gate = Any  # the ``gates`` fixture of conftest.py

pytestmark = pytest.mark.anyio

SUPERVISOR = Path(pico3.process_host.__file__).with_name("_supervise.py")


async def test_a_report_nobody_reads_does_not_lose_the_exit_code(
    tmp_path: Path, gates: dict[str, Gate]
) -> None:
    gate = gates["host-gone"]
    state = tmp_path / "state"
    record = state / "gone"
    record.mkdir(parents=True)
    code = f"print('ran', flush=True); {gate.reader}"
    spec = {"command": sys.executable, "args": ["-c", code], "cwd": str(tmp_path), "env": None}
    (record / "spec.json").write_text(json.dumps(spec))
    read_end, write_end = os.pipe()
    os.close(read_end)  # the host is gone before the supervisor reports
    try:
        launched = await anyio.open_process(
            [sys.executable, "-I", str(SUPERVISOR), str(record)],
            stdout=write_end,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    finally:
        os.close(write_end)
    async with launched:
        assert await launched.wait() == 0  # the intermediate of the double fork
    await gate.release()  # the command runs: it reached the gate
    with LocalProcessHost(state) as host:  # a new host, as after a worker restart
        status = await host.wait("gone", BACKGROUND)
        assert (status.state, status.exit_code, status.stdout) == ("exited", 0, "ran\n")
