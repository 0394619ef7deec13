"""Entries and inputs inside a commit: direct reads, scans, derived context, writes.

Direct reads (``entry``, ``entries``, ``input``) see this batch's own writes; scan-shaped reads
(``scan_entries``, ``newest_entry``, ``visible_transcript``, ``context``) after an entry append
in the same conversation raise :class:`~pico3.kernel.errors.ReadAfterWrite` and poison the
transaction. ``write`` is the passive, boundary-safe write; ``append_entry`` and ``put_input``
are core.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from msgspec import UNSET

from pico3.kernel.errors import ReadAfterWrite
from pico3.kernel.tx.authority import Authority
from pico3.kernel.tx.base import _kind_name
from pico3.kernel.tx.tasks import TaskOps
from pico3.session_data.context import DerivedContext, derive_context
from pico3.session_data.entries import (
    EntryKind,
    EntryRejected,
    NewEntry,
    check_new_entry,
    new_entry_json,
)
from pico3.session_data.json_shapes import entry_json
from pico3.storage.records import (
    Conversation,
    DocRef,
    Entry,
    EntryScan,
    EntryWrite,
    Input,
    InputWrite,
    clone,
)

__all__ = ["EntryOps"]


class EntryOps(TaskOps):
    """Entries and inputs (a write consults the task layer's busy judgement)."""

    async def _visible(self, conversation_id: int, at: int) -> bool:
        found = await self.entry(at)
        if found is None:
            return False
        cap: int | None = None
        current: Conversation | None = self._known(conversation_id)
        while current is not None:
            if current.id == found.conversation_id:
                return cap is None or at <= cap
            if current.parent is UNSET:
                return False
            cap = current.parent.at if cap is None else min(cap, current.parent.at)
            current = self.conversation(current.parent.conversation_id)
        return False

    # -- entries ---------------------------------------------------------------------------
    async def entry(self, entry_id: int, kind: EntryKind | str | None = None) -> Entry | None:
        """One entry by id (this batch's appends included); with ``kind``, only if it matches."""
        self._check()
        found = self._entries.get(entry_id)
        if found is not None:
            found = clone(found)  # the batch's own record stays private until it is persisted
        else:
            found = (await self._kernel.storage.entries([entry_id], self._ctx)).get(entry_id)
        if found is None or (kind is not None and found.kind != _kind_name(kind)):
            return None
        return found

    async def entries(self, ids: Sequence[int]) -> dict[int, Entry]:
        """The existing entries among ``ids``, by id (this batch's appends included)."""
        self._check()
        out = {i: clone(self._entries[i]) for i in ids if i in self._entries}
        rest = [i for i in ids if i not in out]
        if rest:
            out.update(await self._kernel.storage.entries(rest, self._ctx))
        return out

    def _scan_guard(self, conversation_id: int, what: str) -> None:
        self._check()
        if conversation_id in self._appended:
            error = ReadAfterWrite(
                f"{what}({conversation_id}) after an entry append in the same commit; "
                "read before the first append"
            )
            self._batch.poison = error
            raise error

    async def scan_entries(
        self,
        conversation_id: int,
        *,
        limit: int = 100,
        kind: EntryKind | str | None = None,
        with_head: bool = False,
        before: int | None = None,
    ) -> list[Entry]:
        """Newest-first, fork-aware committed entries (rejects after a same-batch append)."""
        self._scan_guard(conversation_id, "scan_entries")
        self._known(conversation_id)
        scan = EntryScan(
            conversation_id=conversation_id,
            limit=limit,
            kind=None if kind is None else _kind_name(kind),
            with_head=with_head,
            before=before,
        )
        return await self._kernel.storage.scan_entries(scan, self._ctx)

    async def newest_entry(
        self, conversation_id: int, kind: EntryKind | str | None = None
    ) -> Entry | None:
        """The newest fork-visible entry (of ``kind``, when given)."""
        found = await self.scan_entries(conversation_id, limit=1, kind=kind)
        return found[0] if found else None

    async def visible_transcript(self, conversation_id: int, at: int | None = None) -> list[Entry]:
        """The fork-visible entries from the newest head's target through ``at`` (oldest first)."""
        self._scan_guard(conversation_id, "context")
        return await self._kernel.transcript(conversation_id, at, self._ctx)

    async def context(self, conversation_id: int, at: int | None = None) -> DerivedContext:
        """Derived model context of a conversation (through ``at``, default newest)."""
        self._scan_guard(conversation_id, "context")
        if at is not None and not await self._visible(conversation_id, at):
            raise ValueError(f"entry {at} is not fork-visible from conversation {conversation_id}")
        return derive_context(await self._kernel.transcript(conversation_id, at, self._ctx))

    async def shared_context(self, conversation_id: int, at: int | None = None) -> DerivedContext:
        """:meth:`context` derived from the kernel's shared transcript cache: cheap however long
        the conversation is, but **read-only** (its entries and messages are shared with later
        reads, and its ``entries`` and ``messages`` lists are extended by them, their first
        ``len()`` items never changed: copy before changing or keeping anything)."""
        self._scan_guard(conversation_id, "context")
        if at is not None and not await self._visible(conversation_id, at):
            raise ValueError(f"entry {at} is not fork-visible from conversation {conversation_id}")
        return await self._kernel.shared_context(conversation_id, at, self._ctx)

    def write(
        self,
        conversation_id: int,
        kind: EntryKind | str,
        *,
        model: list[dict[str, Any]] | None = None,
        data: dict[str, Any] | None = None,
        head: int | Literal["self"] | None = None,
        edits: list[dict[str, Any]] | None = None,
    ) -> int:
        """Passive, boundary-safe write of one entry; returns the input id.

        When the conversation is idle the entry lands now (input ``done``, event
        ``entry.added``). When it is busy (a live turn task, judged by the kernel's busy probe
        against this batch) the entry is queued in ``sticky.inbox`` (input ``queued``, event
        ``input.queued``) and placed at the next boundary, so a passive entry can never split an
        assistant/tool-result exchange. ``pi.*`` kinds other than ``pi.notice`` and
        ``head``/``edits`` are refused for non-core callers.
        """
        self._check()
        self._known(conversation_id)
        self._task_scope(conversation_id, "write")
        new = check_new_entry(
            NewEntry(kind=_kind_name(kind), model=model, data=data, head=head, edits=edits),
            core=self._authority is Authority.CORE,
        )
        if self._kernel.busy(self, conversation_id):
            return self._queue_write(conversation_id, new)
        input_id = self._kernel.mint_id()
        entry = self._append(conversation_id, new)
        record = Input(id=input_id, conversation_id=conversation_id, status="done", entry=entry.id)
        self._inputs[input_id] = record
        self._batch.inputs[input_id] = record
        self._batch.writes.append(InputWrite(input=record))
        return input_id

    def _queue_write(self, conversation_id: int, new: NewEntry) -> int:
        sticky = self._doc_root(DocRef.sticky(conversation_id))
        input_id = self._kernel.mint_id()
        item: dict[str, Any] = {"id": input_id, "mode": "write", "entry": new_entry_json(new)}
        if "inbox" not in sticky:
            sticky["inbox"] = []
        sticky["inbox"].append(item)
        record = Input(id=input_id, conversation_id=conversation_id, status="queued")
        self._inputs[input_id] = record
        self._batch.inputs[input_id] = record
        self._batch.writes.append(InputWrite(input=record))
        events = self._batch.events.setdefault(conversation_id, [])
        events.append({"type": "input.queued", "input": input_id, "mode": "write"})
        return input_id

    def put_input(self, record: Input) -> None:
        """Core: create an input record or replace it whole (admission, placement, resolution)."""
        self._require(Authority.CORE, "put_input")
        if not isinstance(record, Input):
            raise TypeError(f"expected an Input record, got {type(record).__name__}")
        self._known(record.conversation_id)
        self._inputs[record.id] = record
        self._batch.inputs[record.id] = record
        self._batch.writes.append(InputWrite(input=record))

    async def input_by_request(self, conversation_id: int, request_id: str) -> Input | None:
        """The input admitted with ``request_id`` in this conversation (this batch included).

        Request keys are scoped per conversation (docs/design/decisions.md#d8-g4); the lookup is a committed read that
        happens before any write of a ``send``.
        """
        self._check()
        for record in self._inputs.values():
            if record.conversation_id == conversation_id and record.request_id == request_id:
                return record
        return await self._kernel.storage.input_by_request(conversation_id, request_id, self._ctx)

    def append_entry(self, conversation_id: int, entry: NewEntry) -> Entry:
        """Core append (may carry ``head``/``edits``); no input record."""
        self._require(Authority.CORE, "append_entry")
        self._known(conversation_id)
        return self._append(conversation_id, check_new_entry(entry, core=True))

    def _append(self, conversation_id: int, new: NewEntry) -> Entry:
        entry_id = self._kernel.mint_id()
        head: int | Any = UNSET
        if new.head == "self":
            head = entry_id
        elif new.head is not None:
            if new.head > entry_id:
                raise EntryRejected(f"entry.head {new.head} is after the entry itself")
            head = new.head
        entry = Entry(
            id=entry_id,
            conversation_id=conversation_id,
            kind=new.kind,
            model=UNSET if new.model is None else new.model,
            data=UNSET if new.data is None else new.data,
            head=head,
            edits=UNSET if new.edits is None else new.edits,
        )
        self._entries[entry_id] = entry
        self._appended.add(conversation_id)
        batch = self._batch
        batch.new_entries.append(entry)
        batch.writes.append(EntryWrite(entry=entry))
        batch.prechecked.append(id(entry))
        # The events share the entry's payload; the view copies them into the envelope (only
        # when someone watches), so no listener can reach the record through them.
        shape = entry_json(entry)
        events = batch.events.setdefault(conversation_id, [])
        added = {"type": "entry.added", "entry": shape}
        events.append(added)
        batch.shared_events.add(id(added))
        if head is not UNSET:
            batch.heads = True
            moved = {"type": "head.moved", "entry": shape}
            events.append(moved)
            batch.shared_events.add(id(moved))
        return entry

    # -- inputs ----------------------------------------------------------------------------
    async def input(self, input_id: int) -> Input | None:
        """One input record (this batch's writes included)."""
        self._check()
        found = self._inputs.get(input_id)
        return found if found is not None else await self._kernel.storage.input(input_id, self._ctx)

    async def turn_input(self, conversation_id: int | None = None) -> Input | None:
        """The input record that started the running turn of the conversation (default: the
        bound one), or ``None`` when no turn runs. Any authority: a hook reads the turn's own
        model and allow rules here (``Input.model``, ``Input.allow``: a command's ``model:``
        and ``allowed-tools:``), and never any other conversation's by accident."""
        self._check()
        cid = self._bound() if conversation_id is None else conversation_id
        self._known(cid)
        turn = self._doc_root(DocRef.sticky(cid)).get("turn")
        inputs = turn.get("inputs") if isinstance(turn, Mapping) else None
        if not inputs or type(inputs[0]) is not int:
            return None
        record = await self.input(inputs[0])
        return record if record is not None and record.conversation_id == cid else None
