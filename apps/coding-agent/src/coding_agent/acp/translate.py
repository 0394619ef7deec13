"""From our view to ACP's ``session/update`` notifications, and from ACP prompt blocks to ours.

Nothing here does I/O: each function takes JSON as the view holds it (an entry's ``model``
messages, the live ``turn.message``) and returns the SDK's update objects, so the mapping is
tested on its own.

* The model's answer streams as it grows: :class:`MessageStream` sends what the live
  ``turn.message`` gained since the last revision (``agent_message_chunk`` for text,
  ``agent_thought_chunk`` for thinking) and, when the answer is stored as an entry, only what
  was never streamed (a fast answer may arrive whole).
* A tool call becomes ``tool_call`` (``pending``, with its kind, a title, the files it touches as
  locations and its arguments), then ``tool_call_update``s: ``in_progress`` when it starts,
  ``completed`` or ``failed`` with its output, and for ``write`` and ``edit`` the change as
  diffs an editor can show.
* :func:`replay` turns a stored transcript into the updates ``session/load`` sends, in order.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlparse

from acp.schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    BlobResourceContents,
    ContentToolCallContent,
    EmbeddedResourceContentBlock,
    FileEditToolCallContent,
    ImageContentBlock,
    ResourceContentBlock,
    TerminalToolCallContent,
    TextContentBlock,
    TextResourceContents,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)

__all__ = [
    "MessageStream",
    "Update",
    "prompt_content",
    "replay",
    "tool_call_result",
    "tool_call_running",
    "tool_call_start",
    "tool_kind",
]

Update = AgentMessageChunk | AgentThoughtChunk | UserMessageChunk | ToolCallStart | ToolCallProgress
"""One ``session/update`` this module produces."""

ToolKind = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]

_KINDS: dict[str, ToolKind] = {
    "read": "read",
    "ls": "read",
    "write": "edit",
    "edit": "edit",
    "grep": "search",
    "find": "search",
    "code_search": "search",
    "web_search": "search",
    "bash": "execute",
    "job_start": "execute",
    "job_kill": "execute",
    "web_fetch": "fetch",
    "question": "think",
    "todo_write": "think",
}


def tool_kind(name: str) -> ToolKind:
    """ACP's kind of our tool ``name`` (an editor picks the icon and the grouping by it)."""
    return _KINDS.get(name, "other")


def _absolute(path: object, cwd: Path) -> str | None:
    if not isinstance(path, str) or not path:
        return None
    return os.path.normpath(cwd / os.path.expanduser(path))


def _title(name: str, args: Mapping[str, Any], cwd: Path) -> str:
    for key in ("command", "path", "pattern", "url", "query", "question"):
        value = args.get(key)
        if isinstance(value, str) and value:
            if key == "path":
                shown = os.path.relpath(_absolute(value, cwd) or value, cwd)
                value = value if shown.startswith("..") else shown
            short = value if len(value) <= 80 else value[:77] + "..."
            return f"{name} {short}"
    return name


def _arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    args = call.get("arguments")
    return args if isinstance(args, dict) else {}  # pyright: ignore[reportUnknownVariableType]


def tool_call_start(call: Mapping[str, Any], cwd: Path) -> ToolCallStart:
    """``tool_call`` for one ``toolCall`` block of an assistant message (``pending``)."""
    name = str(call.get("name") or "tool")
    args = _arguments(call)
    path = _absolute(args.get("path"), cwd)
    return ToolCallStart(
        session_update="tool_call",
        tool_call_id=str(call.get("id")),
        title=_title(name, args, cwd),
        kind=tool_kind(name),
        status="pending",
        locations=[ToolCallLocation(path=path)] if path is not None else None,
        raw_input=args,
    )


def tool_call_running(call_id: str) -> ToolCallProgress:
    """``tool_call_update``: the call started."""
    return ToolCallProgress(
        session_update="tool_call_update", tool_call_id=call_id, status="in_progress"
    )


def _diffs(name: str, args: Mapping[str, Any], cwd: Path) -> list[FileEditToolCallContent]:
    path = _absolute(args.get("path"), cwd)
    if path is None:
        return []
    if name == "write" and isinstance(args.get("content"), str):
        return [
            FileEditToolCallContent(type="diff", path=path, old_text=None, new_text=args["content"])
        ]
    if name != "edit":
        return []
    edits = args.get("edits")
    items: list[Any] = edits if isinstance(edits, list) else [args]  # pyright: ignore[reportUnknownVariableType]
    return [
        FileEditToolCallContent(
            type="diff", path=path, old_text=item["oldText"], new_text=item["newText"]
        )
        for item in items
        if isinstance(item, dict)
        and isinstance(item.get("oldText"), str)
        and isinstance(item.get("newText"), str)
    ]


def tool_call_result(
    result: Mapping[str, Any], call: Mapping[str, Any] | None, cwd: Path
) -> ToolCallProgress:
    """``tool_call_update`` for a ``toolResult`` message: ``completed`` or ``failed`` with its
    text, and the change as diffs for a ``write`` or ``edit`` that succeeded."""
    failed = bool(result.get("isError"))
    content: list[ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent] = []
    for block in result.get("content") or ():
        if isinstance(block, dict) and block.get("type") == "text" and block.get("text"):
            content.append(
                ContentToolCallContent(
                    type="content", content=TextContentBlock(type="text", text=str(block["text"]))
                )
            )
    if call is not None and not failed:
        content.extend(_diffs(str(call.get("name")), _arguments(call), cwd))
    return ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id=str(result.get("toolCallId")),
        status="failed" if failed else "completed",
        content=content or None,
    )


def _chunk(block: Mapping[str, Any], text: str) -> AgentMessageChunk | AgentThoughtChunk:
    content = TextContentBlock(type="text", text=text)
    if block.get("type") == "thinking":
        return AgentThoughtChunk(session_update="agent_thought_chunk", content=content)
    return AgentMessageChunk(session_update="agent_message_chunk", content=content)


def _block_text(block: Mapping[str, Any]) -> str | None:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text") or "")
    if kind == "thinking":
        return str(block.get("thinking") or "")
    return None


class MessageStream:
    """How much of the assistant message being streamed was sent, block by block."""

    def __init__(self) -> None:
        self._sent: dict[int, int] = {}

    def _gained(self, message: Mapping[str, Any]) -> list[Update]:
        updates: list[Update] = []
        for index, block in enumerate(message.get("content") or ()):
            if not isinstance(block, dict):
                continue
            text = _block_text(block)
            if text is None:
                continue
            sent = self._sent.get(index, 0)
            if len(text) > sent:
                updates.append(_chunk(block, text[sent:]))
                self._sent[index] = len(text)
        return updates

    def live(self, message: Mapping[str, Any]) -> list[Update]:
        """The chunks the live ``turn.message`` gained since the last call."""
        return self._gained(message)

    def stored(self, message: Mapping[str, Any], cwd: Path) -> list[Update]:
        """The stored answer: what of its text was never streamed, then its tool calls; the
        next answer starts from nothing."""
        updates = self._gained(message)
        self._sent.clear()
        for block in message.get("content") or ():
            if isinstance(block, dict) and block.get("type") == "toolCall":
                updates.append(tool_call_start(block, cwd))
        return updates

    def reset(self) -> None:
        """Forget the live message (it was dropped: a retry, an abort)."""
        self._sent.clear()


def _user_updates(message: Mapping[str, Any]) -> list[Update]:
    content = message.get("content")
    blocks: Sequence[Any] = (
        [{"type": "text", "text": content}]
        if isinstance(content, str)
        else (
            content if isinstance(content, list) else []  # pyright: ignore[reportUnknownVariableType]
        )
    )
    updates: list[Update] = []
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "text":
            text = TextContentBlock(type="text", text=str(block.get("text") or ""))
            updates.append(UserMessageChunk(session_update="user_message_chunk", content=text))
        elif isinstance(block, dict) and block.get("type") == "image":
            image = ImageContentBlock(
                type="image", data=str(block.get("data")), mime_type=str(block.get("mimeType"))
            )
            updates.append(UserMessageChunk(session_update="user_message_chunk", content=image))
    return updates


def replay(entries: Iterable[Mapping[str, Any]], cwd: Path) -> list[Update]:
    """The updates that tell an editor a stored transcript (``session/load``), in order: the
    user's prompts (not what they did not type: ``data.meta``, an import's expanded slash
    command prompt; an imported command as typed: ``data.typed``), the answers with their thinking, each tool call and its outcome."""
    updates: list[Update] = []
    calls: dict[str, Mapping[str, Any]] = {}
    for entry in entries:
        kind = entry.get("kind")
        data = entry.get("data")
        if kind == "pi.user" and isinstance(data, dict) and data.get("meta"):  # pyright: ignore[reportUnknownMemberType]
            continue  # the user did not type it (an import's expanded prompt): not shown
        if kind == "pi.user" and isinstance(data, dict) and isinstance(data.get("typed"), str):  # pyright: ignore[reportUnknownMemberType]
            typed = {"role": "user", "content": data["typed"]}  # an imported command, as typed
            updates.extend(_user_updates(typed))
            continue
        for message in entry.get("model") or ():
            if not isinstance(message, dict):
                continue
            if kind == "pi.user" and message.get("role") == "user":
                updates.extend(_user_updates(message))
            elif kind == "pi.assistant" and message.get("role") == "assistant":
                stream = MessageStream()
                updates.extend(stream.stored(message, cwd))
                for block in message.get("content") or ():
                    if isinstance(block, dict) and block.get("type") == "toolCall":
                        calls[str(block.get("id"))] = block
            elif kind == "pi.tool_result" and message.get("role") == "toolResult":
                call = calls.get(str(message.get("toolCallId")))
                updates.append(tool_call_result(message, call, cwd))
    return updates


def _file_path(uri: str) -> Path | None:
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    return None


def prompt_content(blocks: Sequence[Any], cwd: Path) -> list[dict[str, Any]]:
    """Our user message content for ACP prompt ``blocks``: text as text; an image as an image;
    a ``resource_link`` to a file as ``@path`` (the model reads it with its tools, as a
    mention typed in the TUI); an embedded text resource as its text in a ``<context>`` block
    naming it; an embedded image blob as an image; anything else as a line saying what it was."""
    content: list[dict[str, Any]] = []
    notes: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            content.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageContentBlock):
            content.append({"type": "image", "data": block.data, "mimeType": block.mime_type})
        elif isinstance(block, ResourceContentBlock):
            path = _file_path(block.uri)
            if path is not None:
                shown = os.path.relpath(path, cwd)
                content.append(
                    {"type": "text", "text": f"@{path if shown.startswith('..') else shown}"}
                )
            else:
                content.append({"type": "text", "text": f"[{block.name}]({block.uri})"})
        elif isinstance(block, EmbeddedResourceContentBlock):
            resource = block.resource
            if isinstance(resource, TextResourceContents):
                notes.append(f'<context ref="{resource.uri}">\n{resource.text}\n</context>')
            elif isinstance(resource, BlobResourceContents) and (
                resource.mime_type or ""
            ).startswith("image/"):
                content.append(
                    {"type": "image", "data": resource.blob, "mimeType": resource.mime_type}
                )
            elif isinstance(resource, BlobResourceContents):
                size = len(base64.b64decode(resource.blob, validate=False)) if resource.blob else 0
                notes.append(
                    f"[attached {resource.uri}: {resource.mime_type}, {size} bytes, not shown]"
                )
        else:
            kind = getattr(block, "type", type(block).__name__)
            notes.append(f"[a {kind} block was attached; this agent does not read {kind}]")
    if notes:
        content.append({"type": "text", "text": "\n\n".join(notes)})
    merged: list[dict[str, Any]] = []
    for item in content:  # adjacent text blocks become one message text, joined by a space
        if merged and item["type"] == "text" and merged[-1]["type"] == "text":
            merged[-1] = {"type": "text", "text": f"{merged[-1]['text']} {item['text']}"}
        else:
            merged.append(item)
    return merged
