"""OAuth 2.1 against a local authorization server: a FastMCP server on loopback that is its own
authorization server (``mcp_server.py --oauth``: dynamic client registration, PKCE, refresh).

Without a token the server shows ``needs login: /mcp login NAME`` (no retry loop, no traceback);
``login`` returns the authorization URL; the test plays the browser (follows it to the worker's
loopback callback); the tool call then succeeds; the token file is 0600 in the agent's state; a
restarted worker reuses it; an expired token is refreshed, not logged in again; a token the
authorization server no longer knows means *needs login* again."""

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
from textual.app import App, ComposeResult
from textual.containers import Vertical

from chord import RemoteServiceError
from chord.context import BACKGROUND
from chord.facets import create_facet_host
from chord.remote import LoopbackServiceSource
from chord.textual import TextualTui, tui_facet
from facets_mcp.auth import TokenFile, oauth_provider, token_path
from facets_mcp.tui import open_in_browser, panel_text
from facets_mcp.tui import tui_facet as mcp_tui_facet
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
    command = [sys.executable, SERVER, "--http", str(port), "--oauth", str(grants)]
    process = await anyio.open_process(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
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

        # two sessions' workers share the file: one refreshes (the server rotates the refresh
        # token), the other takes the new tokens from the file instead of refreshing with the
        # rotated one (which would fail and ask for a login)
        one, other = TokenFile(tokens), TokenFile(tokens)
        auth_one = oauth_provider("remote", url, one, None)
        auth_other = oauth_provider("remote", url, other, None)
        assert auth_one is not None and auth_other is not None
        probe = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        async with httpx.AsyncClient(auth=auth_other) as b, httpx.AsyncClient(auth=auth_one) as a:
            assert (await b.post(url, json=probe)).status_code != 401
            expired = json.loads(tokens.read_text())
            expired["expiresAt"] = time.time() - 60
            tokens.write_text(json.dumps(expired))
            assert (await a.post(url, json=probe)).status_code != 401  # refreshes
            refreshed = json.loads(tokens.read_text())["tokens"]["access_token"]
            assert refreshed != expired["tokens"]["access_token"]
            auth_other.context.token_expiry_time = time.time() - 1  # expired in its memory too
            assert (await b.post(url, json=probe)).status_code != 401
            assert auth_other.context.current_tokens is not None
            assert auth_other.context.current_tokens.access_token == refreshed
        assert grants.read_text().split()[-2:] == ["refresh_token", "refresh_token"]

        # the authorization server forgot everything (restarted): the stored token is refused,
        # so the server needs a login again; the login registers a new client
        process.terminate()
        with anyio.fail_after(10):
            await process.wait()
        await process.aclose()
        process = await anyio.open_process(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        async with session(tmp_path, echo_script("fresh"), services=services) as s:
            await s.until(
                lambda v: (
                    v["servers"][0].get("error") == "needs login: /mcp login remote (in the TUI)"
                )
            )
            authorization = await s.mcp.login("remote", BACKGROUND)
            assert authorization is not None
            async with httpx.AsyncClient(follow_redirects=True, timeout=30) as browser:
                assert "Logged in" in (await browser.get(authorization)).text
            await s.server("remote", "ready")
            (echo,) = await s.turn()
            assert echo["content"][0]["text"] == "echo: fresh"
        assert grants.read_text().split()[-3:] == ["register", "authorize", "authorization_code"]
    finally:
        process.terminate()
        with anyio.fail_after(10):
            await process.wait()
        await process.aclose()


async def test_a_refused_login_says_so_and_waits_for_another(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    write_config(tmp_path / "config", {"remote": {"type": "http", "url": url}})
    process = await anyio.open_process(
        [sys.executable, SERVER, "--http", str(port), "--oauth", str(tmp_path / "g.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    services = {"agent_state_dir": str(tmp_path / "state")}
    try:
        async with session(tmp_path, services=services) as s:
            await s.until(lambda v: "needs login" in v["servers"][0].get("error", ""))
            authorization = await s.mcp.login("remote", BACKGROUND)
            assert authorization is not None
            query = parse_qs(urlsplit(authorization).query)
            # the user said no: the authorization server sends the browser back with an error
            refused = f"{query['redirect_uri'][0]}?error=access_denied&state={query['state'][0]}"
            async with httpx.AsyncClient(timeout=30) as browser:
                page = await browser.get(refused)
            assert "The login was refused" in page.text
            await s.until(lambda v: "login failed" in v["servers"][0].get("error", ""))
            (failed,) = s.state().value["servers"]
            assert failed["error"] == (
                "login failed: the authorization server refused the login: access_denied; "
                "/mcp login remote to try again"
            )
            assert "retryInSeconds" not in failed and "loginUrl" not in failed
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


BROWSER = """#!{python}
# a browser for the test: records the URL, follows the authorization to the callback
import sys, httpx
open({record!r}, "a").write(sys.argv[1] + "\\n")
page = httpx.get(sys.argv[1], follow_redirects=True, timeout=30)
open({record!r}, "a").write(page.text + "\\n")
"""


class PanelApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.tui = TextualTui(self, ready=False)

    def compose(self) -> ComposeResult:
        yield Vertical(id="panels")

    def on_mount(self) -> None:
        self.tui.mark_ready()


async def test_the_login_command_prints_the_url_and_opens_the_browser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import webbrowser

    record = tmp_path / "browser.log"
    browser = tmp_path / "browser"
    browser.write_text(BROWSER.format(python=sys.executable, record=str(record)))
    browser.chmod(0o700)
    monkeypatch.setenv("BROWSER", str(browser))
    monkeypatch.setattr(webbrowser, "_tryorder", None)  # read $BROWSER again
    monkeypatch.setattr(webbrowser, "_browsers", {})
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    write_config(tmp_path / "config", {"remote": {"type": "http", "url": url}})
    process = await anyio.open_process(
        [sys.executable, SERVER, "--http", str(port), "--oauth", str(tmp_path / "g.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    app = PanelApp()
    services = {"agent_state_dir": str(tmp_path / "state")}
    try:
        async with session(tmp_path, services=services) as s, app.run_test() as pilot:
            source = LoopbackServiceSource(s.host.services, task_group=s.group)
            facets = [tui_facet(app.tui), mcp_tui_facet]
            async with create_facet_host(facets, service_sources=[source]):
                await s.until(
                    lambda v: any("needs login" in x.get("error", "") for x in v["servers"])
                )
                assert await app.tui.run_command("/mcp login remote", BACKGROUND) is True
                await s.server("remote", "ready")
                await pilot.pause()
                opened, answer = record.read_text().splitlines()[:2]
                assert opened.startswith(f"http://127.0.0.1:{port}/authorize?")
                assert answer == "Logged in. You can close this tab."
                toasts = [n.message for n in app._notifications]  # pyright: ignore[reportPrivateUsage]
                assert f"Log in to MCP server remote: open {opened}" in toasts
                # refused (an unknown server): not done, the app keeps the line to fix
                assert await app.tui.run_command("/mcp login local", BACKGROUND) is False
                await pilot.pause()  # the toast is a message to the app
                errors = [n.message for n in app._notifications if n.severity == "error"]  # pyright: ignore[reportPrivateUsage]
                assert errors == [
                    "MCP login local: Unknown MCP server 'local' (configured: remote; a "
                    "subagent's own servers are known while it runs)"
                ]
    finally:
        process.terminate()
        with anyio.fail_after(10):
            await process.wait()
        await process.aclose()


def test_no_console_browser_is_started_without_a_desktop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``$BROWSER`` and a display, nothing is run (lynx or w3m would take the TUI's
    terminal): the URL shown is the way; on a desktop, ``xdg-open`` gets it."""
    if sys.platform == "darwin":
        pytest.skip("macOS always has a graphical browser (open)")
    record = tmp_path / "opened"
    fake = tmp_path / "bin" / "xdg-open"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$1" > {record}\n')
    fake.chmod(0o700)
    for name in ("BROWSER", "DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(fake.parent))
    assert open_in_browser("http://127.0.0.1:1/authorize?x=1") is False
    assert not record.exists()
    monkeypatch.setenv("DISPLAY", ":0")
    assert open_in_browser("http://127.0.0.1:1/authorize?x=1") is True
    assert record.read_text() == "http://127.0.0.1:1/authorize?x=1\n"
