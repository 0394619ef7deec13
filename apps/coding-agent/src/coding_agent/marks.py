"""The mark of an attachment block: the one line a reader sees in place of an attached file.

:mod:`coding_agent.context.mentions` makes the blocks a prompt's ``@file`` mentions and images
attach; each starts with its mark (``[📎 src/app.py (120 lines)]``, ``[📎 nope.txt: no such file
or folder, not attached]``, ``[🖼 shot.png]``). Whoever shows a conversation to a person shows
the mark instead of the block: the TUI's transcript (:mod:`coding_agent.tui.document`) and the
HTML export (:mod:`coding_agent.session_files.export`). This module sits below both (the
``app-wings`` layers in the root ``pyproject.toml``), so each reads marks the same way.
"""

from __future__ import annotations

__all__ = ["MARK_STARTS", "attachment_mark"]

MARK_STARTS = ("[📎 ", "[🖼 ")
"""How an attachment block's text starts: a file or folder, an image."""


def attachment_mark(text: str) -> str | None:
    """The mark of an attachment block's ``text`` (``📎 src/app.py (120 lines)``), or ``None``
    when ``text`` is not an attachment block."""
    if not text.startswith(MARK_STARTS):
        return None
    first = text.split("\n", 1)[0]
    return first[1:-1] if first.endswith("]") else first[1:]
