"""Graph validation at startup (docs/design/chord.md#host-startup): clear errors naming the facets."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chord.facets import Facet, FacetEnvironment, create_facet_host, define_facet
from chord.services import Service, define_service

First = define_service("test.graph.first", local=True)
Second = define_service("test.graph.second", local=True)
Keyed = define_service("test.graph.keyed", local=True)


class _Impl:
    value = 1


def _facet(
    facet_id: str,
    trace: list[str],
    *,
    provides: tuple[Service[Any], ...] = (),
    provides_many: tuple[Service[Any], ...] = (),
    uses: tuple[Service[Any], ...] = (),
    observes: tuple[Service[Any], ...] = (),
) -> Facet:
    def setup(env: FacetEnvironment) -> None:
        trace.append(f"setup {facet_id}")
        for service in provides:
            env.provide(service, _Impl())
        for service in provides_many:
            env.provide_many(service)
        for service in uses:
            env.use(service)
        for service in observes:
            env.observe(service, lambda instance, ctx: None)
        env.on_activate(lambda: trace.append(f"activate {facet_id}"))
        env.on_deactivate(lambda: trace.append(f"dispose {facet_id}"))

    return define_facet(facet_id, setup)


def test_facet_ids_must_be_non_empty_and_unique() -> None:
    trace: list[str] = []
    with pytest.raises(RuntimeError, match="Facet ID must not be empty"):
        create_facet_host([_facet("", trace)])
    with pytest.raises(RuntimeError, match="Facet IDs must be unique within a generation"):
        create_facet_host([_facet("a", trace), _facet("a", trace)])
    with pytest.raises(TypeError, match="item 0 is not a Facet"):
        create_facet_host(["a"])  # type: ignore[list-item]
    assert trace == []


async def _start_fails(facets: list[Facet], message: str) -> None:
    with pytest.raises(RuntimeError) as caught:
        async with create_facet_host(facets):
            pytest.fail("the host must not start")
    assert str(caught.value) == message


@pytest.mark.anyio
async def test_missing_provider_names_the_facet_and_the_requirement() -> None:
    trace: list[str] = []
    await _start_fails(
        [_facet("consumer", trace, uses=(First,))],
        "Facet consumer requires local/test.graph.first/singleton, but no facet provides it",
    )
    await _start_fails(
        [_facet("watcher", trace, observes=(Keyed,))],
        "Facet watcher requires local/test.graph.keyed/keyed, but no facet provides it",
    )
    assert not any(line.startswith("activate") for line in trace)
    # setup ran, so the setup-time disposals ran too
    assert trace == ["setup consumer", "dispose consumer", "setup watcher", "dispose watcher"]


@pytest.mark.anyio
async def test_duplicate_providers_and_mode_mismatches_are_rejected() -> None:
    trace: list[str] = []
    await _start_fails(
        [_facet("a", trace, provides=(First,)), _facet("b", trace, provides=(First,))],
        "Service test.graph.first is provided by both a and b",
    )
    await _start_fails(
        [_facet("a", trace, provides=(First,)), _facet("b", trace, provides_many=(First,))],
        "Service test.graph.first is provided as both singleton and keyed",
    )
    await _start_fails(
        [_facet("p", trace, provides=(First,)), _facet("c", trace, observes=(First,))],
        "Facet c requires test.graph.first as keyed, but p provides it as singleton",
    )
    await _start_fails(
        [_facet("p", trace, provides_many=(Keyed,)), _facet("c", trace, uses=(Keyed,))],
        "Facet c requires test.graph.keyed as singleton, but p provides it as keyed",
    )
    assert not any(line.startswith("activate") for line in trace)


@pytest.mark.anyio
async def test_a_cycle_names_the_stuck_facets_in_input_order() -> None:
    trace: list[str] = []
    Third = define_service("test.graph.third", local=True)
    await _start_fails(
        [
            _facet("first", trace, provides=(First,), uses=(Second,)),
            _facet("second", trace, provides=(Second,), uses=(First,)),
        ],
        "Facet dependency cycle: first, second",
    )
    await _start_fails(
        [
            _facet("downstream", trace, uses=(First,)),
            _facet("free", trace, provides=(Third,)),
            _facet("first", trace, provides=(First,), uses=(Second,)),
            _facet("second", trace, provides=(Second,), uses=(First, Third)),
        ],
        "Facet dependency cycle: downstream, first, second",
    )
    assert not any(line.startswith("activate") for line in trace)


@pytest.mark.anyio
async def test_a_facet_may_use_its_own_provision() -> None:
    trace: list[str] = []
    async with create_facet_host([_facet("self", trace, provides=(First,), uses=(First,))]):
        assert trace == ["setup self", "activate self"]


@pytest.mark.anyio
async def test_async_setup_is_rejected_before_anything_activates() -> None:
    trace: list[str] = []

    async def setup(env: FacetEnvironment) -> None:
        trace.append("never runs")

    with pytest.raises(RuntimeError, match="Facet async setup must be synchronous"):
        async with create_facet_host(
            [_facet("before", trace), define_facet("async", setup)]  # type: ignore[arg-type]
        ):
            pytest.fail("the host must not start")
    assert trace == ["setup before", "dispose before"]


@st.composite
def _graphs(draw: st.DrawFn) -> tuple[list[list[int]], list[int]]:
    """Facet i may use services provided by facets j < i (a DAG), plus a random input order."""
    size = draw(st.integers(min_value=1, max_value=7))
    graph = [
        draw(st.lists(st.integers(min_value=0, max_value=i - 1), unique=True)) if i else []
        for i in range(size)
    ]
    return graph, draw(st.permutations(range(size)))


@pytest.mark.anyio
@settings(max_examples=100, deadline=None)
@given(case=_graphs())
async def test_activation_respects_every_edge_and_disposal_is_its_reverse(
    case: tuple[list[list[int]], list[int]],
) -> None:
    graph, input_order = case
    services = [define_service(f"test.graph.s{i}", local=True) for i in range(len(graph))]
    trace: list[str] = []
    facets = [
        _facet(f"f{i}", trace, provides=(services[i],), uses=tuple(services[j] for j in needs))
        for i, needs in enumerate(graph)
    ]
    shuffled = [facets[index] for index in input_order]
    async with create_facet_host(shuffled):
        activated = [line.split()[1] for line in trace if line.startswith("activate")]
    disposed = [line.split()[1] for line in trace if line.startswith("dispose")]
    assert disposed == list(reversed(activated))
    position = {facet_id: index for index, facet_id in enumerate(activated)}
    for i, needs in enumerate(graph):
        for j in needs:
            assert position[f"f{j}"] < position[f"f{i}"]
    # ties keep input order: facets with no dependency activate in input order first
    roots = [facet.id for facet in shuffled if not graph[int(facet.id[1:])]]
    assert activated[: len(roots)] == roots
