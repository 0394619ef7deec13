"""Benchmark: worker restart after a ``SIGKILL`` -> a client holding the rehydrated root view.

``startup.py --only worker`` times a worker's start until it prints ``READY``; but the worker
builds a conversation's view only at a client's first watch, so a user who reattaches after a
crash waits for more than that. This measures the whole way, for a session of 1,000 realistic
transcript entries (``app_startup.py``'s prompt / tool call / tool result / answer cycle):

* a running worker of the session is ``SIGKILL``-ed (the crash);
* the clock starts as the new worker is spawned (``python -m coding_agent.worker.main``);
* a client connects to the worker's socket as the TUI does (a facet host over
  ``chord.wire.connect_service_source`` observing ``ConversationService``, like
  ``tests/reliability/crash_scenario.py``'s client) and the clock stops when it holds the root
  conversation's hydrated view with every entry in it.

Printed: the median wall time and the worker's CPU seconds (from ``/proc`` at that moment), next
to the floor measured in the same run: ``python -c pass`` and ``python -c "from pico3 import
Harness"`` (what importing the harness alone costs; ``import pico3`` by itself binds its names at
first use and costs next to nothing), and the ``READY`` point of the same restarts (so the gap between
serving and a rehydrated view shows), with the CPU seconds the client (this process) spent from
``READY`` to the view.

First with the warm start off (``COLD``: ``CODING_AGENT_WARM_START=0``, or a first run before
its server is up); then as by default, with the warm start (``coding_agent.warm``): the spawned
process is the thin client the supervisor spawns, and the worker is forked by a server started
and preloaded before the timing (printed as a second line, ``WARM START``).

Last, the memory of each kind of process at the view (RSS, PSS, USS from
``/proc/PID/smaps_rollup``): a cold worker, a forked one, its thin client, and the server.

Target (issue 45): <= 0.15 s median. Bytecode is cached after an unmeasured first start, as
``startup.py`` does. Run: ``uv run python benchmarks/worker_restart.py [--runs N] [--entries N]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from app_startup import _entries  # a sibling script, not a package
from startup import ENV, PYTHON, Timing, WarmServer, _cpu_now, _reap, _show, timed, warm_server

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.state import Delivery
from chord.transport import connect_unix
from chord.wire import Backoff, connect_service_source
from pico3 import ConversationService

os.environ["CODING_AGENT_WARM_START"] = "0"  # processes start cold unless a line says warm

_TARGET = 0.15


async def _fill(session_dir: Path, count: int) -> None:
    """Write ``count`` realistic transcript entries, one commit each (as a session grows). The
    ``pi.*`` kinds are the kernel's own, so they are written as ``bench.*`` with the same model
    messages: the same bytes to replay, decode and project."""
    from pico3.harness import Harness
    from pico3.storage import JsonlStorage

    harness = await Harness.open(
        JsonlStorage(session_dir / "storage", fsync=False), None, BACKGROUND
    )
    async with harness:
        root = await harness.root(BACKGROUND)
        for entry in _entries(count):
            await root.write(
                entry["kind"].replace("pi.", "bench."), BACKGROUND, model=entry["model"]
            )


def _client_facet(entries: int, done: anyio.Event, seen: dict[str, Any]) -> Any:
    """A facet that sets ``done`` once it holds the root view with ``entries`` entries."""

    def setup(env: FacetEnvironment) -> None:
        async def on_conversation(instance: Any, ctx: Context) -> None:
            def deliver(value: Any, _ctx: Context, delivery: Delivery) -> None:
                conversation = value["conversation"]
                if "parent" in conversation or "owner" in conversation:
                    return
                seen["entries"] = len(value["entries"])
                if len(value["entries"]) >= entries:
                    done.set()

            stop = instance.view.subscribe(deliver)
            try:
                await ctx.wait_cancelled()
            finally:
                stop()

        env.observe(ConversationService, on_conversation)

    return define_facet("bench/restart-client", setup)


async def _restart(
    session: Any, env: dict[str, str], entries: int, warm: WarmServer | None = None
) -> tuple[Timing, Timing, float]:
    """Spawn the worker; ((wall, CPU) to ``READY``, (wall, CPU) to the hydrated root view, the
    client's own CPU seconds from ``READY`` to the view: connecting, decoding and checking the
    view). The worker is ``SIGKILL``-ed at the end: the next call is a restart after a crash.

    ``warm``: the worker is what the supervisor spawns with the warm start on (``python -m
    coding_agent.warm.client --worker``), forked by that server; its CPU is the forked child's
    (from ``/proc``) plus the thin client's."""
    module = ["coding_agent.warm.client", "--worker"] if warm else ["coding_agent.worker.main"]
    child: int | None = None
    start = time.monotonic()
    process = subprocess.Popen(  # noqa: ASYNC220 - blocking spawn on purpose: the clock's start
        [PYTHON, "-m", *module, str(session.path), "--linger", "0"],
        env=warm.env if warm is not None else env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = await anyio.to_thread.run_sync(process.stdout.readline)
        child = warm.child() if warm is not None else None

        def cpu() -> float:
            worker = _cpu_now(process.pid) or 0.0
            return worker + ((_cpu_now(child) or 0.0) if child is not None else 0.0)

        ready = (time.monotonic() - start, cpu())
        client_start = time.process_time()
        if not line.startswith("READY"):
            raise RuntimeError(f"the worker did not start: {line!r}")
        done, seen = anyio.Event(), {"entries": 0}
        viewed: Timing = (0.0, 0.0)
        client = 0.0
        async with anyio.create_task_group() as group:
            source = connect_service_source(
                lambda: connect_unix(session.socket_path),
                task_group=group,
                on_error=lambda _error: None,
                retry=Backoff(initial=0.005, maximum=0.05),
            )
            try:
                async with create_facet_host(
                    [_client_facet(entries, done, seen)], service_sources=[source]
                ):
                    with anyio.fail_after(60):
                        await done.wait()
                    viewed = (time.monotonic() - start, cpu())
                    _note_memory("warm worker" if child else "cold worker", child or process.pid)
                    if child is not None:
                        _note_memory("thin client", process.pid)
                    client = time.process_time() - client_start
            finally:
                await source.aclose()
    finally:
        _reap(process)
        if child is not None:  # the forked worker dies with its client: wait for its lock
            await anyio.to_thread.run_sync(_until_unlocked, session)
    return ready, viewed, client


Memory = tuple[float, float, float]
"""(RSS, PSS, USS) MB of a process, from /proc/PID/smaps_rollup."""

_MEMORY: dict[str, list[Memory]] = {}


def _memory(pid: int) -> Memory | None:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    fields = {
        key: int(value.split()[0]) / 1024
        for key, _, value in (line.partition(":") for line in text.splitlines()[1:])
    }
    return fields["Rss"], fields["Pss"], fields["Private_Clean"] + fields["Private_Dirty"]


def _note_memory(what: str, pid: int) -> None:
    found = _memory(pid)
    if found is not None:
        _MEMORY.setdefault(what, []).append(found)


def _show_memory(what: str) -> str:
    samples = _MEMORY.get(what, [])
    if not samples:
        return f"{what} -"
    rss, pss, uss = (statistics.median(sample[i] for sample in samples) for i in range(3))
    return f"{what} RSS {rss:.0f} MB, PSS {pss:.0f} MB, USS {uss:.0f} MB"


def _until_unlocked(session: Any) -> None:
    """Poll until no worker holds ``session`` (a killed one's lock goes when it is gone)."""
    while session.worker_running():
        time.sleep(0.005)


def _median(samples: list[Timing]) -> Timing:
    return statistics.median(w for w, _ in samples), statistics.median(c for _, c in samples)


async def run(
    entries: int, runs: int, tmp: Path
) -> tuple[tuple[Timing, Timing, float], tuple[Timing, Timing, float]]:
    """The cold figures, then the warm-start ones (a fork server preloaded before timing)."""
    from coding_agent.session_files.folders import create_session

    project = tmp / "project"
    project.mkdir()
    env = {k: v for k, v in ENV.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env["XDG_STATE_HOME"] = str(tmp / "state")
    env["XDG_CONFIG_HOME"] = str(tmp / "config")
    env["HOME"] = str(tmp / "home")
    session = create_session(project, env=env)
    await _fill(session.path, entries)
    figures = []
    with warm_server(env) as server:
        for warm in (None, server):
            # unmeasured: compiles, fills caches; ends in SIGKILL
            await _restart(session, env, entries, warm)
            samples = [await _restart(session, env, entries, warm) for _ in range(runs)]
            figures.append((
                _median([r for r, _, _ in samples]),
                _median([v for _, v, _ in samples]),
                statistics.median(c for _, _, c in samples),
            ))  # fmt: skip
        _note_memory("the server", server.process.pid)
        if server.served() != runs + 1:
            raise RuntimeError("the warm restarts were not all served by the warm-start server")
    return figures[0], figures[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="restarts per figure (median)")
    parser.add_argument("--entries", type=int, default=1_000, help="transcript entries")
    args = parser.parse_args()
    cache = tempfile.TemporaryDirectory()
    ENV.pop("PYTHONDONTWRITEBYTECODE", None)
    ENV["PYTHONPYCACHEPREFIX"] = cache.name
    ENV["CHORD_CODE_CACHE"] = str(Path(cache.name) / "chord-code")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    bare = timed([PYTHON, "-c", "pass"], args.runs)
    pico3 = timed([PYTHON, "-c", "from pico3 import Harness"], args.runs)
    base = (
        f"floor: python -c pass {_show(bare)}, python -c 'from pico3 import Harness' {_show(pico3)}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        cold, warm = anyio.run(run, args.entries, args.runs, Path(tmp))
    for name, (ready, viewed, client) in (
        (", COLD (warm start off, or its first run)", cold),
        (", the default: WARM START (its fork server up and preloaded before timing; CPU: "
         "client + forked worker)", warm),
    ):  # fmt: skip
        met = "met" if viewed[0] <= _TARGET else "NOT met"
        print(
            f"worker restart after SIGKILL -> rehydrated root view, {args.entries:,} entries"
            f"{name}: {_show(viewed)}, {viewed[0] / pico3[0]:.1f}x the harness import (READY at "
            f"{_show(ready)}; the client's CPU from READY to the view {client:.3f} s) "
            f"[target <= {_TARGET} s: {met}] | {base}"
        )
    print(
        "memory at the rehydrated view (median, /proc/PID/smaps_rollup; USS: the pages the "
        "process alone holds): "
        + "; ".join(
            _show_memory(what)
            for what in ("cold worker", "warm worker", "thin client", "the server")
        )
    )
    cache.cleanup()


if __name__ == "__main__":
    main()
