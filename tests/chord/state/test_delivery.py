"""Public subscription delivery: serialised, isolated, bounded (docs/design/chord.md#public-delivery)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context, create_context_key, with_value
from chord.state import MAX_PENDING_DELIVERIES, Delivery, replicated_state


def bump(state: Any, n: int, ctx: Context = BACKGROUND) -> None:
    state.change(ctx, lambda d: d.__setitem__("n", n))


@pytest.mark.anyio
async def test_async_subscriber_is_serialised_and_does_not_delay_others() -> None:
    log: list[str] = []
    gate = anyio.Event()
    done = anyio.Event()
    async with anyio.create_task_group() as tg:
        state = replicated_state({"n": 0}, task_group=tg)

        async def slow(value: Any, ctx: Context, delivery: Delivery) -> None:
            log.append(f"slow start {delivery.sequence}")
            if delivery.sequence == 1:
                await gate.wait()
            log.append(f"slow end {delivery.sequence}")
            if delivery.sequence == 2:
                done.set()

        state.subscribe(slow)
        state.subscribe(lambda v, c, d: log.append(f"fast {d.sequence}"))
        state.add_source_listener(lambda ops, seq, ctx: log.append(f"source {seq}"))
        bump(state, 1)
        bump(state, 2)
        # The fast subscriber and the op listener already saw everything, inline.
        assert log == ["fast 0", "source 1", "fast 1", "source 2", "fast 2"]
        log.clear()
        gate.set()
        await done.wait()
    assert log == [
        "slow start 0",
        "slow end 0",
        "slow start 1",
        "slow end 1",
        "slow start 2",
        "slow end 2",
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("n", [100, 101, 102, 201, 202])
async def test_overflow_keeps_the_hydration_and_the_newest_window(n: int) -> None:
    received: list[Delivery] = []
    gate = anyio.Event()
    done = anyio.Event()
    async with anyio.create_task_group() as tg:
        state = replicated_state({"n": 0}, task_group=tg)

        async def blocked(value: Any, ctx: Context, delivery: Delivery) -> None:
            received.append(delivery)
            if delivery.kind == "hydrate":
                await gate.wait()
            if delivery.sequence == n:
                done.set()

        state.subscribe(blocked)
        for i in range(1, n + 1):
            bump(state, i)
        gate.set()
        await done.wait()
    first = (n - 1) // 100 * 100 + 1
    assert received == [Delivery("hydrate", 0)] + [
        Delivery("update", s) for s in range(first, n + 1)
    ]


@pytest.mark.anyio
async def test_running_delivery_is_outside_the_bound_and_the_newest_frame_is_exact() -> None:
    received: list[tuple[Any, Context, Delivery]] = []
    gate = anyio.Event()
    done = anyio.Event()
    key = create_context_key("n")
    last = MAX_PENDING_DELIVERIES + 2
    async with anyio.create_task_group() as tg:
        state = replicated_state({"n": 0}, task_group=tg)

        async def listener(value: Any, ctx: Context, delivery: Delivery) -> None:
            received.append((value, ctx, delivery))
            if delivery.sequence == 1:
                await gate.wait()
            if delivery.sequence == last:
                done.set()

        state.subscribe(listener)
        await anyio.wait_all_tasks_blocked()
        bump(state, 1)  # starts running and blocks
        await anyio.wait_all_tasks_blocked()
        contexts = {}
        for i in range(2, last + 1):
            contexts[i] = with_value(key, i, BACKGROUND)
            bump(state, i, contexts[i])
        newest_value = state.value
        gate.set()
        await done.wait()
    sequences = [d.sequence for _, _, d in received]
    # 1 is running; 2..101 fill the bound exactly; 102 overflows and replaces the pending ones.
    assert sequences == [0, 1, last]
    value, ctx, delivery = received[-1]
    assert value is newest_value and ctx is contexts[last]
    assert delivery == Delivery("update", last)


def test_reentrant_publication_from_a_sync_callback_stays_serialised() -> None:
    state = replicated_state({"n": 0})
    log: list[str] = []

    def listener(value: Any, ctx: Context, delivery: Delivery) -> None:
        log.append(f"start {delivery.sequence}")
        if delivery.sequence < 3:
            bump(state, delivery.sequence + 1)
        log.append(f"end {delivery.sequence}")

    state.subscribe(listener)
    assert log == [f"{edge} {s}" for s in range(4) for edge in ("start", "end")]
    assert state.sequence == 3


@pytest.mark.anyio
async def test_unsubscribe_drops_the_queue_but_not_the_running_callback() -> None:
    errors: list[BaseException] = []
    received: list[int] = []
    gate = anyio.Event()
    async with anyio.create_task_group() as tg:
        state = replicated_state({"n": 0}, task_group=tg, on_error=errors.append)

        async def listener(value: Any, ctx: Context, delivery: Delivery) -> None:
            received.append(delivery.sequence)
            await gate.wait()
            raise ValueError(f"late failure {delivery.sequence}")

        unsubscribe = state.subscribe(listener)
        bump(state, 1)
        bump(state, 2)
        await anyio.wait_all_tasks_blocked()
        unsubscribe()
        gate.set()
    assert received == [0]
    assert [str(e) for e in errors] == ["late failure 0"]


@pytest.mark.anyio
async def test_async_listener_failures_are_reported_and_delivery_continues() -> None:
    errors: list[BaseException] = []
    received: list[int] = []
    async with anyio.create_task_group() as tg:
        state = replicated_state({"n": 0}, on_error=errors.append)
        state.bind_runtime(tg)

        async def listener(value: Any, ctx: Context, delivery: Delivery) -> None:
            received.append(delivery.sequence)
            raise RuntimeError(f"failed {delivery.sequence}")

        state.subscribe(listener)
        bump(state, 1)
    assert received == [0, 1]
    assert [str(e) for e in errors] == ["failed 0", "failed 1"]


def test_two_subscriptions_of_one_function_are_independent() -> None:
    state = replicated_state({"n": 0})
    seen: list[int] = []

    def listener(value: Any, ctx: Context, delivery: Delivery) -> None:
        seen.append(delivery.sequence)

    first = state.subscribe(listener)
    state.subscribe(listener)
    first()
    bump(state, 1)
    assert seen == [0, 0, 1]


@pytest.mark.anyio
async def test_an_async_listener_after_the_task_group_closed_is_reported() -> None:
    errors: list[BaseException] = []
    async with anyio.create_task_group() as tg:
        state = replicated_state({"n": 0}, task_group=tg, on_error=errors.append)

    async def listener(value: Any, ctx: Context, delivery: Delivery) -> None:
        pass

    state.subscribe(listener)
    bump(state, 1)  # the producer never sees the failure
    assert len(errors) == 2 and all(isinstance(e, RuntimeError) for e in errors)
