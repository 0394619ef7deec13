"""ReplicaState: the consumer-side replica (docs/design/chord.md#sequences, #public-delivery)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from chord.delta.ops import InvalidOpError
from chord.json import JsonError
from chord.state import Delivery, ReplicaError, ReplicaState, is_replicated_state


def follow(replica: ReplicaState) -> list[tuple[Any, Delivery]]:
    seen: list[tuple[Any, Delivery]] = []
    replica.subscribe(lambda value, ctx, delivery: seen.append((value, delivery)))
    return seen


def test_a_cold_replica_has_no_value_and_hydrates_its_subscribers() -> None:
    replica = ReplicaState()
    assert is_replicated_state(replica)
    seen = follow(replica)
    assert replica.value is None and replica.sequence is None and seen == []
    replica.hydrate(5, [("r", {"n": 1}), ("s", ("m",), 2)], BACKGROUND)
    assert replica.value == {"n": 1, "m": 2} and replica.sequence == 5
    assert seen == [({"n": 1, "m": 2}, Delivery("hydrate", 5))]
    replica.update(6, [("s", ("n",), 3)], BACKGROUND)
    assert seen[-1] == ({"n": 3, "m": 2}, Delivery("update", 6))
    late = follow(replica)
    assert late == [({"n": 3, "m": 2}, Delivery("hydrate", 6))]


def test_hydrate_requires_a_base_batch() -> None:
    replica = ReplicaState()
    with pytest.raises(ReplicaError, match="not a base operation batch"):
        replica.hydrate(0, [("s", ("n",), 1)], BACKGROUND)
    with pytest.raises(ReplicaError, match="not a base operation batch"):
        replica.hydrate(0, [], BACKGROUND)
    assert replica.value is None


def test_an_update_before_hydration_raises() -> None:
    replica = ReplicaState()
    with pytest.raises(ReplicaError, match="update before hydration"):
        replica.update(1, [("s", ("n",), 1)], BACKGROUND)


@pytest.mark.parametrize("sequence", [4, 2, 1])
def test_a_gap_or_duplicate_clears_and_raises(sequence: int) -> None:
    replica = ReplicaState()
    replica.hydrate(1, [("r", {"n": 0})], BACKGROUND)
    replica.update(2, [("s", ("n",), 1)], BACKGROUND)
    with pytest.raises(ReplicaError, match="gap"):
        replica.update(sequence, [("r", {"n": 9})], BACKGROUND)
    assert replica.value is None
    with pytest.raises(ReplicaError, match="update before hydration"):
        replica.update(3, [("s", ("n",), 2)], BACKGROUND)


@pytest.mark.parametrize(
    ("ops", "error"),
    [
        ([("s", ("n",), float("nan"))], JsonError),
        ([("m", ("xs",), [0, 0])], InvalidOpError),
        ([("s", ("missing", "x"), 1)], ValueError),
    ],
)
def test_an_invalid_update_clears_and_raises_without_reporting(
    ops: list[Any], error: type[Exception]
) -> None:
    errors: list[BaseException] = []
    replica = ReplicaState(on_error=errors.append)
    seen = follow(replica)
    replica.hydrate(0, [("r", {"n": 0, "xs": [1, 2]})], BACKGROUND)
    with pytest.raises(error):
        replica.update(1, ops, BACKGROUND)
    assert replica.value is None
    assert errors == []
    assert [d.sequence for _, d in seen] == [0]


def test_an_invalid_hydration_leaves_the_replica_cold() -> None:
    replica = ReplicaState()
    with pytest.raises(JsonError):
        replica.hydrate(0, [("r", {"n": float("inf")})], BACKGROUND)
    assert replica.value is None


def test_subscriber_errors_go_to_on_error() -> None:
    errors: list[BaseException] = []
    replica = ReplicaState(on_error=errors.append)

    def broken(value: Any, ctx: Context, delivery: Delivery) -> None:
        raise RuntimeError(delivery.kind)

    replica.subscribe(broken)
    replica.hydrate(0, [("r", [])], BACKGROUND)
    replica.update(1, [("p", (), 0, 0, [1])], BACKGROUND)
    assert [str(e) for e in errors] == ["hydrate", "update"]


def test_rehydration_after_clear_is_a_hydrate_delivery() -> None:
    replica = ReplicaState()
    seen = follow(replica)
    replica.hydrate(3, [("r", {"v": 1})], BACKGROUND)
    replica.clear()
    assert replica.value is None
    replica.hydrate(0, [("r", {"v": 2})], BACKGROUND)
    replica.update(1, [("s", ("v",), 3)], BACKGROUND)
    assert [d for _, d in seen] == [
        Delivery("hydrate", 3),
        Delivery("hydrate", 0),
        Delivery("update", 1),
    ]


@pytest.mark.anyio
async def test_clear_waits_for_the_running_callback_then_rehydrates() -> None:
    log: list[str] = []
    gate = anyio.Event()
    done = anyio.Event()
    async with anyio.create_task_group() as tg:
        replica = ReplicaState(task_group=tg)

        async def listener(value: Any, ctx: Context, delivery: Delivery) -> None:
            log.append(f"start {delivery.kind} {delivery.sequence} {value}")
            if delivery.sequence == 0:
                await gate.wait()
            log.append(f"end {delivery.kind} {delivery.sequence}")
            if delivery.sequence == 51:
                done.set()

        replica.subscribe(listener)
        replica.hydrate(0, [("r", {"v": 0})], BACKGROUND)
        await anyio.wait_all_tasks_blocked()
        replica.update(1, [("s", ("v",), 1)], BACKGROUND)  # pending, dropped by clear
        replica.clear()
        replica.hydrate(50, [("r", {"v": 50})], BACKGROUND)
        replica.update(51, [("s", ("v",), 51)], BACKGROUND)
        assert log == ["start hydrate 0 {'v': 0}"]
        gate.set()
        await done.wait()
    assert log == [
        "start hydrate 0 {'v': 0}",
        "end hydrate 0",
        "start hydrate 50 {'v': 50}",
        "end hydrate 50",
        "start update 51 {'v': 51}",
        "end update 51",
    ]


def test_a_cold_replica_hydrates_every_listener_before_reentrant_updates() -> None:
    replica = ReplicaState()
    log: list[str] = []

    def first(value: Any, ctx: Context, delivery: Delivery) -> None:
        log.append(f"first {delivery.kind} {delivery.sequence}")
        if delivery.kind == "hydrate":
            replica.update(1, [("s", ("n",), 1)], BACKGROUND)

    replica.subscribe(first)
    replica.subscribe(lambda v, c, d: log.append(f"second {d.kind} {d.sequence}"))
    replica.hydrate(0, [("r", {"n": 0})], BACKGROUND)
    assert log == ["first hydrate 0", "second hydrate 0", "first update 1", "second update 1"]


def test_a_replica_hydrated_with_null_is_hydrated_and_takes_updates() -> None:
    # a Chord provider may hold `null`; cold is "no sequence", not "value is None"
    replica = ReplicaState()
    assert replica.sequence is None
    replica.hydrate(4, [("r", None)], BACKGROUND)
    assert replica.sequence == 4 and replica.value is None
    replica.update(5, [("r", {"v": 1})], BACKGROUND)
    assert (replica.sequence, replica.value) == (5, {"v": 1})
    replica.clear()
    with pytest.raises(ReplicaError, match="before hydration"):
        replica.update(6, [("r", 1)], BACKGROUND)


def test_a_trusted_hydration_skips_the_payload_check_but_not_the_batch_rules() -> None:
    # what the loopback transport hands over by reference was checked where it was published
    assert_cold = ReplicaState()
    with pytest.raises(JsonError):
        assert_cold.hydrate(0, [("r", {"n": float("inf")})], BACKGROUND)
    replica = ReplicaState()
    base = {"n": float("inf"), "xs": [1]}
    replica.hydrate(0, [("r", base)], BACKGROUND, trusted=True)
    assert replica.value is base and replica.sequence == 0
    with pytest.raises(ReplicaError, match="not a base operation batch"):
        ReplicaState().hydrate(0, [("s", ("n",), 1)], BACKGROUND, trusted=True)


def test_a_trusted_update_applies_copy_on_write_and_still_refuses_a_path_that_does_not_resolve() -> (
    None
):
    replica = ReplicaState()
    base = {"n": 0, "xs": [1]}
    replica.hydrate(0, [("r", base)], BACKGROUND, trusted=True)
    replica.update(1, [("s", ("n",), 1)], BACKGROUND, trusted=True)
    assert replica.value == {"n": 1, "xs": [1]} and base == {"n": 0, "xs": [1]}
    with pytest.raises(ValueError):
        replica.update(2, [("s", ("missing", "x"), 1)], BACKGROUND, trusted=True)
    assert replica.value is None and replica.sequence is None
