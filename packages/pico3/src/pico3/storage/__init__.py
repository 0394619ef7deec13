"""pico3 storage: the interface every backend implements, and the two backends.

* :mod:`pico3.storage.records`: the durable records and the six writes of a batch (msgspec).
* :mod:`pico3.storage.base`: the :class:`Storage` protocol and the storage errors.
* :class:`MemoryStorage`: in memory, reopenable; the reference backend.
* :class:`JsonlStorage`: a directory of append-only JSONL files with crash recovery.
* :class:`PostgresStorage`: sessions in a PostgreSQL database (psycopg 3), with leases.
* :func:`stored_writes`: the writes of a JSONL file's bytes, for read-only tools.

Storage knows nothing of the kernel: it stores what it is given, atomically, and reads it back.

Each name is bound from its module at first use (PEP 562, as :mod:`pico3` does): the view's
records need :mod:`pico3.storage.records` alone, so a client decoding views (the TUI before its
first frame) does not import the JSONL and PostgreSQL backends.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from chord.lazy import lazy_exports as _lazy_exports

if _TYPE_CHECKING:  # bound at first use (_LAZY below)
    from pico3.storage._lines import stored_writes
    from pico3.storage.base import (
        CorruptStorage,
        InvalidBatch,
        LeaseLost,
        SchemaNotMigrated,
        SchemaTooNew,
        Storage,
        StorageClosed,
        StorageError,
        StorageFailed,
        StorageInUse,
        StorageUnreachable,
    )
    from pico3.storage.jsonl import JsonlStorage
    from pico3.storage.memory import MemoryStorage
    from pico3.storage.pg_blobs import BLOB_LIMIT, read_blob
    from pico3.storage.pg_lease import LeaseRenewer
    from pico3.storage.postgres import PostgresStorage, migrate_database
    from pico3.storage.records import (
        UNSET,
        Conversation,
        ConversationWrite,
        DocLog,
        DocRef,
        DocWrite,
        Entry,
        EntryScan,
        EntryWrite,
        Input,
        InputWrite,
        Ops,
        Parent,
        SectionSeed,
        Task,
        TaskPatch,
        TaskPatchWrite,
        TaskScan,
        TaskWrite,
        Write,
        is_base,
    )

__all__ = [
    "BLOB_LIMIT",
    "UNSET",
    "Conversation",
    "ConversationWrite",
    "CorruptStorage",
    "DocLog",
    "DocRef",
    "DocWrite",
    "Entry",
    "EntryScan",
    "EntryWrite",
    "Input",
    "InputWrite",
    "InvalidBatch",
    "JsonlStorage",
    "LeaseLost",
    "LeaseRenewer",
    "MemoryStorage",
    "Ops",
    "Parent",
    "PostgresStorage",
    "SchemaNotMigrated",
    "SchemaTooNew",
    "SectionSeed",
    "Storage",
    "StorageClosed",
    "StorageError",
    "StorageFailed",
    "StorageInUse",
    "StorageUnreachable",
    "Task",
    "TaskPatch",
    "TaskPatchWrite",
    "TaskScan",
    "TaskWrite",
    "Write",
    "is_base",
    "migrate_database",
    "read_blob",
    "stored_writes",
]

_LAZY: dict[str, str] = {
    "stored_writes": "pico3.storage._lines",
    "CorruptStorage": "pico3.storage.base",
    "InvalidBatch": "pico3.storage.base",
    "LeaseLost": "pico3.storage.base",
    "SchemaNotMigrated": "pico3.storage.base",
    "SchemaTooNew": "pico3.storage.base",
    "Storage": "pico3.storage.base",
    "StorageClosed": "pico3.storage.base",
    "StorageError": "pico3.storage.base",
    "StorageFailed": "pico3.storage.base",
    "StorageInUse": "pico3.storage.base",
    "StorageUnreachable": "pico3.storage.base",
    "JsonlStorage": "pico3.storage.jsonl",
    "MemoryStorage": "pico3.storage.memory",
    "BLOB_LIMIT": "pico3.storage.pg_blobs",
    "read_blob": "pico3.storage.pg_blobs",
    "LeaseRenewer": "pico3.storage.pg_lease",
    "PostgresStorage": "pico3.storage.postgres",
    "migrate_database": "pico3.storage.postgres",
    "UNSET": "pico3.storage.records",
    "Conversation": "pico3.storage.records",
    "ConversationWrite": "pico3.storage.records",
    "DocLog": "pico3.storage.records",
    "DocRef": "pico3.storage.records",
    "DocWrite": "pico3.storage.records",
    "Entry": "pico3.storage.records",
    "EntryScan": "pico3.storage.records",
    "EntryWrite": "pico3.storage.records",
    "Input": "pico3.storage.records",
    "InputWrite": "pico3.storage.records",
    "Ops": "pico3.storage.records",
    "Parent": "pico3.storage.records",
    "SectionSeed": "pico3.storage.records",
    "Task": "pico3.storage.records",
    "TaskPatch": "pico3.storage.records",
    "TaskPatchWrite": "pico3.storage.records",
    "TaskScan": "pico3.storage.records",
    "TaskWrite": "pico3.storage.records",
    "Write": "pico3.storage.records",
    "is_base": "pico3.storage.records",
}
"""Public name -> the module that defines it, imported when the name is first used (PEP 562)."""


__getattr__, __dir__ = _lazy_exports(globals(), _LAZY)
