"""MCP over the legacy HTTP+SSE transport: a real FastMCP SSE server on loopback, configured as
Claude Code writes it (``"type": "sse"``), offers and runs its tools."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp_support import SDK_LEAKS, SERVER, free_port, session, write_config

from pico3.models.faux import faux_response, faux_tool_call

pytestmark = [pytest.mark.anyio, *SDK_LEAKS]


async def test_an_sse_server_offers_and_runs_its_tools(tmp_path: Path) -> None:
    port = free_port()
    write_config(
        tmp_path / "config",
        {"old": {"type": "sse", "url": f"http://127.0.0.1:{port}/sse", "headers": {"X-K": "v"}}},
    )
    script = [
        faux_response(faux_tool_call("mcp__old__echo", {"text": "over sse"}, id="s1")),
        faux_response(faux_tool_call("mcp__old__add", {"a": 1, "b": 2}, id="s2")),
        faux_response("done"),
    ]
    process = await anyio.open_process(
        [sys.executable, SERVER, "--http", str(port), "--sse", "--name", "old"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        async with session(tmp_path, script) as s:
            # until it listens the server fails and is tried again with backoff
            ready = await s.server("old", "ready")
            assert ready["transport"] == "sse" and "mcp__old__echo" in {
                t["name"] for t in ready["tools"]
            }
            assert ready["resources"][0]["uri"] == "memo://greeting"
            echo, add = await s.turn()
            assert echo["isError"] is False and echo["content"][0]["text"] == "echo: over sse"
            assert add["isError"] is False and "3" in add["content"][0]["text"]
            assert [a["name"] for a in s.approvals] == ["mcp__old__echo", "mcp__old__add"]
    finally:
        process.terminate()
        with anyio.fail_after(10):
            await process.wait()
        await process.aclose()
