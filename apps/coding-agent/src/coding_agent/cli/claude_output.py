"""Claude Code's headless output shapes: ``-p PROMPT --output-format json`` and ``stream-json``.

Claude Code's CI scripts read its shapes (``claude -p "…" --output-format json | jq -r
.result``), so these are its shapes, field for field, filled from this agent's session
(README "Headless runs" lists them; :class:`ClaudeOutput` writes them):

* ``json``: one line at the end, the **result** object (nothing else on stdout);
* ``stream-json``: one JSON line per message: first ``{"type": "system", "subtype": "init",
  "session_id", "cwd", "model", "tools", "mcp_servers", "permissionMode", "apiKeySource",
  "slash_commands", "uuid"}``; then an ``assistant`` line for each model answer (``message`` is
  Anthropic-shaped: ``{"id", "type": "message", "role": "assistant", "model", "content",
  "stop_reason", "stop_sequence", "usage"}`` with ``text``, ``thinking`` and ``tool_use``
  (``id``, ``name``, ``input``) blocks) and a ``user`` line for each tool result
  (``{"role": "user", "content": [{"type": "tool_result", "tool_use_id", "content",
  "is_error"}]}``); the result object is the last line. Claude Code wants ``--verbose`` with
  it; here it is not needed (``--verbose`` still prints the session line on stderr). With
  ``--include-partial-messages`` each answer is streamed before its ``assistant`` line as
  ``stream_event`` lines (:meth:`ClaudeOutput.partial`).

The **result** object: ``type: "result"``, ``subtype`` (``success``; ``error_max_turns`` when
``--max-turns`` stopped a model still calling tools; ``error_during_execution`` when the turn
failed, was aborted or the storage failed, or the run could not start: :func:`failure_result`),
``is_error``, ``duration_ms`` (the run's wall time
from the send), ``duration_api_ms`` (the time spent waiting for the model: from the send, or the
last tool result, to each answer, measured here), ``num_turns`` (the run's model calls, an
answer entry each), ``result`` (the final answer's text, or the error's text when ``is_error``;
an error also lists it in ``errors``), ``session_id`` (this agent's session id: ``--resume`` it),
``total_cost_usd`` (the sum of the answers' ``usage.cost.total``, the provider's prices from the
model registry; 0 for a model without prices, the faux one included), ``usage``
(``input_tokens``, ``output_tokens``, ``cache_creation_input_tokens``,
``cache_read_input_tokens``, summed), ``permission_denials`` (``{"tool_name", "tool_use_id",
"tool_input"}`` for each call refused for lack of approval) and ``uuid``.

**Tool names** are Claude Code's where it has one (``bash`` is ``Bash``, ``find`` is ``Glob``:
:func:`pico3.claude_tool`, the table the hooks use) and so are the input's field names
(``file_path``, ``old_string``…); a tool Claude Code has no name for keeps ours (an MCP tool's
``mcp__server__tool`` is the same in both). ``uuid`` is derived from the session and the entry:
the same message has the same uuid in every run that shows it.

**Subagents** (``stream-json``): a subagent's own ``assistant`` and ``user`` (tool result) lines
are streamed as Claude Code streams a ``Task``'s, with ``parent_tool_use_id`` the id of the
``agent`` call that ran it (the run's own lines carry ``null``); a subagent's subagent names its
parent subagent's call. They come once the subagent finished, all together, right before the
``agent`` call's own ``tool_result`` line (the call's result names the subagent's conversation;
its view, as the run last saw it, gives the messages), so a reader sees each subagent's work
next to its report. They do not count in ``num_turns`` or ``usage`` (the run's own model
calls).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TextIO

from pico3 import AssistantEntry, ToolResultEntry, ViewDecoder, ViewEntry, claude_tool
from pico3.models import (
    ImageContent,
    ServerToolContent,
    TextContent,
    ThinkingContent,
    ToolCall,
)

__all__ = [
    "CLAUDE_PERMISSION_MODES",
    "OUTPUT_FORMATS",
    "ClaudeOutput",
    "Subtype",
    "failure_result",
]

OUTPUT_FORMATS = ("text", "json", "stream-json")
"""``--output-format``'s values, as Claude Code's (``text``: what ``-p`` prints anyway)."""

Subtype = Literal["success", "error_max_turns", "error_during_execution"]

CLAUDE_PERMISSION_MODES = {
    "ask": "default",
    "accept-edits": "acceptEdits",
    "sandbox": "acceptEdits",  # edits run unasked; commands too, but only in the OS sandbox
    "plan": "plan",
    "auto": "bypassPermissions",
}
"""Our permission mode → Claude Code's ``permissionMode`` in the init line."""

_STOP_REASONS = {"stop": "end_turn", "toolUse": "tool_use", "length": "max_tokens"}


def _usage(entries: Sequence[AssistantEntry]) -> dict[str, int]:
    totals: dict[str, int] = {
        "input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 0,
    }
    for entry in entries:
        usage = entry.message.usage if entry.message is not None else None
        if usage is None:
            continue
        totals["input_tokens"] += usage.input
        totals["cache_creation_input_tokens"] += usage.cache_write
        totals["cache_read_input_tokens"] += usage.cache_read
        totals["output_tokens"] += usage.output
    return totals


def _streamed_blocks(content: Sequence[Any]) -> list[tuple[str, str]]:
    """The text and thinking blocks of an answer, as :meth:`ClaudeOutput.partial` streams them
    (kind, text); the answer's other blocks are left out."""
    blocks: list[tuple[str, str]] = []
    for block in content:
        if isinstance(block, TextContent):
            blocks.append(("text", block.text))
        elif isinstance(block, ThinkingContent) and not block.redacted:
            blocks.append(("thinking", block.thinking))
    return blocks


def _continues(streamed: Sequence[tuple[str, int]], blocks: Sequence[tuple[str, str]]) -> bool:
    """Whether ``blocks`` (kind, text) go on from what was ``streamed`` (kind, length)."""
    if len(blocks) < len(streamed):
        return False
    return all(
        kind == blocks[i][0] and length <= len(blocks[i][1])
        for i, (kind, length) in enumerate(streamed)
    )


class ClaudeOutput:
    """Writes one run's Claude Code lines on ``out``: with ``stream`` (``stream-json``) the init
    line and a line per message as :meth:`entry` hears them, and in both formats the result
    (:meth:`result`). ``session_id`` and ``cwd`` name the run's session."""

    def __init__(
        self,
        out: TextIO,
        *,
        stream: bool,
        session_id: str,
        cwd: str,
        partial: bool = False,
        conversation_view: Callable[[int], Mapping[str, Any] | None] | None = None,
    ) -> None:
        self.conversation_view = conversation_view
        """The newest view (JSON) of a conversation by id, as the run saw it (``None``: not
        seen): a subagent's messages are read from it (module docstring)."""
        self.out = out
        self.stream = stream
        self.partial_messages = stream and partial
        """``--include-partial-messages``: every answer is streamed as ``stream_event`` lines
        too (:meth:`partial`) before its ``assistant`` line."""
        self.session_id = session_id
        self.cwd = cwd
        self.started = time.monotonic()
        self.waiting_since = self.started
        self.api_seconds = 0.0
        self.answers: list[AssistantEntry] = []
        self.calls: dict[str, ToolCall] = {}
        self._seen: set[int] = set()
        self._streamed: list[tuple[str, int]] | None = None
        """The streaming answer's blocks written so far as ``stream_event`` lines (their
        kind and the length of their text); ``None`` when no answer is streaming."""
        self._events = 0

    def _uuid(self, what: str) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"coding-agent:{self.session_id}/{what}"))

    def _line(self, value: Mapping[str, Any]) -> None:
        self.out.write(json.dumps(value, separators=(",", ":")) + "\n")
        self.out.flush()

    def init(self, *, model: str | None, tools: Sequence[str], permission_mode: str | None) -> None:
        """The ``system``/``init`` line (``stream-json`` only): the session, the folder, the
        model (``provider/id``), the tools offered (Claude Code's names where it has one) and
        the permission mode (Claude Code's name of ours)."""
        if not self.stream:
            return
        names = list(dict.fromkeys(claude_tool(tool, None, self.cwd)[0] for tool in tools))
        mode = CLAUDE_PERMISSION_MODES.get(permission_mode or "ask", "default")
        self._line(
            {
                "type": "system",
                "subtype": "init",
                "cwd": self.cwd,
                "session_id": self.session_id,
                "tools": names,
                "mcp_servers": [],
                "model": model,
                "permissionMode": mode,
                "apiKeySource": "none",
                "slash_commands": [],
                "uuid": self._uuid("init"),
            }
        )

    def _stream_event(self, event: dict[str, Any]) -> None:
        self._events += 1
        self._line(
            {
                "type": "stream_event",
                "event": event,
                "parent_tool_use_id": None,
                "session_id": self.session_id,
                "uuid": self._uuid(f"stream/{self.started}/{self._events}"),
            }
        )

    def partial(self, message: Mapping[str, Any]) -> None:
        """The streaming answer grew (``--include-partial-messages``, ``stream-json`` only):
        Claude Code's ``stream_event`` lines, Anthropic's stream events: ``message_start``
        when an answer starts, ``content_block_start`` for each new text or thinking block and
        a ``content_block_delta`` (``text_delta``, ``thinking_delta``) with what it gained.
        Tool calls are not streamed (their ``tool_use`` blocks are in the ``assistant`` line).
        The answer's own line closes the stream (:meth:`entry`); a streaming answer that starts
        over (a retry) closes the one before."""
        if not self.partial_messages:
            return
        blocks: list[tuple[str, str]] = []
        for block in message.get("content") or ():
            kind = block.get("type") if isinstance(block, dict) else None
            field = {"text": "text", "thinking": "thinking"}.get(str(kind))
            if field is not None and isinstance(block.get(field), str):
                blocks.append((field, block[field]))
        self._grow(blocks, message.get("model"))

    def _grow(self, blocks: Sequence[tuple[str, str]], model: Any) -> None:
        streamed = self._streamed
        if streamed is not None and not _continues(streamed, blocks):
            self._close_stream(None)  # it started over
            streamed = None
        if streamed is None:
            streamed = self._streamed = []
            usage = {key: 0 for key in _usage([])}
            self._stream_event(
                {
                    "type": "message_start",
                    "message": {
                        "id": f"msg_stream{self._events}",
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": usage,
                    },
                }
            )
        for index, (kind, text) in enumerate(blocks):
            if index == len(streamed):
                empty = {"type": kind, kind: ""}
                if kind == "thinking":
                    empty["signature"] = ""
                self._stream_event(
                    {"type": "content_block_start", "index": index, "content_block": empty}
                )
                streamed.append((kind, 0))
            gained = text[streamed[index][1] :]
            if gained:
                delta = {"type": f"{kind}_delta", kind: gained}
                self._stream_event({"type": "content_block_delta", "index": index, "delta": delta})
                streamed[index] = (kind, len(text))

    def _close_stream(self, stop_reason: str | None) -> None:
        """End the streaming answer's events: each block's ``content_block_stop``, then
        ``message_delta`` (the stop reason) and ``message_stop``."""
        streamed, self._streamed = self._streamed, None
        if streamed is None:
            return
        for index in range(len(streamed)):
            self._stream_event({"type": "content_block_stop", "index": index})
        self._stream_event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": 0},
            }
        )
        self._stream_event({"type": "message_stop"})

    def entry(self, entry: ViewEntry) -> None:
        """An entry the turn added: an answer is counted (turns, usage, time waited for it) and
        streamed as an ``assistant`` line, a tool result as a ``user`` line; others are not
        written. An entry heard twice (a rehydrated view) counts once."""
        if entry.id in self._seen:
            return
        self._seen.add(entry.id)
        now = time.monotonic()
        if isinstance(entry, AssistantEntry):
            self.api_seconds += max(0.0, now - self.waiting_since)
            self.answers.append(entry)
            message = entry.message
            if message is None:
                return
            for block in message.content:
                if isinstance(block, ToolCall):
                    self.calls[block.id] = block
            if self.partial_messages and not entry.display_only:  # what was not streamed yet
                self._grow(_streamed_blocks(message.content), message.model)
            if self.stream:
                self._close_stream(_STOP_REASONS.get(message.stop_reason))
            if self.stream and not entry.display_only:
                self._line(self._assistant(entry))
        elif isinstance(entry, ToolResultEntry):
            self.waiting_since = now
            if self.stream and entry.message is not None:
                self._subagent_lines(entry, set())
                self._line(self._tool_result(entry))

    def _subagent_lines(self, result: ToolResultEntry, shown: set[int]) -> None:
        """The lines of the subagent whose ``agent`` call ``result`` ends (its details name
        the subagent's conversation), each with ``parent_tool_use_id`` that call's id; its
        own subagents' lines before their calls' results (``shown``: the conversations
        written already, so a cycle cannot loop)."""
        details = result.data.details
        child = details.get("conversation") if isinstance(details, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if type(child) is not int or child in shown or self.conversation_view is None:
            return
        assert result.message is not None
        shown.add(child)
        view = ViewDecoder().decode(self.conversation_view(child))
        if view is None:
            return
        parent = result.message.tool_call_id
        for entry in view.entries:
            what = f"entry/{child}/{entry.id}"
            if isinstance(entry, AssistantEntry) and entry.message is not None:
                if not entry.display_only:
                    self._line(self._assistant(entry, parent=parent, what=what))
            elif isinstance(entry, ToolResultEntry) and entry.message is not None:
                self._subagent_lines(entry, shown)
                self._line(self._tool_result(entry, parent=parent, what=what))

    def _assistant(
        self, entry: AssistantEntry, *, parent: str | None = None, what: str | None = None
    ) -> dict[str, Any]:
        message = entry.message
        assert message is not None
        content: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, TextContent):
                content.append({"type": "text", "text": block.text})
            elif isinstance(block, ThinkingContent):
                if block.redacted:
                    content.append({"type": "redacted_thinking", "data": block.signature or ""})
                else:
                    signature = block.signature or ""
                    content.append(
                        {"type": "thinking", "thinking": block.thinking, "signature": signature}
                    )
            elif isinstance(block, ToolCall):
                name, arguments = claude_tool(block.name, block.arguments, self.cwd)
                content.append({"type": "tool_use", "id": block.id, "name": name,
                                "input": arguments})  # fmt: skip
            elif isinstance(block, ServerToolContent):  # the provider's own blocks, as sent
                content.extend(block.blocks)
        return {
            "type": "assistant",
            "message": {
                "id": f"msg_entry{entry.id}",
                "type": "message",
                "role": "assistant",
                "model": message.model,
                "content": content,
                "stop_reason": _STOP_REASONS.get(message.stop_reason),
                "stop_sequence": None,
                "usage": _usage([entry]),
            },
            "parent_tool_use_id": parent,
            "session_id": self.session_id,
            "uuid": self._uuid(what or f"entry/{entry.id}"),
        }

    def _tool_result(
        self, entry: ToolResultEntry, *, parent: str | None = None, what: str | None = None
    ) -> dict[str, Any]:
        message = entry.message
        assert message is not None
        blocks: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, TextContent):
                blocks.append({"type": "text", "text": block.text})
            elif isinstance(block, ImageContent):  # pyright: ignore[reportUnnecessaryIsInstance]
                source = {"type": "base64", "media_type": block.mime_type, "data": block.data}
                blocks.append({"type": "image", "source": source})
        texts = [block["text"] for block in blocks if block["type"] == "text"]
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": "".join(texts) if len(texts) == len(blocks) else blocks,
            "is_error": message.is_error,
        }
        return {
            "type": "user",
            "message": {"role": "user", "content": [result]},
            "parent_tool_use_id": parent,
            "session_id": self.session_id,
            "uuid": self._uuid(what or f"entry/{entry.id}"),
        }

    def denials(self, refused: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """``permission_denials``: each refused call (``{"name", "args"}``, as the headless
        run collects them) with the id of the call it was, found among the answers' calls."""
        found: list[dict[str, Any]] = []
        used: set[str] = set()
        for request in refused:
            name, args = request.get("name"), request.get("args")
            call = next(
                (
                    c
                    for c in self.calls.values()
                    if c.id not in used and c.name == name and (args is None or c.arguments == args)
                ),
                None,
            )
            if call is not None:
                used.add(call.id)
            tool = str(name or (call.name if call is not None else "tool"))
            arguments = args if args is not None else (call.arguments if call else {})
            tool_name, tool_input = claude_tool(tool, arguments, self.cwd)
            found.append(
                {
                    "tool_name": tool_name,
                    "tool_use_id": call.id if call is not None else None,
                    "tool_input": tool_input,
                }
            )
        return found

    def result(
        self,
        subtype: Subtype,
        text: str,
        *,
        error: str | None = None,
        refused: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """The result line: ``subtype``, the answer's ``text`` (``error`` instead when given:
        ``is_error`` is then true and ``errors`` lists it), the counts, the cost and usage."""
        is_error = error is not None or subtype != "success"
        cost = sum(
            entry.message.usage.cost.total
            for entry in self.answers
            if entry.message is not None and entry.message.usage is not None
        )
        line: dict[str, Any] = {
            "type": "result",
            "subtype": subtype,
            "is_error": is_error,
            "duration_ms": round((time.monotonic() - self.started) * 1000),
            "duration_api_ms": round(self.api_seconds * 1000),
            "num_turns": len(self.answers),
            "result": error if error is not None else text,
            "session_id": self.session_id,
            "total_cost_usd": cost,
            "usage": _usage(self.answers),
            "permission_denials": self.denials(refused),
            "uuid": self._uuid(f"result/{len(self._seen)}/{self.started}"),
        }
        if is_error:
            line["errors"] = [error if error is not None else text]
        self._line(line)


def failure_result(out: TextIO, message: str, *, stream: bool, session_id: str = "") -> None:
    """Claude Code's result for a run that failed before its turn could report (a flag's bad
    value, an unreadable ``--settings`` file, an unknown model, a session in use, a server
    that cannot be reached, a ``/command`` no template provides): ``error_during_execution``,
    ``is_error`` true, ``num_turns`` 0, ``message`` as ``result`` and in ``errors`` — what
    ``claude -p --output-format json`` prints when it cannot start (``No conversation found
    with session ID: …``), so ``| jq .result`` reads the error instead of nothing. ``stream``
    (``stream-json``): the same object, as the stream's one line. ``session_id``: the session
    the run was for, when it exists (``""``: none was made). A reader that left (a closed
    pipe) is not an error of its own: the error line on stderr says it all."""
    writer = ClaudeOutput(out, stream=stream, session_id=session_id, cwd="")
    try:
        writer.result("error_during_execution", "", error=message)
    except (OSError, ValueError):
        pass
