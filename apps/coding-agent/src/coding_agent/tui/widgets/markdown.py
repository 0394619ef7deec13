"""The transcript's Markdown widgets, kept apart so the TUI's first frame does not import them.

Importing them loads Textual's ``Markdown`` widget, Rich's Markdown renderer, ``markdown_it``,
Rich's ``Syntax`` and Pygments: a large share of the TUI's start-up, for a first screen (an empty
session's editor) that shows no Markdown. :mod:`coding_agent.tui.widgets.messages` imports this
module where it first builds an assistant message's text or a summary.
"""

from __future__ import annotations

from typing import Any

from rich.markdown import Markdown as RichMarkdown
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream

from chord import inert

__all__ = ["MarkdownText", "MessageMarkdown", "open_stream", "rich_markdown"]


class MessageMarkdown(Markdown):
    """A Markdown widget that counts how often it (re)parses, so tests can bound it."""

    def __init__(self, markdown: str | None = None, **kwargs: Any) -> None:
        super().__init__(markdown, **kwargs)
        self.parse_count = 0

    def update(self, markdown: str):  # type: ignore[override]
        self.parse_count += 1
        return super().update(markdown)

    def append(self, markdown: str):  # type: ignore[override]
        self.parse_count += 1
        return super().append(markdown)


def rich_markdown(source: str) -> RichMarkdown:
    """``source`` (made inert) as Rich's Markdown renderable, code in the terminal's colours."""
    return RichMarkdown(inert(source), code_theme="ansi_dark")


class MarkdownText(Static):
    """Finished Markdown as a single widget (Rich's renderer): cheap to mount by the hundred.

    Textual's ``Markdown`` widget builds one widget per block, which is what streaming needs
    (appends re-parse only the last block) but costs layout time for history. Stored messages
    use this instead.
    """

    def __init__(self, source: str, **kwargs: Any) -> None:
        super().__init__(rich_markdown(source), **kwargs)
        self.source = source


def open_stream(widget: MessageMarkdown) -> MarkdownStream:
    """A stream that appends fragments to ``widget`` (coalescing them while a parse runs)."""
    return Markdown.get_stream(widget)
