"""The per-peer endpoint (docs/design/chord.md#endpoint)."""

from __future__ import annotations

from typing import Any

import pytest

from chord.context import BACKGROUND, Context
from chord.remote import (
    RemoteServiceProvider,
    ServiceCall,
    ServiceCatalogueEntry,
    ServiceEndpointError,
    ServiceProviderUpdate,
    ServiceStateUpdate,
    ServiceSubscriptionSnapshot,
    ServiceUnavailableUpdate,
    create_remote_service_endpoint,
    service_catalogue_call,
    service_subscribe_call,
    service_unsubscribe_call,
)
from chord.services import define_service
from chord.state import replicated_state

Counter = define_service("test.endpoint.counter")


def _provider() -> tuple[RemoteServiceProvider, Any]:
    provider = RemoteServiceProvider([Counter])
    state: Any = replicated_state({"count": 0})

    def bump(ctx: Context) -> int:
        state.change(ctx, lambda draft: draft.__setitem__("count", draft["count"] + 1))
        return state.value["count"]

    provider.provide(Counter, {"state": state, "bump": bump})
    return provider, state


@pytest.mark.anyio
async def test_catalogue_subscribe_streams_updates_and_dispose_stops_them() -> None:
    # item 70
    provider, state = _provider()
    endpoint = create_remote_service_endpoint(provider)
    published: list[tuple[str, ServiceProviderUpdate]] = []

    def publish(subscription_id: str, update: ServiceProviderUpdate, ctx: Context) -> None:
        published.append((subscription_id, update))

    catalogue = await endpoint.invoke(service_catalogue_call(), publish, BACKGROUND)
    assert catalogue == (ServiceCatalogueEntry(Counter.id, "singleton"),)
    snapshot = await endpoint.invoke(
        service_subscribe_call("s1", Counter.id, "singleton"), publish, BACKGROUND
    )
    assert isinstance(snapshot, ServiceSubscriptionSnapshot)
    members = {member.name: member for member in snapshot.instances[0].members}
    assert members["state"].to_json()["ops"] == [["r", {"count": 0}]]
    assert await endpoint.invoke(ServiceCall(Counter.id, "bump"), publish, BACKGROUND) == 1
    assert [(sid, type(update)) for sid, update in published] == [("s1", ServiceStateUpdate)]
    assert endpoint.subscription_ids == ("s1",)
    endpoint.dispose()
    endpoint.dispose()  # idempotent
    state.change(BACKGROUND, lambda draft: draft.__setitem__("count", 5))
    assert len(published) == 1
    with pytest.raises(ServiceEndpointError, match="Remote service endpoint is disposed"):
        await endpoint.invoke(service_catalogue_call(), publish, BACKGROUND)
    # the provider is untouched by a peer's endpoint going away
    other = create_remote_service_endpoint(provider)
    assert await other.invoke(ServiceCall(Counter.id, "bump"), publish, BACKGROUND) == 6


@pytest.mark.anyio
async def test_duplicate_and_unknown_subscription_ids_are_refused_with_codes() -> None:
    provider, _state = _provider()
    endpoint = create_remote_service_endpoint(provider)

    def publish(subscription_id: str, update: ServiceProviderUpdate, ctx: Context) -> None:
        pass

    await endpoint.invoke(
        service_subscribe_call("s1", Counter.id, "singleton"), publish, BACKGROUND
    )
    with pytest.raises(ServiceEndpointError, match="already active") as duplicate:
        await endpoint.invoke(
            service_subscribe_call("s1", Counter.id, "singleton"), publish, BACKGROUND
        )
    assert duplicate.value.code == "subscription_active"
    assert await endpoint.invoke(service_unsubscribe_call("s1"), publish, BACKGROUND) is None
    with pytest.raises(ServiceEndpointError, match="was not found") as missing:
        await endpoint.invoke(service_unsubscribe_call("s1"), publish, BACKGROUND)
    assert missing.value.code == "subscription_not_found"


@pytest.mark.anyio
async def test_a_raise_from_publish_reaches_the_publisher() -> None:
    provider, state = _provider()
    endpoint = create_remote_service_endpoint(provider)

    def publish(subscription_id: str, update: ServiceProviderUpdate, ctx: Context) -> None:
        if not isinstance(update, ServiceUnavailableUpdate):
            raise RuntimeError("peer queue refused")

    await endpoint.invoke(
        service_subscribe_call("s1", Counter.id, "singleton"), publish, BACKGROUND
    )
    with pytest.raises(RuntimeError, match="peer queue refused"):
        state.change(BACKGROUND, lambda draft: draft.__setitem__("count", 1))


@pytest.mark.anyio
async def test_a_wrong_argument_count_is_a_coded_error() -> None:
    provider, _state = _provider()
    endpoint = create_remote_service_endpoint(provider)
    for _ in range(2):  # the second time the provider answers from its per-member cache
        with pytest.raises(Exception, match="takes 0 argument") as error:
            await endpoint.invoke(
                ServiceCall(Counter.id, "bump", (1, 2)), lambda *a: None, BACKGROUND
            )
        assert getattr(error.value, "code", None) == "service_invalid_value"
    bump = ServiceCall(Counter.id, "bump", ())
    assert await endpoint.invoke(bump, lambda *a: None, BACKGROUND) == 1  # a count that binds


@pytest.mark.anyio
async def test_a_subscription_reset_drops_buffered_updates_and_suppresses_covered_ones() -> None:
    # the hook a per-client queue uses on overflow (docs/design/chord.md#provider-queue)
    provider, state = _provider()
    received: list[ServiceProviderUpdate] = []
    subscription = provider.subscribe(Counter.id, "singleton", lambda u, ctx: received.append(u))
    for _ in range(3):  # buffered: the subscription is not active yet
        state.change(BACKGROUND, lambda draft: draft.__setitem__("count", draft["count"] + 1))
    snapshot = subscription.reset()
    members = {member.name: member for member in snapshot.instances[0].members}
    assert members["state"].to_json() == {
        "name": "state",
        "kind": "state",
        "sequence": 3,
        "ops": [["r", {"count": 3}]],
    }
    subscription.activate()
    assert received == []  # the three buffered updates are covered by the reset
    state.change(BACKGROUND, lambda draft: draft.__setitem__("count", 10))
    assert [u.sequence for u in received if isinstance(u, ServiceStateUpdate)] == [4]
    subscription.close()
    with pytest.raises(RuntimeError, match="subscription is closed"):
        subscription.reset()
