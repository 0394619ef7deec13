"""The turn of a storage's commits (pico3.storage._turn.Turn): taken at once when free, waited
for in order when not, and a cancelled waiter neither keeps nor loses the turn of the others."""

from __future__ import annotations

import asyncio

import anyio
import anyio.lowlevel
import pytest

from pico3.storage._turn import Turn, shield_scope

pytestmark = pytest.mark.anyio


async def test_a_free_turn_is_taken_without_letting_other_tasks_run() -> None:
    turn = Turn()
    ran: list[str] = []
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: _note(ran, "other"))
        await turn.acquire()  # no await inside: the other task has not run yet
        ran.append("taken")
        assert turn.locked()
        turn.release()
        assert not turn.locked()
    assert ran == ["taken", "other"]


async def _note(ran: list[str], what: str) -> None:
    ran.append(what)


async def test_waiters_take_the_turn_in_order_and_no_newcomer_overtakes_them() -> None:
    turn = Turn()
    order: list[int] = []
    await turn.acquire()

    async def take(n: int, queued: anyio.Event) -> None:
        queued.set()
        async with turn:
            order.append(n)

    async with anyio.create_task_group() as group:
        for n in range(3):
            queued = anyio.Event()
            group.start_soon(take, n, queued)
            await queued.wait()
        turn.release()  # handed to waiter 0: still taken, so a newcomer queues behind 1 and 2
        assert turn.locked()
        group.start_soon(take, 3, anyio.Event())
    assert order == [0, 1, 2, 3]
    assert not turn.locked()


async def _wait_for_turn(turn: Turn, got: list[str], name: str, queued: anyio.Event) -> None:
    queued.set()
    async with turn:
        got.append(name)


async def test_a_waiter_cancelled_while_it_waits_leaves_the_queue() -> None:
    turn = Turn()
    await turn.acquire()
    got: list[str] = []
    async with anyio.create_task_group() as group:
        async with anyio.create_task_group() as doomed:
            queued = anyio.Event()
            doomed.start_soon(_wait_for_turn, turn, got, "cancelled", queued)
            await queued.wait()
            queued = anyio.Event()
            group.start_soon(_wait_for_turn, turn, got, "next", queued)
            await queued.wait()
            doomed.cancel_scope.cancel()
        turn.release()  # to "next": the cancelled waiter left the queue
    assert got == ["next"]
    assert not turn.locked()


async def test_a_waiter_cancelled_just_as_the_turn_was_handed_to_it_passes_it_on() -> None:
    """The turn handed to a waiter (its event set) that is cancelled before it runs (asyncio
    throws the cancellation into it all the same) goes on to the next waiter."""
    turn = Turn()
    await turn.acquire()
    got: list[str] = []
    queued = anyio.Event()
    doomed = asyncio.get_running_loop().create_task(_wait_for_turn(turn, got, "cancelled", queued))
    await queued.wait()
    async with anyio.create_task_group() as group:
        queued = anyio.Event()
        group.start_soon(_wait_for_turn, turn, got, "next", queued)
        await queued.wait()
        turn.release()  # handed to the first waiter, which has not run since
        doomed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await doomed
    assert got == ["next"]
    assert not turn.locked()


async def test_the_shield_scope_shields_like_anyios() -> None:
    scope = shield_scope()
    done = anyio.Event()
    with anyio.CancelScope() as outer:
        outer.cancel()
        with scope(shield=True):
            await anyio.lowlevel.checkpoint()  # not cancelled: shielded
            done.set()
        await anyio.lowlevel.checkpoint()  # cancelled here, outside the shield
        raise AssertionError("not cancelled")
    assert done.is_set() and outer.cancelled_caught
