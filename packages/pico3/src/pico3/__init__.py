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

**What ``import pico3`` costs: nothing until a name is used.** Every public name is bound from
the module that defines it at its first use (a module ``__getattr__``, PEP 562; ``__all__`` and
what each name is are unchanged), so a process imports only the parts it touches: a client that
decodes views (``from pico3 import ViewDecoder``) does not import the harness, the kernel or the
turn machinery (nor :mod:`asyncio`), and a worker imports them as it opens its session. Nothing in
pico3 registers anything at import time (task and entry kinds are registered by the harness that
uses them), so when a module is imported never changes what it does.
"""

import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING

from pico3._renamed import renamed_attribute as _renamed_attribute

if _TYPE_CHECKING:  # bound at first use (_LAZY below)
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
    from pico3.git import run_git
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
    from pico3.ignore import IgnoreRules, walk_files
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

_LAZY: dict[str, str] = {
    "ApprovalAuthority": "pico3.approval",
    "ATTENDANCE_SERVICE": "pico3.attendance",
    "Attendance": "pico3.attendance",
    "CHILD_ENVIRONMENT_SERVICE": "pico3.child_env",
    "MIN_SECRET_LENGTH": "pico3.child_env",
    "WELL_KNOWN_SECRETS": "pico3.child_env",
    "ChildEnvironment": "pico3.child_env",
    "CommitInfo": "pico3.facets.contract",
    "ConversationInfo": "pico3.facets.contract",
    "ConversationService": "pico3.facets.contract",
    "ConversationServiceApi": "pico3.facets.contract",
    "ConversationView": "pico3.facets.contract",
    "EntryJson": "pico3.facets.contract",
    "EntryScanJson": "pico3.facets.contract",
    "ForkSpecJson": "pico3.facets.contract",
    "HarnessService": "pico3.facets.contract",
    "HarnessServiceApi": "pico3.facets.contract",
    "InputAbortResult": "pico3.facets.contract",
    "NewEntryJson": "pico3.facets.contract",
    "ParentRef": "pico3.facets.contract",
    "SendInputJson": "pico3.facets.contract",
    "ViewEvent": "pico3.facets.contract",
    "HARNESS_FACET_ID": "pico3.facets.session",
    "harness_session_facet": "pico3.facets.session",
    "fsync_dir": "pico3.files",
    "write_atomic": "pico3.files",
    "HarnessHandle": "pico3.handle",
    "ConversationHandle": "pico3.harness",
    "Harness": "pico3.harness",
    "HarnessOptions": "pico3.harness",
    "BeforeToolApi": "pico3.hooks",
    "BeforeToolOutcome": "pico3.hooks",
    "HookApi": "pico3.hooks",
    "HookRegistration": "pico3.hooks",
    "HookRunner": "pico3.hooks",
    "RequestHookApi": "pico3.hooks",
    "ResponseHookApi": "pico3.hooks",
    "ToolHookApi": "pico3.hooks",
    "JOB_KIND": "pico3.jobs",
    "job_input": "pico3.jobs",
    "Closed": "pico3.kernel",
    "DetachedValue": "pico3.kernel",
    "Envelope": "pico3.kernel",
    "Faulted": "pico3.kernel",
    "Forbidden": "pico3.kernel",
    "Namespace": "pico3.kernel",
    "NestedLineOperation": "pico3.kernel",
    "ReadAfterWrite": "pico3.kernel",
    "RevokedProxy": "pico3.kernel",
    "StaleDefinition": "pico3.kernel",
    "Transaction": "pico3.kernel",
    "TransactionClosed": "pico3.kernel",
    "UnknownConversation": "pico3.kernel",
    "Watch": "pico3.kernel",
    "memo_once": "pico3.kernel.documents",
    "OwnedConversation": "pico3.owned",
    "OwnedSpec": "pico3.owned",
    "create_owned": "pico3.owned",
    "LocalProcessHost": "pico3.process_host",
    "ProcessHost": "pico3.process_host",
    "ProcessSpec": "pico3.process_host",
    "ProcessStatus": "pico3.process_host",
    "reload": "pico3.registration_swap",
    "DEFAULT_DENY_READ": "pico3.sandbox",
    "OUTSIDE_HINT": "pico3.sandbox",
    "SANDBOX_MODE_SERVICE": "pico3.sandbox",
    "SANDBOX_SERVICE": "pico3.sandbox",
    "Sandbox": "pico3.sandbox",
    "SandboxMode": "pico3.sandbox",
    "SandboxPolicy": "pico3.sandbox",
    "SandboxStatus": "pico3.sandbox",
    "commands_sandbox": "pico3.sandbox",
    "explain_refusal": "pico3.sandbox",
    "sandbox_available": "pico3.sandbox",
    "DomainProxy": "pico3.sandbox_proxy",
    "domain_allowed": "pico3.sandbox_proxy",
    "ConfigRejected": "pico3.session_data",
    "EntryKind": "pico3.session_data",
    "EntryRejected": "pico3.session_data",
    "NewEntry": "pico3.session_data",
    "SectionSeed": "pico3.session_data",
    "SectionSeedRejected": "pico3.session_data",
    "conversation_json": "pico3.session_data",
    "define_entry": "pico3.session_data",
    "entry_json": "pico3.session_data",
    "NOTICE_KIND": "pico3.session_data.entries",
    "ViewDecoder": "pico3.session_data.view_decoder",
    "view_from_json": "pico3.session_data.view_decoder",
    "AssistantData": "pico3.session_data.view_records",
    "AssistantEntry": "pico3.session_data.view_records",
    "CompactionStatus": "pico3.session_data.view_records",
    "CustomEntry": "pico3.session_data.view_records",
    "HandoffEntry": "pico3.session_data.view_records",
    "ModelCallStatus": "pico3.session_data.view_records",
    "NoticeEntry": "pico3.session_data.view_records",
    "QueuedInput": "pico3.session_data.view_records",
    "ResetEntry": "pico3.session_data.view_records",
    "SummaryEntry": "pico3.session_data.view_records",
    "SystemEntry": "pico3.session_data.view_records",
    "ToolResultData": "pico3.session_data.view_records",
    "ToolResultEntry": "pico3.session_data.view_records",
    "ToolSlot": "pico3.session_data.view_records",
    "UsageData": "pico3.session_data.view_records",
    "UsageEntry": "pico3.session_data.view_records",
    "UserData": "pico3.session_data.view_records",
    "UserEntry": "pico3.session_data.view_records",
    "View": "pico3.session_data.view_records",
    "ViewConversation": "pico3.session_data.view_records",
    "ViewEntry": "pico3.session_data.view_records",
    "ViewParent": "pico3.session_data.view_records",
    "ViewTask": "pico3.session_data.view_records",
    "ViewTurn": "pico3.session_data.view_records",
    "BLOB_LIMIT": "pico3.storage",
    "CorruptStorage": "pico3.storage",
    "JsonlStorage": "pico3.storage",
    "LeaseLost": "pico3.storage",
    "LeaseRenewer": "pico3.storage",
    "MemoryStorage": "pico3.storage",
    "PostgresStorage": "pico3.storage",
    "SchemaNotMigrated": "pico3.storage",
    "SchemaTooNew": "pico3.storage",
    "Storage": "pico3.storage",
    "StorageError": "pico3.storage",
    "StorageInUse": "pico3.storage",
    "StorageUnreachable": "pico3.storage",
    "Task": "pico3.storage",
    "migrate_database": "pico3.storage",
    "read_blob": "pico3.storage",
    "stored_writes": "pico3.storage",
    "RETRY": "pico3.tasks",
    "Clock": "pico3.tasks",
    "Completion": "pico3.tasks",
    "ContractFault": "pico3.tasks",
    "Done": "pico3.tasks",
    "ManualClock": "pico3.tasks",
    "Next": "pico3.tasks",
    "NotQuiescent": "pico3.tasks",
    "Runtime": "pico3.tasks",
    "Step": "pico3.tasks",
    "SystemClock": "pico3.tasks",
    "TaskFaulted": "pico3.tasks",
    "TaskInfo": "pico3.tasks",
    "TaskKind": "pico3.tasks",
    "UnknownTask": "pico3.tasks",
    "define_task": "pico3.tasks",
    "MISSING": "pico3.tools",
    "ArgumentSchema": "pico3.tools",
    "InvalidArguments": "pico3.tools",
    "OutputBounds": "pico3.tools",
    "OutputBuffer": "pico3.tools",
    "SlotRejected": "pico3.tools",
    "ToolApi": "pico3.tools",
    "ToolDeclaration": "pico3.tools",
    "ToolResult": "pico3.tools",
    "MODEL_CALL_KIND": "pico3.turn",
    "TOOL_KIND": "pico3.turn",
    "CollapseInProgress": "pico3.turn.collapse",
    "NothingToCollapse": "pico3.turn.collapse",
    "InputHandle": "pico3.turn.conversation",
    "Models": "pico3.turn.models",
    "ConversationBusy": "pico3.turn.placement",
    "SystemSection": "pico3.turn.sections",
    "define_section": "pico3.turn.sections",
    "run_git": "pico3.git",
    "IgnoreRules": "pico3.ignore",
    "walk_files": "pico3.ignore",
}
"""Public name -> the module that defines it, imported when the name is first used (PEP 562)."""


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:  # a deprecated old name (pico3._renamed), or no such attribute
        return _renamed_attribute("pico3", name)
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # the next use is a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
