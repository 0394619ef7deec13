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
from typing import Any

import msgspec
from msgspec import UNSET

from pico3.session_data.json_shapes import Message
from pico3.storage.records import Entry

__all__ = [
    "MISSING_RESULT_TEXT",
    "ContextBuilder",
    "DerivedContext",
    "active_range_start",
    "derive_context",
    "repair_tool_results",
]

MISSING_RESULT_TEXT = "Tool result unavailable: history ends before this call completed."


class DerivedContext(msgspec.Struct, frozen=True):
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
    return ContextBuilder().derive(visible)


class ContextBuilder:
    """:func:`derive_context` over a transcript that grows at its end, extended incrementally.

    Entries are append-only, so when ``visible`` starts with the transcript the last call saw
    (the *same* entry objects: a shared transcript cache) and its new entries carry no head and
    no edits, only those entries are derived and only the tool-result group still open at the
    end is repaired again. Anything else (a new head, an edit, another transcript) derives from
    scratch. The result equals :func:`derive_context` of ``visible`` either way.

    The repaired messages' list is only ever appended to: a repair that changes a message it
    already holds (a tool result arriving for a call that had a synthesized one) makes a new
    list, and so does a derivation from scratch. So a list :meth:`derive` handed out with
    ``shared`` keeps its first ``len()`` items, whatever later calls do."""

    __slots__ = ("_edits", "_entries", "_first", "_head", "_last", "_out", "_raw", "_safe", "_seen")

    def __init__(self) -> None:
        self._seen = 0  # entries of the transcript consumed
        self._first: Entry | None = None
        self._last: Entry | None = None
        self._head: Entry | None = None
        self._edits: dict[int, dict[str, Any]] = {}
        self._entries: list[Entry] = []
        self._raw: list[Message] = []  # the messages before the tool-result repair
        self._out: list[Message] = []  # the repaired messages
        self._safe = (0, 0)  # (raw index, out length) before which the repair is final

    def derive(self, visible: Sequence[Entry], *, shared: bool = False) -> DerivedContext:
        """The derived context of ``visible`` (oldest first, through T).

        With ``shared`` its ``entries`` and ``messages`` are the builder's own lists, not
        copies: read-only, and later calls may extend them, never change their first ``len()``
        items (the kernel's shared context: a caller that reads later takes ``len()`` at
        once), so a late turn does not copy the whole history."""
        seen = self._seen
        extends = (
            0 < seen <= len(visible)
            and visible[0] is self._first
            and visible[seen - 1] is self._last
            and all(e.head is UNSET and e.edits is UNSET for e in visible[seen:])
        )
        if not extends:
            self._rebuild(visible)
        elif seen < len(visible):
            fresh = visible[seen:]
            self._entries.extend(fresh)
            self._add_messages(fresh)
            self._seen, self._last = len(visible), visible[-1]
            self._repair()
        if shared:
            return DerivedContext(entries=self._entries, messages=self._out, head=self._head)
        return DerivedContext(list(self._entries), list(self._out), self._head)

    def _rebuild(self, visible: Sequence[Entry]) -> None:
        head_entry, start = active_range_start(visible)
        in_range = [entry for entry in visible if entry.id >= start]
        edits: dict[int, dict[str, Any]] = {}
        for entry in in_range:
            if entry.edits is not UNSET:
                for edit in entry.edits:
                    edits[edit["target"]] = edit
        self._head, self._edits = head_entry, edits
        if head_entry is not None:
            self._entries = [head_entry, *(entry for entry in in_range if entry.head is UNSET)]
        else:
            self._entries = in_range
        self._raw, self._out, self._safe = [], [], (0, 0)
        self._add_messages(self._entries)
        self._seen = len(visible)
        self._first = visible[0] if visible else None
        self._last = visible[-1] if visible else None
        self._repair()

    def _add_messages(self, entries: Sequence[Entry]) -> None:
        messages, edits = self._raw, self._edits
        for entry in entries:
            edit = edits.get(entry.id)
            action = None if edit is None else edit.get("action")
            if action == "omit":
                continue
            if edit is not None and action == "replace":
                messages.extend(edit.get("messages") or ())
            elif entry.model is not UNSET:
                messages.extend(entry.model)

    def _repair(self) -> None:
        raw_start, out_len = self._safe
        tail: list[Message] = []
        safe = _repair_into(self._raw, raw_start, tail)
        self._safe = (safe[0], out_len + safe[1])
        out = self._out
        held = len(out) - out_len  # the messages of the group repaired again
        if held <= len(tail) and all(a is b for a, b in zip(out[out_len:], tail, strict=False)):
            out.extend(tail[held:])  # the usual case: the same messages, and new ones after
        else:
            self._out = [*out[:out_len], *tail]  # a changed message: a new list (see the class)


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
    _repair_into(messages, 0, out)
    return out


def _repair_into(messages: Sequence[Message], index: int, out: list[Message]) -> tuple[int, int]:
    """Append the repair of ``messages[index:]`` to ``out``; returns ``(i, n)``: the repair of
    ``messages[:i]`` is ``out[:n]`` whatever is appended to ``messages`` later (``i`` starts
    the last group, which later tool results could still join)."""
    safe = (index, len(out))
    while index < len(messages):
        safe = (index, len(out))
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
    return safe


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
