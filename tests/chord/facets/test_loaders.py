"""Loaders (docs/design/chord.md#loaders): static and combined generations of facets."""

from __future__ import annotations

import pytest

from chord.facets import (
    Facet,
    LoadedFacets,
    combine_facet_loaders,
    define_facet,
    static_facet_loader,
)


def _facet(facet_id: str) -> Facet:
    return define_facet(facet_id, lambda env: None)


class _Recording:
    """A loader that records loads and disposals, and can be told to fail either."""

    def __init__(
        self,
        name: str,
        trace: list[str],
        *,
        fail_load: bool = False,
        fail_dispose: bool = False,
    ) -> None:
        self.name = name
        self.trace = trace
        self.fail_load = fail_load
        self.fail_dispose = fail_dispose

    async def load(self) -> LoadedFacets:
        self.trace.append(f"load {self.name}")
        if self.fail_load:
            raise ValueError(f"load {self.name} failed")

        async def dispose() -> None:
            self.trace.append(f"dispose {self.name}")
            if self.fail_dispose:
                raise ValueError(f"dispose {self.name} failed")

        return LoadedFacets((_facet(f"{self.name}.a"), _facet(f"{self.name}.b")), dispose)


@pytest.mark.anyio
async def test_static_loader_returns_the_same_facets_on_every_load() -> None:
    facets = [_facet("one"), _facet("two")]
    loader = static_facet_loader(facets)
    first = await loader.load()
    second = await loader.load()
    assert first.facets == tuple(facets)
    assert second.facets == tuple(facets)
    await first.dispose()
    await first.dispose()  # a no-op, any number of times
    assert (await loader.load()).facets == tuple(facets)


def test_static_loader_rejects_things_that_are_not_facets() -> None:
    with pytest.raises(TypeError, match="item 1 is not a Facet"):
        static_facet_loader([_facet("one"), "two"])  # type: ignore[list-item]


@pytest.mark.anyio
async def test_combined_loader_concatenates_in_order_and_disposes_in_reverse_once() -> None:
    trace: list[str] = []
    loader = combine_facet_loaders([_Recording("x", trace), _Recording("y", trace)])
    loaded = await loader.load()
    assert [facet.id for facet in loaded.facets] == ["x.a", "x.b", "y.a", "y.b"]
    assert trace == ["load x", "load y"]
    await loaded.dispose()
    await loaded.dispose()
    assert trace == ["load x", "load y", "dispose y", "dispose x"]


@pytest.mark.anyio
async def test_a_later_load_failure_disposes_the_earlier_generations() -> None:
    trace: list[str] = []
    loader = combine_facet_loaders(
        [_Recording("x", trace), _Recording("y", trace), _Recording("z", trace, fail_load=True)]
    )
    with pytest.raises(ValueError, match="load z failed"):
        await loader.load()
    assert trace[:3] == ["load x", "load y", "load z"]
    assert sorted(trace[3:]) == ["dispose x", "dispose y"]


@pytest.mark.anyio
async def test_a_load_failure_whose_cleanup_fails_raises_both() -> None:
    trace: list[str] = []
    loader = combine_facet_loaders(
        [_Recording("x", trace, fail_dispose=True), _Recording("z", trace, fail_load=True)]
    )
    with pytest.raises(ExceptionGroup, match="Facet loading and cleanup failed") as caught:
        await loader.load()
    messages = [str(error) for error in caught.value.exceptions]
    assert messages == ["load z failed", "dispose x failed"]


@pytest.mark.anyio
async def test_combined_dispose_runs_every_disposal_and_reports_failures() -> None:
    trace: list[str] = []
    single = await combine_facet_loaders(
        [_Recording("x", trace, fail_dispose=True), _Recording("y", trace)]
    ).load()
    with pytest.raises(ValueError, match="dispose x failed"):
        await single.dispose()
    assert trace[-2:] == ["dispose y", "dispose x"]

    both = await combine_facet_loaders(
        [_Recording("p", trace, fail_dispose=True), _Recording("q", trace, fail_dispose=True)]
    ).load()
    with pytest.raises(ExceptionGroup, match="Failed to dispose loaded facets") as caught:
        await both.dispose()
    assert [str(error) for error in caught.value.exceptions] == [
        "dispose q failed",
        "dispose p failed",
    ]
    await both.dispose()  # idempotent even after a failure
    assert trace.count("dispose q") == 1
