"""Ten parallel subagents on the faux model: the parent's turn latency next to the same turn
with one subagent, in the same run; and the process's peak RSS.

A session host as the worker composes it (pico3's harness facet on JSONL storage with fsync on,
the worker's default, facets-subagents, a trivial ``note`` tool). A second run with fsync off
(``--no-fsync``; the worker's ``--no-fsync``) separates the storage's sync cost from CPU work; only
the fsync-on figure is the target's. The faux model answers after ``LATENCY`` seconds (a
model's time to first token; without it nothing distinguishes running in parallel from running in
turn). A parent turn is one assistant message with N ``agent`` calls, then a final answer; each
subagent (its own owned conversation) calls ``note`` once and reports. **baseline**: N = 1;
**parallel**: N = 10. ``ROUNDS`` turns of each are interleaved; the medians are compared. For
scale it also prints a turn with ten plain ``note`` calls.

The CPU time of each turn (the process's, median) is printed too, and the event loop's busy time
(wall minus the time it waited in its selector: CPU work plus blocking I/O on the loop thread):
the machine may be shared, and latency added by parallel subagents is this process's work,
serialised on one thread.

**Through the worker** (the target's own words: "the worker stays under 300 MB"): the same
turns against a real ``coding-agent`` worker process (``python -m coding_agent.worker.main``
with ``--faux-script``, fsync on unless ``--no-fsync``), driven by a chord client over the
session's Unix socket: the TUI's own ``RemoteConversationClient``, which follows the root
conversation's view (``--follow-all``: the client also subscribes to every subagent's view), and
each turn is timed from ``send`` to the ``turn.ended`` event naming the input. The script plays the parent's
turns in order (N ``agent`` calls, then an answer; the scale turn: N ``read`` calls), each
subagent its own conversation (one ``read`` of the project's README, then a report), every
answer after the script's ``latency`` (the same :data:`LATENCY`). Printed: p50 per kind, the
worker's CPU per turn (utime + stime from ``/proc/<pid>/stat``, median; the client runs in this
process) and the client's (this process's ``process_time``; on a two-core machine it competes
with the worker), the added percentage, and the worker's peak RSS (``VmHWM`` of
``/proc/<pid>/status``) after all the turns. ``--py-spy OUT`` samples the worker through the
whole run (``py-spy record --threads --idle --format raw``, py-spy on ``PATH``).

Run: ``uv run python benchmarks/subagents_parallel.py [--rounds N] [--quick] [--no-fsync]
[--worker | --in-process] [--follow-all] [--py-spy OUT]`` (default: both measurements; ``--quick``: 2 rounds each; targets:
ten subagents add <= 20% to the parent's turn with one; peak RSS < 300 MB).
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.services import define_service
from chord.state import Delivery
from chord.transport import connect_unix
from chord.wire import connect_service_source
from coding_agent.session_files.folders import create_session
from coding_agent.tui.conversation import SessionInfo
from coding_agent.tui.conversation_client import RemoteConversationClient
from facets_subagents.session import session_facet
from pico3 import (
    ConversationService,
    HarnessOptions,
    HarnessService,
    HarnessServiceApi,
    JsonlStorage,
    Models,
    ToolDeclaration,
    ToolResult,
    harness_session_facet,
)
from pico3.models.faux import FauxProvider, FauxResponse, FauxState, faux_response, faux_tool_call
from pico3.models.provider import Request, ToolResultMessage, UserMessage

os.environ["CODING_AGENT_WARM_START"] = "0"  # processes start cold unless a line says warm

MODEL = {"provider": "faux", "modelId": "faux-1"}
PARALLEL = 10
ROUNDS = 6
"""Turns of each kind (``--rounds``)."""
LATENCY = 0.2


class SlowFaux:
    """The faux provider, answering after :data:`LATENCY`."""

    def __init__(self, inner: FauxProvider) -> None:
        self._inner = inner
        self.name = inner.name

    def models(self) -> Any:
        return self._inner.models()

    def model(self, model_id: str) -> Any:
        return self._inner.model(model_id)

    async def stream(self, request: Request, ctx: Any) -> AsyncIterator[Any]:
        await anyio.sleep(LATENCY)
        async for event in self._inner.stream(request, ctx):
            yield event


class IdleMeter:
    """Seconds the event loop spent waiting in its selector (idle); a turn's wall time minus its
    idle time is the loop's *busy* time: CPU work plus the blocking I/O done on the loop thread
    (inline fsyncs), everything that serialises the parallel subagents."""

    def __init__(self) -> None:
        self.waited = 0.0

    def install(self) -> None:
        selector = asyncio.get_running_loop()._selector  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]
        select = selector.select

        def timed(timeout: float | None = None) -> Any:
            start = time.perf_counter()
            try:
                return select(timeout)
            finally:
                self.waited += time.perf_counter() - start

        selector.select = timed


def model(request: Request, state: FauxState) -> FauxResponse:
    last = request.messages[-1]
    if any("subagent" in s for s in request.system):
        if isinstance(last, ToolResultMessage):
            return faux_response("report: done")
        return faux_response(faux_tool_call("note", {"text": "x"}, id="n"))
    if isinstance(last, UserMessage):
        text = last.content if isinstance(last.content, str) else ""
        if text.startswith("agents"):
            count = int(text.split()[1])
            calls = [
                faux_tool_call(
                    "agent", {"description": f"job {i}", "prompt": f"job {i}"}, id=f"a{i}"
                )
                for i in range(count)
            ]
        else:
            calls = [faux_tool_call("note", {"text": str(i)}, id=f"n{i}") for i in range(PARALLEL)]
        return faux_response(*calls)
    return faux_response("all done")


async def _note(args: dict[str, Any], api: Any, ctx: Any) -> ToolResult:
    return ToolResult.text("noted")


NOTE = ToolDeclaration(
    name="note",
    description="Take a note.",
    parameters={"type": "object", "properties": {"text": {"type": "string"}}},
    execute=_note,
    replay="safe",
)


async def main(fsync: bool = True) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="subagents-bench-"))
    provider: Any = SlowFaux(FauxProvider([model] * 100000))
    services = {"models": Models([provider]), "workspace": str(tmp)}
    workers: list[HarnessServiceApi] = []

    def worker(env: FacetEnvironment) -> None:
        harness = env.use(HarnessService)
        workers.append(harness)
        env.on_activate(lambda: env.own(harness.add_registration(lambda h: h.register_tool(NOTE))))

    wall: dict[str, list[float]] = {"one": [], "many": [], "notes": []}
    cpu: dict[str, list[float]] = {"one": [], "many": [], "notes": []}
    busy: dict[str, list[float]] = {"one": [], "many": [], "notes": []}
    idle = IdleMeter()
    async with anyio.create_task_group() as group:
        harness_facet = harness_session_facet(
            lambda: JsonlStorage(str(tmp / "store"), fsync=fsync),
            HarnessOptions(services=services),
            task_group=group,
        )
        async with create_facet_host(
            [harness_facet, define_facet("bench/worker", worker), session_facet]
        ):
            (service,) = workers
            await service.resume(BACKGROUND)
            root = await service.harness.root(BACKGROUND)
            await root.set_config({"model": MODEL, "selectedTools": ["note", "agent"]}, BACKGROUND)

            async def turn(text: str, kind: str | None = None) -> None:
                start, used, waited = time.perf_counter(), time.process_time(), idle.waited
                handle = await root.send(text, BACKGROUND)
                await handle.wait(BACKGROUND)
                await root.wait_for_idle(BACKGROUND)
                if kind is not None:
                    elapsed = time.perf_counter() - start
                    wall[kind].append(elapsed)
                    cpu[kind].append(time.process_time() - used)
                    busy[kind].append(elapsed - (idle.waited - waited))

            idle.install()
            await turn("warm up")
            await turn(f"agents {PARALLEL} warm up")
            for r in range(ROUNDS):
                await turn(f"agents 1 round {r}", "one")
                await turn(f"agents {PARALLEL} round {r}", "many")
                await turn(f"notes {r}", "notes")
        group.cancel_scope.cancel()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"parent turn latency, fsync {'on (the worker default)' if fsync else 'off'}, faux model"
        f" answering after {LATENCY * 1e3:.0f} ms, {ROUNDS} turns each (same run, interleaved)"
    )
    _print_turns("note", wall, {"CPU": cpu, "loop busy": busy})
    print(
        f"  peak RSS of the process: {rss_mb:.0f} MB   (target < 300 MB: {'met' if rss_mb < 300 else 'MISSED'})"
    )
    sys.stdout.flush()


def _print_turns(
    verb: str, wall: dict[str, list[float]], columns: dict[str, dict[str, list[float]]]
) -> None:
    """A row per kind of turn (p50 wall, then the median of each column) and the target line."""
    p50 = {kind: statistics.median(wall[kind]) for kind in wall}
    labels = {
        "one": f"1 subagent ({verb} + report)      ",
        "many": f"{PARALLEL} subagents in parallel        ",
        "notes": f"{PARALLEL} plain {verb} calls (for scale) ",
    }
    for kind, label in labels.items():
        figures = "".join(
            f"   {name} {statistics.median(samples[kind]) * 1e3:6.1f} ms"
            for name, samples in columns.items()
        )
        print(f"  {label}p50 {p50[kind] * 1e3:7.1f} ms{figures}")
    added = (p50["many"] - p50["one"]) / p50["one"] * 100
    print(
        f"  added by {PARALLEL} parallel subagents over 1: {added:+.1f}%   (target <= 20%: {'met' if added <= 20 else 'MISSED'})"
    )


# -- through a real worker process ----------------------------------------------------------------
WHEN = "benchjob:"
"""The text in a subagent's prompt that selects its conversation script."""
APPROVALS = define_service("pi.approval-dialog")
BOUND = 120.0
"""Bound of any single wait on the worker (a busy two-core machine)."""
_PROVIDER_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")


def _worker_script(kinds: list[str]) -> dict[str, Any]:
    """The faux script: the parent's turns in the order ``kinds`` sends them, and the subagents'
    conversation script."""
    read = {"name": "read", "arguments": {"path": "README.md"}}
    steps: list[dict[str, Any]] = []
    for number, kind in enumerate(kinds):
        if kind == "notes":
            calls = [read] * PARALLEL
        else:
            count = 1 if kind == "one" else PARALLEL
            calls = [
                {
                    "name": "agent",
                    "arguments": {
                        "description": f"job {j}",
                        "prompt": f"{WHEN} turn {number} job {j}",
                    },
                }
                for j in range(count)
            ]
        steps += [{"toolCalls": calls}, {"text": "all done"}]
    child = [{"toolCalls": [read]}, {"text": "report: done"}]
    return {"steps": steps, "conversations": [{"when": WHEN, "steps": child}], "latency": LATENCY}


def _cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` (seconds)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/{pid}/status has no {key}")


class _Follower:
    """The client side: the TUI's own :class:`RemoteConversationClient` (it follows the root
    conversation's view only), whose view events say which inputs' turns ended; every approval
    dialog is allowed (and counted). With ``follow_all``, every conversation's view (each
    subagent's too) is also subscribed to, as a client showing them all would."""

    def __init__(self, follow_all: bool = False) -> None:
        self.client = RemoteConversationClient(SessionInfo(session_id="bench", cwd="."))
        self.ended: set[int] = set()
        self.approvals = 0
        self._follow_all = follow_all
        self._changed = anyio.Event()
        self.client.view.subscribe(self._deliver)

    def _deliver(self, value: Any, _ctx: Context, delivery: Delivery) -> None:
        if delivery.kind == "update" and value is not None:
            for event in value["commit"]["events"]:
                if event.get("type") == "turn.ended":
                    self.ended.update(event.get("inputs") or [])
        self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def wait_for(self, predicate: Any) -> None:
        with anyio.fail_after(BOUND):
            while not predicate():
                await self._changed.wait()

    def facets(self) -> list[Any]:
        def setup(env: FacetEnvironment) -> None:
            async def on_conversation(instance: Any, ctx: Context) -> None:
                stop = instance.view.subscribe(lambda *_: None)
                try:
                    await ctx.wait_cancelled()
                finally:
                    stop()

            async def on_dialog(facade: Any, ctx: Context) -> None:
                self.approvals += 1
                await facade.decide({"decision": "allow", "by": "benchmark"}, BACKGROUND)
                await ctx.wait_cancelled()

            if self._follow_all:
                env.observe(ConversationService, on_conversation)
            env.observe(APPROVALS, on_dialog)

        return [self.client.facet(), define_facet("bench/client", setup)]


async def through_worker(
    fsync: bool = True, follow_all: bool = False, profile: str | None = None
) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="subagents-worker-bench-"))
    project = tmp / "project"
    project.mkdir()
    (project / "README.md").write_text("# Bench project\n\nThe answer is 42.\n")
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_KEYS}
    env["XDG_STATE_HOME"] = str(tmp / "state")
    env["XDG_CONFIG_HOME"] = str(tmp / "config")
    session = create_session(project, env=env, model="faux/faux-1")
    kinds = ["one", "many"] + ["one", "many", "notes"] * ROUNDS  # two warm-up turns first
    script = tmp / "script.json"
    script.write_text(json.dumps(_worker_script(kinds)))
    command = [sys.executable, "-m", "coding_agent.worker.main", str(session.path)]
    command += ["--faux-script", str(script), "--exit-on-stdin-eof"]
    command += [] if fsync else ["--no-fsync"]
    wall: dict[str, list[float]] = {"one": [], "many": [], "notes": []}
    cpu: dict[str, list[float]] = {"one": [], "many": [], "notes": []}
    client: dict[str, list[float]] = {"one": [], "many": [], "notes": []}
    peak_kb = rss_kb = 0
    log = tmp / "worker.log"
    with log.open("wb") as stderr:
        process = await anyio.open_process(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            cwd=str(project),
        )
    try:
        assert process.stdout is not None
        with anyio.fail_after(BOUND):
            line = (
                await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 4096)
            ).decode()
        verb, _, path = line.partition(" ")
        if verb != "READY":
            raise RuntimeError(f"the worker did not start: {line!r}\n{log.read_text()[-2000:]}")
        socket = Path(path.strip())
        follower = _Follower(follow_all)
        spy = None
        if profile is not None:  # sample the worker for the whole run (py-spy's raw format)
            spy = await anyio.open_process(
                ["py-spy", "record", "--pid", str(process.pid), "--nonblocking", "--threads",
                 "--idle", "--rate", "200", "--format", "raw", "-o", profile],
                stdout=subprocess.DEVNULL,
            )  # fmt: skip
        async with anyio.create_task_group() as group:
            source = connect_service_source(lambda: connect_unix(socket), task_group=group)
            async with create_facet_host(follower.facets(), service_sources=[source]):
                await follower.wait_for(lambda: follower.client.attached)
                for number, kind in enumerate(kinds):
                    start, used = time.perf_counter(), _cpu_seconds(process.pid)
                    mine = time.process_time()
                    text = f"{kind} turn {number}"
                    sent = await follower.client.send(text, "prompt", BACKGROUND)
                    await follower.wait_for(lambda: sent in follower.ended)  # noqa: B023
                    if number >= 2:
                        wall[kind].append(time.perf_counter() - start)
                        cpu[kind].append(_cpu_seconds(process.pid) - used)
                        client[kind].append(time.process_time() - mine)
                peak_kb = _status_kb(process.pid, "VmHWM")
                rss_kb = _status_kb(process.pid, "VmRSS")
                if spy is not None:
                    spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
                    with anyio.fail_after(BOUND):
                        await spy.wait()
            await source.aclose()
            group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                assert process.stdin is not None
                await process.stdin.aclose()
                with anyio.move_on_after(BOUND):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            await process.aclose()
    print(
        f"through the worker (a coding-agent worker process; the TUI's client on its Unix socket"
        f"{', following every conversation' if follow_all else ', following the root'}),"
        f" fsync {'on (the worker default)' if fsync else 'off'}, faux script latency"
        f" {LATENCY * 1e3:.0f} ms, {ROUNDS} turns each (same run, interleaved)"
    )
    _print_turns("read", wall, {"worker CPU": cpu, "client CPU": client})
    peak_mb = peak_kb / 1024
    print(
        f"  peak RSS of the worker process (VmHWM): {peak_mb:.0f} MB, now {rss_kb / 1024:.0f} MB"
        f"   (target < 300 MB: {'met' if peak_mb < 300 else 'MISSED'})"
        + (f"   [{follower.approvals} approvals]" if follower.approvals else "")
    )
    sys.stdout.flush()


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--rounds" in args:
        ROUNDS = int(args[args.index("--rounds") + 1])
    elif "--quick" in args:
        ROUNDS = 2
    fsync_on = "--no-fsync" not in args
    if "--worker" not in args:
        anyio.run(main, fsync_on)
    spied = args[args.index("--py-spy") + 1] if "--py-spy" in args else None
    if "--in-process" not in args:
        anyio.run(through_worker, fsync_on, "--follow-all" in args, spied)
