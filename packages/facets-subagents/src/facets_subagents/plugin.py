"""The plugin module named by the ``chord.facets`` entry point (docs/design/decisions.md#d7)."""

from __future__ import annotations

from chord import Facet, hookimpl


@hookimpl
def chord_facets(host: str) -> list[Facet]:
    """``"session"`` → the session facet, ``"tui"`` → the TUI facet, ``"config"`` →
    the ``coding-agent config`` section (:mod:`.config_section`), other hosts nothing."""
    if host == "session":
        from .session import session_facet

        return [session_facet]
    if host == "tui":
        from .tui import tui_facet

        return [tui_facet]
    if host == "config":  # coding-agent config: what a session loads, listed
        from .config_section import config_facet

        return [config_facet]
    return []
