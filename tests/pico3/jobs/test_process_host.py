"""LocalProcessHost with real processes: idempotent start, captured output, tree kill, and
records that outlive the host object (docs/design/turn.md#jobs)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from pico3.process_host import (
    LocalProcessHost,
    ProcessHost,
    ProcessHostBusy,
    ProcessSpec,
    ProcessStartError,
)

Gate = Any  # the ``gates`` fixture of conftest.py

pytestmark = pytest.mark.anyio

PY = sys.executable


def py(code: str, cwd: Path) -> ProcessSpec:
    return ProcessSpec(PY, ("-c", code), str(cwd))


def test_local_host_satisfies_the_protocol(tmp_path: Path) -> None:
    with LocalProcessHost(tmp_path / "state") as host:
        assert isinstance(host, ProcessHost)


async def test_exited_status_carries_exit_code_and_output(tmp_path: Path) -> None:
    with LocalProcessHost(tmp_path / "state") as host:
        code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(7)"
        await host.start("a:1", py(code, tmp_path), BACKGROUND)
        status = await host.wait("a:1", BACKGROUND)
        assert status.state == "exited"
        assert status.exit_code == 7
        assert status.stdout == "out\n"
        assert status.stderr == "err\n"
        assert (status.dropped_stdout, status.dropped_stderr) == (0, 0)


async def test_env_is_laid_over_the_host_environment_and_cwd_applies(tmp_path: Path) -> None:
    with LocalProcessHost(tmp_path / "state") as host:
        code = "import os; print(os.environ['JOBVAR'], bool(os.environ.get('PATH')), os.getcwd())"
        spec = ProcessSpec(PY, ("-c", code), str(tmp_path), {"JOBVAR": "x1"})
        await host.start("env", spec, BACKGROUND)
        status = await host.wait("env", BACKGROUND)
        assert status.stdout.split() == ["x1", "True", str(tmp_path)]


async def test_start_is_idempotent_per_key_while_running_and_after_exit(
    tmp_path: Path, gates: dict[str, Gate]
) -> None:
    gate = gates["k"]
    counter = tmp_path / "count"
    code = f"open({str(counter)!r}, 'a').write('x'); {gate.reader}"
    with LocalProcessHost(tmp_path / "state") as host:
        await host.start("k", py(code, tmp_path), BACKGROUND)
        await host.start("k", py(code, tmp_path), BACKGROUND)
        assert (await host.status("k", BACKGROUND)).state == "running"
        await gate.release()
        assert (await host.wait("k", BACKGROUND)).exit_code == 0
        await host.start("k", py(code, tmp_path), BACKGROUND)
        assert (await host.status("k", BACKGROUND)).state == "exited"
        assert counter.read_text() == "x"


async def test_unknown_key_reads_unknown_and_kill_of_it_is_harmless(tmp_path: Path) -> None:
    with LocalProcessHost(tmp_path / "state") as host:
        assert (await host.status("never", BACKGROUND)).state == "unknown"
        await host.kill("never", "SIGKILL", BACKGROUND)
        assert (await host.wait("never", BACKGROUND)).state == "unknown"


@pytest.mark.parametrize("problem", ["missing-command", "bad-cwd"])
async def test_start_raises_only_when_certainly_not_started(tmp_path: Path, problem: str) -> None:
    if problem == "missing-command":
        spec = ProcessSpec(str(tmp_path / "no-such-program"), (), str(tmp_path))
    else:
        spec = ProcessSpec(PY, ("-c", "pass"), str(tmp_path / "no-such-dir"))
    with LocalProcessHost(tmp_path / "state") as host:
        with pytest.raises(ProcessStartError) as caught:
            await host.start("bad", spec, BACKGROUND)
        assert caught.value.errno is not None
        assert (await host.status("bad", BACKGROUND)).state == "unknown"


async def test_kill_reaches_the_whole_process_tree(tmp_path: Path, gates: dict[str, Gate]) -> None:
    gate = gates["tree"]
    grandchild = tmp_path / "grandchild.pid"
    # The command starts a grandchild that records its pid and blocks on the gate.
    inner = f"import os; f = open({str(grandchild)!r}, 'w'); f.write(str(os.getpid())); f.close(); {gate.reader}"
    code = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {inner!r}]).wait()"
    with LocalProcessHost(tmp_path / "state") as host:
        await host.start("tree", py(code, tmp_path), BACKGROUND)
        await gate.opened()  # the grandchild reading the gate proves the tree is up
        status = await host.status("tree", BACKGROUND)
        assert status.state == "running"
        pidfd = os.pidfd_open(int(grandchild.read_text()))
        await host.kill("tree", "SIGTERM", BACKGROUND)
        await anyio.wait_readable(pidfd)  # the grandchild died of the group signal
        os.close(pidfd)
        status = await host.wait("tree", BACKGROUND)
        assert status.state == "exited"
        assert status.exit_code == -15
        await host.kill("tree", "SIGKILL", BACKGROUND)  # exited: harmless
        assert (await host.status("tree", BACKGROUND)).exit_code == -15


async def test_sigkill_of_a_running_process_records_minus_nine(
    tmp_path: Path, gates: dict[str, Gate]
) -> None:
    code = gates["k9"].reader
    with LocalProcessHost(tmp_path / "state") as host:
        await host.start("k9", py(code, tmp_path), BACKGROUND)
        await host.kill("k9", "SIGKILL", BACKGROUND)
        assert (await host.wait("k9", BACKGROUND)).exit_code == -9


async def test_records_outlive_the_host_object_and_its_process(
    tmp_path: Path, gates: dict[str, Gate]
) -> None:
    """A host in another Python process starts the command and dies; a new host on the same
    state directory re-finds the key, sees it running, and later sees its exit code."""
    state = tmp_path / "state"
    gate = gates["outlive"]
    script = (
        "import anyio, sys\n"
        "from chord.context import BACKGROUND\n"
        "from pico3.process_host import LocalProcessHost, ProcessSpec\n"
        "async def main():\n"
        f"    host = LocalProcessHost({str(state)!r})\n"
        f"    code = {'print(1, flush=True); ' + gate.reader + '; raise SystemExit(5)'!r}\n"
        f"    await host.start('job:1', ProcessSpec(sys.executable, ('-c', code), {str(tmp_path)!r}), BACKGROUND)\n"
        "anyio.run(main)\n"
    )
    done = await anyio.run_process([PY, "-c", script], check=False)
    assert done.returncode == 0, done.stderr.decode()
    with LocalProcessHost(state) as host:
        assert (await host.status("job:1", BACKGROUND)).state == "running"
        await gate.release()
        status = await host.wait("job:1", BACKGROUND)
        assert (status.state, status.exit_code, status.stdout) == ("exited", 5, "1\n")


async def test_a_lost_record_reads_unknown_and_start_runs_it_afresh(
    tmp_path: Path, gates: dict[str, Gate]
) -> None:
    gate = gates["lost"]
    code = f"print('run', flush=True); {gate.reader}"
    with LocalProcessHost(tmp_path / "state") as host:
        await host.start("lost", py(code, tmp_path), BACKGROUND)
        record = tmp_path / "state" / "lost"
        supervisor = json.loads((record / "supervisor.json").read_text())
        pidfd = os.pidfd_open(supervisor["pid"])
        os.kill(supervisor["pid"], 9)  # the supervisor dies without recording an exit
        await anyio.wait_readable(pidfd)
        os.close(pidfd)
        assert (await host.status("lost", BACKGROUND)).state == "unknown"
        await host.start("lost", py("print('again')", tmp_path), BACKGROUND)
        status = await host.wait("lost", BACKGROUND)
        assert (status.exit_code, status.stdout) == (0, "again\n")


async def test_output_is_bounded_to_its_tail(tmp_path: Path) -> None:
    with LocalProcessHost(tmp_path / "state", output_limit=10) as host:
        code = "import sys; sys.stdout.write('0123456789abcdef'); sys.stdout.flush()"
        await host.start("big", py(code, tmp_path), BACKGROUND)
        status = await host.wait("big", BACKGROUND)
        assert (status.stdout, status.dropped_stdout) == ("6789abcdef", 6)


async def test_a_tail_never_starts_inside_a_utf8_sequence(tmp_path: Path) -> None:
    with LocalProcessHost(tmp_path / "state", output_limit=5) as host:
        code = "import sys; sys.stdout.buffer.write('aé€b'.encode())"  # 1+2+3+1 bytes
        await host.start("u", py(code, tmp_path), BACKGROUND)
        status = await host.wait("u", BACKGROUND)
        assert (status.stdout, status.dropped_stdout) == ("€b", 3)


def test_one_host_per_state_directory(tmp_path: Path) -> None:
    with LocalProcessHost(tmp_path / "state"), pytest.raises(ProcessHostBusy):
        LocalProcessHost(tmp_path / "state")
    LocalProcessHost(tmp_path / "state").close()


async def test_bad_keys_signals_and_specs_are_refused_by_name(tmp_path: Path) -> None:
    with LocalProcessHost(tmp_path / "state") as host:
        with pytest.raises(ValueError, match="process key"):
            await host.status("", BACKGROUND)
        with pytest.raises(ValueError, match="process key"):
            await host.status("a b", BACKGROUND)
        with pytest.raises(ValueError, match="signal"):
            await host.kill("k", "SIGHUP", BACKGROUND)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="command"):
        ProcessSpec("")
    with pytest.raises(ValueError, match="env"):
        ProcessSpec("x", env={"A": 1})  # type: ignore[dict-item]


async def test_kill_reaches_children_that_moved_to_process_groups_of_their_own(
    tmp_path: Path, gates: dict[str, Gate]
) -> None:
    # Job control (`set -m`) gives each background child its own process group: a group kill
    # alone would miss it. It stays in the child's session, which the kill reaches.
    gate = gates["set-m"]
    pid_file = tmp_path / "child.pid"
    command = f"set -m; sleep 300 & echo $! > {pid_file}; cat {gate.path}; wait"
    with LocalProcessHost(tmp_path / "state") as host:
        await host.start("set-m", ProcessSpec("bash", ("-c", command), str(tmp_path)), BACKGROUND)
        await gate.opened()  # `cat` reads the gate: the pid file is written
        child = int(pid_file.read_text())
        pidfd = os.pidfd_open(child)
        stat = (await anyio.Path(f"/proc/{child}/stat").read_text()).rsplit(")", 1)[1].split()
        assert int(stat[2]) == child  # its own process group
        await host.kill("set-m", "SIGKILL", BACKGROUND)
        with anyio.fail_after(30):
            await anyio.wait_readable(pidfd)  # the moved child died too
        os.close(pidfd)
