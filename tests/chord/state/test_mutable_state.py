"""MutableReplicatedState: change, replace, apply and publication (docs/design/chord.md#publication)."""

from __future__ import annotations

from typing import Any

import pytest

from chord.context import BACKGROUND, Context, create_context_key, with_value
from chord.delta.ops import PathError, UnsafePathError
from chord.json import JsonError
from chord.state import (
    Delivery,
    MutableReplicatedState,
    is_replicated_state,
    replicated_state,
)

Seen = list[tuple[Any, Delivery]]


def follow(state: MutableReplicatedState) -> Seen:
    seen: Seen = []
    state.subscribe(lambda value, ctx, delivery: seen.append((value, delivery)))
    return seen


def sources(state: MutableReplicatedState) -> list[tuple[tuple[Any, ...], int]]:
    seen: list[tuple[tuple[Any, ...], int]] = []
    state.add_source_listener(lambda ops, seq, ctx: seen.append((ops, seq)))
    return seen


def test_subscribe_hydrates_synchronously_at_the_current_sequence() -> None:
    state = replicated_state({"n": 0})
    state.change(BACKGROUND, lambda d: d.__setitem__("n", 1))
    seen: list[tuple[Any, Context, Delivery]] = []
    state.subscribe(lambda value, ctx, delivery: seen.append((value, ctx, delivery)))
    assert seen == [({"n": 1}, BACKGROUND, Delivery("hydrate", 1))]


def test_change_publishes_one_revision_sharing_untouched_subtrees() -> None:
    initial = {"a": {"x": 1}, "b": {"y": [1, 2]}}
    state = replicated_state(initial)
    seen = follow(state)
    ops = sources(state)
    key = create_context_key("who")
    ctx = with_value(key, "me", BACKGROUND)

    def mutate(d: Any) -> None:
        d["a"]["x"] = 2
        d["a"]["z"] = 3

    state.change(ctx, mutate)
    assert state.sequence == 1
    assert state.value == {"a": {"x": 2, "z": 3}, "b": {"y": [1, 2]}}
    assert initial == {"a": {"x": 1}, "b": {"y": [1, 2]}}, "the old revision is never mutated"
    assert state.value["b"] is initial["b"]
    assert seen[-1] == (state.value, Delivery("update", 1))
    assert ops == [((("s", ("a", "x"), 2), ("s", ("a", "z"), 3)), 1)]


def test_the_update_carries_the_changing_context() -> None:
    state = replicated_state([])
    contexts: list[Context] = []
    state.subscribe(lambda value, ctx, delivery: contexts.append(ctx))
    ctx = with_value(create_context_key("k"), 1, BACKGROUND)
    state.change(ctx, lambda d: d.append(1))
    assert contexts == [BACKGROUND, ctx]


def test_a_change_that_restores_the_value_publishes_nothing() -> None:
    initial = {"n": 1}
    state = replicated_state(initial)
    seen = follow(state)

    def mutate(d: Any) -> None:
        d["n"] = 2
        d["n"] = 1

    state.change(BACKGROUND, mutate)
    state.change(BACKGROUND, lambda d: None)
    assert state.sequence == 0
    assert state.value is initial
    assert len(seen) == 1


def test_a_raising_callback_rolls_back_and_revokes_the_draft() -> None:
    initial = {"n": 1, "xs": []}
    state = replicated_state(initial)
    escaped: list[Any] = []

    def mutate(d: Any) -> None:
        escaped.append(d["xs"])
        d["n"] = 2
        d["xs"].append(1)
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        state.change(BACKGROUND, mutate)
    assert state.value is initial and initial == {"n": 1, "xs": []}
    assert state.sequence == 0
    with pytest.raises(TypeError, match="revoked"):
        escaped[0].append(2)


def test_an_escaped_draft_raises_after_a_successful_change() -> None:
    state = replicated_state({"a": {}})
    escaped: list[Any] = []
    state.change(BACKGROUND, lambda d: escaped.append(d["a"]))
    with pytest.raises(TypeError):
        escaped[0]["x"] = 1
    assert state.value == {"a": {}}


def test_an_async_callback_is_rejected_and_rolled_back() -> None:
    state = replicated_state({"n": 1})

    async def mutate(d: Any) -> None:
        d["n"] = 2  # never runs: the coroutine is closed unawaited

    with pytest.raises(TypeError, match="synchronous"):
        state.change(BACKGROUND, mutate)

    def sneaky(d: Any) -> Any:
        d["n"] = 3

        async def later() -> None:
            pass

        return later()

    with pytest.raises(TypeError, match="synchronous"):
        state.change(BACKGROUND, sneaky)
    assert state.value == {"n": 1} and state.sequence == 0


def test_nested_change_or_replace_inside_a_callback_raises_and_rolls_back() -> None:
    state = replicated_state({"n": 1})

    def nested_change(d: Any) -> None:
        d["n"] = 2
        state.change(BACKGROUND, lambda inner: inner.__setitem__("n", 3))

    with pytest.raises(RuntimeError, match="reentrantly from a change callback"):
        state.change(BACKGROUND, nested_change)

    def nested_replace(d: Any) -> None:
        d["n"] = 2
        state.replace(BACKGROUND, {"n": 4})

    with pytest.raises(RuntimeError, match="replaced from a change callback"):
        state.change(BACKGROUND, nested_replace)
    with pytest.raises(RuntimeError, match="from a change callback"):
        state.change(BACKGROUND, lambda d: state.apply(BACKGROUND, [("s", ("n",), 5)]))
    assert state.value == {"n": 1} and state.sequence == 0
    state.change(BACKGROUND, lambda d: d.__setitem__("n", 9))
    assert state.value == {"n": 9}, "the state is usable after a failed nested change"


def test_a_change_from_a_listener_is_queued_after_the_current_publication() -> None:
    state = replicated_state({"n": 0})
    order: list[tuple[str, int]] = []
    state.add_source_listener(lambda ops, seq, ctx: order.append(("source", seq)))

    def listener(value: Any, ctx: Context, delivery: Delivery) -> None:
        order.append(("listener", delivery.sequence))
        if delivery.sequence == 1:
            state.change(BACKGROUND, lambda d: d.__setitem__("n", 2))
            assert state.sequence == 2  # committed at once, delivered after this publication

    state.subscribe(listener)
    state.change(BACKGROUND, lambda d: d.__setitem__("n", 1))
    assert order == [
        ("listener", 0),
        ("source", 1),
        ("listener", 1),
        ("source", 2),
        ("listener", 2),
    ]
    late = follow(state)
    assert late == [({"n": 2}, Delivery("hydrate", 2))]


def test_a_subscriber_added_during_delivery_skips_what_its_hydration_covers() -> None:
    state = replicated_state({"n": 0})
    late: Seen = []

    def listener(value: Any, ctx: Context, delivery: Delivery) -> None:
        if delivery.sequence == 1:
            state.change(BACKGROUND, lambda d: d.__setitem__("n", 2))
            state.subscribe(lambda v, c, dl: late.append((v, dl)))

    state.subscribe(listener)
    state.change(BACKGROUND, lambda d: d.__setitem__("n", 1))
    assert late == [({"n": 2}, Delivery("hydrate", 2))]


def test_a_failing_source_listener_raises_after_commit_and_full_delivery() -> None:
    state = replicated_state({"n": 0})
    seen = follow(state)
    after: list[int] = []

    def failing(ops: Any, seq: int, ctx: Context) -> None:
        raise ValueError(f"source failed at {seq}")

    state.add_source_listener(failing)
    state.add_source_listener(lambda ops, seq, ctx: after.append(seq))
    with pytest.raises(ValueError, match="source failed at 1"):
        state.change(BACKGROUND, lambda d: d.__setitem__("n", 1))
    assert state.value == {"n": 1} and state.sequence == 1
    assert after == [1]
    assert seen[-1] == ({"n": 1}, Delivery("update", 1))


def test_several_source_failures_raise_one_group() -> None:
    state = replicated_state({"n": 0})

    def failing(ops: Any, seq: int, ctx: Context) -> None:
        raise ValueError("nope")

    state.add_source_listener(failing)
    remove = state.add_source_listener(failing)
    with pytest.raises(ExceptionGroup, match="Replicated state listeners failed") as info:
        state.replace(BACKGROUND, {"n": 1})
    assert len(info.value.exceptions) == 2
    remove()
    remove()  # idempotent
    with pytest.raises(ValueError):
        state.replace(BACKGROUND, {"n": 2})


def test_a_subscriber_error_goes_to_on_error_never_to_the_producer() -> None:
    errors: list[BaseException] = []
    state = replicated_state({"n": 0}, on_error=errors.append)
    seen = follow(state)

    def broken(value: Any, ctx: Context, delivery: Delivery) -> None:
        raise RuntimeError(f"listener broke at {delivery.sequence}")

    state.subscribe(broken)
    state.change(BACKGROUND, lambda d: d.__setitem__("n", 1))
    state.change(BACKGROUND, lambda d: d.__setitem__("n", 2))
    assert [str(e) for e in errors] == [f"listener broke at {n}" for n in (0, 1, 2)]
    assert [d.sequence for _, d in seen] == [0, 1, 2]


def test_subscriber_errors_are_logged_by_default(caplog: pytest.LogCaptureFixture) -> None:
    state = replicated_state({"n": 0})

    def broken(value: Any, ctx: Context, delivery: Delivery) -> None:
        raise RuntimeError("logged failure")

    with caplog.at_level("ERROR", logger="chord"):
        state.subscribe(broken)
    assert any(r.exc_info and "logged failure" in str(r.exc_info[1]) for r in caplog.records)


def test_replace_with_an_equal_value_is_a_no_op() -> None:
    initial = {"a": [1, {"b": 2}]}
    state = replicated_state(initial)
    state.replace(BACKGROUND, {"a": [1, {"b": 2}]})
    assert state.value is initial and state.sequence == 0


def test_replace_publishes_the_passed_object() -> None:
    state = replicated_state({"a": 1})
    ops = sources(state)
    new = {"a": 2}
    state.replace(BACKGROUND, new)
    assert state.value is new and state.sequence == 1
    assert ops == [((("r", new),), 1)]


def test_apply_publishes_exactly_the_given_ops() -> None:
    state = replicated_state({"xs": [1], "s": "a"})
    seen = sources(state)
    batch = [("p", ("xs",), 1, 0, [2]), ("a", ("s",), "b"), ("s", ("n",), 1), ("d", ("n",))]
    state.apply(BACKGROUND, batch)
    assert state.value == {"xs": [1, 2], "s": "ab"}
    assert seen == [(tuple(batch), 1)]
    state.apply(BACKGROUND, [])
    assert state.sequence == 1


@pytest.mark.parametrize(
    ("ops", "error"),
    [
        ([("s", ("a",), 1), ("x", ("a",))], Exception),
        ([("s", ("a",), 1), ("s", ("__proto__",), 1)], UnsafePathError),
        ([("s", ("a",), 1), ("s", ("missing", "deep"), 1)], PathError),
        ([("s", ("a",), 1), ("s", ("v",), float("nan"))], JsonError),
        ([("p", ("xs",), 0, 0, [1, {2}])], JsonError),
        ([("r", [1]), ("r", "scalar")], JsonError),
    ],
)
def test_apply_rejects_malformed_ops_before_anything_changes(
    ops: list[Any], error: type[Exception]
) -> None:
    initial = {"a": 0, "xs": []}
    state = replicated_state(initial)
    seen = follow(state)
    with pytest.raises(error):
        state.apply(BACKGROUND, ops)
    assert state.value is initial and initial == {"a": 0, "xs": []}
    assert state.sequence == 0 and len(seen) == 1


def test_a_trusted_apply_publishes_the_ops_and_still_refuses_a_path_that_does_not_resolve() -> None:
    initial = {"a": 0, "xs": []}
    state = replicated_state(initial)
    seen = sources(state)
    batch = [("s", ("a",), 1), ("p", ("xs",), 0, 0, [{"b": 2}])]
    state.apply(BACKGROUND, batch, trusted=True)
    assert state.value == {"a": 1, "xs": [{"b": 2}]} and seen == [(tuple(batch), 1)]
    before = state.value
    with pytest.raises(PathError):
        state.apply(BACKGROUND, [("s", ("a",), 2), ("s", ("missing", "deep"), 1)], trusted=True)
    assert state.value is before and state.sequence == 1


def test_apply_error_names_the_payload_path() -> None:
    state = replicated_state({"xs": []})
    with pytest.raises(JsonError, match=r"\$\.xs\[1\]"):
        state.apply(BACKGROUND, [("p", ("xs",), 0, 0, [1, float("inf")])])


@pytest.mark.parametrize(
    "bad",
    [float("nan"), float("inf"), {1, 2}, b"x", {1: "x"}, object(), (1, [float("-inf")])],
)
def test_non_json_values_are_rejected_everywhere(bad: Any) -> None:
    initial = {"a": {"b": 1}}
    state = replicated_state(initial)
    with pytest.raises(JsonError, match=r"\$\.a\.c"):
        state.change(BACKGROUND, lambda d: d["a"].__setitem__("c", bad))
    with pytest.raises(JsonError, match=r"\$\.a\.c"):
        state.replace(BACKGROUND, {"a": {"c": bad}})
    with pytest.raises(JsonError, match=r"\$\.a\.c"):
        state.apply(BACKGROUND, [("s", ("a", "c"), bad)])
    assert state.value is initial and state.sequence == 0


def test_the_root_must_be_an_object_or_array() -> None:
    with pytest.raises(JsonError, match="object or an array"):
        replicated_state("text")  # type: ignore[arg-type]
    with pytest.raises(JsonError):
        replicated_state({"a": float("nan")})
    assert replicated_state({"a": float("nan")}, trusted=True).value is not None
    state = replicated_state([])
    with pytest.raises(JsonError):
        state.replace(BACKGROUND, 3)


def test_is_replicated_state_uses_identity_not_shape() -> None:
    class LookAlike:
        value = {}
        sequence = 0

        def subscribe(self, listener: Any) -> Any:
            return lambda: None

    assert is_replicated_state(replicated_state({}))
    assert not is_replicated_state(LookAlike())
    assert not is_replicated_state({})
    assert not is_replicated_state([])


def test_unsubscribe_is_idempotent_and_stops_deliveries() -> None:
    state = replicated_state({"n": 0})
    seen: Seen = []
    unsubscribe = state.subscribe(lambda v, c, d: seen.append((v, d)))
    unsubscribe()
    unsubscribe()
    state.change(BACKGROUND, lambda d: d.__setitem__("n", 1))
    assert len(seen) == 1


def test_an_async_listener_without_a_task_group_is_reported() -> None:
    errors: list[BaseException] = []
    state = replicated_state({"n": 0}, on_error=errors.append)

    async def listener(value: Any, ctx: Context, delivery: Delivery) -> None:
        pass

    state.subscribe(listener)
    assert len(errors) == 1 and "task group" in str(errors[0])
