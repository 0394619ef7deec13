"""The pluggy contract between chord and a facet package.

A facet package names one *plugin module* in its ``chord.facets`` entry point. That module carries
a :data:`hookimpl`-marked function ``chord_facets(host)`` which returns the facets the package
contributes to a host of that kind (``"session"``, ``"tui"``, ...)::

    from chord import hookimpl

    @hookimpl
    def chord_facets(host: str) -> list[Facet]:
        if host == "session":
            return [greeter_session_facet]
        if host == "tui":
            return [greeter_tui_facet]
        return []

pluggy is used only for this synchronous "collect contributions" call, made once per loaded
generation with a fresh :class:`pluggy.PluginManager`; the facet lifecycle itself is async and
belongs to the facet host, not to pluggy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from chord.facets.facet import Facet

__all__ = ["PROJECT_NAME", "chord_facets", "hookimpl", "hookspec"]

PROJECT_NAME = "chord"
"""pluggy project name: hook implementations must be marked with this project's marker."""

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
"""Marks a hook specification of chord (used by this module only)."""

hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
"""Marks a facet package's hook implementation, e.g. ``@hookimpl def chord_facets(host): ...``."""


@hookspec
def chord_facets(host: str) -> list[Facet]:  # type: ignore[empty-body]
    """Return the facets this package contributes to a host of kind ``host``.

    Return an empty list (or ``None``) for a host kind the package has nothing for. Called once
    per loaded generation; keep it free of side effects: build facets, start nothing.
    """
