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
    """The help text, scrollable; Esc, q or F1 close it (nothing closes it by itself)."""

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
    ]

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Help  (esc closes)", classes="title")
            with VerticalScroll():
                yield Static(inert(self.text), id="help-text", markup=False)  # facets' words
            yield Static("esc, q or f1 close · ↑↓ pgup pgdn scroll", id="help-close", markup=False)

    def action_close(self) -> None:
        self.dismiss(None)
