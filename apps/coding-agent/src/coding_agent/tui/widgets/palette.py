"""The dropdown above the prompt editor: commands, ``@file`` mentions and path completions.

The palette only *shows* suggestions; the editor decides what to suggest and keeps the
keyboard. Focus never moves here (``can_focus`` is off): Up/Down, Tab, Enter and Escape are
read by the editor, which calls :meth:`CompletionPalette.move`, :attr:`~CompletionPalette.selected`
and :meth:`CompletionPalette.hide`. A mouse click on a row is passed to the ``on_pick`` callback
the editor supplied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from chord import inert

__all__ = ["CompletionPalette", "Suggestion"]


@dataclass(frozen=True, slots=True)
class Suggestion:
    """One row: what it shows and what accepting it writes in place of the text completed."""

    label: str
    """The row's main text (``/help``, ``src/app.py``…)."""
    value: str
    """The text that replaces the completed token when the row is accepted."""
    description: str = ""
    """A dim explanation after the label (a command's description)."""
    hint: str = ""
    """A command's arguments (``[pr-number] [priority]``: a skill's or a template's
    ``argument-hint``), dimmed right after the label, as Claude Code shows them."""


class CompletionPalette(OptionList):
    """A list of :class:`Suggestion`, shown only while it has some."""

    can_focus = False

    def __init__(
        self, *, on_pick: Callable[[int], None] | None = None, id: str | None = None
    ) -> None:
        super().__init__(id=id, compact=True)
        self._suggestions: tuple[Suggestion, ...] = ()
        self._on_pick = on_pick
        self.display = False

    @property
    def suggestions(self) -> tuple[Suggestion, ...]:
        """The rows shown (empty while hidden)."""
        return self._suggestions

    @property
    def is_open(self) -> bool:
        """Whether the palette is showing rows."""
        return bool(self._suggestions)

    @property
    def selected(self) -> Suggestion | None:
        """The highlighted row (``None`` while hidden)."""
        index = self.highlighted
        if index is None or not 0 <= index < len(self._suggestions):
            return None
        return self._suggestions[index]

    def show(self, suggestions: Sequence[Suggestion]) -> None:
        """Show ``suggestions`` with the first highlighted (none: hide)."""
        items = tuple(suggestions)
        if not items:
            self.hide()
            return
        if items != self._suggestions:
            self._suggestions = items
            self.set_options(Option(_row(item)) for item in items)
            self.highlighted = 0
        self.display = True

    def hide(self) -> None:
        """Hide the palette and forget its rows."""
        if self._suggestions:
            self._suggestions = ()
            self.clear_options()
        self.display = False

    def move(self, delta: int) -> None:
        """Move the highlight ``delta`` rows, wrapping around the ends."""
        if not self._suggestions:
            return
        current = self.highlighted or 0
        self.highlighted = (current + delta) % len(self._suggestions)

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if self._on_pick is not None:
            self._on_pick(event.option_index)


def _row(item: Suggestion) -> Text:
    """The row as Rich text built piece by piece: what a file says (a file name, a skill's
    hint or description) is never read as markup, and made inert."""
    row = Text(no_wrap=True, overflow="ellipsis")
    row.append(inert(item.label), style="bold")
    if item.hint:
        row.append(inert(f" {item.hint}"), style="dim")
    if item.description:
        row.append(inert(f"  {item.description}"), style="dim")
    return row
