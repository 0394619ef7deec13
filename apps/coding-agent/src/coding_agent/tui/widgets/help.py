"""``/help`` (and F1): the commands and keys on a screen that stays until Esc closes it.

:class:`TextScreen` is that screen for any long text a command shows (``/sandbox``'s policy):
a toast has no scroll bar and is cut at the bottom of the terminal."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from chord import inert

__all__ = ["HelpScreen", "TextScreen"]


class TextScreen(ModalScreen[None]):
    """A titled text, scrollable; Esc or q close it (nothing closes it by itself).

    The keys its footer names are the screen's own bindings (the app's ``AUTO_FOCUS`` names the
    editor, which this screen does not have: nothing had the focus, and ↑↓ PgUp PgDn did
    nothing). The scroll area takes no focus, so its own bindings, which scroll after the next
    refresh and so merge keys that arrive in one burst, never see them.
    """

    DEFAULT_CSS = """
    TextScreen { align: center middle; }
    TextScreen > Vertical {
        width: 90%; max-width: 110; height: 90%;
        border: round $accent; background: $surface; padding: 0 2;
    }
    TextScreen .title { text-style: bold; margin: 1 0; }
    TextScreen VerticalScroll { height: 1fr; }
    TextScreen #help-close { color: $text-muted; margin-top: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("q", "close", "Close", show=False),
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

    CLOSE_KEYS = "esc or q close"
    """The keys that close the screen, as its last line names them."""

    def __init__(self, text: str, title: str) -> None:
        super().__init__()
        self.text = text
        self.heading = title

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"{self.heading}  (esc closes)", classes="title", markup=False)
            with VerticalScroll(id="help-scroll", can_focus=False):
                yield Static(inert(self.text), id="help-text", markup=False)  # facets' words
            closing = f"{self.CLOSE_KEYS} · ↑↓ pgup pgdn scroll"
            yield Static(closing, id="help-close", markup=False)

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


class HelpScreen(TextScreen):
    """The help text (:class:`TextScreen`); F1, which opened it, closes it too."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("f1", "close", "Close", show=False)]
    CLOSE_KEYS = "esc, q or f1 close"

    def __init__(self, text: str) -> None:
        super().__init__(text, "Help")
