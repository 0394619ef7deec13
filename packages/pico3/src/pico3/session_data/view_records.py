"""The conversation view as typed records (docs/design/view.md#typed-records).

A client receives the view (docs/design/view.md#shape) as plain JSON: the ``value`` of
``ConversationService.view``. The decoder turns each revision of it into a :class:`View` whose
parts are frozen msgspec records, so a presentation reads fields
(``entry.message.usage.cost.total``) instead of probing dicts:

* ``entries`` — one record per entry, chosen by ``kind``: :class:`UserEntry`,
  :class:`AssistantEntry`, :class:`ToolResultEntry`, :class:`UsageEntry`, :class:`NoticeEntry`,
  :class:`SummaryEntry`, :class:`HandoffEntry`, :class:`ResetEntry`, :class:`SystemEntry`.
  Model messages are pico3's own message records (:class:`~pico3.models.UserMessage`,
  :class:`~pico3.models.AssistantMessage`, ...). A kind pico3 does not know (a feature's) is a
  :class:`CustomEntry` that keeps the entry's JSON; so is a core entry whose JSON does not
  match its kind's shape (``error`` says why). Decoding never fails on an entry.
* ``turn`` — :class:`ViewTurn`: the generation's stage (:class:`ModelCallStatus`), the
  streaming message (an :class:`~pico3.models.AssistantMessage`) and the tool slots
  (:class:`ToolSlot`).
* ``inbox`` (:class:`QueuedInput`), ``tasks`` (:class:`ViewTask` by id), ``compaction``
  (:class:`CompactionStatus`), ``conversation`` (:class:`ViewConversation`); ``config`` and
  ``plugins`` stay JSON (their keys are declared by whoever registered them), and so do
  ``events`` (the commit's events).

They are built by the one decoder, :class:`pico3.ViewDecoder` (:mod:`pico3.session_data.view_decoder`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    "HandoffEntry",
    "ModelCallStatus",
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
    "ViewEntry",
    "ViewParent",
    "ViewTask",
    "ViewTurn",
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
    """``data`` of a ``pi.user`` entry: ``continuation`` when a hook continued the turn;
    ``model`` (``provider/modelId``) when the input asked for its own model (``Input.model``);
    ``meta`` for a message the model reads but the user did not type (another agent's expanded
    slash-command prompt or compaction summary, imported): a short label
    (``expanded /review prompt``) a client shows in its place, dim and collapsed, as that
    agent did; ``typed`` for a message that holds another agent's rendering of what the user
    typed (Claude Code's ``<command-name>`` tags for ``/review cart.py``): that text, which a
    client shows instead. The model receives the message unchanged either way."""

    continuation: Any = None
    model: str | None = None
    meta: str | None = None
    typed: str | None = None


class UserEntry(_ModelEntry, frozen=True):
    """``pi.user``: what the user (or a continuation) said."""

    data: UserData = msgspec.field(default_factory=UserData)

    @property
    def message(self) -> UserMessage | None:
        """The user message (``None`` when the entry carries none)."""
        return self.user_message


class AssistantData(_Record, frozen=True):
    """``data`` of a ``pi.assistant`` entry. A display-only entry (an aborted or failed
    generation's partial, never sent to the model again) has ``display`` and ``reason``; an
    aborted one also ``stoppedBy`` when the user did not stop it (who did: ``PermissionRequest
    hook `<command>```)."""

    attempt: int | None = None
    display: AssistantMessage | None = None
    reason: str | None = None
    stopped_by: str | None = None


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


# -- the live sections ---------------------------------------------------------------------------
class ModelCallStatus(_Record, frozen=True):
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
    model: dict[str, Any] | None = None
    """The turn's own model (``{"provider", "modelId"}``) when its first input asked for one
    (``Input.model``, a command's ``model:``); ``None``: the config's."""
    generation: ModelCallStatus | None = None
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
