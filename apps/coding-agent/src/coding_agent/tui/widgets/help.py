"""``/help`` (and F1): the commands and keys on a screen that stays until Esc closes it."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from chord import inert

__all__ = ["HelpScreen"]


class HelpScreen(ModalScreen[None]):
    """The help text, scrollable; Esc, q or F1 close it (nothing closes it by itself).

    The keys its footer names are the screen's own bindings (the app's ``AUTO_FOCUS`` names the
    editor, which this screen does not have: nothing had the focus, and ↑↓ PgUp PgDn did
    nothing). The scroll area takes no focus, so its own bindings, which scroll after the next
    refresh and so merge keys that arrive in one burst, never see them.
    """

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical {
        width: 90%; max-width: 110; height: 90%;
        border: round $accent; background: $surface; padding: 0 2;
    }
    HelpScreen .title { text-style: bold; margin: 1 0; }
    HelpScreen VerticalScroll { height: 1fr; }
    HelpScreen #help-close { color: $text-muted; margin-top: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("q", "close", "Close", show=False),
        Binding("f1", "close", "Close", show=False),
        Binding("up", "scroll('up')", show=False),
        Binding("down", "scroll('down')", show=False),
        Binding("k", "scroll('up')", show=False),
        Binding("j", "scroll('down')", show=False),
        Binding("pageup", "scroll('page_up')", show=False),
        Binding("pagedown", "scroll('page_down')", show=False),
        Binding("space", "scroll('page_down')", show=False),
        Binding("home", "scroll('home')", show=False),
        Binding("end", "scroll('end')", show=False),
    ]

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Help  (esc closes)", classes="title")
            with VerticalScroll(id="help-scroll", can_focus=False):
                yield Static(inert(self.text), id="help-text", markup=False)  # facets' words
            yield Static("esc, q or f1 close · ↑↓ pgup pgdn scroll", id="help-close", markup=False)

    def action_scroll(self, where: str) -> None:
        """Scroll the help text: ``up``/``down`` a line, ``page_up``/``page_down``, ``home``,
        ``end``. Each key moves from where the previous one is going (``scroll_target_y``) and
        at once, so keys arriving in one burst (a held key, a terminal's paste) all count."""
        area = self.query_one("#help-scroll", VerticalScroll)
        page = max(1, area.scrollable_content_region.height - 1)
        target = area.scroll_target_y
        moves = {
            "up": target - 1,
            "down": target + 1,
            "page_up": target - page,
            "page_down": target + page,
            "home": 0,
            "end": area.max_scroll_y,
        }
        y = max(0, min(moves[where], area.max_scroll_y))
        area.scroll_to(y=y, animate=False, immediate=True)

    def action_close(self) -> None:
        self.dismiss(None)
