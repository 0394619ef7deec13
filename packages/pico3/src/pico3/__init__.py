"""pico3: a hardened, durable agent harness.

Conversations of immutable entries, three documents per conversation, namespaces for plugins,
commits on one ordered line per session persisted to a JSONL store with fsync before they are
acknowledged, and a view document that clients render from alone.

* :class:`Harness` — ``await Harness.open(storage, options, ctx)``; conversations via
  :meth:`Harness.conversation`; plugin state via :meth:`Harness.namespace`.
* :mod:`pico3.storage` — :class:`MemoryStorage` and :class:`JsonlStorage` (fsync modes, recovery).
* :mod:`pico3.kernel` — the line, transactions, the membrane, documents, namespaces, the view.
* :mod:`pico3.model` — records, entry kinds and context derivation.
"""

from pico3.harness import ConversationHandle, Harness, HarnessOptions
from pico3.kernel import (
    Closed,
    DetachedValue,
    Envelope,
    Faulted,
    Forbidden,
    Namespace,
    NestedLineOperation,
    ReadAfterWrite,
    RevokedProxy,
    StaleDefinition,
    Transaction,
    TransactionClosed,
    UnknownConversation,
    Watch,
)
from pico3.kernel.documents import memo_once
from pico3.model import (
    ConfigRejected,
    EntryKind,
    EntryRejected,
    NewEntry,
    define_entry,
)
from pico3.storage import JsonlStorage, MemoryStorage, Storage

__all__ = [
    "Closed",
    "ConfigRejected",
    "ConversationHandle",
    "DetachedValue",
    "EntryKind",
    "EntryRejected",
    "Envelope",
    "Faulted",
    "Forbidden",
    "Harness",
    "HarnessOptions",
    "JsonlStorage",
    "MemoryStorage",
    "Namespace",
    "NestedLineOperation",
    "NewEntry",
    "ReadAfterWrite",
    "RevokedProxy",
    "StaleDefinition",
    "Storage",
    "Transaction",
    "TransactionClosed",
    "UnknownConversation",
    "Watch",
    "define_entry",
    "memo_once",
]
