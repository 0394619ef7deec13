"""The servers' shared session directory in PostgreSQL: which sessions exist, and their
``session.json``, so any server of a database can serve any of its sessions (failover).

With ``--storage postgresql://…`` a session's commits are in the database, but its folder
(``session.json``, the worker's lock, socket and log) is on one server's disk. The server that
creates a session stores its metadata here too (table ``coding_agent_sessions``, created when
missing); a server asked for a session it has no folder of looks it up here and makes the folder
(:func:`coding_agent.session_files.folders.adopt_session`) before it starts the worker, which then replays
the commits from the database. The row is written once, at creation: later changes of the
launch settings (``/model``, ``/thinking``) are stored by the session's worker beside its
commits (fenced by its lease, :mod:`coding_agent.worker.shared_state`), and a worker of any
server reads them from there when it starts.

The table is made by the first use of a fresh database, under a transaction-scoped advisory lock
(:data:`SCHEMA_LOCK`, bounded by a lock timeout): ``CREATE TABLE IF NOT EXISTS`` alone is not
safe against itself (two at once both insert the table's row type and one fails with a
``pg_type`` duplicate key), and hundreds of sessions start at once on a new team's database.

A server's directory holds one connection (``fallback_application_name`` ``coding-agent
serve``), opened at its first use and reused by every session start after it, one statement at
a time: a storm of hundreds of starts costs the database one connection, not one each. A
connection that fails (a PostgreSQL restart, a network cut) is dropped and the statement runs
once more on a new one (both are idempotent); :meth:`SessionDirectory.aclose` closes it when the
server stops.

Its statements are bounded as a session's commits are (:data:`STATEMENT_TIMEOUT`, pico3's
``COMMIT_TIMEOUT``): the connection carries ``statement_timeout`` (the server cancels a
statement that waits longer, on a lock say; the connection stays), pico3's TCP keepalive and
``tcp_user_timeout`` (a cut network is found within seconds, not after the ~15 minutes of TCP
retransmissions), and a statement that gets no answer at all (a frozen backend) is abandoned
on the client's side a few seconds past the bound: its connection is dropped and the start
that needed it fails with one line (:class:`DirectoryStalled`), instead of every session start
of the server queueing behind it for good.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import msgspec
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from coding_agent.session_files.folders import SessionMetadata

__all__ = ["DirectoryStalled", "SessionDirectory"]

_T = TypeVar("_T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS coding_agent_sessions (
    id text PRIMARY KEY,
    metadata bytea NOT NULL,
    created timestamptz NOT NULL DEFAULT now()
)
"""


SCHEMA_LOCK = 0x636F6469_6E676167
"""The advisory lock key the table's creation runs under (``codingag`` in ASCII)."""

LOCK_TIMEOUT = 10.0
"""Seconds the table's creation waits for its lock before it fails (nothing half made)."""

STATEMENT_TIMEOUT = 15.0
"""Seconds a statement of the directory may take (the bound of a session's commit, pico3's
``COMMIT_TIMEOUT``): PostgreSQL's ``statement_timeout`` on its connection."""

ANSWER_MARGIN = 5.0
"""Seconds past the statement's bound the client waits for any answer before it drops the
connection (the server's own cancellation arrives first whenever the backend is alive)."""

LIVENESS = {
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "15000",
}
"""The TCP settings of pico3's connections (``pico3.storage.pg_blobs.LIVENESS``), added for
every key the URL does not set itself."""


class DirectoryStalled(psycopg.OperationalError):
    """A statement of the directory got no answer within its bound (the connection is
    dropped; the next statement opens a new one)."""


def _conninfo(url: str) -> str:
    """``url`` with :data:`LIVENESS` for the keys it does not set."""
    try:
        given = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return url  # malformed: the connection attempt says what is wrong
    missing = {key: value for key, value in LIVENESS.items() if key not in given}
    return make_conninfo(url, **missing) if missing else url


def _milliseconds(seconds: float) -> sql.Literal:
    return sql.Literal(f"{max(1, round(seconds * 1000))}ms")


async def _ensure_schema(conn: psycopg.AsyncConnection, lock_timeout: float) -> None:
    cursor = await conn.execute("SELECT to_regclass('coding_agent_sessions') IS NOT NULL")
    row = await cursor.fetchone()
    if row is not None and row[0]:
        return
    async with conn.transaction():
        # the lock wait is bounded by lock_timeout, not by the (shorter) statement bound
        await conn.execute(
            sql.SQL("SET LOCAL statement_timeout = {}").format(_milliseconds(lock_timeout + 5))
        )
        await conn.execute(
            sql.SQL("SET LOCAL lock_timeout = {}").format(_milliseconds(lock_timeout))
        )
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        await conn.execute(_SCHEMA)


def _address(url: str) -> str:
    """Host, port and database of ``url``, never its password."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the given address"
    host = parts.get("host") or "the default host"
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"{host}{port}/{parts.get('dbname') or parts.get('user') or ''}"


class SessionDirectory:
    """``coding_agent_sessions`` on the database at ``url``, through one connection of its own
    (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        lock_timeout: float = LOCK_TIMEOUT,
        statement_timeout: float = STATEMENT_TIMEOUT,
    ) -> None:
        self._url = url
        self._lock_timeout = lock_timeout
        self._statement_timeout = statement_timeout
        self._ready = False
        self._conn: psycopg.AsyncConnection | None = None
        self._lock = anyio.Lock()

    async def _connection(self) -> psycopg.AsyncConnection:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        conn = await psycopg.AsyncConnection.connect(
            _conninfo(self._url), autocommit=True, connect_timeout=10,
            fallback_application_name="coding-agent serve",
        )  # fmt: skip
        try:
            with anyio.fail_after(self._lock_timeout + self._statement_timeout + ANSWER_MARGIN):
                timeout = _milliseconds(self._statement_timeout)
                await conn.execute(sql.SQL("SET statement_timeout = {}").format(timeout))
                if not self._ready:
                    await _ensure_schema(conn, self._lock_timeout)
        except BaseException as error:
            with anyio.CancelScope(shield=True):
                await conn.close()
            if isinstance(error, TimeoutError):
                raise self._stalled() from None
            raise
        self._ready = True
        self._conn = conn
        return conn

    async def _run(self, statement: Callable[[psycopg.AsyncConnection], Awaitable[_T]]) -> _T:
        """``statement`` on the directory's connection, one at a time; once more on a new
        connection when the one it had failed (it was closed under it, the server restarted)."""
        async with self._lock:
            conn = await self._connection()
            try:
                return await self._bounded(statement, conn)
            except DirectoryStalled:
                raise
            except psycopg.OperationalError:
                if not conn.closed and not conn.broken:
                    raise  # the statement failed (its timeout, say); the connection is fine
                await self._drop()
            return await self._bounded(statement, await self._connection())

    async def _bounded(
        self,
        statement: Callable[[psycopg.AsyncConnection], Awaitable[_T]],
        conn: psycopg.AsyncConnection,
    ) -> _T:
        """``statement`` with an answer within the statement's bound and a margin (the server
        cancels it at the bound); without one, the connection is dropped."""
        with anyio.move_on_after(self._statement_timeout + ANSWER_MARGIN):
            return await statement(conn)
        await self._drop()
        raise self._stalled()

    def _stalled(self) -> DirectoryStalled:
        return DirectoryStalled(
            f"no answer from PostgreSQL at {_address(self._url)} within "
            f"{self._statement_timeout:g} s (the session directory's connection was dropped; "
            "check the database server)"
        )

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with anyio.CancelScope(shield=True):
                await conn.close()

    async def aclose(self) -> None:
        """Close the directory's connection (a later use opens a new one)."""
        async with self._lock:
            await self._drop()

    async def put(self, metadata: SessionMetadata) -> None:
        """Record a new session (its creation metadata)."""

        async def insert(conn: psycopg.AsyncConnection) -> None:
            await conn.execute(
                "INSERT INTO coding_agent_sessions (id, metadata) VALUES (%s, %s) "
                "ON CONFLICT (id) DO NOTHING",
                (metadata.id, msgspec.json.encode(metadata)),
            )

        await self._run(insert)

    async def get(self, session_id: str) -> SessionMetadata | None:
        """The metadata of ``session_id``, or ``None`` when no server of the database made it."""

        async def select(conn: psycopg.AsyncConnection) -> tuple[bytes] | None:
            cursor = await conn.execute(
                "SELECT metadata FROM coding_agent_sessions WHERE id = %s", (session_id,)
            )
            return await cursor.fetchone()

        row = await self._run(select)
        if row is None:
            return None
        return msgspec.json.decode(bytes(row[0]), type=SessionMetadata)
