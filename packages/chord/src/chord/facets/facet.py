"""Facets: the unit of code a host loads.

A facet is an id plus a *synchronous* ``setup(env)``. In ``setup`` the facet declares what it
provides and what it needs by calling the :class:`~chord.facets.environment.FacetEnvironment`
(those calls *are* the declarations; there is no separate manifest) and registers callbacks for
activation and cleanup. Facets of different features meet only through shared service ids.

:func:`define_facet` builds one, either directly or as a decorator::

    approval = define_facet("@pi/approval", setup_approval)

    @define_facet("@pi/indexer")
    def indexer(env: FacetEnvironment) -> None:
        harness = env.use(Harness)
        env.on_activate(lambda: env.own(harness.register_task_kind(kind)))

The decorator form replaces the function with the :class:`Facet`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    from chord.facets.environment import FacetEnvironment

__all__ = ["Facet", "FacetSetup", "define_facet"]

FacetSetup = Callable[["FacetEnvironment"], Any]
"""``setup(env)``: must return ``None``; returning an awaitable is rejected by the host."""


@dataclass(frozen=True, slots=True)
class Facet:
    """One loadable unit: an id unique within a host generation and its synchronous setup."""

    id: str
    setup: FacetSetup

    def __post_init__(self) -> None:
        if not isinstance(self.id, str):
            raise TypeError(f"Facet ID must be a string, got {type(self.id).__name__}")
        if not callable(self.setup):
            raise TypeError(f"Facet {self.id} setup must be callable")


@overload
def define_facet(id: str, setup: FacetSetup) -> Facet: ...
@overload
def define_facet(id: str, setup: None = None) -> Callable[[FacetSetup], Facet]: ...
def define_facet(id: str, setup: FacetSetup | None = None) -> Facet | Callable[[FacetSetup], Facet]:
    """Create a :class:`Facet`; without ``setup``, return a decorator that takes it."""
    if setup is not None:
        return Facet(id, setup)

    def decorate(fn: FacetSetup) -> Facet:
        return Facet(id, fn)

    return decorate
