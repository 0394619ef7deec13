"""A prepared statement sent straight through libpq on the event loop (:func:`run_prepared`),
and when its answer is awaited blocking (:class:`Pace`): the one way a commit's statement is
sent, by a session's own writer (:mod:`pico3.storage.postgres`) and by the group committer's
groups (:mod:`pico3.storage.pg_group`).

Its parameters are already in binary: no query conversion, no adaptation, no result object
built by psycopg (a fraction of ``cursor.execute``'s client CPU). A commit's answer often comes
sooner than the event loop's own wait costs, so a caller with nothing else in flight may first
wait for it without the loop, for at most :data:`BLOCK_MS`, while its last answer came that
fast (:class:`Pace` keeps that).
"""

from __future__ import annotations

import functools
import select
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["BLOCK_MS", "Pace", "StatementFailed", "run_prepared"]

BLOCK_MS = 1
"""The most a statement sent with ``run_prepared(block=True)`` holds the event loop waiting
for its answer (ms; ``poll``'s resolution)."""


class Pace:
    """Whether the answers to one caller's statements come quickly enough to be awaited
    blocking: :func:`run_prepared` given it (``pace=``) blocks while the last answer it timed
    came within :data:`BLOCK_MS`, and times this one (a failed statement changes nothing).
    One per writer whose statements are never in flight together (a session's own connection,
    a committer's lone commits)."""

    __slots__ = ("quick",)

    def __init__(self) -> None:
        self.quick = True
        """The last answer timed came within :data:`BLOCK_MS` (so the next one blocks)."""


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

    ``block``: once the statement is sent, give the event loop one turn (the other tasks
    run while the server works: the caller's checkpoint, overlapping the round trip instead of
    delaying the send), then wait for the answer without the loop, for at most
    :data:`BLOCK_MS` (one ``poll``: the thread sleeps, the loop's other tasks wait), then on
    the loop as usual. Call it shielded from cancellation, as every commit is: a statement in
    flight is not abandoned at that turn. A commit's answer comes within a WAL flush, often
    sooner than the loop's own wait costs: registering the socket, a loop turn, a future,
    unregistering (~35 µs of CPU per wait, and 2-3x the wall time of a blocking wait,
    measured on loopback). Callers pass it only when nothing else of theirs is in flight and
    their last answer came within the bound (a slow disk's commits then wait on the loop
    only, and so do a busy loop's: the turn counts in the answer's time), so the loop is held
    at most :data:`BLOCK_MS` per statement. ``pace`` decides ``block`` that way and keeps the
    answer's time for the next statement (:class:`Pace`)."""
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
        # the event loop's one turn (the other tasks run), taken while the server works on
        # the statement rather than before sending it: a wait on the loop below would give
        # that turn anyway, a blocking wait would not
        await anyio.lowlevel.checkpoint()
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            if poller.poll(BLOCK_MS):
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
        pace.quick = time.monotonic() - started < BLOCK_MS / 1000
    return results


@functools.cache
def _tuples_ok() -> int:
    from psycopg import pq  # imported only where PostgreSQL is used

    return pq.ExecStatus.TUPLES_OK


@functools.cache
def _diagnostic_sqlstate() -> int:
    from psycopg import pq

    return pq.DiagnosticField.SQLSTATE
