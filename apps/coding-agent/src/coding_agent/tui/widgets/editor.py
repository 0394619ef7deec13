"""The prompt editor: a multi-line ``TextArea`` with submit keys, history and /completion.

Keys (pi's defaults, agent-features b14):

* Enter submits; Alt+Enter submits as a follow-up (while a turn runs it waits for the turn's
  end instead of steering it);
* Shift+Enter or Ctrl+J inserts a newline (Shift+Enter needs a terminal that reports it);
* Up on the first line / Down on the last line walk the history of submitted texts;
* Tab completes a ``/command`` name.

The editor does not decide what a submission *means* (prompt, steer, follow-up, command): it posts
:class:`PromptEditor.Submitted` and the app decides.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from textual import events
from textual.message import Message
from textual.widgets import TextArea

__all__ = ["PromptEditor"]


class PromptEditor(TextArea):
    """Where the user types."""

    class Submitted(Message):
        """The user submitted ``text``; ``follow_up`` when Alt+Enter was used."""

        def __init__(self, editor: PromptEditor, text: str, follow_up: bool) -> None:
            super().__init__()
            self.editor = editor
            self.text = text
            self.follow_up = follow_up

    def __init__(
        self,
        *,
        commands: Callable[[], Iterable[str]] = tuple,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id, soft_wrap=True, show_line_numbers=False, tab_behavior="focus")
        self.sent_history: list[str] = []
        self._history_index: int | None = None
        self._draft = ""
        self._commands = commands

    # -- submission --------------------------------------------------------------------------
    def submit(self, *, follow_up: bool = False) -> None:
        text = self.text
        if not text.strip():
            return
        self.remember(text)
        self.clear()
        self.post_message(self.Submitted(self, text, follow_up))

    def remember(self, text: str) -> None:
        """Add ``text`` to the history (no consecutive duplicates) and end history browsing."""
        if not self.sent_history or self.sent_history[-1] != text:
            self.sent_history.append(text)
        self._history_index = None
        self._draft = ""

    def restore(self, text: str) -> None:
        """Put ``text`` back in front of whatever is being typed (a failed send, an abort)."""
        current = self.text
        combined = text if not current.strip() else f"{text}\n\n{current}"
        self.load_text(combined)
        self.move_cursor(self.document.end)

    async def _on_key(self, event: events.Key) -> None:
        key = event.key
        if key == "enter":
            event.stop()
            event.prevent_default()
            self.submit()
            return
        if key == "alt+enter":
            event.stop()
            event.prevent_default()
            self.submit(follow_up=True)
            return
        if key in ("shift+enter", "ctrl+j"):
            event.stop()
            event.prevent_default()
            start, end = self.selection
            self.replace("\n", start, end, maintain_selection_offset=False)
            return
        if key == "tab" and self._complete():
            event.stop()
            event.prevent_default()
            return
        await super()._on_key(event)

    # -- history -----------------------------------------------------------------------------
    def action_cursor_up(self, select: bool = False) -> None:
        if not select and self.cursor_location[0] == 0 and self._history_back():
            return
        super().action_cursor_up(select)

    def action_cursor_down(self, select: bool = False) -> None:
        last_row = self.document.line_count - 1
        if not select and self.cursor_location[0] == last_row and self._history_forward():
            return
        super().action_cursor_down(select)

    def _history_back(self) -> bool:
        if not self.sent_history:
            return False
        if self._history_index is None:
            self._draft = self.text
            index = len(self.sent_history) - 1
        elif self._history_index == 0:
            return True
        else:
            index = self._history_index - 1
        self._history_index = index
        self.load_text(self.sent_history[index])
        self.move_cursor((0, len(self.document[0])))
        return True

    def _history_forward(self) -> bool:
        if self._history_index is None:
            return False
        index = self._history_index + 1
        if index >= len(self.sent_history):
            self._history_index = None
            self.load_text(self._draft)
        else:
            self._history_index = index
            self.load_text(self.sent_history[index])
        self.move_cursor(self.document.end)
        return True

    # -- completion --------------------------------------------------------------------------
    def completions(self) -> list[str]:
        """Command names matching a ``/prefix`` being typed (empty when not typing one)."""
        text = self.text
        if not text.startswith("/") or " " in text or "\n" in text:
            return []
        prefix = text[1:]
        return sorted(name for name in self._commands() if name.startswith(prefix))

    def _complete(self) -> bool:
        matches = self.completions()
        if not matches:
            return False
        common = matches[0]
        for name in matches[1:]:
            while not name.startswith(common):
                common = common[:-1]
        completed = "/" + (matches[0] + " " if len(matches) == 1 else common)
        if completed != self.text:
            self.load_text(completed)
            self.move_cursor(self.document.end)
        return True
