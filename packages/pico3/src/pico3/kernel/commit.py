"""The kernel: one session's line, its commit lifecycle and its in-memory indexes.

:meth:`Kernel.commit` is the only way anything changes (docs/design/harness.md#commits):

1. check ``ctx`` before queueing, and refuse a nested call (:class:`NestedLineOperation`);
2. enter the line; check the session is usable (else :class:`Closed` / :class:`Faulted`);
   re-check ``ctx``;
3. preload the documents the builder may touch and create one :class:`Transaction` with the
   caller's authority;
4. run ``builder(tx, line_ctx)`` (a coroutine result is awaited); writes are synchronous and
   buffered;
5. close the transaction; a poisoned one raises now; entries carrying a ``head`` are checked
   against the head rules (:mod:`pico3.kernel.heads`: forward only, never inside a tool-call
   exchange);
6. flush touched documents into ``doc`` writes;
7. when there are writes or events, call ``Storage.commit`` exactly once, shielded from
   cancellation (or its synchronous form, when the backend has one and needs no await). If
   storage fails, the session **faults**: every later operation raises :class:`Faulted`;
8. on the line: update indexes, fold the commit into watched views and assemble envelopes;
   revoke every proxy (the membrane);
9. off the line: deliver envelopes and call commit listeners. Their errors go to ``on_report``
   and never turn a persisted commit into a failure.

With a backend's group commit (``commit_deferred``, :func:`~pico3.storage.base.deferred_commit`)
step 7 publishes the batch in memory and queues its durable write; step 9 waits for it off the
line, then delivers every queued batch through it in seq order (docs/design/harness.md#commits:
nothing of a batch is reported before it is durable).

Why one module: it is the commit lifecycle itself (line, builder, persist, fold, deliver) and the
reads the builders and views make through it; the ordering rules above (what runs on the line,
what waits for durability, in which order envelopes go out) only hold when read together.

A builder failure (or a rejected write) before step 7 discards the batch and evicts every
document the transaction touched, so its in-place mutations vanish; the session continues.
"""

from __future__ import annotations

import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

import anyio

from chord.context import Context, without_abort_signal
from chord.json import copy_json
from pico3.kernel.core import Describe, Reporter
from pico3.kernel.documents import DocumentCache, fold_log
from pico3.kernel.errors import Closed, Faulted, Forbidden, UnknownConversation
from pico3.kernel.heads import check_heads
from pico3.kernel.line import Line
from pico3.kernel.namespaces import NamespaceRegistry
from pico3.kernel.tx import Authority, Batch, Invoker, KindLookup, Transaction
from pico3.kernel.tx.tasks import TaskOps
from pico3.kernel.view import PendingEnvelope, ViewRegistry
from pico3.session_data.config import CORE_CONFIG, ConfigKey
from pico3.session_data.context import ContextBuilder, DerivedContext
from pico3.storage.base import (
    PRECHECKED,
    InvalidBatch,
    Storage,
    deferred_commit,
    has_task,
    sync_commit,
)
from pico3.storage.records import (
    UNSET,
    Conversation,
    ConversationWrite,
    DocRef,
    DocWrite,
    Entry,
    EntryScan,
    Task,
    TaskScan,
)

__all__ = ["Builder", "BusyProbe", "CommitListener", "Describe", "Kernel", "Reporter"]

T = TypeVar("T")
Builder = Callable[[Transaction, Context], "T | Awaitable[T]"]
CommitListener = Callable[[Batch], None]
BusyProbe = Callable[[TaskOps, int], bool]

_log = logging.getLogger("pico3.kernel")
_PAGE = 256
_LIVE = frozenset({"pending", "running"})
_NO_DELIVERIES: list[PendingEnvelope] = []
COMPACT_STICKY_AFTER = 24
"""A conversation's sticky op log is compacted at the commit that ends a turn once it holds at
least this many commits since its last base (a streamed answer's deltas are many commits; a
short turn is about six)..."""
COMPACT_STICKY_CHARS = 16_384
"""...or once the ops it holds since its last base carry this many characters of text: a fast
stream flushes its deltas in few, large commits (a 100 KB answer in about a dozen), and they
would stay in the log beside the entry that holds the same text."""


def _text_size(value: Any) -> int:
    """About how many characters ``value`` (JSON) takes: its strings' lengths, eight for any
    other scalar."""
    kind = type(value)
    if kind is str:
        return len(value)
    if kind is list:
        return sum(_text_size(item) for item in value)
    if kind is dict:
        return sum(len(key) + _text_size(item) for key, item in value.items())
    return 8


def _default_report(error: BaseException) -> None:
    _log.error("pico3 reported an error", exc_info=error)


class Kernel:
    """One session over one storage object. Create with :meth:`open`."""

    def __init__(self, storage: Storage, on_report: Reporter | None = None) -> None:
        self.storage = storage
        self.line = Line()
        self.documents = DocumentCache(storage)
        self.namespaces = NamespaceRegistry()
        self.config_keys: dict[str, ConfigKey] = dict(CORE_CONFIG)
        self.conversations: dict[int, Conversation] = {}
        self.views = ViewRegistry(self)
        self.report: Reporter = on_report or _default_report
        self._listeners: list[CommitListener] = []
        self._fault_listeners: list[Callable[[Faulted], None]] = []
        self._busy: BusyProbe | None = None
        # tasks: live records (and the owners of conversations, for subtree checks), the
        # task layer's kind lookup and status projection. Whether an id is a task the storage
        # answers (has_task); only a backend that cannot has the kernel keep every id.
        self.task_index: dict[int, Task] = {}
        self._has_task = has_task(storage)
        self._task_ids: set[int] | None = set() if self._has_task is None else None
        self.kinds: KindLookup | None = None
        self.describe: Describe | None = None
        self._closed = False
        self._fault: BaseException | None = None
        self._commit_now = sync_commit(storage)
        self._deferred = deferred_commit(storage)
        # Group commit (the backend's commit_deferred): batches published in memory whose
        # durable write is queued, in seq order, with what to deliver once each is durable.
        self._acks: deque[tuple[int, Batch, list[PendingEnvelope]]] = deque()
        # The model context's transcript per conversation, read-only and shared (see
        # shared_transcript): entries are append-only, so a later read adds only the new tail.
        self._transcripts: dict[int, tuple[int, list[Entry]]] = {}
        # The derived context of each cached transcript, extended as the transcript grows.
        self._contexts: dict[int, ContextBuilder] = {}
        # Sticky commits since the document's last base, per sticky ref (see _compact_sticky).
        self._sticky_ops: dict[DocRef, tuple[int, int]] = {}  # commits, text since the base

    @classmethod
    async def open(
        cls, storage: Storage, ctx: Context, on_report: Reporter | None = None
    ) -> Kernel:
        """Claim ``storage``, load conversation records and create the root when empty."""
        ctx.raise_if_cancelled()
        kernel = cls(storage, on_report)
        await storage.open(ctx)
        try:
            for record in await storage.conversations(ctx):
                kernel.conversations[record.id] = record
            # only the live tasks are read as records; a long session's many terminal ones
            # stay in storage (an ``after`` target asks it), unless the backend cannot answer
            known = kernel._task_ids
            scan = TaskScan() if known is not None else TaskScan(status=_LIVE)
            for task in await storage.scan_tasks(scan, ctx):
                if known is not None:
                    known.add(task.id)
                if task.status != "terminal":
                    kernel.task_index[task.id] = task
            for record in kernel.conversations.values():
                owner = record.owner
                if owner is not UNSET and owner not in kernel.task_index:
                    found = await storage.task(owner, ctx)
                    if found is not None:
                        kernel.task_index[owner] = found
            if not kernel.conversations:
                await kernel.commit(_create_root, ctx, authority=Authority.CORE)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await storage.close(without_abort_signal(ctx))
            raise
        return kernel

    # -- state -----------------------------------------------------------------------------
    def check_usable(self) -> None:
        """Raise :class:`Faulted` or :class:`Closed` when the session cannot be used."""
        if self._fault is not None:
            raise Faulted(f"the session faulted after a storage failure: {self._fault}")
        if self._closed:
            raise Closed("the session is closed")

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed

    @property
    def faulted(self) -> bool:
        """True after a storage commit failed."""
        return self._fault is not None

    def mint_id(self) -> int:
        """A fresh id from the session's one counter."""
        return self.storage.mint_id()

    def task_exists(self, task_id: int) -> bool:
        """Whether ``task_id`` is a committed task of this session, live or terminal."""
        if task_id in self.task_index:
            return True
        known = self._task_ids
        if known is not None:
            return task_id in known
        assert self._has_task is not None
        return self._has_task(task_id)

    def busy(self, tx: TaskOps, conversation_id: int) -> bool:
        """Prospective busy (docs/design/turn.md#busy): a live non-background turn task in the conversation, judged
        against committed state plus ``tx``'s batch (see :meth:`Transaction.is_busy`)."""
        if self._busy is not None:
            return self._busy(tx, conversation_id)
        return tx.is_busy(conversation_id)

    def set_busy_probe(self, probe: BusyProbe | None) -> None:
        """Replace the busy judgement (by default :meth:`Transaction.is_busy`); tests use it to
        make a conversation busy without running a turn."""
        self._busy = probe

    def add_fault_listener(self, listener: Callable[[Faulted], None]) -> None:
        """Call ``listener(error)`` once when the session faults (waiters reject with it)."""
        self._fault_listeners.append(listener)

    def add_commit_listener(self, listener: CommitListener) -> Callable[[], None]:
        """Call ``listener(batch)`` off the line after every persisted commit (the scheduler's
        kick and waiter resolution hook in here); returns a remover."""
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    # -- the commit lifecycle ------------------------------------------------------------
    async def commit(
        self,
        builder: Callable[[Transaction, Context], Any],
        ctx: Context,
        *,
        conversation_id: int | None = None,
        authority: Authority = Authority.HOST,
        invoker: Invoker | None = None,
        durable: bool = True,
    ) -> Any:
        """Run ``builder`` on the line and persist what it wrote as one atomic batch.

        Task commits (``authority=TASK``, or core kinds' commits with an ``invoker``) are
        checked on the line before the builder runs: the invocation token must be alive, the
        task live and, in run mode, not marked; otherwise :class:`Forbidden`.

        ``durable=False`` (with a backend's group commit; otherwise the commit is durable on
        return anyway) returns once the batch is published on the line, without waiting for
        its durable write, and a read (a builder that writes nothing) does not wait for the
        queued batches it may have read: the next commit that waits writes them with its own,
        in one write per file where they allow it (docs/design/storage.md#publication-point). The
        caller must not report such a batch, or act outside the session on what it read, until
        a later commit of its own returned durable: the batch's envelopes and commit listeners
        wait for that. A batch whose sticky log is compacted waits all the same.
        """
        ctx.raise_if_cancelled()
        line = self.line
        await line.acquire(ctx)  # refuses a nested call before queueing
        try:
            self.check_usable()
            ctx.raise_if_cancelled()
            if conversation_id is not None and conversation_id not in self.conversations:
                raise UnknownConversation(f"conversation {conversation_id} does not exist")
            if authority is Authority.TASK and invoker is None:
                raise Forbidden("a task commit needs an invocation token")
            if invoker is not None:
                self._check_invoker(invoker)
            if not self.documents.ready(conversation_id):
                await self._preload(conversation_id, ctx)
            batch = Batch()
            tx = Transaction(self, authority, conversation_id, batch, ctx, invoker)
            try:
                line_ctx, token = line.enter_builder(ctx)
                try:
                    result = builder(tx, line_ctx)
                    if inspect.iscoroutine(result):
                        result = await result
                finally:
                    line.exit_builder(token)
                batch.open = False
                if batch.poison is not None:
                    raise batch.poison
                if batch.heads:  # resets, handoffs, summaries: the head rules need reads
                    await check_heads(self.storage, self.conversations, batch.new_entries, ctx)
                writes = batch.finish()
                compact = self._compact_sticky(writes) if batch.changed_docs else None
                persisted = bool(writes) or batch.has_events
                deferred = self._persist_deferred(writes, batch) if persisted else None
                if persisted and deferred is None and not self._persist_now(writes, batch):
                    await self._persist(writes, batch, ctx)
            except BaseException:
                batch.open = False
                batch.membrane.revoke("the transaction failed")
                self._discard(batch)
                raise
            if batch.created:
                for write in writes:
                    if isinstance(write, ConversationWrite):
                        self.conversations[write.conversation.id] = write.conversation
            if batch.tasks:
                self._index_tasks(batch)
            batch.membrane.revoke()
            if not persisted:
                # what the builder read may be a queued batch's: reported once that is durable
                deferred = self._acks[-1][0] if self._acks else None
                batch = None
                deliveries = _NO_DELIVERIES
            else:
                deliveries = self._fold_views(batch) if self.views.active else _NO_DELIVERIES
                if deferred is not None:
                    self._acks.append((deferred, batch, deliveries))
        finally:
            line.release()
        if deferred is not None:
            if not durable and not compact:
                return result  # a later commit's wait writes it and delivers its envelopes
            await self._until_durable(deferred)
            if batch is None:
                return result
        elif batch is None:
            return result
        elif self._acks:
            self._acknowledge(self.storage.seq)  # the backend wrote the queue before this one
        if compact:
            await self._truncate(compact, ctx)
        if deferred is None and (deliveries or self._listeners):
            self._after(batch, deliveries)
        return result

    async def settle(self) -> None:
        """Wait until every batch committed so far is durable and delivered (a no-op unless a
        ``durable=False`` commit or a concurrent one is still queued)."""
        if self._acks and self._fault is None:
            await self._until_durable(self._acks[-1][0])

    def _persist_deferred(self, writes: list[Any], batch: Batch) -> int | None:
        """Queue the batch through the backend's group commit when it has one (published in
        memory now, durable later: :meth:`_until_durable`); None when it must commit now."""
        deferred = self._deferred
        if deferred is None:
            return None
        with _StorageCall(self, batch):
            return deferred.commit_deferred(writes)

    async def _until_durable(self, seq: int, *, deliver: bool = True) -> None:
        """Off the line: wait until batch ``seq`` is durable, then deliver every queued batch
        through it, in seq order (whichever waiter wakes first delivers for the others). On the
        line (``deliver=False``) only wait: the batches' own waiters deliver off it."""
        deferred = self._deferred
        assert deferred is not None
        try:
            with anyio.CancelScope(shield=True):
                await deferred.durable(seq)
        except Exception as exc:
            raise self._storage_failed(exc) from exc
        if deliver:
            self._acknowledge(seq)

    def _acknowledge(self, seq: int) -> None:
        acks = self._acks
        while acks and acks[0][0] <= seq:
            _, batch, deliveries = acks.popleft()
            if deliveries or self._listeners:
                self._after(batch, deliveries)

    def _compact_sticky(self, writes: list[Any]) -> list[DocRef] | None:
        """At the commit that ends a turn (its sticky ops delete ``turn``), write the sticky
        document whole (a base) instead of the ops once the log holds
        :data:`COMPACT_STICKY_AFTER` commits or :data:`COMPACT_STICKY_CHARS` characters of text
        since its last base; returns the refs whose log
        :meth:`_truncate` then cuts before that base.

        This is how a streamed answer is stored once: its deltas live in the sticky log while
        it streams (a crash mid-stream keeps them), and the commit that appends the final entry
        is also the one whose base makes them droppable. Before that commit is published the
        deltas stay; after it the entry holds the text."""
        refs: list[DocRef] | None = None
        for index, write in enumerate(writes):
            if not isinstance(write, DocWrite) or write.ref.doc != "sticky":
                continue
            ref = write.ref
            count, chars = self._sticky_ops.get(ref, (0, 0))
            count, chars = count + 1, chars + _text_size(write.ops)
            ends_turn = any(op[0] == "d" and tuple(op[1]) == ("turn",) for op in write.ops)
            document = self.documents.get(ref)
            large = count > COMPACT_STICKY_AFTER or chars > COMPACT_STICKY_CHARS
            if ends_turn and large and document is not None:
                writes[index] = DocWrite(ref=ref, ops=[["r", copy_json(document)]])
                (refs := refs or []).append(ref)
                count = chars = 0
            self._sticky_ops[ref] = (count, chars)
        return refs

    async def _truncate(self, refs: list[DocRef], ctx: Context) -> None:
        """Cut the sticky logs of ``refs`` before their new base (after the commit is
        published; a failure fail-stops the session like a failed commit, but the commit that
        asked for it stays done)."""
        with anyio.CancelScope(shield=True):
            for ref in refs:
                try:
                    await self.storage.truncate(ref, without_abort_signal(ctx))
                except Exception as exc:
                    self.report(self._storage_failed(exc))
                    return

    def _check_invoker(self, invoker: Invoker) -> None:
        if not invoker.alive:
            raise Forbidden(
                f"task {invoker.task_id}: this invocation has ended (its handler returned)"
            )
        task = self.task_index.get(invoker.task_id)
        if task is None or task.status == "terminal":
            raise Forbidden(f"task {invoker.task_id} is not live")
        if invoker.mode == "run" and task.abort is True:
            raise Forbidden(f"task {invoker.task_id} is marked for abort")

    def _index_tasks(self, batch: Batch) -> None:
        owners: set[int] | None = None  # built only when a task ended in this batch
        known = self._task_ids
        for task in batch.tasks.values():
            if known is not None:
                known.add(task.id)
            if task.status == "terminal":
                if owners is None:
                    owners = {
                        record.owner
                        for record in self.conversations.values()
                        if record.owner is not UNSET
                    }
                if task.id not in owners:  # an owner stays indexed for subtree checks
                    self.task_index.pop(task.id, None)
                    continue
            self.task_index[task.id] = task

    def live_tasks(self, conversation_id: int | None = None) -> list[Task]:
        """Every live (pending or running) task, in id order; with ``conversation_id``, only
        that conversation's (filtered before sorting: a view refresh per commit needs just its
        own, however many subagents run beside it)."""
        if conversation_id is None:
            live = [t for t in self.task_index.values() if t.status != "terminal"]
        else:
            live = [
                t
                for t in self.task_index.values()
                if t.conversation_id == conversation_id and t.status != "terminal"
            ]
        live.sort(key=_task_id)
        return live

    def _persist_now(self, writes: list[Any], batch: Batch) -> bool:
        """Commit through the backend's synchronous form when it has one and needs no await
        (see :func:`~pico3.storage.base.sync_commit`); False when :meth:`_persist` must run."""
        commit_now = self._commit_now
        if commit_now is None:
            return False
        with _StorageCall(self, batch):
            return commit_now(writes) is not None

    async def _persist(self, writes: list[Any], batch: Batch, ctx: Context) -> None:
        quiet = ctx
        if ctx.abort_signal is not None or ctx.deadline is not None:
            quiet = without_abort_signal(ctx)
        with _StorageCall(self, batch), anyio.CancelScope(shield=True):
            await self.storage.commit(writes, quiet)

    def _storage_failed(self, exc: BaseException) -> Faulted:
        """Fail-stop the session after a storage failure; returns the error to raise."""
        if self._fault is not None:  # a queued batch behind the one that failed
            return Faulted(f"storage commit failed; the session is fail-stopped: {self._fault}")
        self._fault = exc
        fault = Faulted(f"storage commit failed; the session is fail-stopped: {exc}")
        for listener in list(self._fault_listeners):
            try:
                listener(fault)
            except Exception as error:
                self.report(error)
        return fault

    def _discard(self, batch: Batch) -> None:
        for ref in batch.recorders:
            self.documents.evict(ref)
        for cid in batch.created:
            self.documents.evict(DocRef.rewindable(cid))
            self.documents.evict(DocRef.sticky(cid))

    def _fold_views(self, batch: Batch) -> list[PendingEnvelope]:
        try:
            return self.views.after_commit(batch)
        except Exception as exc:  # a view bug must not fail a persisted commit
            self.report(exc)
            return []

    def _after(self, batch: Batch, deliveries: list[PendingEnvelope]) -> None:
        for delivery in deliveries:
            delivery()
        for listener in list(self._listeners):
            try:
                listener(batch)
            except Exception as exc:
                self.report(exc)

    async def _preload(self, conversation_id: int | None, ctx: Context) -> None:
        await self.documents.load(DocRef.session(), ctx)
        if conversation_id is not None:
            await self.documents.load(DocRef.rewindable(conversation_id), ctx)
            await self.documents.load(DocRef.sticky(conversation_id), ctx)

    async def on_line(self, fn: Callable[[], Awaitable[T]], ctx: Context) -> T:
        """Run ``fn`` on the line (watch capture, snapshots)."""
        ctx.raise_if_cancelled()
        async with self.line.hold(ctx):
            self.check_usable()
            ctx.raise_if_cancelled()
            if self._acks:  # fn reports what it reads (a snapshot): queued batches first
                await self._until_durable(self._acks[-1][0], deliver=False)
            return await fn()

    async def close(self, ctx: Context) -> None:
        """Close views and release the storage (idempotent)."""
        if self._closed:
            return
        self.line.check_not_nested(ctx)
        async with self.line.hold(ctx):
            if self._closed:
                return
            if self._acks and self._fault is None:
                await self._until_durable(self._acks[-1][0])
            self._closed = True
            self.views.close_all()
            with anyio.CancelScope(shield=True):
                await self.storage.close(without_abort_signal(ctx))

    # -- reads used by transactions and views --------------------------------------------
    async def conversation_docs(self, conversation_id: int, ctx: Context) -> None:
        """Make sure a conversation's documents are cached (on the line)."""
        await self._preload(conversation_id, ctx)

    async def transcript(self, conversation_id: int, at: int | None, ctx: Context) -> list[Entry]:
        """The fork-visible entries from the newest head's target through ``at``, oldest first."""
        before = None if at is None else at + 1
        heads = await self.storage.scan_entries(
            EntryScan(conversation_id=conversation_id, limit=1, with_head=True, before=before), ctx
        )
        start = heads[0].head if heads else 0
        assert isinstance(start, int)
        out: list[Entry] = []
        while True:
            page = await self.storage.scan_entries(
                EntryScan(conversation_id=conversation_id, limit=_PAGE, before=before), ctx
            )
            done = len(page) < _PAGE
            for entry in page:
                if entry.id < start:
                    done = True
                    break
                out.append(entry)
            if done or not page:
                break
            before = page[-1].id
        out.reverse()
        return out

    async def shared_transcript(
        self, conversation_id: int, at: int | None, ctx: Context
    ) -> list[Entry]:
        """:meth:`transcript`, from a per-conversation cache whose entries are **shared**: the
        caller must not mutate them (the model call derives its context from them and copies
        what it hands on). Entries are append-only, so a read fetches only the entries committed
        since the last read; when one of them carries a head (a reset, rewind or handoff) the
        whole range is read again, and an older cutoff than the cached one reads uncached.

        The list is the cache's own, not a copy (a copy of the whole history every turn was a
        cost that grew with the session): read it at once and keep none of it, as later reads
        extend it."""
        cached = self._transcripts.get(conversation_id)
        if cached is not None and cached[1] and (at is None or at >= cached[1][-1].id):
            entries = cached[1]
            fresh = await self._tail(conversation_id, entries[-1].id, at, ctx)
            if all(entry.head is UNSET for entry in fresh):  # the newest head is still the one
                entries.extend(fresh)
                return entries
        if at is not None and cached is not None and cached[1] and at < cached[1][-1].id:
            return await self.transcript(conversation_id, at, ctx)  # an older cutoff: uncached
        before = None if at is None else at + 1
        heads = await self.storage.scan_entries(
            EntryScan(conversation_id=conversation_id, limit=1, with_head=True, before=before), ctx
        )
        start = heads[0].head if heads else 0
        assert isinstance(start, int)
        entries = await self.transcript(conversation_id, at, ctx)
        self._transcripts[conversation_id] = (start, entries)
        return entries

    async def shared_context(
        self, conversation_id: int, at: int | None, ctx: Context
    ) -> DerivedContext:
        """The derived context of :meth:`shared_transcript`, extended incrementally (its
        ``entries`` and ``messages`` lists are the context builder's own: read-only, and later
        reads extend them, never change their first ``len()`` items, so take ``len()`` at
        once)."""
        visible = await self.shared_transcript(conversation_id, at, ctx)  # derive keeps no list
        builder = self._contexts.get(conversation_id)
        if builder is None:
            builder = self._contexts[conversation_id] = ContextBuilder()
        return builder.derive(visible, shared=True)

    async def _tail(
        self, conversation_id: int, last: int, at: int | None, ctx: Context
    ) -> list[Entry]:
        """The fork-visible entries after ``last`` through ``at`` (oldest first), read newest
        first in growing pages."""
        before = None if at is None else at + 1
        fresh: list[Entry] = []
        limit = 8
        while True:
            page = await self.storage.scan_entries(
                EntryScan(conversation_id=conversation_id, limit=limit, before=before), ctx
            )
            done = len(page) < limit
            for entry in page:
                if entry.id <= last:
                    done = True
                    break
                fresh.append(entry)
            if done or not page:
                break
            before = page[-1].id
            limit = min(limit * 4, _PAGE)
        fresh.reverse()
        return fresh

    async def rewindable_as_of(self, conversation_id: int, at: int, ctx: Context) -> dict[str, Any]:
        """The rewindable document after the whole commit that appended entry ``at``."""
        return fold_log(await self.storage.doc_as_of(conversation_id, at, ctx))


class _StorageCall:
    """Around one storage commit: the batch's prechecked entries published in
    :data:`~pico3.storage.base.PRECHECKED` (the entries this batch built from payloads it
    validated and copied itself, which storage need not walk again; every other check still
    runs), and any failure but a refused batch turned into the session's fault."""

    __slots__ = ("_kernel", "_token")

    def __init__(self, kernel: Kernel, batch: Batch) -> None:
        self._kernel = kernel
        self._token = PRECHECKED.set(frozenset(batch.prechecked)) if batch.prechecked else None

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> Literal[False]:
        if self._token is not None:
            PRECHECKED.reset(self._token)
        if exc is None or isinstance(exc, InvalidBatch):
            return False
        raise self._kernel._storage_failed(exc) from exc  # pyright: ignore[reportPrivateUsage]


def _task_id(task: Task) -> int:
    return task.id


def _create_root(tx: Transaction, ctx: Context) -> Awaitable[int]:
    return tx.create_conversation()
