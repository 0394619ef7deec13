"""Group commit on PostgreSQL (issue 42, throughput): the commits of many sessions on one shared
pool (``group_commit=True``) share one transaction, each fenced by its own writer's epoch, so a
stale writer fails alone and writes nothing, the others commit, and every seq stays
contiguous (pico3.storage.pg_group)."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import psycopg
import pytest

from chord.context import BACKGROUND
from pico3.storage import (
    Conversation,
    ConversationWrite,
    DocRef,
    DocWrite,
    LeaseLost,
    LeaseRenewer,
    PostgresStorage,
)
from pico3.storage.pg_group import committer_for
from pico3.storage.pg_prepared import TURN_EVERY_MS, Pace, run_prepared

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

pytestmark = pytest.mark.anyio
ctx = BACKGROUND


def query(conninfo: str, sql: str, *args: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        cursor = conn.execute(sql, args)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []


async def commit_one(storage: PostgresStorage) -> int:
    return await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)


def small_pool(conninfo: str, size: int, *, least: int = 1) -> AsyncConnectionPool[Any]:
    """A closed pool of ``least`` to ``size`` connections (``async with`` opens it)."""
    from psycopg_pool import AsyncConnectionPool

    return AsyncConnectionPool(conninfo, min_size=least, max_size=size, open=False)


def rows_of(conninfo: str, session: str) -> list[tuple[int, int]]:
    return [
        (int(seq), int(epoch))
        for seq, epoch in query(
            conninfo,
            "SELECT seq, epoch FROM pico3_commits WHERE session = %s ORDER BY seq",
            session,
        )
    ]


async def test_concurrent_commits_of_many_sessions_share_transactions_and_stay_contiguous(
    postgres_cluster: Any,
) -> None:
    conninfo = postgres_cluster.conninfo
    prefix = f"group-{uuid.uuid4().hex[:8]}"
    renewer = LeaseRenewer(conninfo)
    pool = small_pool(conninfo, 3)
    sessions, commits = 20, 5
    async with pool:
        storages = [
            PostgresStorage(session=f"{prefix}-{n}", pool=pool, renewer=renewer, group_commit=True)
            for n in range(sessions)
        ]
        for storage in storages:
            await storage.open(ctx)
            assert not storage.holds_writer  # its fence is per row: no lock, no connection

        async def run(storage: PostgresStorage) -> None:
            for n in range(commits):
                assert await commit_one(storage) == n + 1

        committer = committer_for(pool)
        sent, carried = committer.sent, committer.carried
        async with anyio.create_task_group() as group:
            for storage in storages:
                group.start_soon(run, storage)
        sent, carried = committer.sent - sent, committer.carried - carried
        for storage in storages:
            await storage.close(ctx)
    renewer.close()
    rows = query(
        conninfo,
        "SELECT session, seq, xmin::text FROM pico3_commits WHERE session LIKE %s",
        f"{prefix}-%",
    )
    assert len(rows) == sessions * commits
    for n in range(sessions):
        seqs = sorted(seq for session, seq, _ in rows if session == f"{prefix}-{n}")
        assert seqs == list(range(1, commits + 1))
    # rows committed by one transaction share its xmin: fewer transactions than commits
    transactions = len({xmin for _, _, xmin in rows})
    assert transactions < sessions * commits
    # the committer's counts (commits per group: the benchmarks' commits per WAL flush) say
    # as much: every commit carried (once more if the fence left it out of a group), and a
    # statement for each transaction
    assert carried >= sessions * commits
    assert transactions <= sent < carried
    # and everything reopens (a plain storage, the session lock and all)
    again = PostgresStorage(conninfo, f"{prefix}-0")
    await again.open(ctx)
    assert again.seq == commits
    await again.close(ctx)


async def test_a_stale_writer_in_a_group_fails_alone_and_writes_nothing_after_the_takeover(
    postgres_cluster: Any,
) -> None:
    """The per-row fence decides, not the renewer (a long lease: its next renewal is 15 s
    away): the taken-over session's commit is refused, the others of the group commit."""
    conninfo = postgres_cluster.conninfo
    prefix = f"stale-{uuid.uuid4().hex[:8]}"
    renewer = LeaseRenewer(conninfo)
    pool = small_pool(conninfo, 2)
    fenced: list[str] = []
    async with pool:
        storages = [
            PostgresStorage(
                session=f"{prefix}-{n}",
                pool=pool,
                renewer=renewer,
                group_commit=True,
                lease_seconds=60.0,
            )
            for n in range(6)
        ]
        for storage in storages:
            await storage.open(ctx)
            assert await commit_one(storage) == 1
        stale = storages[0]
        stale.on_fence(fenced.append)
        taker = PostgresStorage(conninfo, f"{prefix}-0", take_over=True)
        await taker.open(ctx)  # a plain writer: it takes the session lock
        assert await commit_one(taker) == 2
        outcomes: dict[int, object] = {}

        async def run(n: int, storage: PostgresStorage) -> None:
            try:
                outcomes[n] = await commit_one(storage)
            except LeaseLost as exc:
                outcomes[n] = exc

        async with anyio.create_task_group() as group:
            for n, storage in enumerate(storages):
                group.start_soon(run, n, storage)
        assert isinstance(outcomes[0], LeaseLost)
        assert fenced  # its effects were told to stop
        assert all(outcomes[n] == 2 for n in range(1, 6))
        with pytest.raises(LeaseLost):
            await commit_one(stale)  # fail-stop
        assert await commit_one(taker) == 3
        await taker.close(ctx)
        for storage in storages:
            await storage.close(ctx)
    renewer.close()
    first = rows_of(conninfo, f"{prefix}-0")
    assert [seq for seq, _ in first] == [1, 2, 3]
    assert first[0][1] < first[1][1] == first[2][1]  # after the takeover: the taker's only
    assert [seq for seq, _ in rows_of(conninfo, f"{prefix}-1")] == [1, 2]


async def test_a_grouped_session_taking_over_ends_a_plain_writer_and_sidecar_commits_are_fenced(
    postgres_cluster: Any,
) -> None:
    """A grouped opener still ends the previous holder's backend (the session lock), so a
    plain writer taken over writes nothing after; a grouped commit with sidecar rows (a sticky
    document) goes through the fenced ``pico3_commit`` and its truncation through the pool."""
    conninfo = postgres_cluster.conninfo
    session = f"mixed-{uuid.uuid4().hex[:8]}"
    old = PostgresStorage(conninfo, session)
    await old.open(ctx)
    assert await commit_one(old) == 1
    renewer = LeaseRenewer(conninfo)
    pool = small_pool(conninfo, 2)
    async with pool:
        taker = PostgresStorage(
            session=session, pool=pool, renewer=renewer, group_commit=True, take_over=True
        )
        await taker.open(ctx)
        with pytest.raises(LeaseLost):
            await commit_one(old)
        cid = taker.mint_id()
        sticky = DocRef.sticky(cid)
        await taker.commit(
            [ConversationWrite(Conversation(id=cid)), DocWrite(sticky, [["r", {"n": 0}]])], ctx
        )
        await taker.commit([DocWrite(sticky, [["r", {"n": 1}]])], ctx)
        await taker.truncate(sticky, ctx)
        assert [seq for (seq,) in query(
            conninfo, "SELECT seq FROM pico3_sticky WHERE session = %s", session
        )] == [3]  # fmt: skip
        # the sidecar commit of a writer taken over is refused too
        second = PostgresStorage(conninfo, session, take_over=True)
        await second.open(ctx)
        with pytest.raises(LeaseLost):
            await taker.commit([DocWrite(sticky, [["r", {"n": 2}]])], ctx)
        await second.close(ctx)
        await taker.close(ctx)
    await old.close(ctx)
    renewer.close()
    rows = rows_of(conninfo, session)
    assert [seq for seq, _ in rows] == [1, 2, 3]
    assert rows[0][1] < rows[1][1] == rows[2][1]
    reopened = PostgresStorage(conninfo, session)
    await reopened.open(ctx)
    assert await reopened.doc(sticky, ctx) == [[["r", {"n": 1}]]]
    await reopened.close(ctx)


async def test_pool_connections_the_server_ended_lose_no_grouped_commit(
    postgres_cluster: Any,
) -> None:
    """A PostgreSQL restart (here: every backend of the pool ended) loses no commit."""
    conninfo = postgres_cluster.conninfo
    name = f"t{uuid.uuid4().hex[:12]}"
    tagged = f"{conninfo} application_name={name}"
    renewer = LeaseRenewer(conninfo)
    pool = small_pool(tagged, 2, least=2)
    async with pool:
        storages = [
            PostgresStorage(session=f"{name}-{n}", pool=pool, renewer=renewer, group_commit=True)
            for n in range(3)
        ]
        for storage in storages:
            await storage.open(ctx)
            assert await commit_one(storage) == 1
        ended = query(
            conninfo,
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
            "WHERE application_name = %s",
            name,
        )
        assert ended and all(ok for (ok,) in ended)
        async with anyio.create_task_group() as group:
            for storage in storages:
                group.start_soon(commit_one, storage)
        assert [s.seq for s in storages] == [2, 2, 2]
        for storage in storages:
            await storage.close(ctx)
    renewer.close()
    for n in range(3):
        assert [seq for seq, _ in rows_of(conninfo, f"{name}-{n}")] == [1, 2]


async def test_a_stale_writer_committing_alone_is_refused_by_the_fence_of_its_row(
    postgres_cluster: Any,
) -> None:
    """A group of one (its own statement, sent straight through) is fenced the same way; the
    renewer has not noticed yet (a long lease renewed once before the takeover, the next
    renewal minutes away), so the statement's fence refuses it."""
    conninfo = postgres_cluster.conninfo
    session = f"alone-{uuid.uuid4().hex[:8]}"
    renewer = LeaseRenewer(conninfo)
    pool = small_pool(conninfo, 2)
    async with pool:
        stale = PostgresStorage(
            session=session, pool=pool, renewer=renewer, group_commit=True, lease_seconds=600.0
        )
        await stale.open(ctx)
        assert await commit_one(stale) == 1
        for _ in range(3000):  # the renewal at open is done (polled, 30 s at most)
            if renewer.renewals:
                break
            await anyio.sleep(0.01)
        assert renewer.renewals  # the next renewal is minutes away
        taker = PostgresStorage(conninfo, session, take_over=True)
        await taker.open(ctx)
        straight = committer_for(pool).straight
        with pytest.raises(LeaseLost, match="nothing was written"):
            await commit_one(stale)
        # it went straight through, alone (no group gathered): the same per-row fence
        assert committer_for(pool).straight == straight + 1
        assert await commit_one(taker) == 2
        await taker.close(ctx)
        await stale.close(ctx)
    renewer.close()
    rows = rows_of(conninfo, session)
    assert [seq for seq, _ in rows] == [1, 2] and rows[0][1] < rows[1][1]


@pytest.mark.parametrize("idle_check", [0.0, 3600.0], ids=["polled", "sent-first"])
async def test_a_lone_commit_on_a_connection_the_server_ended_while_idle_is_not_lost(
    postgres_cluster: Any, idle_check: float
) -> None:
    """A session committing alone goes straight through on the connection kept from its last
    commit. If the server ended that connection meanwhile (a restart, an idle timeout), the
    commit is neither lost nor stored twice: a connection idle for ``idle_check`` seconds is
    looked at before sending (``polled``), and one used more recently is sent on and, when
    the send proves it lost, replaced, the rows looked up and the missing one sent again
    (``sent-first``)."""
    conninfo = postgres_cluster.conninfo
    name = f"t{uuid.uuid4().hex[:12]}"
    renewer = LeaseRenewer(conninfo)
    pool = small_pool(f"{conninfo} application_name={name}", 3)
    async with pool:
        committer = committer_for(pool)
        committer.idle_check = idle_check
        storage = PostgresStorage(session=name, pool=pool, renewer=renewer, group_commit=True)
        await storage.open(ctx)
        for seq in (1, 2, 3):
            assert await commit_one(storage) == seq
        straight = committer.straight
        assert straight >= 1  # alone: after the first group of one, straight through
        for round in range(3):
            ended = query(
                conninfo,
                "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
                "WHERE application_name = %s",
                name,
            )
            assert ended and all(ok for (ok,) in ended)
            assert await commit_one(storage) == 4 + round
        assert committer.straight == straight + 3
        await storage.close(ctx)
    renewer.close()
    assert [seq for seq, _ in rows_of(conninfo, name)] == [1, 2, 3, 4, 5, 6]


async def test_run_prepared_blocking_for_the_answer_returns_quick_and_slow_answers_alike(
    postgres_cluster: Any,
) -> None:
    """``run_prepared(block=True)`` waits for the answer without the event loop for at most a
    millisecond, then on the loop: an answer within the bound and one long after it (a
    statement sleeping 50 ms) come back whole, and an error still names its SQLSTATE."""
    from psycopg import pq

    conn = await psycopg.AsyncConnection.connect(postgres_cluster.conninfo, autocommit=True)
    try:
        await conn.execute("PREPARE quick (int8) AS SELECT $1 + 1")
        await conn.execute("PREPARE slow (int8) AS SELECT $1 + 2 FROM pg_sleep(0.05)")
        await conn.execute("PREPARE bad (int8) AS SELECT 1 / ($1 - $1)")
        seven = (7).to_bytes(8, "big")
        for name, expected in ((b"quick", 8), (b"slow", 9)):
            for block in (True, False):
                (result,) = await run_prepared(conn, name, (seven,), (1,), block=block)
                assert result.status == pq.ExecStatus.TUPLES_OK
                assert int(result.get_value(0, 0)) == expected
        with pytest.raises(Exception, match="division by zero") as failed:
            await run_prepared(conn, b"bad", (seven,), (1,), block=True)
        assert getattr(failed.value, "sqlstate", None) == "22012"
        (result,) = await run_prepared(conn, b"quick", (seven,), (1,), block=True)
        assert int(result.get_value(0, 0)) == 8  # the connection still serves
    finally:
        await conn.close()


async def test_statements_awaited_blocking_give_the_loop_a_turn_at_most_every_millisecond(
    postgres_cluster: Any,
) -> None:
    """Through one :class:`Pace`, a statement awaited blocking gives the event loop a turn only
    when the pace's last turn is :data:`TURN_EVERY_MS` old (a turn per statement cost a lone
    writer a fifth of its commits): a task waiting to run does not run during a statement whose
    pace just turned, and runs during the next one once the last turn is old; either way the
    answer comes back whole."""
    conn = await psycopg.AsyncConnection.connect(postgres_cluster.conninfo, autocommit=True)
    try:
        await conn.execute("PREPARE plus (int8) AS SELECT $1 + 1")
        seven = (7).to_bytes(8, "big")
        pace = Pace()
        ran: list[str] = []

        async def waiting(name: str) -> None:
            ran.append(name)

        async with anyio.create_task_group() as group:
            pace.turned = float("inf")  # as if it had just turned: no turn is due
            group.start_soon(waiting, "first")
            (result,) = await run_prepared(conn, b"plus", (seven,), (1,), pace=pace)
            assert int(result.get_value(0, 0)) == 8
            assert pace.turned == float("inf")  # no turn was given
            if pace.quick:  # answered within the blocking wait (not on the loop, as when late)
                assert ran == []  # so the waiting task did not run during the statement
            pace.quick = True
            pace.turned = time.monotonic() - TURN_EVERY_MS / 1000  # the last turn is old
            (result,) = await run_prepared(conn, b"plus", (seven,), (1,), pace=pace)
            assert int(result.get_value(0, 0)) == 8
            assert ran == ["first"]  # it ran at that statement's turn
            assert pace.turned != float("inf")  # the turn is kept for the next statement
    finally:
        await conn.close()


@pytest.mark.parametrize("grouped", [True, False], ids=["grouped-alone", "own-connection"])
async def test_a_lone_commit_lets_the_other_tasks_run_once_its_statement_is_sent(
    postgres_cluster: Any, grouped: bool
) -> None:
    """A commit whose answer is awaited blocking (a grouped session committing alone, a
    worker's session on its own connection) still gives the event loop a turn when its pace's
    last one is a millisecond old, and takes it with its statement already sent (run_prepared's
    ``block``): a task that was waiting to run finds the commit's statement in flight on its
    connection, not yet sent, and the commit still ends stored and acknowledged."""
    from psycopg import pq

    conninfo = postgres_cluster.conninfo
    session = f"turn-{uuid.uuid4().hex[:8]}"
    renewer = LeaseRenewer(conninfo)
    pool = small_pool(conninfo, 2)
    async with pool:
        if grouped:
            storage = PostgresStorage(
                session=session, pool=pool, renewer=renewer, group_commit=True
            )
        else:
            storage = PostgresStorage(conninfo, session)
        await storage.open(ctx)
        for seq in (1, 2):  # the first goes as a group of one, then straight through
            assert await commit_one(storage) == seq
        committer = committer_for(pool)
        straight = committer.straight
        seen: list[object] = []
        pace = committer._pace if grouped else storage._pace  # pyright: ignore[reportPrivateUsage]
        pace.turned = 0.0  # the last turn long ago: this commit gives one

        def in_flight() -> object:
            pending = storage._pending  # pyright: ignore[reportPrivateUsage]
            conn = storage._conn if not grouped else pending and pending.conn  # pyright: ignore[reportPrivateUsage]
            return None if conn is None else conn.pgconn.transaction_status

        async def other_task() -> None:
            seen.append(in_flight())  # runs at the commit's first turn of the loop

        async with anyio.create_task_group() as group:
            group.start_soon(other_task)
            assert await commit_one(storage) == 3
            seen.append("acknowledged")
        assert seen == [pq.TransactionStatus.ACTIVE, "acknowledged"]
        assert committer.straight == straight + (1 if grouped else 0)
        await storage.close(ctx)
    renewer.close()
    assert [seq for seq, _ in rows_of(conninfo, session)] == [1, 2, 3]
