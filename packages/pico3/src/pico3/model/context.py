"""Context derivation: what the model sees, as a pure function of stored entries.

The input is the *fork-visible* transcript of a conversation through a target entry, oldest
first: the parent's entries up to the fork point (recursively), then the conversation's own. Ids
come from one session counter, so that order is id order. Derivation never calls kind code:

1. ``H`` is the newest entry carrying a ``head``; context starts at ``H.head`` (inclusive).
2. ``range`` is every entry with ``id >= H.head``.
3. Edits across ``range`` fold in order; the newest edit per target wins.
4. The context entries are ``[H]`` followed by the range's entries that carry no head.
5. Messages concatenate each entry's ``model`` (omitted entries skipped, replaced ones replaced).
6. Tool-result repair: after an assistant message with tool calls, the following tool results
   are put into call order, and a call with no result (a fork cut the exchange) gets a
   synthesized error result. Synthesized results exist only here; they are never stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from msgspec import UNSET

from pico3.model.records import Entry, Message

__all__ = [
    "MISSING_RESULT_TEXT",
    "DerivedContext",
    "active_range_start",
    "derive_context",
    "repair_tool_results",
]

MISSING_RESULT_TEXT = "Tool result unavailable: history ends before this call completed."


@dataclass(frozen=True, slots=True)
class DerivedContext:
    """The entries in context (``[H] + headless range``) and the model messages they produce."""

    entries: list[Entry]
    messages: list[Message]
    head: Entry | None


def active_range_start(visible: Sequence[Entry]) -> tuple[Entry | None, int]:
    """The newest head entry ``H`` and the first id in context (``0`` when there is no head)."""
    for entry in reversed(visible):
        if entry.head is not UNSET:
            return entry, entry.head
    return None, 0


def derive_context(visible: Sequence[Entry]) -> DerivedContext:
    """Derive context from the fork-visible transcript ``visible`` (oldest first, through T)."""
    head_entry, start = active_range_start(visible)
    in_range = [entry for entry in visible if entry.id >= start]
    edits: dict[int, dict[str, Any]] = {}
    for entry in in_range:
        if entry.edits is not UNSET:
            for edit in entry.edits:
                edits[edit["target"]] = edit
    if head_entry is not None:
        entries = [head_entry, *(entry for entry in in_range if entry.head is UNSET)]
    else:
        entries = in_range
    messages: list[Message] = []
    for entry in entries:
        edit = edits.get(entry.id)
        action = None if edit is None else edit.get("action")
        if action == "omit":
            continue
        if edit is not None and action == "replace":
            messages.extend(edit.get("messages") or ())
        elif entry.model is not UNSET:
            messages.extend(entry.model)
    return DerivedContext(entries=entries, messages=repair_tool_results(messages), head=head_entry)


def _tool_calls(message: Message) -> list[dict[str, Any]]:
    if message.get("role") != "assistant":
        return []
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [
        block
        for block in content  # pyright: ignore[reportUnknownVariableType]
        if isinstance(block, dict) and block.get("type") == "toolCall"  # pyright: ignore[reportUnknownMemberType]
    ]


def repair_tool_results(messages: Sequence[Message]) -> list[Message]:
    """Reorder tool results into call order and synthesize the missing ones (never stored)."""
    out: list[Message] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        out.append(message)
        index += 1
        calls = _tool_calls(message)
        if not calls:
            continue
        results: list[Message] = []
        while index < len(messages) and messages[index].get("role") == "toolResult":
            results.append(messages[index])
            index += 1
        by_id: dict[object, Message] = {}
        extras: list[Message] = []
        for result in results:
            key = result.get("toolCallId")
            if key in by_id:
                extras.append(result)
            else:
                by_id[key] = result
        for call in calls:
            found = by_id.pop(call.get("id"), None)
            out.append(found if found is not None else _missing_result(call, message))
        out.extend(result for result in results if any(result is v for v in by_id.values()))
        out.extend(extras)
    return out


def _missing_result(call: dict[str, Any], assistant: Message) -> Message:
    return {
        "role": "toolResult",
        "toolCallId": call.get("id"),
        "toolName": call.get("name"),
        "content": [{"type": "text", "text": MISSING_RESULT_TEXT}],
        "isError": True,
        "details": {"reason": "missing_after_fork"},
        "timestamp": assistant.get("timestamp", 0),
    }
