"""What every side of the hooks feature agrees on: the events and the ``hooks.list`` service.

The session worker loads the hooks (:mod:`.settings`) and runs them; any presentation asks
:data:`HooksListing` (``hooks.list``) what was loaded, from which file, and which files or
entries were not loaded and why. The processes share nothing but this module, so it imports no
host code: only chord's service types.
"""

from __future__ import annotations

from typing import Any, NotRequired, Protocol, TypedDict

from chord import Context, Service, define_service

__all__ = [
    "EVENTS",
    "NOT_RUN_EVENTS",
    "RUN_SETTINGS_SERVICE",
    "HookInfo",
    "HooksListing",
    "HooksListingApi",
    "HooksSummary",
]

EVENTS: tuple[str, ...] = (
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "Stop",
    "SubagentStop",
    "SessionStart",
    "SessionEnd",
    "PreCompact",
    "Notification",
    "PostToolUseFailure",
    "PermissionRequest",
)
"""The Claude Code hook events this agent runs (any other name is reported: see
:data:`NOT_RUN_EVENTS`)."""

NOT_RUN_EVENTS: dict[str, str] = {
    "PermissionDenied": "nothing reports a denied call to hooks here",
    "SubagentStart": "a subagent starts without hooks here (SubagentStop runs when it ends)",
    "StopFailure": "a turn that ends in an API error runs no hook here",
    "PostCompact": "only PreCompact runs here",
    "Setup": "there is no setup phase here",
    "TeammateIdle": "there are no agent teams here",
    "TaskCreated": "background tasks run no hooks here",
    "TaskCompleted": "background tasks run no hooks here",
    "Elicitation": "MCP elicitations run no hooks here",
    "ElicitationResult": "MCP elicitations run no hooks here",
    "ConfigChange": "configuration changes run no hooks here",
    "InstructionsLoaded": "memory files run no hooks here (/context lists them)",
    "WorktreeCreate": "worktrees are not created through hooks here",
    "WorktreeRemove": "worktrees are not removed through hooks here",
    "CwdChanged": "the working folder changes run no hooks here",
    "FileChanged": "file changes run no hooks here",
}
"""Claude Code's other hook events, each with why this agent does not run it: a settings file
naming one gets that reason instead of "unknown event" (its hooks are skipped)."""


RUN_SETTINGS_SERVICE = "claude_run_settings"
"""The harness service of a settings object the user gave for this run (Claude Code's
``--settings``): ``{"source": <its file, or "--settings (JSON)">, "settings": {"hooks": ...}}``.
Its hooks load after the settings files' and run as the user's own settings' do."""


class HookInfo(TypedDict):
    event: str
    matcher: str
    """As written (``""`` when the entry has none: every tool)."""
    command: str
    timeout: float
    """Seconds (the entry's ``timeout``, else 60)."""
    source: str
    """The settings file it came from."""
    onFailure: NotRequired[str]
    """``"block"`` when a failure of the hook blocks what it guards (absent: ``"continue"``)."""
    input: NotRequired[dict[str, Any]]
    """An ``mcp_tool`` hook's ``input`` as written (its ``${path}`` filled in at each call);
    its ``command`` is ``mcp_tool <server> <tool>``."""
    note: NotRequired[str]
    """What the user should know about it now (an ``mcp_tool`` hook in a session without the
    MCP feature: every call fails)."""


class HooksSummary(TypedDict):
    hooks: list[HookInfo]
    problems: list[str]
    """Files and entries not loaded, each ``<file>: <problem>``."""
    waiting: list[str]
    """An untrusted project's settings files that hold hooks (loaded after ``/trust`` and a
    restart)."""


class HooksListingApi(Protocol):
    async def summary(self, ctx: Context) -> HooksSummary:
        """Every hook the session loaded, and what it did not load and why."""
        ...


HooksListing: Service[HooksListingApi] = define_service("hooks.list", HooksListingApi)
"""``hooks.list``: provided by the session facet (a remotable singleton)."""
