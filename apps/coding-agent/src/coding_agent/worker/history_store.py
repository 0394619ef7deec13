"""Where file history keeps its contents and journal: the :class:`JournalStore` protocol and
:class:`FolderStore`, the store of a JSONL session (see :mod:`.file_history` for what is kept
and when).

A JSONL session's journal is ``<session>/file-history/journal.jsonl``; the contents it names are
kept once per project, in a content-addressed folder every session of that project shares
(:func:`project_blobs`)::

    <state>/coding-agent/projects/<name>-<hash>/file-history/blobs/<sha256>

A blob's name is the SHA-256 of its bytes, so two sessions storing the same content store it
once, and a blob that exists is whole (it is written to a temporary and renamed). Blobs an older
version stored in the session folder (``<session>/file-history/blobs``) are still read there.
Folders ``0700``, files ``0600``. Blobs are never deleted: removing a session leaves the
project's blobs (delete ``projects/<name>-<hash>`` when no session of the project is left).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import msgspec

from coding_agent.session_files.private import PRIVATE_FILE, private_tree
from pico3 import fsync_dir, write_atomic

__all__ = ["FileChange", "FolderStore", "JournalStore", "decode_journal", "project_blobs"]


class FileChange(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One journal line (see the module docstring)."""

    seq: int
    conversation: int
    anchor: int
    path: str
    before: str | None
    after: str | None
    tool: str = "edit"
    time: float = 0.0


def project_blobs(sessions: str | os.PathLike[str], cwd: str | os.PathLike[str]) -> Path:
    """The content store every session of project ``cwd`` shares, beside the ``sessions``
    folder: ``<state>/coding-agent/projects/<name>-<hash of the path>/file-history/blobs``."""
    real = os.path.realpath(cwd)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(real))[:40] or "root"
    key = hashlib.sha256(os.fsencode(real)).hexdigest()[:16]
    return Path(sessions).parent / "projects" / f"{name}-{key}" / "file-history" / "blobs"


class JournalStore(Protocol):
    """Where a :class:`FileHistory` keeps its blobs and journal: the session folder
    (:class:`FolderStore`, the default), or the session's blobs in PostgreSQL
    (:class:`coding_agent.worker.shared_state.DatabaseHistoryStore`). Every method may block
    (the history runs in a worker thread)."""

    def has(self, digest: str) -> bool:
        """Whether the content ``digest`` is stored (so it can be restored)."""
        ...

    def put(self, blobs: Mapping[str, bytes]) -> None:
        """Store contents by hash, durably, before returning (a store may leave out one over
        its size bound: :meth:`has` then says so)."""
        ...

    def get(self, digest: str) -> bytes:
        """The content ``digest`` (raises ``FileNotFoundError`` when it is not stored)."""
        ...

    def append(self, changes: Sequence[FileChange]) -> None:
        """Append journal lines, durably, before returning."""
        ...

    def changes(self) -> list[FileChange]:
        """Every journal line, oldest first."""
        ...


class FolderStore:
    """The journal in ``<session>/file-history``, the blobs in ``blobs`` (the project's shared
    store, :func:`project_blobs`) or else ``<session>/file-history/blobs``; blobs an older
    version stored in the session folder are still found there (see the module docstring)."""

    def __init__(
        self,
        folder: str | os.PathLike[str],
        *,
        fsync: bool = True,
        blobs: str | os.PathLike[str] | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.own_blobs = self.folder / "blobs"
        self.blobs = Path(blobs) if blobs is not None else self.own_blobs
        self.journal_path = self.folder / "journal.jsonl"
        self._fsync = fsync
        self._encoder = msgspec.json.Encoder()

    def _ensure(self) -> None:
        if not self.folder.is_dir():
            private_tree(self.folder.parent, self.folder)  # 0700: pre-images are the user's code
            if self._fsync:
                fsync_dir(self.folder.parent)

    def _ensure_blobs(self) -> None:
        if not self.blobs.is_dir():
            if self.blobs == self.own_blobs:
                self._ensure()
            private_tree(self.blobs.parent, self.blobs)
            if self._fsync:
                fsync_dir(self.blobs.parent)

    def _where(self, digest: str) -> Path:
        path = self.blobs / digest
        if self.blobs != self.own_blobs and not path.exists():
            legacy = self.own_blobs / digest  # a session of an older version
            if legacy.exists():
                return legacy
        return path

    def has(self, digest: str) -> bool:
        return self._where(digest).exists()

    def put(self, blobs: Mapping[str, bytes]) -> None:
        for digest, data in blobs.items():
            self._ensure_blobs()
            write_atomic(self.blobs / digest, data, mode=PRIVATE_FILE, fsync=self._fsync)

    def get(self, digest: str) -> bytes:
        return self._where(digest).read_bytes()

    def append(self, changes: Sequence[FileChange]) -> None:
        self._ensure()
        line = b"".join(self._encoder.encode(change) + b"\n" for change in changes)
        fd = os.open(self.journal_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE)
        with open(fd, "ab") as file:
            file.write(line)
            if self._fsync:
                file.flush()
                os.fsync(file.fileno())

    def changes(self) -> list[FileChange]:
        try:
            raw = self.journal_path.read_bytes()
        except FileNotFoundError:
            return []
        return decode_journal(raw.split(b"\n"))


def decode_journal(lines: Iterable[bytes]) -> list[FileChange]:
    """The journal lines among ``lines`` (a line a crash cut short is ignored)."""
    decoder = msgspec.json.Decoder(FileChange)
    out: list[FileChange] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            out.append(decoder.decode(line))
        except msgspec.DecodeError:
            continue  # the torn tail of a crash mid-append
    return out
