"""PostgresStorage: sessions in a PostgreSQL database (psycopg 3, async).

The same contract as :class:`~pico3.storage.memory.MemoryStorage` and
:class:`~pico3.storage.jsonl.JsonlStorage` (docs/design/storage.md): batches are validated and staged in
memory first, then written in *one* database transaction, then applied to the in-memory
tables the reads serve from. Many sessions share one database; each is named by ``session``.

Tables (schema version :data:`SCHEMA_VERSION`, see :data:`MIGRATIONS`)
-----------------------------------------------------------------------
``pico3_schema``
    One row: the schema version and ``compatible``, the oldest code version that still works
    on it (:data:`COMPATIBLE`). Migrations run at open (``migrate=False``: refused with
    :class:`~pico3.storage.base.SchemaNotMigrated`, see :func:`migrate_database`), under an
    advisory lock and a lock timeout, in one transaction; a database whose version is newer
    than this code and not compatible with it is refused with
    :class:`~pico3.storage.base.SchemaTooNew` before anything is read or written.
``pico3_sessions``
    One row per session: the *lease* (``epoch``, the fencing token; ``holder``, e.g. ``pid 123
    on host``; ``lease_until``), ``lock_key`` (the session lock's key, schema 3), and ``seq``
    and ``max_id`` as of the last ``close`` (a commit does not update this row).
``pico3_commits``
    One row per commit ``(session, seq)``: the batch's main writes (msgspec JSON, ``bytea``),
    the counterpart of a ``main.jsonl`` line, with its writer's ``epoch`` and the id
    high-water ``max_id`` after it (schema 3). Every seq has a row, even an empty batch's.
``pico3_sticky``
    Sticky document ops per ``(session, conversation_id, seq)``; :meth:`truncate` deletes the
    rows before the last base (the sidecar rewrite of JSONL).
``pico3_blobs``
    Session blobs per ``(session, name)`` (:meth:`PostgresStorage.put_blobs`, schema 2): what an
    application keeps beside the commits, fenced by the lease, not replayed at open
    (:mod:`pico3.storage.pg_blobs`).
``pico3_task_patches``
    A live task's transient patches (running, checkpoints, the abort mark) per
    ``(session, task_id, seq)``; deleted in the transaction that publishes the task's terminal
    record, exactly like a JSONL task sidecar.

Publication point and durability
--------------------------------
A commit is one prepared statement in autocommit mode (one round trip, on the connection and
cursor the writer holds while open, no pool checkout) that inserts the rows and deletes the
retired task patches; the transaction's COMMIT is the publication point. The common commit
(main writes only) is one ``INSERT`` of the commit row; a commit with sidecar rows or a retiring
task calls the ``pico3_commit`` SQL function. Nothing is half-published: a failed transaction
leaves no row. ``fsync=True`` (default)
commits with ``synchronous_commit=on`` (acknowledged once the WAL is flushed on the server);
``fsync=False`` with ``synchronous_commit=off`` (acknowledged before the flush: survives the
death of the worker, and of the server process on a healthy machine, not a power loss of the
database host). Any error after the call started makes the storage fail-stop
(:class:`~pico3.storage.base.StorageFailed`); reopening recovers the last committed batch.

One writer (the lease and the session lock)
-------------------------------------------
``open`` takes the session's lease: it bumps ``epoch`` if nobody holds it or the holder's
``lease_until`` has passed, and refuses with :class:`~pico3.storage.base.StorageInUse` naming the
holder otherwise. A daemon thread renews the lease every quarter of ``lease_seconds`` (its own,
or a :class:`~pico3.storage.pg_lease.LeaseRenewer` shared by the process's sessions, ``renewer=``:
one connection and one statement for all their leases); a
process-wide watchdog thread bounds a commit in flight (``commit_timeout``: past it the commit
fails and the renewals stop) and calls the :meth:`PostgresStorage.on_fence` callbacks when no
renewal succeeded for three quarters of the lease (before it can expire), on such a stall, and
on ``LeaseLost``, so the owner can kill its commands (self-fencing). Then it
takes the session lock, a session-level advisory lock the writer's connection holds until
``close``, ending the backend of a previous holder that still holds it and waiting for it to
exit: that lock, not a check in the commit, is the fence (the proof is in docs/design/storage.md,
"Fencing on PostgreSQL"). A worker whose lease was taken (it stalled past the expiry, or its
renewals could not reach the database) fails its next commit with
:class:`~pico3.storage.base.LeaseLost`, having written nothing, and the storage refuses every
later commit. ``close`` releases the lease and the lock so the next opener need not wait.

An idle session (``pool=``)
--------------------------
:meth:`PostgresStorage.release_writer` gives the writer's connection back to the shared pool
while the session is idle (its owner decides when): the session lock goes with it, the lease
stays (renewed as before). The next commit takes a pool connection and re-takes the fence the
way a reconnect does (below), so a process of many sessions needs connections for its *active*
sessions only. The blobs of a pooled storage use a pool connection per operation.

Group commit (``group_commit=True``)
------------------------------------
The sessions of one process on one shared pool can commit in groups
(:mod:`pico3.storage.pg_group`): the commits that arrive together go as one statement in one
transaction, each row fenced by its writer's epoch (the session row locked ``FOR SHARE``)
instead of the session lock, which the opening takes (ending a previous holder's backend) and
gives back at once. A stale writer's row is left out (``LeaseLost``); the others commit.

A lost connection
-----------------
Before each statement the writer polls its idle connection (anything readable is the server's
goodbye: a restart, a terminated backend) and reconnects, re-taking the fence like ``open``
(the epoch must still be this writer's, the session lock is taken on the new connection, the
epoch checked again under it, and the last stored seq must be the one this writer knows). A
connection lost with a commit in flight is reconnected the same way; then the commit row of that
seq with this writer's epoch says whether it was published (it is not sent again) or not (it is
sent once more). See docs/postgresql.md, "Faults".

Open-time recovery
------------------
``open`` reads the session's rows in seq order, in chunks (one aggregated row each, every chunk's
query sent at once in pipeline mode), and replays them with :func:`pico3.storage._replay.replay`,
the replay JSONL uses: through the same staging as a live commit. Rows that do not decode, a seq gap or
a batch that does not replay fail open with :class:`~pico3.storage.base.CorruptStorage`
naming the table, session and seq. Patch rows of terminal or unknown tasks are ignored and
deleted (a retired task never resurrects).

Why one module: it is one backend of the storage contract: the schema and its migrations, the
commit statement, the lease, the session lock and the renewer, and open-time recovery all act on
the same tables and the same fence, and each step's correctness depends on the others (a commit
relies on the lock the lease's holder took, recovery reads the rows the commit wrote). The shared staging and replay
already live in ``_tables`` and ``_replay``.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import struct
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from chord.context import Context
from pico3.storage._replay import TaskFates, gc_paused, replay
from pico3.storage._tables import Staged, Tables, TableStorage, normalize_batch
from pico3.storage._turn import Turn, shield_scope
from pico3.storage.base import (
    CorruptStorage,
    LeaseLost,
    SchemaNotMigrated,
    SchemaTooNew,
    StorageError,
    StorageFailed,
    StorageInUse,
    StorageUnreachable,
    current_prechecked,
)
from pico3.storage.pg_blobs import BlobStore, address_of, unreachable, with_liveness
from pico3.storage.pg_group import GroupCommitter, Pending, committer_for
from pico3.storage.pg_lease import Lease, LeaseRenewer
from pico3.storage.pg_prepared import (
    Pace,
    StatementFailed,
    command_ok,
    connection_ok,
    run_prepared,
)
from pico3.storage.records import DocRef, DocWrite, Write, is_base

if TYPE_CHECKING:
    from psycopg import AsyncConnection, AsyncCursor
    from psycopg_pool import AsyncConnectionPool

__all__ = [
    "COMMIT_TIMEOUT",
    "COMPATIBLE",
    "LEASE_SECONDS",
    "MIGRATIONS",
    "MIGRATION_LOCK_TIMEOUT",
    "SCHEMA_VERSION",
    "PostgresStorage",
    "migrate",
    "migrate_database",
]

LEASE_SECONDS = 2.0
"""Default lease expiry: a crashed worker's sessions can be taken over this long after its
last renewal."""

COMMIT_TIMEOUT = 15.0
"""Default bound (seconds) on a commit in flight: past it the storage fails (fail-stop) with a
one-line error and stops renewing the lease, so a frozen backend or a cut network ends the
session within it instead of hanging it (docs/postgresql.md, "Liveness")."""

_MIGRATION_LOCK = 0x70696336  # pg_advisory_xact_lock key while migrating ("pic6")
_CHUNK = 5000  # commits per aggregated read at open (small: the first arrives soon)

MIGRATIONS: tuple[str, ...] = (
    # 1: the tables and the commit function
    """
    CREATE TABLE pico3_sessions (
        session text PRIMARY KEY,
        seq bigint NOT NULL DEFAULT 0,
        max_id bigint NOT NULL DEFAULT 0,
        epoch bigint NOT NULL DEFAULT 0,
        holder text,
        lease_until timestamptz,
        created timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE pico3_commits (
        session text NOT NULL,
        seq bigint NOT NULL,
        writes bytea NOT NULL,
        PRIMARY KEY (session, seq)
    );
    CREATE TABLE pico3_sticky (
        session text NOT NULL,
        conversation_id bigint NOT NULL,
        seq bigint NOT NULL,
        writes bytea NOT NULL,
        PRIMARY KEY (session, conversation_id, seq)
    );
    CREATE TABLE pico3_task_patches (
        session text NOT NULL,
        task_id bigint NOT NULL,
        seq bigint NOT NULL,
        writes bytea NOT NULL,
        PRIMARY KEY (session, task_id, seq)
    );
    CREATE FUNCTION pico3_commit(
        p_session text, p_epoch bigint, p_seq bigint, p_max_id bigint, p_sync boolean,
        p_lease_ms integer, p_writes bytea, p_sticky_ids bigint[], p_sticky bytea[],
        p_task_ids bigint[], p_tasks bytea[], p_retired bigint[]
    ) RETURNS void LANGUAGE plpgsql AS $$
    DECLARE
        found_epoch bigint;
        found_seq bigint;
    BEGIN
        IF NOT p_sync THEN
            PERFORM set_config('synchronous_commit', 'off', true);
        END IF;
        UPDATE pico3_sessions
           SET seq = p_seq, max_id = p_max_id,
               lease_until = clock_timestamp() + p_lease_ms * interval '1 millisecond'
         WHERE session = p_session AND epoch = p_epoch AND seq = p_seq - 1;
        IF NOT FOUND THEN
            SELECT epoch, seq INTO found_epoch, found_seq
              FROM pico3_sessions WHERE session = p_session;
            IF found_epoch IS DISTINCT FROM p_epoch THEN
                RAISE EXCEPTION 'lease of session % lost: epoch is now %, this writer holds %',
                    p_session, found_epoch, p_epoch USING ERRCODE = 'P3L01';
            END IF;
            RAISE EXCEPTION 'session % is at seq %, this writer expected %',
                p_session, found_seq, p_seq - 1 USING ERRCODE = 'P3S01';
        END IF;
        INSERT INTO pico3_commits (session, seq, writes) VALUES (p_session, p_seq, p_writes);
        IF cardinality(p_sticky_ids) > 0 THEN
            INSERT INTO pico3_sticky (session, conversation_id, seq, writes)
            SELECT p_session, u.id, p_seq, u.w FROM unnest(p_sticky_ids, p_sticky) AS u(id, w);
        END IF;
        IF cardinality(p_task_ids) > 0 THEN
            INSERT INTO pico3_task_patches (session, task_id, seq, writes)
            SELECT p_session, u.id, p_seq, u.w FROM unnest(p_task_ids, p_tasks) AS u(id, w);
        END IF;
        IF cardinality(p_retired) > 0 THEN
            DELETE FROM pico3_task_patches
             WHERE session = p_session AND task_id = ANY(p_retired);
        END IF;
    END $$;
    CREATE FUNCTION pico3_truncate_sticky(
        p_session text, p_epoch bigint, p_conversation_id bigint, p_base bigint
    ) RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM 1 FROM pico3_sessions WHERE session = p_session AND epoch = p_epoch FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'lease of session % lost', p_session USING ERRCODE = 'P3L01';
        END IF;
        DELETE FROM pico3_sticky
         WHERE session = p_session AND conversation_id = p_conversation_id AND seq < p_base;
    END $$;
    """,
    # 2: session blobs (pico3.storage.pg_blobs), fenced by the lease, never replayed at open
    """
    CREATE TABLE pico3_blobs (
        session text NOT NULL,
        name text COLLATE "C" NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (session, name)
    );
    """,
    # 3: fencing by the session lock (docs/design/storage.md, "Fencing on PostgreSQL"): each
    # session gets the key of its advisory lock; a commit row records its writer's epoch and
    # the id high-water after it, so a commit no longer updates the session row
    """
    ALTER TABLE pico3_sessions ADD COLUMN lock_key integer GENERATED BY DEFAULT AS IDENTITY;
    ALTER TABLE pico3_sessions ADD CONSTRAINT pico3_sessions_lock_key UNIQUE (lock_key);
    ALTER TABLE pico3_commits ADD COLUMN epoch bigint, ADD COLUMN max_id bigint;
    DROP FUNCTION pico3_commit(
        text, bigint, bigint, bigint, boolean, integer, bytea, bigint[], bytea[], bigint[],
        bytea[], bigint[]
    );
    CREATE FUNCTION pico3_commit(
        p_session text, p_epoch bigint, p_seq bigint, p_max_id bigint, p_sync boolean,
        p_writes bytea, p_sticky_ids bigint[], p_sticky bytea[], p_task_ids bigint[],
        p_tasks bytea[], p_retired bigint[]
    ) RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        IF NOT p_sync THEN
            PERFORM set_config('synchronous_commit', 'off', true);
        END IF;
        INSERT INTO pico3_commits (session, seq, epoch, max_id, writes)
        VALUES (p_session, p_seq, p_epoch, p_max_id, p_writes);
        IF cardinality(p_sticky_ids) > 0 THEN
            INSERT INTO pico3_sticky (session, conversation_id, seq, writes)
            SELECT p_session, u.id, p_seq, u.w FROM unnest(p_sticky_ids, p_sticky) AS u(id, w);
        END IF;
        IF cardinality(p_task_ids) > 0 THEN
            INSERT INTO pico3_task_patches (session, task_id, seq, writes)
            SELECT p_session, u.id, p_seq, u.w FROM unnest(p_task_ids, p_tasks) AS u(id, w);
        END IF;
        IF cardinality(p_retired) > 0 THEN
            DELETE FROM pico3_task_patches
             WHERE session = p_session AND task_id = ANY(p_retired);
        END IF;
    END $$;
    """,
)
"""Schema migrations: ``MIGRATIONS[n - 1]`` takes the database from version ``n - 1`` to
``n``. Append only; never edit a released one."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this code writes and reads."""

COMPATIBLE: tuple[int, ...] = (1, 1, 3)
"""``COMPATIBLE[n - 1]``: the oldest code version that still works on schema ``n`` (recorded in
``pico3_schema.compatible`` by the code that migrates to ``n``). Code of version ``c`` opens a
database of a newer version ``n`` only when ``COMPATIBLE[n - 1] <= c``: so a migration that only
adds (a table, a nullable column, an index, a function under a new name) keeps the previous
value, and servers on the previous release go on using the database while their peer is
upgraded; one that changes what older code reads or writes raises it to ``n``. The rule is in
docs/postgresql.md, "Schema changes and rolling upgrades"."""

MIGRATION_LOCK_TIMEOUT = 10.0
"""How long (seconds) a migration waits for any lock before it gives up, changing nothing."""

_ENCODER = msgspec.json.Encoder()
_BATCHES = msgspec.json.Decoder(list[list[Write]])
_STICKY_NAME = re.compile(r"sticky-([1-9][0-9]*)\.jsonl")
_TASK_NAME = re.compile(r"task-([1-9][0-9]*)\.jsonl")
_LEASE_LOST = "P3L01"
_LOCK_CLASS = 0x70696337  # the first key of every session's advisory lock ("pic7")
_COMMIT_MAIN = b"pico3_commit_main"
_PREPARE_MAIN = (
    # the common commit (no sidecar rows, no retired task): one plain INSERT; the session lock
    # this connection holds is the fence (docs/design/storage.md, "Fencing on PostgreSQL").
    # Prepared once per opening and sent straight through libpq, parameters already in binary
    "PREPARE pico3_commit_main (text, int8, int8, int8, bytea) AS INSERT INTO pico3_commits "
    "(session, seq, epoch, max_id, writes) VALUES ($1, $2, $3, $4, $5)"
)
_MAIN_FORMATS = (0, 1, 1, 1, 1)  # the session name as text, the rest binary
_INT8 = struct.Struct("!q").pack
_HOLDS = (
    # the backends other than this one that hold a session's lock (class, key)
    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND classid::int8 = %s AND objid::int8 = %s AND pid <> pg_backend_pid()"
)
_READ_CHUNK = (
    # one chunk of commit rows as one row: the seqs, and the rows' JSON arrays joined into one
    # JSON array (bytea: '[' row ',' row ... ']')
    "SELECT array_agg(seq ORDER BY seq), "
    "'\\x5b'::bytea || string_agg(writes, '\\x2c'::bytea ORDER BY seq) || '\\x5d'::bytea "
    "FROM pico3_commits WHERE session = %s AND seq > %s AND seq <= %s"
)
_COMMIT = (
    "SELECT pico3_commit(%s, %s, %s, %s, %s, %s, "
    "%s::bigint[], %s::bytea[], %s::bigint[], %s::bytea[], %s::bigint[])"
)
_FENCED_COMMIT = (
    # a grouped session's commit with sidecar rows: the function runs only if the session row,
    # locked first, still has the writer's epoch (a takeover's UPDATE waits for the lock)
    "WITH f AS MATERIALIZED (SELECT 1 FROM pico3_sessions WHERE session = %s AND epoch = %s "
    "FOR SHARE) SELECT pico3_commit(%s, %s, %s, %s, %s, %s, "
    "%s::bigint[], %s::bytea[], %s::bigint[], %s::bytea[], %s::bigint[]) FROM f"
)


async def _schema_state(conn: AsyncConnection[Any]) -> tuple[int, int | None]:
    """The database's pico3 schema version (0: none yet) and the oldest code version it stays
    compatible with (``None``: not recorded, i.e. only code of exactly that version)."""
    cursor = await conn.execute("SELECT to_regclass('pico3_schema') IS NOT NULL")
    exists = await cursor.fetchone()
    if exists is None or not exists[0]:
        return 0, None
    cursor = await conn.execute("SELECT row_to_json(s)::text FROM pico3_schema s LIMIT 1")
    row = await cursor.fetchone()
    if row is None or row[0] is None:
        return 0, None
    state = msgspec.json.decode(row[0])
    compatible = state.get("compatible")
    return int(state["version"]), None if compatible is None else int(compatible)


def _check_not_too_new(found: int, compatible: int | None) -> bool:
    """Whether a database at ``found`` is newer than this code but compatible with it (True);
    raises :class:`SchemaTooNew` if it is newer and not; False if it is not newer."""
    if found <= SCHEMA_VERSION:
        return False
    if compatible is not None and compatible <= SCHEMA_VERSION:
        return True
    back = "" if compatible is None else f"; the database needs version {compatible} or newer"
    raise SchemaTooNew(
        f"the database's pico3 schema is version {found}, newer than this pico3 (it knows "
        f"versions up to {SCHEMA_VERSION}{back}); nothing was changed. Upgrade pico3 "
        "(coding-agent) on this machine, or point it at another database"
    )


def _not_migrated(found: int) -> SchemaNotMigrated:
    return SchemaNotMigrated(
        f"the database's pico3 schema is at version {found}, this pico3 needs version "
        f"{SCHEMA_VERSION}; run `coding-agent db migrate URL` (or pico3.migrate_database(url)) "
        "with a role that may change the schema, then start again"
    )


async def migrate(
    conn: AsyncConnection[Any], *, lock_timeout: float = MIGRATION_LOCK_TIMEOUT
) -> int:
    """Bring the database's pico3 schema to :data:`SCHEMA_VERSION`; return the version found.

    Nothing is locked when the schema is current (or newer and compatible: see
    :data:`COMPATIBLE`). Otherwise it runs in one transaction under an advisory lock, so
    concurrent first users wait, then find it done (``CREATE … IF NOT EXISTS`` alone is not
    safe: two creators of one table race on ``pg_type``), with ``lock_timeout`` bounding every
    wait for a lock (the advisory lock, and the tables a migration alters under traffic): past
    it, :class:`StorageError` and nothing changed. Raises :class:`SchemaTooNew` if the database
    is newer than this code and not compatible with it."""
    found, compatible = await _schema_state(conn)
    if found == SCHEMA_VERSION or _check_not_too_new(found, compatible):
        return found
    try:
        async with conn.transaction():
            await conn.execute(
                "SELECT set_config('lock_timeout', %s, true)",
                (f"{max(1, round(lock_timeout * 1000))}ms",),
            )
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            await conn.execute("CREATE TABLE IF NOT EXISTS pico3_schema (version integer NOT NULL)")
            found, compatible = await _schema_state(conn)  # another may have migrated meanwhile
            if found == SCHEMA_VERSION or _check_not_too_new(found, compatible):
                return found
            await conn.execute(
                "ALTER TABLE pico3_schema ADD COLUMN IF NOT EXISTS compatible integer"
            )
            for version in range(found + 1, SCHEMA_VERSION + 1):
                await conn.execute(MIGRATIONS[version - 1])  # type: ignore[arg-type]
            await conn.execute("DELETE FROM pico3_schema")
            await conn.execute(
                "INSERT INTO pico3_schema (version, compatible) VALUES (%s, %s)",
                (SCHEMA_VERSION, COMPATIBLE[SCHEMA_VERSION - 1]),
            )
    except Exception as exc:
        if getattr(exc, "sqlstate", None) != "55P03":  # not the lock timeout
            raise
        raise StorageError(
            f"migrating the pico3 schema from version {found} to {SCHEMA_VERSION} waited more "
            f"than {lock_timeout:g} s for a lock (another migration, or a long transaction on "
            "a pico3 table, holds it); nothing was changed: retry, or end that transaction"
        ) from None
    return found


async def migrate_database(
    conninfo: str,
    *,
    lock_timeout: float = MIGRATION_LOCK_TIMEOUT,
    connect_timeout: float = 10.0,
) -> tuple[int, int]:
    """The explicit migration step: bring the pico3 schema of the database at ``conninfo`` to
    this code's :data:`SCHEMA_VERSION`; return ``(found, now)``. Safe to run while servers use
    the database and from several places at once (see :func:`migrate`); run it with a role
    that may change the schema. ``now`` is ``found`` when the database is already current or
    newer and compatible. Raises :class:`SchemaTooNew`, :class:`StorageUnreachable`, or
    :class:`StorageError` (a lock not granted within ``lock_timeout``)."""
    import psycopg

    try:
        conn = await psycopg.AsyncConnection.connect(
            conninfo, autocommit=True, connect_timeout=max(1, round(connect_timeout))
        )
    except Exception as exc:
        raise unreachable(conninfo, connect_timeout, "migrate its pico3 schema", exc) from None
    async with conn:
        found = await migrate(conn, lock_timeout=lock_timeout)
        now, _ = await _schema_state(conn)
    return found, now


def _holder() -> str:
    return f"pid {os.getpid()} on {socket.gethostname()}"


class PostgresStorage(TableStorage):
    """A :class:`~pico3.storage.base.Storage` in PostgreSQL (see the module doc).

    ``conninfo`` is a libpq connection string or URL (``postgresql://user@host/db``); or pass
    ``pool``, an :class:`psycopg_pool.AsyncConnectionPool` shared by many sessions (opened by
    its owner). ``session`` names the session inside the database. ``fsync`` maps to
    ``synchronous_commit``; ``lease_seconds`` is the lease expiry. ``wait`` is how long
    ``open`` waits for a held lease to expire (default 0: refuse at once). ``take_over=True``
    takes the lease even though it is held: for a supervisor that knows the holder is dead (it
    reaped it); should the holder be alive after all, its next commit fails with
    :class:`LeaseLost`. With ``create=False`` a session the database does not hold is an error.
    A server that cannot be reached within ``connect_timeout`` seconds fails ``open`` with a
    :class:`StorageUnreachable` naming its host, port and database (never the password).
    ``migrate=True`` (the default) brings an older schema up to date at open (:func:`migrate`);
    with ``migrate=False`` an older schema is refused with :class:`SchemaNotMigrated` and the
    explicit step, :func:`migrate_database` (``coding-agent db migrate``), must run first.
    ``group_commit=True`` (needs ``pool``; only ``fsync=True`` sessions are grouped): the
    commits of the pool's sessions that arrive together share one statement and one
    transaction, each fenced per row by its writer's epoch, and the session holds no
    connection between commits (:mod:`pico3.storage.pg_group`).
    """

    def __init__(
        self,
        conninfo: str | None = None,
        session: str = "default",
        *,
        pool: AsyncConnectionPool | None = None,
        renewer: LeaseRenewer | None = None,
        fsync: bool = True,
        lease_seconds: float = LEASE_SECONDS,
        wait: float = 0.0,
        take_over: bool = False,
        create: bool = True,
        connect_timeout: float = 10.0,
        migrate: bool = True,
        commit_timeout: float = COMMIT_TIMEOUT,
        group_commit: bool = False,
    ) -> None:
        super().__init__()
        if (conninfo is None) == (pool is None):
            raise ValueError("PostgresStorage needs exactly one of conninfo or pool")
        if not session:
            raise ValueError("PostgresStorage needs a non-empty session name")
        if lease_seconds <= 0:
            raise ValueError(f"lease_seconds must be positive, not {lease_seconds}")
        if commit_timeout <= 0:
            raise ValueError(f"commit_timeout must be positive, not {commit_timeout}")
        if group_commit and pool is None:
            raise ValueError("group_commit=True needs a shared pool (pool=)")
        if conninfo is None:
            assert pool is not None
            if not isinstance(pool.conninfo, str):
                raise ValueError("a shared pool needs a plain conninfo string (for lease renewal)")
            conninfo = pool.conninfo
        self._conninfo = with_liveness(conninfo)  # keepalive and tcp_user_timeout by default
        self._shared_pool = pool
        self._pool: AsyncConnectionPool | None = None
        self._conn: AsyncConnection[Any] | None = None
        self._cursor: AsyncCursor[Any] | None = None  # the writer's, reused by every commit
        self._session = session
        self._fsync = fsync
        self._lease_ms = max(1, round(lease_seconds * 1000))
        self._create = create
        self._migrate = migrate
        self._wait = wait
        self._connect_timeout = connect_timeout
        # how long ending a previous holder's backend may take (ms)
        self._patience_ms = round(max(5.0, connect_timeout) * 1000)
        self._take_over = take_over
        self._epoch = 0
        self._lock_key = 0  # the session's advisory lock is (_LOCK_CLASS, this)
        self._backend = 0  # the writer connection's backend pid
        self._prepared = False  # the writer's connection holds the prepared main commit
        self._direct = False  # the writer's connection is this storage's own, not a pool's
        self._finalizers: list[weakref.finalize[Any, Any]] = []  # close own connections if leaked
        self._session_bytes = b""
        self._epoch_bytes = b""
        self._failed: BaseException | None = None
        self._lock: Turn | None = None
        # the shielding scope of a commit (the running library's class, asked at open)
        self._shield: type[anyio.CancelScope] = anyio.CancelScope
        self._sticky_base: dict[int, int] = {}  # conversation id -> seq of its last base
        self._shared_renewer = renewer
        self._renewer: LeaseRenewer | None = None  # renewing this opening's lease
        self._lease: Lease | None = None
        self._released = False  # the writer's connection went back to the pool while idle
        self._last_used = 0.0  # monotonic time of the last open or commit
        self._writer_since = 0.0  # monotonic time the writer's connection was taken
        self._commit_timeout = commit_timeout
        self._busy_since: float | None = None  # monotonic start of the commit in flight
        self._stalled = False  # a commit outlived commit_timeout: fail-stop, renewal stopped
        self._lease_t0 = 0.0  # monotonic time just before the lease was last taken
        self._fence_callbacks: list[Callable[[str], object]] = []
        self._blobs: BlobStore | None = None  # session blobs, on a connection of their own
        # the commits go in groups with other sessions' on the pool (pico3.storage.pg_group)
        self._group: GroupCommitter | None = (
            committer_for(pool) if group_commit and fsync and pool is not None else None
        )
        self._pending: Pending | None = None  # this storage's grouped commit in flight
        self._pace = Pace()  # whether a commit's answer is awaited blocking (run_prepared)

    def __repr__(self) -> str:
        return f"<PostgresStorage session={self._session!r} seq={self.seq}>"

    @property
    def session(self) -> str:
        return self._session

    @property
    def fsync(self) -> bool:
        return self._fsync

    @property
    def epoch(self) -> int:
        """This opening's fencing token (0 when not open)."""
        return self._epoch if self._open else 0

    # open / close --------------------------------------------------------------------------

    async def open(self, ctx: Context) -> None:
        """Migrate the schema if needed (and allowed), take the lease, replay the session; see the module doc."""
        self._claim()
        self._failed = None
        self._lock = Turn()  # uncontended: taken with no loop turn and no owner looked up
        self._shield = shield_scope()
        # the writer's connection, held while open: a commit is then one round trip with no
        # pool checkout (a session's commits are sequential anyway)
        try:
            if self._shared_pool is not None:
                self._pool = self._shared_pool
                conn = await self._pool.getconn(timeout=self._connect_timeout)
            else:  # a connection of its own (a pool would retry a refused server, logging)
                conn = await self._connect()
                self._direct = True
        except Exception as exc:
            self._pool = None
            raise self._unreachable(exc, f"open session {self._session!r}") from None
        self._conn = conn
        try:
            await conn.set_autocommit(True)
            if not self._fsync:
                await conn.execute("SET synchronous_commit = off")
            if self._migrate:
                await migrate(conn)
            else:
                found, compatible = await _schema_state(conn)
                if not _check_not_too_new(found, compatible) and found < SCHEMA_VERSION:
                    raise _not_migrated(found)
            self._epoch, self._lock_key = await self._take_lease(conn)
            try:
                self._backend = conn.info.backend_pid
                await self._lock_session(conn)
                tables = await self._load(conn)
                if self._group is None:  # a grouped session commits on the group's statement
                    await conn.execute(_PREPARE_MAIN)
                    self._prepared = True
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self._release_lease(conn)
                raise
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._close_pool()
            raise
        self._tables = tables
        self._next_id = tables.high_water + 1
        self._cursor = conn.cursor()
        self._session_bytes = self._session.encode(conn.info.encoding)
        self._epoch_bytes = _INT8(self._epoch)
        self._stalled = False
        self._lease = Lease(
            self._session,
            self._epoch,
            self._lease_ms,
            self._lease_t0,
            watch_commit=self._watch,
            fence=self._fence,
            commit_timeout=self._commit_timeout,
        )
        if self._shared_renewer is not None:
            self._renewer = self._shared_renewer
        else:  # one thread and one connection of its own, for this lease only
            self._renewer = LeaseRenewer(self._conninfo, connect_timeout=5.0)
        self._renewer.add(self._lease)
        self._released = False
        self._last_used = self._writer_since = time.monotonic()
        self._open = True
        if self._group is not None:  # the fence of its commits is per row: no lock held
            self._group.attach()
            await self.release_writer()

    async def _take_lease(self, conn: AsyncConnection[Any]) -> tuple[int, int]:
        deadline = anyio.current_time() + self._wait
        while True:
            try:
                return await self._try_lease(conn)
            except _Held as held:
                left = deadline - anyio.current_time()
                if left <= 0:
                    raise StorageInUse(str(held)) from None
                await anyio.sleep(min(left, max(held.expires_in, 0.0) + 0.005))

    async def _try_lease(self, conn: AsyncConnection[Any]) -> tuple[int, int]:
        self._lease_t0 = time.monotonic()  # the lease lasts at least lease_seconds from here
        if self._create:
            await conn.execute(
                "INSERT INTO pico3_sessions (session) VALUES (%s) ON CONFLICT DO NOTHING",
                (self._session,),
            )
        row = await (
            await conn.execute(
                "UPDATE pico3_sessions SET epoch = epoch + 1, holder = %s, "
                "lease_until = clock_timestamp() + %s * interval '1 millisecond' "
                "WHERE session = %s AND (%s OR holder IS NULL OR lease_until < clock_timestamp()) "
                "RETURNING epoch, lock_key",
                (_holder(), self._lease_ms, self._session, self._take_over),
            )
        ).fetchone()
        if row is not None:
            return int(row[0]), int(row[1])
        held = await (
            await conn.execute(
                "SELECT holder, epoch, "
                "extract(epoch FROM lease_until - clock_timestamp())::float8 "
                "FROM pico3_sessions WHERE session = %s",
                (self._session,),
            )
        ).fetchone()
        if held is None:
            raise StorageError(
                f"session {self._session!r} does not exist in the database (create=False); "
                "check the session name, or create it first"
            )
        holder, epoch, left = held
        left = max(0.0, left or 0.0)
        raise _Held(
            f"session {self._session!r} is open in another worker ({holder}, lease epoch "
            f"{epoch}, expires in {left:.1f} s unless renewed); stop that worker, or wait for "
            "its lease to expire",
            left,
        )

    async def _lock_session(self, conn: AsyncConnection[Any]) -> None:
        """Hold the session's lock on the writer's connection: the fence of every commit.

        The lease is ours (the epoch just moved on), so a backend still holding the lock is a
        previous holder's whose lease expired or was taken over: it is ended, and the lock is
        ours once it exited, i.e. once every transaction it ran has committed or aborted (the
        proof: docs/design/storage.md, "Fencing on PostgreSQL")."""
        key = (_LOCK_CLASS, self._lock_key)
        patience = self._patience_ms
        await conn.execute(
            f"SELECT pg_terminate_backend(pid, %s) FROM ({_HOLDS}) AS h", (patience, *key)
        )
        try:
            await conn.execute("SELECT set_config('lock_timeout', %s, false)", (f"{patience}ms",))
            await conn.execute("SELECT pg_advisory_lock(%s, %s)", key)
        except Exception as exc:
            if getattr(exc, "sqlstate", None) != "55P03":  # not the lock timeout
                raise
            raise StorageError(
                f"session {self._session!r}: the previous holder's database connection still "
                f"holds the session's lock after {patience / 1000:g} s although its lease is "
                "gone, and could not be ended (ending another role's connection needs the "
                "pg_signal_backend role): end it (pg_terminate_backend) or grant that role"
            ) from None
        finally:
            if not conn.closed:
                await conn.execute("SELECT set_config('lock_timeout', '0', false)")

    async def _release_lease(self, conn: AsyncConnection[Any]) -> None:
        """Give the lease and the session's lock back; the session row records the last seq."""
        await conn.execute(
            "UPDATE pico3_sessions SET holder = NULL, lease_until = NULL, "
            "seq = greatest(seq, %s), max_id = greatest(max_id, %s) "
            "WHERE session = %s AND epoch = %s",
            (self.seq, self._tables.high_water, self._session, self._epoch),
        )
        await conn.execute("SELECT pg_advisory_unlock(%s, %s)", (_LOCK_CLASS, self._lock_key))

    async def _load(self, conn: AsyncConnection[Any]) -> Tables:
        session = self._session
        # the last commit row says where the session is (the session row's seq and max_id are
        # only brought up to date at close, and a commit row before schema 3 has no max_id)
        row = await (
            await conn.execute(
                "SELECT s.seq, s.max_id, s.epoch, s.holder, c.seq, c.max_id "
                "FROM pico3_sessions s LEFT JOIN LATERAL (SELECT seq, max_id FROM pico3_commits "
                "WHERE session = s.session ORDER BY seq DESC LIMIT 1) c ON true "
                "WHERE s.session = %s",
                (session,),
            )
        ).fetchone()
        assert row is not None  # the lease row exists: we just took it
        if row[2] != self._epoch:  # taken over while this opener waited for the lock
            raise StorageInUse(
                f"session {session!r} was taken over by another worker ({row[3]}, lease epoch "
                f"{row[2]}) while this one opened it; stop that worker, or open it later"
            )
        last = max(int(row[0]), int(row[4] or 0))
        high_water = max(int(row[1]), int(row[5] or 0))
        extra: dict[int, list[Write]] = {}
        fates = TaskFates()
        base: dict[int, int] = {}
        cursor = conn.cursor(binary=True)
        await cursor.execute(
            "SELECT conversation_id, seq, writes FROM pico3_sticky WHERE session = %s "
            "ORDER BY seq, conversation_id",
            (session,),
        )
        sticky = await cursor.fetchall()
        await cursor.execute(
            "SELECT task_id, seq, writes FROM pico3_task_patches WHERE session = %s "
            "ORDER BY seq, task_id",
            (session,),
        )
        patches = await cursor.fetchall()
        await cursor.close()

        tables = Tables()

        def where(seq: int) -> tuple[str, None]:
            return f"pico3_commits[session={session!r}, seq {seq}]", None

        with gc_paused():
            if patches:  # which tasks exist and which retired judges the patch rows: all first
                commits: list[tuple[int, list[Write]]] = []
                await self._read_commits(conn, last, commits.extend)
                for seq, writes in commits:
                    fates.scan(seq, writes)
                self._collect(session, sticky, patches, extra, fates, base, last)
                replay(tables, commits, extra, where)
            else:  # replay each chunk while the server reads the next ones
                self._collect(session, sticky, patches, extra, fates, base, last)
                await self._read_commits(
                    conn, last, lambda chunk: replay(tables, chunk, extra, where)
                )
        tables.high_water = max(tables.high_water, high_water)
        stale = [id for id, _, _ in patches if not fates.live(id)]
        if stale:
            await conn.execute(
                "DELETE FROM pico3_task_patches WHERE session = %s AND task_id = ANY(%s)",
                (session, sorted(set(stale))),
            )
        self._sticky_base = base
        return tables

    async def _read_commits(
        self,
        conn: AsyncConnection[Any],
        last: int,
        consume: Callable[[list[tuple[int, list[Write]]]], None],
    ) -> None:
        """Hand every commit row ``1..last`` to ``consume`` in seq order, a chunk at a time.

        Each chunk is one aggregated row: its seqs, and its rows' JSON joined into one array
        decoded in one msgspec call (no Python object per row). Every chunk's query is sent at
        once in pipeline mode, so the server reads and ships the next chunks while ``consume``
        works on one."""
        session = self._session
        bounds = [(seq, min(last, seq + _CHUNK)) for seq in range(0, last, _CHUNK)]
        async with conn.pipeline():
            cursors: list[AsyncCursor[Any]] = []
            for seq, stop in bounds:
                cursor = conn.cursor(binary=True)
                await cursor.execute(_READ_CHUNK, (session, seq, stop))
                cursors.append(cursor)
            for (seq, stop), cursor in zip(bounds, cursors, strict=True):
                chunk = await cursor.fetchone()
                seqs: list[int] = list(chunk[0]) if chunk is not None and chunk[0] else []
                if seqs != list(range(seq + 1, stop + 1)):
                    have = set(seqs)
                    missing = next(n for n in range(seq + 1, stop + 1) if n not in have)
                    raise CorruptStorage(
                        f"pico3_commits[session={session!r}]",
                        None,
                        f"commit seq {missing} is missing (the session row says seq {last})",
                    )
                assert chunk is not None
                try:
                    batches = _BATCHES.decode(chunk[1])
                except msgspec.DecodeError as exc:
                    raise CorruptStorage(
                        f"pico3_commits[session={session!r}, seq {seq + 1}..{stop}]",
                        None,
                        f"malformed commit row: {exc}",
                    ) from None
                consume(list(zip(seqs, batches, strict=True)))

    def _collect(
        self,
        session: str,
        sticky: list[tuple[Any, ...]],
        patches: list[tuple[Any, ...]],
        extra: dict[int, list[Write]],
        fates: TaskFates,
        base: dict[int, int],
        last: int,
    ) -> None:
        """Decode the sidecar rows into ``extra`` (by seq); rows of terminal or unknown tasks
        are skipped (a retired task never resurrects state)."""
        decoder = msgspec.json.Decoder(list[Write])
        for table, rows in (("pico3_sticky", sticky), ("pico3_task_patches", patches)):
            for id, seq, raw in rows:
                if table == "pico3_task_patches" and not fates.live(id):
                    continue
                if seq > last:
                    raise CorruptStorage(
                        f"{table}[session={session!r}, id {id}, seq {seq}]",
                        None,
                        f"row is newer than the session's last commit (seq {last})",
                    )
                try:
                    writes = decoder.decode(bytes(raw))
                except msgspec.DecodeError as exc:
                    raise CorruptStorage(
                        f"{table}[session={session!r}, id {id}, seq {seq}]",
                        None,
                        f"malformed row: {exc}",
                    ) from None
                if table == "pico3_sticky":
                    for write in writes:
                        if isinstance(write, DocWrite) and is_base(write.ops):
                            base[id] = seq
                extra.setdefault(seq, []).extend(writes)

    async def close(self, ctx: Context) -> None:
        """Stop renewing, release the lease, return the connections (idempotent)."""
        if not self._open:
            return
        renewer, self._renewer = self._renewer, None
        lease, self._lease = self._lease, None
        if renewer is not None and lease is not None:
            renewer.remove(lease)
        if self._group is not None:
            with anyio.CancelScope(shield=True):
                await self._group.detach()
        with anyio.CancelScope(shield=True):
            blobs, self._blobs = self._blobs, None
            if blobs is not None:
                await blobs.close()
            lock = self._lock
            assert lock is not None
            async with lock:
                self._open = False
                try:
                    if self._failed is None and self._conn is not None:
                        await self._release_lease(self._conn)
                    elif self._failed is None and self._released and renewer is not None:
                        # no connection to wait for: the renewer's gives the lease back
                        renewer.release(
                            self._session, self._epoch, self.seq, self._tables.high_water
                        )
                except Exception:
                    pass  # the lease then simply expires
                finally:
                    await self._close_pool()
                    if renewer is not None and renewer is not self._shared_renewer:
                        renewer.close()  # after a release it was asked for

    async def _close_pool(self) -> None:
        pool, self._pool = self._pool, None
        conn, self._conn = self._conn, None
        self._cursor = None
        prepared, self._prepared = self._prepared, False
        direct, self._direct = self._direct, False
        if direct and conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()  # this storage's own connection, not a pool's
            conn = None
        finalizers, self._finalizers = self._finalizers, []
        for finalizer in finalizers:
            finalizer()  # closes what is still open (nothing, normally) and forgets it
        if pool is None:
            return
        if conn is not None:
            if pool is self._shared_pool and not conn.closed:
                try:  # for the pool's next user: no session lock, the default durability
                    await conn.execute("SELECT pg_advisory_unlock_all()")
                    if prepared:
                        await conn.execute("DEALLOCATE pico3_commit_main")
                    if not self._fsync:
                        await conn.execute("RESET synchronous_commit")
                except Exception:
                    await conn.close()
            await pool.putconn(conn)  # a broken connection is discarded by the pool

    async def _connect(self) -> AsyncConnection[Any]:
        """A new connection of this storage's own (autocommit), closed at :meth:`close`, or
        when this storage is collected unclosed."""
        import psycopg

        conn = await psycopg.AsyncConnection.connect(
            self._conninfo,
            autocommit=True,
            connect_timeout=max(1, round(self._connect_timeout)),
        )
        self._finalizers.append(weakref.finalize(self, _finish, conn))
        return conn

    # commit --------------------------------------------------------------------------------

    def _check_writable(self) -> Tables:
        tables = self._check_open()
        if self._stalled and self._failed is None:  # stalled just as a commit returned
            self._failed = StorageFailed(
                f"{self!r}: a commit got no answer from PostgreSQL within "
                f"{self._commit_timeout:g} s, so the lease renewals stopped; this worker must stop"
            )
        if self._failed is not None:
            if isinstance(self._failed, LeaseLost):
                raise LeaseLost(str(self._failed))
            raise StorageFailed(f"{self!r}: an earlier commit failed ({self._failed})")
        return tables

    async def commit(self, writes: Sequence[Write], ctx: Context) -> int:
        """Publish one batch in one transaction; return its seq. Only waiting for an earlier
        commit can be cancelled; once this commit starts it runs to the end."""
        self._check_writable()
        prechecked = current_prechecked()
        lock = self._lock
        assert lock is not None
        await lock.acquire()  # the only cancellable step: nothing has started yet
        seq = 0
        try:
            with self._shield(shield=True):
                seq = await self._commit_locked(writes, prechecked)
        finally:
            lock.release()
        return seq

    async def _commit_locked(self, writes: Sequence[Write], prechecked: frozenset[int]) -> int:
        tables = self._check_writable()
        lease = self._lease
        if lease is not None and lease.lost:  # the database said so: fail before sending
            self._failed = self._lease_lost(f"commit {tables.seq + 1}")
            self._fence(str(self._failed))  # at once, not at the watchdog's next tick
            raise self._failed
        seq = tables.seq + 1
        copies, raw = normalize_batch(writes, prechecked)
        staged = tables.stage(copies, seq)
        max_id = self._high_water_after(staged)
        self._busy_since = self._last_used = time.monotonic()  # the watchdog bounds it
        try:
            if self._group is not None:
                return await self._commit_grouped(staged, seq, max_id, raw)
            await self._ensure_writer(f"commit {seq}", tables.seq)
            if not staged.docs and not staged.tasks:  # nothing can go to a sidecar: one statement
                main_raw = raw

                async def send_main() -> None:
                    await self._send_main(seq, max_id, main_raw)

                await self._send(send_main, seq)
                return self._publish(staged, max_id)
            return await self._commit_function(staged, seq, max_id, raw)
        except Exception as exc:
            if self._stalled:
                self._failed = self._stall_error(seq)
                raise self._failed from exc
            if isinstance(self._failed, LeaseLost):
                self._fence(str(self._failed))
            raise
        finally:
            self._busy_since = None

    async def _commit_grouped(self, staged: Staged, seq: int, max_id: int, raw: bytes) -> int:
        """A grouped session's commit (``group_commit=True``): the main row in a group with
        other sessions' (pico3.storage.pg_group), fenced per row by the epoch; a commit with
        sidecar rows calls the ``pico3_commit`` function on a pool connection, fenced the
        same way in the same statement. Any failure is fail-stop."""
        group = self._group
        assert group is not None
        group.timeout = self._connect_timeout
        try:
            if not staged.docs and not staged.tasks:
                self._pending = Pending(self._session, seq, self._epoch, max_id, raw)
                self._pending.deadline = self._commit_deadline()
                try:
                    await group.commit(self._pending)
                finally:
                    self._pending = None
            else:
                await self._commit_function(staged, seq, max_id, raw)
        except LeaseLost as exc:
            self._failed = exc
            raise
        except StorageFailed as exc:
            self._failed = exc
            raise
        except Exception as exc:
            self._failed = StorageFailed(f"{self!r}: commit {seq} failed: {exc}")
            raise self._failed from exc
        return self._publish(staged, max_id)

    async def _commit_function(self, staged: Staged, seq: int, max_id: int, raw: bytes) -> int:
        """A commit with sidecar rows or a retiring task: the ``pico3_commit`` function."""
        from pico3.storage.jsonl import JsonlStorage  # one routing rule for both backends

        main, sidecars = JsonlStorage._route(staged)  # pyright: ignore[reportPrivateUsage]
        sticky_ids: list[int] = []
        sticky: list[bytes] = []
        task_ids: list[int] = []
        tasks: list[bytes] = []
        if sidecars:
            raw = _ENCODER.encode(main)
            for name, items in sidecars.items():
                match = _STICKY_NAME.fullmatch(name)
                if match is not None:
                    sticky_ids.append(int(match.group(1)))
                    sticky.append(_ENCODER.encode(items))
                else:
                    found = _TASK_NAME.fullmatch(name)
                    assert found is not None
                    task_ids.append(int(found.group(1)))
                    tasks.append(_ENCODER.encode(items))
        params = (
            self._session,
            self._epoch,
            seq,
            max_id,
            self._fsync,
            raw,
            sticky_ids or None,  # NULL: nothing to insert, and nothing to adapt
            sticky or None,
            task_ids or None,
            tasks or None,
            staged.terminalized or None,
        )

        if self._group is not None:
            await self._fenced_function(seq, params)
            return seq  # published by the caller

        async def send_function() -> None:
            cursor = self._cursor
            assert cursor is not None
            await cursor.execute(_COMMIT, params)

        await self._send(send_function, seq)
        return self._publish(staged, max_id)

    async def _fenced_function(self, seq: int, params: tuple[Any, ...]) -> None:
        """A grouped session's commit with sidecar rows: ``pico3_commit`` on a pool connection,
        called only if the session row, locked ``FOR SHARE``, still has this writer's epoch
        (the per-row fence of pico3.storage.pg_group, here for one row)."""
        pool = self._shared_pool
        assert pool is not None
        # no longer than the commit may take: a stalled database reaches the session within
        # its commit timeout, not the pool's wait
        wait = min(self._connect_timeout, max(0.05, self._commit_deadline() - time.monotonic()))
        conn = await pool.getconn(timeout=wait)
        try:
            await conn.set_autocommit(True)
            cursor = await conn.execute(_FENCED_COMMIT, (self._session, self._epoch, *params))
            called = await cursor.fetchall()
            if called:
                return
            row = await (
                await conn.execute(
                    "SELECT epoch FROM pico3_sessions WHERE session = %s", (self._session,)
                )
            ).fetchone()
        finally:
            await pool.putconn(conn)
        if row is None or row[0] != self._epoch:
            raise self._lease_lost(f"commit {seq}")
        raise StorageFailed(f"{self!r}: commit {seq} was not stored (the fence found no row)")

    # a broken connection: reconnect, re-take the fence, never send a commit twice -----------

    async def _send(self, send: Callable[[], Awaitable[None]], seq: int) -> None:
        """Send commit ``seq`` by ``send()``; on failure make the storage fail-stop, unless the
        connection itself was lost: then reconnect (:meth:`_reconnect`, which re-takes the
        session's lock, so the old connection's backend is gone and its transaction finished),
        look whether the commit row is stored with this writer's epoch (then it was published
        and only its acknowledgement lost) and send it once more only if it is not."""
        try:
            await send()
            return
        except Exception as exc:
            if self._stalled:
                raise
            if not self._lost(exc):
                self._failed = await self._failure(exc, seq)
                raise self._failed from exc
            first = exc
        try:
            last, epoch = await self._reconnect(f"commit {seq}")
        except Exception:
            self._failed = await self._failure(first, seq)  # the lease's fate decides
            raise self._failed from first
        if last == seq and epoch == self._epoch:
            return  # published; only the acknowledgement went with the connection
        if last != seq - 1:
            self._failed = self._gap(last, seq - 1)
            raise self._failed from first
        try:
            await send()
        except Exception as exc:
            self._failed = await self._failure(exc, seq)
            raise self._failed from exc

    def _commit_deadline(self) -> float:
        """When the commit in flight stops waiting for a pool connection: its commit timeout,
        plus a margin for the watchdog (50 ms ticks) to mark the storage stalled first (it
        fences, stops the renewals, and the error says so)."""
        since = self._busy_since
        return float("inf") if since is None else since + self._commit_timeout + 0.25

    def _stall_error(self, seq: int) -> StorageFailed:
        return StorageFailed(
            f"session {self._session!r}: commit {seq} got no answer from PostgreSQL at "
            f"{address_of(self._conninfo)} within {self._commit_timeout:g} s (the database, or "
            "the network to it, is stalled); whether it was stored is unknown, so this worker "
            "stopped renewing the session's lease and must stop: another worker takes the "
            "session over once the lease expires, and finds what was stored"
        )

    # self-fencing ------------------------------------------------------------------------------

    def on_fence(self, callback: Callable[[str], object]) -> Callable[[], None]:
        """Call ``callback(reason)`` when this writer must stop its effects outside the
        database (kill its commands' process groups): once the lease might expire before the
        next renewal lands (no renewal succeeded for 3/4 of ``lease_seconds``: a margin before
        the expiry another worker waits for), once a commit stalled past ``commit_timeout``,
        and at once when the storage learns of :class:`LeaseLost`. Called from the storage's
        watchdog thread (or the event loop, for ``LeaseLost``): it must be quick and
        thread-safe (``os.killpg`` is). Returns a function that unregisters it."""
        self._fence_callbacks.append(callback)

        def remove() -> None:
            if callback in self._fence_callbacks:
                self._fence_callbacks.remove(callback)

        return remove

    def _fence(self, reason: str) -> None:
        for callback in list(self._fence_callbacks):
            try:
                callback(reason)
            except Exception:  # one failing listener must not spare the others
                pass

    def _watch(self, now: float) -> bool:
        """The watchdog's check of the commit in flight (its thread): True once it has been
        pending longer than ``commit_timeout``. Then the storage is marked stalled and the
        writer's socket shut down, so the waiting commit wakes up and fails at once."""
        since = self._busy_since
        if self._stalled or since is None or now - since <= self._commit_timeout:
            return self._stalled
        self._stalled = True
        pending = self._pending
        if pending is not None:
            pending.stalled = True  # its group fails at once, not after a recovery (pg_group)
        conn = self._conn if pending is None or pending.conn is None else pending.conn
        try:
            if conn is not None:
                dup = socket.socket(fileno=os.dup(conn.pgconn.socket))
                try:
                    dup.shutdown(socket.SHUT_RDWR)
                finally:
                    dup.close()
        except Exception:
            pass  # no socket (reconnecting): the commit fails at its next step
        return True

    async def _ensure_writer(self, what: str, seq: int) -> None:
        """Before a statement: replace the writer's connection if the server ended it while
        idle (a restart, an idle timeout, a terminated backend), so the next prompt after a
        PostgreSQL restart is not lost. Nothing was sent, so nothing can be sent twice. A
        server still unreachable raises :class:`StorageUnreachable` and leaves the storage
        usable (the next commit tries again); a lost lease is :class:`LeaseLost` (fail-stop)."""
        if not self._writer_broken():
            return
        try:
            last, _ = await self._reconnect(what)
        except StorageUnreachable:
            raise
        except LeaseLost as exc:
            self._failed = exc
            raise
        except Exception as exc:
            self._failed = StorageFailed(f"{self!r}: reconnecting before {what} failed: {exc}")
            raise self._failed from exc
        if last != seq:
            self._failed = self._gap(last, seq)
            raise self._failed

    def _gap(self, stored: int, expected: int) -> StorageFailed:
        return StorageFailed(
            f"{self!r}: after reconnecting, the database's last commit of session "
            f"{self._session!r} is seq {stored}, this worker expected {expected}: the database "
            "lost commits it had acknowledged (a crash with synchronous_commit=off?); reopen "
            "the session to continue from what is stored"
        )

    def _writer_broken(self) -> bool:
        """Whether the writer's idle connection is gone. With no statement in flight the
        server has nothing to say, so anything readable is its goodbye (an error, then EOF):
        one poll of the socket, no round trip (the poll object is the pace's, kept while the
        socket is the same). A rare false alarm (an asynchronous notice) costs one reconnect,
        which is safe."""
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            return True
        pgconn = conn.pgconn
        if pgconn.status != connection_ok():
            return True
        try:
            return bool(self._pace.poller(pgconn.socket).poll(0))
        except (OSError, ValueError):
            return True

    def _lost(self, exc: Exception) -> bool:
        """Whether ``exc`` is the connection's end (not an error of the statement)."""
        from psycopg import pq

        state = getattr(exc, "sqlstate", None) or ""
        if state.startswith(("57P", "08")):  # admin/crash shutdown, connection exceptions
            return True
        conn = self._conn
        return conn is None or conn.closed or conn.broken or conn.pgconn.status != pq.ConnStatus.OK

    async def _reconnect(self, what: str) -> tuple[int, int]:
        """A fresh writer's connection in place of a broken one; return the session's last
        stored seq and that row's epoch.

        Safe because it re-takes the fence the way ``open`` does: the epoch must still be this
        writer's (else :class:`LeaseLost`), then the session's lock is taken on the new
        connection (a backend of the old one that still holds it is ended and waited for), and
        the epoch is checked again under the lock. From then on no transaction of the old
        connection can still commit, so the stored rows are final."""
        pool = self._pool
        old, self._conn = self._conn, None
        self._cursor = None
        self._prepared = False
        if old is not None:
            with contextlib.suppress(Exception):
                await old.close()
            if pool is not None and not self._direct:
                with contextlib.suppress(Exception):
                    await pool.putconn(old)  # the shared pool discards it (and makes a new one)
        if self._released and pool is not None:
            # the session was idle and gave its connection back: take one from the pool again;
            # waiting for one is not the database stalling (commit_timeout starts again after)
            busy, self._busy_since = self._busy_since, None
            try:
                conn = await pool.getconn(timeout=self._connect_timeout)
            except Exception as exc:
                raise self._unreachable(
                    exc,
                    f"take a connection from the pool (size {pool.max_size}, all in use?) for "
                    f"{what} of session {self._session!r}",
                ) from None
            finally:
                if busy is not None:
                    self._busy_since = time.monotonic()
            self._released = False
            self._direct = False
            self._conn = conn
            self._writer_since = time.monotonic()
            await conn.set_autocommit(True)
        else:
            # a connection of its own, not the pool's: the pool retries a lost server with a
            # growing backoff, this connects at once (and is closed, not returned, at close)
            self._direct = True
            try:
                conn = await self._connect()
            except Exception as exc:
                raise self._unreachable(
                    exc, f"reconnect for {what} of session {self._session!r}"
                ) from None
            self._conn = conn
        if not self._fsync:
            await conn.execute("SET synchronous_commit = off")
        if await self._stored_epoch(conn) != self._epoch:
            raise self._lease_lost(what)
        self._backend = conn.info.backend_pid
        await self._lock_session(conn)
        if await self._stored_epoch(conn) != self._epoch:
            raise self._lease_lost(what)
        row = await (
            await conn.execute(
                "SELECT seq, epoch FROM pico3_commits WHERE session = %s ORDER BY seq DESC LIMIT 1",
                (self._session,),
            )
        ).fetchone()
        await conn.execute(_PREPARE_MAIN)
        self._prepared = True
        self._cursor = conn.cursor()
        if row is None:
            return 0, 0
        return int(row[0]), int(row[1] or 0)

    # an idle session's writer connection back to the shared pool ---------------------------

    @property
    def idle_seconds(self) -> float:
        """Seconds since the last commit (or the open); 0 when not open."""
        return time.monotonic() - self._last_used if self._open else 0.0

    @property
    def writer_seconds(self) -> float:
        """Seconds the writer has held its connection (0 when it holds none)."""
        return time.monotonic() - self._writer_since if self.holds_writer else 0.0

    @property
    def holds_writer(self) -> bool:
        """Whether the writer holds a database connection now (and the session's lock on it)."""
        return self._open and self._conn is not None

    async def release_writer(self, *, wait: bool = False) -> bool:
        """Give the writer's connection back to the shared pool (``pool=``) while the session is
        idle: the session's lock is released with it, the lease is kept (renewed as before).
        The next commit takes a connection from the pool again and re-takes the fence exactly
        like a reconnect (the epoch must still be this writer's, the lock is taken, the epoch
        checked again under it, and the last stored seq must be the one this writer knows),
        so a writer whose lease was taken meanwhile is refused with ``LeaseLost`` having sent
        nothing (docs/design/storage.md, "Fencing on PostgreSQL"). Returns whether it released
        (not: no shared pool, a commit in flight and not ``wait``, already released, or the
        storage failed). ``wait=True`` waits for the commit in flight, if any, and releases
        after it (a pool's connections going round sessions that commit without a pause)."""
        lock = self._lock
        if (
            not self._open
            or self._shared_pool is None
            or self._failed is not None
            or lock is None
            or (lock.locked() and not wait)
            or self._conn is None
        ):
            return False
        async with lock:
            with anyio.CancelScope(shield=True):
                if not self._open or self._failed is not None or self._conn is None:
                    return False
                conn, self._conn = self._conn, None
                self._cursor = None
                prepared, self._prepared = self._prepared, False
                direct, self._direct = self._direct, False
                self._released = True
                try:
                    await conn.execute(
                        "SELECT pg_advisory_unlock(%s, %s)", (_LOCK_CLASS, self._lock_key)
                    )
                    if prepared and not direct:
                        await conn.execute("DEALLOCATE pico3_commit_main")
                    if not self._fsync and not direct:
                        await conn.execute("RESET synchronous_commit")
                except Exception:
                    await conn.close()  # its backend ends, and the lock with it
                if direct:
                    with contextlib.suppress(Exception):
                        await conn.close()
                else:
                    await self._shared_pool.putconn(conn)
        return True

    async def _stored_epoch(self, conn: AsyncConnection[Any]) -> int | None:
        row = await (
            await conn.execute(
                "SELECT epoch FROM pico3_sessions WHERE session = %s", (self._session,)
            )
        ).fetchone()
        return None if row is None else int(row[0])

    async def _send_main(self, seq: int, max_id: int, raw: bytes) -> None:
        """The common commit, straight through libpq (no query conversion, no adaptation, no
        result object: about 30% less client CPU than ``cursor.execute``, measured)."""
        conn = self._conn
        assert conn is not None
        params = (self._session_bytes, _INT8(seq), self._epoch_bytes, _INT8(max_id), raw)
        try:
            # the writer's connection is its own: nothing else waits on it, so its answer is
            # awaited blocking for up to a millisecond while the last one came that fast (after
            # the loop's turn the wait on it would give, taken once the statement is sent)
            await run_prepared(
                conn,
                _COMMIT_MAIN,
                params,
                _MAIN_FORMATS,
                ok=command_ok(),
                pace=self._pace,
            )
        except StatementFailed as exc:
            error = StorageError(str(exc))
            error.sqlstate = exc.sqlstate  # type: ignore[attr-defined]
            raise error from None

    async def _failure(self, exc: Exception, seq: int) -> StorageFailed:
        """What a failed commit ``seq`` means: :class:`LeaseLost` if another worker took the
        lease and the commit is provably not stored, else :class:`StorageFailed`.

        Asked on a connection of its own (the writer's may be gone): if the epoch moved on, the
        writer's backend is ended (if it still holds the session's lock) and waited for, so no
        transaction of it can still commit; then the commit row with this writer's epoch either
        is there (published, the acknowledgement lost) or never will be."""
        import psycopg

        failed = StorageFailed(f"{self!r}: commit {seq} failed: {exc}")
        key = (_LOCK_CLASS, self._lock_key)
        try:
            async with await psycopg.AsyncConnection.connect(
                self._conninfo,
                autocommit=True,
                connect_timeout=max(1, round(self._connect_timeout)),
            ) as probe:
                row = await (
                    await probe.execute(
                        "SELECT epoch FROM pico3_sessions WHERE session = %s", (self._session,)
                    )
                ).fetchone()
                if row is not None and row[0] == self._epoch:
                    return failed  # the lease is still ours: an ordinary failure
                ended = await (  # waits until it exited (its lock went with it)
                    await probe.execute(
                        f"SELECT pg_terminate_backend(pid, %s) FROM ({_HOLDS}) AS h WHERE pid = %s",
                        (self._patience_ms, *key, self._backend),
                    )
                ).fetchone()
                if ended is not None and not ended[0]:
                    return failed  # still running after the wait: the outcome is unknown
                stored = await (
                    await probe.execute(
                        "SELECT epoch FROM pico3_commits WHERE session = %s AND seq = %s",
                        (self._session, seq),
                    )
                ).fetchone()
        except Exception:
            return failed  # the outcome is unknown: fail-stop, reopening finds what is stored
        if stored is not None and stored[0] == self._epoch:
            return StorageFailed(
                f"{self!r}: commit {seq} was stored but its acknowledgement was lost, and "
                "another worker took the lease since; this worker must stop"
            )
        return self._lease_lost(f"commit {seq}")

    def _unreachable(self, exc: BaseException, what: str) -> StorageUnreachable:
        return unreachable(self._conninfo, self._connect_timeout, what, exc)

    def _lease_lost(self, what: str) -> LeaseLost:
        return LeaseLost(
            f"session {self._session!r}: {what} refused, another worker took the lease "
            f"(this worker held epoch {self._epoch}); nothing was written, this worker "
            "must stop"
        )

    def _classify(self, exc: Exception, what: str) -> StorageFailed:
        if getattr(exc, "sqlstate", None) == _LEASE_LOST:
            return self._lease_lost(what)
        return StorageFailed(f"{self!r}: {what} failed: {exc}")

    def _publish(self, staged: Staged, max_id: int) -> int:
        self._tables.apply(staged)
        self._tables.high_water = max_id
        for ref, ops in staged.docs:
            if ref.doc == "sticky" and is_base(ops) and isinstance(ref.conversation_id, int):
                self._sticky_base[ref.conversation_id] = staged.seq
        return staged.seq

    async def truncate(self, ref: DocRef, ctx: Context) -> None:
        """Delete a sticky document's rows before its last base; other documents are left."""
        self._check_writable()
        if ref.doc != "sticky" or not isinstance(ref.conversation_id, int):
            return
        cid = ref.conversation_id
        lock = self._lock
        assert lock is not None
        await lock.acquire()
        try:
            with anyio.CancelScope(shield=True):
                self._check_writable()
                base = self._sticky_base.get(cid)
                if base is not None:
                    try:
                        await self._truncate_rows(cid, base)
                    except Exception as exc:
                        self._failed = self._classify(exc, "sticky truncation")
                        if isinstance(self._failed, LeaseLost):
                            self._fence(str(self._failed))
                        raise self._failed from exc
                self._tables.truncate_sticky(cid)
        finally:
            lock.release()

    async def _truncate_rows(self, cid: int, base: int) -> None:
        """``pico3_truncate_sticky`` (it checks the epoch itself, under a row lock): on the
        writer's connection, or a grouped session's on a pool connection."""
        query = "SELECT pico3_truncate_sticky(%s, %s, %s, %s)"
        params = (self._session, self._epoch, cid, base)
        pool = self._shared_pool
        if self._group is not None and pool is not None and self._conn is None:
            conn = await pool.getconn(timeout=self._connect_timeout)
            try:
                await conn.set_autocommit(True)
                await conn.execute(query, params)
            finally:
                await pool.putconn(conn)
            return
        await self._ensure_writer("sticky truncation", self.seq)
        conn = self._conn
        assert conn is not None
        await conn.execute(query, params)

    # session blobs (pico3.storage.pg_blobs) -----------------------------------------------

    def _blob_store(self) -> BlobStore:
        self._check_open()
        if self._blobs is None:
            self._blobs = BlobStore(
                self._conninfo,
                self._session,
                fsync=self._fsync,
                connect_timeout=self._connect_timeout,
                pool=self._shared_pool,
            )
        return self._blobs

    async def put_blobs(self, blobs: Mapping[str, bytes], ctx: Context) -> None:
        """Store ``blobs`` (name -> bytes, each at most :data:`~pico3.storage.pg_blobs.BLOB_LIMIT`
        bytes) atomically, replacing blobs of the same names, while this opening holds the
        lease: a worker whose lease was taken stores nothing and gets :class:`LeaseLost` (the
        storage is then fail-stop). Durable under the storage's ``fsync`` like a commit."""
        self._check_writable()
        store = self._blob_store()
        with anyio.CancelScope(shield=True):  # never abandoned half-way, like a commit
            try:
                await store.put(blobs, self._epoch)
            except LeaseLost as exc:
                self._failed = exc
                self._fence(str(exc))
                raise
            except ValueError:
                raise
            except Exception as exc:
                raise StorageError(f"{self!r}: storing blobs failed: {exc}") from exc

    async def get_blob(self, name: str, ctx: Context) -> bytes | None:
        """The session blob ``name`` (``None``: never stored)."""
        return await self._blob_store().get(name)

    async def blobs(self, prefix: str, ctx: Context, *, data: bool = True) -> dict[str, bytes]:
        """The session blobs whose names start with ``prefix``, in name order (byte order);
        ``data=False`` reads the names only (every value empty)."""
        return await self._blob_store().under(prefix, data=data)


def _finish(conn: AsyncConnection[Any]) -> None:
    """Close ``conn`` without the event loop (libpq's ``PQfinish``): for a storage collected
    while open; the lease then expires."""
    if not conn.closed:
        conn.pgconn.finish()


class _Held(Exception):
    def __init__(self, message: str, expires_in: float) -> None:
        super().__init__(message)
        self.expires_in = expires_in
