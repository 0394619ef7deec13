"""PostgresStorage under database faults (issue 42): a PostgreSQL restart under an idle session,
a broken connection, a database that is down, a frozen backend (the commit bound and the lease
that stops), and the TCP liveness settings of every connection."""

from __future__ import annotations

import os
import signal
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
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
    StorageFailed,
    StorageUnreachable,
)
from pico3.storage.pg_blobs import with_liveness
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


def writer_backend(conninfo: str, session: str) -> int:
    """The pid of the backend holding the session's lock (the writer's connection)."""
    ((pid,),) = query(
        conninfo,
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND granted "
        "AND objid::int8 = (SELECT lock_key FROM pico3_sessions WHERE session = %s)",
        session,
    )
    return int(pid)


def lease_expired(conninfo: str, session: str) -> bool:
    ((expired,),) = query(
        conninfo,
        "SELECT lease_until < clock_timestamp() FROM pico3_sessions WHERE session = %s",
        session,
    )
    return bool(expired)


async def test_a_frozen_backend_fails_the_commit_within_the_bound_and_stops_the_lease(
    own_cluster: TempCluster,
) -> None:
    conninfo = own_cluster.conninfo
    session = f"frozen-{uuid.uuid4().hex}"
    storage = PostgresStorage(conninfo, session, fsync=False, lease_seconds=1.0, commit_timeout=2.0)
    await storage.open(ctx)
    fences: list[str] = []
    storage.on_fence(fences.append)
    backend = 0
    try:
        await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
        backend = writer_backend(conninfo, session)
        os.kill(backend, signal.SIGSTOP)
        with anyio.fail_after(30), pytest.raises(StorageFailed) as info:
            await note(storage, 1)  # fails once commit_timeout passed, not when the OS gives up
        message = str(info.value)
        assert "\n" not in message
        assert message.startswith(
            f"session {session!r}: commit 2 got no answer from PostgreSQL at 127.0.0.1:"
        )
        assert "within 2 s" in message and "stopped renewing the session's lease" in message
        # The watchdog's thread fences right after it wakes the commit up: the commit may fail
        # first on a loaded machine (polled, 30 s at most).
        for _ in range(600):
            if fences:
                break
            await anyio.sleep(0.05)
        assert fences and "no answer from PostgreSQL within 2 s" in fences[0]
        with pytest.raises(StorageFailed):  # fail-stop
            await note(storage, 2)
        for _ in range(600):  # the renewals stopped: the lease runs out (polled, 30 s at most)
            if lease_expired(conninfo, session):
                break
            await anyio.sleep(0.05)
        assert lease_expired(conninfo, session)
    finally:
        if backend:
            os.kill(backend, signal.SIGCONT)
        await storage.close(ctx)
    successor = PostgresStorage(conninfo, session, fsync=False, wait=30.0)
    await successor.open(ctx)  # the lease expired: taken over (the old backend ended)
    try:
        assert successor.seq in (1, 2)  # the stalled commit's fate was unknown, now it is known
        assert successor.epoch == storage_epoch_after(conninfo, session)
    finally:
        await successor.close(ctx)


async def test_a_frozen_backend_fails_a_grouped_commit_within_the_bound_too(
    own_cluster: TempCluster,
) -> None:
    """A host's session commits in groups on a pool connection (pico3.storage.pg_group): its
    stall ends the same way, within the commit bound, not after a recovery that would wait on
    the frozen backend again (its transaction holds the row's unique index)."""
    from psycopg_pool import AsyncConnectionPool

    from pico3.storage import LeaseRenewer

    conninfo = own_cluster.conninfo
    session = f"frozen-group-{uuid.uuid4().hex}"
    name = f"grouped-{uuid.uuid4().hex[:8]}"
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        f"{conninfo} application_name={name}", min_size=1, max_size=2, open=False
    )
    renewer = LeaseRenewer(conninfo)
    backends: list[int] = []
    async with pool:
        storage = PostgresStorage(
            session=session,
            pool=pool,
            renewer=renewer,
            group_commit=True,
            lease_seconds=1.0,
            commit_timeout=2.0,
        )
        await storage.open(ctx)
        try:
            await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
            backends = [
                int(pid)
                for (pid,) in query(
                    conninfo, "SELECT pid FROM pg_stat_activity WHERE application_name = %s", name
                )
            ]
            assert backends
            for pid in backends:
                os.kill(pid, signal.SIGSTOP)
            with anyio.fail_after(30), pytest.raises(StorageFailed) as info:
                await note(storage, 1)
            message = str(info.value)
            assert "\n" not in message
            assert "got no answer from PostgreSQL" in message and "within 2 s" in message
            with pytest.raises(StorageFailed):  # fail-stop
                await note(storage, 2)
        finally:
            for pid in backends:
                os.kill(pid, signal.SIGCONT)
            with anyio.fail_after(30):
                await storage.close(ctx)
    renewer.close()


async def test_grouped_commits_waiting_for_a_pool_connection_fail_within_the_commit_bound(
    own_cluster: TempCluster,
) -> None:
    """A host's sessions wait for a pool connection up to the pool's wait (a start-up storm
    is queued, not failed), but a commit never waits past its commit timeout: with every
    pool connection taken (as a stalled database keeps them), the group's leader waiting
    for one and the session queued behind it both fail with the one-line stall error,
    long before the pool's wait (here 600 s) ran out, and nothing of theirs is stored."""
    from psycopg_pool import AsyncConnectionPool

    from pico3.storage import LeaseRenewer

    conninfo = own_cluster.conninfo
    prefix = f"pool-wait-{uuid.uuid4().hex[:8]}"
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        conninfo, min_size=1, max_size=1, open=False
    )
    renewer = LeaseRenewer(conninfo)
    async with pool:
        storages = [
            PostgresStorage(
                session=f"{prefix}-{n}",
                pool=pool,
                renewer=renewer,
                group_commit=True,
                connect_timeout=600.0,
                commit_timeout=2.0,
            )
            for n in range(2)
        ]
        for storage in storages:
            await storage.open(ctx)
            await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
        held = await pool.getconn()  # the pool's only connection: nobody else gets one
        failures: list[str] = []

        async def commit(storage: PostgresStorage) -> None:
            with pytest.raises(StorageFailed) as info:
                await note(storage, 1)
            failures.append(str(info.value))

        try:
            with anyio.fail_after(120):  # the bug: 600 s, the pool's wait
                async with anyio.create_task_group() as group:
                    for storage in storages:
                        group.start_soon(commit, storage)
        finally:
            await pool.putconn(held)
        assert len(failures) == 2
        for message in failures:
            assert "\n" not in message
            assert "got no answer from PostgreSQL" in message and "within 2 s" in message
        for storage in storages:
            with pytest.raises(StorageFailed):  # fail-stop
                await note(storage, 2)
            await storage.close(ctx)
    renewer.close()
    for n in range(2):
        assert query(
            conninfo, "SELECT seq FROM pico3_commits WHERE session = %s", f"{prefix}-{n}"
        ) == [(1,)]


def storage_epoch_after(conninfo: str, session: str) -> int:
    ((epoch,),) = query(conninfo, "SELECT epoch FROM pico3_sessions WHERE session = %s", session)
    return int(epoch)


async def test_every_connection_carries_keepalive_and_tcp_user_timeout(
    own_cluster: TempCluster,
) -> None:
    assert with_liveness("host=db keepalives_idle=30") == (
        "host=db keepalives_idle=30 keepalives=1 keepalives_interval=2 keepalives_count=3 "
        "tcp_user_timeout=15000"
    )  # what the caller set wins
    session = f"alive-{uuid.uuid4().hex}"
    storage = PostgresStorage(own_cluster.conninfo, session, fsync=False)
    await storage.open(ctx)
    try:
        conn = storage._conn  # pyright: ignore[reportPrivateUsage]
        assert conn is not None
        sock = socket.socket(fileno=os.dup(conn.pgconn.socket))
        try:
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 5
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == 2
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == 3
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 15000
        finally:
            sock.close()
    finally:
        await storage.close(ctx)
