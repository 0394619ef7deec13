"""OAuth 2.1 against a local authorization server: a FastMCP server on loopback that is its own
authorization server (``mcp_server.py --oauth``: dynamic client registration, PKCE, refresh).

Without a token the server shows ``needs login: /mcp login NAME`` (no retry loop, no traceback);
``login`` returns the authorization URL; the test plays the browser (follows it to the worker's
loopback callback); the tool call then succeeds; the token file is 0600 in the agent's state; a
restarted worker reuses it; an expired token is refreshed, not logged in again."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import pytest
from mcp_support import SDK_LEAKS, SERVER, free_port, session, write_config

from chord import RemoteServiceError
from chord.context import BACKGROUND
from facets_mcp.auth import token_path
from facets_mcp.tui import panel_text
from pico3.models.faux import FauxStep, faux_response, faux_tool_call

pytestmark = [pytest.mark.anyio, *SDK_LEAKS]


def echo_script(text: str) -> list[FauxStep]:
    return [
        faux_response(faux_tool_call("mcp__remote__echo", {"text": text}, id=f"e-{text}")),
        faux_response("done"),
    ]


async def test_login_call_token_file_restart_and_refresh(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    grants = tmp_path / "grants.log"
    state = tmp_path / "agent-state"
    write_config(tmp_path / "config", {"remote": {"type": "http", "url": url}})
    services = {"agent_state_dir": str(state)}
    process = await anyio.open_process(
        [sys.executable, SERVER, "--http", str(port), "--oauth", str(grants), "--name", "remote"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    tokens = token_path(state, "remote", url)
    try:
        async with session(tmp_path, echo_script("first"), services=services) as s:
            value = await s.until(
                lambda v: any("needs login" in x.get("error", "") for x in v["servers"])
            )
            (remote,) = [x for x in value["servers"] if x["name"] == "remote"]
            assert remote["state"] == "failed"
            assert remote["error"] == "needs login: /mcp login remote (in the TUI)"
            assert "retryInSeconds" not in remote  # waits for the login, no retry loop
            assert "needs login: /mcp login remote" in panel_text(value)
            assert not grants.exists()  # no client registered before a login is asked for

            authorization = await s.mcp.login("remote", BACKGROUND)
            query = parse_qs(urlsplit(authorization).query)
            assert query["code_challenge_method"] == ["S256"] and query["code_challenge"]
            redirect = query["redirect_uri"][0]
            assert redirect.startswith("http://127.0.0.1:") and redirect.endswith("/callback")
            shown = await s.until(
                lambda v: any(x.get("loginUrl") == authorization for x in v["servers"])
            )
            assert f"log in: open {authorization}" in panel_text(shown)
            # the browser: the authorization server approves and redirects to the callback
            async with httpx.AsyncClient(follow_redirects=True, timeout=30) as browser:
                page = await browser.get(authorization)
            assert page.status_code == 200 and "Logged in" in page.text
            ready = await s.server("remote", "ready")
            assert "loginUrl" not in ready and "mcp__remote__echo" in {
                t["name"] for t in ready["tools"]
            }
            (echo,) = await s.turn()
            assert echo["isError"] is False and echo["content"][0]["text"] == "echo: first"
        assert grants.read_text().split() == ["register", "authorize", "authorization_code"]
        assert stat.S_IMODE(tokens.stat().st_mode) == 0o600
        assert stat.S_IMODE(tokens.parent.stat().st_mode) == 0o700
        first = json.loads(tokens.read_text())
        assert first["tokens"]["access_token"] and first["tokens"]["refresh_token"]

        # a restarted worker reuses the stored token: no login, no new grant
        async with session(tmp_path, echo_script("again"), services=services) as s:
            await s.server("remote", "ready")
            (echo,) = await s.turn()
            assert echo["content"][0]["text"] == "echo: again"
        assert grants.read_text().split() == ["register", "authorize", "authorization_code"]

        # an expired token is refreshed (with the stored token endpoint) before it is used
        first["expiresAt"] = time.time() - 60
        tokens.write_text(json.dumps(first))
        async with session(tmp_path, echo_script("refreshed"), services=services) as s:
            await s.server("remote", "ready")
            (echo,) = await s.turn()
            assert echo["content"][0]["text"] == "echo: refreshed"
        assert grants.read_text().split()[-1] == "refresh_token"
        assert "authorize" not in grants.read_text().split()[3:]
        renewed = json.loads(tokens.read_text())
        assert renewed["tokens"]["access_token"] != first["tokens"]["access_token"]
        assert renewed["expiresAt"] > time.time()
        assert stat.S_IMODE(tokens.stat().st_mode) == 0o600
    finally:
        process.terminate()
        with anyio.fail_after(10):
            await process.wait()
        await process.aclose()


async def test_login_is_refused_for_stdio_and_unknown_servers(tmp_path: Path) -> None:
    write_config(tmp_path / "config", {"local": {"command": sys.executable, "args": [SERVER]}})
    async with session(tmp_path) as s:
        with pytest.raises(RemoteServiceError, match="runs over stdio: it needs no login"):
            await s.mcp.login("local", BACKGROUND)
        with pytest.raises(RemoteServiceError, match="Unknown MCP server 'nope'"):
            await s.mcp.login("nope", BACKGROUND)
