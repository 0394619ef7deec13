"""Awaiting a statement's answer without the event loop (pico3.storage.pg_prepared): the wait
spins, so the thread never sleeps for an answer that comes quickly (a sleeping thread halts an
idle virtual CPU, and the wake-up slows the next microseconds of the process: issue 42, one
session alone)."""

from __future__ import annotations

import resource
import select
import socket
import time
from typing import Any

import psycopg
import pytest

from pico3.storage.pg_prepared import BLOCK_MS, SPIN_FACTOR, Pace, run_prepared, spin_until_readable


def voluntary_switches() -> int:
    """How often this thread has given up its CPU to sleep (a wait in ``poll``, a lock)."""
    return resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw


def test_a_spin_with_nothing_to_read_runs_out_its_time_without_the_thread_sleeping() -> None:
    """Nothing arrives: the spin says so once its time is up, having asked the socket the whole
    time rather than sleeping in ``poll`` (no voluntary context switch; a few tries, in case
    another thread of the test process wanted the interpreter's lock meanwhile)."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        poller = select.poll()
        poller.register(ours.fileno(), select.POLLIN)
        slept: list[int] = []
        for _ in range(5):
            before, started = voluntary_switches(), time.monotonic()
            assert spin_until_readable(poller, 0.002) is False
            assert time.monotonic() - started >= 0.002  # it waited its whole time
            slept.append(voluntary_switches() - before)
            if slept[-1] == 0:
                break
        assert 0 in slept, f"the thread slept during every spin: {slept}"


def test_a_spin_returns_at_once_when_the_answer_is_already_there() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        poller = select.poll()
        poller.register(ours.fileno(), select.POLLIN)
        theirs.sendall(b"answer")
        assert spin_until_readable(poller, 3600.0) is True  # no hour spent
        assert ours.recv(16) == b"answer"
        theirs.close()
        assert spin_until_readable(poller, 3600.0) is True  # end of stream reads too


@pytest.mark.anyio
async def test_a_quick_answer_awaited_through_a_pace_finds_the_thread_awake(
    postgres_cluster: Any,
) -> None:
    """A statement awaited without the loop, through a :class:`Pace` whose answers come
    quickly, gets its answer spinning: among twenty such statements on a loopback server, at
    least one returns with the thread never having slept (a sleeping wait sleeps in every one:
    the answer is never there a few microseconds after the send). Each answer is whole, and
    the pace keeps its time, which bounds the next statement's spin."""
    conn = await psycopg.AsyncConnection.connect(postgres_cluster.conninfo, autocommit=True)
    try:
        await conn.execute("PREPARE plus (int8) AS SELECT $1 + 1")
        seven = (7).to_bytes(8, "big")
        pace = Pace()
        awake = 0
        for _ in range(20):
            pace.quick = True  # awaited without the loop, whatever the last answer took
            pace.answer = BLOCK_MS / 1000 / SPIN_FACTOR  # a spin of up to a millisecond
            pace.turned = float("inf")  # no loop turn is due (a turn may sleep in epoll)
            before = voluntary_switches()
            started = time.monotonic()
            (result,) = await run_prepared(conn, b"plus", (seven,), (1,), pace=pace)
            took = time.monotonic() - started
            assert int(result.get_value(0, 0)) == 8
            assert 0 < pace.answer <= took  # the answer's time, kept for the next spin
            awake += voluntary_switches() == before
        assert awake >= 1, "every answer was awaited asleep"
    finally:
        await conn.close()
