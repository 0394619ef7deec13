"""Claude Code's tool names and ours: the one table every Claude Code file is read through.

Permission rules (``Bash(npm test)``, ``deny: ["WebFetch"]``), hook matchers (``"matcher":
"Edit|Write"``) and a subagent's ``tools:`` line name tools as Claude Code calls them; the coding
agent's standard tools have their own names (``bash``, ``find``, ``web_fetch``, ``todo``...).
A name missing here is a rule, a hook or a tool list that silently does nothing, so this is the
only copy: the approval, hooks and subagents features all read it.

:data:`CLAUDE_CODE_TOOLS` maps each Claude Code name to our tool; :func:`claude_code_names`
goes back (every Claude Code name a call of ours answers to, the one Claude Code sends first).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["CLAUDE_CODE_TOOLS", "claude_code_names"]

CLAUDE_CODE_TOOLS: Mapping[str, str] = MappingProxyType(
    {
        "Bash": "bash",
        "Read": "read",
        "Write": "write",
        "Edit": "edit",
        "MultiEdit": "edit",
        "Grep": "grep",
        "Glob": "find",
        "LS": "ls",
        "WebFetch": "web_fetch",
        "WebSearch": "web_search",
        "TodoWrite": "todo",
        "TodoRead": "todo",  # older Claude Code: the list is in every todo call's answer
        "Task": "agent",
        "Agent": "agent",  # Claude Code's newer name for Task
        "BashOutput": "job_output",
        "KillShell": "job_kill",
        "KillBash": "job_kill",  # KillShell's earlier name
        "AskUserQuestion": "question",  # the question feature's tool
    }
)
"""Claude Code's tool name → the coding agent's standard tool of the same job. Claude Code's
``NotebookRead``/``NotebookEdit`` have none. A feature may add a tool of one of these names' own
(an MCP server's ``fetch``); what a Claude Code *rule* covers beyond the one tool (``Read`` also
governs ``grep``, ``find`` and ``ls``) is the rules' business, built on this table."""

_BY_OURS: dict[str, tuple[str, ...]] = {
    ours: tuple(claude for claude, tool in CLAUDE_CODE_TOOLS.items() if tool == ours)
    for ours in CLAUDE_CODE_TOOLS.values()
}


def claude_code_names(tool: str) -> tuple[str, ...]:
    """Every Claude Code name of our tool ``tool``, the one Claude Code sends as a hook's
    ``tool_name`` first (``edit`` → ``("Edit", "MultiEdit")``, ``agent`` → ``("Task",
    "Agent")``); ``()`` for a tool Claude Code has no name for (an MCP tool, a feature's)."""
    return _BY_OURS.get(tool, ())
