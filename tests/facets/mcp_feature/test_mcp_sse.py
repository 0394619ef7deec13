"""MCP over the legacy HTTP+SSE transport: a real FastMCP SSE server on loopback, configured as
Claude Code writes it (``"type": "sse"``), offers and runs its tools; behind OAuth it needs a
login, then works."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from mcp_support import SDK_LEAKS, SERVER, free_port, session, write_config

from chord.context import BACKGROUND
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


async def test_an_sse_server_behind_oauth_needs_login_then_works(tmp_path: Path) -> None:
    port = free_port()
    grants = tmp_path / "grants.log"
    write_config(
        tmp_path / "config", {"old": {"type": "sse", "url": f"http://127.0.0.1:{port}/sse"}}
    )
    process = await anyio.open_process(
        [sys.executable, SERVER, "--http", str(port), "--sse", "--oauth", str(grants)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    script = [
        faux_response(faux_tool_call("mcp__old__echo", {"text": "authorized"}, id="o1")),
        faux_response("done"),
    ]
    services = {"agent_state_dir": str(tmp_path / "state")}
    try:
        async with session(tmp_path, script, services=services) as s:
            await s.until(
                lambda v: v["servers"][0].get("error") == "needs login: /mcp login old (in the TUI)"
            )
            authorization = await s.mcp.login("old", BACKGROUND)
            assert authorization is not None
            async with httpx.AsyncClient(follow_redirects=True, timeout=30) as browser:
                assert "Logged in" in (await browser.get(authorization)).text
            await s.server("old", "ready")
            (echo,) = await s.turn()
            assert echo["isError"] is False and echo["content"][0]["text"] == "echo: authorized"
        assert grants.read_text().split() == ["register", "authorize", "authorization_code"]
    finally:
        process.terminate()
        with anyio.fail_after(10):
            await process.wait()
        await process.aclose()
