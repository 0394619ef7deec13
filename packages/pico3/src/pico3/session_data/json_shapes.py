"""The JSON shapes of the durable records: what the view and the wire show of them.

The records themselves (:class:`~pico3.storage.records.Conversation`, ``Entry``, ``Input``,
``Parent``) are the frozen msgspec Structs of :mod:`pico3.storage.records`: one definition serves
storage, kernel and data model, and this module only renders them. They are *data* the kernel
writes once and never edits. A conversation is a transcript container (optionally a fork of
another one), an entry is one immutable transcript item, an input is the admission record of
something a user or a plugin asked to put into a conversation. Ids are positive ints minted from one per-session counter.

Absent is not null: optional record fields default to ``msgspec.UNSET`` and are never encoded.
Field names are Python's (``conversation_id``); :func:`entry_json` and friends render the
camelCase wire shape the view uses (``conversationId``), which is what a TypeScript client
expects.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from pico3.storage.records import Conversation, Entry, Input

__all__ = [
    "Message",
    "conversation_json",
    "entry_json",
    "input_json",
    "is_terminal_input",
]

Message = dict[str, Any]
"""One model message (``{"role": "user" | "assistant" | "toolResult" | "system", ...}``)."""


def is_terminal_input(record: Input) -> bool:
    """True for ``done`` and ``unanswered``: the record never changes again."""
    return record.status in ("done", "unanswered")


def entry_json(entry: Entry) -> dict[str, Any]:
    """The wire/view shape of an entry: camelCase keys, absent fields omitted.

    The nested ``model``/``data`` values are shared with the record, which is immutable by
    contract; callers that hand the result to foreign code copy it first.
    """
    out: dict[str, Any] = {"id": entry.id, "conversationId": entry.conversation_id}
    out["kind"] = entry.kind
    if entry.model is not UNSET:
        out["model"] = entry.model
    if entry.data is not UNSET:
        out["data"] = entry.data
    if entry.head is not UNSET:
        out["head"] = entry.head
    if entry.edits is not UNSET:
        out["edits"] = entry.edits
    if entry.by_task_id is not UNSET:
        out["byTaskId"] = entry.by_task_id
    return out


def conversation_json(conversation: Conversation) -> dict[str, Any]:
    """The view shape of a conversation record (the section seed never appears)."""
    out: dict[str, Any] = {"id": conversation.id}
    if conversation.parent is not UNSET:
        out["parent"] = {
            "conversationId": conversation.parent.conversation_id,
            "at": conversation.parent.at,
        }
    if conversation.owner is not UNSET:
        out["owner"] = conversation.owner
    return out


def input_json(record: Input) -> dict[str, Any]:
    """The wire shape of an input record: camelCase keys, absent fields omitted."""
    out: dict[str, Any] = {
        "id": record.id,
        "conversationId": record.conversation_id,
        "status": record.status,
    }
    for name, key in (
        ("request_id", "requestId"),
        ("entry", "entry"),
        ("answer", "answer"),
        ("reason", "reason"),
        ("detail", "detail"),
    ):
        value = getattr(record, name)
        if value is not UNSET:
            out[key] = value
    return out
