"""Transactions: what a builder can do inside one commit, checked on every call.

A :class:`Transaction` is handed to a builder by :meth:`Kernel.commit`. It buffers writes
(synchronously), answers reads (asynchronously when they go to storage) and hands out tracked
proxies of documents. Its *authority* decides which methods work: one implementation, checked
at runtime on every method, so a caller that casts past the types still cannot reach core
operations (pico3-spec §2.3). Three authorities share it: ``HOST`` (handles), ``TASK``
(ordinary kinds' invocations: own conversation and owned subtree, own slot and checkpoint, no
config writes, nothing at all from an abort invocation) and ``CORE`` (the kernel and the
built-in kinds: raw documents, inputs, task records).

Task records (§1.9): ``create_task`` (with ``after`` dependencies and ``background``), ``task``
(direct read, batch-aware), ``tasks`` (a scan), ``slot`` (working state that retires with the
terminal record), ``checkpoint`` (the kind's program counter), and the core-only ``set_task``,
``mark_task`` and ``finish_task``. A transaction run by a task carries its invocation token
(:class:`Invoker`), which the kernel checks on the line before the builder runs.

Read semantics (§2.5):

* direct reads (``entry``, ``conversation``, ``input``) see this batch's own writes;
* scan-shaped reads (``newest_entry``, ``scan_entries``, ``context``) after an entry append in
  the same conversation raise :class:`ReadAfterWrite` and *poison* the transaction: it cannot
  commit even if the builder catches the error;
* document reads are exempt: the proxy is the overlay.

After the builder returns the transaction is closed; any later call raises
:class:`TransactionClosed`, and every proxy it handed out is revoked.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from msgspec import UNSET

from chord.context import Context
from chord.json import JsonError, copy_json
from pico3.kernel.errors import (
    Forbidden,
    ReadAfterWrite,
    TransactionClosed,
    UnknownConversation,
)
from pico3.kernel.namespaces import Namespace, SliceDoc, SliceView, check_name
from pico3.kernel.proxy import Membrane, Recorder, TrackedDict
from pico3.model.config import ABSENT, ConfigKey, ConfigRejected, check_value, resolve_config
from pico3.model.context import DerivedContext, derive_context
from pico3.model.entries import (
    EntryKind,
    EntryRejected,
    NewEntry,
    check_new_entry,
    new_entry_json,
)
from pico3.model.records import entry_json
from pico3.model.section_seed import check_section_seed
from pico3.storage._tables import clone
from pico3.storage.records import (
    Conversation,
    ConversationWrite,
    DocRef,
    DocWrite,
    Entry,
    EntryScan,
    EntryWrite,
    Input,
    InputWrite,
    Parent,
    SectionSeed,
    Task,
    TaskPatch,
    TaskPatchWrite,
    TaskScan,
    TaskWrite,
    Write,
)

if TYPE_CHECKING:
    from pico3.kernel.commit import Kernel

__all__ = [
    "TURN_KINDS",
    "VIEW_HIDDEN_KINDS",
    "Authority",
    "Batch",
    "ConfigFacade",
    "Invoker",
    "KindLookup",
    "Transaction",
]

_PAGE = 256


class Authority(enum.Enum):
    """Who is committing. Core authority comes only from the kernel's own invoker objects."""

    HOST = "host"
    CORE = "core"
    TASK = "task"


class Invoker(Protocol):
    """The invocation token a task commit carries (see :mod:`pico3.tasks.invocation`).

    ``mode`` is ``"run"`` or ``"abort"``; ``alive`` turns false for good when the handler that
    holds the token returns. The kernel checks it on the line before every task commit.
    """

    @property
    def task_id(self) -> int: ...

    @property
    def mode(self) -> Literal["run", "abort"]: ...

    @property
    def alive(self) -> bool: ...


class KindLookup(Protocol):
    """What the kernel asks the task layer about kinds (installed by the scheduler)."""

    def resolve(self, kind: object, *, core: bool) -> str:
        """The kind name of ``kind``: the registered kind object (any authority) or, for core
        callers, a registered name. Raises ``StaleDefinition`` for a stale object."""
        ...

    def initial_slot(self, name: str, input: Any) -> dict[str, Any] | None:
        """The kind's initial slot for ``input`` (``None`` when it declares none)."""
        ...


TURN_KINDS = frozenset({"pi.generation", "pi.tool", "pi.post_tools"})
"""Live non-background tasks of these kinds make their conversation busy (§2.7)."""

VIEW_HIDDEN_KINDS = TURN_KINDS | {"pi.collapse"}
"""Kinds rendered elsewhere in the view (``turn``, ``compaction``), never under ``tasks``."""


class Batch:
    """The kernel's side of one commit: what the builder wrote, recorded for persistence, the
    view and commit listeners. Builders never see it; they get the :class:`Transaction`."""

    def __init__(self) -> None:
        self.open = True
        self.membrane = Membrane()
        self.poison: ReadAfterWrite | None = None
        self.writes: list[Write] = []
        self.events: dict[int, list[dict[str, Any]]] = {}
        self.recorders: dict[DocRef, Recorder] = {}
        self.config_changed: dict[int, list[str]] = {}
        self.new_entries: list[Entry] = []
        self.changed_docs: set[DocRef] = set()
        self.created: list[int] = []
        self.tasks: dict[int, Task] = {}  # every task created or patched, as it ends up
        self.task_conversations: set[int] = set()
        self.inputs: dict[int, Input] = {}
        # entries built from payloads this batch validated and copied itself (by id()): storage
        # need not walk them again; their events share the payload until a view copies them
        self.prechecked: list[int] = []
        self.heads = False  # some appended entry carries a head (checked at commit end)
        self.shared_events: set[int] = set()

    def finish(self) -> list[Write]:
        """Close the builder surface; flush documents into ``doc`` writes and config changes
        into ``config.changed`` events. Returns the batch to persist."""
        self.open = False
        writes = list(self.writes)
        for ref, recorder in self.recorders.items():
            ops = recorder.take()
            if ops:
                self.changed_docs.add(ref)
                writes.append(DocWrite(ref=ref, ops=[list(op) for op in ops]))
        for cid, keys in self.config_changed.items():
            self.events.setdefault(cid, []).append({"type": "config.changed", "keys": keys})
        return writes

    @property
    def has_events(self) -> bool:
        """True when any conversation got an event."""
        return any(self.events.values())


class Transaction:
    """What a builder gets: reads, buffered writes, tracked documents, events."""

    def __init__(
        self,
        kernel: Kernel,
        authority: Authority,
        conversation_id: int | None,
        batch: Batch,
        ctx: Context,
        invoker: Invoker | None = None,
    ) -> None:
        self._kernel = kernel
        self._authority = authority
        self._conversation_id = conversation_id
        self._batch = batch
        self._ctx = ctx
        self._invoker = invoker
        self._closing: int | None = None
        self._entries: dict[int, Entry] = {}
        self._conversations: dict[int, Conversation] = {}
        self._inputs: dict[int, Input] = {}
        self._appended: set[int] = set()
        self._roots: dict[DocRef, TrackedDict] = {}

    @property
    def conversation_id(self) -> int | None:
        """The conversation this transaction is bound to (a handle's), if any."""
        return self._conversation_id

    def _check(self) -> None:
        if not self._batch.open:
            raise TransactionClosed("the transaction is closed: its builder has returned")

    def _require(self, authority: Authority, what: str) -> None:
        self._check()
        if self._authority is not authority:
            raise Forbidden(f"{what} requires {authority.value} authority")

    # -- conversations ---------------------------------------------------------------------
    def conversation(self, conversation_id: int) -> Conversation | None:
        """A conversation record (this batch's creations included). A record with a section
        seed is a private copy: the seed's JSON values are mutable, the kernel's are not."""
        self._check()
        found = self._conversations.get(conversation_id)
        if found is None:
            found = self._kernel.conversations.get(conversation_id)
        if found is not None and found.sections is not UNSET:
            found = clone(found)
        return found

    def _known(self, conversation_id: int) -> Conversation:
        found = self.conversation(conversation_id)
        if found is None:
            raise UnknownConversation(f"conversation {conversation_id} does not exist")
        return found

    def _bound(self) -> int:
        if self._conversation_id is None:
            raise Forbidden("this transaction is not bound to a conversation")
        return self._conversation_id

    async def create_conversation(
        self,
        *,
        fork: tuple[int, int] | None = None,
        rewindable: dict[str, Any] | None = None,
        owner: int | None = None,
        sticky: dict[str, Any] | None = None,
        sections: Sequence[SectionSeed | Mapping[str, Any]] | None = None,
    ) -> int:
        """Create a conversation: a root, or a fork of ``(conversation_id, at)``.

        A fork inherits the parent's rewindable document as of the commit that appended ``at``
        (plugin slices included), then ``rewindable`` overrides apply; its sticky document
        starts empty apart from the ``sticky`` config seed. ``at`` must be fork-visible from the
        parent and already committed.

        ``owner`` makes it an owned conversation: the record carries ``owner`` and the owner
        task's ``owns`` gains the new id in this same commit. A task invocation may only own
        conversations itself (``owner`` = its own task); core may name any live task. An owned
        conversation never inherits core rewindable config keys (D8 G5): only the seed sets
        them; plugin slices and kind keys are inherited.

        ``sections`` is the private section seed (§1.2, §4.11.7): ``{key, value, rendered}``
        items (:class:`~pico3.storage.records.SectionSeed` or plain mappings) that the
        conversation's canonical section fold starts from while it has no managed
        ``pi.system`` entry of its own (see :mod:`pico3.turn.system`). It is validated and
        deep-copied here (:class:`~pico3.model.section_seed.SectionSeedRejected` names the bad
        field; nothing is created) and never appears in a view. ``None`` means no seed.
        """
        self._check()
        if self._authority is Authority.TASK:
            self._task_scope(self._bound(), "create_conversation")
            assert self._invoker is not None
            if owner != self._invoker.task_id:
                raise Forbidden(
                    "create_conversation: a task creates only conversations it owns "
                    f"(owner={self._invoker.task_id})"
                )
            if fork is not None:  # the parent must be in the task's subtree (§2.3)
                self._task_scope(fork[0], "create_conversation(fork)")
        elif owner is not None and self._authority is not Authority.CORE:
            raise Forbidden("create_conversation: owner requires task or core authority")
        owner_task = None
        if owner is not None:
            owner_task = self._task_record(owner)
            if owner_task is None or owner_task.status == "terminal":
                raise ValueError(f"create_conversation: owner task {owner} is not live")
        parent: Parent | Any = UNSET
        base: dict[str, Any] = {}
        if fork is not None:
            source, at = fork
            self._known(source)
            if at in self._entries:
                raise ReadAfterWrite("cannot fork at an entry appended in this same commit")
            if not await self._visible(source, at):
                raise ValueError(f"entry {at} is not fork-visible from conversation {source}")
            base = await self.rewindable_as_of(source, at)
            parent = Parent(conversation_id=source, at=at)
            if owner is not None:  # D8 G5: owned children never inherit core config
                keys = self._kernel.config_keys
                base = {k: v for k, v in base.items() if not (k in keys and keys[k].core)}
        if rewindable is not None:
            base.update(self._check_rewindable_seed(rewindable))
        sticky_seed = {} if sticky is None else self._check_seed(sticky, "sticky")
        section_seed = UNSET if sections is None else check_section_seed(sections)
        cid = self._kernel.mint_id()
        record = Conversation(
            id=cid,
            parent=parent,
            owner=UNSET if owner is None else owner,
            sections=section_seed,
        )
        self._conversations[cid] = record
        self._batch.created.append(cid)
        self._batch.writes.append(ConversationWrite(conversation=record))
        if owner_task is not None:
            self._patch(TaskPatch(id=owner_task.id, owns=[*owner_task.owns, cid]))
        for ref in (DocRef.rewindable(cid), DocRef.sticky(cid)):
            self._kernel.documents.put_new(ref)
        if base:
            root = self._doc_root(DocRef.rewindable(cid))
            for key, value in base.items():
                root[key] = value
        if sticky_seed:
            root = self._doc_root(DocRef.sticky(cid))
            for key, value in sticky_seed.items():
                root[key] = value
        return cid

    def _check_rewindable_seed(self, seed: dict[str, Any]) -> dict[str, Any]:
        return self._check_seed(seed, "rewindable")

    def _check_seed(
        self, seed: dict[str, Any], doc: Literal["rewindable", "sticky"]
    ) -> dict[str, Any]:
        if not isinstance(seed, dict):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigRejected(f"a {doc} seed must be a mapping of config key -> value")
        out: dict[str, Any] = {}
        for name, value in seed.items():
            key = self._kernel.config_keys.get(name)
            if key is None or key.doc != doc:
                raise ConfigRejected(f"config.{name}: not a {doc} config key")
            out[name] = check_value(key, value)
        return out

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
        reads; copy before changing anything)."""
        self._scan_guard(conversation_id, "context")
        if at is not None and not await self._visible(conversation_id, at):
            raise ValueError(f"entry {at} is not fork-visible from conversation {conversation_id}")
        return derive_context(await self._kernel.shared_transcript(conversation_id, at, self._ctx))

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

        Request keys are scoped per conversation (D8 G4); the lookup is a committed read that
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

    # -- documents, config, namespaces -----------------------------------------------------
    def document(self, doc: SliceDoc, conversation_id: int | None = None) -> TrackedDict:
        """Core: the tracked root of a raw document (``inbox``, ``turn``, ``tasks`` live here).

        ``conversation_id`` defaults to the bound conversation; the session document has none.
        """
        self._require(Authority.CORE, "raw document access")
        if doc == "session":
            return self._doc_root(DocRef.session())
        cid = self._bound() if conversation_id is None else conversation_id
        self._known(cid)
        return self._doc_root(DocRef.rewindable(cid) if doc == "rewindable" else DocRef.sticky(cid))

    def _doc_root(self, ref: DocRef) -> TrackedDict:
        """The tracked root of a loaded document (kernel-internal)."""
        root = self._roots.get(ref)
        if root is None:
            raw = self._kernel.documents.get(ref)
            if raw is None:
                raise RuntimeError(
                    f"documents of conversation {ref.conversation_id} are not loaded in this "
                    "transaction; call `await tx.load(conversation_id)` first"
                )
            recorder = Recorder(self._batch.membrane)
            self._batch.recorders[ref] = recorder
            root = recorder.root(raw)
            self._roots[ref] = root
        return root

    def _slice_root(self, doc: SliceDoc) -> TrackedDict:
        """The root of the bound conversation's ``doc`` (or the session document); internal to
        namespace slices and snapshots."""
        self._check()
        if doc == "session":
            return self._doc_root(DocRef.session())
        cid = self._bound()
        ref = DocRef.rewindable(cid) if doc == "rewindable" else DocRef.sticky(cid)
        return self._doc_root(ref)

    def require_namespace(self, token: Namespace) -> Namespace:
        """Reject a stale namespace token."""
        self._check()
        return self._kernel.namespaces.require(token)

    def plugins(self, token: Namespace) -> SliceView:
        """The namespace's merged, tracked slice for this transaction's conversation."""
        self._check()
        return SliceView(self, self.require_namespace(token))

    def emit(self, token: Namespace, name: str, data: Any = None) -> None:
        """Attach ``{"type": "plugin.<ns>.<name>", "data": data}`` to this commit's envelope."""
        self._check()
        self.require_namespace(token)
        check_name(name, "event name")
        try:
            payload = copy_json(data, ("data",))
        except JsonError as exc:
            raise ValueError(f"event {token.name}.{name}: {exc}") from None
        cid = self._bound()
        event = {"type": f"plugin.{token.name}.{name}", "data": payload}
        self._batch.events.setdefault(cid, []).append(event)

    def emit_event(self, conversation_id: int, event: dict[str, Any]) -> None:
        """Core: attach a named kernel event (``{"type": "turn.started", ...}``) to the envelope
        of ``conversation_id`` for this commit."""
        self._require(Authority.CORE, "emit_event")
        self._known(conversation_id)
        kind = event.get("type") if isinstance(event, dict) else None
        if not isinstance(kind, str) or not kind or kind.startswith("plugin."):
            raise ValueError(f"a core event needs a non-plugin 'type', got {kind!r}")
        try:
            payload = copy_json(event, ("event",))
        except JsonError as exc:
            raise ValueError(str(exc)) from None
        self._batch.events.setdefault(conversation_id, []).append(payload)

    def config(self, conversation_id: int) -> ConfigFacade:
        """Get, set and reset configuration of a conversation (one event per commit)."""
        self._check()
        self._known(conversation_id)
        if self._kernel.documents.get(DocRef.rewindable(conversation_id)) is None:
            raise RuntimeError(
                f"documents of conversation {conversation_id} are not loaded in this "
                "transaction; call `await tx.load(conversation_id)` first"
            )
        return ConfigFacade(self, conversation_id)

    async def load(self, conversation_id: int) -> None:
        """Load another conversation's documents so ``config``/``write`` can reach them."""
        self._check()
        if conversation_id in self._conversations:
            return  # created in this batch: its documents start empty and are already cached
        self._known(conversation_id)
        await self._kernel.conversation_docs(conversation_id, self._ctx)

    def snapshot(self, doc: SliceDoc) -> dict[str, Any]:
        """A plain deep copy of the bound conversation's document (or the session's), with
        declared defaults filled in where nothing is stored: config keys that live in ``doc``
        and the keys of live namespaces. Nothing is seeded; this is a read."""
        value = self._slice_root(doc).to_plain()
        for name, key in self._kernel.config_keys.items():
            if key.doc == doc and name not in value and key.default is not ABSENT:
                value[name] = key.default_copy()
        for token in self._kernel.namespaces.live():
            declared = token.defaults.get(doc)
            if not declared:
                continue
            plugins = value.setdefault("plugins", {})
            stored = plugins.setdefault(token.name, {})
            for name, default in declared.items():
                if name not in stored:
                    stored[name] = copy_json(default)
        return value

    async def rewindable_as_of(self, conversation_id: int, at: int) -> dict[str, Any]:
        """The rewindable document as of the commit that appended entry ``at``."""
        self._check()
        self._known(conversation_id)
        return await self._kernel.rewindable_as_of(conversation_id, at, self._ctx)

    def _mark_config(self, conversation_id: int, keys: list[str]) -> None:
        changed = self._batch.config_changed.setdefault(conversation_id, [])
        for key in keys:
            if key not in changed:
                changed.append(key)

    # -- tasks -----------------------------------------------------------------------------
    @property
    def invoker(self) -> Invoker | None:
        """The invocation token this transaction runs under (task commits), if any."""
        return self._invoker

    def _no_task_config(self) -> None:
        if self._authority is Authority.TASK:
            raise Forbidden("ordinary tasks read config but cannot write it")

    def _task_scope(self, conversation_id: int, what: str) -> None:
        """TASK authority reaches its own conversation and the conversations it owns
        (recursively); an abort invocation may not write at all."""
        if self._authority is not Authority.TASK:
            return
        invoker = self._invoker
        assert invoker is not None
        if invoker.mode == "abort":
            raise Forbidden(f"{what}: an abort invocation may not create or write")
        if not self.in_subtree(invoker.task_id, conversation_id):
            raise Forbidden(
                f"{what}: conversation {conversation_id} is outside task {invoker.task_id}'s "
                "conversation and owned subtree"
            )

    def in_subtree(self, task_id: int, conversation_id: int) -> bool:
        """True when ``conversation_id`` is task ``task_id``'s own conversation or one it owns
        (directly, or through tasks of owned conversations).

        The owner chain of the conversation must reach ``task_id`` itself: a conversation owned
        by a *sibling* task (another task in the same conversation) is outside the subtree.
        """
        own = self._task_record(task_id)
        if own is None:
            return False
        if conversation_id == own.conversation_id:
            return True
        seen: set[int] = set()
        current = self.conversation(conversation_id)
        while current is not None and current.id not in seen:
            seen.add(current.id)
            if current.owner is UNSET:
                return False
            if current.owner == task_id:
                return True
            owner = self._task_record(current.owner)
            if owner is None:
                return False
            current = self.conversation(owner.conversation_id)
        return False

    _in_subtree = in_subtree  # old private name (kept for callers written before it went public)

    def _task_record(self, task_id: int) -> Task | None:
        found = self._batch.tasks.get(task_id)
        return found if found is not None else self._kernel.task_index.get(task_id)

    async def task(self, task_id: int) -> Task | None:
        """One task record (this batch's creations and patches included)."""
        self._check()
        found = self._task_record(task_id)
        if found is None:
            found = await self._kernel.storage.task(task_id, self._ctx)
        return found

    async def tasks(
        self,
        conversation_id: int | None = None,
        *,
        status: Sequence[str] | None = None,
        kind: str | None = None,
    ) -> list[Task]:
        """Committed tasks in creation order (a scan: it rejects after any task write in this
        batch with :class:`ReadAfterWrite`, which poisons the transaction)."""
        self._check()
        if self._batch.tasks:
            error = ReadAfterWrite("tasks() after a task create/patch in the same commit")
            self._batch.poison = error
            raise error
        scan = TaskScan(
            conversation_id=conversation_id,
            status=None if status is None else frozenset(status),
            kind=kind,
        )
        return await self._kernel.storage.scan_tasks(scan, self._ctx)

    def create_task(
        self,
        kind: object,
        input: Any = None,
        *,
        after: Sequence[int] = (),
        background: bool = False,
        conversation_id: int | None = None,
    ) -> int:
        """Create a task of ``kind`` (the registered kind object; core callers may also pass a
        core kind's name) in the bound conversation (or ``conversation_id``); returns its id.

        ``after`` lists tasks that must be terminal (any outcome) before this one starts; they
        must exist. The task is dispatched by the scheduler after this commit.
        """
        self._check()
        lookup = self._kernel.kinds
        if lookup is None:
            raise Forbidden("create_task: this session has no task layer")
        name = lookup.resolve(kind, core=self._authority is Authority.CORE)
        cid = self._bound() if conversation_id is None else conversation_id
        self._known(cid)
        self._task_scope(cid, "create_task")
        ordinary_builtin = name in ("pi.job", "pi.plugin")
        if (
            name.startswith("pi.")
            and self._authority is not Authority.CORE
            and not ordinary_builtin
        ):
            raise Forbidden(f"create_task: core kind {name!r} requires core authority")
        try:
            payload = copy_json(input, ("task", "input"))
        except JsonError as exc:
            raise ValueError(f"create_task({name}): {exc}") from None
        deps: list[int] = []
        for dep in after:
            exists = type(dep) is int and (
                self._task_record(dep) is not None or dep in self._kernel.known_task_ids
            )
            if not exists:
                raise ValueError(f"create_task({name}): after target {dep!r} does not exist")
            if dep not in deps:
                deps.append(dep)
        task_id = self._kernel.mint_id()
        record = Task(
            id=task_id,
            conversation_id=cid,
            kind=name,
            input=payload,
            status="pending",
            after=deps,
            background=True if background else UNSET,
        )
        self._batch.tasks[task_id] = record
        self._batch.task_conversations.add(cid)
        self._batch.writes.append(TaskWrite(task=record))
        initial = lookup.initial_slot(name, payload)
        if initial is not None and name != "pi.tool":
            tasks = self._sticky_tasks(cid)
            tasks[str(task_id)] = initial
        if name not in VIEW_HIDDEN_KINDS:
            event: dict[str, Any] = {"type": "task.started", "taskId": task_id, "kind": name}
            if background:
                event["background"] = True
            self._batch.events.setdefault(cid, []).append(event)
        return task_id

    def _sticky_tasks(self, conversation_id: int) -> TrackedDict:
        sticky = self._doc_root(DocRef.sticky(conversation_id))
        if "tasks" not in sticky:
            sticky["tasks"] = {}
        return sticky["tasks"]

    def slot(self, task: Task | int) -> TrackedDict:
        """The task's slot: working state that dies with the task (progress, memos).

        Ordinary tasks live at ``sticky.tasks["<id>"]`` (created lazily from the kind's
        ``slot(input)`` or ``{}``); ``pi.tool`` tasks at ``sticky.turn.tools[input.index]``.
        TASK authority reaches only its own task; hosts have no slot access.
        """
        self._check()
        task_id = task if isinstance(task, int) else task.id
        if self._authority is Authority.HOST:
            raise Forbidden("slot(): hosts cannot reach task slots")
        if self._authority is Authority.TASK:
            assert self._invoker is not None
            if task_id != self._invoker.task_id:
                raise Forbidden(f"slot(): task {self._invoker.task_id} may reach only its own slot")
        record = self._task_record(task_id)
        if record is None or record.status == "terminal":
            raise Forbidden(f"slot(): task {task_id} is not live")
        sticky = self._doc_root(DocRef.sticky(record.conversation_id))
        if record.kind == "pi.tool":
            index = record.input["index"] if isinstance(record.input, dict) else None
            turn = sticky.get("turn")
            tools = turn["tools"] if turn is not None and "tools" in turn else None
            if type(index) is not int or tools is None or not 0 <= index < len(tools):
                raise Forbidden(f"slot(): tool task {task_id} has no slot in turn.tools")
            return tools[index]
        tasks = self._sticky_tasks(record.conversation_id)
        key = str(task_id)
        if key not in tasks:
            lookup = self._kernel.kinds
            initial = None if lookup is None else lookup.initial_slot(record.kind, record.input)
            tasks[key] = {} if initial is None else initial
        return tasks[key]

    def checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Replace the own task's checkpoint (TASK authority, run mode). The kind's recovery
        program counter: ``{"phase": name, ...}``, strict JSON."""
        self._check()
        if self._invoker is None or self._authority is Authority.HOST:
            raise Forbidden("checkpoint(): only a task invocation checkpoints (core: set_task)")
        if self._invoker.mode != "run":
            raise Forbidden("checkpoint(): an abort invocation may not checkpoint")
        self._put_checkpoint(self._invoker.task_id, checkpoint)

    def _put_checkpoint(self, task_id: int, checkpoint: Any) -> None:
        if type(checkpoint) is not dict or type(checkpoint.get("phase")) is not str:
            raise ValueError(
                f"a checkpoint must be a JSON object with a str 'phase', got {checkpoint!r}"
            )
        try:
            value = copy_json(checkpoint, ("checkpoint",))
        except JsonError as exc:
            raise ValueError(str(exc)) from None
        self._patch(TaskPatch(id=task_id, checkpoint=value))

    def _patch(self, patch: TaskPatch) -> Task:
        from pico3.storage._tables import patched

        record = self._task_record(patch.id)
        if record is None:
            raise ValueError(f"task {patch.id} is not live in this session")
        if record.status == "terminal":
            raise ValueError(f"task {patch.id} is terminal")
        updated = patched(record, patch)
        self._batch.tasks[patch.id] = updated
        self._batch.task_conversations.add(record.conversation_id)
        self._batch.writes.append(TaskPatchWrite(patch=patch))
        return updated

    def set_task(self, patch: TaskPatch) -> Task:
        """Core: patch a live task record (status, checkpoint, owns). Terminal patches go
        through :meth:`finish_task`."""
        self._require(Authority.CORE, "set_task")
        if patch.outcome is not UNSET or patch.status == "terminal":
            raise ValueError("set_task: use finish_task() to terminalize")
        return self._patch(patch)

    def mark_task(self, task_id: int) -> bool:
        """Core: set the durable abort mark (idempotent). False when the task is terminal or
        already marked."""
        self._require(Authority.CORE, "mark_task")
        record = self._task_record(task_id)
        if record is None or record.status == "terminal" or record.abort is True:
            return False
        self._patch(TaskPatch(id=task_id, abort=True))
        return True

    def finish_task(self, task_id: int, outcome: dict[str, Any]) -> Task:
        """Core: terminalize a task with ``outcome`` (``{"status": ..., ...}``), retire its slot
        in the same commit and emit ``task.ended`` for kinds shown under ``tasks``."""
        self._require(Authority.CORE, "finish_task")
        return self._finish(task_id, outcome)

    def _finish(self, task_id: int, outcome: dict[str, Any]) -> Task:
        status = outcome.get("status") if type(outcome) is dict else None
        if status not in ("completed", "failed", "aborted", "orphaned", "faulted"):
            raise ValueError(f"invalid task outcome {outcome!r}")
        try:
            value = copy_json(outcome, ("outcome",))
        except JsonError as exc:
            raise ValueError(str(exc)) from None
        record = self._task_record(task_id)
        if record is None:
            raise ValueError(f"task {task_id} is not live in this session")
        updated = self._patch(TaskPatch(id=task_id, status="terminal", outcome=value))
        if record.kind != "pi.tool":
            sticky = self._doc_root(DocRef.sticky(record.conversation_id))
            if "tasks" in sticky and str(task_id) in sticky["tasks"]:
                del sticky["tasks"][str(task_id)]
        if record.kind not in VIEW_HIDDEN_KINDS:
            event = {
                "type": "task.ended",
                "taskId": task_id,
                "kind": record.kind,
                "outcome": status,
            }
            self._batch.events.setdefault(record.conversation_id, []).append(event)
        return updated

    def set_closing(self, task_id: int | None) -> None:
        """Core: the task whose terminal closure runs in this commit counts as gone for
        prospective busy (§2.7)."""
        self._require(Authority.CORE, "set_closing")
        self._closing = task_id

    def live_tasks(self, conversation_id: int) -> list[Task]:
        """Live tasks of a conversation as of this batch (committed index plus overlay); a
        direct read, not a scan."""
        self._check()
        out: dict[int, Task] = {
            t.id: t
            for t in self._kernel.task_index.values()
            if t.conversation_id == conversation_id
        }
        for t in self._batch.tasks.values():
            if t.conversation_id == conversation_id:
                out[t.id] = t
        return [t for t in sorted(out.values(), key=lambda t: t.id) if t.status != "terminal"]

    def is_busy(self, conversation_id: int) -> bool:
        """Prospective busy of a conversation judged against this batch (§2.7)."""
        self._check()
        closing = self._closing
        for source in (self._kernel.task_index, self._batch.tasks):
            for t in source.values():
                if (
                    t.conversation_id == conversation_id
                    and t.kind in TURN_KINDS
                    and t.background is not True
                    and t.id != closing
                    and t.status != "terminal"
                    and self._task_record(t.id) is t  # the batch's version wins
                ):
                    return True
        return False


def _kind_name(kind: EntryKind | str) -> str:
    if isinstance(kind, EntryKind):
        return kind.kind
    if isinstance(kind, str):
        return kind
    raise EntryRejected(f"entry kind must be a str or an EntryKind, got {type(kind).__name__}")


class ConfigFacade:
    """``tx.config(cid)``: reads resolve defaults; writes are validated and routed per key."""

    __slots__ = ("_cid", "_tx")

    def __init__(self, tx: Transaction, conversation_id: int) -> None:
        self._tx = tx
        self._cid = conversation_id

    def _key(self, name: str) -> ConfigKey:
        key = self._tx._kernel.config_keys.get(name)  # pyright: ignore[reportPrivateUsage]
        if key is None:
            raise ConfigRejected(f"config.{name}: unknown key")
        return key

    def _root(self, key: ConfigKey) -> TrackedDict:
        ref = DocRef.rewindable(self._cid) if key.doc == "rewindable" else DocRef.sticky(self._cid)
        return self._tx._doc_root(ref)

    def get(self, name: str) -> Any:
        """The resolved value (stored by presence, else the default; unset ``model``: None)."""
        self._tx._check()  # pyright: ignore[reportPrivateUsage]
        key = self._key(name)
        root = self._root(key)
        if name in root:
            value = root[name]
            return value.to_plain() if hasattr(value, "to_plain") else value
        return None if key.default is ABSENT else key.default_copy()

    def resolved(self) -> dict[str, Any]:
        """Every declared key, resolved."""
        self._tx._check()  # pyright: ignore[reportPrivateUsage]
        kernel = self._tx._kernel  # pyright: ignore[reportPrivateUsage]
        rewindable = self._tx._doc_root(DocRef.rewindable(self._cid)).to_plain()
        sticky = self._tx._doc_root(DocRef.sticky(self._cid)).to_plain()
        return resolve_config(kernel.config_keys, rewindable, sticky)

    def set(self, patch: dict[str, Any]) -> None:
        """Validate every key first, then store them all (nothing is half-applied)."""
        tx = self._tx
        tx._check()  # pyright: ignore[reportPrivateUsage]
        tx._no_task_config()  # pyright: ignore[reportPrivateUsage]
        if not isinstance(patch, dict) or not patch:
            raise ConfigRejected("config.set needs a non-empty mapping of key -> value")
        staged: list[tuple[ConfigKey, Any]] = []
        for name, value in patch.items():
            key = self._key(name)
            if value is ABSENT:
                raise ConfigRejected(f"config.{name}: cannot set an absent value; use reset")
            staged.append((key, check_value(key, value)))
        for key, value in staged:
            self._root(key)[key.name] = value
        tx._mark_config(self._cid, [key.name for key, _ in staged])  # pyright: ignore[reportPrivateUsage]

    def reset(self, names: Sequence[str]) -> None:
        """Delete stored overrides; reads then resolve the declared default."""
        tx = self._tx
        tx._check()  # pyright: ignore[reportPrivateUsage]
        tx._no_task_config()  # pyright: ignore[reportPrivateUsage]
        if isinstance(names, str):
            raise ConfigRejected("config.reset takes a list of keys")
        keys = [self._key(name) for name in names]
        changed: list[str] = []
        for key in keys:
            root = self._root(key)
            if key.name in root:
                del root[key.name]
                changed.append(key.name)
        if changed:
            tx._mark_config(self._cid, changed)  # pyright: ignore[reportPrivateUsage]
