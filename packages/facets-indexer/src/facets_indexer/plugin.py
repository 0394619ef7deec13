"""The plugin module named by the ``chord.facets`` entry point (docs/design/decisions.md#d7).

The host calls ``chord_facets(host)`` once per loaded generation and keeps the facets for its own
kind: the session worker gets the kind, the tool and ``pi.indexer`` (:mod:`.session`), the TUI
the progress panel and ``/index`` (:mod:`.tui`); the two share only the contract. Imports are
relative: every generation is imported under its own private module names, and a relative import
stays inside it.
"""

from __future__ import annotations

from chord import Facet, hookimpl


@hookimpl
def chord_facets(host: str) -> list[Facet]:
    """``"session"`` → the session facet, ``"tui"`` → the TUI facet, other hosts nothing."""
    if host == "session":
        from .session import session_facet

        return [session_facet]
    if host == "tui":
        from .tui import tui_facet

        return [tui_facet]
    return []
