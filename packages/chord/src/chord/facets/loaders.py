"""Facet loaders: where a generation of facets comes from, and how it is let go.

A host never imports code. A *loader* produces one generation of facets as :class:`LoadedFacets`
(the facets plus a ``dispose`` that releases whatever the loading held: imported modules, a
plugin manager). The reload coordinator owns the generations: after a successful
``host.reload`` it disposes the *old* generation; after a failed one, the *candidate*.

* :func:`static_facet_loader` returns the same facets on every load (nothing to release).
* :func:`combine_facet_loaders` concatenates several loaders. A failure part-way disposes what
  was already loaded, newest first, so a half-loaded generation never leaks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol

import anyio
import msgspec

from chord.facets.facet import Facet

__all__ = ["FacetLoader", "LoadedFacets", "combine_facet_loaders", "static_facet_loader"]


async def _nothing() -> None:
    return None


class LoadedFacets(msgspec.Struct, frozen=True):
    """One loaded generation: its facets and the function that releases it."""

    facets: tuple[Facet, ...]
    dispose: Callable[[], Awaitable[None]] = _nothing


class FacetLoader(Protocol):
    """Something that can produce a fresh generation of facets on demand."""

    async def load(self) -> LoadedFacets: ...


def _facet_tuple(facets: Iterable[Facet]) -> tuple[Facet, ...]:
    result = tuple(facets)
    for index, facet in enumerate(result):
        if not isinstance(facet, Facet):
            raise TypeError(f"Facet loader item {index} is not a Facet: {type(facet).__name__}")
    return result


class _StaticLoader:
    __slots__ = ("_facets",)

    def __init__(self, facets: tuple[Facet, ...]) -> None:
        self._facets = facets

    async def load(self) -> LoadedFacets:
        return LoadedFacets(self._facets)

    def __repr__(self) -> str:
        return f"static_facet_loader({[facet.id for facet in self._facets]!r})"


def static_facet_loader(facets: Iterable[Facet]) -> FacetLoader:
    """A loader whose every ``load`` returns ``facets``; its ``dispose`` does nothing."""
    return _StaticLoader(_facet_tuple(facets))


def _raise_collected(message: str, errors: list[Exception]) -> None:
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ExceptionGroup(message, errors)


async def _dispose_concurrently(generations: Sequence[LoadedFacets]) -> list[Exception]:
    errors: list[Exception] = []

    async def run(generation: LoadedFacets) -> None:
        try:
            await generation.dispose()
        except Exception as error:
            errors.append(error)

    async with anyio.create_task_group() as group:
        for generation in reversed(generations):
            group.start_soon(run, generation)
    return errors


class _CombinedLoader:
    __slots__ = ("_loaders",)

    def __init__(self, loaders: tuple[FacetLoader, ...]) -> None:
        self._loaders = loaders

    async def load(self) -> LoadedFacets:
        loaded: list[LoadedFacets] = []
        for loader in self._loaders:
            try:
                generation = await loader.load()
            except Exception as error:
                cleanup = await _dispose_concurrently(loaded)
                if cleanup:
                    raise ExceptionGroup(
                        "Facet loading and cleanup failed", [error, *cleanup]
                    ) from None
                raise
            loaded.append(generation)
        facets = tuple(facet for generation in loaded for facet in generation.facets)
        disposed = False

        async def dispose() -> None:
            nonlocal disposed
            if disposed:
                return
            disposed = True
            errors: list[Exception] = []
            for generation in reversed(loaded):
                try:
                    await generation.dispose()
                except Exception as error:
                    errors.append(error)
            _raise_collected("Failed to dispose loaded facets", errors)

        return LoadedFacets(facets, dispose)


def combine_facet_loaders(loaders: Iterable[FacetLoader]) -> FacetLoader:
    """Load each of ``loaders`` in order and concatenate their facets into one generation."""
    return _CombinedLoader(tuple(loaders))
