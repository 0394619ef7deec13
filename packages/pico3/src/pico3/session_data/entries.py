"""Entry kinds and the rules of who may write what.

An entry's ``kind`` is a plain string. The ``pi.`` prefix is reserved for core: extensions name
their own kinds with :func:`define_entry`, which returns a stateless witness (``kind`` plus an
``is_(entry)`` test) and refuses any ``pi.`` name. No registry or schema is needed to store or
project a custom entry.

:func:`check_new_entry` is the runtime gate every write passes. It runs *after* any static
typing, so a caller that casts its way past the types is still stopped:

* non-core callers may not write ``pi.*`` kinds, with one exception: ``pi.notice``, which must
  carry exactly one user model message and no ``head``/``edits``;
* ``head`` and ``edits`` are core-only;
* ``model`` is a list of message objects and ``data`` a JSON object, both strict JSON.

Every rejection is an :class:`EntryRejected` naming the field at fault; nothing is recorded.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import msgspec

from chord.json import JsonError, copy_json
from pico3.session_data.json_shapes import Message
from pico3.storage.records import Entry

__all__ = [
    "CORE_KINDS",
    "MESSAGE_ROLES",
    "NOTICE_KIND",
    "EntryKind",
    "EntryRejected",
    "NewEntry",
    "assistant_text",
    "check_new_entry",
    "define_entry",
    "is_reserved_kind",
    "new_entry_json",
]

NOTICE_KIND = "pi.notice"
"""The one core kind a feature may write: a notice carrying exactly one user model message."""

CORE_KINDS = frozenset(
    {
        "pi.user",
        "pi.assistant",
        "pi.tool_result",
        "pi.system",
        NOTICE_KIND,
        "pi.usage",
        "pi.summary",
        "pi.handoff",
        "pi.reset",
    }
)
"""The built-in kinds. Every ``pi.`` name is reserved, listed here or not."""

MESSAGE_ROLES = frozenset({"user", "assistant", "toolResult", "system"})
_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]*$")


class EntryRejected(ValueError):
    """A write was refused before anything was recorded; the message names the field."""


def is_reserved_kind(kind: str) -> bool:
    """True for names in the core ``pi.`` namespace (case-insensitive)."""
    return kind.lower().startswith("pi.")


class EntryKind:
    """A stateless witness for a custom entry kind: its name and a membership test."""

    __slots__ = ("kind",)

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def is_(self, entry: object) -> bool:
        """True when ``entry`` (an entry record or its JSON shape) has this kind."""
        if isinstance(entry, Entry):
            return entry.kind == self.kind
        if isinstance(entry, dict):
            return entry.get("kind") == self.kind  # type: ignore[union-attr]
        return False

    def __repr__(self) -> str:
        return f"EntryKind({self.kind!r})"


def define_entry(kind: str) -> EntryKind:
    """Declare a custom entry kind. Raises :class:`ValueError` for ``pi.*`` or malformed names."""
    _check_kind_name(kind)
    if is_reserved_kind(kind):
        raise ValueError(f"entry kind {kind!r} is reserved: the 'pi.' prefix belongs to core")
    return EntryKind(kind)


def _check_kind_name(kind: object) -> None:
    if not isinstance(kind, str) or not _KIND.match(kind):
        raise EntryRejected(
            f"entry kind must be a non-empty name of letters, digits and '_.:-', got {kind!r}"
        )


class NewEntry(msgspec.Struct, frozen=True):
    """An entry as a writer hands it over, before the kernel assigns its id.

    ``head`` may be ``"self"``, which the kernel materialises to the new entry's own id.
    """

    kind: str
    model: list[Message] | None = None
    data: dict[str, Any] | None = None
    head: int | Literal["self"] | None = None
    edits: list[dict[str, Any]] | None = None
    """Context edits: ``{"target": id, "action": "omit"}`` or ``{"target": id, "action":
    "replace", "messages": [...]}``."""


def new_entry_json(entry: NewEntry) -> dict[str, Any]:
    """The JSON shape of a not-yet-placed entry (as queued in ``sticky.inbox``)."""
    out: dict[str, Any] = {"kind": entry.kind}
    for name in ("model", "data", "head", "edits"):
        value = getattr(entry, name)
        if value is not None:
            out[name] = copy_json(value)
    return out


def check_new_entry(entry: object, *, core: bool) -> NewEntry:
    """Validate a write and return a private, deep-copied :class:`NewEntry`.

    ``core`` is the caller's authority; it comes from the kernel's own invoker objects, never from
    the entry itself.
    """
    if not isinstance(entry, NewEntry):
        raise EntryRejected(f"expected a NewEntry, got {type(entry).__name__}")
    _check_kind_name(entry.kind)
    kind = entry.kind
    if not core:
        if is_reserved_kind(kind) and kind != "pi.notice":
            raise EntryRejected(
                f"entry kind {kind!r} is reserved for core; only 'pi.notice' may be written"
            )
        if entry.head is not None:
            raise EntryRejected(f"entry.head is core-only (kind {kind!r})")
        if entry.edits is not None:
            raise EntryRejected(f"entry.edits is core-only (kind {kind!r})")
    elif is_reserved_kind(kind) and kind not in CORE_KINDS:
        raise EntryRejected(f"unknown core entry kind {kind!r}")
    model = _check_model(entry.model, kind)
    data = _check_data(entry.data, kind)
    edits = _check_edits(entry.edits, kind)
    head = entry.head
    if head is not None and head != "self" and (type(head) is not int or head <= 0):
        raise EntryRejected(f"entry.head must be a positive id or 'self', got {head!r}")
    if kind == "pi.notice":
        if model is None or len(model) != 1 or model[0].get("role") != "user":
            raise EntryRejected("pi.notice must carry exactly one user model message")
        if head is not None or edits is not None:
            raise EntryRejected("pi.notice may not carry head or edits")
    return NewEntry(kind=kind, model=model, data=data, head=head, edits=edits)


def _check_model(model: object, kind: str) -> list[Message] | None:
    if model is None:
        return None
    if type(model) is not list:
        raise EntryRejected(f"entry.model must be a list of messages (kind {kind!r})")
    out: list[Message] = []
    for index, message in enumerate(model):  # type: ignore[arg-type]
        if type(message) is not dict:
            raise EntryRejected(f"entry.model[{index}] must be a message object (kind {kind!r})")
        role = message.get("role")  # type: ignore[union-attr]
        if role not in MESSAGE_ROLES:
            raise EntryRejected(
                f"entry.model[{index}].role must be one of {sorted(MESSAGE_ROLES)}, got {role!r}"
            )
        out.append(_copy(message, ("model", index)))
    return out


def _check_data(data: object, kind: str) -> dict[str, Any] | None:
    if data is None:
        return None
    if type(data) is not dict:
        raise EntryRejected(f"entry.data must be a JSON object (kind {kind!r})")
    return _copy(data, ("data",))


def _check_edits(edits: object, kind: str) -> list[dict[str, Any]] | None:
    if edits is None:
        return None
    if type(edits) is not list:
        raise EntryRejected(f"entry.edits must be a list (kind {kind!r})")
    out: list[dict[str, Any]] = []
    for index, edit in enumerate(edits):  # type: ignore[arg-type]
        where = f"entry.edits[{index}]"
        if type(edit) is not dict:
            raise EntryRejected(f"{where} must be an object {{target, action}}")
        target = edit.get("target")  # type: ignore[union-attr]
        if type(target) is not int or target <= 0:
            raise EntryRejected(f"{where}.target must be a positive id, got {target!r}")
        action = edit.get("action")  # type: ignore[union-attr]
        if action == "replace":
            extra = set(edit) - {"target", "action", "messages"}  # type: ignore[arg-type]
            messages = _check_model(edit.get("messages"), kind)  # type: ignore[union-attr]
            if messages is None:
                raise EntryRejected(f"{where}: replace needs messages")
            out.append({"target": target, "action": "replace", "messages": messages})
        elif action == "omit":
            extra = set(edit) - {"target", "action"}  # type: ignore[arg-type]
            out.append({"target": target, "action": "omit"})
        else:
            raise EntryRejected(f"{where}.action must be 'omit' or 'replace', got {action!r}")
        if extra:
            raise EntryRejected(f"{where} has unknown fields {sorted(extra)}")
    return out


def _copy(value: Any, path: tuple[str | int, ...]) -> Any:
    try:
        return copy_json(value, ("entry", *path))
    except JsonError as exc:
        raise EntryRejected(str(exc)) from None


def assistant_text(entry: Entry | Any) -> str:
    """The text an answer entry shows: its messages' string contents and ``text`` blocks joined,
    stripped (thinking and tool calls left out). What a subagent reports, or an agent hook's
    verdict is read from, is the ``assistant_text`` of its conversation's last answer. Works on
    any object with a ``model`` list of messages (``""`` without one)."""
    parts: list[str] = []
    for message in getattr(entry, "model", None) or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
            continue
        for block in content or []:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
    return "".join(parts).strip()
