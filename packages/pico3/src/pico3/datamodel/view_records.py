"""The conversation view as typed records, and the one decoder that builds them from its JSON.

A client receives the view (docs/design/view.md#shape) as plain JSON: the ``value`` of
``ConversationService.view``. :class:`ViewDecoder` turns each revision of it into a
:class:`View` whose parts are frozen msgspec records, so a presentation reads fields
(``entry.message.usage.cost.total``) instead of probing dicts:

* ``entries`` — one record per entry, chosen by ``kind``: :class:`UserEntry`,
  :class:`AssistantEntry`, :class:`ToolResultEntry`, :class:`UsageEntry`, :class:`NoticeEntry`,
  :class:`SummaryEntry`, :class:`HandoffEntry`, :class:`ResetEntry`, :class:`SystemEntry`.
  Model messages are pico3's own message records (:class:`~pico3.models.UserMessage`,
  :class:`~pico3.models.AssistantMessage`, ...). A kind pico3 does not know (a feature's) is a
  :class:`CustomEntry` that keeps the entry's JSON; so is a core entry whose JSON does not
  match its kind's shape (``error`` says why). Decoding never fails on an entry.
* ``turn`` — :class:`ViewTurn`: the generation's stage (:class:`GenerationStatus`), the
  streaming message (an :class:`~pico3.models.AssistantMessage`) and the tool slots
  (:class:`ToolSlot`).
* ``inbox`` (:class:`QueuedInput`), ``tasks`` (:class:`ViewTask` by id), ``compaction``
  (:class:`CompactionStatus`), ``conversation`` (:class:`ViewConversation`); ``config`` and
  ``plugins`` stay JSON (their keys are declared by whoever registered them), and so do
  ``events`` (the commit's events).

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
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import msgspec

from pico3.models.provider import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ToolResultMessage,
    Usage,
    UserMessage,
)

__all__ = [
    "AssistantData",
    "AssistantEntry",
    "CompactionStatus",
    "CustomEntry",
    "GenerationStatus",
    "HandoffEntry",
    "NoticeEntry",
    "QueuedInput",
    "ResetEntry",
    "SummaryEntry",
    "SystemEntry",
    "ToolResultData",
    "ToolResultEntry",
    "ToolSlot",
    "UsageData",
    "UsageEntry",
    "UserData",
    "UserEntry",
    "View",
    "ViewConversation",
    "ViewDecoder",
    "ViewEntry",
    "ViewParent",
    "ViewTask",
    "ViewTurn",
    "view_from_json",
]


class _Record(msgspec.Struct, rename="camel", omit_defaults=True, frozen=True, kw_only=True):
    """Base of the view's records: camelCase on the wire, frozen, unknown keys ignored."""


_M = TypeVar("_M", UserMessage, AssistantMessage, ToolResultMessage)


# -- entries -------------------------------------------------------------------------------------
class ViewEntry(_Record, frozen=True):
    """What every entry of ``view.entries`` has: its id, conversation and kind, and the
    core-only ``head``/``edits`` when present (docs/design/harness.md)."""

    id: int = 0
    conversation_id: int = 0
    kind: str = ""
    head: int | None = None
    edits: list[dict[str, Any]] | None = None
    by_task_id: int | None = None

    @property
    def messages(self) -> Sequence[Message]:
        """The entry's model messages as records (empty when it carries none)."""
        return ()

    def _first(self, cls: type[_M]) -> _M | None:
        for message in self.messages:
            if isinstance(message, cls):
                return message
        return None

    @property
    def user_message(self) -> UserMessage | None:
        """The first user message of the entry's model messages, or ``None``."""
        return self._first(UserMessage)


class _ModelEntry(ViewEntry, frozen=True):
    """An entry that carries model messages."""

    model: list[Message] = msgspec.field(default_factory=list[Message])

    @property
    def messages(self) -> Sequence[Message]:
        return self.model


class UserData(_Record, frozen=True):
    """``data`` of a ``pi.user`` entry: ``continuation`` when a hook continued the turn."""

    continuation: Any = None


class UserEntry(_ModelEntry, frozen=True):
    """``pi.user``: what the user (or a continuation) said."""

    data: UserData = msgspec.field(default_factory=UserData)

    @property
    def message(self) -> UserMessage | None:
        """The user message (``None`` when the entry carries none)."""
        return self.user_message


class AssistantData(_Record, frozen=True):
    """``data`` of a ``pi.assistant`` entry. A display-only entry (an aborted or failed
    generation's partial, never sent to the model again) has ``display`` and ``reason``."""

    attempt: int | None = None
    display: AssistantMessage | None = None
    reason: str | None = None


class AssistantEntry(_ModelEntry, frozen=True):
    """``pi.assistant``: a model's answer, or a display-only partial (``data.display``)."""

    data: AssistantData = msgspec.field(default_factory=AssistantData)

    @property
    def message(self) -> AssistantMessage | None:
        """The answer: the first assistant message of ``model``, else ``data.display``."""
        return self._first(AssistantMessage) or self.data.display

    @property
    def display_only(self) -> bool:
        """True for a partial kept for display only (``data.reason`` is set)."""
        return self.data.reason is not None


class ToolResultData(_Record, frozen=True):
    """``data`` of a ``pi.tool_result`` entry: the tool's ``details`` (an edit's ``diff``, ...),
    its ``diagnostics`` (``{severity, message, code?}``, JSON as the tool wrote them) and
    ``synthesized`` for a result the harness wrote for a call that never ran."""

    details: Any = None
    diagnostics: list[Any] = msgspec.field(default_factory=list[Any])
    synthesized: bool = False


class ToolResultEntry(_ModelEntry, frozen=True):
    """``pi.tool_result``: the outcome of one tool call."""

    data: ToolResultData = msgspec.field(default_factory=ToolResultData)

    @property
    def message(self) -> ToolResultMessage | None:
        """The tool result message (``None`` when the entry carries none)."""
        return self._first(ToolResultMessage)

    def diagnostic(self, code: str) -> str | None:
        """The ``message`` of the first diagnostic with ``code`` (``unapproved``: the approval
        gate blocked the call, docs/design/harness.md#approval-gate), or ``None``."""
        for item in self.data.diagnostics:
            if type(item) is dict and item.get("code") == code:  # pyright: ignore[reportUnknownMemberType]
                return str(item.get("message", ""))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        return None

    @property
    def diff(self) -> str | None:
        """``details.diff`` when the tool reported one as a string."""
        details = self.data.details
        diff = details.get("diff") if type(details) is dict else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        return diff if isinstance(diff, str) else None


class UsageData(_Record, frozen=True):
    """``data`` of a ``pi.usage`` entry: a failed attempt's ``error`` (and its ``attempt``
    number), and the ``usage`` it still cost when the provider reported some."""

    usage: Usage | None = None
    error: Any = None
    attempt: int | None = None


class UsageEntry(ViewEntry, frozen=True):
    """``pi.usage``: tokens spent outside an answer (a failed attempt, a collapse)."""

    data: UsageData = msgspec.field(default_factory=UsageData)


class NoticeEntry(_ModelEntry, frozen=True):
    """``pi.notice``: a feature's note, one user message the model also sees."""

    data: dict[str, Any] | None = None


class SummaryEntry(_ModelEntry, frozen=True):
    """``pi.summary``: the summary a collapse put in place of earlier entries."""

    data: dict[str, Any] | None = None


class HandoffEntry(_ModelEntry, frozen=True):
    """``pi.handoff``: a fresh context that starts from a handoff note."""

    data: dict[str, Any] | None = None


class ResetEntry(_ModelEntry, frozen=True):
    """``pi.reset``: a fresh context."""

    data: dict[str, Any] | None = None


class SystemEntry(_ModelEntry, frozen=True):
    """``pi.system``: a mid-conversation system note (changed sections or tools)."""

    data: dict[str, Any] | None = None


class CustomEntry(ViewEntry, frozen=True):
    """An entry of a kind pico3 does not know (a feature's), or a core entry whose JSON does
    not match its kind's shape (``error`` names the problem). ``model`` and ``data`` stay
    JSON; ``json`` is the entry's whole JSON, for the feature that knows its kind."""

    model: list[dict[str, Any]] | None = None
    data: dict[str, Any] | None = None
    json: dict[str, Any] = msgspec.field(default_factory=dict[str, Any])
    error: str | None = None

    @property
    def messages(self) -> Sequence[Message]:
        """The messages of ``model`` that decode as model messages (others are left out)."""
        out: list[Message] = []
        for message in self.model or ():
            try:
                out.append(msgspec.convert(message, Message))
            except msgspec.ValidationError:
                continue
        return out


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
_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {
    kind: msgspec.json.Decoder(cls) for kind, cls in _KINDS.items()
}
"""Encoding an entry and decoding the bytes is about three times as fast as
``msgspec.convert`` from its dicts (the hydrate of a long session is mostly this)."""


def _entry(value: Any) -> ViewEntry:
    """One entry's record; never raises."""
    kind = value.get("kind") if type(value) is dict else None  # pyright: ignore[reportUnknownMemberType]
    decoder = _DECODERS.get(kind) if type(kind) is str else None
    if decoder is None:
        return _custom(value, None)
    try:
        return decoder.decode(_ENCODE(value))
    except (msgspec.ValidationError, msgspec.EncodeError, TypeError) as exc:
        return _custom(value, f"not a valid {kind} entry: {exc}")


# -- the live sections ---------------------------------------------------------------------------
class GenerationStatus(_Record, frozen=True):
    """``turn.generation``: the live generation's ``stage`` (``waiting``, ``preparing``,
    ``requesting``, ``streaming``, ``retrying`` with ``retry_at`` and ``last_error``,
    ``deferred`` with ``poll_at``) and its ``attempt``."""

    stage: str = "preparing"
    attempt: int | None = None
    last_error: str | None = None
    retry_at: int | None = None
    poll_at: int | None = None


class ToolSlot(_Record, frozen=True):
    """One slot of ``turn.tools``: a call of the newest assistant message, as it runs."""

    call_id: str = ""
    name: str = ""
    args: Any = None
    status: str = "pending"
    waiting_on: str | None = None
    output: str | None = None
    progress: str | None = None
    details: Any = None
    continued_by: Any = None


class ViewTurn(_Record, frozen=True):
    """``turn``: present while a turn task lives."""

    inputs: list[int] = msgspec.field(default_factory=list[int])
    generation: GenerationStatus | None = None
    message: AssistantMessage | None = None
    """The streaming partial (while the model answers)."""
    tools: tuple[ToolSlot, ...] = ()


class QueuedInput(_Record, frozen=True):
    """One item of ``inbox``: a user input waiting to ``steer`` or ``followUp`` the turn
    (``content``: what was sent; ``input``: the send's JSON), or a passive write (``mode``
    ``write``; ``entry``: its entry, without an id)."""

    id: int
    mode: str = ""
    content: str | list[TextContent | ImageContent] | None = None
    input: Any = None
    entry: ViewEntry | None = None


class ViewTask(_Record, frozen=True):
    """One live non-turn task of ``tasks``: ``status`` is its kind's ``describe`` output
    (JSON), or ``{"phase": ...}``."""

    kind: str = "task"
    background: bool = False
    marked: bool = False
    """Marked for abort: it is stopping."""
    status: Any = None


class CompactionStatus(_Record, frozen=True):
    """``compaction``: a live collapse."""

    task_id: int | None = None
    reason: str | None = None
    stage: str | None = None
    attempt: int | None = None
    retry_at: int | None = None


class ViewParent(_Record, frozen=True):
    """Where a fork came from: the source conversation and the entry it forked at."""

    conversation_id: int
    at: int


class ViewConversation(_Record, frozen=True):
    """``conversation``: identity and lineage."""

    id: int = 0
    parent: ViewParent | None = None
    owner: int | None = None


class View(_Record, frozen=True):
    """One revision of a conversation's view (docs/design/view.md#shape), decoded.

    ``json`` is the document it was decoded from (shared, not copied: do not mutate it).
    """

    conversation: ViewConversation
    entries: tuple[ViewEntry, ...]
    config: Mapping[str, Any]
    inbox: tuple[QueuedInput, ...]
    turn: ViewTurn | None
    compaction: CompactionStatus | None
    tasks: Mapping[str, ViewTask]
    plugins: Mapping[str, Any]
    events: tuple[dict[str, Any], ...]
    json: Mapping[str, Any]


# -- the decoder ---------------------------------------------------------------------------------
_T = TypeVar("_T")
_BULK = 256
"""Entries decoded at once from which the garbage collector is paused meanwhile."""
_EMPTY: dict[str, Any] = {}


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
        return ViewTurn(
            inputs=[i for i in inputs if type(i) is int] if type(inputs) is list else [],  # pyright: ignore[reportUnknownVariableType]
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


def _generation(value: Any) -> GenerationStatus | None:
    return _convert(value, GenerationStatus, "turn.generation") if type(value) is dict else None


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
