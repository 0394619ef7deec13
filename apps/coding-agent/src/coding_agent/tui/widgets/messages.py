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

from collections.abc import Mapping
from typing import Any

from rich.markdown import Markdown as RichMarkdown
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream

from chord import inert
from coding_agent.contracts import SHELL_ENTRY_KIND
from coding_agent.settings.changes import change_text
from coding_agent.tui.document import content_text, entry_message
from coding_agent.tui.shell import shell_text
from coding_agent.tui.widgets.collapsible import QuietCollapsible
from coding_agent.tui.widgets.tools import ToolCard

__all__ = [
    "AssistantView",
    "MarkdownText",
    "MessageMarkdown",
    "ThinkingBlock",
    "entry_widget",
]


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


class MarkdownText(Static):
    """Finished Markdown as a single widget (Rich's renderer): cheap to mount by the hundred.

    Textual's ``Markdown`` widget builds one widget per block, which is what streaming needs
    (appends re-parse only the last block) but costs layout time for history. Stored messages
    use this instead.
    """

    def __init__(self, source: str, **kwargs: Any) -> None:
        super().__init__(RichMarkdown(inert(source), code_theme="ansi_dark"), **kwargs)
        self.source = source


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

    def __init__(self, message: Mapping[str, Any] | None, *, live: bool = False) -> None:
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
        if message is not None:  # built eagerly: tool results find the cards before mount
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict):
                    self._make_block(str(block.get("type")), block)
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
        return [w for w in self._widgets if isinstance(w, MessageMarkdown)]

    @property
    def text(self) -> str:
        """The text this widget has been given (all text blocks, in order)."""
        return "\n".join(
            written
            for kind, written in zip(self._kinds, self._written, strict=True)
            if kind == "text"
        )

    async def sync(self, message: Mapping[str, Any]) -> None:
        """Bring the widget up to ``message`` (a partial or a final assistant message)."""
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        for index, block in enumerate(blocks):
            if not isinstance(block, dict):
                continue
            kind = str(block.get("type"))
            if index >= len(self._kinds) or self._kinds[index] != kind:
                if index < len(self._kinds):  # a block changed type: rebuild from here
                    await self._truncate(index)
                await self._add_block(index, kind, block)
                continue
            await self._update_block(index, kind, block)
        if len(blocks) < len(self._kinds):
            await self._truncate(len(blocks))
        self._set_note(message)

    async def finalize(self, message: Mapping[str, Any]) -> None:
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

    def _make_block(self, kind: str, block: Mapping[str, Any]) -> Widget:
        widget: Widget
        written = ""
        if kind == "text":
            text = block.get("text")
            if self.live:
                # A live block starts empty and receives everything through its stream, so the
                # initial parse cannot race the first appended fragment.
                widget = MessageMarkdown(classes="assistant-text")
            else:
                written = text if isinstance(text, str) else ""
                widget = MarkdownText(written, classes="assistant-text")
        elif kind == "thinking":
            thinking = block.get("thinking")
            written = thinking if isinstance(thinking, str) else ""
            widget = ThinkingBlock(written or ("(redacted)" if block.get("redacted") else ""))
        elif kind == "toolCall":
            widget = ToolCard(block)
            self.cards[widget.call_id] = widget
        else:
            widget = Static(inert(f"[{kind}]"), classes="dim-line", markup=False)
        self._kinds.append(kind)
        self._widgets.append(widget)
        self._written.append(written)
        return widget

    async def _add_block(self, index: int, kind: str, block: Mapping[str, Any]) -> None:
        widget = self._make_block(kind, block)
        await self.mount(widget, before=self._note)
        if kind == "text" and self.live:
            await self._update_block(index, kind, block)

    async def _update_block(self, index: int, kind: str, block: Mapping[str, Any]) -> None:
        widget = self._widgets[index]
        if kind == "text" and isinstance(widget, MarkdownText):
            text = block.get("text")
            if isinstance(text, str) and text != self._written[index]:
                self._written[index] = text
                widget.source = text
                widget.update(RichMarkdown(inert(text), code_theme="ansi_dark"))
        elif kind == "text" and isinstance(widget, MessageMarkdown):
            text = block.get("text")
            if not isinstance(text, str) or text == self._written[index]:
                return
            written = self._written[index]
            self._written[index] = text
            if text.startswith(written):
                stream = self._streams.get(index)
                if stream is None:
                    stream = Markdown.get_stream(widget)
                    self._streams[index] = stream
                await stream.write(inert(text[len(written) :]))
            else:  # not an append: replace once
                stream = self._streams.pop(index, None)
                if stream is not None:
                    await stream.stop()
                await widget.update(inert(text))
        elif kind == "thinking" and isinstance(widget, ThinkingBlock):
            thinking = block.get("thinking")
            if isinstance(thinking, str):
                self._written[index] = thinking
                widget.set_text(thinking)
        elif kind == "toolCall" and isinstance(widget, ToolCard):
            widget.set_arguments(block.get("arguments"))

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

    def _set_note(self, message: Mapping[str, Any]) -> None:
        reason = message.get("stopReason")
        error = message.get("errorMessage")
        note = ""
        if reason == "aborted":
            note = "■ aborted"
        elif reason == "error":
            note = f"✗ {error}" if isinstance(error, str) and error else "✗ the model failed"
        elif reason == "length":
            note = "… stopped at the output limit"
        self._note_text = note = inert(note)
        self._note.update(note)
        self._note.display = bool(note)
        self._note.set_class(reason == "error", "is-error")


def _user_text(entry: Mapping[str, Any]) -> str:
    message = entry_message(entry, "user")
    return content_text(message.get("content")) if message is not None else ""


def entry_widget(entry: Mapping[str, Any]) -> Widget | None:
    """The widget of one stored entry, or ``None`` for entries that are not shown."""
    kind = entry.get("kind")
    data = entry.get("data")
    data = data if isinstance(data, dict) else {}
    if kind == "pi.user":
        text = _user_text(entry)
        classes = "user continuation" if data.get("continuation") else "user"
        return Static(Text(inert(text)), classes=classes)
    if kind == "pi.assistant":
        message = entry_message(entry, "assistant")
        if message is None:
            return None
        view = AssistantView(message)
        if "reason" in data:
            view.add_class("display-only")
        return view
    if kind == "pi.tool_result":
        card = ToolCard({"id": "", "name": _tool_name(entry), "arguments": None})
        card.set_result(entry)
        return card
    if kind == "pi.notice":
        return Static(Text(inert(f"ⓘ {_user_text(entry)}")), classes="notice")
    if kind in ("pi.summary", "pi.handoff"):
        title = "Earlier conversation summarised" if kind == "pi.summary" else "Handoff"
        body = MarkdownText(_user_text(entry), classes="summary-text")
        return QuietCollapsible(body, title=title, collapsed=True, classes="summary")
    if kind == "pi.reset":
        return Static("── context reset ──", classes="divider")
    if kind == "pi.usage":
        error = data.get("error")
        if error:
            attempt = data.get("attempt")
            label = f"attempt {attempt} failed" if attempt is not None else "attempt failed"
            detail = error if isinstance(error, str) else content_text(error) or str(error)
            return Static(Text(inert(f"↻ {label}: {detail}")), classes="dim-line")
        return None
    if kind == "pi.system":
        return None
    if kind == SHELL_ENTRY_KIND:  # a !cmd / !!cmd the user ran
        return Static(_shell_entry_text(data), classes="shell")
    change = change_text(entry)
    if change is not None:  # a model or thinking-level switch: one dim marker line
        return Static(Text(inert(change)), classes="dim-line settings-change")
    text = _user_text(entry) or content_text(data.get("text") or data.get("message"))
    if text:
        return Static(Text(inert(f"{kind}: {text}")), classes="dim-line")
    return None


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


def _tool_name(entry: Mapping[str, Any]) -> str:
    message = entry_message(entry, "toolResult")
    name = message.get("toolName") if message is not None else None
    return name if isinstance(name, str) else "tool"
