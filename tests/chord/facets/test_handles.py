"""Per-facet service handles (docs/design/chord.md#facet-environment ``use``, docs/design/chord.md#handle-rules)."""

from __future__ import annotations

from typing import Any

import pytest

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.remote import RemoteServiceError
from chord.services import define_service
from chord.state import Delivery

Source = define_service("test.handles.source")
Watched = define_service("test.handles.watched")
Local = define_service("test.handles.local", local=True)


class _Source:
    """Remotable: public members are methods only; bookkeeping stays private."""

    def __init__(self, value: str = "value") -> None:
        self._value = value
        self._received: list[Any] = []

    async def read(self, ctx: Context) -> str:
        return self._value

    async def echo(self, payload: Any, ctx: Context) -> Any:
        self._received.append(payload)
        return payload

    async def broken(self, ctx: Context) -> Any:
        return {"when": {1, 2}}


class _Local:
    def __init__(self, name: str) -> None:
        self.name = name
        self.seen: list[str] = []

    def hello(self, who: str) -> str:
        self.seen.append(who)
        return f"{self.name} greets {who}"

    async def later(self, who: str) -> str:
        return f"{self.name} later {who}"


def _provider(facet_id: str, service: Any, impl: object) -> Any:
    return define_facet(facet_id, lambda env: env.provide(service, impl))


@pytest.mark.anyio
async def test_a_handle_is_stable_within_a_facet_and_distinct_across_facets() -> None:
    # items 72, 78
    handles: dict[str, list[Any]] = {"a": [], "b": []}

    def consumer(name: str) -> Any:
        def setup(env: FacetEnvironment) -> None:
            first = env.use(Source)
            assert env.use(Source) is first
            handles[name].append(first)
            with pytest.raises(
                RuntimeError, match=f"Facet {name} service handles cannot be used while setting_up"
            ):
                first.read(BACKGROUND)

        return define_facet(name, setup)

    async with create_facet_host(
        [consumer("a"), consumer("b"), _provider("source", Source, _Source())]
    ):
        (a,), (b,) = handles["a"], handles["b"]
        assert a is not b
        assert await a.read(BACKGROUND) == "value"
        assert await b.read(BACKGROUND) == "value"
    with pytest.raises(RuntimeError, match="Facet a service handles cannot be used while dead"):
        a.read(BACKGROUND)


@pytest.mark.anyio
async def test_a_dead_facets_handle_and_captured_methods_raise_while_a_peer_keeps_working() -> None:
    # item 78
    handles: list[Any] = []
    cleanup: list[str] = []
    peer: list[Any] = []

    def consumer(generation: str) -> Any:
        def setup(env: FacetEnvironment) -> None:
            source = env.use(Source)
            handles.append(source)

            async def deactivate() -> None:
                cleanup.append(f"{generation}:{await source.read(BACKGROUND)}")

            env.on_deactivate(deactivate)

        return define_facet("scoped", setup)

    async with create_facet_host(
        [
            consumer("A"),
            define_facet("peer", lambda env: peer.append(env.use(Source))),
            _provider("source", Source, _Source()),
        ]
    ) as host:
        captured = handles[0].read
        await host.reload([consumer("B")])
        assert cleanup == ["A:value"]  # access stays on while the facet's own disposals run
        assert handles[1] is not handles[0]
        message = "Facet scoped service handles cannot be used while dead"
        with pytest.raises(RuntimeError, match=message):
            handles[0].read(BACKGROUND)
        with pytest.raises(RuntimeError, match=message):
            captured(BACKGROUND)
        assert await handles[1].read(BACKGROUND) == "value"
        assert await peer[0].read(BACKGROUND) == "value"
    assert cleanup == ["A:value", "B:value"]
    with pytest.raises(RuntimeError, match="Facet peer service handles cannot be used while dead"):
        peer[0].read(BACKGROUND)


@pytest.mark.anyio
async def test_remotable_calls_take_and_return_strict_json_only() -> None:
    handles: list[Any] = []
    impl = _Source()
    async with create_facet_host(
        [
            define_facet("consumer", lambda env: handles.append(env.use(Source))),
            _provider("source", Source, impl),
        ]
    ):
        source = handles[0]
        payload = {"items": [1, "two", None, {"ok": True}]}
        assert await source.echo(payload, BACKGROUND) == payload
        with pytest.raises(
            RemoteServiceError, match=r"argument 0 is not strict JSON.*\$\.bad\[1\]"
        ):
            source.echo({"bad": [1, {2, 3}]}, BACKGROUND)
        with pytest.raises(RemoteServiceError, match=r"not strict JSON.*\$\.when"):
            await source.broken(BACKGROUND)
        with pytest.raises(RemoteServiceError, match="requires a trailing Context"):
            source.echo(1)
        assert impl._received == [payload]  # the bad calls never reached the provider


@pytest.mark.anyio
async def test_a_remotable_state_is_a_read_only_replica_with_a_stable_identity() -> None:
    # item 77
    sources: list[Any] = []
    values: list[Any] = []
    deliveries: list[Delivery] = []
    handles: list[Any] = []

    def consumer(env: FacetEnvironment) -> None:
        watched = env.use(Watched)
        handles.append(watched)

        def activate() -> None:
            env.own(
                watched.state.subscribe(lambda v, c, d: (values.append(v), deliveries.append(d)))
            )

        env.on_activate(activate)

    def provider(start: int) -> Any:
        def setup(env: FacetEnvironment) -> None:
            state = env.replicated_state({"value": start})
            sources.append(state)
            env.provide(Watched, {"state": state})

        return define_facet("state-provider", setup)

    async with create_facet_host([define_facet("state-consumer", consumer), provider(1)]) as host:
        watched = handles[0]
        retained = watched.state
        assert retained is watched.state
        assert retained.value == {"value": 1}
        assert not hasattr(retained, "change")  # consumers cannot write
        assert values == [{"value": 1}]

        await host.reload([provider(2)])
        assert watched.state is retained
        assert retained.value == {"value": 2}
        assert values[-1] == {"value": 2}
        assert deliveries[-1].kind == "hydrate"
        sources[0].change(BACKGROUND, lambda draft: draft.__setitem__("value", 3))
        assert retained.value == {"value": 2}  # the old source is detached
    with pytest.raises(
        RuntimeError, match="Facet state-consumer service handles cannot be used while dead"
    ):
        _ = retained.value


@pytest.mark.anyio
async def test_local_handles_pass_objects_through_and_follow_a_rebind() -> None:
    # item 80 + reload of a local singleton: a peer's captured method reaches the new object
    handles: list[Any] = []
    async with create_facet_host(
        [
            define_facet("consumer", lambda env: handles.append(env.use(Local))),
            _provider("local", Local, _Local("old")),
        ]
    ) as host:
        local = handles[0]
        hello = local.hello
        assert hello("x") == "old greets x"
        assert await local.later("y") == "old later y"
        assert local.name == "old"
        assert local.seen is local.seen  # attributes are the provider's own objects
        with pytest.raises(AttributeError):
            local.name = "changed"
        with pytest.raises(AttributeError):
            _ = local._private

        await host.reload([_provider("local", Local, _Local("new"))])
        assert handles[0] is local
        assert hello("x") == "new greets x"
        assert local.name == "new"
