"""Session blobs on PostgreSQL: named byte strings a session keeps beside its commits, fenced
by the session's lease (table ``pico3_blobs``, schema migration 2 of
:mod:`pico3.storage.postgres`).

An application keeps here what is not part of the transcript but must follow the session to
whichever worker serves it next, on whichever machine: the coding agent's file history (the
pre-images ``/rewind`` restores), its background jobs' process records, its launch settings.
They are not replayed at open (a pre-image is not loaded into memory until someone reads it),
and they are not part of a commit's batch: a blob is stored by :meth:`PostgresStorage.put_blobs
<pico3.storage.postgres.PostgresStorage.put_blobs>` in a transaction of its own, on a
connection of its own (a large blob never holds up a commit), which checks the lease's epoch
(``SELECT … FOR SHARE`` on the session row, just before its COMMIT, so a takeover waits for it
or it sees the new epoch): a writer whose lease was taken stores nothing and gets
:class:`~pico3.storage.base.LeaseLost`, exactly like its next commit would. A connection the
server ended (a PostgreSQL restart) is replaced and the operation run once more: a read
trivially, a ``put`` because it is idempotent (the same rows, under the same epoch check).

Names are 1-400 printable ASCII characters (an application's own ``/``-separated path, say);
one blob holds at most :data:`BLOB_LIMIT` bytes (a larger one is refused with ``ValueError``
before anything is sent: the caller decides what to do without it). ``put_blobs`` stores every
blob of its mapping atomically (one transaction), replacing a blob of the same name.

:func:`read_blob` reads one blob without opening the session (no lease taken): for a process
that must know a blob before it opens the session (the coding agent's worker reads its launch
settings before it starts).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from pico3.storage.base import LeaseLost, StorageUnreachable

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = [
    "BLOB_LIMIT",
    "LIVENESS",
    "BlobStore",
    "address_of",
    "check_blobs",
    "read_blob",
    "unreachable",
    "with_liveness",
]

BLOB_LIMIT = 16 * 1024 * 1024
"""The most bytes one session blob holds."""

_T = TypeVar("_T")
_NAME = re.compile(r"^[\x21-\x7e]{1,400}$")
_FENCE = "SELECT epoch FROM pico3_sessions WHERE session = %s FOR SHARE"


def check_blobs(blobs: Mapping[str, bytes]) -> None:
    """Refuse (``ValueError`` naming it) a bad name or a blob over :data:`BLOB_LIMIT`."""
    for name, data in blobs.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"a blob name is 1-400 printable ASCII characters, not {name!r}")
        if not isinstance(data, bytes | bytearray | memoryview):
            raise ValueError(f"blob {name!r} must be bytes, not {type(data).__name__}")
        if len(data) > BLOB_LIMIT:
            raise ValueError(
                f"blob {name!r} has {len(data)} bytes, over the limit of {BLOB_LIMIT} "
                "(pico3.storage.pg_blobs.BLOB_LIMIT); it was not stored"
            )


LIVENESS: dict[str, str] = {
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "15000",
}
"""The libpq TCP settings every pico3 connection carries unless its conninfo sets them: an idle
connection whose peer is gone (a network cut, a dead host) is found dead within 5 + 3 × 2 = 11 s
of keepalive probes, and one with data unacknowledged for 15 s is closed by the kernel
(``TCP_USER_TIMEOUT``, Linux), instead of the ~15 minutes of TCP retransmissions. Unix-socket
connections ignore them."""


def with_liveness(conninfo: str) -> str:
    """``conninfo`` with :data:`LIVENESS` added for every key it does not set itself."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        given = conninfo_to_dict(conninfo)
    except Exception:
        return conninfo  # a malformed string: let the connection attempt say what is wrong
    missing = {key: value for key, value in LIVENESS.items() if key not in given}
    return make_conninfo(conninfo, **missing) if missing else conninfo


def address_of(conninfo: str) -> str:
    """Host, port and database of ``conninfo``, never its password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(conninfo)
    except Exception:
        return "the given address"
    host = parts.get("host") or "the default host"
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"{host}{port}/{parts.get('dbname') or parts.get('user') or ''}"


def unreachable(conninfo: str, timeout: float, what: str, exc: BaseException) -> StorageUnreachable:
    """The one-line :class:`StorageUnreachable` for a failed connection to ``conninfo``: its
    host, port and database (never the password), the cause's first line, and the fix."""
    text = str(exc).strip()
    cause = text.splitlines()[0] if text else type(exc).__name__
    return StorageUnreachable(
        f"cannot reach PostgreSQL at {address_of(conninfo)} within {timeout:g} s to {what} "
        f"({cause}); check the URL and that the server is running"
    )


class BlobStore:
    """The blobs of one session, over a connection of their own (opened on first use), or, with
    ``pool``, over a connection of that shared pool for each operation (a process of many
    sessions then holds no connection per session for blobs)."""

    def __init__(
        self,
        conninfo: str,
        session: str,
        *,
        fsync: bool,
        connect_timeout: float,
        pool: AsyncConnectionPool | None = None,
    ) -> None:
        self._pool = pool
        self._conninfo = conninfo
        self._session = session
        self._fsync = fsync
        self._connect_timeout = connect_timeout
        self._conn: AsyncConnection[Any] | None = None
        self._lock = anyio.Lock()

    async def _connection(self) -> AsyncConnection[Any]:
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            import psycopg

            conn = await psycopg.AsyncConnection.connect(
                self._conninfo, autocommit=True, connect_timeout=max(1, int(self._connect_timeout))
            )
            if not self._fsync:
                await conn.execute("SET synchronous_commit = off")
            self._conn = conn
        return conn

    async def _run(self, op: Callable[[AsyncConnection[Any]], Awaitable[_T]]) -> _T:
        """``op(conn)`` under the lock; once more on a fresh connection if the connection (not
        the statement) failed."""
        async with self._lock:
            if self._pool is not None:  # the pool discards a broken connection and retries
                async with self._pool.connection(timeout=self._connect_timeout) as conn:
                    await conn.set_autocommit(True)
                    if not self._fsync:
                        await conn.execute("SET synchronous_commit = off")
                    try:
                        return await op(conn)
                    finally:
                        if not self._fsync and not (conn.closed or conn.broken):
                            await conn.execute("RESET synchronous_commit")
            conn = await self._connection()
            try:
                return await op(conn)
            except LeaseLost:
                raise
            except Exception:
                if not (conn.closed or conn.broken):
                    raise
                self._conn = None
            return await op(await self._connection())

    async def put(self, blobs: Mapping[str, bytes], epoch: int) -> None:
        """Store ``blobs`` in one transaction if the session's epoch is still ``epoch``."""
        check_blobs(blobs)
        if not blobs:
            return
        rows = [(self._session, name, bytes(data)) for name, data in blobs.items()]

        async def put(conn: AsyncConnection[Any]) -> None:
            async with conn.transaction(), conn.cursor() as cursor:
                await cursor.executemany(
                    "INSERT INTO pico3_blobs (session, name, data) VALUES (%s, %s, %s) "
                    "ON CONFLICT (session, name) DO UPDATE SET data = excluded.data",
                    rows,
                )
                await cursor.execute(_FENCE, (self._session,))
                row = await cursor.fetchone()
                if row is None or int(row[0]) != epoch:
                    found = None if row is None else row[0]
                    raise LeaseLost(
                        f"session {self._session!r}: storing blobs refused, another worker "
                        f"took the lease (epoch is now {found}, this worker held {epoch}); "
                        "nothing was stored, this worker must stop"
                    )

        await self._run(put)

    async def get(self, name: str) -> bytes | None:
        """The blob ``name``, or ``None``."""

        async def get(conn: AsyncConnection[Any]) -> Any:
            cursor = await conn.execute(
                "SELECT data FROM pico3_blobs WHERE session = %s AND name = %s",
                (self._session, name),
            )
            return await cursor.fetchone()

        row = await self._run(get)
        return None if row is None else bytes(row[0])

    async def under(self, prefix: str, *, data: bool) -> dict[str, bytes]:
        """Every blob whose name starts with ``prefix``, by name in name order (with
        ``data=False`` the values are empty: names only)."""
        column = "data" if data else "''::bytea"

        async def under(conn: AsyncConnection[Any]) -> list[Any]:
            cursor = await conn.execute(
                f"SELECT name, {column} FROM pico3_blobs "
                'WHERE session = %s AND starts_with(name, %s) ORDER BY name COLLATE "C"',
                (self._session, prefix),
            )
            return await cursor.fetchall()

        rows = await self._run(under)
        return {str(name): bytes(value) for name, value in rows}

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()


async def read_blob(conninfo: str, session: str, name: str, *, connect_timeout: float = 10.0
                    ) -> bytes | None:  # fmt: skip
    """Blob ``name`` of ``session``, read without opening the session (no lease); ``None``
    when it, or the blob table (a database no pico3 of schema 2 opened yet), is missing."""
    import psycopg

    try:
        connection = await psycopg.AsyncConnection.connect(
            with_liveness(conninfo), autocommit=True, connect_timeout=max(1, int(connect_timeout))
        )
    except psycopg.OperationalError as exc:
        raise unreachable(conninfo, connect_timeout, f"read blob {name!r}", exc) from None
    async with connection as conn:
        try:
            cursor = await conn.execute(
                "SELECT data FROM pico3_blobs WHERE session = %s AND name = %s", (session, name)
            )
        except psycopg.errors.UndefinedTable:
            return None
        row = await cursor.fetchone()
    return None if row is None else bytes(row[0])
