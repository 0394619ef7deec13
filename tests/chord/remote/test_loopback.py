"""The in-process loopback transport and source (docs/design/chord.md#vocabulary, #observe)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context, with_cancel
from chord.delta import apply_immutable
from chord.json import JsonError
from chord.remote import (
    LoopbackServiceSource,
    RemoteServiceProvider,
    ServiceCall,
    ServiceCatalogueEntry,
    ServiceProviderUpdate,
    ServiceStateUpdate,
    create_loopback_transport,
    create_remote_service_binding,
)
from chord.services import define_service
from chord.state import ReplicaState, replicated_state

Echo = define_service("test.echo")
Models = define_service("test.models")


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The binding only uses anyio primitives: run it on both backends."""
    return request.param


@pytest.mark.anyio
async def test_arguments_and_results_are_not_cloned() -> None:
    # item 58
    provider = RemoteServiceProvider([Echo])
    received: list[Any] = []
    response = {"value": "response"}

    async def echo(payload: Any, ctx: Context) -> Any:
        received.append(payload)
        return response

    provider.provide(Echo, {"echo": echo})
    async with anyio.create_task_group() as group:
        binding = create_remote_service_binding(
            services=[Echo], transport=create_loopback_transport(provider), task_group=group
        )
        service = binding.use(Echo)
        await binding.ready(BACKGROUND)
        request = {"value": "request"}
        assert await service.echo(request, BACKGROUND) is response
        assert received[0] is request
        await binding.dispose(BACKGROUND)
    provider.dispose()


@pytest.mark.anyio
async def test_invoke_hands_the_callers_context_to_the_method() -> None:
    provider = RemoteServiceProvider([Echo])
    contexts: list[Context] = []

    def echo(payload: Any, ctx: Context) -> Any:
        contexts.append(ctx)
        return payload

    provider.provide(Echo, {"echo": echo})
    transport = create_loopback_transport(provider)
    ctx, _cancel = with_cancel(BACKGROUND)
    assert await transport.invoke(ServiceCall(Echo.id, "echo", ("hi",)), ctx) == "hi"
    assert contexts == [ctx]


@pytest.mark.anyio
async def test_subscription_starts_at_the_provider_before_subscribe_returns() -> None:
    provider = RemoteServiceProvider([Models])
    state = replicated_state({"revision": 0})
    provider.provide(Models, {"state": state})
    transport = create_loopback_transport(provider)
    updates: list[ServiceProviderUpdate] = []
    pending = transport.subscribe(
        Models.id, "singleton", lambda u, ctx: updates.append(u), BACKGROUND
    )
    state.replace(BACKGROUND, {"revision": 1})  # after subscribe, before the hand-off is awaited
    subscription = await pending
    assert subscription.snapshot.to_json()["instances"][0]["members"][0]["sequence"] == 0
    subscription.activate()
    assert [u.sequence for u in updates if isinstance(u, ServiceStateUpdate)] == [1]
    subscription.close()
    state.replace(BACKGROUND, {"revision": 2})
    assert len(updates) == 1


@pytest.mark.anyio
async def test_loopback_source_offers_the_catalogue_and_opens_bindings() -> None:
    provider = RemoteServiceProvider([Models])
    provider.provide(Models, {"state": replicated_state({"revision": 7})})
    errors: list[BaseException] = []
    async with anyio.create_task_group() as group:
        source = LoopbackServiceSource(provider, task_group=group)
        assert source.accepts_unavailable_services is False
        assert await source.catalogue(BACKGROUND) == (
            ServiceCatalogueEntry(Models.id, "singleton"),
        )
        services = source.open(
            services=[Models.id], assert_access=lambda: None, on_error=errors.append
        )
        models = services.use(Models)
        await services.ready(BACKGROUND)
        assert models.state.value == {"revision": 7}
        await services.dispose(BACKGROUND)
    assert errors == []
    provider.dispose()


@pytest.mark.anyio
async def test_a_loopback_replica_takes_the_providers_revisions_by_reference() -> None:
    provider = RemoteServiceProvider([Models])
    state = replicated_state({"revision": 7, "items": [{"a": 1}]})
    provider.provide(Models, {"state": state})
    errors: list[BaseException] = []
    async with anyio.create_task_group() as group:
        services = LoopbackServiceSource(provider, task_group=group).open(
            services=[Models.id], assert_access=lambda: None, on_error=errors.append
        )
        models = services.use(Models)
        await services.ready(BACKGROUND)
        assert models.state.value is state.value
        state.apply(BACKGROUND, [("s", ("revision",), 8)])
        # the replica applies the same ops copy-on-write: what they did not touch stays shared
        assert models.state.value == {"revision": 8, "items": [{"a": 1}]}
        assert models.state.value["items"] is state.value["items"]
        await services.dispose(BACKGROUND)
    assert errors == []
    provider.dispose()


@pytest.mark.anyio
async def test_a_loopback_replica_takes_over_each_published_revision_without_copying() -> None:
    # a list appended to every revision (a conversation's entries) is not copied again by the
    # replica: it holds the very revision the state published, equal to applying the ops
    provider = RemoteServiceProvider([Models])
    state = replicated_state({"revision": 0, "entries": []})
    provider.provide(Models, {"state": state})
    errors: list[BaseException] = []
    seen: list[Any] = []
    async with anyio.create_task_group() as group:
        services = LoopbackServiceSource(provider, task_group=group).open(
            services=[Models.id], assert_access=lambda: None, on_error=errors.append
        )
        models = services.use(Models)
        await services.ready(BACKGROUND)
        models.state.subscribe(lambda value, ctx, delivery: seen.append(value))
        rebuilt: Any = {"revision": 0, "entries": []}
        for n in range(1, 6):
            before: Any = state.value
            ops: list[Any] = [("p", ("entries",), 2 * n - 2, 0, [{"n": n}, {"m": n}])]
            ops.append(("s", ("revision",), n))
            state.apply(BACKGROUND, ops)
            rebuilt = apply_immutable(rebuilt, ops)
            assert models.state.value is state.value
            assert models.state.value == rebuilt
            assert before["entries"] == rebuilt["entries"][: 2 * n - 2]  # the old one unchanged
        state.change(BACKGROUND, lambda draft: draft["entries"].append({"n": 6}))  # pyright: ignore[reportIndexIssue, reportAttributeAccessIssue, reportArgumentType, reportCallIssue]
        assert models.state.value is state.value
        assert models.state.value["entries"][-1] == {"n": 6}
        assert seen[-1] is state.value
        # a consumer hydrating after the appends sees the same document
        late = LoopbackServiceSource(provider, task_group=group).open(
            services=[Models.id], assert_access=lambda: None, on_error=errors.append
        )
        hydrated = late.use(Models)
        await late.ready(BACKGROUND)
        assert hydrated.state.value == models.state.value
        state.apply(BACKGROUND, [("p", ("entries",), 11, 0, [{"n": 7}])])
        assert hydrated.state.value is models.state.value is state.value
        await late.dispose(BACKGROUND)
        await services.dispose(BACKGROUND)
    assert errors == []
    provider.dispose()


def test_a_replica_applies_a_trusted_batch_it_does_not_hold_the_base_of() -> None:
    # the same ops tuple, but the replica's revision is another object: it applies the ops
    state = replicated_state({"items": [1]})
    replica = ReplicaState()
    replica.hydrate(0, [("r", {"items": [1]})], BACKGROUND, trusted=True)
    published: list[Any] = []
    state.add_source_listener(lambda ops, sequence, ctx: published.append(ops))
    state.apply(BACKGROUND, [("p", ("items",), 1, 0, [2])])
    replica.update(1, published[0], BACKGROUND, trusted=True)
    assert replica.value == {"items": [1, 2]} == state.value
    assert replica.value is not state.value


@pytest.mark.anyio
async def test_a_binding_not_marked_trusted_checks_what_its_transport_hands_over() -> None:
    # a provider state that skipped its own check (trusted=True) with a value that is not JSON:
    # only a binding marked trusted (the loopback's) takes it without a second check
    provider = RemoteServiceProvider([Models])
    provider.provide(Models, {"state": replicated_state({"x": float("nan")}, trusted=True)})
    errors: list[BaseException] = []
    async with anyio.create_task_group() as group:
        binding = create_remote_service_binding(
            services=[Models],
            transport=create_loopback_transport(provider),
            on_error=errors.append,
            task_group=group,
        )
        binding.use(Models)
        with pytest.raises(JsonError, match="non-finite"):
            await binding.ready(BACKGROUND)
        await binding.dispose(BACKGROUND)
    provider.dispose()
