"""The storage interface of pico3 (docs/design/storage.md#interface) and the errors every backend raises.

A :class:`Storage` is a small transactional database with exactly one writer, the session that
opened it. It knows tables (conversations, entries, tasks, inputs) and append-only document op
logs, and it commits *batches* of :mod:`~pico3.storage.records` writes atomically: after
:meth:`Storage.commit` returns, every write of the batch is visible and durable (under the
backend's durability mode); if it raises, none is. Storage never runs kind code and never looks
inside application payloads beyond checking that they are strict JSON.

Lifecycle::

    storage = JsonlStorage(path)          # or MemoryStorage(); no I/O yet
    await storage.open(ctx)               # claim it (a second owner is refused) and load it
    seq = await storage.commit(batch, ctx)
    await storage.close(ctx)              # release it; a later open() reloads what was committed

A backend may also offer ``commit_nowait(writes) -> int | None``, a synchronous form of
:meth:`Storage.commit` for the common case where a commit needs no await (nothing queued ahead of
it, no I/O handed to a thread): it commits and returns the seq, or returns ``None`` having done
nothing, and the caller then awaits :meth:`Storage.commit`. It raises what ``commit`` raises. The
kernel uses it when present (:func:`sync_commit`) to skip a cancel scope and a coroutine per
commit; both built-in backends have it. A subclass that overrides ``commit`` alone (to inject a
failure, say) is never bypassed: the synchronous form counts only when one class defines both.

A backend may also offer ``has_task(id) -> bool``: whether a task of that id is stored (any
status), answered without copying a record. The kernel uses it when present (:func:`has_task`):
its open reads only the live tasks as records, and an ``after`` target that is no live task is
looked up there, so the kernel holds no set of every task id a long session made; all built-in
backends have it.

A backend may also offer group commit, ``commit_deferred(writes) -> int | None`` with
``durable(seq)``: the batch is published in memory at once (later batches may build on it) and its
durable write queued, and ``await durable(seq)`` returns once it is durable. The caller reports
nothing of the batch before that; meanwhile other batches queue behind it and the backend writes
them together (JSONL with fsync: one trip to its writer thread for all of them, each still
durable on its own). ``None`` means nothing was done: await :meth:`Storage.commit`. The kernel uses
it when present (:func:`deferred_commit`), under the same rule as ``commit_nowait``.

One shortcut crosses the interface: around one commit the kernel names, in :data:`PRECHECKED`
(:func:`prechecked`), the records it built itself from payloads it has just validated and copied;
a backend reads them with :func:`current_prechecked` and skips only their strict-JSON walk.

Documents are returned as a :data:`~pico3.storage.records.DocLog` (op batches from the last base)
rather than as folded values: folding is :mod:`chord.delta`'s job (one delta engine, docs/design/decisions.md#d2), and the
log is what the kernel needs to keep commit-granular history anyway.

Errors
------
* :class:`InvalidBatch`: the batch was refused before anything changed; the storage is fine.
* :class:`StorageFailed`: a write failed part-way; the storage refuses every later commit
  (fail-stop, docs/design/storage.md#worst-cases). Reopening recovers the last complete batch.
* :class:`CorruptStorage`: ``open`` found stored data it cannot trust; ``path`` and ``line``
  name the place.
* :class:`LeaseLost` (a :class:`StorageFailed`): another worker took over the session; the
  commit wrote nothing and the storage is fail-stop.
* :class:`SchemaTooNew`: the database's schema is newer than this code (PostgreSQL).
* :class:`SchemaNotMigrated`: the database's schema is older and migrating at open is off.
* :class:`StorageUnreachable`: the database server could not be reached (PostgreSQL).
* :class:`StorageClosed`, :class:`StorageInUse`: lifecycle misuse (a second opener, in this
  process or another, gets :class:`StorageInUse` naming the holder).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

from chord.context import Context
from pico3.storage.records import (
    Conversation,
    DocLog,
    DocRef,
    Entry,
    EntryScan,
    Input,
    Task,
    TaskScan,
    Write,
)

__all__ = [
    "PRECHECKED",
    "CorruptStorage",
    "DeferredCommit",
    "InvalidBatch",
    "LeaseLost",
    "SchemaNotMigrated",
    "SchemaTooNew",
    "Storage",
    "StorageClosed",
    "StorageError",
    "StorageFailed",
    "StorageInUse",
    "StorageUnreachable",
    "SyncCommit",
    "current_prechecked",
    "deferred_commit",
    "has_task",
    "prechecked",
    "sync_commit",
]


class StorageError(Exception):
    """Base class of every storage error."""


class InvalidBatch(StorageError, ValueError):
    """A batch was refused before any table, document, id high-water or seq changed."""


class StorageClosed(StorageError):
    """The storage is not open (never opened, or closed)."""


class StorageInUse(StorageError):
    """The storage is already open: one owning session per storage object (and directory)."""


class StorageFailed(StorageError):
    """A commit failed after it may have written something; the storage is now fail-stop."""


class LeaseLost(StorageFailed):
    """Another worker took this session's lease (its epoch, the fencing token, moved on).

    Raised by the commit whose transaction found the epoch changed: that commit wrote nothing,
    and the storage refuses every later commit. The worker must stop: the session now has a
    different writer."""


class SchemaTooNew(StorageError):
    """The database was migrated by a newer pico3 than this one; nothing was changed."""


class SchemaNotMigrated(StorageError):
    """The database's schema is older than this code and it was told not to migrate at open
    (PostgreSQL, ``migrate=False``): run the explicit migration step first. Nothing changed."""


class StorageUnreachable(StorageError):
    """The database server could not be reached (refused, timed out, down); the message names
    its address (never a password) and how long was waited. Nothing was written."""


class CorruptStorage(StorageError):
    """Stored data cannot be trusted; ``path`` and ``line`` (1-based, if known) name where."""

    def __init__(self, path: str, line: int | None, reason: str) -> None:
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


@runtime_checkable
class Storage(Protocol):
    """What the kernel needs from a backend. Every method takes ``ctx`` last.

    Reads return copies: mutating a returned record's payload never changes stored state.
    """

    @property
    def seq(self) -> int:
        """The greatest committed seq (0 for empty storage)."""
        ...

    async def open(self, ctx: Context) -> None:
        """Claim the storage and load its committed state; raises :class:`StorageInUse` if
        already open and :class:`CorruptStorage` if stored data cannot be trusted."""
        ...

    async def close(self, ctx: Context) -> None:
        """Release the storage (idempotent). A later :meth:`open` sees every committed batch."""
        ...

    def mint_id(self) -> int:
        """A fresh id, never one a committed record holds. Ids minted but never committed are
        not reused in this opening; they may be after reopen."""
        ...

    async def commit(self, writes: Sequence[Write], ctx: Context) -> int:
        """Apply ``writes`` atomically and return the batch's seq. Never abandoned once
        started, whatever ``ctx`` says."""
        ...

    async def truncate(self, ref: DocRef, ctx: Context) -> None:
        """Drop a sticky document's op log before its last base (rewrites the sidecar for
        JSONL). Other documents are left alone."""
        ...

    async def conversation(self, id: int, ctx: Context) -> Conversation | None: ...

    async def conversations(self, ctx: Context) -> list[Conversation]:
        """All conversations, in creation order."""
        ...

    async def entries(self, ids: Sequence[int], ctx: Context) -> dict[int, Entry]:
        """The entries among ``ids`` that exist, by id."""
        ...

    async def scan_entries(self, scan: EntryScan, ctx: Context) -> list[Entry]:
        """Newest first and fork-aware: own entries, then the parent's up to the fork point,
        recursively, at most ``scan.limit``."""
        ...

    async def task(self, id: int, ctx: Context) -> Task | None: ...

    async def scan_tasks(self, scan: TaskScan, ctx: Context) -> list[Task]:
        """Matching tasks in creation order."""
        ...

    async def input(self, id: int, ctx: Context) -> Input | None: ...

    async def input_by_request(
        self, conversation_id: int, request_id: str, ctx: Context
    ) -> Input | None: ...

    async def doc(self, ref: DocRef, ctx: Context) -> DocLog | None:
        """The document's op batches from its last base; ``None`` if never written."""
        ...

    async def doc_as_of(self, conversation_id: int, at: int, ctx: Context) -> DocLog | None:
        """The rewindable document as of the whole commit that appended entry ``at``, read from
        the conversation in ``conversation_id``'s fork chain that owns ``at``. ``None`` when
        ``at`` is not fork-visible from ``conversation_id`` or nothing was written by then."""
        ...


@runtime_checkable
class SyncCommit(Protocol):
    """The optional synchronous commit of a backend (see the module doc)."""

    def commit_nowait(self, writes: Sequence[Write]) -> int | None:
        """Commit ``writes`` now and return the seq, or return ``None`` (nothing done) when the
        commit needs to await; raises what :meth:`Storage.commit` raises."""
        ...


@runtime_checkable
class DeferredCommit(Protocol):
    """The optional group commit of a backend (see the module doc)."""

    def commit_deferred(self, writes: Sequence[Write]) -> int | None:
        """Publish ``writes`` in memory and queue their durable write; return the seq, or
        ``None`` (nothing done) when the caller must await :meth:`Storage.commit` instead."""
        ...

    async def durable(self, seq: int) -> None:
        """Return once batch ``seq`` is durable; raise :class:`StorageFailed` if its write
        failed. Never abandoned: shield it from cancellation."""
        ...


def _same_class(storage: object, name: str) -> bool:
    """``storage.<name>`` and ``storage.commit`` are defined by one class and neither is
    replaced on the instance (a subclass that overrides ``commit`` alone is never bypassed)."""
    own = getattr(storage, "__dict__", {})
    if "commit" in own or name in own:
        return False
    mro = type(storage).__mro__
    commit = next((cls for cls in mro if "commit" in vars(cls)), None)
    other = next((cls for cls in mro if name in vars(cls)), None)
    return commit is other


def deferred_commit(storage: object) -> DeferredCommit | None:
    """``storage`` as a :class:`DeferredCommit` when its group commit stands for the same code
    as ``storage.commit`` (both defined by one class, neither replaced on the instance)."""
    if not isinstance(storage, DeferredCommit) or not _same_class(storage, "commit_deferred"):
        return None
    return storage


def sync_commit(storage: object) -> Callable[[Sequence[Write]], int | None] | None:
    """``storage.commit_nowait`` when it stands for the same code as ``storage.commit``: both
    defined by one class and neither replaced on the instance; otherwise ``None``."""
    if not isinstance(storage, SyncCommit):
        return None
    if "commit" in getattr(storage, "__dict__", {}) or "commit_nowait" in getattr(
        storage, "__dict__", {}
    ):
        return None
    mro = type(storage).__mro__
    commit = next((cls for cls in mro if "commit" in vars(cls)), None)
    nowait = next((cls for cls in mro if "commit_nowait" in vars(cls)), None)
    return storage.commit_nowait if commit is nowait else None


def has_task(storage: object) -> Callable[[int], bool] | None:
    """``storage.has_task`` (whether a task id is stored) when the backend offers it, else
    ``None`` (see the module doc)."""
    return getattr(storage, "has_task", None)


EMPTY: frozenset[int] = frozenset()
PRECHECKED: contextvars.ContextVar[frozenset[int]] = contextvars.ContextVar(
    "pico3_storage_prechecked", default=EMPTY
)
"""Set around one ``commit`` call (this task only): the :class:`Entry` objects (by ``id()``)
whose payloads (``model``, ``data``, ``edits``) the caller has already validated as strict JSON
and owns exclusively, i.e. the kernel's own appends, and the :class:`DocWrite` objects whose ops
its document proxies recorded from validated values. Storage skips only their strict-JSON walk;
record types, the typed round trip and staging still run. Use :func:`prechecked` or, on a hot
path, ``token = PRECHECKED.set(ids)`` ... ``PRECHECKED.reset(token)``."""


@contextmanager
def prechecked(entry_ids: frozenset[int]) -> Iterator[None]:
    """Set :data:`PRECHECKED` for the block."""
    token = PRECHECKED.set(entry_ids)
    try:
        yield
    finally:
        PRECHECKED.reset(token)


def current_prechecked() -> frozenset[int]:
    """The entries :data:`PRECHECKED` names now (empty outside a :func:`prechecked` block)."""
    return PRECHECKED.get()
