"""pico3: a hardened, durable agent harness.

Conversations of immutable entries, three documents per conversation, namespaces for plugins,
commits on one ordered line per session persisted to a JSONL store with fsync before they are
acknowledged, and a view document that clients render from alone.

* :class:`Harness` — ``await Harness.open(storage, options, ctx)``; conversations via
  :meth:`Harness.conversation`; plugin state via :meth:`Harness.namespace`.
* :mod:`pico3.storage` — :class:`MemoryStorage` and :class:`JsonlStorage` (fsync modes, recovery).
* :mod:`pico3.kernel` — the line, transactions, the membrane, documents, namespaces, the view.
* :mod:`pico3.model` — records, entry kinds and context derivation.
* :mod:`pico3.tasks` — :func:`define_task`, the scheduler, waiters, aborts and faults.
* :mod:`pico3.turn` — the core turn loop: generation, tools, post-tools, collapse, placement.
* :mod:`pico3.tools` / :mod:`pico3.hooks` — the extension surface (``register_tool``,
  :class:`ToolApi`, hook points with :class:`BeforeToolApi`).
* :mod:`pico3.models` — the provider contract and the scripted ``faux`` provider.
* :class:`HarnessHandle` and :func:`reload` — one session across suspend and reopen.
"""

from pico3.handle import HarnessHandle
from pico3.harness import ConversationHandle, Harness, HarnessOptions
from pico3.hooks import BeforeToolApi, HookRunner
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
    SectionSeed,
    SectionSeedRejected,
    define_entry,
)
from pico3.owned import OwnedConversation, OwnedSpec, create_owned
from pico3.reload import reload
from pico3.storage import JsonlStorage, MemoryStorage, Storage
from pico3.tasks import (
    RETRY,
    Clock,
    Completion,
    ContractFault,
    Done,
    ManualClock,
    Next,
    NotQuiescent,
    Runtime,
    TaskFaulted,
    TaskInfo,
    TaskKind,
    UnknownTask,
    define_task,
)
from pico3.tools import MISSING, InvalidArguments, ToolApi, ToolDeclaration, ToolResult
from pico3.turn import GENERATION_KIND, TOOL_KIND
from pico3.turn.collapse import CollapseInProgress, NothingToCollapse
from pico3.turn.conversation import InputHandle
from pico3.turn.models import Models
from pico3.turn.placement import ConversationBusy

__all__ = [
    "GENERATION_KIND",
    "MISSING",
    "RETRY",
    "TOOL_KIND",
    "BeforeToolApi",
    "Clock",
    "Closed",
    "CollapseInProgress",
    "Completion",
    "ConfigRejected",
    "ContractFault",
    "ConversationBusy",
    "ConversationHandle",
    "DetachedValue",
    "Done",
    "EntryKind",
    "EntryRejected",
    "Envelope",
    "Faulted",
    "Forbidden",
    "Harness",
    "HarnessHandle",
    "HarnessOptions",
    "HookRunner",
    "InputHandle",
    "InvalidArguments",
    "JsonlStorage",
    "ManualClock",
    "MemoryStorage",
    "Models",
    "Namespace",
    "NestedLineOperation",
    "NewEntry",
    "Next",
    "NotQuiescent",
    "NothingToCollapse",
    "OwnedConversation",
    "OwnedSpec",
    "ReadAfterWrite",
    "RevokedProxy",
    "Runtime",
    "SectionSeed",
    "SectionSeedRejected",
    "StaleDefinition",
    "Storage",
    "TaskFaulted",
    "TaskInfo",
    "TaskKind",
    "ToolApi",
    "ToolDeclaration",
    "ToolResult",
    "Transaction",
    "TransactionClosed",
    "UnknownConversation",
    "UnknownTask",
    "Watch",
    "create_owned",
    "define_entry",
    "define_task",
    "memo_once",
    "reload",
]
