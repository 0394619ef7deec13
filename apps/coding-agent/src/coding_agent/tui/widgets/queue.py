"""Queued inputs (``view.inbox``): what waits to steer the turn or follow it up.

Each row shows its mode and text with a cancel button; the app turns a press into
``input_abort(id)``. Alt+Up in the editor cancels the newest item and puts its text back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, Static

from chord import inert
from coding_agent.tui.document import inbox_text
from pico3 import QueuedInput

__all__ = ["QueuePanel"]

_MODE_LABELS = {"steer": "steer", "followUp": "follow-up", "write": "note"}


class _Row(Horizontal):
    def __init__(self, input_id: int, mode: str, text: str) -> None:
        super().__init__(classes="queue-row")
        self.input_id = input_id
        self._mode = mode
        self._text = text

    def compose(self) -> ComposeResult:
        label = Text()
        label.append(f"↳ {_MODE_LABELS.get(self._mode, self._mode)} ", style="bold")
        first = inert(self._text.splitlines()[0] if self._text else "")
        label.append(first if len(first) <= 200 else first[:199] + "…")
        yield Static(label, classes="queue-text")
        yield Button("✕", id=f"cancel-{self.input_id}", classes="queue-cancel")


class QueuePanel(Vertical):
    """The inbox, newest last; hidden when empty."""

    class CancelRequested(Message):
        def __init__(self, input_id: int) -> None:
            super().__init__()
            self.input_id = input_id

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._inbox: Any = None
        self.items: list[tuple[int, str, str]] = []
        self.display = False

    async def show(self, inbox: Sequence[QueuedInput] | None) -> None:
        if inbox is self._inbox:
            return
        self._inbox = inbox
        items = [(item.id, item.mode, inbox_text(item)) for item in inbox or ()]
        if items == self.items:
            return
        self.items = items
        await self.remove_children()
        if items:
            await self.mount_all([_Row(*item) for item in items])
        self.display = bool(items)

    @on(Button.Pressed, ".queue-cancel")
    def _cancel(self, event: Button.Pressed) -> None:
        event.stop()
        row = event.button.parent
        if isinstance(row, _Row):
            self.post_message(self.CancelRequested(row.input_id))
