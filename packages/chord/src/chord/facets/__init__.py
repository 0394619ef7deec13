"""Facets and their host: compose an application from units that provide and use services.

* :class:`Facet` / :func:`define_facet`: an id and a synchronous ``setup(env)``.
* :class:`FacetEnvironment`: what ``setup`` declares with (``use``, ``observe``, ``provide``,
  ``provide_many``, ``replicated_state``, ``own``, ``on_activate``, ``on_deactivate``).
* :func:`create_facet_host`: validates the graph, activates providers before consumers, reloads
  facets in place (docs/design/decisions.md#d4) and disposes in reverse; an async context manager.
* Loaders (:func:`static_facet_loader`, :func:`combine_facet_loaders`) produce generations of facets.
"""

from chord.facets.environment import FacetEnvironment, ServiceSpawner
from chord.facets.facet import Facet, define_facet
from chord.facets.handles import RELOAD_WAIT_SECONDS
from chord.facets.host import FacetHost, create_facet_host
from chord.facets.loaders import (
    FacetLoader,
    LoadedFacets,
    combine_facet_loaders,
    static_facet_loader,
)

__all__ = [
    "RELOAD_WAIT_SECONDS",
    "Facet",
    "FacetEnvironment",
    "FacetHost",
    "FacetLoader",
    "LoadedFacets",
    "ServiceSpawner",
    "combine_facet_loaders",
    "create_facet_host",
    "define_facet",
    "static_facet_loader",
]
