"""The session worker with its commits in PostgreSQL (``--storage postgresql://…``, issue 23).

A prompt's turn is committed to the database, not to the folder's JSONL files; after a SIGKILL
the next worker waits out the dead one's lease and serves the same transcript. A worker whose
lease another server took fails its next commit (LeaseLost), publishes nothing and exits.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from psycopg import sql
from worker_support import (
    TIMEOUT,
    Client,
    connected,
    text_of,
    worker_command,
    worker_process,
    write_script,
)

from chord.context import BACKGROUND
from chord.wire.errors import RemoteCallError
from coding_agent.session_files.folders import Session
from coding_agent.worker.main import EXIT_STORAGE
from pico3 import PostgresStorage

pytestmark = pytest.mark.anyio


async def test_a_worker_on_postgresql_commits_there_and_survives_a_sigkill(
    session: Session, agent_env: dict[str, str], tmp_path: Path, postgres_cluster: Any
) -> None:
    url = f"postgresql://{postgres_cluster.user}@127.0.0.1:{postgres_cluster.port}/postgres"
    script = write_script(tmp_path / "script.json", [{"text": "Stored in the database."}])
    args = ("--faux-script", str(script), "--no-fsync", "--storage", url)
    async with worker_process(session, agent_env, *args) as worker:
        async with connected(Client(), worker.socket) as client:
            await client.root.send({"content": "remember this"}, BACKGROUND)
            await client.wait_for(client.turn_ended)
        await worker.kill()  # its lease stays in the database until it expires
    main = session.storage_dir / "main.jsonl"  # made empty with the session, and left so
    assert not main.exists() or main.read_bytes() == b""
    with psycopg.connect(postgres_cluster.conninfo) as conn:
        row = conn.execute(
            "SELECT (SELECT max(seq) FROM pico3_commits c WHERE c.session = s.session), "
            "holder IS NOT NULL FROM pico3_sessions s WHERE session = %s",
            (session.id,),
        ).fetchone()
    assert row is not None and row[0] > 1 and row[1], row  # committed; the dead holder's lease
    async with (
        worker_process(session, agent_env, *args) as worker,  # waits out that lease
        connected(Client(), worker.socket) as client,
    ):
        answers = [text_of(entry) for entry in client.entries("pi.assistant")]
        assert answers == ["Stored in the database."]


async def test_a_worker_whose_lease_is_taken_stops_at_its_next_commit_without_publishing(
    session: Session, agent_env: dict[str, str], tmp_path: Path, postgres_cluster: Any
) -> None:
    url = f"postgresql://{postgres_cluster.user}@127.0.0.1:{postgres_cluster.port}/postgres"
    script = write_script(tmp_path / "script.json", [{"text": "Never published."}])
    args = ("--faux-script", str(script), "--no-fsync", "--storage", url)
    log: list[str] = []
    async with (
        worker_process(session, agent_env, *args, on_stderr=log.append) as worker,
        connected(Client(), worker.socket) as client,
    ):
        seq = await _seq(postgres_cluster.conninfo, session.id)
        other = PostgresStorage(url, session.id, fsync=False, take_over=True)
        await other.open(BACKGROUND)  # another server takes the session over
        try:
            with pytest.raises(RemoteCallError, match="another worker took the lease"):
                await client.root.send({"content": "go"}, BACKGROUND)  # its commit: refused
            with anyio.fail_after(TIMEOUT):
                code = await worker.process.wait()
            assert code == EXIT_STORAGE
            assert other.seq == seq
            assert await _seq(postgres_cluster.conninfo, session.id) == seq  # nothing new
        finally:
            await other.close(BACKGROUND)
    assert any("another worker took the lease" in line for line in log), log


async def _seq(conninfo: str, session: str) -> int:
    async with await psycopg.AsyncConnection.connect(conninfo) as conn:
        cursor = await conn.execute(
            "SELECT max(seq) FROM pico3_commits WHERE session = %s", (session,)
        )
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def test_a_worker_that_cannot_reach_postgresql_says_so_in_one_line_and_exits_5(
    session: Session, agent_env: dict[str, str]
) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql://agent:s3cret@127.0.0.1:{port}/agents"
    command = worker_command(session, "--no-fsync", "--storage", url)
    with anyio.fail_after(TIMEOUT):
        done = await anyio.run_process(
            command, env=agent_env, stdin=subprocess.DEVNULL, check=False
        )
    errors = done.stderr.decode()
    assert done.returncode == EXIT_STORAGE, errors
    assert "Traceback" not in errors and "s3cret" not in errors, errors
    [line] = errors.splitlines()
    assert line.startswith(f"coding-agent worker: cannot reach PostgreSQL at 127.0.0.1:{port}/")


async def test_a_newer_schema_or_a_held_session_is_one_line_and_exit_5(
    session: Session, agent_env: dict[str, str], postgres_cluster: Any
) -> None:
    name = f"db_{session.id.replace('-', '_')}"
    with psycopg.connect(postgres_cluster.conninfo, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = f"postgresql://{postgres_cluster.user}@127.0.0.1:{postgres_cluster.port}/{name}"
    try:
        holder = PostgresStorage(url, session.id, fsync=False, lease_seconds=30.0)
        await holder.open(BACKGROUND)  # a live worker elsewhere holds the session
        try:
            lines = await _failed_start(session, agent_env, url)
        finally:
            await holder.close(BACKGROUND)
        assert lines[0].startswith(
            f"coding-agent worker: session {session.id!r} is open in another worker (pid "
        ), lines
        with psycopg.connect(url, autocommit=True) as conn:  # a release this one cannot use
            conn.execute("UPDATE pico3_schema SET version = 99, compatible = 99")
        lines = await _failed_start(session, agent_env, url)
        assert lines[0].startswith(
            "coding-agent worker: the database's pico3 schema is version 99, newer than this pico3"
        ), lines
    finally:
        with psycopg.connect(postgres_cluster.conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


async def _failed_start(session: Session, agent_env: dict[str, str], url: str) -> list[str]:
    """Start a worker that must fail; its stderr's lines (exactly one, no traceback)."""
    command = worker_command(session, "--no-fsync", "--storage", url)
    with anyio.fail_after(TIMEOUT):
        done = await anyio.run_process(
            command, env=agent_env, stdin=subprocess.DEVNULL, check=False
        )
    errors = done.stderr.decode()
    assert done.returncode == EXIT_STORAGE, errors
    assert "Traceback" not in errors, errors
    lines = errors.splitlines()
    assert len(lines) == 1, lines
    return lines
