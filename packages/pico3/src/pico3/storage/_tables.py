"""In-memory tables shared by every backend: staging a batch, applying it, and the reads.

The one rule that makes batches atomic lives here: :meth:`Tables.stage` checks the *whole*
batch against the committed tables plus an overlay of the batch's own earlier writes and works
out every effect, changing nothing; :meth:`Tables.apply` then cannot fail. So either every write
lands or none does, and a refused batch changes no table, document, id high-water or seq. A
backend writes its files between the two steps.

:func:`normalize_batch` runs first: strict JSON (:mod:`chord.json`) for every payload, exact
record types, and a typed msgspec round trip that yields the private copies the tables keep.
One shortcut, for the kernel only: the entries it built itself from payloads it has just
strictly validated and copied (and still owns exclusively) are named for the duration of one
``commit`` call with :func:`~pico3.storage.base.prechecked`, and their strict-JSON walk is not
repeated. Every other check (record types, the typed round trip, staging) still runs for them,
and every other write is walked in full.

:class:`TableStorage` adds the lifecycle flags and the read half of the
:class:`~pico3.storage.base.Storage` protocol on top; the backends add ``commit`` and ``open``.

Why one module: staging and applying a batch are one atomicity rule (stage checks everything
against the committed tables plus the batch's overlay, apply cannot fail), and
:class:`TableStorage`'s reads serve those same private tables; split, apply and stage could drift
apart, and every backend would import both halves anyway.
"""

from __future__ import annotations

import re
import sys
from array import array
from bisect import bisect_left, insort
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from chord.context import Context
from chord.json import JsonError, copy_json, validate_json
from pico3._text import lone_surrogate
from pico3.storage.base import EMPTY, InvalidBatch, StorageClosed, StorageInUse
from pico3.storage.records import (
    UNSET,
    Conversation,
    ConversationWrite,
    DocLog,
    DocRef,
    DocWrite,
    Entry,
    EntryScan,
    EntryWrite,
    Input,
    InputWrite,
    Ops,
    Parent,
    SectionSeed,
    Task,
    TaskPatch,
    TaskPatchWrite,
    TaskScan,
    TaskWrite,
    Write,
    clone,
    is_base,
    patched,
)

_ENCODER = msgspec.json.Encoder()
_BATCH_DECODER = msgspec.json.Decoder(list[Write])
_DOLLAR_INDEX = re.compile(r"`\$\[(\d+)\]")


def encoded(value: Any) -> bytes:
    """``value`` as JSON text in a bytes object of its own size, to be held: msgspec's
    ``encode`` hands back its output buffer, which is about 1.5 times the text (tracemalloc)."""
    return bytes(memoryview(_ENCODER.encode(value)))


LogItem = tuple[int, bool, bytes]
"""One batch of a document's op log as the tables keep it: the seq that wrote it, whether it
replaces the whole document (a base), and its ops as JSON text. A long session's rewindable
log holds a batch per file read or edit; held as text it takes a fraction of the decoded ops'
memory, and every read of it decodes a private copy anyway."""

_DOC_LOG_DECODER = msgspec.json.Decoder(DocLog)


def _logged(seq: int, ops: Ops) -> LogItem:
    return (seq, is_base(ops), encoded(ops))


def _clone_log(log: list[LogItem], start: int) -> DocLog:
    return _DOC_LOG_DECODER.decode(b"[%s]" % b",".join([item[2] for item in log[start:]]))


def _last_base(log: list[LogItem]) -> int:
    for index in range(len(log) - 1, -1, -1):
        if log[index][1]:
            return index
    return 0


# --------------------------------------------------------------------------------------------
# Validation: strict JSON payloads, exact record types, then a typed round trip (which also
# yields the private copy the tables keep).


def _check_json(record: object, index: int, member: str, fields: tuple[str, ...]) -> None:
    """Strict-JSON check of ``record``'s payload ``fields`` (absent ones are skipped)."""
    for name in fields:
        value = getattr(record, name)
        if value is UNSET:
            continue
        try:
            validate_json(value, ("writes", index, member, name))
        except RecursionError:
            raise InvalidBatch(f"writes[{index}].{member}.{name}: nests too deeply") from None
        except JsonError as exc:
            raise InvalidBatch(f"invalid write batch: {exc}") from None


def _expect(value: object, kind: type, index: int, member: str) -> None:
    if type(value) is not kind:
        raise InvalidBatch(
            f"writes[{index}].{member} must be a {kind.__name__}, not {type(value).__name__}"
        )


def _check_seed(sections: object, index: int) -> None:
    if type(sections) is not list:
        raise InvalidBatch(f"writes[{index}].conversation.sections must be a list")
    for position, seed in enumerate(sections):  # pyright: ignore[reportUnknownArgumentType]
        member = f"conversation.sections[{position}]"
        _expect(seed, SectionSeed, index, member)
        if type(seed.key) is not str or type(seed.rendered) is not str:
            raise InvalidBatch(f"writes[{index}].{member}: key and rendered must be str")
        try:
            validate_json(
                seed.value, ("writes", index, "conversation", "sections", position, "value")
            )
        except RecursionError:
            raise InvalidBatch(f"writes[{index}].{member}.value: nests too deeply") from None
        except JsonError as exc:
            raise InvalidBatch(f"invalid write batch: {exc}") from None


def _check_write(write: object, index: int, prechecked: frozenset[int]) -> None:
    kind = type(write)
    if kind is EntryWrite:
        entry = write.entry  # type: ignore[union-attr]
        _expect(entry, Entry, index, "entry")
        if id(entry) not in prechecked:
            _check_json(entry, index, "entry", ("model", "data", "edits"))
    elif kind is DocWrite:
        _expect(write.ref, DocRef, index, "ref")  # type: ignore[union-attr]
        if id(write) not in prechecked:
            try:  # ops may be chord.delta's in-memory tuples: copy_json accepts those
                copy_json(write.ops, ("writes", index, "ops"))  # type: ignore[union-attr]
            except JsonError as exc:
                raise InvalidBatch(f"invalid write batch: {exc}") from None
    elif kind is TaskPatchWrite:
        _expect(write.patch, TaskPatch, index, "patch")  # type: ignore[union-attr]
        _check_json(write.patch, index, "patch", ("checkpoint", "outcome"))  # type: ignore[union-attr]
    elif kind is TaskWrite:
        _expect(write.task, Task, index, "task")  # type: ignore[union-attr]
        _check_json(write.task, index, "task", ("input", "checkpoint", "outcome"))  # type: ignore[union-attr]
    elif kind is InputWrite:
        _expect(write.input, Input, index, "input")  # type: ignore[union-attr]
        _check_json(write.input, index, "input", ("detail",))  # type: ignore[union-attr]
    elif kind is ConversationWrite:
        conversation = write.conversation  # type: ignore[union-attr]
        _expect(conversation, Conversation, index, "conversation")
        if conversation.parent is not UNSET:
            _expect(conversation.parent, Parent, index, "conversation.parent")
        if conversation.sections is not UNSET:
            _check_seed(conversation.sections, index)
    else:
        raise InvalidBatch(f"writes[{index}] is a {kind.__name__}, not a storage write")


def normalize_batch(
    writes: Sequence[Write], prechecked: frozenset[int] = EMPTY
) -> tuple[list[Write], bytes]:
    """Validate a caller's batch; return private, type-checked copies of its writes and their
    JSON encoding (a JSON array, reusable as the ``writes`` member of a record line).

    ``prechecked`` (see :data:`~pico3.storage.base.PRECHECKED`) names entries whose strict-JSON walk is skipped."""
    kind = type(writes)
    if kind is not list and kind is not tuple:
        if isinstance(writes, str | bytes) or not isinstance(writes, Sequence):
            raise InvalidBatch(f"a batch is a sequence of writes, not {kind.__name__}")
        writes = list(writes)
    for index, write in enumerate(writes):
        _check_write(write, index, prechecked)
    try:
        raw = _ENCODER.encode(writes)
        return _BATCH_DECODER.decode(raw), raw
    except msgspec.ValidationError as exc:
        message = _DOLLAR_INDEX.sub(lambda m: f"`writes[{m.group(1)}]", str(exc))
        raise InvalidBatch(f"invalid write batch: {message}") from None
    except UnicodeEncodeError:  # a lone surrogate: refused, never half-written (issue 24)
        problem = lone_surrogate(msgspec.to_builtins(writes), "writes")
        raise InvalidBatch(
            f"invalid write batch: {problem or 'a string is not valid Unicode'}: "
            "text that is not valid Unicode cannot be stored"
        ) from None
    except (TypeError, msgspec.EncodeError, OverflowError) as exc:
        raise InvalidBatch(f"invalid write batch: {exc}") from None


# --------------------------------------------------------------------------------------------


class Staged:
    """A validated batch with its effects worked out; :meth:`Tables.apply` cannot fail."""

    __slots__ = (
        "conversations",
        "created",
        "docs",
        "entries",
        "inputs",
        "requests",
        "seq",
        "tasks",
        "terminalized",
        "writes",
    )

    def __init__(self, writes: list[Write], seq: int) -> None:
        self.writes = writes
        self.seq = seq
        self.created: set[int] = set()
        self.conversations: dict[int, Conversation] = {}
        self.entries: list[Entry] = []
        self.tasks: dict[int, Task] = {}
        self.inputs: dict[int, Input] = {}
        self.requests: dict[tuple[int, str], int] = {}
        self.docs: list[tuple[DocRef, Ops]] = []
        self.terminalized: list[int] = []

    @property
    def max_id(self) -> int:
        """The greatest id this batch creates (0 if none)."""
        return max(self.created, default=0)


class _Row(msgspec.Struct, array_like=True, gc=False):
    """An entry as :class:`EntryTable` keeps it: its members as one JSON array, ``null`` for
    an absent one (trailing absent ones left out)."""

    id: int
    conversation_id: int
    kind: str
    model: list[Any] | None = None
    data: dict[str, Any] | None = None
    head: int | None = None
    edits: list[Any] | None = None
    by_task_id: int | None = None


_ROW_DECODER = msgspec.json.Decoder(_Row)
_ROWS_DECODER = msgspec.json.Decoder(list[_Row])


def _row(entry: Entry) -> bytes:
    row = [
        entry.id,
        entry.conversation_id,
        entry.kind,
        _none(entry.model),
        _none(entry.data),
        _none(entry.head),
        _none(entry.edits),
        _none(entry.by_task_id),
    ]
    while row[-1] is None:
        row.pop()
    return encoded(row)


def _from_row(row: _Row) -> Entry:
    model, data, head, edits, by = row.model, row.data, row.head, row.edits, row.by_task_id
    return Entry(  # the ``None`` checks written out: a view build decodes every entry here
        id=row.id,
        conversation_id=row.conversation_id,
        kind=row.kind,
        model=UNSET if model is None else model,
        data=UNSET if data is None else data,
        head=UNSET if head is None else head,
        edits=UNSET if edits is None else edits,
        by_task_id=UNSET if by is None else by,
    )


class EntryTable:
    """The stored entries by id, with the seq of the commit that appended each: two flat
    arrays and a list of each entry's JSON text (:class:`_Row`).

    An entry is read rarely next to how long a session holds it, and every read hands out a
    private copy anyway, so a read decodes the text: one bytes object an entry instead of a
    record, its id objects and an object per payload (about 200 bytes an entry, profiled on
    a 10,000-entry tool session). Entries are appended in commit order and their ids, minted
    in order, nearly always increase, so a lookup is a bisection. An entry committed after
    one with a greater id (minted early, written late) goes to a small dict instead."""

    __slots__ = ("_ids", "_late", "_rows", "_seqs")

    def __init__(self) -> None:
        self._ids = array("q")
        self._seqs = array("q")
        self._rows: list[bytes] = []
        self._late: dict[int, tuple[bytes, int]] = {}

    def add(self, entry: Entry, seq: int) -> None:
        ids = self._ids
        if ids and ids[-1] >= entry.id:
            self._late[entry.id] = (_row(entry), seq)
        else:
            ids.append(entry.id)
            self._seqs.append(seq)
            self._rows.append(_row(entry))

    def _index(self, entry_id: int) -> int:
        ids = self._ids
        index = bisect_left(ids, entry_id)
        return index if index < len(ids) and ids[index] == entry_id else -1

    def _raw(self, entry_id: int) -> bytes | None:
        index = self._index(entry_id)
        if index >= 0:
            return self._rows[index]
        late = self._late.get(entry_id)
        return None if late is None else late[0]

    def get(self, entry_id: int) -> Entry | None:
        """A private copy of the entry, or ``None``."""
        raw = self._raw(entry_id)
        return None if raw is None else _from_row(_ROW_DECODER.decode(raw))

    def many(self, entry_ids: Sequence[int]) -> list[Entry]:
        """Private copies of stored entries, in the order of ``entry_ids`` (each must be
        stored), decoded in one call."""
        if not entry_ids:
            return []
        raws = self._run(entry_ids)
        if raws is None:
            raws = []
            for entry_id in entry_ids:
                raw = self._raw(entry_id)
                if raw is None:
                    raise KeyError(entry_id)
                raws.append(raw)
        rows = _ROWS_DECODER.decode(b"[" + b",".join(raws) + b"]")
        return [_from_row(row) for row in rows]

    def _run(self, entry_ids: Sequence[int]) -> list[bytes] | None:
        """The rows of ``entry_ids`` when they are a run of consecutive stored entries (a scan
        of a session with one conversation, or of its latest part: one bisection and one
        array compare instead of a bisection per id), else ``None``."""
        ids = self._ids
        start = self._index(entry_ids[0])
        end = start + len(entry_ids)
        if start < 0 or end > len(ids):
            return None
        if type(entry_ids) is not array:
            entry_ids = array("q", entry_ids)
        if ids[start:end] != entry_ids:
            return None
        return self._rows[start:end]

    def seq(self, entry_id: int) -> int:
        """The seq of a stored entry (``KeyError`` for an unknown one)."""
        index = self._index(entry_id)
        return self._seqs[index] if index >= 0 else self._late[entry_id][1]

    def __contains__(self, entry_id: object) -> bool:
        return type(entry_id) is int and (self._index(entry_id) >= 0 or entry_id in self._late)

    def __len__(self) -> int:
        return len(self._rows) + len(self._late)


class _Ended(msgspec.Struct, gc=False):
    """A terminal task as :class:`TaskTable` keeps it: what a scan filters on, and the rest of
    the record as the JSON text of a :class:`_Rest`."""

    conversation_id: int
    kind: str
    rest: bytes


class _Rest(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """A terminal task's members besides id, conversation, kind and status, as one JSON array
    (``null`` for an absent member; trailing absent ones left out)."""

    input: Any = None
    outcome: Any = None
    after: list[int] = msgspec.field(default_factory=list[int])
    owns: list[int] = msgspec.field(default_factory=list[int])
    checkpoint: Any = None
    abort: bool | None = None
    background: bool | None = None


_REST_DECODER = msgspec.json.Decoder(_Rest)


def _unset(value: Any) -> Any:
    return UNSET if value is None else value


def _none(value: Any) -> Any:
    return None if value is UNSET else value


def _ended(task: Task) -> _Ended:
    rest = _Rest(
        task.input,
        _none(task.outcome),
        task.after,
        task.owns,
        _none(task.checkpoint),
        _none(task.abort),
        _none(task.background),
    )
    return _Ended(task.conversation_id, sys.intern(task.kind), encoded(rest))


def _decoded(task_id: int, ended: _Ended) -> Task:
    rest = _REST_DECODER.decode(ended.rest)
    return Task(
        id=task_id,
        conversation_id=ended.conversation_id,
        kind=ended.kind,
        input=rest.input,
        status="terminal",
        checkpoint=_unset(rest.checkpoint),
        abort=_unset(rest.abort),
        outcome=_unset(rest.outcome),
        after=rest.after,
        owns=rest.owns,
        background=_unset(rest.background),
    )


class TaskTable:
    """The stored tasks by id, in creation order.

    A long session's tasks are nearly all terminal (every model call, tool call and
    post-tools step of every turn), and a terminal task is read rarely (by id, or by a scan
    that asks for terminal ones). So a task that turns terminal is kept as its conversation,
    its kind and the JSON text of the rest (:class:`_Ended`, about 270 bytes) instead of a
    record with its payloads, lists and strings (about 670 bytes at 11,000 tasks, profiled);
    a read decodes it, which is the private copy storage hands out anyway. Live tasks stay
    records."""

    __slots__ = ("_records",)

    def __init__(self) -> None:
        self._records: dict[int, Task | _Ended] = {}

    def get(self, task_id: int) -> Task | None:
        """The task (a fresh decode for a terminal one), or ``None``."""
        found = self._records.get(task_id)
        if isinstance(found, _Ended):
            return _decoded(task_id, found)
        return found

    def copy(self, task_id: int) -> Task | None:
        """A private copy of the task, or ``None``."""
        found = self._records.get(task_id)
        if isinstance(found, _Ended):
            return _decoded(task_id, found)
        return None if found is None else clone(found)

    def scan(self, scan: TaskScan) -> list[Task]:
        """Private copies of the tasks ``scan`` selects, in creation order."""
        cid, statuses, kind = scan.conversation_id, scan.status, scan.kind
        ended = statuses is None or "terminal" in statuses
        out: list[Task] = []
        live: list[int] = []  # where in ``out`` the live ones are (copied in one round trip)
        for task_id, found in self._records.items():
            if cid is not None and found.conversation_id != cid:
                continue
            if kind is not None and found.kind != kind:
                continue
            if isinstance(found, _Ended):
                if ended:
                    out.append(_decoded(task_id, found))
            elif statuses is None or found.status in statuses:
                live.append(len(out))
                out.append(found)
        if live:
            copies = clone([out[index] for index in live], list[Task])
            for index, copy in zip(live, copies, strict=True):
                out[index] = copy
        return out

    def update(self, tasks: dict[int, Task]) -> None:
        """Store ``tasks`` (created or patched), each in its place."""
        records = self._records
        for task_id, task in tasks.items():
            records[task_id] = _ended(task) if task.status == "terminal" else task

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._records

    def __iter__(self) -> Iterator[int]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)


@dataclass
class Tables:
    """Committed state: tables, document op logs, the seq and the id high-water."""

    conversations: dict[int, Conversation] = field(default_factory=dict)
    entries: EntryTable = field(default_factory=EntryTable)
    """Entries by id, with the seq that appended each (for reads as of an entry)."""
    by_conversation: dict[int, array[int]] = field(default_factory=dict)
    """Per conversation, the ids of its own entries (ascending)."""
    heads: dict[int, array[int]] = field(default_factory=dict)
    """Per conversation, the ids of its own entries that carry a ``head`` (ascending): a head
    scan reads these instead of walking the whole history."""
    by_kind: dict[tuple[int, str], array[int]] = field(default_factory=dict)
    """Per (conversation, kind), the ids of its own entries of that kind (ascending)."""
    tasks: TaskTable = field(default_factory=TaskTable)
    inputs: dict[int, Input] = field(default_factory=dict)
    requests: dict[tuple[int, str], int] = field(default_factory=dict)
    session_log: list[LogItem] = field(default_factory=list)
    rewindable: dict[int, list[LogItem]] = field(default_factory=dict)
    sticky: dict[int, list[LogItem]] = field(default_factory=dict)
    seq: int = 0
    high_water: int = 0

    def stage(self, writes: list[Write], seq: int) -> Staged:
        """Check ``writes`` (already normalized) as one batch with ``seq``; raise
        :class:`InvalidBatch` or return the :class:`Staged` batch. Changes nothing."""
        staged = Staged(writes, seq)
        for index, write in enumerate(writes):
            kind = type(write)
            if kind is EntryWrite:
                self._stage_entry(staged, write.entry, index)  # type: ignore[union-attr]
            elif kind is InputWrite:  # a turn writes about as many inputs as entries
                self._stage_input(staged, write.input, index)  # type: ignore[union-attr]
            elif kind is DocWrite:
                self._stage_doc(staged, write, index)  # type: ignore[arg-type]
            elif kind is TaskPatchWrite:
                self._stage_patch(staged, write.patch, index)  # type: ignore[union-attr]
            elif kind is TaskWrite:
                task: Task = write.task  # type: ignore[union-attr]
                self._claim(staged, task.id, index)
                self._need_conversation(staged, task.conversation_id, index)
                staged.tasks[task.id] = task
            else:
                self._stage_conversation(staged, write.conversation, index)  # type: ignore[union-attr]
        return staged

    def _claim(self, staged: Staged, id: int, index: int) -> None:
        created = staged.created
        # ``high_water`` is at least every id the tables hold (apply raises it to the ids it
        # adds, the backends only raise it further): a greater id needs no table lookup
        if id in created or (
            id <= self.high_water
            and (
                id in self.entries
                or id in self.conversations
                or id in self.tasks
                or id in self.inputs
            )
        ):
            raise InvalidBatch(f"writes[{index}]: id {id} is already in use")
        created.add(id)

    def _need_conversation(self, staged: Staged, id: int, index: int) -> None:
        if id not in self.conversations and id not in staged.conversations:
            raise InvalidBatch(f"writes[{index}]: unknown conversation {id}")

    def _task(self, staged: Staged, id: int) -> Task | None:
        task = staged.tasks.get(id)
        return self.tasks.get(id) if task is None else task

    def _stage_entry(self, staged: Staged, entry: Entry, index: int) -> None:
        self._claim(staged, entry.id, index)
        self._need_conversation(staged, entry.conversation_id, index)
        if entry.head is not UNSET and entry.head > entry.id:
            raise InvalidBatch(f"writes[{index}]: head {entry.head} is after entry {entry.id}")
        staged.entries.append(entry)

    def _stage_doc(self, staged: Staged, write: DocWrite, index: int) -> None:
        ref = write.ref
        if ref.doc == "session":
            if ref.conversation_id is not UNSET:
                raise InvalidBatch(f"writes[{index}]: the session document has no conversation")
        elif ref.conversation_id is UNSET:
            raise InvalidBatch(f"writes[{index}]: a {ref.doc} document needs a conversation_id")
        else:
            self._need_conversation(staged, ref.conversation_id, index)
        for number, op in enumerate(write.ops):
            if not op or type(op[0]) is not str:
                raise InvalidBatch(f"writes[{index}].ops[{number}]: an op starts with its verb")
        staged.docs.append((ref, write.ops))

    def _stage_patch(self, staged: Staged, patch: TaskPatch, index: int) -> None:
        task = self._task(staged, patch.id)
        if task is None:
            raise InvalidBatch(f"writes[{index}]: patch for unknown task {patch.id}")
        if task.status == "terminal" and patch.status in ("pending", "running"):
            raise InvalidBatch(f"writes[{index}]: task {patch.id} is terminal")
        if patch.status == "terminal" and task.status != "terminal":
            staged.terminalized.append(patch.id)
        staged.tasks[patch.id] = patched(task, patch)

    def _stage_input(self, staged: Staged, item: Input, index: int) -> None:
        previous = staged.inputs.get(item.id)
        if previous is None:
            previous = self.inputs.get(item.id)
        if previous is None:
            self._claim(staged, item.id, index)
            self._need_conversation(staged, item.conversation_id, index)
            if item.request_id is not UNSET:
                key = (item.conversation_id, item.request_id)
                if key in self.requests or key in staged.requests:
                    raise InvalidBatch(
                        f"writes[{index}]: request_id {item.request_id!r} is already used in "
                        f"conversation {item.conversation_id}"
                    )
                staged.requests[key] = item.id
        elif (
            previous.conversation_id != item.conversation_id
            or previous.request_id != item.request_id
        ):
            raise InvalidBatch(
                f"writes[{index}]: input {item.id} cannot change its conversation or request_id"
            )
        staged.inputs[item.id] = item

    def _stage_conversation(self, staged: Staged, conversation: Conversation, index: int) -> None:
        self._claim(staged, conversation.id, index)
        parent = conversation.parent
        if parent is not UNSET:
            self._need_conversation(staged, parent.conversation_id, index)
            if parent.at not in self.entries and all(e.id != parent.at for e in staged.entries):
                raise InvalidBatch(f"writes[{index}]: fork point {parent.at} is not an entry")
        owner = conversation.owner
        if owner is not UNSET and self._task(staged, owner) is None:
            raise InvalidBatch(f"writes[{index}]: unknown owner task {owner}")
        staged.conversations[conversation.id] = conversation

    def apply(self, staged: Staged) -> None:
        """Make a staged batch committed state. Cannot fail."""
        seq = staged.seq
        for conversation in staged.conversations.values():
            self.conversations[conversation.id] = conversation
            self.by_conversation.setdefault(conversation.id, array("q"))
        by_kind = self.by_kind
        for entry in staged.entries:
            self.entries.add(entry, seq)
            cid, id = entry.conversation_id, entry.id
            _add(self.by_conversation[cid], id)
            if entry.head is not UNSET:
                heads = self.heads.get(cid)
                if heads is None:
                    heads = self.heads[cid] = array("q")
                _add(heads, id)
            key = (cid, entry.kind)
            of_kind = by_kind.get(key)
            if of_kind is None:
                by_kind[key] = array("q", (id,))
            else:
                _add(of_kind, id)
        if staged.tasks:
            self.tasks.update(staged.tasks)
        inputs = staged.inputs
        if inputs:
            if len(inputs) == 1:
                for id, item in inputs.items():
                    self.inputs[id] = item
            else:
                self.inputs.update(inputs)
            if staged.requests:
                self.requests.update(staged.requests)
        for ref, ops in staged.docs:
            item = _logged(seq, ops)
            if ref.doc == "session":
                if item[1]:
                    self.session_log.clear()
                self.session_log.append(item)
            else:
                logs = self.rewindable if ref.doc == "rewindable" else self.sticky
                logs.setdefault(ref.conversation_id, []).append(item)  # type: ignore[arg-type]
        self.seq = seq
        created = staged.created
        if created:
            top = max(created)
            if top > self.high_water:
                self.high_water = top

    def truncate_sticky(self, conversation_id: int) -> bool:
        """Drop the sticky log before its last base; True when something was dropped."""
        log = self.sticky.get(conversation_id)
        if not log:
            return False
        start = _last_base(log)
        if start == 0:
            return False
        del log[:start]
        return True


def _add(ids: array[int], id: int) -> None:
    """Add ``id`` to an ascending array (ids are minted in commit order: an append)."""
    if ids and ids[-1] > id:
        insort(ids, id)
    else:
        ids.append(id)


class TableStorage:
    """Lifecycle flags and every read of the storage protocol, over one :class:`Tables`."""

    def __init__(self) -> None:
        self._tables = Tables()
        self._open = False
        self._next_id = 1

    # lifecycle -----------------------------------------------------------------------------

    @property
    def seq(self) -> int:
        """The greatest committed seq (0 for empty storage)."""
        return self._tables.seq

    @property
    def is_open(self) -> bool:
        return self._open

    def _claim(self) -> None:
        if self._open:
            raise StorageInUse(f"{self!r} is already open (one session per storage)")

    def _check_open(self) -> Tables:
        if not self._open:
            raise StorageClosed(f"{self!r} is not open")
        return self._tables

    def _high_water_after(self, staged: Staged) -> int:
        """The committed-id high-water once ``staged`` lands: its ids and every id minted so far."""
        return max(self._tables.high_water, staged.max_id, self._next_id - 1)

    def mint_id(self) -> int:
        """A fresh id above every committed one; never handed out twice while open."""
        tables = self._check_open()
        id = max(self._next_id, tables.high_water + 1)
        self._next_id = id + 1
        return id

    # reads ---------------------------------------------------------------------------------

    async def conversation(self, id: int, ctx: Context) -> Conversation | None:
        found = self._check_open().conversations.get(id)
        return None if found is None else clone(found)

    async def conversations(self, ctx: Context) -> list[Conversation]:
        return clone(list(self._check_open().conversations.values()), list[Conversation])

    async def entries(self, ids: Sequence[int], ctx: Context) -> dict[int, Entry]:
        table = self._check_open().entries
        out: dict[int, Entry] = {}
        for id in ids:
            entry = table.get(id)
            if entry is not None:
                out[id] = entry
        return out

    async def scan_entries(self, scan: EntryScan, ctx: Context) -> list[Entry]:
        tables = self._check_open()
        table = tables.entries
        out: list[Entry] = []
        conversation = tables.conversations.get(scan.conversation_id)
        cap = scan.before
        # a head scan reads the heads index, a kind scan the kind index: only both at once
        # needs a filter (the kind, of the entries that carry a head)
        kind = scan.kind if scan.with_head else None
        empty: array[int] = array("q")
        while conversation is not None and len(out) < scan.limit:
            if scan.with_head:
                own = tables.heads.get(conversation.id, empty)
            elif scan.kind is not None:
                own = tables.by_kind.get((conversation.id, scan.kind), empty)
            else:
                own = tables.by_conversation.get(conversation.id, empty)
            end = len(own) if cap is None else bisect_left(own, cap)
            if kind is None:
                start = max(0, end - (scan.limit - len(out)))
                out.extend(reversed(table.many(own[start:end])))
            else:
                for index in range(end - 1, -1, -1):
                    if len(out) >= scan.limit:
                        break
                    entry = table.get(own[index])
                    if entry is not None and entry.kind == kind:
                        out.append(entry)
            parent = conversation.parent
            if parent is UNSET:
                break
            cap = parent.at + 1 if cap is None else min(cap, parent.at + 1)
            conversation = tables.conversations.get(parent.conversation_id)
        return out

    async def task(self, id: int, ctx: Context) -> Task | None:
        return self._check_open().tasks.copy(id)

    async def scan_tasks(self, scan: TaskScan, ctx: Context) -> list[Task]:
        return self._check_open().tasks.scan(scan)

    def has_task(self, id: int) -> bool:
        """Whether a task of this id is stored, whatever its status (no record is copied)."""
        return id in self._check_open().tasks

    async def input(self, id: int, ctx: Context) -> Input | None:
        found = self._check_open().inputs.get(id)
        return None if found is None else clone(found)

    async def input_by_request(
        self, conversation_id: int, request_id: str, ctx: Context
    ) -> Input | None:
        tables = self._check_open()
        id = tables.requests.get((conversation_id, request_id))
        return None if id is None else clone(tables.inputs[id])

    async def doc(self, ref: DocRef, ctx: Context) -> DocLog | None:
        tables = self._check_open()
        if ref.doc == "session":
            log = tables.session_log
        else:
            logs = tables.rewindable if ref.doc == "rewindable" else tables.sticky
            log = logs.get(ref.conversation_id, [])  # type: ignore[arg-type]
        if not log:
            return None
        return _clone_log(log, _last_base(log))

    async def doc_as_of(self, conversation_id: int, at: int, ctx: Context) -> DocLog | None:
        tables = self._check_open()
        entry = tables.entries.get(at)
        conversation = tables.conversations.get(conversation_id)
        if entry is None or conversation is None:
            return None
        cap: int | None = None
        while conversation.id != entry.conversation_id:
            parent = conversation.parent
            if parent is UNSET:
                return None
            cap = parent.at if cap is None else min(cap, parent.at)
            conversation = tables.conversations[parent.conversation_id]
        if cap is not None and at > cap:
            return None
        seq = tables.entries.seq(at)
        log = [item for item in tables.rewindable.get(conversation.id, []) if item[0] <= seq]
        if not log:
            return None
        return _clone_log(log, _last_base(log))
