"""pico3 storage: the interface every backend implements, and the two backends.

* :mod:`pico3.storage.records`: the durable records and the six writes of a batch (msgspec).
* :mod:`pico3.storage.base`: the :class:`Storage` protocol and the storage errors.
* :class:`MemoryStorage`: in memory, reopenable; the reference backend.
* :class:`JsonlStorage`: a directory of append-only JSONL files with crash recovery.
* :class:`PostgresStorage`: sessions in a PostgreSQL database (psycopg 3), with leases.
* :func:`stored_writes`: the writes of a JSONL file's bytes, for read-only tools.

Storage knows nothing of the kernel: it stores what it is given, atomically, and reads it back.
"""

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
