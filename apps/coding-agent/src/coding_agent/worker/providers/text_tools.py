"""Tool calling as plain text, for models served without native tool calling.

Many models behind an OpenAI-compatible server (Ollama, llama.cpp, vLLM) have no tool-calling
template, and the server answers a request with ``tools`` by refusing it. Such a model can still
use tools if the protocol travels in ordinary text, and this module is that protocol, in three
pieces that know nothing about HTTP:

* :func:`render_tools_prompt` — a system section that lists every tool (name, description,
  JSON Schema) and states the calling convention: a fenced block per call ::

      ```tool_call
      {"name": "read", "arguments": {"path": "README.md"}}
      ```

* :func:`render_history` — the transcript rewritten so that it only holds text: an assistant's
  earlier tool calls become the same fenced blocks, and tool results become user messages
  (``Tool result for call <id> (<name>):``), so the model sees one consistent convention.
* :class:`TextToolParser` — reads the streamed answer incrementally. Text outside blocks comes
  out as text as soon as it is certain not to start a block; a block is held back whole until
  its closing fence, then comes out as a :class:`ParsedCall`. A block whose body is not a call
  (bad JSON, no ``name``) comes out unchanged as text, so nothing the model wrote is lost.

The parser's output does not depend on how the stream is cut into chunks; the provider gives each
call a deterministic id with :func:`text_call_id`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, cast

import msgspec

from chord import is_json_value
from pico3.models import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = [
    "FENCE",
    "OPEN_FENCE",
    "ParsedCall",
    "Piece",
    "TextToolParser",
    "parse_call",
    "render_call",
    "render_history",
    "render_tool_result",
    "render_tools_prompt",
    "text_call_id",
]

FENCE = "```"
OPEN_FENCE = "```tool_call"
"""The opening fence; the block ends at a line that starts with :data:`FENCE`."""


class ParsedCall(msgspec.Struct, frozen=True):
    """One complete tool call read from the text: a tool ``name`` and its JSON ``arguments``."""

    name: str
    arguments: dict[str, Any]


Piece = str | ParsedCall
"""What the parser yields: text to show, or a call."""


# -- the prompt --------------------------------------------------------------------------------
_CONVENTION = """\
# Calling tools

You can use the tools listed below. To call one, write a fenced block exactly like this, with \
the fences on their own lines and one JSON object between them:

```tool_call
{"name": "TOOL_NAME", "arguments": {"PARAMETER": "VALUE"}}
```

Rules:
- "name" is one of the tool names below; "arguments" is a JSON object that matches the tool's \
parameters schema. Use strict JSON: double quotes, no comments, no trailing commas.
- You may write several tool_call blocks in one answer; they run in order.
- After your tool_call blocks, stop and wait. Each result comes back in the next user message, \
headed "Tool result for call <id> (<name>):". Never write tool results yourself.
- When you need no tool, answer normally, without a tool_call block."""


def render_tools_prompt(tools: Sequence[Tool]) -> str:
    """The system section describing ``tools`` and the fenced calling convention."""
    parts = [_CONVENTION, "", "# Available tools"]
    for tool in tools:
        schema = msgspec.json.encode(tool.parameters).decode()
        parts += ["", f"## {tool.name}", tool.description.strip(), f"Parameters: {schema}"]
    return "\n".join(parts)


# -- the transcript ----------------------------------------------------------------------------
def render_call(call: ToolCall) -> str:
    """``call`` as the fenced block the model is asked to write (no trailing newline)."""
    body = msgspec.json.encode({"name": call.name, "arguments": call.arguments}).decode()
    return f"{OPEN_FENCE}\n{body}\n{FENCE}"


def render_tool_result(message: ToolResultMessage) -> str:
    """The text heading and body of one tool result, as the model reads it."""
    text = "\n".join(b.text for b in message.content if isinstance(b, TextContent))
    status = " [error]" if message.is_error else ""
    return f"Tool result for call {message.tool_call_id} ({message.tool_name}){status}:\n{text}"


def render_history(messages: Sequence[Message], *, images: bool = True) -> list[Message]:
    """``messages`` with every tool call and tool result turned into text.

    An assistant message's blocks become one text block (thinking is dropped, as replay drops
    it anyway; calls become :func:`render_call` blocks). A run of consecutive tool results
    becomes one user message, so user and assistant still alternate for chat templates that
    insist on it. Images in tool results travel as user image parts when ``images`` is true,
    otherwise a note says they were left out.
    """
    out: list[Message] = []
    results: list[ToolResultMessage] = []
    for message in messages:
        if isinstance(message, ToolResultMessage):
            results.append(message)
            continue
        if results:
            out.append(_results_message(results, images))
            results = []
        if isinstance(message, AssistantMessage):
            out.append(_assistant_as_text(message))
        else:
            out.append(message)
    if results:
        out.append(_results_message(results, images))
    return out


def _assistant_as_text(message: AssistantMessage) -> AssistantMessage:
    text = ""
    for block in message.content:
        if isinstance(block, TextContent):
            text += block.text
        elif isinstance(block, ToolCall):
            if text and not text.endswith("\n"):
                text += "\n"
            text += render_call(block) + "\n"
    content = [TextContent(text=text)] if text else []
    return msgspec.structs.replace(message, content=content)


def _results_message(results: Sequence[ToolResultMessage], images: bool) -> UserMessage:
    texts: list[str] = []
    pictures: list[ImageContent] = []
    for result in results:
        text = render_tool_result(result)
        found = [b for b in result.content if isinstance(b, ImageContent)]
        if found and images:
            pictures.extend(found)
            text += f"\n({len(found)} image(s) attached below)"
        elif found:
            text += "\n(image output omitted: this model takes no images)"
        texts.append(text)
    joined = "\n\n".join(texts)
    if not pictures:
        return UserMessage(content=joined)
    parts: list[TextContent | ImageContent] = [TextContent(text=joined), *pictures]
    return UserMessage(content=parts)


# -- reading calls back ------------------------------------------------------------------------
def text_call_id(seed: str, index: int) -> str:
    """A deterministic tool-call id for the ``index``-th call of the response named ``seed``."""
    digest = hashlib.sha256(f"{seed}#{index}".encode()).hexdigest()[:12]
    return f"call_{digest}_{index}"


def parse_call(body: str) -> ParsedCall | None:
    """The call a block's ``body`` describes, or ``None`` when it is not one.

    The body must be one strict-JSON object with a non-empty string ``name`` and an object
    ``arguments`` (absent means ``{}``; a JSON string holding an object is accepted too, as
    some models encode the arguments twice)."""
    try:
        value: Any = msgspec.json.decode(body.strip())
    except msgspec.DecodeError:
        return None
    if not isinstance(value, dict) or not is_json_value(value):
        return None
    value = cast("dict[str, Any]", value)
    name = value.get("name")
    arguments = value.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = msgspec.json.decode(arguments)
        except msgspec.DecodeError:
            return None
        if not is_json_value(arguments):
            return None
    if not isinstance(name, str) or not name.strip() or not isinstance(arguments, dict):
        return None
    return ParsedCall(name.strip(), cast("dict[str, Any]", arguments))


class TextToolParser:
    """Splits a streamed answer into text and :class:`ParsedCall` values, chunk by chunk.

    A block opens with :data:`OPEN_FENCE` followed by nothing but spaces up to the end of the
    line (it may start mid-line: weak models are not tidy), and closes at the first line that
    starts with :data:`FENCE`. A raw newline cannot occur inside a JSON string, so that line
    cannot be part of a valid body. One newline straight after a closed call is dropped with
    it. When the stream ends inside a block, a body that is already a complete call still
    counts; anything else is given back as text.

    :meth:`feed` returns what is certain so far; :meth:`finish` returns the rest. Text that
    might be the start of an opening fence is held back, so a block never shows half parsed.
    """

    def __init__(self) -> None:
        self._buffer = ""
        self._opening: str | None = None  # the opening line while inside a block
        self._scanned = 0  # how much of a block's body was searched for the closing fence
        self._skip_newline = False
        self._done = False
        self.calls = 0
        """How many calls were produced so far."""

    def feed(self, text: str) -> list[Piece]:
        """Take the next chunk of the answer; returns the pieces it completed."""
        if self._done:
            raise RuntimeError("the parser has finished")
        self._buffer += text
        return self._drain(final=False)

    def finish(self) -> list[Piece]:
        """The stream ended: returns everything still held back."""
        if self._done:
            raise RuntimeError("the parser has finished")
        pieces = self._drain(final=True)
        self._done = True
        return pieces

    def _drain(self, *, final: bool) -> list[Piece]:
        out: list[Piece] = []
        while True:
            if self._opening is None:
                if not self._text(out, final):
                    return out
            elif not self._block(out, final):
                return out

    def _text(self, out: list[Piece], final: bool) -> bool:
        """Advance outside a block; ``True`` when a block opened (keep going)."""
        if self._skip_newline:
            if not self._buffer:
                return False
            self._skip_newline = False
            if self._buffer.startswith("\n"):
                self._buffer = self._buffer[1:]
        buffer = self._buffer
        searched = 0
        while True:
            start = buffer.find(OPEN_FENCE, searched)
            if start < 0:
                keep = 0 if final else _partial_suffix(buffer, OPEN_FENCE)
                _emit(out, buffer[: len(buffer) - keep])
                self._buffer = buffer[len(buffer) - keep :]
                return False
            after = start + len(OPEN_FENCE)
            newline = buffer.find("\n", after)
            line_rest = buffer[after:] if newline < 0 else buffer[after:newline]
            if line_rest.strip(" \t\r"):
                searched = start + 1  # "```tool_call" followed by more words: not a fence
                continue
            if newline < 0:
                if final:
                    searched = start + 1
                    continue
                _emit(out, buffer[:start])  # hold the fence until its line is complete
                self._buffer = buffer[start:]
                return False
            _emit(out, buffer[:start])
            self._opening = buffer[start : newline + 1]
            self._buffer = buffer[newline + 1 :]
            self._scanned = 0
            return True

    def _block(self, out: list[Piece], final: bool) -> bool:
        """Advance inside a block; ``True`` when it closed (keep going)."""
        assert self._opening is not None
        buffer = self._buffer
        if buffer.startswith(FENCE):
            close = 0
        else:
            # Resume where the last search stopped (a long body arrives in many chunks).
            close = buffer.find("\n" + FENCE, max(self._scanned - len(FENCE), 0))
            close = close + 1 if close >= 0 else -1
        self._scanned = len(buffer)
        if close < 0:
            if final:
                call = parse_call(buffer)
                if call is not None:
                    out.append(call)
                    self.calls += 1
                else:
                    _emit(out, self._opening + buffer)
                self._opening = None
                self._buffer = ""
            return False
        body = buffer[:close]
        call = parse_call(body)
        if call is not None:
            out.append(call)
            self.calls += 1
            self._skip_newline = True
        else:
            _emit(out, self._opening + buffer[: close + len(FENCE)])
        self._opening = None
        self._buffer = buffer[close + len(FENCE) :]
        return True


def _emit(out: list[Piece], text: str) -> None:
    if not text:
        return
    if out and isinstance(out[-1], str):
        out[-1] += text
    else:
        out.append(text)


def _partial_suffix(text: str, marker: str) -> int:
    """The length of the longest suffix of ``text`` that is a proper prefix of ``marker``."""
    for size in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-size:]):
            return size
    return 0
