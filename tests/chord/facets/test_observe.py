"""Keyed observation of remotable services (docs/design/chord.md#observe)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, ServiceSpawner, create_facet_host, define_facet
from chord.remote import create_loopback_transport, create_remote_service_binding
from chord.services import define_service

Dialogs = define_service("test.observe.dialogs")


class _Dialog:
    """A remotable keyed instance: a replicated request and a ``decide`` method."""

    def __init__(self, env: FacetEnvironment, request: dict[str, Any]) -> None:
        self.request = env.replicated_state(request)
        self._decided = anyio.Event()
        self._decision: Any = None

    async def decide(self, decision: Any, ctx: Context) -> None:
        self._decision = decision
        self._decided.set()


@pytest.mark.anyio
async def test_observation_starts_when_the_observer_activates_and_remote_consumers_see_it(
    recorder: Any,
) -> None:
    # item 73
    trace = recorder()

    def observer(env: FacetEnvironment) -> None:
        async def handler(dialog: Any, ctx: Context) -> None:
            trace.append(f"observe {dialog.request.value['name']}")

        env.observe(Dialogs, handler)
        env.on_activate(lambda: trace.append("activate observer"))

    def provider(env: FacetEnvironment) -> None:
        dialogs = env.provide_many(Dialogs)

        def activate() -> None:
            trace.append("activate provider")
            dialogs.spawn("one", _Dialog(env, {"name": "one"}))

        env.on_activate(activate)

    async with create_facet_host(
        [define_facet("observer", observer), define_facet("provider", provider)]
    ) as host:
        await trace.wait_until(lambda items: "observe one" in items)
        assert trace == ["activate provider", "activate observer", "observe one"]

        remote_values = recorder()
        async with anyio.create_task_group() as group:
            remote = create_remote_service_binding(
                services=[Dialogs],
                transport=create_loopback_transport(host.services),
                task_group=group,
            )
            remote.observe(
                Dialogs, lambda view, ctx: remote_values.append(view.request.value["name"])
            )
            await remote.ready(BACKGROUND)
            await remote_values.wait_for_length(1)
            assert remote_values == ["one"]
            await remote.dispose(BACKGROUND)


@pytest.mark.anyio
async def test_instances_are_hydrated_before_the_handler_and_close_aborts_the_task(
    recorder: Any,
) -> None:
    # items 57, 87
    views = recorder()
    outcomes = recorder()
    spawner: list[ServiceSpawner[Any]] = []
    dialogs_made: list[_Dialog] = []
    envs: list[FacetEnvironment] = []

    def presentation(env: FacetEnvironment) -> None:
        async def handler(dialog: Any, ctx: Context) -> None:
            request = dialog.request.value
            assert request is not None  # hydrated before the task starts
            views.append((dialog, ctx))
            await dialog.decide({"allow": request["name"] == "ok"}, ctx)
            try:
                await ctx.wait_cancelled()
            finally:
                outcomes.append(f"ended {request['name']}")

        env.observe(Dialogs, handler)

    def session(env: FacetEnvironment) -> None:
        envs.append(env)
        spawner.append(env.provide_many(Dialogs))

    async with create_facet_host(
        [define_facet("presentation", presentation), define_facet("session", session)]
    ):
        dialog = _Dialog(envs[0], {"name": "ok"})
        dialogs_made.append(dialog)
        close = spawner[0].spawn("call-1", dialog)
        with anyio.fail_after(5):
            await dialog._decided.wait()
        assert dialog._decision == {"allow": True}
        ((view, ctx),) = views
        captured = view.decide

        close()
        await outcomes.wait_for_length(1)
        assert outcomes == ["ended ok"]
        assert ctx.cancelled
        for touch in (lambda: view.request, lambda: captured({"allow": False}, BACKGROUND)):
            with pytest.raises(
                RuntimeError, match=f"Keyed service {Dialogs.id} observation is closed"
            ):
                touch()

        again = _Dialog(envs[0], {"name": "again"})
        spawner[0].spawn("call-1", again)  # the same key: a new generation, view and task
        await views.wait_for_length(2)
        assert views[1][0] is not view
        with anyio.fail_after(5):
            await again._decided.wait()


@pytest.mark.anyio
async def test_a_late_joining_observer_gets_a_task_for_an_open_instance(recorder: Any) -> None:
    # item 88: the observer facet is reloaded after the instance was spawned
    seen = recorder()

    def presentation(env: FacetEnvironment) -> None:
        env.observe(Dialogs, lambda dialog, ctx: seen.append(dialog.request.value["name"]))

    def session(env: FacetEnvironment) -> None:
        dialogs = env.provide_many(Dialogs)
        env.on_activate(lambda: env.own(dialogs.spawn("open", _Dialog(env, {"name": "open"}))))

    async with create_facet_host(
        [define_facet("presentation", presentation), define_facet("session", session)]
    ) as host:
        await seen.wait_for_length(1)
        await host.reload([define_facet("presentation", presentation)])
        await seen.wait_for_length(2)
        assert seen == ["open", "open"]


@pytest.mark.anyio
async def test_reloading_a_keyed_provider_aborts_old_tasks_and_starts_new_ones(
    recorder: Any,
) -> None:
    # item 74
    observed = recorder()

    def consumer(env: FacetEnvironment) -> None:
        env.observe(Dialogs, lambda dialog, ctx: observed.append((dialog, ctx)))

    def provider(name: str) -> Any:
        def setup(env: FacetEnvironment) -> None:
            dialogs = env.provide_many(Dialogs)
            env.on_activate(lambda: dialogs.spawn("current", _Dialog(env, {"name": name})) and None)

        return define_facet("keyed-provider", setup)

    async with create_facet_host([define_facet("consumer", consumer), provider("A")]) as host:
        await observed.wait_for_length(1)
        first, first_ctx = observed[0]
        assert first.request.value == {"name": "A"}

        await host.reload([provider("B")])
        await observed.wait_for_length(2)
        assert first_ctx.cancelled
        with pytest.raises(RuntimeError, match="observation is closed"):
            _ = first.request.value
        second, second_ctx = observed[1]
        assert second.request.value == {"name": "B"}
    assert second_ctx.cancelled


@pytest.mark.anyio
async def test_observer_errors_are_reported_to_on_error(recorder: Any) -> None:
    errors = recorder()

    async def handler(dialog: Any, ctx: Context) -> None:
        raise ValueError(f"cannot show {dialog.request.value['name']}")

    def session(env: FacetEnvironment) -> None:
        dialogs = env.provide_many(Dialogs)
        env.on_activate(lambda: env.own(dialogs.spawn("x", _Dialog(env, {"name": "x"}))))

    async with create_facet_host(
        [
            define_facet("observer", lambda env: env.observe(Dialogs, handler)),
            define_facet("session", session),
        ],
        on_error=errors.append,
    ):
        await errors.wait_for_length(1)
    assert str(errors[0]) == "cannot show x"


@pytest.mark.anyio
async def test_keyed_instances_are_addressed_by_key_and_generation(recorder: Any) -> None:
    # a reload closes the old instance; the respawned key gets the next generation
    observed = recorder()

    def provider(name: str) -> Any:
        def setup(env: FacetEnvironment) -> None:
            dialogs = env.provide_many(Dialogs)
            env.on_activate(lambda: env.own(dialogs.spawn("k", _Dialog(env, {"name": name}))))

        return define_facet("provider", setup)

    def addresses(host: Any) -> list[tuple[str, int]]:
        subscription = host.services.subscribe(Dialogs.id, "keyed", lambda update, ctx: None)
        try:
            return [
                (item.instance.key, item.instance.generation)
                for item in subscription.snapshot.instances
            ]
        finally:
            subscription.close()

    async with create_facet_host(
        [
            define_facet(
                "watcher", lambda env: env.observe(Dialogs, lambda d, c: observed.append(c))
            ),
            provider("A"),
        ]
    ) as host:
        assert addresses(host) == [("k", 1)]
        await observed.wait_for_length(1)
        await host.reload([provider("B")])
        assert addresses(host) == [("k", 2)]
        await observed.wait_for_length(2)
        assert observed[0].cancelled and not observed[1].cancelled
