"""pico3: a hardened, durable agent harness.

Conversations of immutable entries, three documents per conversation, namespaces for plugins,
commits on one ordered line per session persisted to a JSONL store with fsync before they are
acknowledged, and a view document that clients render from alone.

**The public API.** A feature package or an application imports only from this module and from
:mod:`pico3.models` (the model provider contract); every other module of pico3 is internal and may
change without notice. The import-linter contract in the workspace's ``pyproject.toml`` (run by
``uv run lint-imports`` in CI) fails on a deep import from a feature package or the app, and
``tests/test_exports.py`` pins the names below.

* The harness: :class:`Harness` (``await Harness.open(storage, options, ctx)``),
  :class:`HarnessOptions`, :class:`ConversationHandle`, :class:`HarnessHandle`, :func:`reload`,
  storages (:class:`MemoryStorage`, :class:`JsonlStorage`, :class:`PostgresStorage`, the
  :class:`Storage` protocol).
* Durable state: :func:`define_entry` / :class:`EntryKind` / :class:`NewEntry` (entries,
  :data:`NOTICE_KIND` is the one core kind a feature may write), :class:`Namespace`,
  :class:`Transaction`, :func:`memo_once`.
* Work: :func:`define_task`, :class:`TaskKind`, :class:`Runtime`, :class:`Next` / :class:`Done`
  (what a step returns), :data:`RETRY`, :class:`Task` (the record a step sees).
* The approval gate (docs/design/harness.md#approval-gate): a call not declared replay-safe
  runs only when an :class:`ApprovalAuthority` (``h.register_approval_authority(hook)``)
  ruled on it; ``HarnessOptions.unapproved`` words the block when none could.
* Tools and hooks: :class:`ToolDeclaration`, :class:`ToolApi`, :class:`ToolResult`,
  :data:`MISSING`, :class:`OutputBuffer`, :class:`BeforeToolApi` and the other hook API types,
  :func:`define_section` (system prompt sections), kinds :data:`TOOL_KIND`,
  :data:`MODEL_CALL_KIND`, :data:`JOB_KIND`.
* The session services of the Chord worker (docs/design/chord.md#built-in-services): the tokens
  :data:`HarnessService` (``pi.harness``, local; its API is :class:`HarnessServiceApi`) and
  :data:`ConversationService` (``pi.conversation``, remotable; :class:`ConversationServiceApi`),
  the JSON shapes of the view and the methods, and :func:`harness_session_facet`.
* The view as typed records (docs/design/view.md#typed-records): :class:`ViewDecoder` (one per
  followed replica; reuses what did not change) and :func:`view_from_json` give a :class:`View`
  of :class:`ViewEntry` records by kind (:class:`UserEntry`, :class:`AssistantEntry`,
  :class:`ToolResultEntry`, …; :class:`CustomEntry` keeps an unknown kind's JSON), the
  :class:`ViewTurn` (:class:`ModelCallStatus`, :class:`ToolSlot`), :class:`QueuedInput`,
  :class:`ViewTask` and :class:`CompactionStatus`.
* Child processes: :class:`ChildEnvironment` (the environment a session's child processes
  get, without its secrets; the harness service :data:`CHILD_ENVIRONMENT_SERVICE`), and
  :class:`Sandbox` (bubblewrap: :class:`SandboxPolicy`, :func:`sandbox_available`,
  :func:`explain_refusal`; the harness service :data:`SANDBOX_SERVICE`; :class:`DomainProxy`,
  the sandbox's only way out to ``allow_domains``; :class:`SandboxMode` under
  :data:`SANDBOX_MODE_SERVICE` and :func:`commands_sandbox`: whether the session's own commands,
  hooks included, run inside now).
* Attendance: :class:`Attendance` under :data:`ATTENDANCE_SERVICE`, how many clients are
  attached to the session (a feature lets costly things go while nobody is).
* Project files: :func:`walk_files` and :class:`IgnoreRules` (``.gitignore`` rules, one walker
  for every tool and feature; loaded on first use, so ``pathspec`` stays off the import path of a
  process that never walks a tree), :func:`write_atomic`, :func:`fsync_dir`, and :func:`run_git`
  (git for the agent's own purposes, with every program a repository configures switched off:
  fsmonitor, hooks, filters, diff drivers; also loaded on first use).
* Read-only tools: :func:`stored_writes` decodes the writes of a JSONL session file's bytes
  (either line format) without opening the session.
"""

import typing as _typing

from pico3._renamed import renamed_attribute as _renamed_attribute
from pico3.approval import ApprovalAuthority
from pico3.attendance import ATTENDANCE_SERVICE, Attendance
from pico3.child_env import (
    CHILD_ENVIRONMENT_SERVICE,
    MIN_SECRET_LENGTH,
    WELL_KNOWN_SECRETS,
    ChildEnvironment,
)
from pico3.facets.contract import (
    CommitInfo,
    ConversationInfo,
    ConversationService,
    ConversationServiceApi,
    ConversationView,
    EntryJson,
    EntryScanJson,
    ForkSpecJson,
    HarnessService,
    HarnessServiceApi,
    InputAbortResult,
    NewEntryJson,
    ParentRef,
    SendInputJson,
    ViewEvent,
)
from pico3.facets.session import HARNESS_FACET_ID, harness_session_facet
from pico3.files import fsync_dir, write_atomic
from pico3.handle import HarnessHandle
from pico3.harness import ConversationHandle, Harness, HarnessOptions
from pico3.hooks import (
    BeforeToolApi,
    BeforeToolOutcome,
    HookApi,
    HookRegistration,
    HookRunner,
    RequestHookApi,
    ResponseHookApi,
    ToolHookApi,
)
from pico3.jobs import JOB_KIND, job_input
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
from pico3.owned import OwnedConversation, OwnedSpec, create_owned
from pico3.process_host import LocalProcessHost, ProcessHost, ProcessSpec, ProcessStatus
from pico3.registration_swap import reload
from pico3.sandbox import (
    DEFAULT_DENY_READ,
    OUTSIDE_HINT,
    SANDBOX_MODE_SERVICE,
    SANDBOX_SERVICE,
    Sandbox,
    SandboxMode,
    SandboxPolicy,
    SandboxStatus,
    commands_sandbox,
    explain_refusal,
    sandbox_available,
)
from pico3.sandbox_proxy import DomainProxy, domain_allowed
from pico3.session_data import (
    ConfigRejected,
    EntryKind,
    EntryRejected,
    NewEntry,
    SectionSeed,
    SectionSeedRejected,
    conversation_json,
    define_entry,
    entry_json,
)
from pico3.session_data.entries import NOTICE_KIND
from pico3.session_data.view_decoder import ViewDecoder, view_from_json
from pico3.session_data.view_records import (
    AssistantData,
    AssistantEntry,
    CompactionStatus,
    CustomEntry,
    HandoffEntry,
    ModelCallStatus,
    NoticeEntry,
    QueuedInput,
    ResetEntry,
    SummaryEntry,
    SystemEntry,
    ToolResultData,
    ToolResultEntry,
    ToolSlot,
    UsageData,
    UsageEntry,
    UserData,
    UserEntry,
    View,
    ViewConversation,
    ViewEntry,
    ViewParent,
    ViewTask,
    ViewTurn,
)
from pico3.storage import (
    BLOB_LIMIT,
    CorruptStorage,
    JsonlStorage,
    LeaseLost,
    LeaseRenewer,
    MemoryStorage,
    PostgresStorage,
    SchemaNotMigrated,
    SchemaTooNew,
    Storage,
    StorageError,
    StorageInUse,
    StorageUnreachable,
    Task,
    migrate_database,
    read_blob,
    stored_writes,
)
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
    Step,
    SystemClock,
    TaskFaulted,
    TaskInfo,
    TaskKind,
    UnknownTask,
    define_task,
)
from pico3.tools import (
    MISSING,
    ArgumentSchema,
    InvalidArguments,
    OutputBounds,
    OutputBuffer,
    SlotRejected,
    ToolApi,
    ToolDeclaration,
    ToolResult,
)
from pico3.turn import MODEL_CALL_KIND, TOOL_KIND
from pico3.turn.collapse import CollapseInProgress, NothingToCollapse
from pico3.turn.conversation import InputHandle
from pico3.turn.models import Models
from pico3.turn.placement import ConversationBusy
from pico3.turn.sections import SystemSection, define_section

if _typing.TYPE_CHECKING:
    from pico3.git import run_git
    from pico3.ignore import IgnoreRules, walk_files

__all__ = [
    "ATTENDANCE_SERVICE",
    "BLOB_LIMIT",
    "CHILD_ENVIRONMENT_SERVICE",
    "DEFAULT_DENY_READ",
    "HARNESS_FACET_ID",
    "JOB_KIND",
    "MIN_SECRET_LENGTH",
    "MISSING",
    "MODEL_CALL_KIND",
    "NOTICE_KIND",
    "OUTSIDE_HINT",
    "RETRY",
    "SANDBOX_MODE_SERVICE",
    "SANDBOX_SERVICE",
    "TOOL_KIND",
    "WELL_KNOWN_SECRETS",
    "ApprovalAuthority",
    "ArgumentSchema",
    "AssistantData",
    "AssistantEntry",
    "Attendance",
    "BeforeToolApi",
    "BeforeToolOutcome",
    "ChildEnvironment",
    "Clock",
    "Closed",
    "CollapseInProgress",
    "CommitInfo",
    "CompactionStatus",
    "Completion",
    "ConfigRejected",
    "ContractFault",
    "ConversationBusy",
    "ConversationHandle",
    "ConversationInfo",
    "ConversationService",
    "ConversationServiceApi",
    "ConversationView",
    "CorruptStorage",
    "CustomEntry",
    "DetachedValue",
    "DomainProxy",
    "Done",
    "EntryJson",
    "EntryKind",
    "EntryRejected",
    "EntryScanJson",
    "Envelope",
    "Faulted",
    "Forbidden",
    "ForkSpecJson",
    "HandoffEntry",
    "Harness",
    "HarnessHandle",
    "HarnessOptions",
    "HarnessService",
    "HarnessServiceApi",
    "HookApi",
    "HookRegistration",
    "HookRunner",
    "IgnoreRules",
    "InputAbortResult",
    "InputHandle",
    "InvalidArguments",
    "JsonlStorage",
    "LeaseLost",
    "LeaseRenewer",
    "LocalProcessHost",
    "ManualClock",
    "MemoryStorage",
    "ModelCallStatus",
    "Models",
    "Namespace",
    "NestedLineOperation",
    "NewEntry",
    "NewEntryJson",
    "Next",
    "NotQuiescent",
    "NothingToCollapse",
    "NoticeEntry",
    "OutputBounds",
    "OutputBuffer",
    "OwnedConversation",
    "OwnedSpec",
    "ParentRef",
    "PostgresStorage",
    "ProcessHost",
    "ProcessSpec",
    "ProcessStatus",
    "QueuedInput",
    "ReadAfterWrite",
    "RequestHookApi",
    "ResetEntry",
    "ResponseHookApi",
    "RevokedProxy",
    "Runtime",
    "Sandbox",
    "SandboxMode",
    "SandboxPolicy",
    "SandboxStatus",
    "SchemaNotMigrated",
    "SchemaTooNew",
    "SectionSeed",
    "SectionSeedRejected",
    "SendInputJson",
    "SlotRejected",
    "StaleDefinition",
    "Step",
    "Storage",
    "StorageError",
    "StorageInUse",
    "StorageUnreachable",
    "SummaryEntry",
    "SystemClock",
    "SystemEntry",
    "SystemSection",
    "Task",
    "TaskFaulted",
    "TaskInfo",
    "TaskKind",
    "ToolApi",
    "ToolDeclaration",
    "ToolHookApi",
    "ToolResult",
    "ToolResultData",
    "ToolResultEntry",
    "ToolSlot",
    "Transaction",
    "TransactionClosed",
    "UnknownConversation",
    "UnknownTask",
    "UsageData",
    "UsageEntry",
    "UserData",
    "UserEntry",
    "View",
    "ViewConversation",
    "ViewDecoder",
    "ViewEntry",
    "ViewEvent",
    "ViewParent",
    "ViewTask",
    "ViewTurn",
    "Watch",
    "commands_sandbox",
    "conversation_json",
    "create_owned",
    "define_entry",
    "define_section",
    "define_task",
    "domain_allowed",
    "entry_json",
    "explain_refusal",
    "fsync_dir",
    "harness_session_facet",
    "job_input",
    "memo_once",
    "migrate_database",
    "read_blob",
    "reload",
    "run_git",
    "sandbox_available",
    "stored_writes",
    "view_from_json",
    "walk_files",
    "write_atomic",
]

_LAZY = {
    "IgnoreRules": "pico3.ignore",
    "walk_files": "pico3.ignore",
    "run_git": "pico3.git",
}
"""Public names imported on first use (see the module docstring)."""


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:  # a deprecated old name (pico3._renamed), or no such attribute
        return _renamed_attribute("pico3", name)
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
