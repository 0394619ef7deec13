"""The :data:`~.contract.McpHookTools` instance: the hooks feature's ``"type": "mcp_tool"``
hooks call a tool of a server the session runs through it (the features share only the id).

A server not configured here (or a subagent's own), one that failed or stopped, a tool the
server does not list, the tool's own error (``isError``) and a timeout each answer
``{"error": why}`` naming the server and what to do; the hooks feature reads that as a hook
failure. A server still starting is waited for, within the same timeout.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from .client import ServerRunner

__all__ = ["HookTools"]


class HookTools:
    """The :data:`~.contract.McpHookTools` instance: a hook's call to a tool of a server the
    session runs (its configured servers, a trusted project's approved ones; never a
    subagent's own, never a server started for the hook)."""

    def __init__(self, runners: Callable[[], Mapping[str, ServerRunner]]) -> None:
        self._runners = runners  # the session's runners now (none while it stops)

    async def call(
        self, server: str, tool: str, arguments: dict[str, Any], seconds: float
    ) -> dict[str, Any]:
        """``{"text": the result's text}`` or ``{"error": why}`` (with ``"timedOut": true``
        after ``seconds``) (contract)."""
        runners = self._runners()
        runner = runners.get(server)
        if runner is None:
            running = ", ".join(sorted(runners)) or "none"
            return {
                "error": f"MCP server {server!r} is not one this session runs (its servers: "
                f"{running}); configure it (mcp.json, .mcp.json, ~/.claude.json) or fix the "
                'hook\'s "server"'
            }
        from .client import McpCallError  # imported already: a runner exists

        piece: dict[str, Any] = {}
        with anyio.move_on_after(seconds) as scope:  # the wait for a starting server, then the call
            while runner.state == "starting" and not runner.asleep:
                await runner.state_changed()  # a hook at session start: as the model's calls
            if runner.state != "ready" and not runner.asleep:
                why = runner.snapshot().get("error")
                return {
                    "error": f"MCP server {server!r} is not connected (it is {runner.state}"
                    + (f": {why}" if why else "")
                    + "); see /mcp"
                }
            known = [t["tool"] for t in runner.snapshot()["tools"]]
            if tool not in known:
                return {
                    "error": f"MCP server {server!r} has no tool {tool!r} (its tools: "
                    f'{", ".join(known) or "none"}); fix the hook\'s "tool"'
                }
            try:
                piece = await runner.call_tool(tool, dict(arguments))
            except McpCallError as exc:
                return {"error": str(exc)}
        if scope.cancelled_caught:
            return {"error": f"{server}/{tool} timed out after {seconds:g} s", "timedOut": True}
        text = "\n".join(
            str(block.get("text", "")) for block in piece["content"] if block.get("type") == "text"
        )
        if piece["is_error"]:
            return {"error": f"{server}/{tool} answered with an error: {text or '(no text)'}"}
        return {"text": text}
