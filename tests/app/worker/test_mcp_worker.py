"""facets-mcp in the real coding agent, across the wire: the worker loads the package through its
entry point, reads ``$XDG_CONFIG_HOME/coding-agent/mcp.json``, starts a real FastMCP stdio server,
the faux model calls its tool, the approval dialog reaches the client, the result comes back; the
``mcp.servers`` state is served to the client."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from worker_support import (
    MCP_SERVERS,
    Client,
    allow,
    connected,
    text_of,
    until_mcp_ready,
    worker_process,
    write_script,
)

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, define_facet
from chord.services import define_service
from chord.state import Delivery
from coding_agent.session_files.folders import Session

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <function MemoryObject:pytest.PytestUnraisableExceptionWarning"
    ),
]

SERVER = Path(__file__).parents[2] / "facets" / "mcp_feature" / "mcp_server.py"


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
    async with (
        worker_process(session, env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await until_mcp_ready(client, worker.socket, "echo")  # its tool is offered
        await client.root.send({"content": "use the tool"}, BACKGROUND)
        await client.wait_for(lambda: client.turn_ended())
        (approval,) = client.approvals
        assert approval.request["name"] == "mcp__echo__echo"
        (result,) = client.entries("pi.tool_result")
        assert text_of(result) == "echo: wire"


MCP_ELICITATIONS = define_service("mcp.elicitation")


async def test_an_answered_elicitation_is_not_asked_again_after_a_sigkill(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    marker = tmp_path / "answered"
    os.mkfifo(marker)
    config = tmp_path / "config" / "coding-agent" / "mcp.json"
    config.parent.mkdir(parents=True)
    server = {"command": sys.executable, "args": [str(SERVER), "--extras"]}
    config.write_text(json.dumps({"mcpServers": {"x": server}}))
    env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    call = {"name": "mcp__x__ask_hold", "arguments": {"marker": str(marker)}}
    script = write_script(tmp_path / "script.json", [{"toolCalls": [call]}, {"text": "Done."}])
    client = Client(approve=allow)
    asked: list[Any] = []
    ready: list[bool] = []

    def answering(fenv: FacetEnvironment) -> None:
        servers = fenv.use(MCP_SERVERS)

        def deliver(value: Any, _ctx: Context, _d: Delivery) -> None:
            if any(s["state"] == "ready" for s in (value or {}).get("servers", [])):
                ready.append(True)
                client.notify()

        async def follow() -> None:
            fenv.own(servers.state.subscribe(deliver))

        fenv.on_activate(follow)

        async def answer(dialog: Any, ctx: Context) -> None:
            asked.append(dict(dialog.request.value))
            client.notify()
            content = {"name": "Ada", "age": 36, "color": "red"}
            await dialog.submit({"action": "accept", "content": content}, ctx)

        fenv.observe(MCP_ELICITATIONS, answer)

    elicitations = define_facet("test/elicitations", answering)
    args = ("--faux-script", str(script))
    pid = 0
    try:
        async with (
            worker_process(session, env, *args) as first,
            connected(client, first.socket, elicitations),
        ):
            await client.wait_for(lambda: bool(ready))  # its tool is offered
            await client.root.send({"content": "who am I?"}, BACKGROUND)

            def heard() -> str:  # the server writes the answer it got into the FIFO
                with marker.open() as fifo:
                    return fifo.read()

            with anyio.fail_after(30):
                pid_text, name = (await anyio.to_thread.run_sync(heard)).split()
            pid = int(pid_text)
            assert name == "Ada" and len(asked) == 1
            await first.kill()  # SIGKILL mid-call, after the answer
            await client.wait_for(lambda: client.root_closed)
            async with worker_process(session, env, *args):
                await client.wait_for(
                    lambda: (
                        not client.root_closed
                        and any(text_of(e) == "Done." for e in client.entries("pi.assistant"))
                    )
                )
                (result,) = client.entries("pi.tool_result")
                # not sent again (replay "unsafe"): an error result names the restart
                assert "restart" in text_of(result), text_of(result)
        assert len(asked) == 1  # answered once, never asked again
    finally:
        if pid:  # the killed worker's server outlived it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _pids(marker: Path) -> list[int]:
    return [int(line) for line in marker.read_text().split()] if marker.exists() else []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def _until(condition: Any) -> None:
    with anyio.fail_after(60):
        while not condition():  # noqa: ASYNC110 - a process's state: polled with a deadline
            await anyio.sleep(0.05)


async def test_a_lingering_worker_stops_its_servers_with_no_client_and_restarts_them_on_attach(
    session: Session, agent_env: dict[str, str], tmp_path: Path, processes: Any
) -> None:
    """Issue 40: "each session keeps its servers while the worker lingers" no more: with no
    client attached for ``idle_timeout`` the server's process ends; a client attaching starts
    it again (a new process), ready for the next turn."""
    marker = tmp_path / "started"
    config = tmp_path / "config" / "coding-agent" / "mcp.json"
    config.parent.mkdir(parents=True)
    server = {"command": sys.executable, "args": [str(SERVER), "--marker", str(marker)]}
    config.write_text(json.dumps({"idle_timeout": 1, "mcpServers": {"echo": server}}))
    env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    script = write_script(tmp_path / "script.json", [{"text": "Done."}])
    async with worker_process(session, env, "--faux-script", str(script)) as worker:
        async with connected(Client(approve=allow), worker.socket):
            # running (a second process if the first went idle before the client attached)
            await _until(lambda: bool(_pids(marker)) and _alive(_pids(marker)[-1]))
            started = _pids(marker)
        # the client is gone: the worker lingers, its server does not
        await processes.ended(started[-1:])
        assert worker.process.returncode is None
        async with connected(Client(approve=allow), worker.socket):
            await _until(lambda: len(_pids(marker)) == len(started) + 1)
            await _until(lambda: _alive(_pids(marker)[-1]))
