"""facets-mcp in the real coding agent, across the wire: the worker loads the package through its
entry point, reads ``$XDG_CONFIG_HOME/coding-agent/mcp.json``, starts a real FastMCP stdio server,
the faux model calls its tool, the approval dialog reaches the client, the result comes back; the
``mcp.servers`` state is served to the client."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from worker_support import Client, allow, connected, text_of, worker_process, write_script

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.services import define_service
from chord.state import Delivery
from chord.transport import connect_unix
from chord.wire import connect_service_source
from coding_agent.sessions import Session

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <function MemoryObject:pytest.PytestUnraisableExceptionWarning"
    ),
]

SERVER = Path(__file__).parents[2] / "facets" / "mcp_feature" / "mcp_server.py"
MCP_SERVERS = define_service("mcp.servers")


async def test_the_worker_offers_mcp_tools_and_serves_their_state(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "config" / "coding-agent" / "mcp.json"
    config.parent.mkdir(parents=True)
    config.write_text(
        json.dumps({"mcpServers": {"echo": {"command": sys.executable, "args": [str(SERVER)]}}})
    )
    env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    script = write_script(
        tmp_path / "script.json",
        [
            {
                "text": "Calling.",
                "toolCalls": [{"name": "mcp__echo__echo", "arguments": {"text": "wire"}}],
            },
            {"text": "Done."},
        ],
    )
    client = Client(approve=allow)
    seen: list[Any] = []
    async with (
        worker_process(session, env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        # the mcp.servers state, over the wire, until the server is ready
        def watcher(fenv: FacetEnvironment) -> None:
            servers = fenv.use(MCP_SERVERS)

            def deliver(value: Any, _ctx: Context, _d: Delivery) -> None:
                seen.append(value)
                client.notify()

            async def follow() -> None:
                fenv.own(servers.state.subscribe(deliver))

            fenv.on_activate(follow)

        def ready() -> bool:
            return any(
                s["name"] == "echo" and s["state"] == "ready"
                for v in seen
                for s in (v or {}).get("servers", [])
            )

        async with anyio.create_task_group() as group:
            source = connect_service_source(lambda: connect_unix(worker.socket), task_group=group)
            async with create_facet_host(
                [define_facet("test/mcp-watcher", watcher)], service_sources=[source]
            ):
                await client.wait_for(ready)
                await source.aclose()
            group.cancel_scope.cancel()
        await client.root.send({"content": "use the tool"}, BACKGROUND)
        await client.wait_for(lambda: client.turn_ended())
        (approval,) = client.approvals
        assert approval.request["name"] == "mcp__echo__echo"
        (result,) = client.entries("pi.tool_result")
        assert text_of(result) == "echo: wire"
