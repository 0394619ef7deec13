"""The record lines of :class:`~pico3.storage.jsonl.JsonlStorage` (docs/design/storage.md#jsonl-files).

Two line formats are read; only the second is written.

**v1** (sessions written before the compact format): one JSON object per line,
``{"seq", "maxId", "writes", "refs"?, "crc"}``, each write the tagged object of
:data:`~pico3.storage.records.Write` (``{"type": "entry", "entry": {...}}``), ``refs`` the sidecar
file names and ``crc`` the CRC-32 of the line without its ``crc`` member.

**v2** (compact): one JSON array per line, ``[crc, seq, maxId, writes, refs?]``. ``crc`` is the
CRC-32 of the bytes after ``[crc,`` (the rest of the line, without its newline). Each write is a
positional array whose first element names its kind; absent members are ``null`` and trailing
``null`` members are left out:

======================================================= ======================================
``["c", id, parent_id, parent_at, owner, sections]``    create a conversation
``["e", id, cid, kind, model, data, head, edits, by]``  append an entry (``by``: ``by_task_id``)
``["t", id, cid, kind, input, status, checkpoint,``     create a task (``status`` ``null``:
``abort, outcome, after, owns, background]``            ``"pending"``; ``after``/``owns``
                                                        ``null``: empty)
``["q", id, status, outcome, owns, checkpoint, abort]`` patch a task (``checkpoint`` ``0``
                                                        clears it)
``["j", id, cid, status, entry, answer, request_id,``   create or replace an input (``detail``
``reason, detail, model, allow]``                       is wrapped: ``[value]``, since ``null``
                                                        is a value; ``model`` and ``allow``,
                                                        a prompt's own model and rules, came
                                                        later: older lines end before them)
``["d", doc, ops, cid]``                                document ops; ``doc`` is ``"s"``
                                                        (session), ``"r"`` (rewindable) or
                                                        ``"k"`` (sticky)
======================================================= ======================================

``refs`` on a main line names the sidecars the commit also wrote, as integers: ``c`` for
``sticky-<c>.jsonl``, ``-t`` for ``task-<t>.jsonl``. On a sidecar line, ``refs`` present (``[]``)
says the line is its own publication point: the commit wrote nothing else
(docs/design/storage.md#publication-point).

Also read (written by the first v2 code, for a day): ``["p", id, status, checkpoint, abort,
outcome, owns]`` and ``["i", id, cid, status, request_id, entry, answer, reason, detail]``, the
same writes as ``q`` and ``j`` with their members in another order.

A ``status`` is written as its code, the status's index in its record's list of statuses: a
task's ``0`` pending, ``1`` running, ``2`` terminal; an input's ``0`` queued, ``1`` placed,
``2`` done, ``3`` unanswered (a short turn writes four statuses; their names were 4% of its
bytes). Lines written before the codes hold the names, and are read as well.

``maxId`` ``0`` on a main line says the line's own writes create its greatest id (replay
raises the high-water mark from the ids it creates anyway).

A v1 file opened by this code is appended to in v2: a file holds v1 lines, then v2 lines.

Why one module: it is the on-disk line format itself, both directions: the v2 encoders and their
readers sit side by side because a write's field order is the format (a reader built apart from
its encoder is how the two drift), and the v1 reader beside them is what keeps old sessions
opening. Splitting it would scatter one table of positions over several files.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Callable
from typing import Annotated, Any

import msgspec

from pico3.storage.base import CorruptStorage
from pico3.storage.records import (
    UNSET,
    Conversation,
    ConversationWrite,
    DocRef,
    DocWrite,
    Entry,
    EntryWrite,
    Id,
    Input,
    InputReason,
    InputStatus,
    InputWrite,
    Ops,
    Parent,
    SectionSeed,
    Seq,
    Task,
    TaskPatch,
    TaskPatchWrite,
    TaskStatus,
    TaskWrite,
    UnsetType,
    Write,
)

__all__ = ["StoredCommit", "encode_line", "read_lines", "ref_name", "sidecar_ref", "stored_writes"]

_STICKY_PREFIX = "sticky-"
_TASK_PREFIX = "task-"
_SUFFIX = ".jsonl"


class StoredCommit:
    """One commit as decoded from its record line, whichever format the line was in.

    (Not :class:`pico3.kernel.line.StoredCommit`, the session's FIFO mutex.)"""

    __slots__ = ("max_id", "own", "refs", "seq", "writes")

    def __init__(
        self, seq: int, max_id: int, writes: list[Write], refs: tuple[str, ...] | None, own: bool
    ) -> None:
        self.seq = seq
        self.max_id = max_id
        self.writes = writes
        self.refs = refs  # main: the sidecar files this commit also wrote (shared, read only)
        self.own = own  # sidecar: this line is its commit's publication point


def ref_name(ref: int) -> str:
    """The sidecar file a v2 ref names."""
    return f"{_STICKY_PREFIX}{ref}{_SUFFIX}" if ref > 0 else f"{_TASK_PREFIX}{-ref}{_SUFFIX}"


def sidecar_ref(name: str) -> int:
    """The v2 ref of a sidecar file name (see :func:`ref_name`)."""
    if name.startswith(_STICKY_PREFIX):
        return int(name[len(_STICKY_PREFIX) : -len(_SUFFIX)])
    return -int(name[len(_TASK_PREFIX) : -len(_SUFFIX)])


# -- v1 ---------------------------------------------------------------------------------------

_CRC_MEMBER = b',"crc":'


class _V1(msgspec.Struct, omit_defaults=True, gc=False):
    seq: Seq
    max_id: Annotated[int, msgspec.Meta(ge=0)] = msgspec.field(name="maxId")
    writes: list[Write]
    refs: list[str] | UnsetType = UNSET
    crc: int | UnsetType = UNSET


_V1_DECODER = msgspec.json.Decoder(_V1)


def _check_v1(path: str, number: int, raw: bytes, record: _V1) -> StoredCommit:
    cut = raw.rfind(_CRC_MEMBER)
    if record.crc is UNSET or cut < 0:
        raise CorruptStorage(path, number, "record has no checksum")
    if zlib.crc32(raw[:cut] + b"}") != record.crc:
        raise CorruptStorage(path, number, "checksum mismatch (the line was altered)")
    refs = None if record.refs is UNSET else tuple(record.refs)
    return StoredCommit(record.seq, record.max_id, record.writes, refs, False)


# -- v2 ---------------------------------------------------------------------------------------


_ABSENT = msgspec.Raw()
_NULL_RAW = msgspec.Raw(b"null")


_ARRAY = 0x5B  # the first byte of a JSON array, "["
_OBJECT = 0x7B  # "{"
_NULL = 0x6E  # "n": a Raw holds valid JSON, so one that starts with "n" is null


def _body(raw: msgspec.Raw, opener: int, member: str) -> Any:
    """An entry payload as read: UNSET when absent, else its JSON text (a ``msgspec.Raw``,
    a private copy) once checked to be the right container type (``opener``: its first byte).

    Storage hands out entries only through a msgspec round trip (``records.clone``), which
    decodes the text, so a replayed entry holds its payload as the few bytes it is stored in
    instead of a tree of Python objects (docs/design/storage.md#memory)."""
    if not raw:
        return UNSET
    first = memoryview(raw)[0]
    if first == opener:
        return raw.copy()  # the entry's own few bytes, not a view that keeps the file alive
    if first == _NULL:
        return UNSET
    kind = "array" if opener == _ARRAY else "object"
    raise ValueError(f"{member} is not a JSON {kind}")


class _C(msgspec.Struct, array_like=True, tag="c", gc=False):
    id: Id
    parent_id: Id | None = None
    parent_at: Id | None = None
    owner: Id | None = None
    sections: list[SectionSeed] | None = None


class _E(msgspec.Struct, array_like=True, tag="e", gc=False):
    """An entry; its payloads stay encoded (see :func:`_body`)."""

    id: Id
    cid: Id
    kind: str
    model: msgspec.Raw = _ABSENT
    data: msgspec.Raw = _ABSENT
    head: Id | None = None
    edits: msgspec.Raw = _ABSENT
    by: Id | None = None


_TASK_STATUSES: tuple[TaskStatus, ...] = ("pending", "running", "terminal")
_INPUT_STATUSES: tuple[InputStatus, ...] = ("queued", "placed", "done", "unanswered")
_TASK_CODES = {status: code for code, status in enumerate(_TASK_STATUSES)}
_INPUT_CODES = {status: code for code, status in enumerate(_INPUT_STATUSES)}
_TaskCode = Annotated[int, msgspec.Meta(ge=0, lt=len(_TASK_STATUSES))]
_InputCode = Annotated[int, msgspec.Meta(ge=0, lt=len(_INPUT_STATUSES))]


class _T(msgspec.Struct, array_like=True, tag="t", gc=False):
    """A task; its ``input`` and ``outcome`` stay encoded (see :func:`_body`)."""

    id: Id
    cid: Id
    kind: str
    input: msgspec.Raw = _ABSENT
    status: _TaskCode | TaskStatus | None = None
    checkpoint: dict[str, Any] | None = None
    abort: bool | None = None
    outcome: msgspec.Raw = _ABSENT
    after: list[Id] | None = None
    owns: list[Id] | None = None
    background: bool | None = None


class _P(msgspec.Struct, array_like=True, tag="p", gc=False):
    id: Id
    status: TaskStatus | None = None
    checkpoint: dict[str, Any] | Annotated[int, msgspec.Meta(ge=0, le=0)] | None = None
    abort: bool | None = None
    outcome: dict[str, Any] | None = None
    owns: list[Id] | None = None


class _Q(msgspec.Struct, array_like=True, tag="q", gc=False):
    """A task patch, members in the order a short turn leaves the fewest ``null`` s in."""

    id: Id
    status: _TaskCode | TaskStatus | None = None
    outcome: msgspec.Raw = _ABSENT
    owns: list[Id] | None = None
    checkpoint: dict[str, Any] | Annotated[int, msgspec.Meta(ge=0, le=0)] | None = None
    abort: bool | None = None


class _J(msgspec.Struct, array_like=True, tag="j", gc=False):
    """An input, members in the order a short turn leaves the fewest ``null`` s in."""

    id: Id
    cid: Id
    status: _InputCode | InputStatus
    entry: Id | None = None
    answer: Id | None = None
    request_id: str | None = None
    reason: InputReason | None = None
    detail: Annotated[list[Any], msgspec.Meta(min_length=1, max_length=1)] | None = None
    model: dict[str, Any] | None = None
    allow: list[str] | None = None


class _I(msgspec.Struct, array_like=True, tag="i", gc=False):
    id: Id
    cid: Id
    status: InputStatus
    request_id: str | None = None
    entry: Id | None = None
    answer: Id | None = None
    reason: InputReason | None = None
    detail: Annotated[list[Any], msgspec.Meta(min_length=1, max_length=1)] | None = None


class _D(msgspec.Struct, array_like=True, tag="d", gc=False):
    doc: str
    ops: Ops
    cid: Id | None = None


class _V2(msgspec.Struct, array_like=True, gc=False):
    crc: int
    seq: Seq
    max_id: Annotated[int, msgspec.Meta(ge=0)]
    writes: list[_C | _E | _T | _P | _Q | _I | _J | _D]
    refs: list[int] | None = None


_V2_DECODER = msgspec.json.Decoder(_V2)
_ENCODER = msgspec.json.Encoder()
_DOCS = {"session": "s", "rewindable": "r", "sticky": "k"}
_DOC_KINDS = {"s": "session", "r": "rewindable", "k": "sticky"}


def _u(value: Any) -> Any:
    """``None`` for UNSET (v2 writes an absent member as ``null``)."""
    return None if value is UNSET else value


def _trim(items: list[Any]) -> list[Any]:
    while items[-1] is None:
        items.pop()
    return items


def _write_v2(write: Write) -> list[Any]:
    kind = type(write)
    if kind is EntryWrite:
        e = write.entry  # type: ignore[union-attr]
        return _trim(
            [
                "e",
                e.id,
                e.conversation_id,
                e.kind,
                _u(e.model),
                _u(e.data),
                _u(e.head),
                _u(e.edits),
                _u(e.by_task_id),
            ]
        )
    if kind is InputWrite:
        i = write.input  # type: ignore[union-attr]
        return _trim(
            [
                "j",
                i.id,
                i.conversation_id,
                _INPUT_CODES[i.status],
                _u(i.entry),
                _u(i.answer),
                _u(i.request_id),
                _u(i.reason),
                None if i.detail is UNSET else [i.detail],
                _u(i.model),
                _u(i.allow),
            ]
        )
    if kind is TaskPatchWrite:
        p = write.patch  # type: ignore[union-attr]
        checkpoint = p.checkpoint
        return _trim(
            [
                "q",
                p.id,
                None if p.status is UNSET else _TASK_CODES[p.status],
                _u(p.outcome),
                _u(p.owns),
                0 if checkpoint is None else _u(checkpoint),
                _u(p.abort),
            ]
        )
    if kind is DocWrite:
        d: DocWrite = write  # type: ignore[assignment]
        return _trim(["d", _DOCS[d.ref.doc], d.ops, _u(d.ref.conversation_id)])
    if kind is TaskWrite:
        t = write.task  # type: ignore[union-attr]
        return _trim(
            [
                "t",
                t.id,
                t.conversation_id,
                t.kind,
                t.input,
                None if t.status == "pending" else _TASK_CODES[t.status],
                _u(t.checkpoint),
                _u(t.abort),
                _u(t.outcome),
                t.after or None,
                t.owns or None,
                _u(t.background),
            ]
        )
    c = write.conversation  # type: ignore[union-attr]
    parent = c.parent
    return _trim(
        [
            "c",
            c.id,
            None if parent is UNSET else parent.conversation_id,
            None if parent is UNSET else parent.at,
            _u(c.owner),
            _u(c.sections),
        ]
    )


def _set(value: Any) -> Any:
    """UNSET for ``None`` (v2's absent member)."""
    return UNSET if value is None else value


# One converter per v2 write type, to the storage write it stands for (open replays every write
# of a session through these: the common ones are written out rather than shared helpers).


def _payload(raw: msgspec.Raw, opener: int, member: str) -> Any:
    """An entry payload as read (``raw`` not empty): its JSON text once checked to be the right
    container type, or UNSET for ``null``. Unlike :func:`_body` it is not copied out of the
    file's buffer: the tables keep no replayed entry, only the row they encode from it
    (``_tables.EntryTable``), so the view lives only as long as the open's own buffer."""
    first = memoryview(raw)[0]
    if first == opener:
        return raw
    if first == _NULL:
        return UNSET
    kind = "array" if opener == _ARRAY else "object"
    raise ValueError(f"{member} is not a JSON {kind}")


def _entry(e: _E) -> Write:
    model, data, edits, head, by = e.model, e.data, e.edits, e.head, e.by
    return EntryWrite(
        Entry(
            id=e.id,
            conversation_id=e.cid,
            kind=_intern(e.kind),  # every entry of a kind shares one string
            model=_payload(model, _ARRAY, "entry model") if model else UNSET,
            data=_payload(data, _OBJECT, "entry data") if data else UNSET,
            head=UNSET if head is None else head,
            edits=_payload(edits, _ARRAY, "entry edits") if edits else UNSET,
            by_task_id=UNSET if by is None else by,
        )
    )


def _input(i: _J | _I) -> Write:  # the same members, in another order
    request_id, entry, answer, reason, detail = i.request_id, i.entry, i.answer, i.reason, i.detail
    return InputWrite(
        Input(
            id=i.id,
            conversation_id=i.cid,
            status=_INPUT_STATUSES[status] if isinstance(status := i.status, int) else status,
            request_id=UNSET if request_id is None else request_id,
            entry=UNSET if entry is None else entry,
            answer=UNSET if answer is None else answer,
            reason=UNSET if reason is None else reason,
            detail=UNSET if detail is None else detail[0],
            model=UNSET if (model := getattr(i, "model", None)) is None else model,
            allow=UNSET if (allow := getattr(i, "allow", None)) is None else allow,
        )
    )


def _patch(p: _Q | _P) -> Write:  # the same members, in another order
    checkpoint, outcome = p.checkpoint, p.outcome
    if type(outcome) is msgspec.Raw:
        outcome = _body(outcome, _OBJECT, "task outcome") if outcome else UNSET
    elif outcome is None:
        outcome = UNSET
    status, abort, owns = p.status, p.abort, p.owns
    return TaskPatchWrite(
        TaskPatch(
            id=p.id,
            status=UNSET
            if status is None
            else _TASK_STATUSES[status]
            if isinstance(status, int)
            else status,
            checkpoint=None if checkpoint == 0 else _set(checkpoint),  # type: ignore[arg-type]
            abort=UNSET if abort is None else abort,
            outcome=outcome,
            owns=UNSET if owns is None else owns,
        )
    )


def _doc(d: _D) -> Write:
    doc = _DOC_KINDS.get(d.doc)
    if doc is None:
        raise ValueError(f"unknown document kind {d.doc!r}")
    return DocWrite(DocRef(doc=doc, conversation_id=_set(d.cid)), d.ops)  # type: ignore[arg-type]


def _task(t: _T) -> Write:
    return TaskWrite(
        Task(
            id=t.id,
            conversation_id=t.cid,
            kind=t.kind,
            input=None if not t.input or t.input == _NULL_RAW else t.input.copy(),
            status="pending"
            if (status := t.status) is None
            else _TASK_STATUSES[status]
            if isinstance(status, int)
            else status,
            checkpoint=_set(t.checkpoint),
            abort=_set(t.abort),
            outcome=_body(t.outcome, _OBJECT, "task outcome"),
            after=t.after or [],
            owns=t.owns or [],
            background=_set(t.background),
        )
    )


def _conversation(c: _C) -> Write:
    if (c.parent_id is None) != (c.parent_at is None):
        raise ValueError("a fork point needs both its conversation and its entry")
    parent = UNSET if c.parent_id is None else Parent(conversation_id=c.parent_id, at=c.parent_at)  # type: ignore[arg-type]
    return ConversationWrite(
        Conversation(id=c.id, parent=parent, owner=_set(c.owner), sections=_set(c.sections))
    )


_intern = sys.intern
_FROM_V2: dict[type, Callable[[Any], Write]] = {
    _E: _entry,
    _J: _input,
    _I: _input,
    _Q: _patch,
    _P: _patch,
    _D: _doc,
    _T: _task,
    _C: _conversation,
}


def _write_v1(w: _C | _E | _T | _P | _Q | _I | _J | _D) -> Write:
    """The storage write a v2 write stands for."""
    return _FROM_V2[type(w)](w)


def encode_line(
    seq: int, max_id: int, writes: list[Write], refs: list[str] | None = None, own: bool = False
) -> bytes:
    """One v2 line (newline included). ``refs`` (main) names the sidecars the commit also
    wrote; ``own`` (sidecar) marks the line as its commit's publication point."""
    items: list[Any] = [seq, max_id, [_write_v2(w) for w in writes]]
    if refs:
        items.append([sidecar_ref(name) for name in refs])
    elif own:
        items.append([])
    body = _ENCODER.encode(items)
    rest = body[1:]
    return b"[%d,%s\n" % (zlib.crc32(rest), rest)


def _check_v2(
    path: str,
    number: int,
    raw: bytes,
    record: _V2,
    main: bool,
    names: dict[tuple[int, ...], tuple[str, ...]],
) -> StoredCommit:
    """``names``: the file names of the refs lists seen so far in this file (most lines of a
    file name the same sidecars), shared by their lines."""
    if zlib.crc32(memoryview(raw)[raw.find(b",") + 1 :]) != record.crc:
        raise CorruptStorage(path, number, "checksum mismatch (the line was altered)")
    convert = _FROM_V2
    try:
        writes = [convert[type(w)](w) for w in record.writes]
    except (ValueError, TypeError, msgspec.ValidationError) as exc:
        raise CorruptStorage(path, number, f"malformed record: {exc}") from None
    refs = record.refs
    if main:
        if not refs:
            return StoredCommit(record.seq, record.max_id, writes, None, False)
        key = tuple(refs)
        files = names.get(key)
        if files is None:
            files = names[key] = tuple(ref_name(r) for r in refs)
        return StoredCommit(record.seq, record.max_id, writes, files, False)
    if refs:
        raise CorruptStorage(path, number, "malformed record: a sidecar line names other files")
    return StoredCommit(record.seq, record.max_id, writes, None, refs is not None)


# -- reading ----------------------------------------------------------------------------------


def _decode_one(path: str, number: int, raw: bytes) -> _V1 | _V2:
    try:
        if raw[:1] == b"[":
            return _V2_DECODER.decode(raw)
        return _V1_DECODER.decode(raw)
    except msgspec.DecodeError as exc:
        raise CorruptStorage(path, number, f"malformed record: {exc}") from None


def _decode_all(path: str, data: bytes, lines: list[bytes]) -> list[_V1 | _V2]:
    """Decode every line; the common cases (all v2, all v1, v1 then v2) in one call each."""
    split = 0 if data[:1] == b"[" else data.find(b"\n[") + 1
    try:
        if split == 0 and data[:1] == b"[":
            records: list[_V1 | _V2] = list(_V2_DECODER.decode_lines(data))
        elif split == 0:
            records = list(_V1_DECODER.decode_lines(data))
        else:
            records = [
                *_V1_DECODER.decode_lines(data[:split]),
                *_V2_DECODER.decode_lines(data[split:]),
            ]
    except msgspec.DecodeError:
        records = []
    if len(records) != len(lines):
        records = [_decode_one(path, number, raw) for number, raw in enumerate(lines, 1)]
    return records


def read_lines(path: str, data: bytes, main: bool) -> list[tuple[int, int, StoredCommit]]:
    """Check every line of ``data`` (whole lines, as read and cut): ``(line number, end offset,
    line)``. Fails with :class:`CorruptStorage` naming the first bad line."""
    if not data:
        return []
    lines = data.split(b"\n")
    lines.pop()  # the empty string after the final newline
    records = _decode_all(path, data, lines)
    out: list[tuple[int, int, StoredCommit]] = []
    names: dict[tuple[int, ...], tuple[str, ...]] = {}
    previous = 0
    end = 0
    for number, (raw, record) in enumerate(zip(lines, records, strict=True), 1):
        end += len(raw) + 1
        if type(record) is _V2:
            line = _check_v2(path, number, raw, record, main, names)
        else:
            line = _check_v1(path, number, raw, record)  # type: ignore[arg-type]
        if line.seq <= previous:
            raise CorruptStorage(
                path, number, f"seq {line.seq} does not increase (previous seq {previous})"
            )
        previous = line.seq
        out.append((number, end, line))
    return out


def stored_writes(data: bytes) -> list[dict[str, Any]]:
    """Every write of every line of a JSONL storage file's bytes that decodes, in file order,
    each as the plain JSON object of its record type (``{"type": "entry", "entry": {...}}``,
    whichever line format it was stored in).

    For read-only tools that look into a session without opening it (export, the session
    picker): a line that does not decode — a torn tail, the zeros of main's preallocation, a
    line a partial read cut in two — is skipped, and checksums are not checked."""
    out: list[dict[str, Any]] = []
    for raw in data.split(b"\n"):
        raw = raw.strip(b"\0 \r")
        if not raw:
            continue
        try:
            if raw[:1] == b"[":
                writes = [_write_v1(w) for w in _V2_DECODER.decode(raw).writes]
            else:
                writes = _V1_DECODER.decode(raw).writes
        except (msgspec.DecodeError, ValueError, TypeError):
            continue
        out.extend(_PLAIN.decode(_ENCODER.encode(writes)))
    return out


_PLAIN = msgspec.json.Decoder(list[dict[str, Any]])
