"""RemoteServiceProvider: catalogue, lifecycle, invoke checks and subscriptions (docs/design/chord.md#provider-checks)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from chord.context import BACKGROUND, Context, with_cancel
from chord.remote import (
    ProviderSubscription,
    RemoteServiceError,
    RemoteServiceProvider,
    ServiceCall,
    ServiceCatalogueEntry,
    ServiceClosedUpdate,
    ServiceMethodSnapshot,
    ServiceProviderUpdate,
    ServiceReplacedUpdate,
    ServiceSpawnedUpdate,
    ServiceStateSnapshot,
    ServiceStateUpdate,
    ServiceUnavailableUpdate,
    service_catalogue_call,
)
from chord.services import InstanceAddress, define_service
from chord.state import replicated_state

Models = define_service("test.models")
Dialogs = define_service("test.dialogs")
Local = define_service("test.local", local=True)


async def _noop(*args: Any) -> None:
    return None


def _models(revision: int = 0) -> dict[str, Any]:
    return {"state": replicated_state({"revision": revision}), "select": _noop}


def _collect(provider: RemoteServiceProvider, service_id: str = Models.id, mode: Any = "singleton"):
    updates: list[ServiceProviderUpdate] = []
    subscription = provider.subscribe(service_id, mode, lambda update, ctx: updates.append(update))
    return subscription, updates


def _append(key: str, item: Any) -> Callable[[Any], None]:
    def mutate(draft: Any) -> None:
        draft[key].append(item)

    return mutate


def _code(error: pytest.ExceptionInfo[RemoteServiceError]) -> str:
    return error.value.code


# -- construction and catalogue (item 43) -----------------------------------------------------


def test_catalogue_lists_services_with_their_modes() -> None:
    provider = RemoteServiceProvider([Models, (Dialogs, "keyed")])
    assert provider.catalogue == (
        ServiceCatalogueEntry(Models.id, "singleton"),
        ServiceCatalogueEntry(Dialogs.id, "keyed"),
    )


def test_provider_rejects_local_services_duplicates_and_bad_entries() -> None:
    # item 43
    with pytest.raises(TypeError, match=r"Local service test\.local cannot be published remotely"):
        RemoteServiceProvider([Local])
    with pytest.raises(TypeError, match="duplicate IDs"):
        RemoteServiceProvider([Models, (Models, "keyed")])
    with pytest.raises(TypeError, match="mode must be"):
        RemoteServiceProvider([(Models, "many")])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="Service or"):
        RemoteServiceProvider(["test.models"])  # type: ignore[list-item]


def test_provider_rejects_mode_misuse_and_unexposable_members() -> None:
    # item 43
    provider = RemoteServiceProvider([Models, (Dialogs, "keyed")])
    provider.provide(Models, _models())
    with pytest.raises(RemoteServiceError, match="is singleton, not keyed") as caught:
        provider.spawn(Models, "wrong", _models())
    assert _code(caught) == "service_mode_mismatch"
    with pytest.raises(RemoteServiceError, match="is keyed, not singleton"):
        provider.provide(Dialogs, _models())
    with pytest.raises(TypeError, match=r"test\.dialogs\.request is not remotely exposable"):
        provider.spawn(Dialogs, "invalid", {"request": object(), "submit": _noop})
    with pytest.raises(RemoteServiceError, match="already has a provider"):
        provider.provide(Models, _models())
    with pytest.raises(RemoteServiceError, match="process-local") as local:
        provider.use(Local)
    assert _code(local) == "service_not_allowed"
    with pytest.raises(RemoteServiceError) as unknown:
        provider.provide(define_service("test.unknown"), _models())
    assert _code(unknown) == "service_not_allowed"


def test_use_returns_the_raw_implementation() -> None:
    provider = RemoteServiceProvider([Models])
    implementation = _models()
    with pytest.raises(RemoteServiceError, match="has no local provider"):
        provider.use(Models)
    provider.provide(Models, implementation)
    assert provider.use(Models) is implementation


# -- snapshots and state updates (item 44) ----------------------------------------------------


def test_snapshot_is_a_base_batch_at_the_current_sequence_and_pushes_emit_p_ops() -> None:
    # item 44
    provider = RemoteServiceProvider([Models])
    state = replicated_state({"entries": [{"id": "one"}]})
    provider.provide(Models, {"state": state, "select": _noop})
    state.change(BACKGROUND, _append("entries", {"id": "two"}))
    subscription, updates = _collect(provider)
    assert subscription.snapshot.instances[0].members == (
        ServiceMethodSnapshot("select"),
        ServiceStateSnapshot("state", 1, (("r", {"entries": [{"id": "one"}, {"id": "two"}]}),)),
    )
    subscription.activate()
    state.change(BACKGROUND, _append("entries", {"id": "three"}))
    state.change(BACKGROUND, _append("entries", {"id": "four"}))
    assert [(u.sequence, u.ops) for u in updates if isinstance(u, ServiceStateUpdate)] == [
        (2, (("p", ("entries",), 2, 0, [{"id": "three"}]),)),
        (3, (("p", ("entries",), 3, 0, [{"id": "four"}]),)),
    ]
    assert updates[0].to_json() == {
        "type": "state",
        "member": "state",
        "sequence": 2,
        "ops": [["p", ["entries"], 2, 0, [{"id": "three"}]]],
    }


def test_snapshot_shares_the_current_value_without_copying() -> None:
    provider = RemoteServiceProvider([Models])
    implementation = _models()
    provider.provide(Models, implementation)
    subscription, _ = _collect(provider)
    member = subscription.snapshot.instances[0].members[1]
    assert isinstance(member, ServiceStateSnapshot)
    assert member.ops[0][1] is implementation["state"].value


# -- singleton lifecycle (items 45, 46) -------------------------------------------------------


def test_withdraw_and_replace_emit_lifecycle_updates() -> None:
    provider = RemoteServiceProvider([Models])
    provider.provide(Models, _models(1))
    subscription, updates = _collect(provider)
    subscription.activate()
    provider.withdraw(Models)
    provider.withdraw(Models)  # nothing left: no second update
    replacement = _models(2)
    provider.replace(Models, replacement)
    assert [type(u) for u in updates] == [ServiceUnavailableUpdate, ServiceReplacedUpdate]
    replaced = updates[1]
    assert isinstance(replaced, ServiceReplacedUpdate)
    assert replaced.snapshot.to_json() == {
        "members": [
            {"name": "select", "kind": "method"},
            {"name": "state", "kind": "state", "sequence": 0, "ops": [["r", {"revision": 2}]]},
        ]
    }


def test_withdrawn_state_no_longer_publishes() -> None:
    provider = RemoteServiceProvider([Models])
    implementation = _models()
    provider.provide(Models, implementation)
    subscription, updates = _collect(provider)
    subscription.activate()
    provider.withdraw(Models)
    implementation["state"].replace(BACKGROUND, {"revision": 5})
    assert [type(u) for u in updates] == [ServiceUnavailableUpdate]


@pytest.mark.parametrize(
    "implementation",
    [
        {"select": _noop},  # a member is missing
        {"state": _noop, "select": _noop},  # state became a method
        {"state": replicated_state({}), "select": _noop, "extra": _noop},  # a member was added
    ],
)
def test_replacement_must_preserve_the_member_shape(implementation: dict[str, Any]) -> None:
    # item 46
    provider = RemoteServiceProvider([Models])
    original = _models()
    provider.provide(Models, original)
    with pytest.raises(
        RemoteServiceError, match="replacement must preserve its member shape"
    ) as caught:
        provider.replace(Models, implementation)
    assert _code(caught) == "service_member_mismatch"
    with pytest.raises(RemoteServiceError, match="preserve its member shape"):
        provider.validate_replacement(Models, implementation)
    provider.withdraw(Models)
    with pytest.raises(RemoteServiceError, match="preserve its member shape"):
        provider.provide(Models, implementation)
    provider.provide(Models, _models())
    assert provider.use(Models) is not original


# -- keyed instances --------------------------------------------------------------------------


def test_spawn_numbers_generations_per_key_and_close_is_idempotent() -> None:
    provider = RemoteServiceProvider([(Dialogs, "keyed")])
    subscription, updates = _collect(provider, Dialogs.id, "keyed")
    subscription.activate()
    close_first = provider.spawn(Dialogs, "a", _models())
    with pytest.raises(
        RemoteServiceError, match="already has a live instance with key a"
    ) as duplicate:
        provider.spawn(Dialogs, "a", _models())
    assert _code(duplicate) == "service_mode_mismatch"
    close_first()
    close_first()
    provider.spawn(Dialogs, "a", _models())
    with pytest.raises(TypeError, match="non-empty"):
        provider.spawn(Dialogs, "", _models())
    assert [u.to_json()["type"] for u in updates] == ["spawned", "closed", "spawned"]
    first, closed, second = updates
    assert isinstance(first, ServiceSpawnedUpdate) and isinstance(second, ServiceSpawnedUpdate)
    assert first.instance.instance == InstanceAddress("a", 1)
    assert closed == ServiceClosedUpdate(InstanceAddress("a", 1))
    assert second.instance.instance == InstanceAddress("a", 2)


def test_keyed_snapshot_lists_instances_sorted_by_key() -> None:
    provider = RemoteServiceProvider([(Dialogs, "keyed")])
    for key in ("b", "c", "a"):
        provider.spawn(Dialogs, key, _models())
    subscription, _ = _collect(provider, Dialogs.id, "keyed")
    keys = [i.instance.key for i in subscription.snapshot.instances if i.instance is not None]
    assert keys == ["a", "b", "c"]
    empty = RemoteServiceProvider([(Dialogs, "keyed")])
    assert _collect(empty, Dialogs.id, "keyed")[0].snapshot.instances == ()


# -- invoke -----------------------------------------------------------------------------------


async def _invoke_code(provider: RemoteServiceProvider, call: ServiceCall) -> str:
    with pytest.raises(RemoteServiceError) as caught:
        await provider.invoke(call, BACKGROUND)
    return caught.value.code


@pytest.mark.anyio
async def test_invoke_runs_sync_and_async_methods_with_the_context_last() -> None:
    provider = RemoteServiceProvider([Models])
    received: list[tuple[Any, ...]] = []

    async def select(model: Any, ctx: Context) -> dict[str, Any]:
        received.append((model, ctx))
        return {"ok": True}

    def version(ctx: Context) -> str:
        return "1.0"

    provider.provide(Models, {"select": select, "version": version, "nothing": _noop})
    assert await provider.invoke(ServiceCall(Models.id, "select", ({"m": 1},)), BACKGROUND) == {
        "ok": True
    }
    assert received == [({"m": 1}, BACKGROUND)]
    assert await provider.invoke(ServiceCall(Models.id, "version"), BACKGROUND) == "1.0"
    assert await provider.invoke(ServiceCall(Models.id, "nothing"), BACKGROUND) is None


@pytest.mark.anyio
async def test_invoke_checks_in_order_with_stable_codes() -> None:
    provider = RemoteServiceProvider([Models, (Dialogs, "keyed")])
    address = InstanceAddress("a", 1)
    assert (
        await _invoke_code(provider, ServiceCall("test.unknown", "select")) == "service_not_allowed"
    )
    assert await _invoke_code(provider, service_catalogue_call()) == "service_not_allowed"
    assert (
        await _invoke_code(provider, ServiceCall(Models.id, "select", (), address))
        == "service_mode_mismatch"
    )
    assert await _invoke_code(provider, ServiceCall(Models.id, "select")) == "service_not_found"
    assert (
        await _invoke_code(provider, ServiceCall(Dialogs.id, "select")) == "service_mode_mismatch"
    )
    assert await _invoke_code(provider, ServiceCall(Dialogs.id, "select", (), address)) == (
        "service_instance_not_found"
    )
    close = provider.spawn(Dialogs, "a", _models())
    stale = InstanceAddress("a", 7)
    assert (
        await _invoke_code(provider, ServiceCall(Dialogs.id, "select", (), stale))
        == "service_stale_instance"
    )
    assert await _invoke_code(provider, ServiceCall(Dialogs.id, "missing", (), address)) == (
        "service_member_not_found"
    )
    assert await _invoke_code(provider, ServiceCall(Dialogs.id, "state", (), address)) == (
        "service_member_mismatch"
    )
    assert await provider.invoke(ServiceCall(Dialogs.id, "select", (), address), BACKGROUND) is None
    close()
    assert await _invoke_code(provider, ServiceCall(Dialogs.id, "select", (), address)) == (
        "service_instance_not_found"
    )
    provider.spawn(Dialogs, "a", _models())
    assert (
        await _invoke_code(provider, ServiceCall(Dialogs.id, "select", (), address))
        == "service_stale_instance"
    )


# -- subscriptions (items 47, 48, 49) ---------------------------------------------------------


def test_subscribe_checks_mode_and_provider() -> None:
    provider = RemoteServiceProvider([Models, (Dialogs, "keyed")])
    with pytest.raises(RemoteServiceError, match="has no provider") as missing:
        provider.subscribe(Models.id, "singleton", lambda update, ctx: None)
    assert _code(missing) == "service_not_found"
    with pytest.raises(RemoteServiceError, match="is keyed, not singleton") as mode:
        provider.subscribe(Dialogs.id, "singleton", lambda update, ctx: None)
    assert _code(mode) == "service_mode_mismatch"
    with pytest.raises(RemoteServiceError) as unknown:
        provider.subscribe("test.unknown", "singleton", lambda update, ctx: None)
    assert _code(unknown) == "service_not_allowed"


def test_failing_listener_does_not_block_others_and_reaches_the_publisher() -> None:
    # item 47
    failure = RuntimeError("listener failed")
    provider = RemoteServiceProvider([Models])
    provider.provide(Models, _models(1))
    delivered: list[ServiceProviderUpdate] = []

    def failing(update: ServiceProviderUpdate, ctx: Context) -> None:
        raise failure

    failing_subscription = provider.subscribe(Models.id, "singleton", failing)
    succeeding = provider.subscribe(Models.id, "singleton", lambda u, ctx: delivered.append(u))
    failing_subscription.activate()
    succeeding.activate()
    with pytest.raises(RuntimeError) as caught:
        provider.replace(Models, _models(2))
    assert caught.value is failure
    assert len(delivered) == 1


def test_several_listener_failures_raise_one_group() -> None:
    provider = RemoteServiceProvider([Models])
    implementation = _models()
    provider.provide(Models, implementation)

    def fail(update: ServiceProviderUpdate, ctx: Context) -> None:
        raise ValueError("broken")

    for _ in range(2):
        provider.subscribe(Models.id, "singleton", fail).activate()
    with pytest.raises(
        ExceptionGroup, match=r"Failed to publish remote service test\.models update"
    ):
        implementation["state"].replace(BACKGROUND, {"revision": 1})
    assert implementation["state"].value == {"revision": 1}  # committed before the raise


def test_update_covered_by_a_new_subscription_snapshot_is_not_replayed() -> None:
    # item 48
    provider = RemoteServiceProvider([Models])
    state = replicated_state({"revision": 0})
    provider.provide(Models, {"state": state, "select": _noop})
    late_updates: list[int] = []
    late: list[ProviderSubscription] = []

    def first(update: ServiceProviderUpdate, ctx: Context) -> None:
        if not isinstance(update, ServiceStateUpdate) or update.sequence != 1:
            return
        state.replace(BACKGROUND, {"revision": 2})
        subscription = provider.subscribe(
            Models.id,
            "singleton",
            lambda u, c: (
                late_updates.append(u.sequence) if isinstance(u, ServiceStateUpdate) else None
            ),
        )
        member = subscription.snapshot.instances[0].members[1]
        assert isinstance(member, ServiceStateSnapshot) and member.sequence == 2
        subscription.activate()
        late.append(subscription)

    provider.subscribe(Models.id, "singleton", first).activate()
    state.replace(BACKGROUND, {"revision": 1})
    assert late_updates == []
    state.replace(BACKGROUND, {"revision": 3})
    assert late_updates == [3]


def test_activation_delivers_every_buffered_update_before_raising() -> None:
    # item 49
    provider = RemoteServiceProvider([Models])
    state = replicated_state({"revision": 0})
    provider.provide(Models, {"state": state, "select": _noop})
    delivered: list[int] = []

    def failing(update: ServiceProviderUpdate, ctx: Context) -> None:
        assert isinstance(update, ServiceStateUpdate)
        delivered.append(update.sequence)
        raise RuntimeError(f"failed {update.sequence}")

    subscription = provider.subscribe(Models.id, "singleton", failing)
    state.replace(BACKGROUND, {"revision": 1})
    state.replace(BACKGROUND, {"revision": 2})
    with pytest.raises(
        ExceptionGroup, match="Failed to activate remote service subscription"
    ) as caught:
        subscription.activate()
    assert delivered == [1, 2]
    assert [str(e) for e in caught.value.exceptions] == ["failed 1", "failed 2"]


def test_updates_carry_the_publishing_context() -> None:
    provider = RemoteServiceProvider([Models])
    state = replicated_state({"revision": 0})
    provider.provide(Models, {"state": state, "select": _noop})
    seen: list[Context] = []
    provider.subscribe(Models.id, "singleton", lambda u, ctx: seen.append(ctx)).activate()
    ctx, _cancel = with_cancel(BACKGROUND)
    state.replace(ctx, {"revision": 1})
    provider.withdraw(Models)
    assert seen == [ctx, BACKGROUND]


# -- dispose (item 50, provider side) ---------------------------------------------------------


@pytest.mark.anyio
async def test_dispose_emits_unavailable_and_closed_then_refuses_everything() -> None:
    # item 50
    provider = RemoteServiceProvider([Models, (Dialogs, "keyed")])
    provider.provide(Models, _models())
    provider.spawn(Dialogs, "a", _models())
    singleton, singleton_updates = _collect(provider)
    keyed, keyed_updates = _collect(provider, Dialogs.id, "keyed")
    singleton.activate()
    keyed.activate()
    provider.dispose()
    provider.dispose()
    assert [type(u) for u in singleton_updates] == [ServiceUnavailableUpdate]
    assert keyed_updates == [ServiceClosedUpdate(InstanceAddress("a", 1))]
    with pytest.raises(RuntimeError, match="Remote service provider is disposed"):
        await provider.invoke(ServiceCall(Models.id, "select"), BACKGROUND)
    for operation in (
        lambda: provider.provide(Models, _models()),
        lambda: provider.subscribe(Models.id, "singleton", lambda u, c: None),
        lambda: provider.spawn(Dialogs, "b", _models()),
        lambda: provider.use(Models),
        lambda: provider.withdraw(Models),
    ):
        with pytest.raises(RuntimeError, match="Remote service provider is disposed"):
            operation()


def test_a_not_yet_active_subscription_keeps_its_terminal_updates() -> None:
    provider = RemoteServiceProvider([Models])
    provider.provide(Models, _models())
    subscription, updates = _collect(provider)
    provider.dispose()
    assert updates == []
    subscription.activate()
    assert [type(u) for u in updates] == [ServiceUnavailableUpdate]
    subscription.activate()
    assert len(updates) == 1
