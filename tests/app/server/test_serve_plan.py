"""How ``serve`` runs its sessions and bounds its PostgreSQL connections (issue 42, "sessions
are cheap"): :func:`coding_agent.server.main.plan_sessions` from the real ``serve`` flags. The
processes and ``pg_stat_activity`` are in ``test_serve_host.py``; here every combination's
numbers, on a few core counts."""

from __future__ import annotations

import argparse

import pytest

from coding_agent.server.args import add_serve_command
from coding_agent.server.credentials import ServerSetupError
from coding_agent.server.main import plan_sessions

URL = "postgresql://agent@db/agent"


def parse(*flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="coding-agent")
    add_serve_command(parser.add_subparsers(dest="command"), float)
    return parser.parse_args(["serve", *flags])


@pytest.mark.parametrize(
    ("cores", "flags", "plan"),
    [
        # the default on PostgreSQL: a host per core, the bound shared among them
        (2, [], (2, 8, None, 19)),
        (1, [], (1, 18, None, 20)),
        # many cores: as many hosts as get a pool of 4 within the bound, not a pool of 1 each
        (16, [], (3, 5, None, 19)),
        (2, ["--db-connections", "100"], (2, 48, None, 99)),
        (2, ["--db-connections", "9"], (1, 7, None, 9)),
        (2, ["--db-pool-size", "4"], (2, 4, None, 11)),
        (4, ["--db-pool-size", "8"], (2, 8, None, 19)),  # the bound caps the hosts
        (2, ["--host-sessions"], (2, 8, None, 19)),  # N omitted: one per core
        (2, ["--host-sessions", "1"], (1, 18, None, 20)),
        (2, ["--host-sessions", "3", "--db-pool-size", "5"], (3, 5, None, 19)),
        # a worker process per session: 3 connections each bound --max-sessions
        (2, ["--host-sessions", "0"], (0, None, 6, 19)),
        (2, ["--host-sessions", "0", "--max-sessions", "4"], (0, None, 4, 13)),
        (2, ["--host-sessions", "0", "--db-connections", "31"], (0, None, 10, 31)),
    ],
)  # fmt: skip
def test_a_postgresql_server_plans_within_its_connection_bound(
    cores: int, flags: list[str], plan: tuple[int, int | None, int | None, int]
) -> None:
    got = plan_sessions(parse(*flags), URL, cores=cores)
    assert got == plan
    bound = int(flags[flags.index("--db-connections") + 1]) if "--db-connections" in flags else 20
    assert got[3] is not None and got[3] <= bound


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--host-sessions", "3", "--db-pool-size", "10"],
         ["--host-sessions 3 × (--db-pool-size 10 + 1 lease renewer) + 1 for the session "
          "directory = 34 PostgreSQL connections, over --db-connections 20",
          "lower --db-pool-size to 5, or give --db-connections 34"]),
        (["--db-pool-size", "30"],
         ["1 host process × (--db-pool-size 30 + 1 lease renewer)", "= 32", "--db-connections 32"]),
        (["--host-sessions", "12"],
         ["= 25 PostgreSQL connections", "give --host-sessions 9 or fewer, or give "
          "--db-connections 25"]),
        (["--db-connections", "2"], ["= 3 PostgreSQL connections", ": give --db-connections 3"]),
        (["--host-sessions", "0", "--max-sessions", "10"],
         ["--max-sessions 10 × 3 connections + 1 for the session directory = 31",
          "give --max-sessions 6 or --db-connections 31", "drop --host-sessions 0"]),
        (["--host-sessions", "0", "--db-connections", "3"],
         ["one worker × 3 connections", "give --db-connections 4"]),
        (["--host-sessions", "0", "--db-pool-size", "3"],
         ["--db-pool-size is for host processes", "--host-sessions 0"]),
    ],
)  # fmt: skip
def test_a_combination_over_the_bound_is_refused_naming_the_numbers_and_the_fix(
    flags: list[str], words: list[str]
) -> None:
    with pytest.raises(ServerSetupError) as refused:
        plan_sessions(parse(*flags), URL, cores=2)
    message = str(refused.value)
    assert "\n" not in message
    for word in words:
        assert word in message, (word, message)


def test_jsonl_runs_a_worker_per_session_unless_asked_and_has_no_connections_to_bound() -> None:
    assert plan_sessions(parse(), None, cores=2) == (0, None, None, None)
    assert plan_sessions(parse("--host-sessions"), None, cores=4) == (4, None, None, None)
    assert plan_sessions(parse("--host-sessions", "1", "--max-sessions", "3"), None) == (
        1, None, 3, None,
    )  # fmt: skip
    for flag in ("--db-connections", "--db-pool-size"):
        with pytest.raises(ServerSetupError, match=f"{flag} is for --storage postgresql"):
            plan_sessions(parse(flag, "5"), None, cores=2)


def test_a_host_count_that_is_not_a_whole_number_is_refused_by_the_parser() -> None:
    with pytest.raises(SystemExit):
        parse("--host-sessions", "-1")
