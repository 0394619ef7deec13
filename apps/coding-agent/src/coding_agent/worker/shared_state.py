"""What a worker keeps beside the commits when they are in PostgreSQL, so that it follows the
session to the next server that serves it (issue 23, failover; docs/server.md#failover).

A session folder holds more than the commits. With ``--storage postgresql://…`` this module
moves into the session's blobs (:meth:`pico3.PostgresStorage.put_blobs`: fenced by the lease,
so a worker whose lease was taken stores nothing, like its commits) the part an adopting
server's worker needs::

    coding-agent/file-history/blobs/<sha256>     pre-images for /rewind (DatabaseHistoryStore)
    coding-agent/file-history/journal/<seq>      one journal line each
    coding-agent/processes/<key>                 where a background job's process was started
    coding-agent/launch-settings                 session.json's launch settings, as last changed

* **File history**: :class:`DatabaseHistoryStore` is :class:`~.file_history.FileHistory`'s
  store. A pre-image is stored (and the journal line after it) before the tool writes the file,
  as in the folder. One content holds at most :data:`pico3.BLOB_LIMIT` bytes (16 MiB): a larger
  pre-image is not kept, and ``/rewind`` reports that file (``lost``) instead of restoring it.
  These blobs are the session's own, not shared with the project's other sessions as on disk
  (the database's blobs belong to one session, written under its lease); a ``bash`` snapshot
  copies as little here as there (what git does not hold, within the same caps).
* **Process records**: :class:`SharedProcessHost` wraps the worker's
  :class:`~pico3.LocalProcessHost` and records, before a job's process starts, on which machine
  (host name and process-host folder) it runs. A worker that finds a job's key unknown to its
  own host but recorded on another machine answers ``lost``: ``pi.job`` fails the job
  *interrupted* (its notice and ``job`` status say so) and never starts it again, although
  ``rerun`` is set for a key the host simply forgot. The process's output files stay on the
  machine that ran it; what the job had mirrored into its task slot is in the commits.
* **Launch settings**: the worker stores them whenever ``/model`` or ``/thinking`` changes
  them (:func:`store_settings`); a worker starting on PostgreSQL reads them first
  (:func:`carried_settings`) and writes them into its own ``session.json``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import anyio
import anyio.from_thread
import msgspec

from chord import BACKGROUND, Context
from coding_agent.session_files.folders import (
    LaunchSettings,
    Session,
    load_session,
    update_settings,
)
from coding_agent.worker.file_history import FileChange, decode_journal
from pico3 import (
    BLOB_LIMIT,
    LocalProcessHost,
    PostgresStorage,
    ProcessSpec,
    ProcessStatus,
    StorageUnreachable,
    read_blob,
)

__all__ = [
    "FILE_HISTORY",
    "LAUNCH_SETTINGS",
    "PROCESSES",
    "DatabaseHistoryStore",
    "SharedProcessHost",
    "StorageBox",
    "carried_settings",
    "store_settings",
]

FILE_HISTORY = "coding-agent/file-history/"
PROCESSES = "coding-agent/processes/"
LAUNCH_SETTINGS = "coding-agent/launch-settings"

_log = logging.getLogger("coding_agent.worker")
_ENCODER = msgspec.json.Encoder()


class StorageBox:
    """The session's :class:`~pico3.PostgresStorage` of the open harness (the harness makes
    it, through :meth:`make`, each time it opens)."""

    def __init__(self, make: Callable[[], PostgresStorage]) -> None:
        self._make = make
        self.current: PostgresStorage | None = None

    def make(self) -> PostgresStorage:
        self.current = self._make()
        return self.current

    def storage(self) -> PostgresStorage:
        if self.current is None:
            raise RuntimeError("the session's storage is not open yet")
        return self.current


class DatabaseHistoryStore:
    """:class:`~.file_history.JournalStore` on the session's blobs. It runs in worker threads
    (like the folder store) and calls the storage on the event loop; it is the session's only
    writer (the lease), so what it read once it keeps in memory and extends."""

    def __init__(self, box: StorageBox) -> None:
        self._box = box
        self._known: set[str] | None = None
        self._journal: list[FileChange] | None = None

    def _call(self, method: Callable[..., Any], *args: Any) -> Any:
        return anyio.from_thread.run(method, *args, BACKGROUND)

    def _names(self) -> set[str]:
        if self._known is None:
            prefix = f"{FILE_HISTORY}blobs/"
            found = self._call(_names_under, self._box.storage(), prefix)
            self._known = {name.removeprefix(prefix) for name in found}
        return self._known

    def has(self, digest: str) -> bool:
        return digest in self._names()

    def put(self, blobs: Mapping[str, bytes]) -> None:
        known = self._names()
        kept = {d: data for d, data in blobs.items() if len(data) <= BLOB_LIMIT}
        if len(kept) < len(blobs):
            _log.warning("file history: a content of over %d bytes is not kept", BLOB_LIMIT)
        batch: dict[str, bytes] = {}
        size = 0
        for digest, data in kept.items():  # batches of at most BLOB_LIMIT bytes
            if batch and size + len(data) > BLOB_LIMIT:
                self._call(self._box.storage().put_blobs, batch)
                batch, size = {}, 0
            batch[f"{FILE_HISTORY}blobs/{digest}"] = data
            size += len(data)
        if batch:
            self._call(self._box.storage().put_blobs, batch)
        known.update(kept)

    def get(self, digest: str) -> bytes:
        data = self._call(self._box.storage().get_blob, f"{FILE_HISTORY}blobs/{digest}")
        if data is None:
            raise FileNotFoundError(f"file history: no content {digest} in the database")
        return data

    def append(self, changes: Sequence[FileChange]) -> None:
        journal = self.changes_cached()
        lines = {f"{FILE_HISTORY}journal/{c.seq:012d}": _ENCODER.encode(c) for c in changes}
        self._call(self._box.storage().put_blobs, lines)
        journal.extend(changes)

    def changes_cached(self) -> list[FileChange]:
        if self._journal is None:
            found = self._call(self._box.storage().blobs, f"{FILE_HISTORY}journal/")
            self._journal = decode_journal(found.values())  # by name: by seq
        return self._journal

    def changes(self) -> list[FileChange]:
        return list(self.changes_cached())


async def _names_under(storage: PostgresStorage, prefix: str, ctx: Context) -> list[str]:
    return list(await storage.blobs(prefix, ctx, data=False))


class SharedProcessHost:
    """The worker's :class:`~pico3.LocalProcessHost` (:attr:`local`) with each process's
    machine recorded in the session's blobs (see the module docstring)."""

    def __init__(self, local: LocalProcessHost, box: StorageBox) -> None:
        self.local = local
        self._box = box
        self.machine = f"{socket.gethostname()}:{os.path.realpath(local.state_dir)}"

    def _name(self, key: str) -> str:
        return PROCESSES + quote(key, safe="")

    async def _elsewhere(self, key: str, ctx: Context) -> dict[str, Any] | None:
        """The record of ``key`` when it names another machine than this one."""
        storage = self._box.current
        if storage is None:
            return None
        raw = await storage.get_blob(self._name(key), ctx)
        if raw is None:
            return None
        try:
            record = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(record, dict) or record.get("machine") == self.machine:
            return None
        return record  # pyright: ignore[reportUnknownVariableType]

    async def start(self, key: str, spec: ProcessSpec, ctx: Context) -> None:
        if (await self.local.status(key, ctx)).state == "unknown":
            if await self._elsewhere(key, ctx) is not None:
                return  # started on another machine: status() answers lost, never again here
            storage = self._box.current
            if storage is not None:  # where it runs, before it runs (fenced by the lease)
                mine = {"machine": self.machine, "pid": os.getpid(), "command": spec.command}
                await storage.put_blobs({self._name(key): _ENCODER.encode(mine)}, ctx)
        await self.local.start(key, spec, ctx)

    async def status(self, key: str, ctx: Context) -> ProcessStatus:
        found = await self.local.status(key, ctx)
        if found.state != "unknown":
            return found
        record = await self._elsewhere(key, ctx)
        if record is None:
            return found
        return ProcessStatus(state="lost", detail=_where(record))

    async def kill(self, key: str, signal: Any, ctx: Context) -> None:
        await self.local.kill(key, signal, ctx)  # one of another machine is out of reach

    async def wait(self, key: str, ctx: Context) -> ProcessStatus:
        if (await self.local.status(key, ctx)).state == "unknown":
            return await self.status(key, ctx)
        return await self.local.wait(key, ctx)


def _where(record: Mapping[str, Any]) -> str:
    machine = str(record.get("machine", "?"))
    return (
        f"the process was started on {machine} by the worker pid {record.get('pid', '?')}, "
        "whose server is gone: this server cannot reach it (it is lost)"
    )


async def store_settings(box: StorageBox, session: Session, ctx: Context) -> None:
    """Store ``session.json``'s launch settings, as they are now, in the session's blobs."""
    storage = box.current
    if storage is None:
        return
    current = load_session(session.path).settings
    await storage.put_blobs({LAUNCH_SETTINGS: msgspec.json.encode(current)}, ctx)


def carried_settings(session: Session, url: str) -> Session:
    """``session`` with the launch settings stored in the database (by a worker of any server)
    written into its ``session.json`` first; as it is when none are stored or they cannot be
    read (the storage's own open then reports the database)."""
    try:
        raw = anyio.run(read_blob, url, session.id, LAUNCH_SETTINGS)
        if raw is None:
            return session
        settings = msgspec.json.decode(raw, type=LaunchSettings)
    except StorageUnreachable:
        return session  # the storage's open says so, in its one line
    except Exception as error:
        _log.warning("could not read the session's launch settings from the database: %s", error)
        return session
    if settings == session.settings:
        return session
    return update_settings(session, settings)
