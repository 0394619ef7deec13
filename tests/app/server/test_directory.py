"""The servers' session directory on a fresh database (issue 42): 200 servers' first sessions at
once used to fail creating ``coding_agent_sessions`` (199 of 200: a ``pg_type`` duplicate key,
two ``CREATE TABLE IF NOT EXISTS`` racing); now every one is recorded and read back.

To make the 200 meet for sure, the database gets an event trigger that holds every DDL
statement at its start until the test lets them all go at once (an advisory lock the test
holds until all 200 connections wait on a lock)."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import psycopg
import pytest
from psycopg import sql

from coding_agent.server.directory import DirectoryStalled, SessionDirectory
from coding_agent.session_files.folders import METADATA_VERSION, SessionMetadata

pytestmark = pytest.mark.anyio
FIRST_USES = 200
GATE_KEY = 42  # the event trigger's (GATE) advisory lock
GATE = """
CREATE FUNCTION gate() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_lock_shared(42);
    PERFORM pg_advisory_unlock_shared(42);
END $$;
CREATE EVENT TRIGGER gate ON ddl_command_start EXECUTE FUNCTION gate();
"""
WAITING = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    "AND wait_event_type = 'Lock'"
)


@pytest.fixture
def fresh_db(postgres_cluster: Any) -> Iterator[str]:
    name = f"db_{uuid.uuid4().hex}"
    with psycopg.connect(postgres_cluster.conninfo, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = postgres_cluster.conninfo.replace("dbname=postgres", f"dbname={name}")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(GATE)
    try:
        yield url
    finally:
        with psycopg.connect(postgres_cluster.conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _metadata(n: int) -> SessionMetadata:
    return SessionMetadata(
        version=METADATA_VERSION, id=f"20261205-000000-{n:06x}", cwd="/project",
        created="2026-12-05T00:00:00+00:00", model=None,
    )  # fmt: skip


async def test_simultaneous_first_uses_of_a_fresh_database_all_succeed(fresh_db: str) -> None:
    failures: list[BaseException] = []

    async def first_use(n: int) -> None:
        directory = SessionDirectory(fresh_db, lock_timeout=300)  # a server's first use
        try:
            await directory.put(_metadata(n))
        except Exception as error:
            failures.append(error)
        finally:
            await directory.aclose()

    gate = await psycopg.AsyncConnection.connect(fresh_db, autocommit=True)
    async with gate:
        await gate.execute("SELECT pg_advisory_lock(%s)", (GATE_KEY,))
        with anyio.fail_after(180):
            async with anyio.create_task_group() as group:
                for n in range(FIRST_USES):
                    group.start_soon(first_use, n)
                while True:  # every first use is held at a lock: let them all go at once
                    row = await (await gate.execute(WAITING)).fetchone()
                    if row is not None and row[0] >= FIRST_USES:
                        break
                    await anyio.sleep(0.05)
                await gate.execute("SELECT pg_advisory_unlock(%s)", (GATE_KEY,))
    assert failures == []
    reader = SessionDirectory(fresh_db)
    for n in (0, FIRST_USES // 2, FIRST_USES - 1):
        assert await reader.get(_metadata(n).id) == _metadata(n)
    await reader.aclose()
    with psycopg.connect(fresh_db) as conn:
        assert conn.execute("SELECT count(*) FROM coding_agent_sessions").fetchone() == (
            FIRST_USES,
        )


@pytest.fixture
def one_connection_db(postgres_cluster: Any) -> Iterator[str]:
    """A database owned by a role PostgreSQL lets hold one connection at a time (``CONNECTION
    LIMIT 1``; a superuser would not be held to it): a second connection of the directory's at
    once fails with "too many connections for role"."""
    name = f"db_{uuid.uuid4().hex}"
    role = f"r_{uuid.uuid4().hex}"
    with psycopg.connect(postgres_cluster.conninfo, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE ROLE {} LOGIN CONNECTION LIMIT 1").format(sql.Identifier(role))
        )
        admin.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(name), sql.Identifier(role)
            )
        )
    try:
        yield f"postgresql://{role}@127.0.0.1:{postgres_cluster.port}/{name}"
    finally:
        with psycopg.connect(postgres_cluster.conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


STORM = 200


async def test_a_storm_of_session_starts_uses_one_connection(
    one_connection_db: str, postgres_cluster: Any
) -> None:
    directory = SessionDirectory(one_connection_db)  # one server's
    try:
        with anyio.fail_after(120):
            async with anyio.create_task_group() as group:
                for n in range(STORM):
                    group.start_soon(directory.put, _metadata(n))
            for n in (0, STORM - 1):
                assert await directory.get(_metadata(n).id) == _metadata(n)
        # the one connection stays open for the next start, named for pg_stat_activity
        with psycopg.connect(postgres_cluster.conninfo, autocommit=True) as admin:
            rows = admin.execute(
                "SELECT application_name FROM pg_stat_activity WHERE datname = %s",
                (one_connection_db.rsplit("/", 1)[1],),
            ).fetchall()
        assert rows == [("coding-agent serve",)]
    finally:
        await directory.aclose()
    with psycopg.connect(postgres_cluster.conninfo, autocommit=True) as admin:
        count = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s",
            (one_connection_db.rsplit("/", 1)[1],),
        ).fetchone()
    assert count == (0,)  # closed with the server


async def test_the_directory_reconnects_when_its_connection_is_gone(
    one_connection_db: str, postgres_cluster: Any
) -> None:
    directory = SessionDirectory(one_connection_db)
    try:
        await directory.put(_metadata(1))
        with psycopg.connect(postgres_cluster.conninfo, autocommit=True) as admin:
            admin.execute(  # as a PostgreSQL restart or an administrator would
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (one_connection_db.rsplit("/", 1)[1],),
            )
        await directory.put(_metadata(2))  # on a new connection, the old one's place free
        assert await directory.get(_metadata(1).id) == _metadata(1)
        assert await directory.get(_metadata(2).id) == _metadata(2)
    finally:
        await directory.aclose()


@pytest.fixture
def own_db(postgres_cluster: Any) -> Iterator[str]:
    name = f"db_{uuid.uuid4().hex}"
    with psycopg.connect(postgres_cluster.conninfo, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield postgres_cluster.conninfo.replace("dbname=postgres", f"dbname={name}")
    finally:
        with psycopg.connect(postgres_cluster.conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def directory_backend(url: str) -> int:
    """The pid of the directory's backend on ``url``'s database."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = 'coding-agent serve'"
        ).fetchall()
    assert len(rows) == 1, rows
    return rows[0][0]


async def test_a_statement_waiting_past_the_bound_is_cancelled_and_the_connection_kept(
    own_db: str,
) -> None:
    """The directory's connection carries ``statement_timeout``: a start whose statement waits
    on a lock fails with the server's cancellation at the bound, and the next one goes on."""
    directory = SessionDirectory(own_db, statement_timeout=1.0)
    try:
        await directory.put(_metadata(1))
        with psycopg.connect(own_db, autocommit=True) as conn:
            ((setting,),) = conn.execute(
                "SELECT setting FROM pg_settings WHERE name = 'statement_timeout'"
            ).fetchall()
            assert setting == "0"  # the database's default: the bound is the directory's own
        backend = directory_backend(own_db)
        blocker = await psycopg.AsyncConnection.connect(own_db)
        async with blocker:
            await blocker.execute("LOCK TABLE coding_agent_sessions IN ACCESS EXCLUSIVE MODE")
            with anyio.fail_after(60), pytest.raises(psycopg.errors.QueryCanceled) as info:
                await directory.put(_metadata(2))
            assert "statement timeout" in str(info.value)
            await blocker.rollback()
        await directory.put(_metadata(2))  # on the same connection
        assert directory_backend(own_db) == backend
        assert await directory.get(_metadata(2).id) == _metadata(2)
    finally:
        await directory.aclose()


async def test_a_frozen_backend_fails_the_statement_within_the_bound(own_db: str) -> None:
    """A backend that answers nothing (frozen; the server's own timeout cannot fire) costs a
    start at most the bound and a margin: the directory drops the connection, says so in one
    line, and the next start opens a new one."""
    directory = SessionDirectory(own_db, statement_timeout=1.0)
    backend = 0
    try:
        await directory.put(_metadata(1))
        backend = directory_backend(own_db)
        os.kill(backend, signal.SIGSTOP)
        with anyio.fail_after(60), pytest.raises(DirectoryStalled) as info:
            await directory.get(_metadata(1).id)
        message = str(info.value)
        assert "\n" not in message
        assert message.startswith("no answer from PostgreSQL at ")
        assert "within 1 s" in message and "connection was dropped" in message
        os.kill(backend, signal.SIGCONT)
        backend = 0
        with anyio.fail_after(60):
            assert await directory.get(_metadata(1).id) == _metadata(1)  # a new connection
    finally:
        if backend:
            os.kill(backend, signal.SIGCONT)
        await directory.aclose()
