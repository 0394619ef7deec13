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

Run: ``uv run python benchmarks/subagents_parallel.py [--rounds N] [--no-fsync]`` (targets: ten subagents add <= 20% to
the parent's turn with one; peak RSS < 300 MB).
"""

from __future__ import annotations

import asyncio
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

from chord.context import BACKGROUND
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from facets_subagents.session import session_facet
from pico3 import (
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
    p50 = {kind: statistics.median(wall[kind]) for kind in wall}
    added = (p50["many"] - p50["one"]) / p50["one"] * 100
    print(
        f"parent turn latency, fsync {'on (the worker default)' if fsync else 'off'}, faux model"
        f" answering after {LATENCY * 1e3:.0f} ms, {ROUNDS} turns each (same run, interleaved)"
    )
    labels = {
        "one": "1 subagent (note + report)      ",
        "many": f"{PARALLEL} subagents in parallel        ",
        "notes": f"{PARALLEL} plain note calls (for scale) ",
    }
    for kind, label in labels.items():
        print(
            f"  {label}p50 {p50[kind] * 1e3:7.1f} ms   CPU {statistics.median(cpu[kind]) * 1e3:6.1f} ms"
            f"   loop busy {statistics.median(busy[kind]) * 1e3:6.1f} ms"
        )
    print(
        f"  added by {PARALLEL} parallel subagents over 1: {added:+.1f}%   (target <= 20%: {'met' if added <= 20 else 'MISSED'})"
    )
    print(
        f"  peak RSS of the process: {rss_mb:.0f} MB   (target < 300 MB: {'met' if rss_mb < 300 else 'MISSED'})"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--rounds" in args:
        ROUNDS = int(args[args.index("--rounds") + 1])
    anyio.run(main, "--no-fsync" not in args)
