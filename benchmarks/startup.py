"""Benchmark: how fast the coding agent starts (issue 15).

Each figure is the median of ``--runs`` fresh processes, printed next to baselines measured in
the same run: ``python -c pass`` (the interpreter alone) and ``python -c "import textual"``.
Every figure is wall time and, in parentheses, the CPU time (user + system) the process used
until then (read with ``wait4`` after it is killed at that point): on a shared, loaded machine
the CPU time is the steadier of the two.

* ``--help`` and ``--version``: process start to exit;
* start → first provider request: ``coding-agent -p PROMPT --model openai/gpt-4.1`` (and the
  anthropic path) with the SDK pointed at a stub server in this process; measured from spawning
  the process to the first byte of the request arriving (one monotonic clock for both sides);
* worker start → serving: ``python -m coding_agent.worker.main SESSION`` until it prints
  ``READY``, for sessions of 0, 1,000 and 10,000 entries, first start and after a ``SIGKILL``
  of the running worker (the restart a crashed worker gets).

Bytecode: every process of the run (the baselines too) caches compiled modules in a private
``PYTHONPYCACHEPREFIX`` (``PYTHONDONTWRITEBYTECODE`` is dropped) and each command runs once
unmeasured first, so the figures are those of an installed app after its first run; with
``--cold`` nothing is cached and every process compiles every module it imports from source.
(Facet packages are compiled from source at every load either way: see chord's generations.)

Targets (issue 15): ``--help``/``--version`` <= 0.15 s; first request <= 0.5 s on both paths;
worker start -> serving <= 0.4 s empty, <= 0.8 s at 10,000 entries.

Run: ``uv run python benchmarks/startup.py [--runs N] [--quick] [--cold]`` (``--quick``: 3 runs, and
sessions of 0 and 1,000 entries only).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio

PYTHON = sys.executable
BIN = Path(PYTHON).parent
AGENT = str(BIN / "coding-agent")


ENV: dict[str, str] = dict(os.environ)
"""The environment of every process the benchmark starts (see the bytecode note above)."""


Timing = tuple[float, float]
"""(wall seconds, CPU seconds)."""


def _median(samples: list[Timing]) -> Timing:
    return (
        statistics.median(wall for wall, _ in samples),
        statistics.median(cpu for _, cpu in samples),
    )


def _show(timing: Timing) -> str:
    return f"{timing[0]:.3f} s (CPU {timing[1]:.3f} s)"


def _reap(process: subprocess.Popen[Any], kill: bool = True) -> float:
    """Kill (unless it exits by itself) and reap ``process``; the CPU seconds it used."""
    if kill:
        process.send_signal(signal.SIGKILL)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], runs: int) -> Timing:
    """Median (wall, CPU) from spawn to exit."""
    samples: list[Timing] = []
    for _ in range(runs + 1):
        start = time.monotonic()
        process = subprocess.Popen(
            command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        cpu = _reap(process, kill=False)
        samples.append((time.monotonic() - start, cpu))
    return _median(samples[1:])  # the first run may compile: unmeasured


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        return None  # a client killed mid-request is expected here


class FirstRequest:
    """A loopback server that notes when a request first arrives and answers 503 (the client
    gives up; only the arrival matters)."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.at = 0.0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                if not stub.arrived.is_set():
                    stub.at = time.monotonic()
                    stub.arrived.set()
                body = b'{"error": {"type": "invalid_request_error", "message": "benchmark"}}'
                self.send_response(400)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = _Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def first_request(provider: str, runs: int, tmp: Path) -> Timing:
    """Median (wall, CPU) from spawning ``coding-agent -p`` to its first provider request."""
    samples: list[Timing] = []
    project = tmp / "project"
    project.mkdir(exist_ok=True)
    for _ in range(runs + 1):  # the first run may compile: unmeasured
        server = FirstRequest()
        env = {k: v for k, v in ENV.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
        env["XDG_STATE_HOME"] = str(tmp / "state")
        env["XDG_CONFIG_HOME"] = str(tmp / "config")
        if provider == "openai":
            env.update(OPENAI_API_KEY="sk-bench", OPENAI_BASE_URL=f"{server.url}/v1")
            model = "openai/gpt-4.1"
        else:
            env.update(ANTHROPIC_API_KEY="sk-ant-bench", ANTHROPIC_BASE_URL=server.url)
            model = "anthropic/claude-sonnet-4-6"
        start = time.monotonic()
        process = subprocess.Popen(
            [AGENT, "-p", "hello", "--model", model],
            cwd=project,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            if not server.arrived.wait(120):
                raise RuntimeError(f"{provider}: no request arrived within 120 s")
            samples.append((server.at - start, _reap(process)))
        finally:
            if process.returncode is None:
                _reap(process)
            server.close()
    return _median(samples[1:])


async def _fill(session_dir: Path, entries: int) -> None:
    """Append ``entries`` transcript entries to the session's storage (plain notes)."""
    from chord.context import BACKGROUND
    from pico3.harness import Harness
    from pico3.storage import JsonlStorage

    harness = await Harness.open(
        JsonlStorage(session_dir / "storage", fsync=False), None, BACKGROUND
    )
    async with harness:
        root = await harness.root(BACKGROUND)
        for i in range(entries):
            await root.write("bench.note", BACKGROUND, data={"i": i, "text": f"note {i} " * 8})


def _worker(session_dir: Path, env: dict[str, str]) -> Timing:
    """Start the worker, SIGKILL it once it is serving; (wall, CPU) to ``READY``."""
    start = time.monotonic()
    process = subprocess.Popen(
        [PYTHON, "-m", "coding_agent.worker.main", str(session_dir), "--linger", "0"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    wall = time.monotonic() - start
    cpu = _reap(process)
    if not line.startswith("READY"):
        raise RuntimeError(f"the worker did not start: {line!r}")
    return wall, cpu


def worker_times(entries: int, runs: int, tmp: Path) -> tuple[Timing, Timing]:
    """(the first start -> serving, the median start after a SIGKILL -> serving) for a
    session of ``entries`` entries."""
    from coding_agent.sessions import create_session

    project = tmp / f"project-{entries}"
    project.mkdir()
    env = {k: v for k, v in ENV.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env["XDG_STATE_HOME"] = str(tmp / "state")
    env["XDG_CONFIG_HOME"] = str(tmp / "config")
    session = create_session(project, env=env)
    if entries:
        anyio.run(_fill, session.path, entries)
    first = _worker(session.path, env)  # every start ends in a SIGKILL ...
    restarts = [_worker(session.path, env) for _ in range(runs)]  # ... so these are restarts
    return first, _median(restarts)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="processes per figure (median)")
    parser.add_argument("--quick", action="store_true", help="3 runs; sessions up to 1,000")
    parser.add_argument("--cold", action="store_true", help="cache no bytecode (see above)")
    args = parser.parse_args()
    runs = 3 if args.quick else args.runs
    cache = tempfile.TemporaryDirectory()
    if not args.cold:
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        ENV["PYTHONPYCACHEPREFIX"] = cache.name
    print("bytecode: " + ("none cached (--cold)" if args.cold else "cached after a first run"))
    bare = timed([PYTHON, "-c", "pass"], runs)
    textual = timed([PYTHON, "-c", "import textual"], runs)
    base = f"baseline: python -c pass {_show(bare)}, import textual {_show(textual)}"
    for flag in ("--help", "--version"):
        took = timed([AGENT, flag], runs)
        print(f"coding-agent {flag}: {_show(took)} [target <= 0.15 s] | {base}")
    with tempfile.TemporaryDirectory() as tmp:
        for provider in ("openai", "anthropic"):
            took = first_request(provider, runs, Path(tmp))
            print(
                f"start -> first provider request ({provider}): {_show(took)} "
                f"[target <= 0.5 s] | {base}"
            )
        for entries in (0, 1_000) if args.quick else (0, 1_000, 10_000):
            start, restart = worker_times(entries, runs, Path(tmp))
            target = 0.4 if entries == 0 else 0.8 if entries == 10_000 else None
            goal = f"[target <= {target} s]" if target is not None else "[no target]"
            print(
                f"worker start -> serving, {entries:,} entries: first {_show(start)}; after "
                f"SIGKILL {_show(restart)} {goal} | {base}"
            )
    cache.cleanup()


if __name__ == "__main__":
    main()
