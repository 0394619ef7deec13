"""The provider's per-subscription op-level queue (docs/design/chord.md#provider-queue, #provider-checks)."""

from __future__ import annotations

from typing import Any

import pytest

from chord.context import BACKGROUND, Context, with_cancel
from chord.remote import (
    PROVIDER_QUEUE_LIMIT,
    RemoteServiceProvider,
    ServiceProviderUpdate,
    ServiceReplacedUpdate,
    ServiceResetUpdate,
    ServiceStateUpdate,
)
from chord.services import define_service
from chord.state import replicated_state

Counter = define_service("test.delivery-counter")


def _provider(value: int = 0) -> tuple[RemoteServiceProvider, Any]:
    provider = RemoteServiceProvider([Counter])
    state = replicated_state({"value": value})
    provider.provide(Counter, {"state": state})
    return provider, state


def test_queue_limit_is_one_hundred() -> None:
    assert PROVIDER_QUEUE_LIMIT == 100


def test_reentrant_updates_append_to_the_activation_fifo_and_activate_twice_is_a_noop() -> None:
    # item 59
    provider, state = _provider()
    received: list[int] = []

    def listener(update: ServiceProviderUpdate, ctx: Context) -> None:
        assert isinstance(update, ServiceStateUpdate)
        received.append(update.sequence)
        if update.sequence == 1:
            state.replace(BACKGROUND, {"value": 3})

    subscription = provider.subscribe(Counter.id, "singleton", listener)
    state.replace(BACKGROUND, {"value": 1})
    state.replace(BACKGROUND, {"value": 2})
    subscription.activate()
    subscription.activate()
    assert received == [1, 2, 3]


@pytest.mark.parametrize("count", [100, 101, 102, 201, 202])
def test_overflow_replaces_the_pending_queue_with_one_reset(count: int) -> None:
    # item 60
    provider, state = _provider()
    updates: list[ServiceProviderUpdate] = []
    contexts: list[Context] = []

    def listener(update: ServiceProviderUpdate, ctx: Context) -> None:
        updates.append(update)
        contexts.append(ctx)

    subscription = provider.subscribe(Counter.id, "singleton", listener)
    ctx, _cancel = with_cancel(BACKGROUND)
    for value in range(1, count + 1):
        state.replace(ctx, {"value": value})
    assert updates == []
    first = (count - 1) // 100 * 100 + 1
    subscription.activate()
    assert len(updates) == count - first + 1
    if count > 100:
        assert updates[0].to_json() == {
            "type": "reset",
            "snapshot": {
                "serviceId": Counter.id,
                "mode": "singleton",
                "instances": [
                    {
                        "members": [
                            {
                                "name": "state",
                                "kind": "state",
                                "sequence": first,
                                "ops": [["r", {"value": first}]],
                            }
                        ]
                    }
                ],
            },
        }
        rest = updates[1:]
    else:
        rest = updates
    assert [u.sequence for u in rest if isinstance(u, ServiceStateUpdate)] == list(
        range(count - len(rest) + 1, count + 1)
    )
    assert all(received is ctx for received in contexts)
    state.replace(ctx, {"value": count + 1})
    last = updates[-1]
    assert isinstance(last, ServiceStateUpdate) and last.sequence == count + 1


def test_the_running_delivery_is_not_compacted_on_reentrant_overflow() -> None:
    # item 61
    provider, state = _provider()
    updates: list[ServiceProviderUpdate] = []

    def listener(update: ServiceProviderUpdate, ctx: Context) -> None:
        updates.append(update)
        if isinstance(update, ServiceStateUpdate) and update.sequence == 1:
            for value in range(3, 104):
                state.replace(BACKGROUND, {"value": value})

    subscription = provider.subscribe(Counter.id, "singleton", listener)
    state.replace(BACKGROUND, {"value": 1})
    state.replace(BACKGROUND, {"value": 2})
    subscription.activate()
    assert len(updates) == 3
    first, reset, last = updates
    assert isinstance(first, ServiceStateUpdate) and first.sequence == 1
    assert isinstance(reset, ServiceResetUpdate)
    assert reset.snapshot.to_json()["instances"][0]["members"][0]["sequence"] == 102
    assert reset.snapshot.to_json()["instances"][0]["members"][0]["ops"] == [["r", {"value": 102}]]
    assert isinstance(last, ServiceStateUpdate) and last.sequence == 103


def test_notifications_covered_by_an_overflow_reset_are_suppressed() -> None:
    # item 62
    provider = RemoteServiceProvider([Counter])
    state = replicated_state({"value": 0})

    def source(ops: Any, sequence: int, ctx: Context) -> None:
        if sequence == 101:
            state.replace(BACKGROUND, {"value": 102})
            state.replace(BACKGROUND, {"value": 103})

    state.add_source_listener(source)  # registered first: runs before the provider's
    provider.provide(Counter, {"state": state})
    updates: list[ServiceProviderUpdate] = []
    subscription = provider.subscribe(Counter.id, "singleton", lambda u, ctx: updates.append(u))
    for value in range(1, 102):
        state.replace(BACKGROUND, {"value": value})
    subscription.activate()
    assert len(updates) == 1
    reset = updates[0]
    assert isinstance(reset, ServiceResetUpdate)
    assert reset.snapshot.to_json()["instances"][0]["members"][0]["sequence"] == 103
    state.replace(BACKGROUND, {"value": 104})
    assert isinstance(updates[1], ServiceStateUpdate) and updates[1].sequence == 104


def test_subscribers_see_the_same_lifecycle_order_under_reentrant_replace() -> None:
    # item 63
    provider, _ = _provider()
    first: list[ServiceProviderUpdate] = []
    second: list[ServiceProviderUpdate] = []

    def reentrant(update: ServiceProviderUpdate, ctx: Context) -> None:
        first.append(update)
        if len(first) == 1:
            provider.replace(Counter, {"state": replicated_state({"value": 2})})

    provider.subscribe(Counter.id, "singleton", reentrant).activate()
    provider.subscribe(Counter.id, "singleton", lambda u, ctx: second.append(u)).activate()
    provider.replace(Counter, {"state": replicated_state({"value": 1})})
    assert first == second
    assert len(second) == 2
    values = [
        u.snapshot.to_json()["members"][0]["ops"]
        for u in second
        if isinstance(u, ServiceReplacedUpdate)
    ]
    assert values == [[["r", {"value": 1}]], [["r", {"value": 2}]]]


def test_close_inside_a_callback_stops_later_buffered_callbacks() -> None:
    # item 64
    provider, state = _provider()
    received: list[ServiceProviderUpdate] = []
    holder: list[Any] = []

    def listener(update: ServiceProviderUpdate, ctx: Context) -> None:
        received.append(update)
        holder[0].close()

    holder.append(provider.subscribe(Counter.id, "singleton", listener))
    state.replace(BACKGROUND, {"value": 1})
    state.replace(BACKGROUND, {"value": 2})
    holder[0].activate()
    assert len(received) == 1
    state.replace(BACKGROUND, {"value": 3})
    assert len(received) == 1


def test_reentrant_dispose_still_delivers_unavailable() -> None:
    # item 64
    provider, state = _provider()
    received: list[str] = []

    def listener(update: ServiceProviderUpdate, ctx: Context) -> None:
        received.append(update.type)
        if update.type == "state":
            provider.dispose()

    subscription = provider.subscribe(Counter.id, "singleton", listener)
    state.replace(BACKGROUND, {"value": 1})
    subscription.activate()
    assert received == ["state", "unavailable"]
    state.replace(BACKGROUND, {"value": 2})
    assert received == ["state", "unavailable"]
