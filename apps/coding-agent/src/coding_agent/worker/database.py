"""The PostgreSQL connections a host process of many sessions shares (issue 42).

A worker process per session holds three connections per session (the writer, the lease
renewer, the blobs). A host process (:mod:`coding_agent.worker.host`) instead gives all its
sessions one :class:`SharedDatabase`: one :class:`psycopg_pool.AsyncConnectionPool` of
``--db-pool-size`` connections for their commits and blobs, and one
:class:`pico3.LeaseRenewer` (one more connection) renewing every lease in one statement. A
session's writer connection is pinned to it while it commits and given back to the pool once
it has been idle for ``release_after`` seconds (:meth:`pico3.PostgresStorage.release_writer`:
the session lock goes with it, the lease stays; the next commit re-takes the fence like a
reconnect, so a stale writer is still refused). The process's connections to PostgreSQL are
then at most ``pool_size + 1``, whatever the number of sessions.
"""

from __future__ import annotations

import weakref
from typing import Any

import anyio

from pico3 import LeaseRenewer, PostgresStorage

__all__ = ["DEFAULT_POOL_SIZE", "RELEASE_AFTER", "SharedDatabase"]

DEFAULT_POOL_SIZE = 10
"""``--db-pool-size``' default: the connections a host's sessions commit on (plus the renewer's)."""

RELEASE_AFTER = 1.0
"""Seconds a session goes without a commit before its writer connection goes back to the pool."""

QUANTUM = 0.2
"""While sessions wait for a pool connection: seconds a session keeps its writer connection
before it goes back, after its commit in flight (which is never interrupted)."""

POOL_WAIT = 60.0
"""Seconds a session waits for a free pool connection (to open, or to commit after idling)."""


class SharedDatabase:
    """One pool and one lease renewer for the sessions of a process (see the module doc).
    Use as an async context manager; it runs the sweeper that releases idle writers."""

    def __init__(
        self,
        conninfo: str,
        *,
        pool_size: int = DEFAULT_POOL_SIZE,
        release_after: float = RELEASE_AFTER,
    ) -> None:
        from psycopg_pool import AsyncConnectionPool

        if pool_size < 1:
            raise ValueError(f"the pool needs at least one connection, not {pool_size}")
        self.conninfo = conninfo
        self.pool_size = pool_size
        self.release_after = release_after
        self.pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            conninfo, min_size=1, max_size=pool_size, open=False, timeout=POOL_WAIT
        )
        self.renewer = LeaseRenewer(conninfo)
        self._storages: weakref.WeakSet[PostgresStorage] = weakref.WeakSet()
        self._soon: set[str] = set()  # sessions whose writer goes back now (they are ready)
        self._wake = anyio.Event()
        self._group: Any = None

    def storage(self, session: str, *, fsync: bool, lease: float | None) -> PostgresStorage:
        """A session's storage on the shared pool and renewer (it waits up to 5 s, or 2.5
        leases, for the lease of a worker that died to expire, like a worker's own)."""
        options: dict[str, Any] = {"wait": 5.0}
        if lease is not None:
            options = {"lease_seconds": lease, "wait": max(5.0, 2.5 * lease)}
        storage = PostgresStorage(
            session=session,
            pool=self.pool,
            renewer=self.renewer,
            fsync=fsync,
            connect_timeout=POOL_WAIT,
            group_commit=True,  # commits of sessions that arrive together share a transaction
            **options,
        )
        self._storages.add(storage)
        return storage

    def opened(self, session: str) -> None:
        """Session ``session`` is open and serves: its writer goes back to the pool at once
        (a start-up storm's opens then take turns on the pool's connections), without waiting
        for ``release_after``."""
        self._soon.add(session)
        self._wake.set()

    def waiting(self) -> int:
        """Sessions waiting for a pool connection now."""
        return int(self.pool.get_stats().get("requests_waiting", 0))

    async def release_idle(self) -> int:
        """Give back the writer connections of sessions idle for ``release_after`` seconds
        (or just opened); while other sessions wait for a connection, also those of sessions
        that held theirs for :data:`QUANTUM` seconds, after their commit in flight (the pool's
        connections then go round the active sessions instead of staying with the first
        ones). Returns how many."""
        released = 0
        soon, self._soon = self._soon, set()
        for storage in list(self._storages):
            idle = storage.idle_seconds >= self.release_after or storage.session in soon
            if storage.holds_writer and idle:
                released += await storage.release_writer()
        waiting = self.waiting()
        if waiting:
            held = [s for s in self._storages if s.writer_seconds >= QUANTUM]
            held.sort(key=lambda s: -s.writer_seconds)  # the longest holders first
            for storage in held[:waiting]:
                released += await storage.release_writer(wait=True)
        return released

    async def _sweep(self) -> None:
        while True:
            tick = QUANTUM / 2 if self.waiting() else max(0.1, self.release_after / 4)
            with anyio.move_on_after(tick):
                await self._wake.wait()
            self._wake = anyio.Event()
            await self.release_idle()

    async def __aenter__(self) -> SharedDatabase:
        await self.pool.open()
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._sweep)
        return self

    async def __aexit__(self, *exc: object) -> None:
        group, self._group = self._group, None
        if group is not None:
            group.cancel_scope.cancel()
            await group.__aexit__(None, None, None)
        with anyio.CancelScope(shield=True):
            await self.pool.close()
        await anyio.to_thread.run_sync(self.renewer.close)
