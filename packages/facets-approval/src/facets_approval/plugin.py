"""The plugin module named by the ``chord.facets`` entry point (docs/design/decisions.md#d7).

The host calls ``chord_facets(host)`` once per loaded generation and keeps the facets for its own
kind: the session worker gets the authority (:mod:`.session`), the TUI the presentation
(:mod:`.tui`); the two share only the service id in :mod:`.contract`. Imports are relative:
every generation is imported under its own private module names, and a relative import stays
inside it.
"""

from __future__ import annotations

from chord import Facet, hookimpl


@hookimpl
def chord_facets(host: str) -> list[Facet]:
    """``"session"`` → the session facet; ``"tui"`` → the dialog, permission-mode and
    ``/permissions`` facets; other hosts nothing."""
    if host == "session":
        from .session import session_facet

        return [session_facet]
    if host == "tui":
        from .permissions_tui import permissions_tui_facet
        from .tui import mode_tui_facet, tui_facet

        return [tui_facet, mode_tui_facet, permissions_tui_facet]
    return []
