"""Large pastes folded into a marker in the prompt editor, as pi and Claude Code do.

A paste of more than :data:`PASTE_LINES` lines or :data:`PASTE_CHARS` characters (pi's limits)
shows in the editor as one marker, ``[Pasted text #1 +60 lines]`` (``[Pasted text #2 1,500
chars]`` for a long line), instead of filling it; :class:`Pastes` keeps the text behind each
marker, and :meth:`Pastes.expand` puts it back where the marker stands when the prompt is sent.
The editor deletes a marker as one piece (Backspace at its end, Delete at its start) and
Ctrl+G shows the full text in ``$EDITOR``; what comes back, or a prompt put back after a failed
send, is folded again where a paste's text is still whole (:meth:`Pastes.fold`).
"""

from __future__ import annotations

import re

__all__ = ["MARKER", "PASTE_CHARS", "PASTE_LINES", "Pastes", "is_large"]

PASTE_LINES = 10
"""A paste of more lines than this is folded."""
PASTE_CHARS = 1_000
"""A paste of more characters than this is folded."""

MARKER = re.compile(r"\[Pasted text #\d+ (?:\+\d+ lines|[\d,]+ chars)\]")
"""A paste's marker, as the editor shows it (and the transcript, once sent)."""


def is_large(text: str) -> bool:
    """``text`` is big enough to be folded: more than :data:`PASTE_LINES` lines or
    :data:`PASTE_CHARS` characters (a paste in the editor, a message in the transcript)."""
    return len(text.splitlines()) > PASTE_LINES or len(text) > PASTE_CHARS


class Pastes:
    """The folded pastes of one editor: marker → the text pasted."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        self._count = 0

    def __len__(self) -> int:
        return len(self._texts)

    def marker_for(self, text: str) -> str | None:
        """The marker to show for pasting ``text`` (its line endings made ``\\n``), or
        ``None`` when it is small enough to paste as it is."""
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        if not is_large(text):
            return None
        lines = len(text.splitlines())
        self._count += 1
        size = f"+{lines} lines" if lines > PASTE_LINES else f"{len(text):,} chars"
        marker = f"[Pasted text #{self._count} {size}]"
        self._texts[marker] = text
        return marker

    def expand(self, text: str) -> str:
        """``text`` with each marker replaced by the text pasted (what is sent)."""
        if not self._texts:
            return text
        return MARKER.sub(lambda m: self._texts.get(m.group(), m.group()), text)

    def fold(self, text: str) -> str:
        """``text`` with each paste's text, where it is whole, back behind its marker."""
        for marker, pasted in self._texts.items():
            text = text.replace(pasted, marker)
        return text

    def span_at(self, line: str, column: int, *, before: bool) -> tuple[int, int] | None:
        """The columns ``(start, end)`` of the marker in ``line`` that deleting at ``column``
        takes away whole: the one the cursor is in or just after (``before``: Backspace) or
        just before (Delete); ``None`` when there is none."""
        for match in MARKER.finditer(line):
            if match.group() not in self._texts:
                continue
            start, end = match.span()
            if (start < column <= end) if before else (start <= column < end):
                return start, end
        return None
