"""Claude Code's ``"type": "mcp_tool"`` hooks: a tool of one of the session's MCP servers called
with the event, its text answer read as a command hook's stdout.

An entry such as::

    {"type": "mcp_tool", "server": "guard", "tool": "check_command",
     "input": {"command": "${tool_input.command}", "cwd": "${cwd}"},
     "timeout": 30, "onFailure": "block"}

calls ``check_command`` of the configured MCP server ``guard`` with ``input``, each
``${path}`` in its strings replaced from the event's JSON (``${tool_input.file_path}``,
``${tool_name}``, ``${session_id}``, ``${cwd}``, ``${prompt}``...: a dotted path into the
event). These names are Claude Code's (the hook type came in v2.1.118): ``server`` as
``claude mcp list`` names it, ``tool`` without the ``mcp__server__`` prefix, ``input`` with
``${tool_input.file_path}``, ``${tool_name}``, ``${session_id}``, ``${cwd}``, ``timeout`` in
seconds (default 60); the text goes "through the same JSON decision parser as any command
hook", and a wrong server name is "a non-blocking error" (as quoted by
https://buildthisnow.com/blog/tools/hooks/mcp-tool-hooks,
https://dev.to/speedy_devv/mcp-tool-hooks-in-claude-code-24f6 and
https://studiomeyer.academy/recipes/16.1-mcp-tool-hook-intro; ``onFailure`` on mcp_tool hooks:
Claude Code 2.1.295, :mod:`.on_failure`). A string that is
exactly one ``${path}`` takes the value as it is (a number stays a number); inside a longer
string a non-string value is written as JSON; a path the event does not have gives ``""``.

The tool's text (its text blocks joined) is the hook's stdout, read as a command hook's that
exited 0: a JSON decision (``hookSpecificOutput.permissionDecision``, ``decision``, ...) or
plain text. The call goes through the MCP feature's ``mcp.hook-tools`` service
(:data:`MCP_HOOK_TOOLS`, the id only: the features import nothing of each other), observed
optionally: without the MCP feature every such hook fails. The server must be one the session
already runs (its configuration, a trusted project's approved ``.mcp.json``); a hook never
starts one. A server that is not configured or not connected, an unknown tool, the tool's own
error (``isError``) and a timeout are each a *hook failure*: a non-blocking error (logged; the
action goes on), or, with ``"onFailure": "block"``, a block as exit 2 (:mod:`.on_failure`) —
as in Claude Code.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import anyio

from chord import Context, cancel_scope, define_service

from .contract import HookInfo
from .protocol import HookRun

__all__ = ["MCP_HOOK_TOOLS", "McpHookRunner", "McpToolCall", "call_mcp_tool", "substitute"]

_log = logging.getLogger("facets_hooks")

MCP_HOOK_TOOLS = define_service("mcp.hook-tools", local=True)
"""The MCP feature's service (its ``contract.McpHookTools``), named by id: one instance while
that feature runs, none without it."""

_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][\w-]*(?:\.[\w-]+)*)\}")


class McpToolCall:
    """One ``mcp_tool`` hook as written: ``server``, ``tool`` and the ``input`` template. Its
    :meth:`encode` is the :attr:`~.settings.HookSpec.command` (stable: the hook's memo key)."""

    def __init__(self, server: str, tool: str, template: dict[str, Any]) -> None:
        self.server = server
        self.tool = tool
        self.template = template

    def encode(self) -> str:
        return json.dumps(
            {"server": self.server, "tool": self.tool, "input": self.template}, sort_keys=True
        )

    @classmethod
    def decode(cls, command: str) -> McpToolCall:
        data = json.loads(command)
        return cls(str(data["server"]), str(data["tool"]), dict(data["input"]))


def _lookup(payload: dict[str, Any], path: str) -> Any:
    value: Any = payload
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return ""
        value = value[part]  # pyright: ignore[reportUnknownVariableType]
    return value  # pyright: ignore[reportUnknownVariableType]


def substitute(template: Any, payload: dict[str, Any]) -> Any:
    """``template`` with every ``${path}`` of its strings (keys untouched) replaced from the
    event ``payload`` (module docstring)."""
    if isinstance(template, str):
        whole = _PLACEHOLDER.fullmatch(template)
        if whole:
            return _lookup(payload, whole.group(1))

        def text(match: re.Match[str]) -> str:
            value = _lookup(payload, match.group(1))
            return value if isinstance(value, str) else json.dumps(value)

        return _PLACEHOLDER.sub(text, template)
    if isinstance(template, dict):
        return {k: substitute(v, payload) for k, v in template.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(template, list):
        return [substitute(v, payload) for v in template]  # pyright: ignore[reportUnknownVariableType]
    return template


async def call_mcp_tool(
    tools: Any, call: McpToolCall, payload: dict[str, Any], seconds: float
) -> HookRun:
    """The run of one ``mcp_tool`` hook through ``tools`` (the ``mcp.hook-tools`` instance, or
    ``None`` without the MCP feature): exit 0 with the tool's text on stdout, or a run that
    could not start (exit ``None``) with why on stderr, or one that timed out."""
    if tools is None:
        return HookRun(
            None,
            "",
            f"MCP server {call.server!r} cannot be reached: the MCP feature (facets-mcp) is not "
            "loaded in this session; install or enable it, or remove the hook",
        )
    arguments = substitute(call.template, payload)
    answer: dict[str, Any] = await tools.call(call.server, call.tool, arguments, seconds)
    if "text" in answer:
        return HookRun(0, str(answer["text"]), "")
    error = str(answer.get("error") or "the MCP call failed")
    if answer.get("timedOut"):
        return HookRun(None, "", error, timed_out=True)
    return HookRun(None, "", error)


class McpHookRunner:
    """The session facet's side: the ``mcp.hook-tools`` instance while the MCP feature runs
    (:meth:`follow`, its observer), each ``mcp_tool`` hook run through it (:meth:`run`), and
    what ``/hooks`` says of one (:meth:`info`)."""

    def __init__(self) -> None:
        self.tools: Any = None

    async def follow(self, tools: Any, ctx: Context) -> None:
        """Keep ``tools`` while its instance is open (the observer of :data:`MCP_HOOK_TOOLS`)."""
        self.tools = tools
        try:
            with cancel_scope(ctx):
                await anyio.sleep_forever()
        finally:
            if self.tools is tools:
                self.tools = None

    async def run(
        self, command: str, payload: dict[str, Any], seconds: float, where: str, ctx: Context
    ) -> HookRun:
        """Run the hook whose command is ``command`` (:meth:`McpToolCall.encode`); a failure
        or a timeout is logged, naming the hook (``where``)."""
        with cancel_scope(ctx):
            run = await call_mcp_tool(self.tools, McpToolCall.decode(command), payload, seconds)
        if run.timed_out:
            _log.warning("%s timed out after %g s", where, seconds)
        elif run.exit_code is None:
            _log.warning("%s failed: %s", where, run.stderr.strip())
        return run

    def info(self, command: str, info: HookInfo) -> None:
        """Add to ``/hooks``'s ``info`` the hook's ``input`` and, without the MCP feature, a
        note that it fails."""
        info["input"] = McpToolCall.decode(command).template
        if self.tools is None:
            info["note"] = (
                "the MCP feature (facets-mcp) is not loaded in this session: each call fails"
            )
