"""Failover of ``coding-agent serve`` (issue 23, deliver 4): how long from the SIGKILL of the
server running a turn (and of its worker) until the other server's worker serves the session,
and until the client's turn has ended there.

Two servers on one throwaway PostgreSQL cluster (:class:`pico3.storage.pg_cluster.TempCluster`)
share a state folder; ``coding-agent --json --server A,B`` runs a turn whose ``bash`` call sleeps;
while it runs, server A and its worker are SIGKILLed. Printed per lease expiry (the baseline: no
failover can beat the lease), the median of ``--runs``:

* **worker up**: SIGKILL → server B says its worker started (the lease was taken, storage
  replayed, the worker is READY);
* **turn ended**: SIGKILL → the client exited 0 with the turn's answer.

Wall time on a shared machine (the load average is printed): the figures include Python start-up
of the new worker and the client's reconnect backoff.

    uv run python benchmarks/serve_failover.py [--runs 3] [--lease 1 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from pico3.storage.pg_cluster import TempCluster

TOKEN = "benchmark-token-0123456789abcdef"


async def _server(env: dict[str, str], args: list[str], events: list[tuple[float, str]]) -> Any:
    process = await anyio.open_process(
        [sys.executable, "-m", "coding_agent.cli.main", *args],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    out = BufferedByteReceiveStream(process.stdout)
    addresses = [(await out.receive_until(b"\n", 65536)).decode() for _ in range(2)]
    tcp = next(a for a in addresses if "tcp://" in a).removeprefix("LISTENING ")

    async def follow() -> None:
        err = BufferedByteReceiveStream(process.stderr)
        while True:
            try:
                line = await err.receive_until(b"\n", 1 << 20)
            except (anyio.EndOfStream, anyio.IncompleteRead):
                return
            events.append((time.monotonic(), line.decode(errors="replace")))

    return process, tcp, follow


async def _until(predicate: Any) -> None:
    while True:
        if predicate():
            return
        await anyio.sleep(0.01)


async def one_run(url: str, lease: float, folder: Path) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("OPENAI_BASE_URL", None)
    env["XDG_STATE_HOME"] = str(folder / "state")
    env["XDG_CONFIG_HOME"] = str(folder / "config")
    project = folder / "project"
    project.mkdir()
    marker = folder / "ran.txt"
    script = folder / "script.json"
    script.write_text(json.dumps([
        {"toolCalls": [{"name": "bash", "arguments": {"command": f"echo r >> {marker}; sleep 60"}}]},
        {"text": "Resumed."},
    ]))  # fmt: skip
    token = folder / "token"
    token.write_text(TOKEN + "\n")
    os.chmod(token, 0o600)
    common = [
        "--faux-script", str(script), "serve", "--cwd", str(project), "--storage", url,
        "--lease", str(lease), "--listen", "tcp://127.0.0.1:0", "--insecure",
        "--token-file", str(token),
        "--host-sessions", "0",  # a worker process per session: its start is the "worker up"
    ]  # fmt: skip
    a_events: list[tuple[float, str]] = []
    b_events: list[tuple[float, str]] = []
    a, a_tcp, a_follow = await _server(env, [*common, "--socket", str(folder / "a.sock")], a_events)
    b, b_tcp, b_follow = await _server(env, [*common, "--socket", str(folder / "b.sock")], b_events)
    async with anyio.create_task_group() as group:
        group.start_soon(a_follow)
        group.start_soon(b_follow)
        client = await anyio.open_process(
            [sys.executable, "-m", "coding_agent.cli.main", "--json", "go", "--approve", "allow",
             "--insecure", "--server", f"{a_tcp},{b_tcp}"],
            env={**env, "CODING_AGENT_TOKEN": TOKEN}, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        with anyio.fail_after(120):  # polls files and lines: a benchmark, not a test
            await _until(lambda: marker.exists())
            await _until(lambda: any("worker started" in line for _, line in a_events))
        started = next(line for _, line in a_events if "started" in line)
        pid = int(re.findall(r"pid (\d+)", started)[0])
        killed = time.monotonic()
        a.kill()
        os.kill(pid, signal.SIGKILL)
        with anyio.fail_after(120):
            code = await client.wait()
        ended = time.monotonic()
        assert code == 0, f"the client exited {code}"
        up = next(t for t, line in b_events if "worker started" in line)
        b.send_signal(signal.SIGTERM)
        await b.wait()
        await a.wait()
        group.cancel_scope.cancel()
    return up - killed, ended - killed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--lease", type=float, nargs="+", default=[1.0, 2.0])
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    cluster = TempCluster({"fsync": "off", "full_page_writes": "off"})
    cluster.start()
    try:
        url = f"postgresql://{cluster.user}@127.0.0.1:{cluster.port}/postgres"
        for lease in args.lease:
            ups: list[float] = []
            ends: list[float] = []
            for _ in range(args.runs):
                with tempfile.TemporaryDirectory(prefix="ca-fo-") as folder:
                    up, end = anyio.run(one_run, url, lease, Path(folder))
                ups.append(up)
                ends.append(end)
            print(
                f"failover, lease {lease:g} s (baseline: the lease expiry {lease:g} s): worker up "
                f"on the other server {statistics.median(ups):.2f} s, turn ended there "
                f"{statistics.median(ends):.2f} s after the SIGKILL (median of {args.runs})"
            )
    finally:
        cluster.stop()
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
