"""The durable records of a pico3 session and the writes that move them (docs/design/harness.md#durable-primitives, docs/design/storage.md#interface).

Everything a commit persists is one of six *writes*, a tagged union on the field ``type``:

========================= =====================================================================
``conversation``          create a :class:`Conversation` (root, fork or owned)
``entry``                 append an immutable :class:`Entry` to a conversation
``task``                  create a :class:`Task`
``task.patch``            change a task's status, checkpoint, abort mark, outcome or ``owns``
``input``                 create an :class:`Input`, or replace it whole
``doc``                   append one batch of delta ops to a document (:class:`DocRef`)
========================= =====================================================================

A *batch* (``list[Write]``) is atomic: a storage backend applies all of it or none of it. Records
are frozen ``msgspec`` Structs, so they encode to compact JSON in field order and decode with
strict type checks (``Decoder`` objects are built once and reused).

Absent is not null. Optional fields default to :data:`msgspec.UNSET`, which is never encoded, so
``Entry(data=UNSET)`` has no ``data`` member at all while ``Input(detail=None)`` stores a real
``null``. :class:`TaskPatch` uses the difference: ``checkpoint=None`` *clears* the checkpoint,
``checkpoint=UNSET`` leaves it alone.

Records are ``gc=False`` Structs: they hold acyclic JSON only, and leaving them out of the
cyclic garbage collector's bookkeeping makes holding (and replaying) a long session cheaper.

Payload fields typed ``Any`` (messages, entry data, task input, checkpoints, document ops) are
application JSON: a backend checks that they are strict JSON (:mod:`chord.json`) and otherwise
never looks inside them. Document ops are the decoded ops of :mod:`chord.delta` (``["s", path,
value]`` and friends); the storage layer knows only one thing about them, that a batch whose first
op is ``["r", value]`` replaces the whole document (a *base*, see :func:`is_base`).

Two helpers every layer above shares: :func:`clone` (a private deep copy of a record through
msgspec, how storage and the kernel hand records out) and :func:`patched` (a :class:`Task` with a
:class:`TaskPatch` applied).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from chord.json import MAX_SAFE_INTEGER

__all__ = [
    "UNSET",
    "Conversation",
    "ConversationWrite",
    "DocKind",
    "DocLog",
    "DocRef",
    "DocWrite",
    "Entry",
    "EntryScan",
    "EntryWrite",
    "Id",
    "Input",
    "InputReason",
    "InputStatus",
    "InputWrite",
    "Ops",
    "Parent",
    "SectionSeed",
    "Seq",
    "Task",
    "TaskPatch",
    "TaskPatchWrite",
    "TaskScan",
    "TaskStatus",
    "TaskWrite",
    "UnsetType",
    "Write",
    "clone",
    "is_base",
    "patched",
]

Id = Annotated[int, msgspec.Meta(ge=1, le=MAX_SAFE_INTEGER)]
"""Object identity: a positive int from the session's one id counter (conversations, entries,
tasks and inputs share it)."""

Seq = Annotated[int, msgspec.Meta(ge=1, le=MAX_SAFE_INTEGER)]
"""Commit order: exactly one per committed batch, strictly increasing, never reused."""

Ops = list[list[Any]]
"""One batch of decoded delta ops, each op a JSON array whose first element is the verb."""

DocLog = list[Ops]
"""A document's op batches in commit order, starting at its last base (see :func:`is_base`).
Fold them, in order, over an empty object to get the document."""

TaskStatus = Literal["pending", "running", "terminal"]
InputStatus = Literal["queued", "placed", "done", "unanswered"]
InputReason = Literal["aborted", "stale", "terminated", "failed"]
DocKind = Literal["session", "rewindable", "sticky"]


class Parent(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Fork point: the parent's transcript up to and including entry ``at`` is inherited."""

    conversation_id: Id
    at: Id


class SectionSeed(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One system section as the canonical section fold holds it: its ``key``, its JSON
    ``value`` and the ``rendered`` text the model was (or will be) shown.

    It has exactly the shape of one member of a managed ``pi.system`` entry's ``sections``,
    so a seed can stand in for the fold until the conversation writes its own entry (docs/design/harness.md#section-seeds).
    ``value`` is required and may be ``null`` (a stored null is a real value).
    """

    key: str
    value: Any
    rendered: str


class Conversation(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """A conversation record (docs/design/harness.md#conversations).

    ``sections`` is the private *section seed*: creation metadata that the first model call's
    preparation folds from while the conversation has no managed ``pi.system`` entry of its
    own (see :mod:`pico3.turn.system`). It never appears in a view. Absent (the default, and
    every record written before seeds existed) means "no seed"; ``[]`` is a real, empty seed.
    """

    id: Id
    parent: Parent | UnsetType = UNSET
    owner: Id | UnsetType = UNSET
    sections: list[SectionSeed] | UnsetType = UNSET


class Entry(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """One immutable transcript entry (docs/design/harness.md#entries). ``model`` is what the model sees; absent means
    invisible to the model. ``head`` is already materialized (never the writer's ``"self"``)."""

    id: Id
    conversation_id: Id
    kind: str
    model: list[Any] | UnsetType = UNSET
    data: dict[str, Any] | UnsetType = UNSET
    head: Id | UnsetType = UNSET
    edits: list[Any] | UnsetType = UNSET
    by_task_id: Id | UnsetType = UNSET


class Task(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """A task record (docs/design/harness.md#tasks). ``input`` and ``after`` never change after creation.

    When a task turns ``terminal`` its transient fields (``checkpoint`` and the ``abort`` mark)
    are dropped unless the terminal patch itself sets them: they lived in the task's sidecar,
    which retires with the task, so keeping them would make a reopened session differ from the
    one that wrote it.
    """

    id: Id
    conversation_id: Id
    kind: str
    input: Any = None
    status: TaskStatus = "pending"
    checkpoint: dict[str, Any] | UnsetType = UNSET
    abort: bool | UnsetType = UNSET
    outcome: dict[str, Any] | UnsetType = UNSET
    after: list[Id] = msgspec.field(default_factory=list)
    owns: list[Id] = msgspec.field(default_factory=list)
    background: bool | UnsetType = UNSET


class TaskPatch(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """Changes to a task. UNSET leaves a field alone; ``checkpoint=None`` clears it."""

    id: Id
    status: TaskStatus | UnsetType = UNSET
    checkpoint: dict[str, Any] | UnsetType | None = UNSET
    abort: bool | UnsetType = UNSET
    outcome: dict[str, Any] | UnsetType = UNSET
    owns: list[Id] | UnsetType = UNSET


class Input(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """A user input's lifecycle record (docs/design/harness.md#inputs-and-request-keys); ``request_id`` is unique per conversation."""

    id: Id
    conversation_id: Id
    status: InputStatus
    request_id: str | UnsetType = UNSET
    entry: Id | UnsetType = UNSET
    answer: Id | UnsetType = UNSET
    reason: InputReason | UnsetType = UNSET
    detail: Any | UnsetType = UNSET
    model: dict[str, Any] | UnsetType = UNSET
    """A per-prompt model (``{"provider", "modelId"}``) for the turn this input starts, instead
    of the conversation's ``model`` config (a command's ``model:``); absent: the config's."""
    allow: list[str] | UnsetType = UNSET
    """Permission rules (the approval authority's grammar, ``Bash(git add:*)``) the turn this
    input starts may use without asking (a command's ``allowed-tools:``); never beyond it."""


class DocRef(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """Names a document: the session document, or a conversation's rewindable or sticky one.

    Build them with :meth:`session`, :meth:`rewindable` and :meth:`sticky`.
    """

    doc: DocKind
    conversation_id: Id | UnsetType = UNSET

    @classmethod
    def session(cls) -> DocRef:
        return cls(doc="session")

    @classmethod
    def rewindable(cls, conversation_id: int) -> DocRef:
        return cls(doc="rewindable", conversation_id=conversation_id)

    @classmethod
    def sticky(cls, conversation_id: int) -> DocRef:
        return cls(doc="sticky", conversation_id=conversation_id)


class ConversationWrite(
    msgspec.Struct, frozen=True, gc=False, tag_field="type", tag="conversation"
):
    """Create a conversation."""

    conversation: Conversation


class EntryWrite(msgspec.Struct, frozen=True, gc=False, tag_field="type", tag="entry"):
    """Append an entry."""

    entry: Entry


class TaskWrite(msgspec.Struct, frozen=True, gc=False, tag_field="type", tag="task"):
    """Create a task."""

    task: Task


class TaskPatchWrite(msgspec.Struct, frozen=True, gc=False, tag_field="type", tag="task.patch"):
    """Patch a task (created earlier, or earlier in the same batch)."""

    patch: TaskPatch


class InputWrite(msgspec.Struct, frozen=True, gc=False, tag_field="type", tag="input"):
    """Create an input, or replace an existing one whole."""

    input: Input


class DocWrite(msgspec.Struct, frozen=True, gc=False, tag_field="type", tag="doc"):
    """Append one batch of delta ops to a document."""

    ref: DocRef
    ops: Ops


Write = ConversationWrite | EntryWrite | TaskWrite | TaskPatchWrite | InputWrite | DocWrite
"""One element of an atomic batch."""


class EntryScan(msgspec.Struct, frozen=True, kw_only=True):
    """A newest-first, fork-aware entry scan of ``conversation_id`` (docs/design/storage.md#interface).

    ``before`` is an exclusive id bound; ``with_head`` keeps only entries that carry a head.
    """

    conversation_id: int
    limit: int
    kind: str | None = None
    with_head: bool = False
    before: int | None = None


class TaskScan(msgspec.Struct, frozen=True, kw_only=True):
    """Filter for :meth:`Storage.scan_tasks`; ``None`` means "any"."""

    conversation_id: int | None = None
    status: frozenset[str] | None = None
    kind: str | None = None


def is_base(ops: Ops) -> bool:
    """True when a batch of ops replaces the whole document (its first op is ``["r", value]``)."""
    if not ops:
        return False
    first = ops[0]
    return bool(first) and first[0] == "r"


def patched(task: Task, patch: TaskPatch) -> Task:
    """``task`` with ``patch`` applied (see :class:`Task` for what terminal drops)."""
    changes: dict[str, Any] = {}
    if patch.status is not UNSET:
        changes["status"] = patch.status
        if patch.status == "terminal" and task.status != "terminal":
            changes["checkpoint"] = UNSET
            changes["abort"] = UNSET
    if patch.checkpoint is not UNSET:
        changes["checkpoint"] = UNSET if patch.checkpoint is None else patch.checkpoint
    if patch.abort is not UNSET:
        changes["abort"] = patch.abort
    if patch.outcome is not UNSET:
        changes["outcome"] = patch.outcome
    if patch.owns is not UNSET:
        changes["owns"] = patch.owns
    return msgspec.structs.replace(task, **changes)


_CLONE_ENCODER = msgspec.json.Encoder()
_CLONE_DECODERS: dict[Any, msgspec.json.Decoder[Any]] = {}


def clone(value: Any, kind: Any = None) -> Any:
    """A deep copy of ``value`` through msgspec, decoded as ``kind`` (default: its own type).

    Lists of records need ``kind`` (``list[Entry]``); a plain ``list`` would decode to dicts.
    """
    kind = type(value) if kind is None else kind
    decoder = _CLONE_DECODERS.get(kind)
    if decoder is None:
        decoder = _CLONE_DECODERS[kind] = msgspec.json.Decoder(kind)
    return decoder.decode(_CLONE_ENCODER.encode(value))
