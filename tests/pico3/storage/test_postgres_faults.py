"""PostgresStorage under database faults (issue 42): a PostgreSQL restart under an idle session,
a broken connection mid-commit, and the one-line typed errors the app prints."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from chord.context import BACKGROUND
from pico3.storage import (
    Conversation,
    ConversationWrite,
    Entry,
    EntryScan,
    EntryWrite,
    PostgresStorage,
    StorageUnreachable,
)
from pico3.storage.pg_cluster import PostgresMissing, TempCluster

pytestmark = pytest.mark.anyio
ctx = BACKGROUND


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[TempCluster]:
    """A cluster of this module's own: the tests restart it (the shared one serves others)."""
    cluster = TempCluster({"fsync": "off", "full_page_writes": "off"})
    try:
        cluster.start()
    except PostgresMissing as exc:
        import os

        if os.environ.get("CI") == "true":
            pytest.fail(f"{exc}; CI must run the PostgreSQL tests")
        pytest.skip(str(exc))
    try:
        yield cluster
    finally:
        cluster.stop()


def query(conninfo: str, sql: str, *args: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        cursor = conn.execute(sql, args)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []


async def note(storage: PostgresStorage, n: int) -> int:
    entry = Entry(id=storage.mint_id(), conversation_id=1, kind="note", data={"n": n})
    return await storage.commit([EntryWrite(entry)], ctx)


async def notes(conninfo: str, session: str) -> list[Any]:
    storage = PostgresStorage(conninfo, session, fsync=False)
    await storage.open(ctx)
    try:
        entries = await storage.scan_entries(EntryScan(conversation_id=1, limit=100), ctx)
        return [e.data["n"] for e in reversed(entries) if isinstance(e.data, dict)]
    finally:
        await storage.close(ctx)


async def test_an_idle_session_survives_a_postgresql_restart(own_cluster: TempCluster) -> None:
    conninfo = own_cluster.conninfo
    session = f"restart-{uuid.uuid4().hex}"
    storage = PostgresStorage(conninfo, session, fsync=False, lease_seconds=30.0)
    await storage.open(ctx)
    try:
        await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
        assert await note(storage, 1) == 2
        await storage.put_blobs({"a": b"1"}, ctx)
        epoch = storage.epoch
        own_cluster.restart()  # ends every connection, the writer's included
        assert await note(storage, 2) == 3  # the next prompt is not lost
        assert await storage.get_blob("a", ctx) == b"1"
        await storage.put_blobs({"a": b"2"}, ctx)
        own_cluster.restart()
        await storage.put_blobs({"b": b"3"}, ctx)  # the blob connection reconnects too
        assert await note(storage, 3) == 4
        assert storage.epoch == epoch  # the same lease: nobody took it over
    finally:
        await storage.close(ctx)
    assert await notes(conninfo, session) == [1, 2, 3]
    rows = query(
        conninfo, "SELECT seq, epoch FROM pico3_commits WHERE session = %s ORDER BY seq", session
    )
    assert rows == [(seq, epoch) for seq in range(1, 5)]


async def test_a_commit_whose_connection_was_ended_is_sent_on_a_new_one_once(
    own_cluster: TempCluster,
) -> None:
    conninfo = own_cluster.conninfo
    session = f"ended-{uuid.uuid4().hex}"
    storage = PostgresStorage(conninfo, session, fsync=False, lease_seconds=30.0)
    await storage.open(ctx)
    try:
        await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
        for n in range(1, 4):  # the writer's backend ended while idle, each time
            query(
                conninfo,
                "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
                "AND objsubid = 2 AND objid::int8 = (SELECT lock_key FROM pico3_sessions "
                "WHERE session = %s)",
                session,
            )
            assert await note(storage, n) == n + 1
    finally:
        await storage.close(ctx)
    assert await notes(conninfo, session) == [1, 2, 3]


async def test_an_unreachable_database_at_the_next_commit_is_one_line_and_recoverable(
    own_cluster: TempCluster,
) -> None:
    conninfo = own_cluster.conninfo
    session = f"down-{uuid.uuid4().hex}"
    storage = PostgresStorage(
        conninfo, session, fsync=False, lease_seconds=30.0, connect_timeout=1.0
    )
    await storage.open(ctx)
    try:
        await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
        own_cluster.pause()
        try:
            with pytest.raises(StorageUnreachable) as info:
                await note(storage, 1)
        finally:
            own_cluster.resume()
        message = str(info.value)
        assert "\n" not in message
        assert message.startswith(f"cannot reach PostgreSQL at 127.0.0.1:{own_cluster.port}/")
        assert "check the URL and that the server is running" in message
        assert await note(storage, 2) == 2  # nothing was sent: the session goes on
    finally:
        await storage.close(ctx)
    assert await notes(conninfo, session) == [2]
