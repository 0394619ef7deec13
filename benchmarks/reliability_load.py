"""Benchmark: many subagents with concurrent tool calls in one session worker, with attached
clients and a slow one (issue 9 item 3, the bigger sibling of ``tests/reliability/test_load.py``).

The scenario is the test's (``tests/reliability/load_scenario.py``): N supervisor tasks in one
commit, each creating an owned conversation whose faux-model turn makes T concurrent calls of a
barrier tool, on ``JsonlStorage(fsync=False)`` (``--rounds`` more turns per subagent, all sent
at once), then passive notes to the root in batches of 1,000; C clients (facet hosts over their
own Unix-socket connection) observe every ``pi.conversation`` instance; the slow client stops
reading once hydrated and is released after the others converged. The per-client queue
(``--queue-limit``) must exceed what one round sends a client (checked), so only the slow
client may overflow. Printed:

* **turns/s and tool calls/s** of the load (supervisors created → every supervisor terminal);
* **view updates/s delivered per fast client** (until it converged on the final views), and
  that they all saw the same count with no gap and no reset;
* **the slow client**: updates and instance rehydrations from reset snapshots against the fast
  clients' delivered counts;
* **memory**: peak RSS of the process (worker and clients share it); with ``--tracemalloc``
  a second, traced run of the same size adds the peak of Python allocations;
* **baselines** measured in the same process: the same turn run sequentially in a single
  conversation without clients, and the same N subagents with no client attached (turns/s,
  tool calls/s), which together say what the concurrency and the clients cost.

Run: ``uv run python benchmarks/reliability_load.py [--quick] [--conversations N] [--tools T]
[--clients C] [--queue-limit Q] [--tracemalloc]``.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import tracemalloc
from dataclasses import replace
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "reliability"))
from load_scenario import (  # pyright: ignore[reportMissingImports]
    LoadConfig,
    LoadReport,
    run_baseline,
    run_load,
)

MB = 1024 * 1024


def _check(report: LoadReport) -> list[str]:
    """The test's invariants, restated: a benchmark of a broken run is no benchmark."""
    config = report.config
    problems = [*report.errors, *report.transcript_problems, *report.live_tasks]
    turns = config.conversations * config.rounds
    if report.turns_done != turns:
        problems.append(f"{report.turns_done}/{turns} turns done")
    if report.round_frames and max(report.round_frames) >= config.peer_queue_limit:
        problems.append(
            f"a round sent {max(report.round_frames)} frames per client, not below the queue "
            f"limit {config.peer_queue_limit}: fast clients may legitimately reset; raise it"
        )
    fast = report.fast
    if any((c.gaps, c.rebaselines, c.respawns) != (0, 0, 0) for c in fast):
        problems.append("a fast client saw a gap, a reset or a respawn")
    if len({c.updates for c in fast}) > 1:
        problems.append(f"fast clients disagree on counts: {sorted({c.updates for c in fast})}")
    if any(c.rebaselines == 0 for c in report.slow):
        problems.append(
            f"the slow client never overflowed (it missed {sum(report.round_frames):,} frames, "
            f"queue limit {config.peer_queue_limit:,}): raise --tail or lower --queue-limit"
        )
    if any(c.final != report.clients[0].final for c in report.clients):
        problems.append("the clients' final views differ")
    return problems


def _print_load(report: LoadReport) -> None:
    config = report.config
    seconds = report.load_seconds
    print(
        f"load: {config.conversations} subagents x {config.rounds} turn(s) x "
        f"{config.tools_per_turn} concurrent tool calls, then {config.tail_writes:,} notes; "
        f"{config.clients} clients ({config.slow_clients} slow), per-client queue_limit "
        f"{config.peer_queue_limit:,}, JSONL fsync=off"
    )
    print(
        f"  turns: {report.turns_done} in {seconds:.2f} s = {report.turns_done / seconds:,.1f} "
        f"turns/s, {report.tool_calls / seconds:,.1f} tool calls/s "
        f"(peak {report.peak_concurrent_tools} tool calls running at once)"
    )
    fast = report.fast
    if fast:
        each = fast[0]
        load_frames = sum(report.round_frames[: config.rounds])
        rate = load_frames / report.fast_converged_seconds
        print(
            f"  fast clients ({len(fast)}): {each.updates:,} view updates each, "
            f"{load_frames:,} during the subagent load = {rate:,.0f} updates/s delivered per "
            f"client ({rate * len(fast):,.0f}/s in all); {each.bytes_received / MB:,.1f} MB "
            f"each, gaps {sum(c.gaps for c in fast)}, reset rehydrations "
            f"{sum(c.rebaselines for c in fast)}"
        )
    for client in report.slow:
        print(
            f"  slow client: {client.updates_when_fast_converged:,} updates while blocked, "
            f"{client.updates:,} in all + {client.rebaselines} instance rehydrations from reset "
            f"snapshots vs {fast[0].updates if fast else 0:,} updates per fast client; "
            f"{client.bytes_received / MB:,.1f} MB, gaps {client.gaps}"
        )
    print(f"  memory: peak RSS {report.peak_rss_bytes / MB:,.0f} MB (worker and clients)")


async def main(args: argparse.Namespace) -> None:
    scale = 4 if args.quick else 1
    config = LoadConfig(
        conversations=max(1, args.conversations // scale),
        rounds=args.rounds,
        tools_per_turn=args.tools,
        tail_writes=args.tail // scale,
        tail_batch=1000,
        clients=args.clients,
        slow_clients=1 if args.clients else 0,
        peer_queue_limit=max(1, args.queue_limit // scale),
        payload_bytes=args.payload,
        timeout=600,
    )
    with tempfile.TemporaryDirectory() as tmp:
        turns, calls = await run_baseline(config, Path(tmp), max(5, args.baseline_turns // scale))
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with tempfile.TemporaryDirectory() as tmp:
        alone = await run_load(replace(config, clients=0, slow_clients=0), Path(tmp))
    with tempfile.TemporaryDirectory() as tmp:
        report = await run_load(config, Path(tmp))
    _print_load(report)
    print(
        f"baseline: one conversation, sequential turns of the same shape, no clients: "
        f"{turns:,.1f} turns/s, {calls:,.1f} tool calls/s (peak RSS {rss_before / MB:,.0f} MB)"
    )
    print(
        f"baseline: the same {alone.turns_done} subagents with no client attached: "
        f"{alone.turns_done / alone.load_seconds:,.1f} turns/s, "
        f"{alone.tool_calls / alone.load_seconds:,.1f} tool calls/s"
    )
    if args.tracemalloc:
        tracemalloc.start()
        with tempfile.TemporaryDirectory() as tmp:
            traced = await run_load(config, Path(tmp))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(
            f"tracemalloc (second run, same size): peak {peak / MB:,.1f} MB of Python "
            f"allocations, {traced.turns_done} turns"
        )
    problems = _check(report) + [f"no-client run: {p}" for p in _check(alone)]
    if problems:
        print("INVALID RUN:", *problems[:10], sep="\n  ")
        raise SystemExit(1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a quarter of the conversations")
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=1, help="turns per subagent")
    parser.add_argument("--tail", type=int, default=6000, help="notes written after the load")
    parser.add_argument("--tools", type=int, default=4, help="tool calls per turn")
    parser.add_argument("--clients", type=int, default=10, help="attached clients, one slow")
    parser.add_argument("--queue-limit", type=int, default=4096, help="per-client update queue")
    parser.add_argument("--payload", type=int, default=1024, help="bytes of each tool result")
    parser.add_argument("--baseline-turns", type=int, default=40)
    parser.add_argument("--tracemalloc", action="store_true", help="add a traced run")
    anyio.run(main, parser.parse_args())
