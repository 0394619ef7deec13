"""Lease renewal for :class:`~pico3.storage.postgres.PostgresStorage`: one thread, one connection
and one statement for every lease of a process.

A :class:`LeaseRenewer` renews the leases registered with it from a daemon thread of its own, on
a connection of its own, independent of the event loop: every quarter of the shortest lease it
sends *one* ``UPDATE … FROM unnest(…)`` that extends every lease whose epoch is still its
holder's and returns the sessions it extended; a session missing from the answer has lost its
lease (another worker took it), and its storage fails its next commit with ``LeaseLost``.

A storage opened without a renewer gets one of its own (one thread and one connection for that
lease, closed at ``close``). A process that hosts many sessions shares one: its connections to
PostgreSQL for renewal are then one, whatever the number of sessions.

:class:`_Watchdog`, one thread per process, ticks every open lease's :meth:`Lease.check`
(every 50 ms): it fences a storage (its ``on_fence`` callbacks) when no renewal succeeded for
three quarters of the lease, when a commit stalled past ``commit_timeout`` (then that lease's
renewals stop for good, so another worker can take over at its expiry), and on a lost lease.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

__all__ = ["LeaseRenewer"]

_RENEW = (
    "UPDATE pico3_sessions AS s SET lease_until = clock_timestamp() + "
    "l.ms * interval '1 millisecond' "
    "FROM unnest(%s::text[], %s::bigint[], %s::bigint[]) AS l(session, epoch, ms) "
    "WHERE s.session = l.session AND s.epoch = l.epoch AND s.holder IS NOT NULL "
    "RETURNING s.session"
)
_RELEASE = (
    "UPDATE pico3_sessions AS s SET holder = NULL, lease_until = NULL, "
    "seq = greatest(s.seq, l.seq), max_id = greatest(s.max_id, l.max_id) "
    "FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::bigint[]) "
    "AS l(session, epoch, seq, max_id) "
    "WHERE s.session = l.session AND s.epoch = l.epoch"
)


class Lease:
    """One storage's lease as the renewer and the watchdog see it (made by the storage at open)."""

    def __init__(
        self,
        session: str,
        epoch: int,
        lease_ms: int,
        taken: float,
        *,
        watch_commit: Callable[[float], bool],
        fence: Callable[[str], None],
        commit_timeout: float,
    ) -> None:
        self._watch_commit = watch_commit  # the storage's: its commit in flight stalled?
        self._fence = fence  # the storage's on_fence callbacks
        self._commit_timeout = commit_timeout
        self.session = session
        self.epoch = epoch
        self.lease_ms = lease_ms
        self.lost = False
        self.last_ok = taken  # monotonic time just before the last successful renewal began
        self.fenced = False  # the fence callbacks fired since the last successful renewal
        self.stopped = threading.Event()

    def renewed(self, started: float) -> None:
        if not self.stopped.is_set():
            self.last_ok = started
            self.fenced = False

    def check(self, now: float) -> None:
        """The watchdog's tick (its thread)."""
        if self.stopped.is_set():
            return
        if self._watch_commit(now):
            self.stopped.set()  # the lease must run out: another worker takes over
            self._fence(
                f"session {self.session!r}: a commit got no answer from PostgreSQL within "
                f"{self._commit_timeout:g} s"
            )
            return
        if self.lost:
            self._fence(f"session {self.session!r}: another worker took the lease")
            self.stopped.set()
            return
        lease = self.lease_ms / 1000
        if not self.fenced and now - self.last_ok > lease * 0.75:
            self.fenced = True
            self._fence(
                f"session {self.session!r}: no lease renewal succeeded for "
                f"{now - self.last_ok:.1f} s (lease {lease:g} s); stopping effects before it "
                "can expire"
            )


class LeaseRenewer:
    """Renews many sessions' leases in one statement on one connection (see the module doc).

    ``conninfo`` is the database's (every storage registered must be on that database). Shared
    by the storages of a process: ``PostgresStorage(..., renewer=renewer)``. :meth:`close`
    stops the thread; the storages' leases then expire unless they were closed first."""

    def __init__(self, conninfo: str, *, connect_timeout: float = 5.0) -> None:
        from pico3.storage.pg_blobs import with_liveness

        self._conninfo = with_liveness(conninfo)
        self._connect_timeout = connect_timeout
        self._leases: dict[tuple[str, int], Lease] = {}
        self._guard = threading.Lock()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._releases: list[tuple[str, int, int, int]] = []
        self.renewals = 0
        """Renewal statements sent so far (each renews every registered lease)."""

    @property
    def conninfo(self) -> str:
        return self._conninfo

    def __len__(self) -> int:
        with self._guard:
            return len(self._leases)

    def add(self, lease: Lease) -> None:
        """Renew ``lease`` from now on (and let the watchdog check it)."""
        if self._closed.is_set():
            raise RuntimeError("this LeaseRenewer is closed")
        with self._guard:
            self._leases[(lease.session, lease.epoch)] = lease
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"pico3-lease-{lease.session}", daemon=True
                )
                self._thread.start()
        self._wake.set()  # a shorter lease may need an earlier renewal
        _Watchdog.get().add(lease)

    def remove(self, lease: Lease) -> None:
        """Stop renewing ``lease`` (its storage closes, and releases it)."""
        lease.stopped.set()
        _Watchdog.get().remove(lease)
        with self._guard:
            if self._leases.get((lease.session, lease.epoch)) is lease:
                del self._leases[(lease.session, lease.epoch)]

    def release(self, session: str, epoch: int, seq: int, max_id: int) -> None:
        """Give the lease of ``session`` back (if its epoch is still ``epoch``) from the
        renewer's thread, recording its last ``seq`` and ``max_id``, as a storage's close does:
        for a storage whose writer holds no connection now (it waits for nothing)."""
        with self._guard:
            self._releases.append((session, epoch, seq, max_id))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"pico3-lease-{session}", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def close(self, *, wait: float = 10.0) -> None:
        """Stop the thread (waiting up to ``wait`` seconds for a renewal in flight)."""
        self._closed.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=wait)

    def _interval(self) -> float:
        with self._guard:
            shortest = min((lease.lease_ms for lease in self._leases.values()), default=2000)
        return shortest / 4000

    def _run(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        while True:
            self._wake.wait(self._interval())
            self._wake.clear()
            closed = self._closed.is_set()
            with self._guard:
                leases = [lease for lease in self._leases.values() if not lease.stopped.is_set()]
                releases, self._releases = self._releases, []
            if releases:
                conn = self._release(conn, releases)
            if closed:
                break
            if not leases:
                continue
            started = time.monotonic()
            try:
                conn = self._connection(conn)
                rows = conn.execute(
                    _RENEW,
                    (
                        [lease.session for lease in leases],
                        [lease.epoch for lease in leases],
                        [lease.lease_ms for lease in leases],
                    ),
                ).fetchall()
            except Exception:
                if conn is not None:
                    conn.close()
                conn = None  # retry at the next tick; the session lock keeps commits safe
                continue
            self.renewals += 1
            extended = {row[0] for row in rows}
            for lease in leases:
                if lease.session in extended:
                    lease.renewed(started)
                elif not lease.stopped.is_set():
                    lease.lost = True  # the next commit fails with LeaseLost; the watchdog
                    with self._guard:  # fences the storage and stops the lease
                        if self._leases.get((lease.session, lease.epoch)) is lease:
                            del self._leases[(lease.session, lease.epoch)]
        if conn is not None:
            conn.close()

    def _connection(self, conn: psycopg.Connection[Any] | None) -> psycopg.Connection[Any]:
        import psycopg

        if conn is None or conn.closed:
            conn = psycopg.connect(
                self._conninfo,
                autocommit=True,
                connect_timeout=max(1, round(self._connect_timeout)),
            )
        return conn

    def _release(
        self, conn: psycopg.Connection[Any] | None, releases: list[tuple[str, int, int, int]]
    ) -> psycopg.Connection[Any] | None:
        """Release leases in one statement (once; a lease not released simply expires)."""
        try:
            conn = self._connection(conn)
            conn.execute(_RELEASE, tuple(list(column) for column in zip(*releases, strict=True)))
        except Exception:
            if conn is not None:
                conn.close()
            return None
        return conn


class _Watchdog:
    """One daemon thread per process that ticks every open lease's :meth:`Lease.check`
    (every 50 ms): it runs even when the event loop or a renewal is stuck."""

    _instance: _Watchdog | None = None
    _guard = threading.Lock()
    TICK = 0.05

    def __init__(self) -> None:
        self._leases: set[Lease] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pico3-lease-watchdog", daemon=True)
        self._thread.start()

    @classmethod
    def get(cls) -> _Watchdog:
        with cls._guard:
            if cls._instance is None or not cls._instance._thread.is_alive():
                cls._instance = _Watchdog()
            return cls._instance

    def add(self, lease: Lease) -> None:
        with self._lock:
            self._leases.add(lease)

    def remove(self, lease: Lease) -> None:
        with self._lock:
            self._leases.discard(lease)

    def _run(self) -> None:
        while True:
            self._wake.wait(self.TICK)
            with self._lock:
                leases = list(self._leases)
            now = time.monotonic()
            for lease in leases:
                try:
                    lease.check(now)
                except Exception:
                    pass
