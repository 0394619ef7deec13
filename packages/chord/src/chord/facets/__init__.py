"""Facets and their host: compose an application from units that provide and use services.

* :class:`Facet` / :func:`define_facet`: an id and a synchronous ``setup(env)``.
* :class:`FacetEnvironment`: what ``setup`` declares with (``use``, ``observe``, ``provide``,
  ``provide_many``, ``replicated_state``, ``own``, ``on_activate``, ``on_deactivate``).
* :func:`create_facet_host`: validates the graph, activates providers before consumers, reloads
  facets in place (docs/design/decisions.md#d4) and disposes in reverse; an async context manager.
* Keyed dialogs (:mod:`.dialogs`): :func:`provide_dialogs` / :class:`Dialogs` ask the user
  through a keyed service and return the checked answer; :func:`dialog_key` is the usual key.
* Loaders (:func:`static_facet_loader`, :func:`combine_facet_loaders`) produce generations of facets.
"""

from chord.facets.dialogs import Dialogs, DialogSpawner, dialog_key, provide_dialogs
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
    "DialogSpawner",
    "Dialogs",
    "Facet",
    "FacetEnvironment",
    "FacetHost",
    "FacetLoader",
    "LoadedFacets",
    "ServiceSpawner",
    "combine_facet_loaders",
    "create_facet_host",
    "define_facet",
    "dialog_key",
    "provide_dialogs",
    "static_facet_loader",
]
