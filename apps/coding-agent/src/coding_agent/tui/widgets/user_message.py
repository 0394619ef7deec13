"""A user's message in the transcript, with a big paste folded as the editor showed it.

The editor folds a big paste into a marker (:mod:`coding_agent.tui.widgets.pastes`), and the
model gets the whole text; the transcript folds it too, so 400 pasted lines do not push the
conversation off the screen. A message is folded when it is as big as a paste the editor folds
(:func:`~coding_agent.tui.widgets.pastes.is_large`):

* each paste this terminal's editor folded, found whole in the message, becomes its marker again
  (``why does this fail? [Pasted text #1 +400 lines]``);
* what is still big (a paste sent from another terminal, or before a restart, when the marker
  is not known here) keeps its first :data:`HEAD_LINES` lines (or :data:`HEAD_CHARS`
  characters of one long line) and a one-line marker for the rest: ``[+397 more lines]``.

A dim line under a folded message says how to see all of it: a click on the message, or the
key that expands tool output (Ctrl+O, :meth:`UserMessage.set_expanded`), which folds it again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from rich.text import Text
from textual import events
from textual.widgets import Static

from chord import inert
from coding_agent.tui.widgets.pastes import MARKER, is_large

__all__ = ["HEAD_CHARS", "HEAD_LINES", "UserMessage", "fold_message"]

HEAD_LINES = 3
"""Lines of a big message whose paste is not known here that stay visible when it is folded."""
HEAD_CHARS = 300
"""Characters of a big one-line message that stay visible when it is folded."""

_MARKERS = re.compile(rf"{MARKER.pattern}|\[\+[\d,]+ more (?:lines|chars)\]")


def fold_message(text: str, fold_pastes: Callable[[str], str] = lambda text: text) -> str | None:
    """``text`` as the transcript shows it folded, or ``None`` when it is small enough to show
    as it is. ``fold_pastes`` puts the pastes this terminal knows back behind their markers
    (:meth:`~coding_agent.tui.widgets.pastes.Pastes.fold`)."""
    if not is_large(text):
        return None
    folded = fold_pastes(text)
    if not is_large(folded):
        return folded
    lines = folded.splitlines()
    if len(lines) > HEAD_LINES + 1:
        head = "\n".join(lines[:HEAD_LINES])
        head = head if len(head) <= HEAD_CHARS else head[:HEAD_CHARS] + "…"
        return f"{head}\n[+{len(lines) - HEAD_LINES:,} more lines]"
    return folded[:HEAD_CHARS] + f" [+{len(folded) - HEAD_CHARS:,} more chars]"


class UserMessage(Static):
    """One user message; folded (:func:`fold_message`) when it is big, and a click (or
    :meth:`set_expanded`) shows all of it."""

    def __init__(
        self,
        text: str,
        notes: Sequence[str] = (),
        *,
        fold_pastes: Callable[[str], str] = lambda text: text,
        expand_key: str | None = None,
        classes: str | None = None,
    ) -> None:
        """``text`` is the message as sent (raw: it is made inert here); ``notes`` are dim
        lines under it (an attached file, the model a command picked); ``expand_key`` names
        the key that expands everything (``None``: only a click is offered)."""
        folded = fold_message(text, fold_pastes)
        notes = tuple(notes)
        super().__init__(_shown(text, folded, notes, expand_key, expanded=False), classes=classes)
        self.text = text
        self.folded_text = folded
        """The text shown while folded (``None``: the message is never folded)."""
        self.expanded = False
        self._notes = notes
        self._expand_key = expand_key

    def set_expanded(self, expanded: bool) -> None:
        """Show all of the message (``True``) or fold it again; no-op when not foldable."""
        if self.folded_text is None or expanded == self.expanded:
            return
        self.expanded = expanded
        self.update(
            _shown(self.text, self.folded_text, self._notes, self._expand_key, expanded=expanded)
        )

    def on_click(self, event: events.Click) -> None:
        if self.folded_text is not None:
            event.stop()
            self.set_expanded(not self.expanded)


def _shown(
    text: str, folded: str | None, notes: Sequence[str], expand_key: str | None, *, expanded: bool
) -> Text:
    """What a :class:`UserMessage` shows: the message (inert), folded or not, its notes and
    how to fold or unfold it."""
    shown = Text()
    if folded is not None and not expanded:
        at = 0
        for match in _MARKERS.finditer(folded):  # the markers stand out from the text
            shown.append(inert(folded[at : match.start()]))
            shown.append(match.group(), style="bold")
            at = match.end()
        shown.append(inert(folded[at:]))
    else:
        shown.append(inert(text))
    for note in notes:
        shown.append("\n" + inert(note), style="dim")
    if folded is not None:
        how = "click" + (f" or {expand_key}" if expand_key else "")
        lines = len(text.splitlines())
        shown.append(
            f"\n▾ {how} to fold"
            if expanded
            else f"\n▸ {how} to show all {lines:,} line{'s' if lines != 1 else ''}",
            style="dim italic",
        )
    return shown
