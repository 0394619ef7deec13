"""Many sessions in one process on PostgreSQL (issue 42, "sessions are cheap"): one
:class:`LeaseRenewer` renewing every lease in one statement on one connection, the sessions'
commits and blobs drawn from one bounded pool, and an idle session's writer connection given
back to the pool without weakening the fence (a stale writer is still refused)."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import anyio
import psycopg
import pytest

from chord.context import BACKGROUND
from pico3.storage import (
    Conversation,
    ConversationWrite,
    LeaseLost,
    LeaseRenewer,
    PostgresStorage,
    StorageInUse,
)

pytestmark = pytest.mark.anyio
ctx = BACKGROUND
DEADLINE = 60.0


def query(conninfo: str, sql: str, *args: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        cursor = conn.execute(sql, args)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []


def tagged(conninfo: str) -> tuple[str, str]:
    """``conninfo`` with an application_name of its own, and that name (to count backends)."""
    name = f"t{uuid.uuid4().hex[:12]}"
    return f"{conninfo} application_name={name}", name


def backends(conninfo: str, name: str) -> int:
    ((count,),) = query(
        conninfo, "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", name
    )
    return int(count)


async def until(condition: Any, what: str) -> None:
    with anyio.fail_after(DEADLINE):
        while not condition():  # noqa: ASYNC110 - another thread's state, polled with a deadline
            await anyio.sleep(0.05)
    assert condition(), what


async def commit_one(storage: PostgresStorage) -> int:
    return await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)


async def test_one_renewer_keeps_every_lease_on_one_connection_and_the_pool_bounds_the_rest(
    postgres_cluster: Any,
) -> None:
    from psycopg_pool import AsyncConnectionPool

    conninfo, name = tagged(postgres_cluster.conninfo)
    sessions = [f"shared-{uuid.uuid4().hex}" for _ in range(8)]
    renewer = LeaseRenewer(conninfo)
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        conninfo, min_size=1, max_size=3, open=False
    )
    async with pool:
        storages: list[PostgresStorage] = []
        for session in sessions:  # more sessions than pool connections: each releases when idle
            storage = PostgresStorage(
                session=session, pool=pool, renewer=renewer, fsync=False, lease_seconds=1.0
            )
            await storage.open(ctx)
            assert await commit_one(storage) == 1
            assert await storage.release_writer()
            assert not storage.holds_writer
            storages.append(storage)
        before = renewer.renewals
        await until(lambda: renewer.renewals >= before + 8, "renewals go on")  # 2 s: leases of 1 s
        assert len(renewer) == len(sessions)
        # every lease is still held: a second opener of any session is refused
        for session in sessions:
            other = PostgresStorage(postgres_cluster.conninfo, session, fsync=False)
            with pytest.raises(StorageInUse):
                await other.open(ctx)
        # the pool's connections and one renewer's, whatever the number of sessions
        assert backends(postgres_cluster.conninfo, name) <= 3 + 1
        for storage in storages:  # each takes a pool connection again and commits on
            assert await commit_one(storage) == 2
            assert await storage.release_writer()
        for storage in storages:
            await storage.close(ctx)
        assert len(renewer) == 0

        def released() -> bool:
            rows = query(
                postgres_cluster.conninfo,
                "SELECT count(*) FROM pico3_sessions WHERE session = ANY(%s) AND holder IS NULL "
                "AND seq = 2",
                sessions,
            )
            return rows == [(len(sessions),)]

        # every close gave its lease back (through the renewer's connection: the writers held
        # none) and recorded seq 2
        await until(released, "the leases are released")
    renewer.close()


async def test_a_writer_that_released_its_connection_is_refused_after_a_takeover(
    postgres_cluster: Any,
) -> None:
    from psycopg_pool import AsyncConnectionPool

    conninfo = postgres_cluster.conninfo
    session = f"idle-{uuid.uuid4().hex}"
    renewer = LeaseRenewer(conninfo)
    fenced = threading.Event()
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        conninfo, min_size=1, max_size=1, open=False
    )
    async with pool:
        stale = PostgresStorage(session=session, pool=pool, renewer=renewer, fsync=False)
        await stale.open(ctx)
        stale.on_fence(lambda reason: fenced.set())
        assert await commit_one(stale) == 1
        assert await stale.release_writer()
        # another worker takes the session over (a supervisor that believes the holder dead)
        taker = PostgresStorage(conninfo, session, fsync=False, take_over=True)
        await taker.open(ctx)
        assert await commit_one(taker) == 2
        # the shared renewer learns the lease is gone and the storage fences its effects
        await until(fenced.is_set, "the stale writer is fenced")
        with pytest.raises(LeaseLost):
            await commit_one(stale)
        assert await commit_one(taker) == 3
        await taker.close(ctx)
        await stale.close(ctx)
    renewer.close()
    rows = query(
        conninfo, "SELECT seq, epoch FROM pico3_commits WHERE session = %s ORDER BY seq", session
    )
    first, second = rows[0][1], rows[1][1]
    assert [seq for seq, _ in rows] == [1, 2, 3] and first < second == rows[2][1]


async def test_a_released_writer_whose_renewer_has_not_noticed_yet_is_refused_at_the_fence(
    postgres_cluster: Any,
) -> None:
    """The re-take checks the epoch under the session lock, whatever the renewer knows."""
    from psycopg_pool import AsyncConnectionPool

    conninfo = postgres_cluster.conninfo
    session = f"race-{uuid.uuid4().hex}"
    renewer = LeaseRenewer(conninfo)
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        conninfo, min_size=1, max_size=2, open=False
    )
    async with pool:
        # a long lease: the renewer's next statement is 15 s away
        stale = PostgresStorage(
            session=session, pool=pool, renewer=renewer, fsync=False, lease_seconds=60.0
        )
        await stale.open(ctx)
        assert await commit_one(stale) == 1
        assert await stale.release_writer()
        taker = PostgresStorage(conninfo, session, fsync=False, take_over=True)
        await taker.open(ctx)
        started = time.monotonic()
        with pytest.raises(LeaseLost):
            await commit_one(stale)
        assert time.monotonic() - started < 15  # refused by the fence, not the renewer
        assert await commit_one(taker) == 2
        await taker.close(ctx)
        await stale.close(ctx)
    renewer.close()
    assert [seq for (seq,) in query(
        conninfo, "SELECT seq FROM pico3_commits WHERE session = %s ORDER BY seq", session
    )] == [1, 2]  # fmt: skip


async def test_blobs_of_a_pooled_session_use_the_pool_and_keep_their_fence(
    postgres_cluster: Any,
) -> None:
    from psycopg_pool import AsyncConnectionPool

    conninfo, name = tagged(postgres_cluster.conninfo)
    session = f"blobs-{uuid.uuid4().hex}"
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        conninfo, min_size=1, max_size=2, open=False
    )
    renewer = LeaseRenewer(conninfo)
    async with pool:
        storage = PostgresStorage(session=session, pool=pool, renewer=renewer, fsync=False)
        await storage.open(ctx)
        await storage.put_blobs({"a": b"1"}, ctx)
        assert await storage.get_blob("a", ctx) == b"1"
        assert backends(postgres_cluster.conninfo, name) <= 2 + 1
        taker = PostgresStorage(postgres_cluster.conninfo, session, fsync=False, take_over=True)
        await taker.open(ctx)
        with pytest.raises(LeaseLost):
            await storage.put_blobs({"a": b"2"}, ctx)
        await taker.close(ctx)
        await storage.close(ctx)
    renewer.close()
    assert query(
        postgres_cluster.conninfo,
        "SELECT data FROM pico3_blobs WHERE session = %s AND name = 'a'",
        session,
    ) == [(b"1",)]


async def test_waiting_for_a_pool_connection_is_not_a_stalled_commit(
    postgres_cluster: Any,
) -> None:
    """``commit_timeout`` bounds the database's answer, not the wait for the pool's turn."""
    from psycopg_pool import AsyncConnectionPool

    conninfo = postgres_cluster.conninfo
    renewer = LeaseRenewer(conninfo)
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        conninfo, min_size=1, max_size=1, open=False
    )
    async with pool:
        holder, waiter = (
            PostgresStorage(
                session=f"turn-{uuid.uuid4().hex}",
                pool=pool,
                renewer=renewer,
                fsync=False,
                commit_timeout=1.0,
                connect_timeout=30.0,
            )
            for _ in range(2)
        )
        await waiter.open(ctx)
        assert await waiter.release_writer()
        await holder.open(ctx)  # the pool's one connection, kept
        done = anyio.Event()
        async with anyio.create_task_group() as group:

            async def commit_later() -> None:
                await commit_one(waiter)
                done.set()

            group.start_soon(commit_later)
            # the waiter waits for the pool well past its commit_timeout
            with anyio.move_on_after(3.0):
                await done.wait()
            assert not done.is_set()
            assert await holder.release_writer()
        assert done.is_set()
        assert await commit_one(waiter) == 2  # not fail-stop: it was never stalled
        await holder.close(ctx)
        await waiter.close(ctx)
    renewer.close()
