"""Group commit: the commits of many sessions of one process share a transaction (issue 42).

A process hosting many sessions on one shared pool (``PostgresStorage(pool=…,
group_commit=True)``) would otherwise pin a pool connection per committing session and pay
one transaction, one WAL flush and one round trip per commit; with more sessions than pool
connections the writers also go round the pool, each turn re-taking the session lock (five
round trips). Here the commits that arrive together go as *one* statement in *one* autocommit
transaction on one pool connection: one round trip and one WAL flush for all of them, and every
one is acknowledged only after that transaction committed (with ``synchronous_commit=on``:
after the WAL flush).

The fence, per row
------------------
A grouped session holds no session lock while it commits (its open takes the lock, which ends
any previous holder's backend, and gives it back at once, like
:meth:`~pico3.storage.postgres.PostgresStorage.release_writer`). Each commit row is fenced by
its own writer's epoch instead, in the statement (:data:`_GROUP`): the session row is locked
``FOR SHARE`` and the row inserted only if the session's epoch is still the writer's. That is
the blobs' fence (docs/design/storage.md, "Fencing on PostgreSQL"): a takeover's lease
``UPDATE`` bumps the epoch and conflicts with the share lock, so it waits until every group
transaction that passed the check committed (its rows are then visible to the new holder's
read), and a group transaction locking after it sees the new epoch and inserts nothing (READ
COMMITTED re-checks a row updated meanwhile against its newest version). One session's stale
epoch therefore leaves its own row out and fails only its own commit (``LeaseLost``, nothing
written); the others in the group commit.

The lock is taken with ``SKIP LOCKED``: a group never waits for a row lock, so it can never
deadlock with the lease renewer's ``UPDATE`` of many session rows (a renewal or a takeover
in flight simply leaves that session's row out). A row left out is looked up after the
statement: if the session's epoch is no longer the writer's, the commit is refused with
``LeaseLost``; if it still is (the row was only locked), the commit goes into the next group.

Faults
------
A statement that fails as a whole (not a lost connection) is sent again one commit at a time,
so a bad commit fails alone. A kept connection idle for :data:`IDLE_CHECK` seconds is looked
at before a group is sent on it (anything readable is the server's goodbye: a PostgreSQL restart
while idle), and replaced if the server ended it; nothing was sent. One used more recently is
sent on without a look (a ``poll`` per commit saved): if the server ended it all the same, the
send fails as a lost connection, and is recovered like one. A connection lost with a group in flight is
replaced, the old backend ended and waited for (so its transaction is over), the group's rows
looked up, and the missing ones sent once more (the primary key ``(session, seq)`` makes a
row stored at most once). If that fails too, each commit of the group fails (the storage is
fail-stop; reopening finds what is stored).

The committer runs in its callers' tasks (a leader/follower scheme, no task of its own): a
commit that finds fewer than ``groups`` groups in flight sends the queue as the next group
itself; otherwise it waits, and the group that finishes hands the queue to the first waiter.

A session committing alone
--------------------------
When no group is in flight, none is queued and the last group was the same session's commit
alone, its next commit goes straight through: no queue, no wake-up, and its answer is awaited
without the event loop for up to :data:`BLOCK_MS` (:func:`run_prepared`'s ``block``: spinning,
so the thread never sleeps for a quick answer) rather than on the loop, whose wait costs more
CPU than pgbench spends on a whole commit. It is the fence's statement for one row, without the
arrays and without ``RETURNING`` (the command tag's row count says whether the row was stored);
only the statement's form and the waiting differ. It still gives the loop a turn, so the
other tasks run, once its statement is sent, while the server works on it (a turn before
sending delayed the send by the turn's CPU: 8 % of a lone session's commits/s, issue 42), and
at most one a millisecond (:data:`~pico3.storage.pg_prepared.TURN_EVERY_MS`: a turn per commit
cost a lone writer about a tenth of its client CPU); when other sessions commit too, their
commits arrive within that bound and gather groups as before (a straight path taken by
whichever session came last would serialize them: each blocking wait keeps the others from
queueing).
"""

from __future__ import annotations

import select
import struct
import time
import weakref
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from pico3.storage.base import LeaseLost, StorageFailed
from pico3.storage.pg_prepared import (
    BLOCK_MS,
    Pace,
    StatementFailed,
    command_ok,
    run_prepared,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = [
    "BLOCK_MS",
    "GroupCommitter",
    "Pace",
    "Pending",
    "StatementFailed",
    "committer_for",
    "run_prepared",
    "waiting_requests",
]

IDLE_CHECK = 1.0
"""Seconds a kept connection may idle before its next group checks that the server has not
ended it (:meth:`GroupCommitter._connection`)."""

GROUPS = 2
"""Groups in flight at once per committer (each on its own pool connection): the next group
forms while the previous one waits for its WAL flush."""

_GROUP = (
    # the rows of many sessions' commits, each inserted only if its session's epoch is still
    # its writer's (the session row locked FOR SHARE, skipped if someone else holds it)
    "WITH b AS (SELECT * FROM unnest(%s::text[], %s::int8[], %s::int8[], %s::int8[], "
    "%s::bytea[]) AS u(session, seq, epoch, max_id, writes)), "
    "f AS MATERIALIZED (SELECT s.session FROM pico3_sessions s JOIN b "
    "ON s.session = b.session AND s.epoch = b.epoch FOR SHARE OF s SKIP LOCKED) "
    "INSERT INTO pico3_commits (session, seq, epoch, max_id, writes) "
    "SELECT b.session, b.seq, b.epoch, b.max_id, b.writes FROM b JOIN f USING (session) "
    "RETURNING session"
)
_NAME = b"pico3_group"
_PREPARE = (
    f"PREPARE pico3_group (text[], int8[], int8[], int8[], bytea[]) AS {_GROUP}".replace(
        "%s::text[]", "$1"
    )
    .replace("%s::int8[]", "$2", 1)
    .replace("%s::int8[]", "$3", 1)
    .replace("%s::int8[]", "$4", 1)
    .replace("%s::bytea[]", "$5")
)
_NAME_ONE = b"pico3_group_one"
_PREPARE_ONE = (
    # a group of one (a session committing alone): the same fence without the arrays (the
    # unnest and the CTEs cost ~15 % of a commit) and without RETURNING (~4 % of the server's
    # side of a commit): the command tag's row count says whether the row was stored
    "PREPARE pico3_group_one (text, int8, int8, int8, bytea) AS "
    "INSERT INTO pico3_commits (session, seq, epoch, max_id, writes) "
    "SELECT $1, $2, $3, $4, $5 FROM pico3_sessions WHERE session = $1 AND epoch = $3 "
    "FOR SHARE SKIP LOCKED"
)
_FORMATS = (1, 1, 1, 1, 1)
_HEAD = struct.Struct("!iiIii").pack  # a binary array: 1 dimension, no NULLs, type, length, 1
_LEN = struct.Struct("!i").pack
_INT8 = struct.Struct("!iq").pack  # length 8, the value
_Q = struct.Struct("!q").pack  # an int8 parameter in binary
_TEXT, _BIGINT, _BYTEA = 25, 20, 17
_PREPARED: weakref.WeakSet[Any] = weakref.WeakSet()  # the connections holding pico3_group
_EPOCHS = "SELECT session, epoch FROM pico3_sessions WHERE session = ANY(%s::text[])"
_STORED = (
    "SELECT c.session FROM pico3_commits c JOIN unnest(%s::text[], %s::int8[], %s::int8[]) "
    "AS u(session, seq, epoch) ON c.session = u.session AND c.seq = u.seq AND c.epoch = u.epoch"
)
_END = "SELECT pg_terminate_backend(%s, %s)"


class Pending:
    """One session's commit waiting in (or sent with) a group."""

    __slots__ = (
        "_wake", "again", "conn", "deadline", "epoch", "error", "finished", "lead", "max_id",
        "raw", "seq", "session", "stalled",
    )  # fmt: skip

    def __init__(self, session: str, seq: int, epoch: int, max_id: int, raw: bytes) -> None:
        self.session = session
        self.seq = seq
        self.epoch = epoch
        self.max_id = max_id
        self.raw = raw
        # set when finished, or when this waiter is to lead; made only by a waiter (a commit
        # sent straight through never waits: no event to make, ~3 us of CPU a commit)
        self._wake: anyio.Event | None = None
        self.finished = False  # stored, or failed (``error``)
        self.lead = False  # handed the queue: send the next group
        self.again = False  # left out by the fence's SKIP LOCKED: queued for the next group
        self.error: BaseException | None = None
        self.conn: AsyncConnection[Any] | None = None  # the connection of its group in flight
        # its storage's watchdog shut the group's connection down (no answer within the
        # commit timeout): the group is not recovered, its outcome is unknown at once
        self.stalled = False
        # (monotonic) a group waits for a pool connection no longer than its first commit's
        # deadline (its storage's commit timeout, plus a margin for the watchdog that marks
        # the storage stalled to come first)
        self.deadline = float("inf")

    def wake(self) -> None:
        """Wake its waiter, if it waits (it looks at the flags before waiting again)."""
        if self._wake is not None:
            self._wake.set()

    async def woken(self) -> None:
        """Wait until :meth:`wake` (the caller looked at the flags just before, with no
        ``await`` in between, so a wake cannot fall between that look and this wait)."""
        self._wake = anyio.Event()
        try:
            await self._wake.wait()
        finally:
            self._wake = None


class GroupCommitter:
    """The group commits of the ``fsync=True`` sessions on one shared pool (module doc)."""

    def __init__(self, pool: AsyncConnectionPool, *, groups: int = GROUPS) -> None:
        self._pool = pool
        self._groups = max(1, min(groups, pool.max_size))
        self._queue: list[Pending] = []
        self._running = 0  # groups being sent (leaders)
        # connections kept between groups (the last used first: a warm backend), while
        # sessions are attached, never all of the pool's, given back when others wait for one
        self._idle: list[AsyncConnection[Any]] = []
        self._keep = max(0, min(self._groups, pool.max_size - 1))
        self._users = 0
        self._used: dict[int, float] = {}  # a kept connection's id: when its last group ended
        # the session whose commit was the last group, alone: its next one, if nothing else
        # is in flight or queued, goes straight (another session's commit gathers a group)
        self._alone: str | None = None
        self._pace = Pace()  # the lone commits' answers (run_prepared's block)
        self.straight = 0  # commits sent straight through, alone (a count for tests)
        self.sent = 0  # statements sent: groups, a commit sent alone included
        self.carried = 0  # the commits they carried (carried / sent: commits per WAL flush)
        self.idle_check = IDLE_CHECK  # seconds a kept connection idles before a check
        self.timeout = 60.0  # waiting for a pool connection
        self.patience_ms = 10_000  # ending a lost connection's backend

    def attach(self) -> None:
        """A grouped session opened on this pool."""
        self._users += 1

    async def detach(self) -> None:
        """A grouped session closed; the last one gives the kept connections back."""
        self._users -= 1
        if self._users <= 0:
            idle, self._idle = self._idle, []
            self._used.clear()
            for conn in idle:
                await self._pool.putconn(conn)

    def _kept(self, conn: AsyncConnection[Any]) -> bool:
        """Keep ``conn`` for the next group (True), unless the pool is to have it back."""
        keep = (
            self._users > 0
            and len(self._idle) < self._keep
            and not conn.closed
            and not conn.broken
            and not waiting_requests(self._pool)
        )
        if keep:
            self._idle.append(conn)
            self._used[id(conn)] = time.monotonic()
        return keep

    async def commit(self, item: Pending) -> None:
        """Store ``item``'s row durably in a group, or raise (``LeaseLost``: provably not
        stored; ``StorageFailed``: not stored, or unknown). Never cancelled half-way: call it
        shielded."""
        if item.session == self._alone and not self._running and not self._queue:
            # a session committing alone (no group in flight, none queued, and the last group
            # was this session's commit alone): straight through, no queue and no wake-up
            self._running += 1
            self.straight += 1
            try:
                # a turn of the loop, due once a millisecond, is taken once the statement is
                # sent (run_prepared's block; a wait on the loop gives it otherwise): the other
                # tasks run while the server works (commits answered within the blocking wait
                # would otherwise never yield), and a commit they start meanwhile leads a group
                # of its own
                await self._send_group([item], alone=self._running == 1 and not self._queue)
            finally:
                self._hand_off()
        else:
            self._queue.append(item)
            if self._running < self._groups:
                self._running += 1
                await self._lead()
        while not item.finished:
            if item.lead:  # the queue was handed to this waiter
                item.lead = False
                await self._lead()
            else:
                # no deadline of its own: the groups ahead end by theirs (a leader waits for a
                # connection no longer than its group's first deadline; one in flight is shut
                # down by a stalled storage's watchdog), then this one leads, bounded by its own
                await item.woken()  # the flags say why: looked at before waiting again
        if item.error is not None:
            raise item.error

    async def _lead(self) -> None:
        """Send the queue as one group, then hand what queued meanwhile to its first waiter
        (or give the turn up)."""
        try:
            # one turn of the event loop first: the sessions already woken (by the group that
            # just finished) queue their next commits, and this group takes them all, instead
            # of going alone and leaving the others to the next flush
            await anyio.lowlevel.checkpoint()
            batch, self._queue = self._queue, []
            if batch:
                await self._send_group(batch)
        finally:
            self._hand_off()

    def _hand_off(self) -> None:
        """A group is done: what queued meanwhile goes to its first waiter, who leads the next
        group (the count of leaders unchanged), or the turn is given up."""
        if self._queue:
            first = self._queue[0]
            first.lead = True
            first.wake()
        else:
            self._running -= 1

    async def _send_group(self, batch: list[Pending], *, alone: bool = False) -> None:
        self._alone = batch[0].session if len(batch) == 1 else None
        self.sent += 1
        self.carried += len(batch)
        everyone = batch
        conn: AsyncConnection[Any] | None = None
        try:
            one = batch[0] if len(batch) == 1 else None
            conn = await self._connection(
                one.deadline if one is not None else min(item.deadline for item in batch)
            )
            for item in batch:
                item.conn = conn
            # a commit whose storage stalled while it waited (no connection set for its
            # watchdog to shut down then) is not sent: it would hang on a stalled database
            # with nobody to end it; with the connection set first, a stall from now on
            # shuts it down (the watchdog sets the flag, then reads the connection)
            stalled = one.stalled if one is not None else any(i.stalled for i in batch)
            if stalled:
                for item in batch:
                    if item.stalled:
                        item.error = _not_sent(item)
                batch = [item for item in batch if not item.stalled]
            try:
                left = await self._insert(conn, batch, alone=alone) if batch else []
            except Exception as exc:
                if any(item.stalled for item in batch):
                    # the database stalled past a commit timeout: recovering would wait on it
                    # again (a new connection, the old backend's end, the row's unique index
                    # held by its transaction), so the group fails at once, outcome unknown
                    raise
                if _lost(conn, exc):
                    lost, conn = conn, None
                    conn, left = await self._recover(lost, batch)
                elif len(batch) > 1:  # a bad commit fails alone: each again on its own
                    left = []
                    for item in batch:
                        try:
                            left += await self._insert(conn, [item])
                        except Exception as one:
                            item.error = StorageFailed(f"commit {item.seq} failed: {one}")
                else:
                    batch[0].error = StorageFailed(f"commit {batch[0].seq} failed: {exc}")
                    left = []
            if left:
                await self._left_out(conn, left)
        except Exception as exc:  # no connection, or the recovery failed: outcome unknown
            for item in everyone:
                if item.error is None:
                    item.again = False
                    item.error = StorageFailed(
                        f"commit {item.seq} failed and whether it was stored is unknown: {exc}"
                    )
        finally:
            for item in everyone:
                item.conn = None
            if conn is not None and not self._kept(conn):
                await self._pool.putconn(conn)  # the pool discards a broken one
        for item in everyone:
            if item.again:
                item.again = False  # queued again: the next group sends it
            else:
                item.finished = True
                item.wake()

    async def _insert(
        self, conn: AsyncConnection[Any], batch: list[Pending], *, alone: bool = False
    ) -> list[Pending]:
        """One statement for ``batch``, straight through libpq with its parameters already in
        binary (no query conversion, no adaptation: a fraction of ``cursor.execute``'s client
        CPU); returns the items whose row was left out. ``alone``: nothing else is in flight,
        so the answer is awaited without the loop for up to :data:`BLOCK_MS` first
        (:func:`run_prepared`'s ``block``, spinning)."""

        if conn not in _PREPARED:
            await conn.execute(_PREPARE)
            await conn.execute(_PREPARE_ONE)
            _PREPARED.add(conn)
        n = len(batch)
        pace = self._pace if alone else None  # a group's answer is awaited on the loop
        if n == 1:  # a group of one: its command tag counts its row if it was stored
            one = batch[0]
            params: tuple[bytes, ...] = (
                one.session.encode(),
                _Q(one.seq),
                _Q(one.epoch),
                _Q(one.max_id),
                one.raw,
            )
            results = await run_prepared(
                conn, _NAME_ONE, params, _FORMATS, ok=command_ok(), pace=pace
            )
            return [] if any(result.command_tuples for result in results) else batch
        names = [i.session.encode() for i in batch]
        raws = [i.raw for i in batch]
        params = (
            b"".join([_HEAD(1, 0, _TEXT, n, 1), *(_LEN(len(x)) + x for x in names)]),
            b"".join([_HEAD(1, 0, _BIGINT, n, 1), *(_INT8(8, i.seq) for i in batch)]),
            b"".join([_HEAD(1, 0, _BIGINT, n, 1), *(_INT8(8, i.epoch) for i in batch)]),
            b"".join([_HEAD(1, 0, _BIGINT, n, 1), *(_INT8(8, i.max_id) for i in batch)]),
            b"".join([_HEAD(1, 0, _BYTEA, n, 1), *(_LEN(len(x)) + x for x in raws)]),
        )
        stored: set[bytes] = set()
        for result in await run_prepared(conn, _NAME, params, _FORMATS, pace=pace):
            stored.update(result.get_value(row, 0) or b"" for row in range(result.ntuples))
        return [i for i, name in zip(batch, names, strict=True) if name not in stored]

    async def _left_out(self, conn: AsyncConnection[Any], left: list[Pending]) -> None:
        """Rows the fence left out: refused if the epoch moved on, else queued again (their
        session row was only locked by a renewal or a takeover in flight)."""
        cursor = await conn.execute(_EPOCHS, ([i.session for i in left],))
        epochs = dict(await cursor.fetchall())
        for item in left:
            if epochs.get(item.session) != item.epoch:
                item.error = LeaseLost(
                    f"session {item.session!r}: commit {item.seq} refused, another worker took "
                    f"the lease (this worker held epoch {item.epoch}); nothing was written, "
                    "this worker must stop"
                )
            else:
                item.again = True
                self._queue.append(item)

    async def _connection(self, deadline: float = float("inf")) -> AsyncConnection[Any]:
        """A pool connection in autocommit mode, not one the server ended while it was idle
        (a restart): anything readable on an idle connection is the server's goodbye.

        A kept connection used within :data:`IDLE_CHECK` seconds is not looked at (a ``poll``
        per commit): if the server ended it all the same, the statement sent on it fails as a
        lost connection and :meth:`_recover` replaces it, looks the rows up and sends the
        missing ones, as for a connection lost in flight."""
        while self._idle:
            conn = self._idle.pop()
            used = self._used.pop(id(conn), 0.0)
            if time.monotonic() - used < self.idle_check and not (conn.closed or conn.broken):
                return conn
            if not _idle_broken(conn):
                return conn
            await conn.close()
            await self._pool.putconn(conn)
        for _ in range(self._pool.max_size + 1):
            # no longer than the group's first commit may wait: a stalled database must
            # reach its sessions within their commit timeout, not the pool's wait
            wait = min(self.timeout, max(0.05, deadline - time.monotonic()))
            conn = await self._pool.getconn(timeout=wait)
            if not _idle_broken(conn):
                await conn.set_autocommit(True)
                return conn
            await conn.close()
            await self._pool.putconn(conn)
        raise StorageFailed("every pool connection was closed by the server")

    async def _recover(
        self, lost: AsyncConnection[Any], batch: list[Pending]
    ) -> tuple[AsyncConnection[Any], list[Pending]]:
        """The group's connection was lost in flight: end its backend (waiting until it exited:
        its transaction is then over), look up the rows, send the missing ones once more."""
        backend = lost.info.backend_pid
        await self._pool.putconn(lost)  # the pool discards it
        fresh = await self._connection()
        try:
            for item in batch:
                item.conn = fresh
            await fresh.execute(_END, (backend, self.patience_ms))
            cursor = await fresh.execute(
                _STORED,
                ([i.session for i in batch], [i.seq for i in batch], [i.epoch for i in batch]),
            )
            stored = {row[0] for row in await cursor.fetchall()}
            missing = [i for i in batch if i.session not in stored]
            return fresh, (await self._insert(fresh, missing) if missing else [])
        except BaseException:
            await self._pool.putconn(fresh)
            raise


def _not_sent(item: Pending) -> StorageFailed:
    return StorageFailed(
        f"session {item.session!r}: commit {item.seq} was not sent: no pool connection was "
        "free within its commit timeout (PostgreSQL stalled, or every connection busy); it "
        "is not stored"
    )


def waiting_requests(pool: AsyncConnectionPool) -> int:
    """Requests waiting for a connection of ``pool`` now: the length of its queue of waiters
    (``get_stats()`` copies every counter under a lock to say the same: ~2 us a call, paid
    once per commit where it is asked), or ``get_stats()``'s figure on a pool without one."""
    queue = getattr(pool, "_waiting", None)
    if queue is not None:
        return len(queue)
    return int(pool.get_stats().get("requests_waiting", 0))


def _lost(conn: AsyncConnection[Any], exc: Exception) -> bool:
    from psycopg import pq

    state = getattr(exc, "sqlstate", None) or ""
    if state.startswith(("57P", "08")):
        return True
    return conn.closed or conn.broken or conn.pgconn.status != pq.ConnStatus.OK


def _idle_broken(conn: AsyncConnection[Any]) -> bool:
    from psycopg import pq

    if conn.closed or conn.broken or conn.pgconn.status != pq.ConnStatus.OK:
        return True
    try:
        poller = select.poll()
        poller.register(conn.pgconn.socket, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


_COMMITTERS: weakref.WeakKeyDictionary[Any, GroupCommitter] = weakref.WeakKeyDictionary()


def committer_for(pool: AsyncConnectionPool) -> GroupCommitter:
    """The one :class:`GroupCommitter` of ``pool`` (made on first use)."""
    found = _COMMITTERS.get(pool)
    if found is None:
        found = _COMMITTERS[pool] = GroupCommitter(pool)
    return found
