"""Benchmark: one session committing alone, this checkout's pico3 against another's, paired.

The issue 42 target "one session >= 0.8x pgbench with one client" moves with the disk's flush
latency (shared with every other job's fsyncs) far more than with a few microseconds of our
CPU, so comparing two versions of the commit path needs them side by side: one throwaway
cluster (:class:`pico3.storage.pg_cluster.TempCluster`, ``fsync=on``), and per pair pgbench's
one client (2 s), then the two versions in ABBA order, each a process of its own committing
``--commits`` one-entry commits (three blocks, best block kept) after a warm-up; the other
version is run with ``--base``'s source folder first on ``PYTHONPATH``. Printed: each pair's
rates, ratios to pgbench and client CPU per commit (``process_time``: the process's threads,
the lease renewer's included), then the medians and the median of this/base per pair.

``--mode hosted`` (default) is a session host's path (a shared pool and renewer, group commit:
a lone session goes straight through the group committer); ``--mode own`` a worker's session
on a connection of its own.

Run: ``git archive main packages/pico3/src | tar -x -C /tmp/base`` then ``uv run python
benchmarks/lone_commit_ab.py --base /tmp/base/packages/pico3/src [--pairs 6] [--mode own]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))


async def _child(conninfo: str, name: str, mode: str, commits: int) -> None:
    """One side of a pair: warm up, then three blocks of ``commits`` commits; print the best
    block's rate and the lowest CPU per commit as one JSON line, with pico3's file."""
    from pico3_postgres import _hosted, _warm, ctx, entry  # pyright: ignore[reportMissingImports]

    import pico3
    from pico3.storage import PostgresStorage

    async def blocks(storage: PostgresStorage) -> list[tuple[float, float]]:
        await _warm([storage])
        out: list[tuple[float, float]] = []
        for _ in range(3):
            batches = [[entry(storage, n)] for n in range(commits)]
            started, cpu = time.perf_counter(), time.process_time()
            for batch in batches:
                await storage.commit(batch, ctx)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            out.append((commits / wall, cpu / commits * 1e6))
        return out

    if mode == "hosted":
        async with _hosted(conninfo, [name], 10) as (storages, _):
            out = await blocks(storages[0])
    else:
        storage = PostgresStorage(conninfo, name, fsync=True)
        try:
            out = await blocks(storage)
        finally:
            await storage.close(ctx)
    rate, cpu = max(r for r, _ in out), min(c for _, c in out)
    print(json.dumps({"file": pico3.__file__, "rate": rate, "cpu": cpu}))


def _side(conninfo: str, name: str, args: argparse.Namespace, base: str | None) -> dict[str, Any]:
    env = dict(os.environ)
    if base is not None:
        env["PYTHONPATH"] = base
    else:
        env.pop("PYTHONPATH", None)
    command = [sys.executable, __file__, "--child", conninfo, name, "--mode", args.mode]
    done = subprocess.run(
        [*command, "--commits", str(args.commits)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    from_base = found["file"].startswith(str(Path(base).resolve())) if base else False
    assert from_base == (base is not None), found["file"]  # the version asked for ran
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--base", help="the other checkout's packages/pico3/src")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--mode", choices=("hosted", "own"), default="hosted")
    parser.add_argument("--commits", type=int, default=500, help="per block (three a side)")
    parser.add_argument("--child", nargs=2, metavar=("CONNINFO", "NAME"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        anyio.run(_child, args.child[0], args.child[1], args.mode, args.commits)
        return
    if not args.base:
        parser.error("--base is required")
    from pico3_postgres import ServerCpu, pgbench_once  # pyright: ignore[reportMissingImports]

    from pico3.storage.pg_cluster import TempCluster

    sides = {"base": str(Path(args.base).resolve()), "this": None}
    results: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    pgbench: list[float] = []
    print(f"load average {os.getloadavg()[0]:.1f} at the start; mode {args.mode}")
    with TempCluster() as cluster:
        for pair in range(args.pairs):
            alone = pgbench_once(cluster, ServerCpu(cluster), 160, 1, 1, 2)
            if alone is None:
                raise SystemExit("no pgbench beside the PostgreSQL server binaries")
            pgbench.append(alone.rate)
            runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
            for side in [*sides, *reversed(sides)]:  # ABBA: the order balanced
                name = f"{side}-{pair}-{len(runs[side])}"
                runs[side].append(_side(cluster.conninfo, name, args, sides[side]))
            for side in sides:
                results[side].append(
                    {
                        "rate": statistics.mean(r["rate"] for r in runs[side]),
                        "cpu": statistics.mean(r["cpu"] for r in runs[side]),
                    }
                )
            print(
                f"pair {pair}: pgbench 1 client {alone.rate:,.0f}/s; "
                + "; ".join(
                    f"{side} {results[side][-1]['rate']:,.0f}/s "
                    f"({results[side][-1]['rate'] / alone.rate:.2f}x) "
                    f"client CPU {results[side][-1]['cpu']:.0f} us"
                    for side in sides
                ),
                flush=True,
            )
    for side in sides:
        ratio = statistics.median(
            r["rate"] / a for r, a in zip(results[side], pgbench, strict=True)
        )
        cpu = statistics.median(r["cpu"] for r in results[side])
        print(f"{side}: median ratio to pgbench {ratio:.2f}x, median client CPU {cpu:.0f} us")
    gain = statistics.median(
        t["rate"] / b["rate"] for t, b in zip(results["this"], results["base"], strict=True)
    )
    print(f"median this/base per pair: {gain:.3f}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
