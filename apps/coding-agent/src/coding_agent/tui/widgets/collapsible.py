"""A ``Collapsible`` that leaves scrolling to the transcript."""

from __future__ import annotations

from textual.widgets import Collapsible

__all__ = ["QuietCollapsible"]


class QuietCollapsible(Collapsible):
    """A ``Collapsible`` that does not scroll itself into view when toggled: Ctrl+O/Ctrl+T
    toggle every block at once, and the transcript decides where the view goes (it keeps
    following the bottom)."""

    def _watch_collapsed(self, collapsed: bool) -> None:  # pyright: ignore[reportIncompatibleMethodOverride]
        self._update_collapsed(collapsed)
        self.post_message(self.Collapsed(self) if collapsed else self.Expanded(self))
