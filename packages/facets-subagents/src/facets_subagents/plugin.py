"""The plugin module named by the ``chord.facets`` entry point (docs/design/decisions.md#d7)."""

from __future__ import annotations

from chord import Facet, hookimpl

from .session import session_facet
from .tui import tui_facet


@hookimpl
def chord_facets(host: str) -> list[Facet]:
    """``"session"`` → the session facet, ``"tui"`` → the TUI facet, other hosts nothing."""
    if host == "session":
        return [session_facet]
    if host == "tui":
        return [tui_facet]
    return []
