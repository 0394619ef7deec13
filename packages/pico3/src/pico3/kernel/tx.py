"""Transactions: what a builder can do inside one commit, checked on every call.

A :class:`Transaction` is handed to a builder by :meth:`Kernel.commit`. It buffers writes
(synchronously), answers reads (asynchronously when they go to storage) and hands out tracked
proxies of documents. Its *authority* decides which methods work: one implementation, checked
at runtime on every method, so a caller that casts past the types still cannot reach core
operations (pico3-spec §2.3). This issue provides the host view (``HOST``); core and task
invokers (``CORE``; tasks next) use the same object.

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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

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
    Write,
)

if TYPE_CHECKING:
    from pico3.kernel.commit import Kernel

__all__ = ["Authority", "Batch", "ConfigFacade", "Transaction"]

_PAGE = 256


class Authority(enum.Enum):
    """Who is committing. Core authority comes only from the kernel's own invoker objects."""

    HOST = "host"
    CORE = "core"


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
    ) -> None:
        self._kernel = kernel
        self._authority = authority
        self._conversation_id = conversation_id
        self._batch = batch
        self._ctx = ctx
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
        """A conversation record (this batch's creations included)."""
        self._check()
        found = self._conversations.get(conversation_id)
        return found if found is not None else self._kernel.conversations.get(conversation_id)

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
        self, *, fork: tuple[int, int] | None = None, rewindable: dict[str, Any] | None = None
    ) -> int:
        """Create a conversation: a root, or a fork of ``(conversation_id, at)``.

        A fork inherits the parent's rewindable document as of the commit that appended ``at``
        (plugin slices included), then ``rewindable`` overrides apply; its sticky document
        starts empty. ``at`` must be fork-visible from the parent and already committed.
        """
        self._check()
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
        if rewindable is not None:
            base.update(self._check_rewindable_seed(rewindable))
        cid = self._kernel.mint_id()
        record = Conversation(id=cid, parent=parent)
        self._conversations[cid] = record
        self._batch.created.append(cid)
        self._batch.writes.append(ConversationWrite(conversation=record))
        for ref in (DocRef.rewindable(cid), DocRef.sticky(cid)):
            self._kernel.documents.put_new(ref)
        if base:
            root = self._doc_root(DocRef.rewindable(cid))
            for key, value in base.items():
                root[key] = value
        return cid

    def _check_rewindable_seed(self, seed: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(seed, dict):
            raise ConfigRejected("a rewindable seed must be a mapping of config key -> value")
        out: dict[str, Any] = {}
        for name, value in seed.items():
            key = self._kernel.config_keys.get(name)
            if key is None or key.doc != "rewindable":
                raise ConfigRejected(f"config.{name}: not a rewindable config key")
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
        if found is None:
            found = (await self._kernel.storage.entries([entry_id], self._ctx)).get(entry_id)
        if found is None or (kind is not None and found.kind != _kind_name(kind)):
            return None
        return found

    async def entries(self, ids: Sequence[int]) -> dict[int, Entry]:
        """The existing entries among ``ids``, by id (this batch's appends included)."""
        self._check()
        out = {i: self._entries[i] for i in ids if i in self._entries}
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
        self._batch.new_entries.append(entry)
        self._batch.writes.append(EntryWrite(entry=entry))
        shape = copy_json(entry_json(entry))
        events = self._batch.events.setdefault(conversation_id, [])
        events.append({"type": "entry.added", "entry": shape})
        if head is not UNSET:
            events.append({"type": "head.moved", "entry": shape})
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
