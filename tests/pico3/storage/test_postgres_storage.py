"""PostgresStorage beyond the shared contract (issue 23): migrations, row layout, corruption,
the lease and its fencing token, with real worker processes for the fencing cases."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import pytest

from chord.context import BACKGROUND
from pico3.storage import (
    UNSET,
    Conversation,
    ConversationWrite,
    CorruptStorage,
    DocRef,
    DocWrite,
    Entry,
    EntryScan,
    EntryWrite,
    PostgresStorage,
    SchemaTooNew,
    StorageClosed,
    StorageError,
    StorageFailed,
    StorageInUse,
    Task,
    TaskPatch,
    TaskPatchWrite,
    TaskWrite,
    postgres,
)
from pico3.storage.postgres import SCHEMA_VERSION

pytestmark = pytest.mark.anyio
ctx = BACKGROUND
CHILD = Path(__file__).with_name("_pg_child.py")
TIMEOUT = 30.0


@pytest.fixture
def conninfo(postgres_cluster: Any) -> str:
    return postgres_cluster.conninfo


@pytest.fixture
def session() -> str:
    return f"pg-{uuid.uuid4().hex}"


@pytest.fixture
def fresh_db(postgres_cluster: Any) -> Iterator[str]:
    """A database of its own (for schema tests), dropped afterwards."""
    name = f"db_{uuid.uuid4().hex}"
    with psycopg.connect(postgres_cluster.conninfo, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield postgres_cluster.conninfo.replace("dbname=postgres", f"dbname={name}")
    finally:
        with psycopg.connect(postgres_cluster.conninfo, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


def query(conninfo: str, sql: str, *args: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        cursor = conn.execute(sql, args)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []


async def test_open_migrates_and_a_newer_database_is_refused_untouched(fresh_db: str) -> None:
    storage = PostgresStorage(fresh_db, "s", fsync=False)
    await storage.open(ctx)
    await storage.close(ctx)
    assert query(fresh_db, "SELECT version FROM pico3_schema") == [(SCHEMA_VERSION,)]
    again = PostgresStorage(fresh_db, "s", fsync=False)  # already current: nothing to apply
    await again.open(ctx)
    await again.close(ctx)
    query(  # a newer release whose migration older code must not run on
        fresh_db,
        "UPDATE pico3_schema SET version = %s, compatible = %s",
        SCHEMA_VERSION + 1,
        SCHEMA_VERSION + 1,
    )
    newer = PostgresStorage(fresh_db, "other", fsync=False)
    with pytest.raises(SchemaTooNew, match=rf"version {SCHEMA_VERSION + 1}, newer than this"):
        await newer.open(ctx)
    assert query(fresh_db, "SELECT version FROM pico3_schema") == [(SCHEMA_VERSION + 1,)]
    assert query(fresh_db, "SELECT session FROM pico3_sessions") == [("s",)]  # no new row


async def test_a_schema_2_database_upgrades_at_open_and_its_sessions_go_on(fresh_db: str) -> None:
    # a database as schema 2 left it: a session of two commits, whose row kept seq and max_id
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE pico3_schema (version integer NOT NULL)")
        for migration in postgres.MIGRATIONS[:2]:
            conn.execute(migration)  # type: ignore[arg-type]
        conn.execute("INSERT INTO pico3_schema VALUES (2)")
        conn.execute("INSERT INTO pico3_sessions (session, seq, max_id) VALUES ('old', 2, 2)")
        for seq, write in enumerate(
            [
                ConversationWrite(Conversation(id=1)),
                EntryWrite(Entry(id=2, conversation_id=1, kind="note", data={"n": 1})),
            ],
            start=1,
        ):
            conn.execute(
                "INSERT INTO pico3_commits (session, seq, writes) VALUES ('old', %s, %s)",
                (seq, msgspec.json.encode([write])),
            )
    storage = PostgresStorage(fresh_db, "old", fsync=False)
    await storage.open(ctx)
    assert query(fresh_db, "SELECT version FROM pico3_schema") == [(SCHEMA_VERSION,)]
    assert storage.seq == 2 and storage.mint_id() == 3
    note = Entry(id=storage.mint_id(), conversation_id=1, kind="note", data={"n": 2})
    assert await storage.commit([EntryWrite(note)], ctx) == 3
    await storage.close(ctx)
    rows = query(fresh_db, "SELECT seq, epoch, max_id FROM pico3_commits ORDER BY seq")
    assert rows == [(1, None, None), (2, None, None), (3, storage_epoch(fresh_db, "old"), 4)]
    again = PostgresStorage(fresh_db, "old", fsync=False)
    await again.open(ctx)
    entries = await again.scan_entries(EntryScan(conversation_id=1, limit=10), ctx)
    assert [e.data for e in reversed(entries)] == [{"n": 1}, {"n": 2}]
    assert again.mint_id() == 5  # the high-water came from the last commit row
    await again.close(ctx)


def storage_epoch(conninfo: str, session: str) -> int:
    ((epoch,),) = query(conninfo, "SELECT epoch FROM pico3_sessions WHERE session = %s", session)
    return epoch


async def test_the_open_session_holds_its_lock_and_a_shared_pool_gets_it_back_free(
    conninfo: str, session: str
) -> None:
    from psycopg_pool import AsyncConnectionPool

    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        conninfo, min_size=1, max_size=1, open=False
    )
    async with pool:
        storage = PostgresStorage(session=session, pool=pool, fsync=False)
        await storage.open(ctx)
        ((key,),) = query(
            conninfo, "SELECT lock_key FROM pico3_sessions WHERE session = %s", session
        )
        lock = "SELECT pg_try_advisory_lock(%s, %s), pg_advisory_unlock_all()"
        assert query(conninfo, lock, postgres._LOCK_CLASS, key)[0][0] is False  # pyright: ignore[reportPrivateUsage]
        await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
        await storage.close(ctx)
        async with pool.connection() as conn:  # the same connection, without the lock
            cursor = await conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                "AND pid = pg_backend_pid()"
            )
            assert await cursor.fetchone() == (0,)
        assert query(conninfo, lock, postgres._LOCK_CLASS, key)[0][0] is True  # pyright: ignore[reportPrivateUsage]
        assert query(conninfo, "SELECT seq FROM pico3_sessions WHERE session = %s", session) == [
            (1,)
        ]  # close recorded the last seq


async def test_a_commit_the_server_refuses_fails_stop_naming_the_cause(
    conninfo: str, session: str
) -> None:
    storage = PostgresStorage(conninfo, session, fsync=False)
    await storage.open(ctx)
    await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
    query(  # a row at the next seq that no writer of this session made (the fence bypassed)
        conninfo,
        "INSERT INTO pico3_commits (session, seq, writes) VALUES (%s, 2, '[]'::bytea)",
        session,
    )
    note = EntryWrite(Entry(id=storage.mint_id(), conversation_id=1, kind="note"))
    with pytest.raises(StorageFailed, match=r"commit 2 failed: .*duplicate key"):
        await storage.commit([note], ctx)
    assert storage.seq == 1  # not published
    with pytest.raises(StorageFailed, match="an earlier commit failed"):
        await storage.commit([], ctx)
    await storage.close(ctx)


async def test_task_patches_retire_with_the_task_and_truncate_drops_old_sticky_rows(
    conninfo: str, session: str
) -> None:
    storage = PostgresStorage(conninfo, session, fsync=False)
    await storage.open(ctx)
    cid, tid = storage.mint_id(), storage.mint_id()
    sticky = DocRef.sticky(cid)
    await storage.commit(
        [
            ConversationWrite(Conversation(id=cid)),
            TaskWrite(Task(id=tid, conversation_id=cid, kind="k")),
            DocWrite(sticky, [["r", {"n": 0}]]),
        ],
        ctx,
    )
    for n in range(1, 4):
        await storage.commit(
            [
                TaskPatchWrite(TaskPatch(id=tid, status="running", checkpoint={"n": n})),
                DocWrite(sticky, [["s", ["n"], n]]),
            ],
            ctx,
        )
    patches = "SELECT count(*) FROM pico3_task_patches WHERE session = %s"
    assert query(conninfo, patches, session) == [(3,)]
    await storage.commit([DocWrite(sticky, [["r", {"n": 9}]])], ctx)
    await storage.truncate(sticky, ctx)
    rows = "SELECT seq FROM pico3_sticky WHERE session = %s ORDER BY seq"
    assert query(conninfo, rows, session) == [(5,)]
    outcome = {"completed": True, "result": 3}
    await storage.commit(
        [TaskPatchWrite(TaskPatch(id=tid, status="terminal", outcome=outcome))], ctx
    )
    assert query(conninfo, patches, session) == [(0,)]
    await storage.close(ctx)
    storage = PostgresStorage(conninfo, session, fsync=False)
    await storage.open(ctx)
    task = await storage.task(tid, ctx)
    assert task is not None and task.status == "terminal" and task.outcome == outcome
    assert await storage.doc(sticky, ctx) == [[["r", {"n": 9}]]]
    await storage.close(ctx)


async def test_a_damaged_or_missing_commit_row_fails_open_naming_it(
    conninfo: str, session: str
) -> None:
    storage = PostgresStorage(conninfo, session, fsync=False)
    await storage.open(ctx)
    await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
    await storage.commit([], ctx)
    await storage.commit([], ctx)
    await storage.close(ctx)
    query(
        conninfo,
        "UPDATE pico3_commits SET writes = 'not json'::bytea WHERE session = %s AND seq = 2",
        session,
    )
    with pytest.raises(CorruptStorage, match=rf"pico3_commits\[session='{session}'.*malformed"):
        await PostgresStorage(conninfo, session, fsync=False).open(ctx)
    query(conninfo, "DELETE FROM pico3_commits WHERE session = %s AND seq = 2", session)
    with pytest.raises(CorruptStorage, match="commit seq 2 is missing"):
        await PostgresStorage(conninfo, session, fsync=False).open(ctx)
    # a refused open releases the lease it took: the next opener is not told "in use"
    with pytest.raises(CorruptStorage):
        await PostgresStorage(conninfo, session, fsync=False).open(ctx)


async def test_open_replays_across_many_chunks_and_names_the_seq_that_does_not_replay(
    conninfo: str, session: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres, "_CHUNK", 3)  # 12 commits: four pipelined chunk reads
    storage = PostgresStorage(conninfo, session, fsync=False)
    await storage.open(ctx)
    cid = storage.mint_id()
    await storage.commit([ConversationWrite(Conversation(id=cid))], ctx)
    for n in range(11):
        entry = Entry(id=storage.mint_id(), conversation_id=cid, kind="k", data={"n": n})
        await storage.commit([EntryWrite(entry)], ctx)
    await storage.close(ctx)
    storage = PostgresStorage(conninfo, session, fsync=False)
    await storage.open(ctx)
    entries = await storage.scan_entries(EntryScan(conversation_id=cid, limit=100), ctx)
    assert storage.seq == 12
    assert sorted(e.data["n"] for e in entries if e.data is not UNSET) == list(range(11))
    await storage.close(ctx)
    # seq 8 becomes valid JSON that no longer commits: an entry of an unknown conversation
    stray = msgspec.json.encode([EntryWrite(Entry(id=500, conversation_id=999, kind="k"))])
    query(
        conninfo,
        "UPDATE pico3_commits SET writes = %s WHERE session = %s AND seq = 8",
        stray,
        session,
    )
    failed = rf"pico3_commits\[session='{session}', seq 8\]: batch does not replay.*999"
    with pytest.raises(CorruptStorage, match=failed):
        await PostgresStorage(conninfo, session, fsync=False).open(ctx)
    # the refused open released its lease and left its connection usable
    with pytest.raises(CorruptStorage, match=failed):
        await PostgresStorage(conninfo, session, fsync=False).open(ctx)


async def test_a_second_opener_is_refused_naming_the_holder(conninfo: str, session: str) -> None:
    first = PostgresStorage(conninfo, session, fsync=False)
    await first.open(ctx)
    second = PostgresStorage(conninfo, session, fsync=False)
    with pytest.raises(StorageInUse, match=rf"open in another worker \(pid {os.getpid()} on "):
        await second.open(ctx)
    await first.close(ctx)
    await second.open(ctx)  # close released the lease: no waiting for its expiry
    assert second.epoch == first_epoch_plus_one(conninfo, session)
    await second.close(ctx)


def first_epoch_plus_one(conninfo: str, session: str) -> int:
    ((epoch,),) = query(conninfo, "SELECT epoch FROM pico3_sessions WHERE session = %s", session)
    return epoch


class Worker:
    """A ``_pg_child.py`` process and its output lines (read with a timeout)."""

    def __init__(self, conninfo: str, session: str, lease: float, take: bool = False) -> None:
        args = [sys.executable, str(CHILD), conninfo, session, str(lease)]
        self.process = subprocess.Popen(
            [*args, "take"] if take else args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self._buffer = ""

    def line(self) -> str:
        out = self.process.stdout
        assert out is not None
        while "\n" not in self._buffer:
            ready, _, _ = select.select([out], [], [], TIMEOUT)
            assert ready, "the worker stopped talking"
            chunk = os.read(out.fileno(), 65536).decode()
            assert chunk, f"the worker exited ({self.process.wait()})"
            self._buffer += chunk
        line, self._buffer = self._buffer.split("\n", 1)
        return line

    def send(self, command: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.line()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=TIMEOUT)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


async def read_notes(conninfo: str, session: str) -> tuple[int, list[Any]]:
    storage = PostgresStorage(conninfo, session, fsync=False)
    await storage.open(ctx)
    try:
        entries = await storage.scan_entries(EntryScan(conversation_id=1, limit=100), ctx)
        return storage.seq, [e.data for e in reversed(entries)]
    finally:
        await storage.close(ctx)


async def test_a_worker_whose_lease_was_taken_fails_its_next_commit_and_writes_nothing(
    conninfo: str, session: str
) -> None:
    first = Worker(conninfo, session, lease=30.0)
    second: Worker | None = None
    try:
        opened = first.line().split()
        assert opened[0] == "open", opened
        assert first.send("commit") == "ack 2"
        second = Worker(conninfo, session, lease=30.0)
        assert second.line().startswith("inuse session"), "a live lease must be refused"
        second.stop()
        second = Worker(conninfo, session, lease=30.0, take=True)  # a supervisor's take-over
        taken = second.line().split()
        assert taken[:3] == ["open", str(int(opened[1]) + 1), "2"], taken
        assert second.send("commit") == "ack 3"
        for _ in range(2):  # the old worker is fenced now and stays fenced
            reply = first.send("commit")
            assert reply.startswith(f"lost session {session!r}: commit 3 refused"), reply
            assert "nothing was written" in reply
        assert second.send("commit") == "ack 4"
        assert second.send("close") == "closed"
        assert first.send("close") == "closed"
    finally:
        first.stop()
        if second is not None:
            second.stop()
    seq, notes = await read_notes(conninfo, session)
    assert seq == 4  # the fenced worker's two refused commits left nothing behind
    pids = [first.process.pid, second.process.pid, second.process.pid]
    assert notes == [{"pid": pid} for pid in pids]
    epoch = int(opened[1])  # each commit row names its writer's epoch: never one after a newer
    rows = query(conninfo, "SELECT seq, epoch FROM pico3_commits WHERE session = %s", session)
    assert sorted(rows) == [(1, epoch), (2, epoch), (3, epoch + 1), (4, epoch + 1)]


async def test_a_stalled_worker_loses_its_lease_at_expiry_to_a_waiting_opener(
    conninfo: str, session: str
) -> None:
    stalled = Worker(conninfo, session, lease=0.3)
    try:
        assert stalled.line().startswith("open ")
        assert stalled.send("commit") == "ack 2"
        os.kill(stalled.process.pid, signal.SIGSTOP)  # stops its renewals too
        waiting = PostgresStorage(conninfo, session, fsync=False, wait=TIMEOUT)
        await waiting.open(ctx)  # returns once the database says the lease expired
        assert waiting.seq == 2
        await waiting.commit([], ctx)
        os.kill(stalled.process.pid, signal.SIGCONT)
        assert stalled.send("commit").startswith(f"lost session {session!r}")
        await waiting.close(ctx)
    finally:
        os.kill(stalled.process.pid, signal.SIGCONT)
        stalled.stop()
    seq, notes = await read_notes(conninfo, session)
    assert seq == 3 and notes == [{"pid": stalled.process.pid}]


async def test_an_unreachable_server_fails_open_naming_it_without_the_password() -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql://agent:s3cret@127.0.0.1:{port}/agents"
    storage = PostgresStorage(url, "s", connect_timeout=0.5)
    with pytest.raises(
        StorageError, match=rf"cannot reach PostgreSQL at 127.0.0.1:{port}/agents"
    ) as info:
        await storage.open(ctx)
    assert "s3cret" not in str(info.value)
    with pytest.raises(StorageClosed):
        await storage.commit([], ctx)
