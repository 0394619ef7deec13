"""An MCP server behind OAuth in the real coding agent, across the wire: the worker shows it as
``needs login``, ``login`` (what ``/mcp login`` calls) returns the authorization URL over the
wire, the test plays the browser, the worker's loopback callback completes the flow, the tool
call works, and the token file is 0600 under ``$XDG_STATE_HOME/coding-agent/mcp-auth/``."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from worker_support import Client, allow, connected, text_of, worker_process, write_script

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.services import define_service
from chord.state import Delivery
from chord.transport import connect_unix
from chord.wire import connect_service_source
from coding_agent.session_files.folders import Session

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <function MemoryObject:pytest.PytestUnraisableExceptionWarning"
    ),
]

SERVER = Path(__file__).parents[2] / "facets" / "mcp_feature" / "mcp_server.py"
MCP_SERVERS = define_service("mcp.servers")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_a_server_behind_oauth_is_logged_in_over_the_wire(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    config = tmp_path / "config" / "coding-agent" / "mcp.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"mcpServers": {"remote": {"type": "http", "url": url}}}))
    env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    script = write_script(
        tmp_path / "script.json",
        [
            {
                "text": "Calling.",
                "toolCalls": [{"name": "mcp__remote__echo", "arguments": {"text": "oauth"}}],
            },
            {"text": "Done."},
        ],
    )
    process = await anyio.open_process(
        [sys.executable, str(SERVER), "--http", str(port), "--oauth", str(tmp_path / "g.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = Client(approve=allow)
    seen: list[Any] = []
    servers: list[Any] = []

    def remote(predicate: Any) -> bool:
        return any(
            s["name"] == "remote" and predicate(s)
            for v in seen[-1:]
            for s in (v or {}).get("servers", [])
        )

    try:
        async with (
            worker_process(session, env, "--faux-script", str(script)) as worker,
            connected(client, worker.socket),
        ):

            def watcher(fenv: FacetEnvironment) -> None:
                servers.append(fenv.use(MCP_SERVERS))

                def deliver(value: Any, _ctx: Context, _d: Delivery) -> None:
                    seen.append(value)
                    client.notify()

                async def follow() -> None:
                    fenv.own(servers[0].state.subscribe(deliver))

                fenv.on_activate(follow)

            async with anyio.create_task_group() as group:
                source = connect_service_source(
                    lambda: connect_unix(worker.socket), task_group=group
                )
                async with create_facet_host(
                    [define_facet("test/mcp-watcher", watcher)], service_sources=[source]
                ):
                    await client.wait_for(
                        lambda: remote(
                            lambda s: (
                                s.get("error") == "needs login: /mcp login remote (in the TUI)"
                            )
                        )
                    )
                    authorization = await servers[0].login("remote", BACKGROUND)
                    assert isinstance(authorization, str) and "code_challenge=" in authorization
                    async with httpx.AsyncClient(follow_redirects=True, timeout=30) as browser:
                        page = await browser.get(authorization)
                    assert "Logged in" in page.text
                    await client.wait_for(lambda: remote(lambda s: s["state"] == "ready"))
                    await source.aclose()
                group.cancel_scope.cancel()
            await client.root.send({"content": "use the tool"}, BACKGROUND)
            await client.wait_for(lambda: client.turn_ended())
            (result,) = client.entries("pi.tool_result")
            assert text_of(result) == "echo: oauth"
        (tokens,) = (Path(agent_env["XDG_STATE_HOME"]) / "coding-agent" / "mcp-auth").iterdir()
        assert tokens.name.startswith("remote-") and tokens.suffix == ".json"
        assert stat.S_IMODE(tokens.stat().st_mode) == 0o600
        assert json.loads(tokens.read_text())["tokens"]["access_token"]
    finally:
        process.terminate()
        with anyio.fail_after(60):
            await process.wait()
        await process.aclose()
