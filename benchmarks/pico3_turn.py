"""Benchmark: the pico3 turn loop end to end on JSONL storage.

Two workloads, each printed with its baseline beside it:

* **tool turns**: N turns (default 40), each a faux-model answer with 8 tool calls to a trivial
  tool, then a final answer: per turn one ``send``, one generation with tool calls, 8 tool tasks,
  one post-tools step and a second generation. Measured on JSONL storage with ``fsync`` off and
  on: turns per second and persisted commits per turn (counted by a commit listener). Baseline:
  single passive writes (one commit each) per second on the same storage, i.e. the cost floor of
  one commit; ``turns/s ≈ commits/s ÷ commits per turn`` says how much the turn machinery adds.
* **stream**: one generation whose answer streams 20,000 text deltas into ``turn.message``
  (JSONL, fsync off). Measured: deltas per second through the harness and the number of
  envelopes a watcher received (coalescing at ≥256 bytes or 100 ms keeps it far below the delta
  count). Baseline: the same faux stream consumed raw, without the harness.

Run: ``uv run python benchmarks/pico3_turn.py [--quick]`` (``--quick`` divides N by 4 and the
stream by 10).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from chord.context import BACKGROUND, Context
from pico3.harness import Harness, HarnessOptions
from pico3.models.faux import FauxProvider, faux_response, faux_tool_call
from pico3.models.provider import Request, UserMessage
from pico3.storage import JsonlStorage
from pico3.tools import ToolApi, ToolDeclaration, ToolResult
from pico3.turn.models import Models

MODEL = {"provider": "faux", "modelId": "faux-1"}
CALLS = 8


async def _noop(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
    return ToolResult.text(f"ok {args.get('i')}")


TOOL = ToolDeclaration("noop", "Does nothing.", {"type": "object"}, _noop, replay="safe")


async def _open(directory: Path, fsync: bool, script: list[Any]) -> tuple[Harness, Any]:
    faux = FauxProvider(script)
    options = HarnessOptions(services={"models": Models([faux])})
    harness = await Harness.open(JsonlStorage(directory, fsync=fsync), options, BACKGROUND)
    return harness, faux


async def baseline_commits(fsync: bool, count: int) -> float:
    """Passive writes per second (one commit each) on fresh JSONL storage."""
    with tempfile.TemporaryDirectory() as tmp:
        harness, _ = await _open(Path(tmp) / "s", fsync, [])
        async with harness:
            root = await harness.root(BACKGROUND)
            start = time.perf_counter()
            for i in range(count):
                await root.write("bench.note", BACKGROUND, data={"i": i})
            return count / (time.perf_counter() - start)


async def tool_turns(fsync: bool, turns: int) -> tuple[float, float]:
    """(turns per second, persisted commits per turn)."""
    script: list[Any] = []
    for _ in range(turns):
        script.append(faux_response(*(faux_tool_call("noop", {"i": i}) for i in range(CALLS))))
        script.append(faux_response("done"))
    with tempfile.TemporaryDirectory() as tmp:
        harness, _ = await _open(Path(tmp) / "s", fsync, script)
        async with harness:
            harness.register_tool(TOOL)
            root = await harness.root(BACKGROUND)
            await root.set_config({"model": MODEL, "selectedTools": ["noop"]}, BACKGROUND)
            await harness.resume(BACKGROUND)
            commits = [0]
            harness.kernel.add_commit_listener(
                lambda _batch: commits.__setitem__(0, commits[0] + 1)
            )
            start = time.perf_counter()
            for i in range(turns):
                handle = await root.send(f"turn {i}", BACKGROUND)
                record = await handle.wait(BACKGROUND)
                assert record.status == "done", record
            elapsed = time.perf_counter() - start
            return turns / elapsed, commits[0] / turns


async def raw_stream(deltas: int) -> float:
    """Deltas per second of the faux stream consumed without the harness."""
    text = "".join(f"w{i} " for i in range(deltas))
    faux = FauxProvider([faux_response(text)])
    request = Request(model="faux-1", messages=[UserMessage(content="go")])
    start = time.perf_counter()
    seen = 0
    async for event in faux.stream(request, BACKGROUND):
        seen += type(event).__name__ == "TextDeltaEvent"
    assert seen == deltas, seen
    return deltas / (time.perf_counter() - start)


async def harness_stream(deltas: int) -> tuple[float, int, int]:
    """(deltas per second, envelopes received, envelopes that changed turn.message)."""
    text = "".join(f"w{i} " for i in range(deltas))
    with tempfile.TemporaryDirectory() as tmp:
        harness, _ = await _open(Path(tmp) / "s", False, [faux_response(text)])
        async with harness:
            root = await harness.root(BACKGROUND)
            await root.set_config({"model": MODEL}, BACKGROUND)
            watch = await root.watch(BACKGROUND)
            envelopes: list[Any] = []
            watch.start(envelopes.append)
            await harness.resume(BACKGROUND)
            start = time.perf_counter()
            handle = await root.send("go", BACKGROUND)
            record = await handle.wait(BACKGROUND)
            elapsed = time.perf_counter() - start
            assert record.status == "done", record
            message = [
                e for e in envelopes if any(list(op[1])[:2] == ["turn", "message"] for op in e.ops)
            ]
            return deltas / elapsed, len(envelopes), len(message)


async def main(quick: bool) -> None:
    turns = 10 if quick else 40
    deltas = 2_000 if quick else 20_000
    for fsync in (False, True):
        floor = await baseline_commits(fsync, 200 if quick else 500)
        rate, per_turn = await tool_turns(fsync, turns)
        print(
            f"tool turns (8 calls, JSONL fsync={'on' if fsync else 'off'}): {rate:,.1f} turns/s, "
            f"{per_turn:.1f} commits/turn | baseline: {floor:,.0f} single-write commits/s "
            f"(= {floor / per_turn:,.1f} turns/s if commits were all it cost)"
        )
    raw = await raw_stream(deltas)
    rate, envelopes, message = await harness_stream(deltas)
    print(
        f"stream into turn.message ({deltas:,} deltas, JSONL fsync=off): {rate:,.0f} deltas/s, "
        f"{envelopes:,} envelopes ({message:,} touching turn.message) | baseline: raw faux "
        f"stream {raw:,.0f} deltas/s, {deltas:,} envelopes without coalescing"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller N")
    anyio.run(main, parser.parse_args().quick)
