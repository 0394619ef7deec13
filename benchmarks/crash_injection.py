"""Benchmark: crash injection against the real session worker, many trials (issue 9 item 1).

The long sibling of ``tests/reliability/test_crash_injection.py``; the scenario is the test's
(``tests/reliability/crash_scenario.py``). Each trial is a fresh session served by
``python -m coding_agent.worker.main --no-fsync`` with scripted faux turns (parallel tool calls,
approvals, questions, ``code_search``, a background job and a subagent each round) and a background indexer
run; the worker is killed with ``SIGKILL`` ``--kills`` times at random points drawn from the
trial's seed (``--seed + trial``; some of them inside a running subagent) and started again each time, and every invariant is checked
after each kill and at the end.

Printed: one line per trial with a violation (seed, kill points, what broke), then a table of
trials, kills, resumes (restarts that found a live turn or task and carried it on), invariant
violations by kind, and the restart time (kill → the client's view hydrated again) mean and
worst. The exit code is 1 when any invariant was violated.

Run: ``uv run python benchmarks/crash_injection.py --trials N [--kills K] [--seed S]
[--max-delay SECONDS] [--minutes M] [--record FILE]`` (``--minutes`` stops starting trials after
M minutes and says how many ran).

``--postgres`` keeps the sessions in a throwaway PostgreSQL cluster. ``--failover [--lease L]``
(issue 23 deliver 4) runs the same trials against two ``coding-agent serve`` on one throwaway
cluster instead of one bare worker (``tests/reliability/crash_servers.py``): the client dials
both, each kill is the SIGKILL of the server hosting the session *and* of its worker, the other
server's worker takes the lease once it expires and resumes, and the killed server is started
again; the table adds the failovers, the takeover time (SIGKILL → the other server's worker up)
and the failover time (SIGKILL → the client's view hydrated on the other server).

A long run can be split: ``--record FILE`` appends one JSON line per finished trial (so an
interrupted run keeps what it did), and ``--report FILE...`` prints the table of the recorded
trials of one or more files without running anything. Seeds must not repeat across the files.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "reliability"))
from crash_scenario import (  # pyright: ignore[reportMissingImports]
    VIOLATION_KINDS,
    CrashConfig,
    TrialReport,
    Violation,
    run_trial,
)

os.environ["CODING_AGENT_WARM_START"] = "0"  # processes start cold unless a line says warm


def _ranges(seeds: list[int]) -> str:
    """``[1, 2, 3, 7, 8]`` -> ``"1..3, 7..8"`` (sorted input)."""
    spans: list[list[int]] = []
    for seed in seeds:
        if spans and seed == spans[-1][1] + 1:
            spans[-1][1] = seed
        else:
            spans.append([seed, seed])
    return ", ".join(f"{a}..{b}" if a != b else f"{a}" for a, b in spans)


def _record(path: Path, report: TrialReport) -> None:
    with path.open("a", encoding="utf-8") as file:
        file.write(json.dumps(dataclasses.asdict(report)) + "\n")
        file.flush()


def _recorded(paths: list[Path]) -> list[TrialReport]:
    reports: dict[int, TrialReport] = {}
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            try:
                raw = json.loads(line)
                raw["violations"] = [Violation(**v) for v in raw["violations"]]
                report = TrialReport(**raw)
            except (ValueError, TypeError, KeyError) as error:
                raise SystemExit(f"{path}:{number}: not a recorded trial ({error})") from None
            if report.seed in reports:
                raise SystemExit(f"{path}:{number}: seed {report.seed} is recorded twice")
            reports[report.seed] = report
    return [reports[seed] for seed in sorted(reports)]


def _spread(times: list[float]) -> str:
    return (
        f"mean {statistics.fmean(times):.2f} s, median {statistics.median(times):.2f} s, "
        f"max {max(times):.2f} s ({len(times)})"
    )


def _table(
    reports: list[TrialReport], wanted: int, elapsed: float | None, config: CrashConfig
) -> str:
    kills = sum(r.kills for r in reports)
    resumes = sum(r.resumes for r in reports)
    restarts = [s for r in reports for s in r.restart_seconds]
    by_kind = {kind: 0 for kind in VIOLATION_KINDS}
    for report in reports:
        for violation in report.violations:
            by_kind[violation.kind] = by_kind.get(violation.kind, 0) + 1
    rows = [
        (
            "trials",
            f"{len(reports):,} of {wanted:,} asked"
            + (f" ({elapsed / 60:.1f} min)" if elapsed is not None else ""),
        ),
        ("kills (SIGKILL + restart)", f"{kills:,} ({config.kills} per trial)"),
        ("resumes (live turn or task at restart)", f"{resumes:,}"),
        ("rounds (prompts) completed", f"{sum(r.rounds for r in reports):,}"),
        ("dialogs answered", f"{sum(r.dialogs for r in reports):,}"),
        ("bash effects (each at most once)", f"{sum(r.effects for r in reports):,}"),
        ("background jobs (each ran once, exit 0)", f"{sum(r.jobs for r in reports):,}"),
        ("subagents (each made once, reported once)", f"{sum(r.subagents for r in reports):,}"),
        ("kills while a subagent ran (resumed)", f"{sum(r.subagent_kills for r in reports):,}"),
    ]
    if config.failover:
        rows.append(
            ("failovers (the other server took over)", f"{sum(r.failovers for r in reports):,}")
        )
        rows.append(
            (
                "kills that only cut the worker off",
                f"{sum(r.cutoffs for r in reports):,} (it went on after the takeover, fenced)",
            )
        )
        rows.append(
            (
                "second kills during a takeover",
                f"{sum(r.takeover_kills for r in reports):,} (the server taking over, and "
                "the worker it was starting)",
            )
        )
        rows.append(
            (
                "kills that waited for a server to fail over to",
                f"{sum(r.delayed_kills for r in reports):,} (the one killed before was "
                "starting again)",
            )
        )
    rows += [(f"violations: {kind}", f"{count}") for kind, count in by_kind.items()]
    takeovers = [s for r in reports for s in r.takeover_seconds]
    if takeovers:
        rows.append(
            (
                "takeover (last kill to a worker up)",
                _spread(takeovers),
            )
        )
    if config.failover:
        once = [t for r in reports for n, t in enumerate(r.restart_seconds) if n not in r.twice]
        twice = [t for r in reports for n, t in enumerate(r.restart_seconds) if n in r.twice]
        for name, times in (
            ("failover time (kill to view rehydrated)", once),
            ("... with a second kill in the takeover", twice),
        ):
            if times:
                rows.append((name, _spread(times)))
    elif restarts:
        rows.append(("restart time (kill to view rehydrated)", _spread(restarts)))
    width = max(len(name) for name, _ in rows)
    lines = [f"| {'measure':{width}} | value |", f"|{'-' * (width + 2)}|---|"]
    lines += [f"| {name:{width}} | {value} |" for name, value in rows]
    return "\n".join(lines)


async def _main(args: argparse.Namespace) -> int:
    if args.postgres or args.failover:  # the sessions live in a throwaway cluster (issue 23)
        from pico3.storage.pg_cluster import TempCluster

        with TempCluster() as cluster:
            args.postgres = False
            return await _main_on(
                args, f"postgresql://{cluster.user}@127.0.0.1:{cluster.port}/postgres"
            )
    return await _main_on(args, None)


async def _main_on(args: argparse.Namespace, storage: str | None) -> int:
    config = CrashConfig(
        kills=args.kills,
        max_delay=args.max_delay,
        fsync=args.fsync,
        storage=storage,
        failover=args.failover,
        lease=args.lease,
        separate_state=args.separate_state,
        servers=args.servers,
        takeover_share=args.takeover_share,
        cutoff_share=args.cutoff_share,
    )
    reports: list[TrialReport] = []
    started = time.perf_counter()
    for trial in range(args.trials):
        if args.minutes is not None and time.perf_counter() - started > args.minutes * 60:
            print(f"stopping after {trial} trials: --minutes {args.minutes} reached", flush=True)
            break
        seed = args.seed + trial
        workdir = Path(tempfile.mkdtemp(prefix=f"crash-injection-{seed}-"))
        report = await run_trial(seed, config, workdir)
        reports.append(report)
        if args.record is not None:
            _record(args.record, report)
        if report.violations:  # kept for a post-mortem: storage, worker.log, effects.log
            print(f"seed {seed}: violations, session kept in {workdir}", flush=True)
        else:
            shutil.rmtree(workdir)
        for violation in report.violations:
            print(
                f"VIOLATION seed={seed} {violation.kind}: {violation.detail} "
                f"(kill points: {'; '.join(report.kill_points)})",
                flush=True,
            )
        if args.progress and (trial + 1) % args.progress == 0:
            print(f"{trial + 1} trials, {time.perf_counter() - started:.0f} s", flush=True)
    elapsed = time.perf_counter() - started
    if config.failover:
        what = (
            f"{config.servers} coding-agent serve on one PostgreSQL database (--lease "
            f"{config.lease:g}"
            f"{', each its own state folder' if config.separate_state else ', one state folder'}), "
            f"the client on all of them; SIGKILL of the server hosting the session and its "
            f"worker"
        )
    else:
        what = (
            f"real worker ({'fsync on' if config.fsync else '--no-fsync'}"
            f"{', storage on PostgreSQL' if config.storage else ''}), SIGKILL"
        )
    print(
        f"crash injection: {what} {config.kills}x per trial at random "
        f"points (a delay < {config.max_delay} s or < {config.max_updates} view updates), "
        f"seeds {args.seed}..{args.seed + len(reports) - 1}"
    )
    print(_table(reports, args.trials, elapsed, config))
    return 1 if any(report.violations for report in reports) else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20, help="sessions to run (default 20)")
    parser.add_argument("--kills", type=int, default=5, help="SIGKILLs per trial (default 5)")
    parser.add_argument("--seed", type=int, default=1000, help="seed of the first trial")
    parser.add_argument(
        "--max-delay", type=float, default=0.25, help="upper bound of a kill delay (s)"
    )
    parser.add_argument(
        "--fsync", action="store_true", help="run the worker with fsync on (default: off)"
    )
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="keep the sessions in a throwaway PostgreSQL cluster (worker --storage)",
    )
    parser.add_argument(
        "--failover",
        action="store_true",
        help="two coding-agent serve on one throwaway PostgreSQL cluster host the session; "
        "each kill is the SIGKILL of the one hosting it (and its worker), the client fails "
        "over to the other, and the killed one is started again",
    )
    parser.add_argument(
        "--lease", type=float, default=2.0, help="with --failover: the servers' --lease (s)"
    )
    parser.add_argument(
        "--separate-state",
        action="store_true",
        help="with --failover: every server but the first has its own state folder (another "
        "machine: it adopts the session from the database)",
    )
    parser.add_argument(
        "--servers", type=int, default=2, help="with --failover: servers on the database (2)"
    )
    parser.add_argument(
        "--cutoff-share",
        type=float,
        default=0.0,
        help="with --failover --separate-state: share of kills that only stop the host's "
        "workers (cut off), letting them go on once another server took the lease",
    )
    parser.add_argument(
        "--takeover-share",
        type=float,
        default=0.25,
        help="with --failover: share of kills followed by a kill of the server taking over",
    )
    parser.add_argument("--minutes", type=float, help="stop starting trials after M minutes")
    parser.add_argument("--progress", type=int, default=0, help="print a line every N trials")
    parser.add_argument("--record", type=Path, help="append each finished trial to FILE (JSONL)")
    parser.add_argument(
        "--report", type=Path, nargs="+", metavar="FILE", help="print the table of recorded trials"
    )
    args = parser.parse_args()
    if args.report:
        reports = _recorded(args.report)
        if not reports:
            parser.error("no recorded trials in " + ", ".join(map(str, args.report)))
        print(f"recorded trials: {len(reports)} (seeds {_ranges([r.seed for r in reports])})")
        print(
            _table(
                reports,
                len(reports),
                None,
                CrashConfig(
                    kills=reports[0].kills, failover=any(r.takeover_seconds for r in reports)
                ),
            )
        )
        return 1 if any(report.violations for report in reports) else 0
    if args.trials < 1 or args.kills < 1:
        parser.error("--trials and --kills must be >= 1")
    return anyio.run(_main, args, backend="asyncio")


if __name__ == "__main__":
    sys.exit(main())
