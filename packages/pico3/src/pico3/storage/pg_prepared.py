"""A prepared statement sent straight through libpq on the event loop (:func:`run_prepared`),
and when its answer is awaited blocking (:class:`Pace`): the one way a commit's statement is
sent, by a session's own writer (:mod:`pico3.storage.postgres`) and by the group committer's
groups (:mod:`pico3.storage.pg_group`).

Its parameters are already in binary: no query conversion, no adaptation, no result object
built by psycopg (a fraction of ``cursor.execute``'s client CPU). A commit's answer often comes
sooner than the event loop's own wait costs, so a caller with nothing else in flight may first
wait for it without the loop, for at most :data:`BLOCK_MS`, while its last answer came that
fast (:class:`Pace` keeps that).

That wait spins (:func:`spin_until_readable`): it asks the socket without sleeping, giving the
CPU to anything else runnable between asks, for at most twice the last answer's time. A wait
that sleeps halts an idle virtual CPU whose guest has halt polling off (as on the KVM guests
this was measured on), and the process woken by the answer then runs its next microseconds two
to three times slower: a lone session's commits lost about a fifth of their rate to it
(docs/design/server-capacity.md, "Spinning for the answer"). The spin costs the CPU of the
answer's wait, once per statement awaited that way, and only while answers come within
:data:`BLOCK_MS`.
"""

from __future__ import annotations

import functools
import os
import select
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = [
    "BLOCK_MS",
    "TURN_EVERY_MS",
    "Pace",
    "StatementFailed",
    "command_ok",
    "connection_ok",
    "run_prepared",
    "spin_until_readable",
]

BLOCK_MS = 1
"""The most a statement sent with ``run_prepared(block=True)`` holds the event loop waiting
for its answer (ms)."""

SPIN_FACTOR = 2
"""A statement awaited without the loop spins for at most this many times its pace's last
answer time (within :data:`BLOCK_MS`): an answer as quick as the last one is caught spinning,
and one much later is left to the loop's wait without spinning long for it."""

TURN_EVERY_MS = 1
"""How often, at least, statements awaited blocking through one :class:`Pace` give the event
loop a turn (ms): a writer committing back to back holds the loop at most this long plus one
statement's :data:`BLOCK_MS`, and does not pay a loop turn per statement."""


class Pace:
    """Whether the answers to one caller's statements come quickly enough to be awaited
    blocking: :func:`run_prepared` given it (``pace=``) blocks while the last answer it timed
    came within :data:`BLOCK_MS`, and times this one (a failed statement changes nothing).
    It also keeps when its statements last gave the event loop a turn (at least every
    :data:`TURN_EVERY_MS`) and the poll object of the socket it waits on. One per writer whose
    statements are never in flight together (a session's own connection, a committer's lone
    commits)."""

    __slots__ = ("_fd", "_poller", "answer", "quick", "turned")

    def __init__(self) -> None:
        self.quick = True
        """The last answer timed came within :data:`BLOCK_MS` (so the next one blocks)."""
        self.answer = BLOCK_MS / 1000
        """How long (s) the last answer timed took: the next one spins for at most
        :data:`SPIN_FACTOR` times that."""
        self.turned = 0.0
        """When (``time.monotonic()``) a statement of this pace last gave the loop a turn."""
        self._fd = -1
        self._poller: select.poll | None = None

    def poller(self, fd: int) -> select.poll:
        """A poll object waiting for ``fd`` to be readable, kept while the socket is the same
        one (a reconnected writer's new socket gets a new one)."""
        poller = self._poller
        if poller is None or fd != self._fd:
            poller = select.poll()  # not select(): a process of many sessions has fds > 1023
            poller.register(fd, select.POLLIN)
            self._poller, self._fd = poller, fd
        return poller


class StatementFailed(Exception):
    """A statement run by :func:`run_prepared` failed; ``sqlstate`` is its SQLSTATE."""

    sqlstate: str | None = None


async def run_prepared(
    conn: AsyncConnection[Any],
    name: bytes,
    params: Sequence[bytes],
    formats: Sequence[int],
    *,
    ok: int | None = None,
    block: bool = False,
    pace: Pace | None = None,
) -> list[Any]:
    """Run prepared statement ``name`` straight through libpq on the event loop, its
    parameters already in binary (no query conversion, no adaptation); returns its results,
    or raises the first failed one's error (with its ``sqlstate``). ``ok`` is the status a
    result must have (``TUPLES_OK`` unless given).

    ``block``: once the statement is sent, wait for the answer without the loop, for at most
    :data:`BLOCK_MS` (spinning, :func:`spin_until_readable`: the loop's other tasks wait), then
    on the loop as usual. A commit's answer comes within a WAL flush, often sooner than the
    loop's own wait costs: registering the socket, a loop turn, a future, unregistering
    (~35 µs of CPU per wait, and 2-3x the wall time of a blocking wait, measured on
    loopback). Callers pass it only when nothing else of theirs is in flight and their last
    answer came within the bound (a slow disk's commits then wait on the loop only, and so do
    a busy loop's: a turn counts in the answer's time), so the loop is held at most
    :data:`BLOCK_MS` per statement. ``pace`` decides ``block`` that way and keeps the answer's
    time for the next statement (:class:`Pace`).

    A blocking wait gives the loop no turn, so with ``pace`` the statement gives one (the
    other tasks run while the server works on it, overlapping the round trip instead of
    delaying the send) when the pace's last turn is :data:`TURN_EVERY_MS` old: a loop turn per
    statement cost a lone writer about a tenth of its client CPU per commit (88 -> 79 µs,
    blocks alternated with the code before, loopback), and one a millisecond keeps every other
    task of the loop waiting at most that long plus :data:`BLOCK_MS`. Call it shielded from
    cancellation, as every commit is: a statement in flight is not abandoned at that turn."""
    started = 0.0
    if pace is not None:
        block = pace.quick
        started = time.monotonic()
    expected = _tuples_ok() if ok is None else ok
    pgconn = conn.pgconn
    pgconn.send_query_prepared(name, params, formats)
    fd = pgconn.socket
    while pgconn.flush():
        await anyio.wait_writable(fd)
    if block:
        if pace is None or started - pace.turned >= TURN_EVERY_MS / 1000:
            # the event loop's turn (the other tasks run), taken while the server works on
            # the statement rather than before sending it
            await anyio.lowlevel.checkpoint()
            if pace is not None:
                pace.turned = started
        window = (
            BLOCK_MS / 1000 if pace is None else min(BLOCK_MS / 1000, SPIN_FACTOR * pace.answer)
        )
        try:
            if spin_until_readable((pace or Pace()).poller(fd), window):
                pgconn.consume_input()
        except (OSError, ValueError):
            pass  # the loop's wait below reports what is wrong with the socket
    results: list[Any] = []
    failed: StatementFailed | None = None
    while True:
        while pgconn.is_busy():
            await anyio.wait_readable(fd)
            pgconn.consume_input()
        result = pgconn.get_result()
        if result is None:
            break
        if result.status == expected:
            results.append(result)
        elif failed is None:
            message = (result.error_message or b"no message").decode(errors="replace")
            state = result.error_field(_diagnostic_sqlstate())
            failed = StatementFailed(message.strip())
            failed.sqlstate = None if state is None else state.decode()
    if failed is not None:
        raise failed
    if pace is not None:  # block next time only if this answer came within the bound
        pace.answer = time.monotonic() - started
        pace.quick = pace.answer < BLOCK_MS / 1000
    return results


def spin_until_readable(poller: select.poll, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``poller``'s socket to be readable without the thread ever
    sleeping: ask it (``poll`` with no timeout), and between asks give the CPU to whatever else
    is runnable (``sched_yield``: with nothing else, the thread goes on at once). Returns
    whether the socket became readable.

    Why not sleep in ``poll``: a sleeping thread halts its idle virtual CPU (when the guest's
    halt polling is off), and the wake-up makes the next microseconds of the process two to
    three times slower (module doc). The cost is the CPU of the wait itself, so callers bound
    ``seconds`` by what the answer is expected to take."""
    if poller.poll(0):
        return True
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        os.sched_yield()
        if poller.poll(0):
            return True
    return False


@functools.cache
def _tuples_ok() -> int:
    from psycopg import pq  # imported only where PostgreSQL is used, once (a commit's path)

    return pq.ExecStatus.TUPLES_OK


@functools.cache
def command_ok() -> int:
    """libpq's ``PGRES_COMMAND_OK``: the status of a statement that returns no rows."""
    from psycopg import pq

    return pq.ExecStatus.COMMAND_OK


@functools.cache
def connection_ok() -> int:
    """libpq's ``CONNECTION_OK``: a connection's status while it is usable."""
    from psycopg import pq

    return pq.ConnStatus.OK


@functools.cache
def _diagnostic_sqlstate() -> int:
    from psycopg import pq

    return pq.DiagnosticField.SQLSTATE
