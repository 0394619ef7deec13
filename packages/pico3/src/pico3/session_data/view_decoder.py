"""The one decoder of the conversation view: JSON in, :mod:`~pico3.session_data.view_records` out.

**Decoded once, incrementally.** A client re-decodes on every revision, which while a reply
streams is every few milliseconds. The replica is copy-on-write (an unchanged subtree is the
*same object* in the next revision), and entries are immutable, so :meth:`ViewDecoder.decode`
reuses what it decoded before: a section whose JSON is the same object as last time is the
same record, the ``entries`` tuple is the same tuple while the list is, and an entry is decoded
once (remembered by its JSON object, and by ``(conversationId, id)`` across a re-hydrate of
equal JSON). Identity therefore carries over: ``new.turn is old.turn`` exactly when the turn's
JSON did not change, which is what a renderer tests to skip work.

:func:`view_from_json` decodes one value with a fresh decoder (no reuse): for tools and tests.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

import msgspec

from pico3.models.provider import AssistantMessage, ImageContent, TextContent
from pico3.session_data.view_records import (
    AssistantEntry,
    CompactionStatus,
    CustomEntry,
    HandoffEntry,
    ModelCallStatus,
    NoticeEntry,
    QueuedInput,
    ResetEntry,
    SummaryEntry,
    SystemEntry,
    ToolResultEntry,
    ToolSlot,
    UsageEntry,
    UserEntry,
    View,
    ViewConversation,
    ViewEntry,
    ViewTask,
    ViewTurn,
)

__all__ = ["ViewDecoder", "view_from_json"]


_KINDS: dict[str, type[ViewEntry]] = {
    "pi.user": UserEntry,
    "pi.assistant": AssistantEntry,
    "pi.tool_result": ToolResultEntry,
    "pi.usage": UsageEntry,
    "pi.notice": NoticeEntry,
    "pi.summary": SummaryEntry,
    "pi.handoff": HandoffEntry,
    "pi.reset": ResetEntry,
    "pi.system": SystemEntry,
}


def _custom(value: Any, error: str | None) -> CustomEntry:
    source: dict[str, Any] = value if type(value) is dict else {}  # pyright: ignore[reportUnknownVariableType]
    ident, cid, kind = source.get("id"), source.get("conversationId"), source.get("kind")
    model, data = source.get("model"), source.get("data")
    return CustomEntry(
        id=ident if type(ident) is int else 0,
        conversation_id=cid if type(cid) is int else 0,
        kind=kind if type(kind) is str else "",
        model=[m for m in model if type(m) is dict] if type(model) is list else None,  # pyright: ignore[reportUnknownVariableType]
        data=data if type(data) is dict else None,  # pyright: ignore[reportUnknownArgumentType]
        json=source,
        error=error if error is not None or type(value) is dict else "an entry must be an object",
    )


_ENCODE = msgspec.json.Encoder().encode
_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {}
"""Encoding an entry and decoding the bytes is about three times as fast as
``msgspec.convert`` from its dicts (the hydrate of a long session is mostly this). Each kind's
decoder is made at its first entry: building one evaluates its record's annotations, which a
process that imports :mod:`pico3` but never decodes a view (the session worker) need not pay."""


def _decoder(kind: str) -> msgspec.json.Decoder[Any] | None:
    """The decoder of ``kind``'s record, made at its first use; ``None`` for a custom kind."""
    decoder = _DECODERS.get(kind)
    if decoder is None:
        cls = _KINDS.get(kind)
        if cls is None:
            return None
        decoder = _DECODERS[kind] = msgspec.json.Decoder(cls)
    return decoder


def _entry(value: Any) -> ViewEntry:
    """One entry's record; never raises."""
    kind = value.get("kind") if type(value) is dict else None  # pyright: ignore[reportUnknownMemberType]
    decoder = _decoder(kind) if type(kind) is str else None
    if decoder is None:
        return _custom(value, None)
    try:
        return decoder.decode(_ENCODE(value))
    except (msgspec.ValidationError, msgspec.EncodeError, TypeError) as exc:
        return _custom(value, f"not a valid {kind} entry: {exc}")


# -- the decoder ---------------------------------------------------------------------------------
_T = TypeVar("_T")
_BULK = 256
"""Entries decoded at once from which the garbage collector is paused meanwhile."""
_EMPTY: Mapping[str, Any] = MappingProxyType({})
"""An absent ``config``/``plugins``/``tasks``: empty, and nobody's to change."""


def _convert(value: Any, cls: type[_T], where: str) -> _T:
    try:
        return msgspec.convert(value, cls)
    except msgspec.ValidationError as exc:
        raise ValueError(f"the view's {where} does not have its documented shape: {exc}") from None


class ViewDecoder:
    """Decodes successive revisions of one view, reusing whatever did not change.

    Keep one per replica you follow and hand it every value: :meth:`decode` returns a
    :class:`View`, or ``None`` for ``None`` (the worker is unavailable). Entries never fail
    (see :class:`CustomEntry`); a live section the harness wrote with a wrong shape raises
    :class:`ValueError` naming it.
    """

    def __init__(self) -> None:
        self._value: Any = None
        self._view: View | None = None
        self._sections: dict[str, tuple[Any, Any]] = {}
        self._entries_source: Any = None
        self._entries: tuple[ViewEntry, ...] = ()
        # id(entry JSON) -> (that JSON, its record): the JSON is kept, so the id stays its own
        self._by_object: dict[int, tuple[Any, ViewEntry]] = {}
        # (conversationId, id) -> (JSON, record): an equal entry after a re-hydrate
        self._by_key: dict[tuple[int, int], tuple[Any, ViewEntry]] = {}

    def decode(self, value: Mapping[str, Any] | None) -> View | None:
        """The typed view of ``value`` (the replica's current value)."""
        if value is None:
            return None
        if value is self._value and self._view is not None:
            return self._view
        if not isinstance(value, Mapping):
            raise ValueError(f"a view is a JSON object, got {type(value).__name__}")
        get = value.get
        commit = get("commit")
        view = View(
            conversation=self._section("conversation", get("conversation"), _conversation),
            entries=self._decode_entries(get("entries")),
            config=_mapping(get("config")),
            inbox=self._section("inbox", get("inbox"), self._inbox),
            turn=self._section("turn", get("turn"), self._turn),
            compaction=self._section("compaction", get("compaction"), _compaction),
            tasks=self._section("tasks", get("tasks"), _tasks),
            plugins=_mapping(get("plugins")),
            events=self._section(
                "events",
                commit.get("events") if isinstance(commit, dict) else None,  # pyright: ignore[reportUnknownMemberType]
                _events,
            ),
            json=value,
        )
        self._value, self._view = value, view
        return view

    def entry(self, value: Any) -> ViewEntry:
        """The record of one entry's JSON (remembered: the same JSON gives the same record)."""
        hit = self._by_object.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        key = None
        if type(value) is dict:
            cid, ident = value.get("conversationId"), value.get("id")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            if type(cid) is int and type(ident) is int:
                key = (cid, ident)
                hit = self._by_key.get(key)
                if hit is not None and hit[0] == value:
                    self._by_object[id(value)] = (value, hit[1])
                    return hit[1]
        record = _entry(value)
        self._by_object[id(value)] = (value, record)
        if key is not None:
            self._by_key[key] = (value, record)
        return record

    # -- sections ------------------------------------------------------------------------------
    def _section(self, name: str, value: Any, decode: Callable[[Any], _T]) -> _T:
        cached = self._sections.get(name)
        if cached is not None and cached[0] is value:
            return cached[1]
        decoded = decode(value)
        self._sections[name] = (value, decoded)
        return decoded

    def _decode_entries(self, value: Any) -> tuple[ViewEntry, ...]:
        if value is self._entries_source:
            return self._entries
        items: list[Any] = value if type(value) is list else []  # pyright: ignore[reportUnknownVariableType]
        before: Any = self._entries_source
        old = len(before) if type(before) is list else 0  # pyright: ignore[reportUnknownArgumentType]
        if old and len(items) >= old and items[0] is before[0] and items[old - 1] is before[-1]:
            # the common revision: entries appended (the view only splices at its ends)
            entries = self._entries + self._decode_all(items[old:])
        else:
            entries = self._decode_all(items)
        self._entries_source, self._entries = value, entries
        if len(self._by_object) > 2 * len(items) + 64:  # forget entries no longer shown
            live = {id(item) for item in items}
            self._by_object = {k: v for k, v in self._by_object.items() if k in live}
            self._by_key = {k: v for k, v in self._by_key.items() if id(v[0]) in live}
        return entries

    def _decode_all(self, items: list[Any]) -> tuple[ViewEntry, ...]:
        if len(items) < _BULK or not gc.isenabled():
            return tuple(self.entry(item) for item in items)
        # a hydrate: thousands of new records would make the collector walk the growing heap
        # again and again (3-4x the decode's own time); none of them forms a cycle
        gc.disable()
        try:
            return tuple(self.entry(item) for item in items)
        finally:
            gc.enable()

    def _inbox(self, value: Any) -> tuple[QueuedInput, ...]:
        out: list[QueuedInput] = []
        for item in value if type(value) is list else []:  # pyright: ignore[reportUnknownVariableType]
            if type(item) is not dict or type(item.get("id")) is not int:  # pyright: ignore[reportUnknownMemberType]
                continue
            entry = item.get("entry")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            sent = item.get("input")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            out.append(
                QueuedInput(
                    id=item["id"],
                    mode=str(item.get("mode", "")),  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
                    content=_content(sent.get("content")) if type(sent) is dict else None,  # pyright: ignore[reportUnknownMemberType]
                    input=sent,
                    entry=_entry(entry) if type(entry) is dict else None,
                )
            )
        return tuple(out)

    def _turn(self, value: Any) -> ViewTurn | None:
        if type(value) is not dict:
            return None
        get = value.get  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        inputs = get("inputs")
        model = get("model")
        return ViewTurn(
            inputs=[i for i in inputs if type(i) is int] if type(inputs) is list else [],  # pyright: ignore[reportUnknownVariableType]
            model=dict(model) if type(model) is dict else None,  # pyright: ignore[reportUnknownArgumentType]
            generation=self._section("generation", get("generation"), _generation),
            message=self._section("message", get("message"), _message),
            tools=self._section("tools", get("tools"), _slots),
        )


def _content(value: Any) -> str | list[TextContent | ImageContent] | None:
    try:
        return msgspec.convert(value, str | list[TextContent | ImageContent] | None)
    except msgspec.ValidationError:
        return None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else _EMPTY  # pyright: ignore[reportUnknownVariableType]


def _conversation(value: Any) -> ViewConversation:
    return _convert(value if type(value) is dict else {}, ViewConversation, "conversation")  # pyright: ignore[reportUnknownArgumentType]


def _compaction(value: Any) -> CompactionStatus | None:
    return _convert(value, CompactionStatus, "compaction") if type(value) is dict else None


def _tasks(value: Any) -> Mapping[str, ViewTask]:
    if type(value) is not dict:
        return _EMPTY
    return {
        key: _convert(task, ViewTask, f"tasks[{key!r}]")
        for key, task in value.items()  # pyright: ignore[reportUnknownVariableType]
        if type(task) is dict
    }


def _events(value: Any) -> tuple[dict[str, Any], ...]:
    return tuple(e for e in value if type(e) is dict) if type(value) is list else ()  # pyright: ignore[reportUnknownVariableType]


def _generation(value: Any) -> ModelCallStatus | None:
    return _convert(value, ModelCallStatus, "turn.generation") if type(value) is dict else None


def _message(value: Any) -> AssistantMessage | None:
    if type(value) is not dict:
        return None
    return _convert(value, AssistantMessage, "turn.message")


def _slots(value: Any) -> tuple[ToolSlot, ...]:
    if type(value) is not list:
        return ()
    return tuple(
        _convert(slot, ToolSlot, f"turn.tools[{index}]")
        for index, slot in enumerate(value)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        if type(slot) is dict
    )


def view_from_json(value: Mapping[str, Any]) -> View:
    """Decode one view value with a fresh :class:`ViewDecoder` (nothing reused)."""
    view = ViewDecoder().decode(value)
    assert view is not None
    return view
