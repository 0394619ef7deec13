"""ViewRelay: one state at a time, hydrate on switch, ``None`` when detached."""

from __future__ import annotations

from typing import Any

from chord.context import BACKGROUND, Context
from chord.state import Delivery, ReplicaState, replicated_state
from coding_agent.tui.conversation import ViewRelay


def _set(key: str, value: Any) -> Any:
    def mutate(doc: Any) -> None:
        doc[key] = value

    return mutate


def _recorder() -> tuple[list[tuple[Any, str]], Any]:
    seen: list[tuple[Any, str]] = []

    def listener(value: Any, ctx: Context, delivery: Delivery) -> None:
        seen.append((value, delivery.kind))

    return seen, listener


def test_following_a_state_hydrates_then_forwards_updates() -> None:
    relay = ViewRelay()
    seen, listener = _recorder()
    relay.subscribe(listener)
    state = replicated_state({"n": 1})
    relay.follow(state)
    state.change(BACKGROUND, _set("n", 2))
    assert seen == [({"n": 1}, "hydrate"), ({"n": 2}, "update")]
    assert relay.value == {"n": 2}


def test_switching_states_is_a_hydrate_and_the_old_state_is_ignored() -> None:
    relay = ViewRelay()
    old, new = replicated_state({"v": "old"}), replicated_state({"v": "new"})
    relay.follow(old)
    seen, listener = _recorder()
    relay.subscribe(listener)  # late subscriber: hydrated with the current value
    relay.follow(new)
    old.change(BACKGROUND, _set("v", "stale"))
    assert seen == [({"v": "old"}, "hydrate"), ({"v": "new"}, "hydrate")]


def test_detach_and_cold_states_deliver_none() -> None:
    relay = ViewRelay()
    seen, listener = _recorder()
    relay.subscribe(listener)
    relay.follow(replicated_state({"a": 1}))
    relay.detach()
    assert seen[-1] == (None, "hydrate") and relay.value is None
    replica = ReplicaState()
    relay.follow(replica)
    assert seen[-1] == (None, "hydrate")
    replica.hydrate(3, [("r", {"b": 2})], BACKGROUND)
    assert seen[-1] == ({"b": 2}, "hydrate")


def test_a_failing_listener_does_not_stop_the_others(caplog: Any) -> None:
    relay = ViewRelay()

    def broken(value: Any, ctx: Context, delivery: Delivery) -> None:
        raise RuntimeError("boom")

    seen, listener = _recorder()
    relay.subscribe(broken)
    relay.subscribe(listener)
    relay.follow(replicated_state({"x": 1}))
    assert seen == [({"x": 1}, "hydrate")]
    assert "view listener failed" in caplog.text


def test_unsubscribe_stops_deliveries() -> None:
    relay = ViewRelay()
    seen, listener = _recorder()
    unsubscribe = relay.subscribe(listener)
    unsubscribe()
    unsubscribe()
    relay.follow(replicated_state({"x": 1}))
    assert seen == []
