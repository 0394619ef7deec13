"""Widgets for transcript entries: one widget per entry, built once, never re-parsed.

:class:`AssistantView` renders an assistant message block by block (thinking collapsed, text as
Markdown, tool calls as :class:`~coding_agent.tui.widgets.tools.ToolCard`). The same widget
serves the *streaming* message of ``turn.message``: :meth:`AssistantView.sync` feeds each text
block's growth to a :class:`~textual.widgets.markdown.MarkdownStream` (which coalesces fragments
while a parse runs), and :meth:`AssistantView.finalize` turns it into the stored entry's widget
without parsing the text again.

:func:`entry_widget` picks the widget for any other entry kind: a model or thinking-level switch
(:mod:`coding_agent.settings.changes`) is a dim marker line ("Model: a/b → c/d"); kinds it does
not know render as a dim one-liner when they carry text, and not at all otherwise.

Every text shown here is made inert first (:func:`chord.inert`): an ESC, a bidi override or an
invisible format character from the model, a tool or a file shows as its escape (``\\x1b[8m``),
in the Markdown source too (fragments of a stream one by one; ``inert`` works piece by piece),
and plain text is never read as markup (``Text``, or a ``Static`` with ``markup=False``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.markup import escape
from textual.widget import Widget
from textual.widgets import Static

from chord import inert
from coding_agent.contracts import SHELL_ENTRY_KIND
from coding_agent.settings.changes import change_text
from coding_agent.tui.document import attachment_marks, entry_text
from coding_agent.tui.shell import shell_text
from coding_agent.tui.widgets.collapsible import QuietCollapsible
from coding_agent.tui.widgets.tools import ToolCard
from coding_agent.tui.widgets.user_message import UserMessage
from pico3 import (
    AssistantEntry,
    CustomEntry,
    HandoffEntry,
    NoticeEntry,
    ResetEntry,
    SummaryEntry,
    SystemEntry,
    ToolResultEntry,
    UsageEntry,
    UserEntry,
    ViewEntry,
)
from pico3.models import AssistantMessage, ServerToolContent, TextContent, ThinkingContent, ToolCall

if TYPE_CHECKING:
    from textual.widgets.markdown import MarkdownStream

    from coding_agent.tui.widgets.markdown import MessageMarkdown

AssistantBlock = TextContent | ThinkingContent | ToolCall | ServerToolContent
"""One block of an assistant message."""

__all__ = [
    "AssistantView",
    "ThinkingBlock",
    "entry_widget",
]


class ThinkingBlock(QuietCollapsible):
    """Model reasoning, collapsed by default (Ctrl+T toggles every block)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._static = Static(inert(text), classes="thinking-text", markup=False)
        super().__init__(self._static, title="Thinking", collapsed=True, classes="thinking")

    @property
    def text(self) -> str:
        return self._text

    def set_text(self, text: str) -> None:
        if text != self._text:
            self._text = text
            self._static.update(inert(text))


class AssistantView(Vertical):
    """One assistant message; live while streaming, then frozen as its entry's widget."""

    def __init__(self, message: AssistantMessage | None, *, live: bool = False) -> None:
        super().__init__(classes="assistant")
        self.live = live
        self.cards: dict[str, ToolCard] = {}
        self._kinds: list[str] = []
        self._widgets: list[Widget] = []
        self._written: list[str] = []
        self._streams: dict[int, MarkdownStream] = {}
        self._note = Static(classes="assistant-note", markup=False)
        self._note.display = False
        self._note_text = ""
        self._message: AssistantMessage | None = message
        self.interrupted = False
        self.stopped_by: str | None = None
        """Who stopped the answer when the user did not (a hook: ``data.stoppedBy``)."""
        """The user stopped this answer (its entry's ``data.reason`` is ``"aborted"``)."""
        if message is not None:  # built eagerly: tool results find the cards before mount
            for block in message.content:
                self._make_block(_block_kind(block), block)
            self._set_note(message)

    def compose(self) -> ComposeResult:
        yield from self._widgets
        yield self._note

    @property
    def note(self) -> str:
        """The stop-reason note under the message (``""`` when none)."""
        return self._note_text

    @property
    def markdowns(self) -> list[MessageMarkdown]:
        """The live (streamed) text blocks' Markdown widgets, in order."""
        # lazy: start-up time (the first frame shows no Markdown: see widgets.markdown)
        from coding_agent.tui.widgets.markdown import MessageMarkdown

        return [w for w in self._widgets if isinstance(w, MessageMarkdown)]

    @property
    def text(self) -> str:
        """The text this widget has been given (all text blocks, in order)."""
        return "\n".join(
            written
            for kind, written in zip(self._kinds, self._written, strict=True)
            if kind == "text"
        )

    async def sync(self, message: AssistantMessage) -> None:
        """Bring the widget up to ``message`` (a partial or a final assistant message)."""
        blocks: Sequence[AssistantBlock] = message.content
        for index, block in enumerate(blocks):
            kind = _block_kind(block)
            if index >= len(self._kinds) or self._kinds[index] != kind:
                if index < len(self._kinds):  # a block changed type: rebuild from here
                    await self._truncate(index)
                await self._add_block(index, kind, block)
                continue
            await self._update_block(index, kind, block)
        if len(blocks) < len(self._kinds):
            await self._truncate(len(blocks))
        self._set_note(message)

    async def finalize(self, message: AssistantMessage) -> None:
        """Sync to the final message and stop streaming (pending fragments are flushed)."""
        await self.sync(message)
        await self.stop_streams()
        self.live = False

    async def stop_streams(self) -> None:
        """Flush and stop the Markdown streams (the message is final or going away)."""
        streams, self._streams = self._streams, {}
        for stream in streams.values():
            await stream.stop()

    async def on_unmount(self) -> None:
        # A stream's task must not outlive its widget; nothing is left to flush into.
        streams, self._streams = self._streams, {}
        for stream in streams.values():
            try:
                await stream.stop()
            except Exception as error:  # the widget is gone; its last fragment is moot
                self.log.warning("stopping a Markdown stream at unmount failed", error)

    def _make_block(self, kind: str, block: AssistantBlock) -> Widget:
        widget: Widget
        written = ""
        if isinstance(block, TextContent):
            # lazy: start-up time (the first frame shows no Markdown: see widgets.markdown)
            from coding_agent.tui.widgets.markdown import MarkdownText, MessageMarkdown

            if self.live:
                # A live block starts empty and receives everything through its stream, so the
                # initial parse cannot race the first appended fragment.
                widget = MessageMarkdown(classes="assistant-text")
            else:
                written = block.text
                widget = MarkdownText(written, classes="assistant-text")
        elif isinstance(block, ThinkingContent):
            written = block.thinking
            widget = ThinkingBlock(written or ("(redacted)" if block.redacted else ""))
        elif isinstance(block, ToolCall):
            widget = ToolCard(block.id, block.name, block.arguments)
            self.cards[widget.call_id] = widget
        elif isinstance(block, ServerToolContent):  # pyright: ignore[reportUnnecessaryIsInstance]
            widget = Static(Text(inert(server_tool_text(block))), classes="dim-line")
        else:
            widget = Static(inert(f"[{kind}]"), classes="dim-line", markup=False)
        self._kinds.append(kind)
        self._widgets.append(widget)
        self._written.append(written)
        return widget

    async def _add_block(self, index: int, kind: str, block: AssistantBlock) -> None:
        widget = self._make_block(kind, block)
        await self.mount(widget, before=self._note)
        if kind == "text" and self.live:
            await self._update_block(index, kind, block)

    async def _update_block(self, index: int, kind: str, block: AssistantBlock) -> None:
        # lazy: start-up time; loaded already (_make_block built this text block's widget)
        from coding_agent.tui.widgets.markdown import (
            MarkdownText,
            MessageMarkdown,
            open_stream,
            rich_markdown,
        )

        widget = self._widgets[index]
        if isinstance(block, TextContent) and isinstance(widget, MarkdownText):
            text = block.text
            if text != self._written[index]:
                self._written[index] = text
                widget.source = text
                widget.update(rich_markdown(text))
        elif isinstance(block, TextContent) and isinstance(widget, MessageMarkdown):
            text = block.text
            if text == self._written[index]:
                return
            written = self._written[index]
            self._written[index] = text
            if text.startswith(written):
                stream = self._streams.get(index)
                if stream is None:
                    stream = open_stream(widget)
                    self._streams[index] = stream
                await stream.write(inert(text[len(written) :]))
            else:  # not an append: replace once
                stream = self._streams.pop(index, None)
                if stream is not None:
                    await stream.stop()
                await widget.update(inert(text))
        elif isinstance(block, ThinkingContent) and isinstance(widget, ThinkingBlock):
            self._written[index] = block.thinking
            widget.set_text(block.thinking)
        elif isinstance(block, ToolCall) and isinstance(widget, ToolCard):
            widget.set_arguments(block.arguments)

    async def _truncate(self, length: int) -> None:
        for index in range(length, len(self._widgets)):
            stream = self._streams.pop(index, None)
            if stream is not None:
                await stream.stop()
            widget = self._widgets[index]
            if isinstance(widget, ToolCard):
                self.cards.pop(widget.call_id, None)
            await widget.remove()
        del self._kinds[length:], self._widgets[length:], self._written[length:]

    def mark_interrupted(self, by: str | None = None) -> None:
        """Say under the answer that the user interrupted it (Esc, or an abort from another
        client), as Claude Code does, or who stopped it (``by``: ``PermissionRequest hook
        `<command>```, the entry's ``data.stoppedBy``); an answer stopped before anything
        streamed is only this line."""
        self.interrupted = True
        self.stopped_by = by
        if self._message is not None:
            self._set_note(self._message)

    def _set_note(self, message: AssistantMessage) -> None:
        self._message = message
        reason = message.stop_reason
        error = message.error_message
        note = ""
        if self.interrupted:
            note = f"■ Stopped by {self.stopped_by}" if self.stopped_by else "■ Interrupted by user"
        elif reason == "aborted":
            note = "■ aborted"
        elif reason == "error":
            note = f"✗ {error}" if isinstance(error, str) and error else "✗ the model failed"
        elif reason == "length":
            note = "… stopped at the output limit"
        self._note_text = note = inert(note)
        self._note.update(note)
        self._note.display = bool(note)
        self._note.set_class(reason == "error", "is-error")


def _block_kind(block: AssistantBlock) -> str:
    """The block's ``type`` on the wire (``text``, ``thinking``, ``toolCall``)."""
    return _BLOCK_KINDS[type(block)]


_BLOCK_KINDS: dict[type, str] = {
    TextContent: "text",
    ThinkingContent: "thinking",
    ToolCall: "toolCall",
    ServerToolContent: "serverTool",
}


def server_tool_text(block: ServerToolContent) -> str:
    """A tool the provider ran itself (its web search) as lines: what it searched, then each
    source found (title and URL)."""
    query = block.input.get("query")
    head = f"⌕ {block.name} (by the provider)" + (f": {query}" if isinstance(query, str) else "")
    lines = [head]
    lines += [f"  {n}. {r.title or r.url} — {r.url}" for n, r in enumerate(block.results, 1)]
    return "\n".join(lines)


def entry_widget(
    entry: ViewEntry,
    *,
    fold_pastes: Callable[[str], str] = lambda text: text,
    expand_key: str | None = None,
) -> Widget | None:
    """The widget of one stored entry, or ``None`` for entries that are not shown.

    A user message the user did not type (``data.meta``: another agent's expanded slash
    command prompt or compaction summary, imported) is one dim, collapsed line naming it; one
    holding another agent's rendering of a command the user typed shows it as typed
    (``data.typed``).

    A big user message is folded (:class:`UserMessage`): ``fold_pastes`` puts the pastes the
    editor folded back behind their markers; ``expand_key`` is the key its hint names."""
    if isinstance(entry, UserEntry):
        if entry.data.meta:  # the model read it, the user did not type it (an import's)
            body = Static(Text(inert(entry_text(entry))), classes="meta-text")
            # the label names a command from the imported file: plain text, never markup
            # (a title string is Textual markup: ``[@click=app.simulate_key('y')]`` would act)
            title = escape(inert(f"({entry.data.meta})"))
            return QuietCollapsible(body, title=title, collapsed=True, classes="summary meta")
        classes = "user continuation" if entry.data.continuation else "user"
        message = entry.user_message
        # an attached file, folder or image: one line, not its content
        notes = attachment_marks(message.content if message is not None else None)
        if entry.data.model:  # a command's own model answered this prompt's turn
            notes = [*notes, f"↳ model for this turn: {entry.data.model}"]
        return UserMessage(
            entry.data.typed or entry_text(entry),  # an imported command: as it was typed
            notes,
            fold_pastes=fold_pastes,
            expand_key=expand_key,
            classes=classes,
        )
    if isinstance(entry, AssistantEntry):
        message = entry.message
        if message is None:
            return None
        view = AssistantView(message)
        if entry.display_only:
            view.add_class("display-only")
        if entry.data.reason == "aborted":
            view.mark_interrupted(entry.data.stopped_by)
        return view
    if isinstance(entry, ToolResultEntry):
        message = entry.message
        card = ToolCard("", message.tool_name if message is not None else "tool", None)
        card.set_result(entry)
        return card
    if isinstance(entry, NoticeEntry):
        return Static(Text(inert(f"ⓘ {entry_text(entry)}")), classes="notice")
    if isinstance(entry, SummaryEntry | HandoffEntry):
        # lazy: start-up time (the first frame shows no Markdown: see widgets.markdown)
        from coding_agent.tui.widgets.markdown import MarkdownText

        title = "Earlier conversation summarised" if entry.kind == "pi.summary" else "Handoff"
        body = MarkdownText(entry_text(entry), classes="summary-text")
        return QuietCollapsible(body, title=title, collapsed=True, classes="summary")
    if isinstance(entry, ResetEntry):
        return Static("── context reset ──", classes="divider")
    if isinstance(entry, UsageEntry):
        error = entry.data.error
        if error:
            attempt = entry.data.attempt
            label = f"attempt {attempt} failed" if attempt is not None else "attempt failed"
            detail = _json_text(error) or str(error)
            return Static(Text(inert(f"↻ {label}: {detail}")), classes="dim-line")
        return None
    if isinstance(entry, SystemEntry):
        return None
    if not isinstance(entry, CustomEntry):  # pyright: ignore[reportUnnecessaryIsInstance]
        return None
    data: Mapping[str, Any] = entry.data or {}
    if entry.kind == SHELL_ENTRY_KIND:  # a !cmd / !!cmd the user ran
        return Static(_shell_entry_text(data), classes="shell")
    change = change_text(entry.json)
    if change is not None:  # a model or thinking-level switch: one dim marker line
        return Static(Text(inert(change)), classes="dim-line settings-change")
    text = entry_text(entry) or _json_text(data.get("text") or data.get("message"))
    if text:
        return Static(Text(inert(f"{entry.kind}: {text}")), classes="dim-line")
    return None


def _json_text(value: Any) -> str:
    """A custom entry's ``data.text``/``data.message``: a string, or text blocks (JSON)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            block["text"]
            for block in value  # pyright: ignore[reportUnknownVariableType]
            if isinstance(block, dict)
            and block.get("type") == "text"  # pyright: ignore[reportUnknownMemberType]
            and isinstance(block.get("text"), str)  # pyright: ignore[reportUnknownMemberType]
        )
    return ""


def _shell_entry_text(data: Mapping[str, Any]) -> Text:
    code = data.get("exitCode")
    status = ""
    if data.get("cancelled"):
        status = "stopped"
    elif data.get("timedOut"):
        status = "timed out"
    elif type(code) is int and code != 0:
        status = f"exit {code}"
    output = data.get("output")
    return shell_text(
        str(data.get("command", "")),
        output if isinstance(output, str) else "",
        excluded=bool(data.get("excluded")),
        status=status,
    )
