"""MCP over streamable HTTP: a real FastMCP server on loopback, started by the test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp_support import SDK_LEAKS, SERVER, free_port, session, write_config

from chord.context import BACKGROUND
from pico3.models.faux import faux_response, faux_tool_call

pytestmark = [pytest.mark.anyio, *SDK_LEAKS]


async def test_http_tools_with_headers_and_a_server_that_comes_late(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    write_config(
        tmp_path / "config",
        {"web": {"type": "http", "url": url, "headers": {"X-Token": "${TOKEN:-t0}"}}},
    )
    script = [
        faux_response(faux_tool_call("mcp__web__echo", {"text": "over http"}, id="h1")),
        faux_response(faux_tool_call("mcp__web__add", {"a": 40, "b": 2}, id="h2")),
        faux_response("done"),
    ]
    async with session(tmp_path, script) as s:
        # nothing listens yet: the server fails and is retried with backoff
        failed = await s.server("web", "failed")
        assert "retryInSeconds" in failed
        process = await anyio.open_process(
            [sys.executable, SERVER, "--http", str(port), "--name", "web"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            # now, not after the backoff (which gives up after 5 failed starts)
            await s.mcp.restart("web", BACKGROUND)
            ready = await s.server("web", "ready")
            assert ready["transport"] == "http" and len(ready["tools"]) >= 5
            echo, add = await s.turn()
            assert echo["content"][0]["text"] == "echo: over http"
            assert add["isError"] is False
            assert [a["name"] for a in s.approvals] == ["mcp__web__echo", "mcp__web__add"]
        finally:
            process.terminate()
            with anyio.fail_after(10):
                await process.wait()
            await process.aclose()
