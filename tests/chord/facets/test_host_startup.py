"""Host startup, activation order and disposal (docs/design/chord.md#host-startup, #disposal)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, FacetHost, create_facet_host, define_facet
from chord.remote import LoopbackServiceSource, RemoteServiceError, RemoteServiceProvider
from chord.services import define_service


def _raises(error: Exception) -> Callable[[], None]:
    """A callback that raises ``error`` (for disposals and activations that fail)."""

    def run() -> None:
        raise error

    return run


Source = define_service("test.startup.source")
Projection = define_service("test.startup.projection")
HostValues = define_service("test.startup.host-values", local=True)
Watched = define_service("test.startup.watched")


class _Source:
    async def read(self, ctx: Context) -> str:
        return "value"


@pytest.mark.anyio
async def test_setup_in_input_order_providers_activate_first_disposal_in_reverse() -> None:
    # item 71
    trace: list[str] = []
    handles: dict[str, Any] = {}

    def projection(env: FacetEnvironment) -> None:
        trace.append("setup projection")
        source = env.use(Source)
        handles["source"] = source

        class _Projection:
            async def read(self, ctx: Context) -> str:
                return await source.read(ctx)

        env.provide(Projection, _Projection())
        env.on_activate(lambda: trace.append("activate projection"))
        env.on_deactivate(lambda: trace.append("dispose projection"))

    def source(env: FacetEnvironment) -> None:
        trace.append("setup source")
        env.provide(Source, _Source())
        env.on_activate(lambda: trace.append("activate source"))
        env.on_deactivate(lambda: trace.append("dispose source"))

    async with create_facet_host(
        [define_facet("projection", projection), define_facet("source", source)]
    ) as host:
        assert trace == [
            "setup projection",
            "setup source",
            "activate source",
            "activate projection",
        ]
        assert host.phase == "active"
        assert host.facet_ids == ["source", "projection"]
        assert await handles["source"].read(BACKGROUND) == "value"
        assert await host.services.use(Projection).read(BACKGROUND) == "value"
    assert trace[-2:] == ["dispose projection", "dispose source"]
    assert host.phase == "dead"


@pytest.mark.anyio
async def test_a_failing_activation_disposes_what_was_activated_and_re_raises() -> None:
    trace: list[str] = []

    def first(env: FacetEnvironment) -> None:
        env.provide(HostValues, {"name": "values"})
        env.on_activate(lambda: trace.append("activate first"))
        env.on_deactivate(lambda: trace.append("dispose first"))

    def second(env: FacetEnvironment) -> None:
        env.use(HostValues)

        def fail() -> None:
            raise ValueError("activation failed")

        env.on_deactivate(lambda: trace.append("dispose second"))
        env.on_activate(fail)

    host = create_facet_host([define_facet("second", second), define_facet("first", first)])
    with pytest.raises(ValueError, match="activation failed"):
        async with host:
            pytest.fail("the host must not start")
    assert trace == ["activate first", "dispose second", "dispose first"]
    assert host.phase == "dead"
    with pytest.raises(RuntimeError, match="Facet host cannot reload while dead"):
        await host.reload([])


@pytest.mark.anyio
async def test_startup_failure_with_failing_cleanup_raises_both() -> None:
    def broken(env: FacetEnvironment) -> None:
        env.own(_raises(KeyError("cleanup failed")))
        env.on_activate(_raises(ValueError("activation failed")))

    with pytest.raises(
        ExceptionGroup, match="Facet generation startup and cleanup failed"
    ) as caught:
        async with create_facet_host([define_facet("broken", broken)]):
            pytest.fail("the host must not start")
    assert [type(error) for error in caught.value.exceptions] == [ValueError, KeyError]


@pytest.mark.anyio
async def test_dispose_is_idempotent_and_the_context_exit_after_it_is_a_no_op() -> None:
    disposals: list[str] = []

    def facet(env: FacetEnvironment) -> None:
        env.own(lambda: disposals.append("own"))

    async with create_facet_host([define_facet("f", facet)]) as host:
        await host.dispose()
        await host.dispose()
        assert host.phase == "dead"
    assert disposals == ["own"]


@pytest.mark.anyio
async def test_a_host_starts_once_and_has_no_services_before_it_starts() -> None:
    host = create_facet_host([])
    with pytest.raises(RuntimeError, match="not assembled while created"):
        _ = host.services
    with pytest.raises(RuntimeError, match="Facet host cannot reload while created"):
        await host.reload([])
    async with host:
        assert host.services.catalogue == ()
    with pytest.raises(RuntimeError, match="can be started only once"):
        async with host:
            pass


@pytest.mark.anyio
async def test_an_error_in_the_body_still_disposes_and_propagates() -> None:
    disposals: list[str] = []

    def facet(env: FacetEnvironment) -> None:
        env.own(lambda: disposals.append("own"))

    with pytest.raises(LookupError, match="body failed"):
        async with create_facet_host([define_facet("f", facet)]):
            raise LookupError("body failed")
    assert disposals == ["own"]


@pytest.mark.anyio
async def test_own_registered_during_activation_is_disposed_and_subscriptions_stop(
    recorder: Any,
) -> None:
    # item 79
    deliveries = recorder()
    states: list[Any] = []

    def consumer(env: FacetEnvironment) -> None:
        watched = env.use(Watched)
        env.on_activate(
            lambda: env.own(watched.state.subscribe(lambda v, c, d: deliveries.append(d)))
        )

    def provider(env: FacetEnvironment) -> None:
        state = env.replicated_state({"value": 0})
        states.append(state)
        env.provide(Watched, {"state": state})

    async with create_facet_host(
        [define_facet("consumer", consumer), define_facet("provider", provider)]
    ):
        assert [d.kind for d in deliveries] == ["hydrate"]
        states[0].change(BACKGROUND, lambda draft: draft.__setitem__("value", 1))
        await deliveries.wait_for_length(2)
        assert deliveries[1].kind == "update"
    states[0].change(BACKGROUND, lambda draft: draft.__setitem__("value", 2))
    await anyio.lowlevel.checkpoint()
    assert len(deliveries) == 2


@pytest.mark.anyio
async def test_a_local_singleton_passes_the_raw_members_through_a_handle() -> None:
    # item 80
    values = {"name": "session", "tags": {"x"}, "use": "host value"}
    seen: dict[str, Any] = {}

    def consumer(env: FacetEnvironment) -> None:
        handle = env.use(HostValues)
        with pytest.raises(
            RuntimeError, match="Facet consumer service handles cannot be used while setting_up"
        ):
            _ = handle.name

        def activate() -> None:
            seen["handle"] = handle
            seen["name"] = handle.name
            seen["tags"] = handle.tags

        env.on_activate(activate)

    async with create_facet_host(
        [
            define_facet("consumer", consumer),
            define_facet("provider", lambda env: env.provide(HostValues, values)),
        ]
    ) as host:
        assert seen["handle"] is not values
        assert seen["name"] == "session"
        assert seen["tags"] is values["tags"]  # a set: the raw object, not a JSON copy
        with pytest.raises(RemoteServiceError, match=f"Service {HostValues.id} is process-local"):
            host.services.use(HostValues)


@pytest.mark.anyio
async def test_host_exit_cancels_observer_tasks_in_its_task_group() -> None:
    Dialogs = define_service("test.startup.dialogs", local=True)
    cancelled = anyio.Event()
    started = anyio.Event()

    async def watch(dialog: Any, ctx: Context) -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    def provider(env: FacetEnvironment) -> None:
        dialogs = env.provide_many(Dialogs)
        env.on_activate(lambda: env.own(dialogs.spawn("one", {"n": 1})))

    async with create_facet_host(
        [
            define_facet("watcher", lambda env: env.observe(Dialogs, watch)),
            define_facet("provider", provider),
        ]
    ) as host:
        assert isinstance(host, FacetHost)
        with anyio.fail_after(5):
            await started.wait()
    assert cancelled.is_set()


@pytest.mark.anyio
async def test_a_host_composes_external_sources_with_its_own_facets() -> None:
    # item 81: requirements nobody provides locally are routed to the source offering them
    Left = define_service("test.startup.left")
    Right = define_service("test.startup.right")

    class _Value:
        def __init__(self, value: str) -> None:
            self._value = value

        async def read(self, ctx: Context) -> str:
            return self._value

    left = RemoteServiceProvider([Left])
    left.provide(Left, _Value("left"))
    handles: dict[str, Any] = {}

    def combined(env: FacetEnvironment) -> None:
        handles["left"] = env.use(Left)
        handles["right"] = env.use(Right)

    async with anyio.create_task_group() as group:
        source = LoopbackServiceSource(left, task_group=group)
        async with create_facet_host(
            [
                define_facet("combined", combined),
                define_facet("right", lambda env: env.provide(Right, _Value("right"))),
            ],
            service_sources=[source],
        ) as host:
            assert await handles["left"].read(BACKGROUND) == "left"
            assert await handles["right"].read(BACKGROUND) == "right"
            assert [entry.service_id for entry in host.services.catalogue] == [Right.id]
        group.cancel_scope.cancel()


async def _local_read(ctx: Context) -> str:
    return "local"


@pytest.mark.anyio
async def test_a_service_offered_by_two_sources_is_rejected_and_a_local_provision_wins() -> None:
    Shared = define_service("test.startup.shared")
    first = RemoteServiceProvider([Shared])
    second = RemoteServiceProvider([Shared])
    for provider in (first, second):
        provider.provide(Shared, {"read": lambda ctx: "x"})
    consumer = define_facet("consumer", lambda env: env.use(Shared) and None)
    with pytest.raises(
        RuntimeError, match=f"Facet host service {Shared.id} is offered by more than one source"
    ):
        async with create_facet_host(
            [consumer],
            service_sources=[LoopbackServiceSource(first), LoopbackServiceSource(second)],
        ):
            pass
    # A facet's own provision wins over a source's offer: the source is not even opened for it.
    handles: list[Any] = []
    async with create_facet_host(
        [
            define_facet("consumer", lambda env: handles.append(env.use(Shared))),
            define_facet("local", lambda env: env.provide(Shared, {"read": _local_read})),
        ],
        service_sources=[LoopbackServiceSource(first)],
    ):
        assert await handles[0].read(BACKGROUND) == "local"
