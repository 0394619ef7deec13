"""The public names of pico3, chord and each feature's contract, pinned (like Trio's test_exports).

A feature package or the app imports only these modules' ``__all__`` (the import-linter contract
in pyproject.toml enforces it; see tests/test_public_api.py). Adding, renaming or removing a
public name is an API change: do it deliberately, here, and in the API reference (docs/api/).
"""

from __future__ import annotations

import importlib
import types

import pytest

PUBLIC: dict[str, frozenset[str]] = {
    "pico3": frozenset(
        {
            "ApprovalAuthority",
            "CHILD_ENVIRONMENT_SERVICE",
            "MIN_SECRET_LENGTH",
            "ChildEnvironment",
            "WELL_KNOWN_SECRETS",
            "DEFAULT_DENY_READ",
            "OUTSIDE_HINT",
            "SANDBOX_SERVICE",
            "SANDBOX_MODE_SERVICE",
            "Sandbox",
            "SandboxMode",
            "commands_sandbox",
            "ATTENDANCE_SERVICE",
            "Attendance",
            "SandboxPolicy",
            "SandboxStatus",
            "explain_refusal",
            "planted_entries",
            "entry_identities",
            "CLAUDE_CODE_TOOLS",
            "claude_agent_id",
            "claude_code_names",
            "claude_tool",
            "sandbox_available",
            "DomainProxy",
            "domain_allowed",
            "ArgumentSchema",
            "BeforeToolApi",
            "BLOB_LIMIT",
            "BeforeToolOutcome",
            "Clock",
            "Closed",
            "CollapseInProgress",
            "CommitInfo",
            "Completion",
            "ConfigRejected",
            "ConfiguredProgram",
            "ContractFault",
            "ConversationBusy",
            "ConversationHandle",
            "ConversationInfo",
            "ConversationService",
            "ConversationServiceApi",
            "ConversationView",
            "CorruptStorage",
            "DetachedValue",
            "Done",
            "EntryJson",
            "EntryKind",
            "EntryRejected",
            "EntryScanJson",
            "Envelope",
            "Faulted",
            "Forbidden",
            "ForkSpecJson",
            "MODEL_CALL_KIND",
            "HARNESS_FACET_ID",
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
            "JOB_KIND",
            "JsonlStorage",
            "LeaseLost",
            "LeaseRenewer",
            "LocalProcessHost",
            "MISSING",
            "ManualClock",
            "MemoryStorage",
            "Models",
            "NOTICE_KIND",
            "Namespace",
            "NestedLineOperation",
            "NewEntry",
            "NewEntryJson",
            "Next",
            "NotQuiescent",
            "NothingToCollapse",
            "OutputBounds",
            "OutputBuffer",
            "OwnedConversation",
            "OwnedSpec",
            "ParentRef",
            "PostgresStorage",
            "ProcessHost",
            "ProcessSpec",
            "ProcessStatus",
            "RETRY",
            "ReadAfterWrite",
            "RepositoryPrograms",
            "RequestHookApi",
            "ResponseHookApi",
            "RevokedProxy",
            "Runtime",
            "SectionSeed",
            "SectionSeedRejected",
            "SendInputJson",
            "StaleDefinition",
            "StorageError",
            "StorageInUse",
            "StorageUnreachable",
            "SchemaTooNew",
            "SchemaNotMigrated",
            "SystemClock",
            "SlotRejected",
            "Step",
            "Storage",
            "SystemSection",
            "TOOL_KIND",
            "Task",
            "TaskFaulted",
            "TaskInfo",
            "TaskKind",
            "ToolApi",
            "ToolDeclaration",
            "ToolHookApi",
            "ToolResult",
            "Transaction",
            "TransactionClosed",
            "UnknownConversation",
            "UnknownTask",
            "ViewEvent",
            "Watch",
            "AssistantData",
            "AssistantEntry",
            "CompactionStatus",
            "CustomEntry",
            "ModelCallStatus",
            "HandoffEntry",
            "NoticeEntry",
            "QueuedInput",
            "ResetEntry",
            "SummaryEntry",
            "SystemEntry",
            "ToolResultData",
            "ToolResultEntry",
            "ToolSlot",
            "UsageData",
            "UsageEntry",
            "UserData",
            "UserEntry",
            "View",
            "ViewConversation",
            "ViewDecoder",
            "ViewEntry",
            "ViewParent",
            "ViewTask",
            "ViewTurn",
            "view_from_json",
            "conversation_json",
            "create_owned",
            "assistant_text",
            "define_entry",
            "define_section",
            "define_task",
            "entry_json",
            "fsync_dir",
            "harness_session_facet",
            "job_input",
            "memo_once",
            "read_blob",
            "migrate_database",
            "reload",
            "repository_programs",
            "run_git",
            "stored_writes",
            "walk_files",
            "write_atomic",
        }
    ),
    "pico3.models": frozenset(
        {
            "ABORTED",
            "Citation",
            "ServerToolContent",
            "ServerToolEvent",
            "ANTHROPIC_ALIASES",
            "MODEL_ALIASES",
            "resolve_model_spec",
            "AssistantMessage",
            "Cost",
            "Deferred",
            "DeferringModelProvider",
            "DoneEvent",
            "ErrorEvent",
            "FAUX_MODEL",
            "FauxDeferred",
            "FauxProvider",
            "FauxResponse",
            "FauxState",
            "FauxStep",
            "FauxToolCall",
            "FetchResult",
            "ImageContent",
            "Message",
            "MessageBuilder",
            "ModelCost",
            "ModelInfo",
            "ModelProvider",
            "ModelProviderError",
            "Request",
            "RetryPolicy",
            "Sleep",
            "StartEvent",
            "StreamProtocolError",
            "StopReason",
            "StreamEvent",
            "SystemMessage",
            "TextContent",
            "TextDeltaEvent",
            "TextEndEvent",
            "TextStartEvent",
            "ThinkingContent",
            "ThinkingDeltaEvent",
            "ThinkingEndEvent",
            "ThinkingLevel",
            "ThinkingStartEvent",
            "Tool",
            "ToolCall",
            "ToolCallDeltaEvent",
            "ToolCallEndEvent",
            "ToolCallStartEvent",
            "ToolResultMessage",
            "Usage",
            "UserMessage",
            "abortable",
            "compute_cost",
            "copy_message",
            "estimate_tokens",
            "extend_prefix",
            "faux_deferred",
            "faux_demo_script",
            "faux_echo",
            "faux_error",
            "faux_fetch_error",
            "faux_not_ready",
            "faux_pause",
            "faux_response",
            "faux_text",
            "faux_thinking",
            "faux_tool_call",
            "message_to_json",
            "messages_from_json",
            "parse_retry_after",
            "reduce_events",
            "retry_call",
            "retryable_status",
        }
    ),
    "chord": frozenset(
        {
            "AbortController",
            "AbortSignal",
            "BACKGROUND",
            "Backoff",
            "BACKGROUND_CONTEXT",
            "Context",
            "ContextCancelled",
            "ContextKey",
            "DeadlineExceeded",
            "Delivery",
            "DialogSpawner",
            "Dialogs",
            "ENTRY_POINT_GROUP",
            "Facet",
            "FacetDiscoveryError",
            "FacetEnvironment",
            "FacetGeneration",
            "FacetHost",
            "FacetLoadError",
            "FacetLoader",
            "FacetPackage",
            "FrameConnection",
            "InstanceAddress",
            "JsonError",
            "JsonValue",
            "Listener",
            "LoadedFacets",
            "MutableReplicatedState",
            "ReloadCoordinator",
            "ReloadOutcome",
            "ReloadReport",
            "RemoteConnection",
            "RemoteServiceBinding",
            "RemoteServiceError",
            "RemoteServiceProvider",
            "RemoteServiceSource",
            "ReplicaState",
            "ReplicatedState",
            "Service",
            "ServiceCall",
            "ServiceMode",
            "ServiceSpawner",
            "TODO",
            "TODO_CONTEXT",
            "WireServiceSource",
            "await_with_context",
            "cancel_scope",
            "combine_facet_loaders",
            "connect_service_source",
            "connect_tcp",
            "connect_unix",
            "copy_json",
            "create_context_key",
            "create_facet_host",
            "create_loopback_transport",
            "create_remote_service_binding",
            "define_facet",
            "define_service",
            "dialog_key",
            "discover_facet_packages",
            "equal_json",
            "facet_package_from_folder",
            "hookimpl",
            "inert",
            "installed_facet_packages",
            "is_json_value",
            "is_replicated_state",
            "load_facet_packages",
            "load_generation",
            "open_remote_connection",
            "package_facet_loader",
            "provide_dialogs",
            "provider_handler",
            "replicated_state",
            "replicated_state_from_source",
            "run_with_context",
            "serve_provider",
            "serve_tcp",
            "serve_unix",
            "static_facet_loader",
            "validate_json",
            "with_abort_signal",
            "with_cancel",
            "with_deadline",
            "with_timeout",
            "with_value",
            "without_abort_signal",
        }
    ),
    "chord.textual": frozenset(
        {
            "ARMING_SECONDS",
            "CLOSED_NOTICE",
            "Arg",
            "ArgumentError",
            "Arguments",
            "BoundCommand",
            "Choice",
            "ChoiceScreen",
            "Command",
            "CommandError",
            "CommandHandler",
            "CommandOutcome",
            "ConfirmScreen",
            "DialogScreen",
            "KeyBinding",
            "KeyHandler",
            "Modal",
            "Notice",
            "Severity",
            "SlashCommand",
            "TextualTui",
            "Tui",
            "TuiService",
            "app_turn",
            "inert_text",
            "register_commands",
            "report_command_error",
            "run_app_with_facets",
            "show_dialogs",
            "tui_facet",
        }
    ),
    "facets_approval.contract": frozenset(
        {
            "OWNER_MODE_KEY",
            "OWNER_MEMORY_KEY",
            "STRICTEST_FIRST",
            "stricter",
            "offer_rules",
            "offered_rules",
            "standing_choice",
            "ApprovalDecision",
            "HookRule",
            "ApprovalDialog",
            "ApprovalDialogs",
            "ApprovalMode",
            "ApprovalModeApi",
            "ApprovalRequest",
            "ApprovalRulesApi",
            "ApprovalRulesService",
            "CommandVerdict",
            "DECISIONS",
            "DEFAULT_MODE",
            "Decision",
            "MODE_DESCRIPTIONS",
            "ModeState",
            "PERMISSION_MODES",
            "PermissionMode",
            "RULE_SCOPES",
            "RuleAddition",
            "RuleCheck",
            "RuleEntry",
            "RuleScope",
            "RulesState",
            "check_decision",
            "check_mode",
            "check_rule_addition",
            "check_rule_entry",
            "dialog_key",
            "next_mode",
        }
    ),
    "facets_question.contract": frozenset(
        {
            "OUTCOMES",
            "Outcome",
            "QuestionDialog",
            "QuestionDialogs",
            "QuestionRequest",
            "QuestionResponse",
            "check_response",
            "dialog_key",
        }
    ),
    "facets_indexer.contract": frozenset(
        {
            "INDEXER_KIND",
            "INDEX_FILE_NAME",
            "IndexRequest",
            "IndexStarted",
            "IndexerService",
            "IndexerServiceApi",
            "IndexerStage",
            "IndexerStatus",
        }
    ),
    "facets_mcp.contract": frozenset(
        {
            "ELICITATION_ACTIONS",
            "ElicitationDialog",
            "ElicitationRequest",
            "ElicitationResponse",
            "McpElicitations",
            "McpHookTools",
            "McpPrompt",
            "McpResource",
            "McpSampling",
            "SamplingDialog",
            "SamplingRequest",
            "check_elicitation",
            "McpServer",
            "McpServers",
            "McpServersApi",
            "McpState",
            "McpTemplate",
            "McpTool",
            "SERVER_STATES",
            "ServerState",
            "tool_name",
        }
    ),
    "facets_subagents.contract": frozenset(
        {
            "ALLOW_KEY",
            "MAX_TURNS_KEY",
            "MCP_SERVERS_KEY",
            "PROJECT_AGENT_KEY",
            "HOOKS_KEY",
            "MEMORY_KEY",
            "PERMISSION_MODE_KEY",
            "AGENT_TOOL",
            "RUN_AGENTS_SERVICE",
            "SKILLS_SERVICE",
            "SUBAGENT_KIND",
            "THINKING_KEY",
            "AgentInfo",
            "DefinitionsSummary",
            "ForkRequest",
            "ForkResult",
            "SkillSource",
            "SubagentDefinitions",
            "SubagentDefinitionsApi",
            "SubagentForks",
            "SubagentForksApi",
            "SubagentStatus",
            "WaitingFolder",
        }
    ),
    "facets_hooks.contract": frozenset(
        {
            "EVENTS",
            "NOT_RUN_EVENTS",
            "RUN_SETTINGS_SERVICE",
            "HookInfo",
            "HooksListing",
            "HooksListingApi",
            "HooksSummary",
        }
    ),
}

# Modules whose every public attribute must be exported (packages whose __init__ only re-exports).
REEXPORTING = ("pico3", "pico3.models", "chord")


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_names_are_pinned(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert len(exported) == len(set(exported)), f"{name}.__all__ lists a name twice"
    added = sorted(set(exported) - PUBLIC[name])
    removed = sorted(PUBLIC[name] - set(exported))
    assert not added and not removed, (
        f"{name}'s public names changed: added {added}, removed {removed}; if this is deliberate, "
        "update PUBLIC in tests/test_exports.py and the API reference"
    )


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_every_public_name_resolves(name: str) -> None:
    module = importlib.import_module(name)
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names {missing}, which the module does not define"


@pytest.mark.parametrize("name", REEXPORTING)
def test_nothing_public_is_left_out_of_all(name: str) -> None:
    module = importlib.import_module(name)
    unlisted = sorted(
        attr
        for attr in vars(module)
        if not attr.startswith("_")
        and attr not in module.__all__
        and attr != "annotations"  # from __future__ import annotations
        and not isinstance(getattr(module, attr), types.ModuleType)
    )
    assert not unlisted, f"{name} has public attributes missing from __all__: {unlisted}"


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_classes_and_functions_defined_here_are_exported(name: str) -> None:
    module = importlib.import_module(name)
    defined = sorted(
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and isinstance(value, type | types.FunctionType)
        and value.__module__ == name
    )
    unlisted = [attr for attr in defined if attr not in module.__all__]
    assert not unlisted, f"{name} defines public {unlisted} but leaves them out of __all__"


def test_the_harness_service_token_and_the_harness_class_have_distinct_names() -> None:
    import pico3
    from chord import Service

    assert isinstance(pico3.HarnessService, Service)
    assert pico3.HarnessService.id == "pi.harness"
    assert pico3.HarnessService.local
    assert pico3.HarnessService.contract is pico3.HarnessServiceApi
    assert isinstance(pico3.Harness, type) and pico3.Harness.__name__ == "Harness"
    assert isinstance(pico3.ConversationService, Service)
    assert pico3.ConversationService.id == "pi.conversation"
    # the old token name, which collided with the class, is gone
    import pico3.facets

    assert not hasattr(pico3.facets, "Harness")


def test_the_notice_kind_is_the_one_core_kind_a_feature_may_write() -> None:
    from pico3 import NOTICE_KIND, EntryRejected, NewEntry
    from pico3.session_data import check_new_entry

    assert NOTICE_KIND == "pi.notice"
    message = {"role": "user", "content": "the job finished"}
    written = check_new_entry(NewEntry(kind=NOTICE_KIND, model=[message]), core=False)
    assert written.kind == "pi.notice"
    with pytest.raises(EntryRejected, match="reserved for core"):
        check_new_entry(NewEntry(kind="pi.user", model=[message]), core=False)
