"""File pre-images: what ``write`` and ``edit`` changed, recorded before the change, for ``/rewind``.

Every ``write`` and ``edit`` calls :meth:`FileHistory.record` inside the file's lock, right before
it writes. That stores the file's current content (its *pre-image*) and appends one journal line
naming the file, the content it had (``before``), the content about to be written (``after``) and
where in the session the change belongs (the conversation and the assistant entry that asked
for it). Both are on stable storage (``fsync``) before the tool touches the file, so a
``kill -9`` at any instant leaves a journal that can undo what happened::

    <session>/file-history/journal.jsonl        one JSON object per change, in order
    <state>/coding-agent/projects/<name>-<hash>/file-history/blobs/<sha256>
                                                 file contents, once per project

Contents are content-addressed and shared by every session of the project
(:mod:`.history_store`, :func:`project_blobs`): a second session, or a later command, that meets
a content already stored stores nothing. Blobs an older version kept in the session folder
(``<session>/file-history/blobs``) are still read there. (Folders ``0700``, files ``0600``.)
With the session's commits in PostgreSQL the same blobs and lines are the session's blobs in
the database instead (:class:`coding_agent.worker.shared_state.DatabaseHistoryStore`, a
:class:`JournalStore`), so the worker of another server finds them after a failover; those
blobs are per session (the database's blobs belong to one session, fenced by its lease, so two
sessions cannot share them), and one content holds at most 16 MiB (:data:`pico3.BLOB_LIMIT`): a
larger pre-image is not kept, and rewinding reports that file (action ``lost``) and leaves it as
it is. ``write`` and ``edit`` pre-images have no other bound (they are files the session
touched).

A journal line::

    {"seq": 3, "conversation": 1, "anchor": 12, "path": "/abs/src/app.py",
     "before": "9f2c…" | null, "after": "41aa…", "tool": "edit", "time": 1796158278.1}

``before`` is ``null`` when the file did not exist; ``anchor`` is the entry the change follows
(the assistant entry whose tool call made it, or the newest entry when ``/rewind`` restored a
file, which is journalled the same way so a later rewind knows the file's state).

``bash`` cannot say what it will change, so around a (foreground) command the worker takes a
snapshot of the project (:meth:`FileHistory.snapshot`: size, mtime and SHA-256 of every file
``.gitignore`` does not exclude, a file unchanged in size and mtime not read again) before and
after, and journals each file that differs (:meth:`FileHistory.record_changes`, tool ``bash``)
once the command is done. The content each file had before must be restorable, yet copying the
whole tree costs as much disk as the checkout, so the snapshot before a command copies only
what nothing else holds:

* a content already in the project's store: nothing (a later command or session costs nothing);
* a file whose content is exactly the blob git's index holds for it (the snapshot hashes it as
  git does and compares, :mod:`.git_blobs`): nothing. Only if the command then changes the
  file is that blob read back from git (``git show``, through :func:`pico3.run_git`, which
  runs nothing the repository configures) and stored, before the journal line. In a clean
  checkout the first command stores only the files it changed;
* any other file (untracked, modified since ``git add``, or no git repository): copied into the
  store, if it is at most :data:`SNAPSHOT_FILE_CAP` (1 MiB) and the snapshots of this worker
  run have copied at most :data:`SNAPSHOT_SESSION_CAP` (16 MiB) in all.

Past a cap the file is not copied; if the command changes it, rewinding past that change names
it as not restorable (action ``lost``, "its earlier content was not kept") and leaves it as it
is. The same happens to a git-held content git no longer has when the command is done (the
command deleted ``.git``, or dropped the blob and pruned it at once). The journal lines come
after the effect, so a crash during the command loses what it changed; a project over
:data:`SNAPSHOT_MAX_FILES` files or :data:`SNAPSHOT_MAX_BYTES` bytes is not snapshotted.

Rewinding (:meth:`FileHistory.plan` then :meth:`FileHistory.restore`) to a user prompt ``P`` of a
branch takes the journal lines of that branch (its conversation, and each ancestor up to the
point it was forked at) anchored after ``P``. For each file the earliest line's ``before`` is the
content to restore, and the newest line says what the agent left there: a file whose current
content is neither that line's ``after`` nor its ``before`` (a crash between the journal line and
the write leaves the ``before``) was changed outside the agent since, and is a *conflict*:
restored only when the caller names it in ``overwrite``.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec

from coding_agent.worker.git_blobs import git_index, git_oid, read_git_blobs
from coding_agent.worker.history_store import (
    FileChange,
    FolderStore,
    JournalStore,
    decode_journal,
    project_blobs,
)
from coding_agent.worker.tools.exact import remove_exact, write_exact

__all__ = [
    "FileChange",
    "FileHistory",
    "FilePlan",
    "FolderStore",
    "JournalStore",
    "Lineage",
    "decode_journal",
    "project_blobs",
]

SNAPSHOT_MAX_FILES = 5_000
"""A project with more (not ignored) files than this is not snapshotted around ``bash``."""
SNAPSHOT_MAX_BYTES = 64 * 1024 * 1024
"""Nor one whose (not ignored) files hold more bytes than this."""
SNAPSHOT_FILE_CAP = 1024 * 1024
"""The largest file a ``bash`` snapshot copies (one whose content git does not hold)."""
SNAPSHOT_SESSION_CAP = 16 * 1024 * 1024
"""The most bytes the ``bash`` snapshots of one worker run of a session copy in all."""

Lineage = Mapping[int, int | None]
"""A branch's path: conversation id -> the newest entry id of it the branch sees (``None``: all,
for the branch's own conversation)."""

Action = Literal["restore", "delete", "unchanged", "conflict", "lost"]


class FilePlan(msgspec.Struct, frozen=True):
    """What rewinding does to one file."""

    path: str
    action: Action
    target: str | None
    """The hash to restore (``None``: the file did not exist, so it is deleted)."""
    current: str | None
    """The file's hash now (``None``: absent)."""
    detail: str = ""

    def json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "action": self.action,
            "target": self.target,
            "current": self.current,
            "detail": self.detail,
        }


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as file:
            return file.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except IsADirectoryError:
        return None


class FileHistory:
    """The pre-image store of one session (journal in ``<session>/file-history``, contents in
    ``blobs``, the project's shared store, else beside the journal; or all in ``store``).
    ``file_cap`` and ``session_cap`` bound what ``bash`` snapshots copy (module docstring)."""

    def __init__(
        self,
        folder: str | os.PathLike[str],
        *,
        fsync: bool = True,
        store: JournalStore | None = None,
        blobs: str | os.PathLike[str] | None = None,
        file_cap: int = SNAPSHOT_FILE_CAP,
        session_cap: int = SNAPSHOT_SESSION_CAP,
    ) -> None:
        self.folder = Path(folder)
        self.journal_path = self.folder / "journal.jsonl"
        folder_store = FolderStore(folder, fsync=fsync, blobs=blobs)
        self.blobs = folder_store.blobs
        self._store: JournalStore = store if store is not None else folder_store
        self._seq: int | None = None
        self._seq_lock = threading.Lock()
        self._last_snapshot: dict[str, tuple[int, int, str]] = {}
        self.file_cap = file_cap
        self.session_cap = session_cap
        self.copied = 0
        """Bytes the ``bash`` snapshots of this run copied (bounded by ``session_cap``)."""
        self._kept: set[str] = set()  # contents known to be in the store
        self._oids: dict[str, str] = {}  # content hash -> git's blob id of it
        self._from_git: dict[str, tuple[str, str, int]] = {}  # hash -> (root, blob id, size)

    # -- recording -----------------------------------------------------------------------
    def store_blob(self, data: bytes) -> str:
        """Store ``data`` under its hash (once) and return the hash."""
        digest = _digest(data)
        if not self._store.has(digest):
            self._store.put({digest: data})
        return digest

    def blob(self, digest: str) -> bytes:
        """The content stored under ``digest``."""
        return self._store.get(digest)

    def kept(self, digest: str) -> bool:
        """Whether the content ``digest`` is stored (a store with a size bound leaves out
        larger contents: such a file is reported, never restored)."""
        return self._store.has(digest)

    def _next_seq(self) -> int:
        # Parallel tool calls record from several threads at once: each line gets its own seq
        # (the database store names a line by it, so a duplicate would replace the other).
        with self._seq_lock:
            if self._seq is None:
                changes = self.changes()
                self._seq = max((change.seq for change in changes), default=0)
            self._seq += 1
            return self._seq

    def _append(self, *changes: FileChange) -> None:
        self._store.append(changes)

    def record(
        self,
        path: str | os.PathLike[str],
        new: bytes | None,
        *,
        conversation: int,
        anchor: int,
        tool: str,
    ) -> FileChange:
        """Durably record that ``path`` is about to become ``new`` (``None``: deleted).

        The current content is stored as a blob first, then the journal line; only then may
        the caller change the file."""
        change = self._change(path, new, conversation=conversation, anchor=anchor, tool=tool)
        self._append(change)
        return change

    def _change(
        self,
        path: str | os.PathLike[str],
        new: bytes | None,
        *,
        conversation: int,
        anchor: int,
        tool: str,
    ) -> FileChange:
        """The journal line for ``path`` becoming ``new``, its pre-image stored (not appended)."""
        resolved = os.path.realpath(path)
        old = _read(resolved)
        before = None if old is None else self.store_blob(old)
        after = None if new is None else _digest(new)
        return FileChange(
            seq=self._next_seq(),
            conversation=conversation,
            anchor=anchor,
            path=resolved,
            before=before,
            after=after,
            tool=tool,
            time=time.time(),
        )

    # -- bash: before/after snapshots ----------------------------------------------------
    def snapshot(
        self,
        root: str | os.PathLike[str],
        *,
        max_files: int = SNAPSHOT_MAX_FILES,
        max_bytes: int = SNAPSHOT_MAX_BYTES,
        keep: bool = True,
    ) -> dict[str, tuple[int, int, str]] | None:
        """Size, mtime and content hash of every file under ``root`` that ``.gitignore`` does
        not exclude; ``None`` when the project is over ``max_files`` files or ``max_bytes``
        bytes (then bash is not tracked). A file whose size and mtime match the previous
        snapshot is not read again.

        With ``keep`` (the snapshot before a command) each content is made restorable: already
        in the store, or exactly the blob git's index holds for the file (nothing copied: read
        back from git by :meth:`record_changes` only if the command changes the file), or else
        copied into the store when it is at most ``file_cap`` bytes and the run's copies stay
        within ``session_cap``. A content that is none of these is not kept: rewinding a change
        to it reports the file ``lost``."""
        from pico3 import walk_files

        base = Path(os.path.realpath(root))
        index = git_index(base) if keep else {}
        previous = self._last_snapshot
        out: dict[str, tuple[int, int, str]] = {}
        pending: dict[str, bytes] = {}  # new contents, stored together (one round trip)
        total = 0
        copied = self.copied  # what the run had copied: restored when nothing is stored
        for relative in walk_files(base, max_entries=max_files * 4):
            if len(out) >= max_files:
                self.copied = copied
                return None
            path = str(base / relative)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode):
                continue
            total += info.st_size
            if total > max_bytes:
                self.copied = copied
                return None
            known = previous.get(path)
            data: bytes | None = None
            if known is not None and known[:2] == (info.st_size, info.st_mtime_ns):
                out[path] = known
            else:
                data = _read(path)
                if data is None:
                    continue
                out[path] = (info.st_size, info.st_mtime_ns, _digest(data))
            if keep:
                self._keep(str(base), path, index.get(relative), out[path], data, pending)
        if pending:
            self._store.put(pending)
            self._kept.update(pending)
        self._last_snapshot = out
        return out

    def _keep(
        self,
        root: str,
        path: str,
        oid: str | None,
        entry: tuple[int, int, str],
        data: bytes | None,
        pending: dict[str, bytes],
    ) -> None:
        """Make the content ``entry`` of ``path`` restorable, if the caps allow (see
        :meth:`snapshot`): git's blob ``oid`` (the index's, if any) or a copy in ``pending``."""
        size, _mtime, digest = entry
        if digest in self._kept or digest in pending:
            return
        if self._store.has(digest):
            self._kept.add(digest)
            return
        if oid is not None:
            if digest not in self._oids:
                data = data if data is not None else _read(path)
                if data is None or _digest(data) != digest:
                    return  # changed since it was hashed: the next snapshot sees it
                self._oids[digest] = git_oid(data)
            if self._oids[digest] == oid:
                self._from_git[digest] = (root, oid, size)
                return
        if size > self.file_cap or self.copied + size > self.session_cap:
            return  # not kept: a rewind past a change to it says so
        data = data if data is not None else _read(path)
        if data is None or _digest(data) != digest:
            return
        pending[digest] = data
        self.copied += size

    def _fetch(self, digests: Iterable[str]) -> None:
        """Copy into the store, from git, the contents among ``digests`` that only git holds
        (what a command just changed). One git no longer has stays out (rewind: ``lost``)."""
        wanted: dict[str, dict[str, int]] = {}  # root -> {blob id: size}
        by_oid: dict[str, str] = {}
        for digest in set(digests):
            source = self._from_git.get(digest)
            if source is None or digest in self._kept or self._store.has(digest):
                continue
            root, oid, size = source
            wanted.setdefault(root, {})[oid] = size
            by_oid[oid] = digest
        pending: dict[str, bytes] = {}
        for root, sizes in wanted.items():
            for oid, data in read_git_blobs(root, sizes).items():
                if _digest(data) == by_oid[oid]:
                    pending[by_oid[oid]] = data
        if pending:
            self._store.put(pending)
            self._kept.update(pending)

    def record_changes(
        self,
        before: dict[str, tuple[int, int, str]],
        after: dict[str, tuple[int, int, str]],
        *,
        conversation: int,
        anchor: int,
        tool: str = "bash",
    ) -> list[FileChange]:
        """Journal every file that differs between two snapshots (one fsync), each earlier
        content that only git held copied into the store first; returns them."""
        changes: list[FileChange] = []
        for path in sorted(set(before) | set(after)):
            old = before.get(path)
            new = after.get(path)
            old_hash = old[2] if old is not None else None
            new_hash = new[2] if new is not None else None
            if old_hash == new_hash:
                continue
            changes.append(
                FileChange(
                    seq=self._next_seq(),
                    conversation=conversation,
                    anchor=anchor,
                    path=path,
                    before=old_hash,
                    after=new_hash,
                    tool=tool,
                    time=time.time(),
                )
            )
        if changes:
            self._fetch(change.before for change in changes if change.before is not None)
            self._append(*changes)
        return changes

    # -- reading -------------------------------------------------------------------------
    def changes(self) -> list[FileChange]:
        """Every journal line, oldest first (a line a crash cut short is ignored)."""
        return self._store.changes()

    @staticmethod
    def on_branch(changes: Iterable[FileChange], lineage: Lineage) -> list[FileChange]:
        """The changes that belong to the branch whose path is ``lineage``."""
        out: list[FileChange] = []
        for change in changes:
            if change.conversation not in lineage:
                continue
            bound = lineage[change.conversation]
            if bound is None or change.anchor <= bound:
                out.append(change)
        return out

    def plan(self, lineage: Lineage, after: int) -> list[FilePlan]:
        """What rewinding the branch ``lineage`` to just before entry ``after`` does to files."""
        branch = self.on_branch(self.changes(), lineage)
        first: dict[str, FileChange] = {}
        for change in branch:
            if change.anchor > after and change.path not in first:
                first[change.path] = change
        newest: dict[str, FileChange] = {}
        for change in branch:
            if change.path in first:
                newest[change.path] = change
        plans: list[FilePlan] = []
        for path, earliest in first.items():
            latest = newest[path]
            data = _read(path)
            current = None if data is None else _digest(data)
            target = earliest.before
            if current == target:
                plans.append(FilePlan(path, "unchanged", target, current, "already as it was"))
            elif target is not None and not self._store.has(target):
                detail = "its earlier content was not kept (over the size cap): not restored"
                plans.append(FilePlan(path, "lost", target, current, detail))
            elif current in (latest.after, latest.before):
                action: Action = "delete" if target is None else "restore"
                plans.append(FilePlan(path, action, target, current))
            else:
                detail = (
                    "deleted outside the agent" if current is None else "changed outside the agent"
                )
                plans.append(FilePlan(path, "conflict", target, current, detail))
        plans.sort(key=lambda plan: plan.path)
        return plans

    def restore(
        self,
        plans: Sequence[FilePlan],
        *,
        conversation: int,
        anchor: int,
        overwrite: Iterable[str] = (),
    ) -> tuple[list[str], list[str]]:
        """Carry out ``plans``: returns ``(restored, kept)`` paths. A conflict is restored only
        when its path is in ``overwrite``. Each restore is journalled first (tool ``rewind``),
        so a later rewind knows the file's state and a restore can itself be rewound."""
        chosen = set(overwrite)
        restored: list[str] = []
        kept: list[str] = []
        todo: list[tuple[FilePlan, bytes | None]] = []
        changes: list[FileChange] = []
        for plan in plans:
            if plan.action == "unchanged":
                continue
            if plan.action == "lost":  # nothing to restore it from: it stays as it is
                kept.append(plan.path)
                continue
            if plan.action == "conflict" and plan.path not in chosen:
                kept.append(plan.path)
                continue
            new = None if plan.target is None else self.blob(plan.target)
            changes.append(
                self._change(
                    plan.path, new, conversation=conversation, anchor=anchor, tool="rewind"
                )
            )
            todo.append((plan, new))
        if changes:
            self._append(*changes)  # every pre-image journalled (one fsync) before any file moves
        for plan, new in todo:
            # exactly at the recorded (real) path: a folder on the way that is a symlink now
            # (planted by a command since) fails the restore of that file, nothing is written
            if new is None:
                remove_exact(plan.path)
            else:  # atomic, synced; a restored file keeps its permission bits
                write_exact(plan.path, new, create_folders=True)
            restored.append(plan.path)
        return restored, kept
