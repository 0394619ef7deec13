"""``serve --host-sessions`` (issue 42, "sessions are cheap"): one host process serves every
session (its own harness, wire service and lease each), on PostgreSQL through a pool of
``--db-pool-size`` connections and one lease renewer, whatever the number of sessions; a start
that fails leaves nothing running; the one-process-per-session path is unchanged. On
PostgreSQL a default ``serve`` hosts its sessions so and holds at most ``--db-connections``
connections; a combination of flags over that bound is refused with one line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from psycopg import sql

pytestmark = pytest.mark.anyio


@pytest.fixture
def database(postgres_cluster: Any) -> Iterator[str]:
    """A database of its own (its backends are this test's), dropped afterwards."""
    name = f"db_{uuid.uuid4().hex}"
    with psycopg.connect(postgres_cluster.conninfo, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield (
            f"postgresql://{postgres_cluster.user}@127.0.0.1:{postgres_cluster.port}/{name}"
            "?application_name=host-test"
        )
    finally:
        with psycopg.connect(postgres_cluster.conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def query(url: str, sql: str, *args: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(sql, args)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []


def backends(url: str) -> int:
    """The database's client backends opened with this test's ``application_name`` (the
    server's and its host's; the test's own queries use another)."""
    rows = query(
        url.split("?")[0],
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'host-test'",
    )
    return int(rows[0][0])


TOKEN = "host-test-token-0123456789abcdef"


def run_p(
    env: dict[str, str], server: Any, *args: str, session: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``-p`` on ``server`` (over its Unix socket; over TCP to name an existing ``session``)."""
    address = server.unix if session is None else f"{server.tcp}/{session}"
    return subprocess.run(
        [sys.executable, "-m", "coding_agent.cli.main", *args, "--insecure", "--server", address],
        env={**env, "CODING_AGENT_TOKEN": TOKEN}, capture_output=True, text=True, timeout=240,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def token_file(tmp_path: Path) -> str:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return str(path)


async def clients(env: dict[str, str], server: Any, count: int) -> list[Any]:
    done: list[subprocess.CompletedProcess[str]] = []

    async def one() -> None:
        done.append(await anyio.to_thread.run_sync(run_p, env, server, "-p", "hi"))

    async with anyio.create_task_group() as group:
        for _ in range(count):
            group.start_soon(one)
    return done


async def test_many_sessions_share_one_host_process_and_a_bounded_pool(
    servers: Any,
    agent_env: dict[str, str],
    project: Path,
    faux_script: Path,
    database: str,
    tmp_path: Path,
) -> None:
    server = await servers(
        agent_env,
        ["--faux-script", str(faux_script), "serve", "--cwd", str(project), "--storage",
         database, "--host-sessions", "1", "--db-pool-size", "2", "--max-starting", "8",
         "--listen", "tcp://127.0.0.1:0", "--insecure", "--token-file", token_file(tmp_path)],
        lines=2,
    )  # fmt: skip
    done = await clients(agent_env, server, 8)
    for run in done:
        assert run.returncode == 0, run.stderr
        assert run.stdout == "Hello from the server.\n"
    assert sum("session host started" in e for e in server.events) == 1, server.events
    assert not any("worker started" in e for e in server.events), "no worker process"
    # the eight sessions linger (--idle 300) in the host, each holding its lease ...
    held = query(
        database.split("?")[0], "SELECT count(*) FROM pico3_sessions WHERE holder IS NOT NULL"
    )
    assert held == [(8,)]
    # ... on the pool's connections and the renewer's, beside the server's one for its
    # session directory (kept for the next start, whatever the number of starts)
    assert 1 <= backends(database) <= 2 + 1 + 1
    # and a session is served again by its host (its harness resumed the conversation)
    session = query(database.split("?")[0], "SELECT session FROM pico3_sessions LIMIT 1")[0][0]
    again = await anyio.to_thread.run_sync(
        lambda: run_p(agent_env, server, "-p", "more", session=session)
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout == "Second answer.\n"
    assert sum("session host started" in e for e in server.events) == 1


async def test_a_failed_hosted_start_leaves_nothing_running_and_the_host_serves_on(
    servers: Any, agent_env: dict[str, str], project: Path, faux_script: Path, tmp_path: Path
) -> None:
    server = await servers(
        agent_env,
        ["--faux-script", str(faux_script), "serve", "--cwd", str(project), "--host-sessions", "1"],
    )
    limits = await server.wait_event(lambda e: " limits " in e, "the limits line")
    assert "max_starting=16" in limits, limits  # a host's default, not the CPUs'
    bad = await anyio.to_thread.run_sync(
        run_p, agent_env, server, "-p", "hi", "--model", "nosuch/model"
    )
    assert bad.returncode != 0
    assert "nosuch" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    folders = [p for p in (tmp_path / "state").rglob("session.json")]
    assert folders, "the session folder was made"
    for folder in folders:  # its lock is free: nothing serves it
        from coding_agent.session_files.folders import load_session

        assert not load_session(folder.parent).worker_running()
    good = await anyio.to_thread.run_sync(run_p, agent_env, server, "-p", "hi")
    assert good.returncode == 0, good.stderr
    assert sum("session host started" in e for e in server.events) == 1


async def test_a_killed_host_is_started_again_and_its_sessions_resume(
    servers: Any,
    agent_env: dict[str, str],
    project: Path,
    faux_script: Path,
    database: str,
    tmp_path: Path,
) -> None:
    server = await servers(
        agent_env,
        ["--faux-script", str(faux_script), "serve", "--cwd", str(project), "--storage",
         database, "--host-sessions", "1", "--db-pool-size", "2", "--lease", "1",
         "--listen", "tcp://127.0.0.1:0", "--insecure", "--token-file", token_file(tmp_path)],
        lines=2,
    )  # fmt: skip
    first = await anyio.to_thread.run_sync(run_p, agent_env, server, "-p", "hi")
    assert first.returncode == 0, first.stderr
    started = await server.wait_event(lambda e: "session host started" in e, "the host")
    pid = int(started.split("pid ")[1].split(")")[0])
    os.kill(pid, signal.SIGKILL)  # every session of the host goes with it
    await server.wait_event(lambda e: "session host exited" in e, "the host's end")
    await server.wait_event(lambda e: "reaped" in e, "the session reaped")
    session = query(database.split("?")[0], "SELECT session FROM pico3_sessions")[0][0]
    again = await anyio.to_thread.run_sync(
        lambda: run_p(agent_env, server, "-p", "more", session=session)
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout == "Second answer.\n"  # resumed from storage by a new host
    assert sum("session host started" in e for e in server.events) == 2


async def test_sessions_go_to_the_least_loaded_of_several_hosts(
    servers: Any, agent_env: dict[str, str], project: Path, faux_script: Path
) -> None:
    server = await servers(
        agent_env,
        ["--faux-script", str(faux_script), "serve", "--cwd", str(project), "--host-sessions",
         "2", "--max-starting", "4"],
    )  # fmt: skip
    limits = await server.wait_event(lambda e: " limits " in e, "the limits line")
    assert "max_starting=4" in limits, limits  # the flag wins over the hosts' default
    done = await clients(agent_env, server, 4)
    for run in done:
        assert run.returncode == 0, run.stderr
        assert run.stdout == "Hello from the server.\n"
    pids = {e.split("pid ")[1] for e in server.events if "session host started" in e}
    assert len(pids) == 2, server.events  # both hosts serve: the second got the next session


async def test_a_default_server_hosts_many_sessions_within_its_connection_bound(
    servers: Any,
    agent_env: dict[str, str],
    project: Path,
    faux_script: Path,
    database: str,
    tmp_path: Path,
) -> None:
    """No ``--host-sessions``, no pool size: on PostgreSQL the sessions go to host processes
    (one per core) and the server's connections stay within ``--db-connections``' default of
    20 while 16 sessions start at once and linger (a worker process each held 3: 48)."""
    server = await servers(
        agent_env,
        ["--faux-script", str(faux_script), "serve", "--cwd", str(project), "--storage",
         database, "--listen", "tcp://127.0.0.1:0", "--insecure", "--token-file",
         token_file(tmp_path)],
        lines=2,
    )  # fmt: skip
    limits = await server.wait_event(lambda e: " limits " in e, "the limits line")
    planned = int(re.findall(r"db_connections=(\d+)", limits)[0])
    assert 3 <= planned <= 20, limits
    peak = 0
    running = True
    done: list[subprocess.CompletedProcess[str]] = []

    async def watch() -> None:  # the most connections seen while the sessions start
        nonlocal peak
        while running:
            peak = max(peak, await anyio.to_thread.run_sync(backends, database))
            await anyio.sleep(0.05)

    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        done = await clients(agent_env, server, 16)
        running = False
    for run in done:
        assert run.returncode == 0, run.stderr
        assert run.stdout == "Hello from the server.\n"
    assert any("session host started" in e for e in server.events), server.events
    assert not any("worker started" in e for e in server.events), "no worker process"
    held = query(
        database.split("?")[0], "SELECT count(*) FROM pico3_sessions WHERE holder IS NOT NULL"
    )
    assert held == [(16,)]  # every session lingers, holding its lease ...
    lingering = backends(database)  # ... on the hosts' shared connections
    assert 1 <= lingering <= planned and peak <= planned, (lingering, peak, planned)


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (
            ["--host-sessions", "3", "--db-pool-size", "10"],
            ["--host-sessions 3 × (--db-pool-size 10 + 1 lease renewer) + 1", "= 34",
             "over --db-connections 20", "lower --db-pool-size to 5", "--db-connections 34"],
        ),
        (
            ["--host-sessions", "0", "--max-sessions", "10", "--db-connections", "16"],
            ["--max-sessions 10 × 3 connections + 1", "= 31", "over --db-connections 16",
             "give --max-sessions 5 or --db-connections 31"],
        ),
    ],
)  # fmt: skip
def test_a_combination_over_the_connection_bound_is_refused_with_one_line(
    agent_env: dict[str, str], database: str, tmp_path: Path, flags: list[str], words: list[str]
) -> None:
    socket_folder = tmp_path / "sock"
    socket_folder.mkdir(mode=0o700)
    refused = subprocess.run(
        [sys.executable, "-m", "coding_agent.cli.main", "serve", "--storage", database,
         "--socket", str(socket_folder / "s.sock"), *flags],
        env=agent_env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    lines = refused.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("coding-agent: error: "), lines
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert backends(database) == 0, "refused before it connected"
