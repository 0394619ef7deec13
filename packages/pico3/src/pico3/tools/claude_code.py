"""Claude Code's tool names and ours: the one table every Claude Code file is read through.

Permission rules (``Bash(npm test)``, ``deny: ["WebFetch"]``), hook matchers (``"matcher":
"Edit|Write"``) and a subagent's ``tools:`` line name tools as Claude Code calls them; the coding
agent's standard tools have their own names (``bash``, ``find``, ``web_fetch``, ``todo``...).
A name missing here is a rule, a hook or a tool list that silently does nothing, so this is the
only copy: the approval, hooks and subagents features all read it.

:data:`CLAUDE_CODE_TOOLS` maps each Claude Code name to our tool; :func:`claude_code_names`
goes back (every Claude Code name a call of ours answers to, the one Claude Code sends first);
:func:`claude_tool` spells one call of ours as Claude Code would (its name and its input's field
names): what a hook is sent, and what ``-p --output-format json|stream-json`` writes.
:func:`claude_agent_id` is a subagent's name as an id, the one spelling every feature compares:
the subagents feature finds a definition by it, and a ``Task(name)``/``Agent(name)`` permission
rule matches a call by it, so ``Intruder`` or ``intruder.`` is the agent ``intruder`` for both (a
deny rule that compared the spelling let the model run the agent it denied by writing it in
capitals).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = ["CLAUDE_CODE_TOOLS", "claude_agent_id", "claude_code_names", "claude_tool"]

_NOT_IN_ID = re.compile(r"[^a-z0-9_-]+")


def claude_agent_id(name: str) -> str:
    """``name`` as a subagent id: lowercase; each run of characters other than letters, digits,
    ``-`` and ``_`` becomes one ``-``; no ``-`` at either end; at most 64 characters
    (``api.designer`` → ``api-designer``, ``Code Reviewer`` → ``code-reviewer``). ``""`` when
    nothing is left."""
    return _NOT_IN_ID.sub("-", name.strip().lower()).strip("-_")[:64].strip("-_")


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


def _absolute(path: object, cwd: str) -> object:
    if not isinstance(path, str) or not path:
        return path
    spelled = path[1:] if path.startswith("@") else path
    return os.path.normpath(os.path.join(cwd, os.path.expanduser(spelled)))


def claude_tool(tool: str, arguments: object, cwd: str) -> tuple[str, Any]:
    """``(tool_name, tool_input)`` as Claude Code would spell a call of our ``tool`` with
    ``arguments``: its name (:func:`claude_code_names`' first; ``mcp__server__tool`` and every
    other name as it is) and its field names where ours differ (``file_path`` for ``path``,
    made absolute against ``cwd``; ``old_string``/``new_string`` for ``oldText``/``newText``,
    ``MultiEdit`` for several edits; ``-i`` for grep's ``ignoreCase``; ``run_in_background``
    for bash's ``background``); fields Claude Code does not have are kept as they are."""
    name = names[0] if (names := claude_code_names(tool)) else tool
    if not isinstance(arguments, dict):
        return name, arguments
    args: dict[str, Any] = dict(arguments)  # pyright: ignore[reportUnknownArgumentType]
    if tool in ("read", "write", "edit") and "path" in args:
        args["file_path"] = _absolute(args.pop("path"), cwd)
    if tool == "edit":
        edits = args.pop("edits", None)
        if "oldText" in args or "newText" in args:
            edits = [{"oldText": args.pop("oldText", ""), "newText": args.pop("newText", "")}]
        pairs = [
            {"old_string": e.get("oldText", ""), "new_string": e.get("newText", "")}
            for e in (edits if isinstance(edits, list) else [])  # pyright: ignore[reportUnknownVariableType]
            if isinstance(e, dict)
        ]
        if len(pairs) == 1:
            return "Edit", {**args, **pairs[0]}
        return "MultiEdit", {**args, "edits": pairs}
    if tool == "grep" and "ignoreCase" in args:
        args["-i"] = args.pop("ignoreCase")
    if tool == "bash" and "background" in args:
        args["run_in_background"] = args.pop("background")
    if tool in ("grep", "find", "ls") and isinstance(args.get("path"), str):
        args["path"] = _absolute(args["path"], cwd)
    return name, args
