"""Facet packages: discovery through entry points, per-generation import, and hot reload.

A feature is written as its own installable package (see ``docs/authoring-facets.md``):

* its distribution declares an entry point in group ``chord.facets`` naming a plugin module;
* that module's :data:`hookimpl` ``chord_facets(host)`` returns the facets for a host kind;
* :func:`discover_facet_packages` finds installed packages and development folders;
* :func:`load_generation` imports a private, fresh copy of a package (a :class:`FacetGeneration`),
  compiling only what no :class:`CodeCache` entry holds for the very same source text;
* :class:`ReloadCoordinator` watches the sources and swaps generations into a running host.

Named ``facet_packages`` for what it handles, not just "packages", which read as the monorepo's
``packages/`` folder (issue 37). A *generation* here, and everywhere in chord, is one numbered
incarnation of something reloaded or respawned; pico3's one model call is the *model call* (its
durable task name ``pi.generation`` keeps the old spelling).
"""

from __future__ import annotations

from chord.facet_packages.codecache import CodeCache, default_cache_dir
from chord.facet_packages.discovery import (
    ENTRY_POINT_GROUP,
    FacetDiscoveryError,
    FacetPackage,
    discover_facet_packages,
    facet_package_from_folder,
    installed_facet_packages,
)
from chord.facet_packages.generation import (
    FacetGeneration,
    FacetLoadError,
    load_facet_packages,
    load_generation,
    package_facet_loader,
)
from chord.facet_packages.hookspecs import hookimpl, hookspec
from chord.facet_packages.reload_coordinator import (
    AroundReload,
    ReloadableHost,
    ReloadCoordinator,
    ReloadOutcome,
    ReloadReport,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "AroundReload",
    "CodeCache",
    "FacetDiscoveryError",
    "FacetGeneration",
    "FacetLoadError",
    "FacetPackage",
    "ReloadCoordinator",
    "ReloadOutcome",
    "ReloadReport",
    "ReloadableHost",
    "default_cache_dir",
    "discover_facet_packages",
    "facet_package_from_folder",
    "hookimpl",
    "hookspec",
    "installed_facet_packages",
    "load_facet_packages",
    "load_generation",
    "package_facet_loader",
]
