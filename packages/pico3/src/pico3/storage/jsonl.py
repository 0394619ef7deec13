"""JsonlStorage: a session as a directory of append-only JSON-lines files (docs/design/storage.md).

Files
-----
``main.jsonl``
    Append-only, never rewritten: conversation creates, entries, inputs, rewindable and session
    document ops, task creates, every patch that must outlive the task (terminal status, outcome,
    ``owns``), and one record for every commit that has main writes or wrote more than one file.
``sticky-<cid>.jsonl``
    Conversation ``cid``'s sticky document ops, and transient patches of its tasks that a
    sidecar-published commit put there. Rewritten from its last base by :meth:`truncate`
    (keeping the patches of tasks still live).
``task-<id>.jsonl``
    A live task's transient patches (status ``running``, checkpoints, the abort mark). Unlinked
    once the task's terminal record is published in main.

Every line is one record: the commit's ``seq``, the id high-water after it, its writes, on main
the sidecar files the commit also wrote, and a CRC-32 of the line (stronger than the spec: a
flipped byte anywhere fails ``open`` instead of being replayed). The line formats (v1 objects,
read only; v2 compact arrays, written) are :mod:`pico3.storage._lines`'s
(docs/design/storage.md#line-formats).

Publication (docs/design/storage.md#publication-point)
------------------
A commit validates and stages the whole batch in memory first (no file is touched if that fails),
appends each sidecar record, then appends the main record last. The main record is the
publication point: a sidecar record counts only if the main record with its seq names its file.
A commit that writes one sidecar and nothing else has no main record: its one line, marked as its
own publication point, is written whole or cut at open.
With ``fsync=True`` (the default) every sidecar record is fsynced before the main record is
written durably, and the directory is fsynced after a file is created or renamed
(docs/design/decisions.md#d8-g14). A retired task's sidecar is unlinked by a thread of its own after
the commit (main proves the retirement, so the unlink needs no directory fsync; ``close`` waits for
it). The main record's durable write is :class:`~pico3.storage._log.MainLog`'s: main is
preallocated with written zeros and each record is one synchronous ``O_DIRECT`` block write (or
``pwrite`` + ``fdatasync`` where ``O_DIRECT`` is refused), which costs less than an append and
an ``fsync``; ``close`` cuts the zero tail. Where fsync is slow (a moving average above 2 ms per
commit) that work runs in one worker thread (:func:`anyio.to_thread.run_sync` with a one-slot
limiter) so the event loop keeps running; where it is fast, the thread hop would cost more than
the fsync, and it runs inline. Either way one commit holds the writer lock from its first byte to
its last, so file order is commit order. Group commit (:meth:`JsonlStorage.commit_deferred`, fsync
on) publishes a batch in memory at once and queues its writes; the writer writes every queued
batch in one go, in order, and :meth:`JsonlStorage.durable` returns once a batch's are done.
With ``fsync=False`` a commit survives the death of the
process, not the loss of the machine.

Recovery (docs/design/storage.md#recovery)
---------------
A missing ``main.jsonl`` next to sidecar files (or whenever ``create=False``) fails ``open`` with
:class:`~pico3.storage.base.CorruptStorage` naming it, before anything is created or cut.
``open`` cuts every file back to its last newline (a torn write, or the zero tail of main's
preallocation after a crash), replays main (every complete line must decode, pass its checksum
and carry a seq greater than the line before), keeps the sidecar records main confirms and
truncates an unconfirmed tail, and fails with :class:`~pico3.storage.base.CorruptStorage` naming
the file and line when a confirmed record follows an unconfirmed one, when a marker names a
sidecar record that is missing (unless a later sticky base or the task's retirement explains the
gap), when a seq is missing below the last one replayed (a lost sidecar-published commit; the
same two explanations aside), or when a batch does not replay. Sidecars of terminal or unknown tasks are ignored, even if
malformed, and unlinked.

Privacy: a directory ``open`` creates is ``0700`` and every file it creates ``0600`` (the umask
can only take bits away).

One writer: a session holds an exclusive ``flock`` on the session directory itself while open
(taken before any file is created, cut or read), so a second opener, in this process or another,
gets :class:`~pico3.storage.base.StorageInUse` naming the holder's pid (read from
``/proc/locks`` where the system has it). The kernel drops the lock when the holder dies, however
it dies: there is no stale lock file to clean up.

Why one module: it is one backend of the storage contract, and its file layout (main, sticky and
task sidecars, the cut file, the lock) is read by open-time recovery and written by commit and
truncate under one set of ordering rules; those rules are the module's whole content and they only
hold when the writer and the recovery that checks them are read together. The shared staging and
replay already live in ``_tables`` and ``_replay``.
"""

from __future__ import annotations

import functools
import os
import queue
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path

import anyio
import anyio.to_thread

from chord.context import Context
from pico3.files import fsync_dir
from pico3.storage._lines import StoredCommit, encode_line, read_lines
from pico3.storage._log import BLOCK, MainLog
from pico3.storage._replay import TaskFates, gc_paused, replay
from pico3.storage._tables import (
    Staged,
    Tables,
    TableStorage,
    normalize_batch,
)
from pico3.storage.base import CorruptStorage, StorageFailed, StorageInUse, current_prechecked
from pico3.storage.records import (
    UNSET,
    DocRef,
    DocWrite,
    TaskPatchWrite,
    Write,
    is_base,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

__all__ = [
    "MAIN_FILE",
    "OPEN_SIDECARS",
    "RUN_BYTES",
    "SIDECAR_CHUNK",
    "THREAD_ABOVE",
    "JsonlStorage",
]

MAIN_FILE = "main.jsonl"
_STICKY = re.compile(r"sticky-([1-9][0-9]*)\.jsonl")
_TASK = re.compile(r"task-([1-9][0-9]*)\.jsonl")
SIDECAR_CHUNK = 16 * 1024
"""Smallest preallocation step of a sidecar's log (a subagent's sticky file holds a few KB)."""
OPEN_SIDECARS = 32
"""Sidecar logs kept open at once; the least recently written one beyond is closed (its zero tail
cut), and opened again when written again."""
THREAD_ABOVE = 0.002
"""Default average fsync seconds per commit above which the fsyncs move to a worker thread."""
_COST_WEIGHT = 0.1
_PRIVATE_DIR = 0o700  # a new session directory, whatever the umask
_PRIVATE_FILE = 0o600  # every file: transcripts are nobody else's business


def _read_records(path: str, main: bool = False) -> list[tuple[int, int, StoredCommit]]:
    """Cut a torn tail, then check every line: ``(line number, end offset, line)``."""
    return read_lines(path, _read_cut(path, main), main)


def _one_conversation(staged: Staged, sidecars: dict[str, list[Write]]) -> dict[str, list[Write]]:
    """A commit with no main writes that writes one conversation's sticky document and
    transient patches of that conversation's tasks goes to the sticky sidecar alone, so that
    its one line can be its publication point (docs/design/storage.md#publication-point).
    Otherwise ``sidecars`` unchanged."""
    if len(sidecars) < 2:
        return sidecars
    sticky = [name for name in sidecars if _STICKY.fullmatch(name) is not None]
    if len(sticky) != 1:
        return sidecars
    (name,) = sticky
    cid = int(name[7:-6])
    merged = list(sidecars[name])
    for other, items in sidecars.items():
        if other == name:
            continue
        for write in items:
            patch = write.patch  # type: ignore[union-attr]  # a task sidecar holds patches only
            if staged.tasks[patch.id].conversation_id != cid:
                return sidecars
        merged.extend(items)
    return {name: merged}


@functools.lru_cache(maxsize=1024)
def _sidecar_kind(name: str) -> tuple[str, int]:
    """``("task", id)`` for ``task-<id>.jsonl``, ``("sticky", cid)`` for ``sticky-<cid>.jsonl``,
    else ``("", 0)`` (every main line names its sidecars: matched once per name)."""
    task = _TASK.fullmatch(name)
    if task is not None:
        return "task", int(task.group(1))
    sticky = _STICKY.fullmatch(name)
    return ("sticky", int(sticky.group(1))) if sticky is not None else ("", 0)


RUN_BYTES = 64 * 1024
"""The most bytes of lines one write of a run of queued batches carries (a single larger batch
is written alone). Open takes NUL-holding lines within this many bytes of a file's end as the
in-flight write torn by a power loss (:func:`_read_cut`), so a run never writes more."""


def _runs(plans: list[list[tuple[str, bytes]]]) -> list[int]:
    """Where the runs of queued batches that may share writes end (exclusive indexes).

    A run is: batches each published by its own sidecar line, all in one file, then batches
    published by a main line (with sidecar lines of their own or not), at most
    :data:`RUN_BYTES` of lines in all. Written as the run is (the own-publication file first,
    the other sidecars, main last, each one write), whatever a crash keeps of it is the state
    after a prefix of its batches: a batch published on main counts only once main's line is
    there, and its sidecar lines are durable before that; a sidecar line with no main line yet
    is an unconfirmed tail that open cuts; the own-published lines come before any of them in
    their file and in seq order. A batch published by its own line after a main-published one,
    or in a second file, would be kept by open without the main-published one before it: it
    starts the next run."""
    ends: list[int] = []
    start = 0
    while start < len(plans):
        own_file: str | None = None
        on_main = False
        size = 0
        stop = start
        while stop < len(plans):
            plan = plans[stop]
            if plan[-1][0] != MAIN_FILE:  # published by its own sidecar line
                if on_main or (own_file is not None and plan[0][0] != own_file):
                    break
                own_file = plan[0][0]
            else:
                on_main = True
            size += sum(len(data) for _, data in plan)
            if stop > start and size > RUN_BYTES:
                break
            stop += 1
        ends.append(stop)
        start = stop
    return ends


def _align(n: int) -> int:
    return -(-n // BLOCK) * BLOCK


def _first(item: tuple[int, list[Write]]) -> int:
    return item[0]


def _read_cut(path: str, main: bool = False) -> bytes:
    """The file's bytes through its last newline; anything after it is cut from the file.

    A complete last line (it ends in a newline) holding a NUL byte is judged by what it holds:

    * it decodes and passes its checksum: it is kept, whatever bytes it holds;
    * its NUL bytes are whole sectors that never landed (:func:`_torn_sectors`): it is the
      in-flight write, torn by a power loss that persisted its last sector (newline included)
      and not an earlier one, which still reads as the zeros of the preallocated region. It was
      never acknowledged, and it is cut;
    * otherwise (a stray NUL between written bytes of one sector) the line was damaged after it
      was written: an acknowledged commit cannot be read, and open fails naming the file and
      line (:class:`CorruptStorage`) instead of dropping it without a word.

    The in-flight write may hold several lines (a run of queued batches, at most
    :data:`RUN_BYTES`), and a power loss may keep a later sector of it and lose an earlier one:
    so the first line within :data:`RUN_BYTES` of the last newline that holds a NUL is judged
    the same way, and when it is a torn write it is cut with every line after it (they were
    written by the same write, which was never acknowledged: a write starts only once the one
    before it is durable).

    A NUL in any earlier line fails open (the line does not decode)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return b""
    end = data.rfind(b"\n") + 1
    if end:
        window = data.rfind(b"\n", 0, max(0, end - RUN_BYTES)) + 1  # a line's start
        nul = data.find(b"\0", window, end)
        while nul >= 0:
            start = data.rfind(b"\n", 0, nul) + 1
            stop = data.find(b"\n", nul) + 1  # the line holding it, newline included
            if _whole_record(path, data[start:stop], main):
                nul = data.find(b"\0", stop, end)  # a kept line (NULs escaped in its text)
                continue
            if not _torn_sectors(data, start, stop - 1):
                line = data.count(b"\n", 0, start) + 1
                raise CorruptStorage(
                    path,
                    line,
                    f"a NUL byte at column {nul - start + 1} of this complete line, between "
                    "bytes that were written: not a torn write (a power loss leaves whole "
                    "sectors of zeros) but damage to an acknowledged commit; nothing was cut. "
                    "Restore the file from a backup",
                )
            end = start
            break
    if end != len(data):
        os.truncate(path, end)
        data = data[:end]
    return data


SECTOR = 512
"""The smallest unit a device writes whole (a torn write loses whole sectors)."""


def _whole_record(path: str, line: bytes, main: bool) -> bool:
    """Whether ``line`` (with its newline) decodes and passes its checksum."""
    try:
        read_lines(path, line, main)
    except CorruptStorage:
        return False
    return True


def _torn_sectors(data: bytes, start: int, stop: int) -> bool:
    """Whether every run of NUL bytes in ``data[start:stop]`` can be part of sectors that did
    not land. A lost sector's part of the line ends at a sector boundary (the newline landed)
    and begins at one or at the line's start; a run of one byte is held to exactly that (the
    line began on a sector's last byte), a longer run is taken as torn as it is (a run of zeros
    is what a lost write leaves; a stray NUL is not)."""
    at = data.find(b"\0", start, stop)
    while at >= 0:
        end = at
        while end < stop and data[end] == 0:
            end += 1
        if end - at == 1 and not (end % SECTOR == 0 and (at == start or at % SECTOR == 0)):
            return False
        at = data.find(b"\0", end, stop)
    return True


def _lock_directory(path: str) -> int:
    """Open ``path`` and take an exclusive ``flock`` on it; :class:`StorageInUse` names the
    holder's pid when another open file description holds it."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    if fcntl is None:  # pragma: no cover - not POSIX
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _flock_holder(os.fstat(fd))
        os.close(fd)
        if holder is None:
            who = "another worker"
        elif holder == os.getpid():
            who = f"this process (pid {holder}), through another storage object"
        else:
            who = f"pid {holder}"
        raise StorageInUse(
            f"{path} is open in another session: {who} holds its lock. Stop that worker, or "
            "attach to it instead of opening the session a second time"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _flock_holder(st: os.stat_result) -> int | None:
    """The pid holding a ``flock`` on the file ``st`` describes, from ``/proc/locks``."""
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as handle:
            for line in handle:
                fields = line.split()
                if "->" in fields or len(fields) < 6 or fields[1] != "FLOCK":
                    continue  # a blocked waiter, or not a flock
                if fields[5] == want:
                    return int(fields[4]) or None  # 0: outside this pid namespace
    except (OSError, ValueError):
        return None
    return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _lost_end(
    main_path: str, main: list[tuple[int, int, StoredCommit]], beyond: tuple[str, int, int]
) -> CorruptStorage:
    """``main.jsonl`` lost lines at its end: a sidecar holds a record written after them
    (``beyond``: its file name, line and seq) that the session cannot be opened without."""
    name, line, seq = beyond
    last = main[-1][2].seq if main else 0
    return CorruptStorage(
        main_path,
        None,
        f"ends at seq {last} (line {len(main)}), yet {name} holds seq {seq} (line {line}), "
        f"written after it: {MAIN_FILE} lost lines at its end (it was cut or truncated) and the "
        "session cannot be opened without them. Restore it from a backup",
    )


class JsonlStorage(TableStorage):
    """A :class:`~pico3.storage.base.Storage` in a directory of JSONL files (see module doc).

    ``fsync=True`` (default) makes each commit durable across machine failure as far as the
    device allows; ``fsync=False`` (tests, benchmarks) only across process death.
    ``thread_above`` is the average fsync time per commit (seconds) above which fsyncs run in a
    worker thread instead of on the event loop; ``0`` always uses the thread. With
    ``create=False`` a missing ``main.jsonl`` is an error (the caller made it when it made the
    session); either way it is one when sidecar files exist without it.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        fsync: bool = True,
        thread_above: float = THREAD_ABOVE,
        create: bool = True,
    ) -> None:
        super().__init__()
        self._dir = os.fspath(Path(path))
        self._create = create
        self._fsync = fsync
        self._main_fd = -1  # keeps main.jsonl open; the log writes through its own descriptors
        self._lock_fd = -1  # the directory, flocked while open
        self._log: MainLog | None = None
        self._sidecars: OrderedDict[str, MainLog] = OrderedDict()  # open logs, least recent first
        self._written: set[str] = set()  # sidecar files this opening has written
        self._task_files: set[str] = set()  # task sidecars that may exist (unlinked on retiring)
        self._retirer: _Retirer | None = None  # unlinks retired task sidecars, off the loop
        self._failed: BaseException | None = None
        self._lock: anyio.Lock | None = None
        self._limiter: anyio.CapacityLimiter | None = None
        self._thread_above = thread_above
        self._sync_cost = 0.0  # moving average of the fsync seconds per commit
        self._offload = fsync and thread_above <= 0
        # deferred commits (commit_deferred): published in memory, queued for the writer
        self._pending: list[tuple[_Commit, list[tuple[str, bytes]]]] = []
        self._durable_seq = 0  # every commit up to this seq is written (durably, with fsync)
        self._flushing: anyio.Event | None = None  # set when the group being written is done
        self._exclusive = False  # a commit or rewrite holds staged state: nothing may queue

    def __repr__(self) -> str:
        return f"<JsonlStorage {self._dir!r} seq={self.seq}>"

    @property
    def path(self) -> str:
        """The session directory."""
        return self._dir

    @property
    def fsync(self) -> bool:
        return self._fsync

    def _file(self, name: str) -> str:
        return os.path.join(self._dir, name)

    # open / close --------------------------------------------------------------------------

    async def open(self, ctx: Context) -> None:
        """Claim the directory (exclusive lock) and replay it; see the module doc."""
        self._claim()
        self._lock = anyio.Lock()
        self._limiter = anyio.CapacityLimiter(1)
        self._failed = None
        tables = Tables()
        try:
            await anyio.to_thread.run_sync(self._load_paused, tables, limiter=self._limiter)
        except BaseException:
            self._close_files()
            raise
        self._tables = tables
        self._next_id = tables.high_water + 1
        self._pending = []
        self._durable_seq = tables.seq
        self._exclusive = False
        self._open = True

    async def close(self, ctx: Context) -> None:
        """Close every file and release the directory lock (idempotent)."""
        if self._lock is not None and self._open:
            with anyio.CancelScope(shield=True):
                async with self._lock:
                    try:
                        if self._failed is None:
                            await self._flush_locked()  # queued commits are written first
                    finally:
                        self._open = False
                        self._close_files()
        self._open = False
        self._close_files()

    def settle(self) -> None:
        """Block until the retired task sidecars queued so far are unlinked.

        Retirement unlinks them in a thread after the commit that ended their task (see
        ``_Retirer``), so the folder's file list lags the published state for a moment. Call
        this before comparing the folder's files (tests do); nothing else needs it, since
        ``open`` ignores a retired sidecar that is still there.
        """
        if self._retirer is not None:
            self._retirer.wait()

    def _close_files(self) -> None:
        log, self._log = self._log, None
        retirer, self._retirer = self._retirer, None
        try:
            if retirer is not None:
                retirer.drain()  # every retired sidecar is gone while the flock is still held
            if log is not None:
                log.close()  # cuts the preallocated tail while the flock is still held
            while self._sidecars:
                self._sidecars.popitem(last=False)[1].close()  # and each sidecar's
        finally:
            for sidecar in self._sidecars.values():
                sidecar.abandon()  # a close above failed: open cuts the tails it left
            self._sidecars.clear()
            self._written.clear()
            self._task_files.clear()
            if self._main_fd >= 0:
                os.close(self._main_fd)
                self._main_fd = -1
            if self._lock_fd >= 0:
                os.close(self._lock_fd)  # releases the flock, last
                self._lock_fd = -1

    def _load_paused(self, tables: Tables) -> None:
        """:meth:`_load` with the cyclic garbage collector paused.

        Replay allocates every record of the session and keeps them all (acyclic JSON); letting
        the collector rescan that growing heap on the way costs more than the replay itself.
        """
        with gc_paused():
            self._load(tables)

    def _load(self, tables: Tables) -> None:
        os.makedirs(self._dir, mode=_PRIVATE_DIR, exist_ok=True)
        self._lock_fd = _lock_directory(self._dir)
        main_path = self._file(MAIN_FILE)
        created = not os.path.exists(main_path)
        if created:
            self._check_missing_main(main_path)
        self._main_fd = os.open(main_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, _PRIVATE_FILE)
        names = sorted(os.listdir(self._dir))
        changed = created
        for name in names:
            if name.endswith(".jsonl.tmp"):  # an interrupted sticky rewrite; the original stands
                os.unlink(self._file(name))
                changed = True

        main = _read_records(main_path, main=True)
        markers: dict[int, tuple[str, ...]] = {}  # seq -> sidecar files its marker names
        fates = TaskFates()
        retired = fates.retired  # task id -> seq of its terminal record
        high_water = 0
        for _, _, record in main:
            if record.refs is not None:
                markers[record.seq] = record.refs  # one tuple shared by the lines naming it
            if record.max_id > high_water:
                high_water = record.max_id
            fates.scan(record.seq, record.writes)

        extra: dict[int, list[Write]] = {}
        own: dict[int, tuple[str, int, list[Write]]] = {}  # seq -> a sidecar-published commit
        found: set[tuple[int, str]] = set()
        sticky_base: dict[str, int] = {}
        stale: list[str] = []
        rollback: list[tuple[str, int]] = []  # unconfirmed sidecar tails, cut once all is checked
        last = main[-1][2].seq if main else 0
        beyond: tuple[str, int, int] | None = None  # a sidecar record written after main's end
        for name in names:
            task = _TASK.fullmatch(name)
            if task is not None:
                id = int(task.group(1))
                if not fates.live(id):
                    stale.append(name)  # never read: a retired sidecar cannot resurrect state
                    continue
                self._task_files.add(name)
            elif _STICKY.fullmatch(name) is None:
                continue
            path = self._file(name)
            records = _read_records(path)
            keep = 0
            unconfirmed: int | None = None
            unconfirmed_seq = 0
            docs_seen = False  # a sticky rewrite may keep live tasks' patches before its base
            for line, end, record in records:
                if record.own:  # its own publication point: the commit wrote no other file
                    if record.seq in markers or record.seq in own:
                        raise CorruptStorage(
                            path, line, f"seq {record.seq} is published twice (here and elsewhere)"
                        )
                    own[record.seq] = (path, line, record.writes)
                else:
                    marker = markers.get(record.seq)
                    if marker is None or name not in marker:
                        if unconfirmed is None:
                            unconfirmed, unconfirmed_seq = line, record.seq
                            if record.seq > last and beyond is None:
                                beyond = (name, line, record.seq)
                        continue
                if unconfirmed is not None:
                    if unconfirmed_seq > last:  # main ends before a commit published after it
                        raise _lost_end(main_path, main, (name, unconfirmed, unconfirmed_seq))
                    raise CorruptStorage(
                        path,
                        line,
                        f"confirmed record (seq {record.seq}) follows an unconfirmed one at "
                        f"line {unconfirmed}",
                    )
                if not docs_seen:
                    docs = [w for w in record.writes if isinstance(w, DocWrite)]
                    if docs:
                        docs_seen = True
                        if any(is_base(w.ops) for w in docs):
                            sticky_base[name] = record.seq
                keep = end
                high_water = max(high_water, record.max_id)
                if record.own:
                    continue
                found.add((record.seq, name))
                extra.setdefault(record.seq, []).extend(record.writes)
            if unconfirmed is not None:
                rollback.append((path, keep))

        try:
            for line, _, record in main:
                if record.refs is not None:
                    self._check_refs(main_path, line, record, found, retired, sticky_base)
        except CorruptStorage:
            if beyond is None:
                raise
            raise _lost_end(main_path, main, beyond) from None
        commits = [(record.seq, record.writes) for _, _, record in main]
        if own:  # merge the sidecar-published commits into commit order
            commits.extend((seq, writes) for seq, (_, _, writes) in own.items())
            commits.sort(key=_first)

        def where(seq: int) -> tuple[str, int]:
            if seq in own:
                return own[seq][0], own[seq][1]
            return main_path, next(line for line, _, r in main if r.seq == seq)

        replay(tables, commits, extra, where)  # extra holds only what confirmed markers name
        self._check_gaps(main_path, main, commits, own, fates, sticky_base, names)
        tables.high_water = max(tables.high_water, high_water)

        for path, keep in rollback:
            os.truncate(path, keep)
            changed = True
        for name in stale:
            os.unlink(self._file(name))
            changed = True
        if changed and self._fsync:
            fsync_dir(self._dir)
        self._log = MainLog(main_path, durable=self._fsync)  # only once everything checked out

    def _check_missing_main(self, main_path: str) -> None:
        """A missing ``main.jsonl`` is a new session only when nothing else says otherwise:
        never open an empty session over the remains of one (and never cut its sidecars)."""
        others = sorted(
            name
            for name in os.listdir(self._dir)
            if _STICKY.fullmatch(name) is not None or _TASK.fullmatch(name) is not None
        )
        if not others and self._create:
            return
        beside = f" while {', '.join(others)} still exist" if others else ""
        raise CorruptStorage(
            main_path,
            None,
            f"the session's transcript is missing{beside}; nothing was opened or changed. "
            "Restore the file from a backup, or delete the session folder to drop the session",
        )

    @staticmethod
    def _check_gaps(
        main_path: str,
        main: list[tuple[int, int, StoredCommit]],
        commits: list[tuple[int, list[Write]]],
        own: dict[int, tuple[str, int, list[Write]]],
        fates: TaskFates,
        sticky_base: dict[str, int],
        names: list[str],
    ) -> None:
        """Every seq below the last one replayed must be replayed, unless the gap is explained:
        a commit published by its own sidecar line may be gone with its file's earlier records
        (a sticky file rewritten from a later base) or with a task's sidecar (the task retired
        later). Otherwise that commit was lost (a damaged sidecar) and opening at a later seq
        would expose a history without it."""
        expected = 1
        rewritten = max(sticky_base.values(), default=0)
        lives = fates.lives()
        live_until = 0  # the latest retirement of the tasks created before the seq checked
        next_life = 0
        for seq, _ in commits:
            missing = expected
            expected = seq + 1
            while missing < seq:
                if missing >= rewritten:
                    while next_life < len(lives) and lives[next_life][0] < missing:
                        live_until = max(live_until, lives[next_life][1])
                        next_life += 1
                    if live_until <= missing:
                        JsonlStorage._lost(main_path, main, own, fates, names, missing, seq)
                missing += 1

    @staticmethod
    def _lost(
        main_path: str,
        main: list[tuple[int, int, StoredCommit]],
        own: dict[int, tuple[str, int, list[Write]]],
        fates: TaskFates,
        names: list[str],
        missing: int,
        seq: int,
    ) -> None:
        """Raise :class:`CorruptStorage` for the lost commit ``missing`` (``seq``: the next one
        replayed), naming the files that could have held it."""
        if seq in own:
            where = f"{own[seq][0]}:{own[seq][1]}"
        else:
            where = f"line {next(line for line, _, r in main if r.seq == seq)}"
        sidecars = [
            name
            for name in names
            if _STICKY.fullmatch(name) is not None
            or ((task := _TASK.fullmatch(name)) is not None and fates.live(int(task.group(1))))
        ]
        held = ", ".join(sidecars) if sidecars else "a sidecar file that is gone"
        raise CorruptStorage(
            main_path,
            None,
            f"seq {missing} is missing: no file holds that commit, yet seq {seq} ({where}) "
            f"follows it; it was published by its own sidecar line, lost from {held}. "
            "Restore the session folder from a backup",
        )

    @staticmethod
    def _check_refs(
        main_path: str,
        line: int,
        record: StoredCommit,
        found: set[tuple[int, str]],
        retired: dict[int, int],
        sticky_base: dict[str, int],
    ) -> None:
        """Every sidecar a marker names must hold its record, unless the gap is explained: the
        sticky file was rewritten from a later base, or the task retired later."""
        for ref in record.refs or ():
            if (record.seq, ref) in found:
                continue
            kind, id = _sidecar_kind(ref)
            if kind == "task":
                retired_at = retired.get(id)
                if retired_at is not None and record.seq < retired_at:
                    continue
            elif kind == "sticky":
                base = sticky_base.get(ref)
                if base is not None and record.seq < base:
                    continue
            else:
                raise CorruptStorage(main_path, line, f"marker names unknown file {ref!r}")
            raise CorruptStorage(
                main_path,
                line,
                f"marker for seq {record.seq} names {ref}, which has no record for it",
            )

    # commit --------------------------------------------------------------------------------

    def _check_writable(self) -> Tables:
        tables = self._check_open()
        if self._failed is not None:
            raise StorageFailed(f"{self._dir}: an earlier commit failed ({self._failed})")
        return tables

    async def commit(self, writes: Sequence[Write], ctx: Context) -> int:
        """Publish one batch (sidecars first, the main marker last); return its seq.

        Only waiting for an earlier commit or rewrite can be cancelled; once this commit starts
        it runs to the end, shielded from cancellation.
        """
        seq = self.commit_nowait(writes)
        if seq is not None:
            return seq
        prechecked = current_prechecked()
        lock = self._lock
        assert lock is not None
        await lock.acquire()  # the only cancellable step: nothing has started yet
        seq = 0
        try:
            with anyio.CancelScope(shield=True):
                self._exclusive = True
                await self._flush_locked()  # deferred commits queued ahead of this one
                seq = await self._commit_locked(writes, prechecked)
        finally:
            self._exclusive = False
            lock.release()
        return seq

    def commit_deferred(self, writes: Sequence[Write]) -> int | None:
        """Group commit: publish one batch in memory now and queue its durable write; return
        its seq, which :meth:`durable` then waits for. ``None`` (nothing done) without fsync
        (a write is cheaper than the queue) or while a :meth:`commit` or :meth:`truncate` is
        under way; then the caller awaits :meth:`commit`.

        The batch is visible to reads at once, so later batches may build on it; the caller
        must not report it, or anything read from it, before :meth:`durable` returns. Queued
        writes keep commit order, and the writer takes every batch queued by the time it is free
        in one trip to its thread, so batches queued while a write runs share the next trip
        instead of each holding the event loop through its own write. Each batch's publication
        point is unchanged (its main record, or its own sidecar line, each durable on its own).
        """
        self._check_writable()
        if not self._fsync or self._exclusive:
            return None
        commit, plan = self._prepare(writes, current_prechecked())
        self._tables.apply(commit.staged)
        self._tables.high_water = commit.max_id
        self._pending.append((commit, plan))
        return commit.seq

    async def durable(self, seq: int) -> None:
        """Return once batch ``seq`` (and every batch before it) is durable; raise
        :class:`StorageFailed` if its write failed. Not cancellable: shield it, as
        :meth:`commit` is."""
        while self._durable_seq < seq:
            if self._failed is not None:
                raise StorageFailed(f"{self._dir}: commit {seq} failed: {self._failed}")
            flushing = self._flushing
            if flushing is not None:
                await flushing.wait()  # a group is being written; it may hold this batch
                continue
            if not self._pending:
                raise StorageFailed(f"{self._dir}: commit {seq} was never written (closed)")
            lock = self._lock
            assert lock is not None
            async with lock:  # the writer is free: this caller writes the queue (leader)
                if self._durable_seq < seq and self._failed is None:
                    try:
                        await self._flush_locked()
                    except StorageFailed:
                        pass  # the loop tells whether this batch was written before the failure

    async def _flush_locked(self) -> None:
        """Write every queued batch, in order (holding the writer lock), in one trip to the
        writer thread when syncs are slow (see ``thread_above``), and retire their tasks'
        sidecars."""
        if not self._pending:
            return
        group, self._pending = self._pending, []
        done = self._flushing = anyio.Event()
        try:
            if self._offload:  # slow syncs: the event loop runs on while the thread writes
                await anyio.to_thread.run_sync(self._write_group, group, limiter=self._limiter)
            else:  # fast ones cost less than the thread's wake-up; the line is free meanwhile
                self._write_group(group)
        except BaseException as exc:
            if self._failed is None:
                self._failed = exc
            raise StorageFailed(f"{self._dir}: a queued commit failed: {exc}") from exc
        finally:
            self._flushing = None
            done.set()

    def _write_group(self, group: list[tuple[_Commit, list[tuple[str, bytes]]]]) -> None:
        """Write the queued batches in runs (:func:`_runs`), each run one write per file."""
        start = 0
        for stop in _runs([plan for _, plan in group]):
            if stop - start == 1:
                self._write_plan(group[start][1])
            else:
                self._write_run([plan for _, plan in group[start:stop]])
            for commit, _ in group[start:stop]:
                self._durable_seq = commit.seq
                self._retire(commit)
            start = stop

    def _write_run(self, plans: list[list[tuple[str, bytes]]]) -> None:
        """Write a run of queued batches (see :func:`_runs`) with one write per file: each
        sidecar's lines in seq order, the run's own-publication file first, then the folder
        fsync if a sidecar was created, then main's lines last. Every line keeps its own
        record, seq and publication point; only the writes are shared."""
        files: dict[str, list[bytes]] = {}
        for plan in plans:
            for name, data in plan:
                files.setdefault(name, []).append(data)
        main = files.pop(MAIN_FILE, None)
        created = False
        synced = 0.0
        for name, lines in files.items():  # the own-publication file was named first
            sidecar, new = self._sidecar(name)
            created = created or new
            started = time.perf_counter()
            sidecar.append(b"".join(lines))  # durable on return (see pico3.storage._log)
            synced += time.perf_counter() - started
        started = time.perf_counter()
        if created:
            fsync_dir(self._dir)  # the new sidecars' names are durable before anything relies
        if main is not None:
            log = self._log
            assert log is not None
            log.append(b"".join(main))
        synced += time.perf_counter() - started
        self._sync_cost += (synced - self._sync_cost) * _COST_WEIGHT
        self._offload = self._sync_cost > self._thread_above or self._thread_above <= 0

    def commit_nowait(self, writes: Sequence[Write]) -> int | None:
        """Publish one batch without awaiting, when nothing is queued ahead of it and fsyncs run
        inline; otherwise return ``None`` having done nothing (then :meth:`commit` waits)."""
        self._check_writable()
        lock = self._lock
        assert lock is not None
        if self._offload or lock.locked() or self._pending:
            return None
        return self._commit_inline(writes, current_prechecked())  # nothing can interleave

    async def _commit_locked(self, writes: Sequence[Write], prechecked: frozenset[int]) -> int:
        if not self._offload:
            return self._commit_inline(writes, prechecked)
        commit, plan = self._prepare(writes, prechecked)
        try:
            await anyio.to_thread.run_sync(self._write_plan, plan, limiter=self._limiter)
        except BaseException as exc:
            self._failed = exc
            raise StorageFailed(f"{self._dir}: commit {commit.seq} failed: {exc}") from exc
        return self._publish(commit)

    def _commit_inline(self, writes: Sequence[Write], prechecked: frozenset[int]) -> int:
        commit, plan = self._prepare(writes, prechecked)
        try:
            self._write_plan(plan)
        except Exception as exc:
            self._failed = exc
            raise StorageFailed(f"{self._dir}: commit {commit.seq} failed: {exc}") from exc
        return self._publish(commit)

    def _prepare(
        self, writes: Sequence[Write], prechecked: frozenset[int]
    ) -> tuple[_Commit, list[tuple[str, bytes]]]:
        tables = self._check_writable()
        seq = tables.seq + 1
        copies, _ = normalize_batch(writes, prechecked)
        staged = tables.stage(copies, seq)
        max_id = self._high_water_after(staged)
        main, sidecars = self._route(staged, self._written)
        if not main and sidecars:
            sidecars = _one_conversation(staged, sidecars)
            if len(sidecars) == 1:  # the sidecar line is the publication point: no main line
                self._note_sidecars(sidecars)
                ((name, items),) = sidecars.items()
                return _Commit(staged, seq, max_id), [
                    (name, encode_line(seq, max_id, items, own=True))
                ]
        self._note_sidecars(sidecars)
        plan = [(name, encode_line(seq, max_id, items)) for name, items in sidecars.items()]
        # maxId 0: this line's writes create the greatest id (replay raises the mark from them)
        main_max = 0 if max_id <= staged.max_id else max_id
        plan.append((MAIN_FILE, encode_line(seq, main_max, main, list(sidecars))))
        return _Commit(staged, seq, max_id), plan

    def _note_sidecars(self, sidecars: dict[str, list[Write]]) -> None:
        """Remember the sidecars a planned commit writes (before it is written: queued writes
        keep commit order, so a later commit may rely on the file)."""
        for name in sidecars:
            if name not in self._written:
                self._written.add(name)
                if name.startswith("task-"):
                    self._task_files.add(name)

    @staticmethod
    def _route(
        staged: Staged, joinable: AbstractSet[str] = frozenset()
    ) -> tuple[list[Write], dict[str, list[Write]]]:
        """Split a batch: sticky ops and transient task patches go to sidecars.

        A task's transient patches go to its conversation's sticky sidecar when that file is
        in ``joinable`` (JSONL: the sticky files this opening has written), rather than to ``task-<id>.jsonl`` (a file create, its
        fsync and a folder fsync per task; a parent's batch of tool calls starts them all in one
        commit). A task's patches stay together: if the task is terminal once the batch lands, or any of
        its patches in the batch must outlive it (outcome, ``owns``), all of them go to main, so
        replay applies them in their original order and a retired sidecar loses nothing.
        """
        if not staged.docs and not staged.tasks:  # nothing that could go to a sidecar
            return staged.writes, {}
        durable: set[int] = set()
        for write in staged.writes:
            if isinstance(write, TaskPatchWrite):
                patch = write.patch
                if (
                    staged.tasks[patch.id].status == "terminal"
                    or patch.outcome is not UNSET
                    or patch.owns is not UNSET
                ):
                    durable.add(patch.id)
        main: list[Write] = []
        sidecars: dict[str, list[Write]] = {}
        for write in staged.writes:
            if isinstance(write, DocWrite) and write.ref.doc == "sticky":
                sidecars.setdefault(f"sticky-{write.ref.conversation_id}.jsonl", []).append(write)
            elif isinstance(write, TaskPatchWrite) and write.patch.id not in durable:
                id = write.patch.id
                name = f"sticky-{staged.tasks[id].conversation_id}.jsonl"
                if name not in joinable:
                    name = f"task-{id}.jsonl"
                sidecars.setdefault(name, []).append(write)
            else:
                main.append(write)
        return main, sidecars

    def _write_plan(self, plan: list[tuple[str, bytes]]) -> None:
        created = False
        synced = 0.0
        for name, data in plan:
            if name == MAIN_FILE:
                log = self._log
                assert log is not None
                if not self._fsync:
                    log.append(data)
                    continue
                started = time.perf_counter()
                if created:
                    fsync_dir(self._dir)  # the new sidecar's name is durable before publication
                log.append(data)  # durable on return (see pico3.storage._log)
                synced += time.perf_counter() - started
                continue
            sidecar, new = self._sidecar(name)
            created = created or new
            started = time.perf_counter()
            sidecar.append(data)  # durable on return with fsync (see pico3.storage._log)
            synced += time.perf_counter() - started
        if created and self._fsync and plan[-1][0] != MAIN_FILE:
            started = time.perf_counter()
            fsync_dir(self._dir)  # a sidecar-published commit in a new file: its name is durable
            synced += time.perf_counter() - started
        if self._fsync:  # (without fsync ``synced`` is a sidecar's plain write: not counted)
            self._sync_cost += (synced - self._sync_cost) * _COST_WEIGHT
            self._offload = self._sync_cost > self._thread_above or self._thread_above <= 0

    def _sidecar(self, name: str) -> tuple[MainLog, bool]:
        """The sidecar's log, opened if it is not (then True when the file was created: its
        name needs a folder fsync before it is relied on). With fsync the log preallocates the file with written
        zeros (a step of at least :data:`SIDECAR_CHUNK`), so each record is one synchronous block
        write instead of an append and an ``fsync`` that must also commit the file's new size
        (:mod:`pico3.storage._log`); beyond :data:`OPEN_SIDECARS` open logs, the least recently
        written is closed (its zero tail cut)."""
        sidecar = self._sidecars.get(name)
        if sidecar is not None:
            self._sidecars.move_to_end(name)  # the most recently written, closed last
            return sidecar, False
        path = self._file(name)
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _PRIVATE_FILE))
            created = True
        except FileExistsError:
            created = False
        while len(self._sidecars) >= OPEN_SIDECARS:
            self._sidecars.popitem(last=False)[1].close()
        sidecar = MainLog(path, durable=self._fsync, min_chunk=SIDECAR_CHUNK)
        self._sidecars[name] = sidecar
        return sidecar, created

    def _publish(self, commit: _Commit) -> int:
        self._tables.apply(commit.staged)
        self._tables.high_water = commit.max_id
        self._durable_seq = commit.seq
        self._retire(commit)
        return commit.seq

    def _retire(self, commit: _Commit) -> None:
        """Once ``commit`` is durable: unlink the sidecars of the tasks it ended."""
        for id in commit.staged.terminalized:
            name = f"task-{id}.jsonl"
            if name not in self._task_files:
                continue  # its patches went to a sticky sidecar, if it had any
            self._task_files.discard(name)
            self._written.discard(name)
            sidecar = self._sidecars.pop(name, None)
            if sidecar is not None:
                sidecar.abandon()  # unlinked next: no need to cut its zeros
            if self._retirer is None:
                self._retirer = _Retirer()
            self._retirer.unlink(self._file(name))

    # sticky rewrite ------------------------------------------------------------------------

    async def truncate(self, ref: DocRef, ctx: Context) -> None:
        """Rewrite ``sticky-<cid>.jsonl`` from its last base (temp file, fsync, rename)."""
        self._check_writable()
        if ref.doc != "sticky" or not isinstance(ref.conversation_id, int):
            return
        cid = ref.conversation_id
        lock = self._lock
        assert lock is not None
        if not self._fsync and not lock.locked():
            self._truncate_now(cid)  # no await: nothing can interleave
            return
        await lock.acquire()
        try:
            with anyio.CancelScope(shield=True):
                self._exclusive = True  # the rewrite trims the tables in its thread
                await self._flush_locked()
                self._check_writable()
                await anyio.to_thread.run_sync(self._truncate_now, cid, limiter=self._limiter)
        finally:
            self._exclusive = False
            lock.release()

    def _live_patches(self, records: list[tuple[int, int, StoredCommit]]) -> bytes:
        """The lines, re-encoded with their patches only, of the records before a sticky base
        that patch tasks still live: a sidecar-published commit may have put them in the sticky
        file (:func:`_one_conversation`), and the rewrite must not lose them."""
        tasks = self._tables.tasks
        out: list[bytes] = []
        for _, _, record in records:
            patches: list[Write] = [
                w
                for w in record.writes
                if isinstance(w, TaskPatchWrite)
                and (task := tasks.get(w.patch.id)) is not None
                and task.status != "terminal"
            ]
            if patches:
                out.append(encode_line(record.seq, record.max_id, patches, own=record.own))
        return b"".join(out)

    def _truncate_now(self, cid: int) -> None:
        """Rewrite the sticky sidecar from its last base (docs/design/storage.md#sticky-truncation).

        With fsync the new file is written preallocated (its lines, then written zeros up to a
        step of :data:`SIDECAR_CHUNK`) and synced once before the rename; the open log of the old
        file is dropped without cutting its zeros (the rename replaces that file) and the new
        file is adopted as it is (:class:`MainLog`'s ``end``), so a rewrite costs the file's
        sync and the folder's, not also a cut, a preallocation and a probe write."""
        name = f"sticky-{cid}.jsonl"
        path = self._file(name)
        sidecar = self._sidecars.pop(name, None)
        try:
            if sidecar is not None:
                with open(path, "rb") as handle:
                    data = handle.read(sidecar.end)  # its lines: the zeros after are not read
                records = read_lines(path, data, False)
            else:
                records = _read_records(path)
                data = b""
            start = 0
            for index in range(len(records) - 1, -1, -1):
                writes = records[index][2].writes
                if any(isinstance(w, DocWrite) and is_base(w.ops) for w in writes):
                    start = index
                    break
            if start == 0:
                if sidecar is not None:
                    self._sidecars[name] = sidecar  # nothing to rewrite: it stays open
                self._tables.truncate_sticky(cid)
                return
            if sidecar is None:
                with open(path, "rb") as handle:
                    data = handle.read()
            temp = path + ".tmp"
            content = self._live_patches(records[:start]) + data[records[start - 1][1] :]
            zeros = 0
            if self._fsync and sidecar is not None:
                zeros = _align(len(content) + SIDECAR_CHUNK) - len(content)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _PRIVATE_FILE)
            try:
                _write_all(fd, content + bytes(zeros) if zeros else content)
                if self._fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            direct = sidecar is not None and sidecar.mode == "direct"
            if sidecar is not None:
                sidecar.abandon()  # its file is replaced next: no need to cut its zeros
            os.replace(temp, path)
            if self._fsync:
                fsync_dir(self._dir)
                if zeros:  # the next commit writes into the zeros synced above
                    self._sidecars[name] = MainLog(
                        path,
                        durable=True,
                        min_chunk=SIDECAR_CHUNK,
                        end=len(content),
                        probe=not direct,
                    )
        except BaseException as exc:
            if sidecar is not None and self._sidecars.get(name) is not sidecar:
                sidecar.abandon()  # (idempotent) its descriptors are not left open
            if isinstance(exc, OSError):
                self._failed = exc
                raise StorageFailed(f"{path}: sticky rewrite failed: {exc}") from exc
            raise
        self._tables.truncate_sticky(cid)


class _Retirer:
    """Unlinks retired task sidecars in a thread of its own, off the event loop.

    A sidecar is retired once the main record that makes its task terminal is published (and,
    with fsync, durable): from then on main proves the retirement and ``open`` ignores and
    unlinks a sidecar that is still there, so the unlink needs neither to happen inside the
    commit nor to be made durable (no directory fsync). On ext4 an unlink costs about as much as
    an fsync (it waits on the journal); done inline it stalled the event loop once per task.
    :meth:`drain` (``close``) waits until every queued unlink has run and ends the thread;
    :meth:`wait` waits for the unlinks queued so far and keeps it.
    """

    __slots__ = ("_queue", "_thread")

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[str | threading.Event | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="jsonl-retire", daemon=True)
        self._thread.start()

    def unlink(self, path: str) -> None:
        self._queue.put(path)

    def drain(self) -> None:
        self._queue.put(None)
        self._thread.join()

    def wait(self) -> None:
        done = threading.Event()
        self._queue.put(done)
        done.wait()

    def _run(self) -> None:
        while (path := self._queue.get()) is not None:
            if isinstance(path, threading.Event):
                path.set()
                continue
            try:
                os.unlink(path)
            except OSError:
                pass  # harmless: main proves the retirement, open unlinks it later


class _Commit:
    __slots__ = ("max_id", "seq", "staged")

    def __init__(self, staged: Staged, seq: int, max_id: int) -> None:
        self.staged = staged
        self.seq = seq
        self.max_id = max_id
