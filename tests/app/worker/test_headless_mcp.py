"""Headless runs wait for the MCP servers (issue 40 item 1): ``-p``/``--json`` send the first
request once every configured server is ready or failed, so it offers their tools; a failed
server is one warning line on stderr and the run goes on."""

from __future__ import annotations

import io
import json
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from worker_support import write_script

from coding_agent.cli.headless import run_headless
from coding_agent.session_files.folders import Session
from coding_agent.worker.main import WorkerConfig

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <function MemoryObject:pytest.PytestUnraisableExceptionWarning"
    ),
]

SERVER = str(Path(__file__).parents[2] / "facets" / "mcp_feature" / "mcp_server.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(tmp_path: Path, agent_env: dict[str, str], data: dict[str, Any]) -> dict[str, str]:
    path = tmp_path / "config" / "coding-agent" / "mcp.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    return {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}


async def test_the_first_headless_request_offers_the_mcp_tools_and_a_failed_server_is_one_line(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    servers = {
        "echo": {"command": sys.executable, "args": [SERVER]},
        "broken": {"command": sys.executable, "args": [SERVER, "--fail"]},
    }
    env = _config(tmp_path, agent_env, {"mcpServers": servers})
    # The model's first answer calls the MCP tool: the harness runs a call only if the request
    # that produced it offered the tool ("was not offered to the model" otherwise).
    script = write_script(
        tmp_path / "s.json",
        [
            {"toolCalls": [{"name": "mcp__echo__echo", "arguments": {"text": "first"}}]},
            {"text": "done"},
        ],
    )
    config = WorkerConfig(session, faux_script=script, env=env)
    out, err = io.StringIO(), io.StringIO()
    code = await run_headless("go", config, mode="json", out=out, err=err, approve="allow")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    results = [
        line["entry"]
        for line in lines
        if line["type"] == "entry.added" and line["entry"]["kind"] == "pi.tool_result"
    ]
    assert [r["model"][0]["content"][0]["text"] for r in results] == ["echo: first"]
    assert code == 0 and lines[-1]["ok"] is True
    (warning,) = err.getvalue().splitlines()
    assert warning.startswith("coding-agent: warning: MCP server broken failed to start: ")
    assert "cannot start: missing API key" in warning and "going on without its tools" in warning


async def test_headless_waits_no_longer_than_startup_timeout(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    # a server that never answers initialize (sleep reads nothing, writes nothing)
    servers = {"slow": {"command": sys.executable, "args": ["-c", "import time; time.sleep(600)"]}}
    env = _config(tmp_path, agent_env, {"mcpServers": servers, "startup_timeout": 0.5})
    script = write_script(tmp_path / "s.json", [{"text": "answered"}])
    out, err = io.StringIO(), io.StringIO()
    config = WorkerConfig(session, faux_script=script, env=env)
    assert await run_headless("go", config, mode="print", out=out, err=err) == 0
    assert out.getvalue() == "answered\n"
    assert err.getvalue() == (
        "coding-agent: warning: MCP server slow was not ready after 0.5 s (startup_timeout in "
        "mcp.json); going on without its tools\n"
    )


NPM_404 = """\
npm error code E404
npm error 404 Not Found - GET https://registry.npmjs.org/@modelcontextprotocol%2fserver-does-not-exist-xyz - Not found
npm error 404
npm error 404  '@modelcontextprotocol/server-does-not-exist-xyz@*' is not in this registry.
npm error 404
npm error 404 Note that you can also install from a
npm error 404 tarball, folder, http url, or git url.
npm error A complete log of this run can be found in: /home/u/.npm/_logs/2025-06-01T10_00_00_000Z-debug-0.log
"""
"""What ``npx -y`` of a package that does not exist writes on stderr (npm 10) before it exits 1."""


async def _warning(
    session: Session, agent_env: dict[str, str], tmp_path: Path, servers: dict[str, Any]
) -> str:
    """The one warning line of a ``-p`` run with ``servers``."""
    env = _config(tmp_path, agent_env, {"mcpServers": servers})
    script = write_script(tmp_path / "s.json", [{"text": "answered"}])
    out, err = io.StringIO(), io.StringIO()
    config = WorkerConfig(session, faux_script=script, env=env)
    assert await run_headless("go", config, mode="print", out=out, err=err) == 0
    assert out.getvalue() == "answered\n"
    (warning,) = err.getvalue().splitlines()
    return warning


async def test_a_missing_npm_package_is_named_by_npms_404_line_not_its_log_path(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    npx = tmp_path / "npx.sh"  # npx -y @modelcontextprotocol/server-does-not-exist-xyz, offline
    npx.write_text(f"cat >&2 <<'EOF'\n{NPM_404}EOF\nexit 1\n")
    warning = await _warning(
        session, agent_env, tmp_path, {"npm": {"command": "sh", "args": [str(npx)]}}
    )
    assert warning == (
        "coding-agent: warning: MCP server npm failed to start: the server exited with code 1 "
        "before it was ready (stderr: npm error 404 Not Found - GET "
        "https://registry.npmjs.org/@modelcontextprotocol%2fserver-does-not-exist-xyz - Not "
        "found | npm error 404 '@modelcontextprotocol/server-does-not-exist-xyz@*' is not in "
        "this registry.); going on without its tools"
    )


async def test_an_unreachable_http_server_is_named_with_the_cause(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"  # bound then closed: nothing listens
    warning = await _warning(session, agent_env, tmp_path, {"web": {"type": "http", "url": url}})
    assert warning == (
        f"coding-agent: warning: MCP server web failed to start: cannot connect to {url} "
        "(connection refused); going on without its tools"
    )


async def test_a_server_writing_no_json_rpc_fails_soon_saying_what_it_wrote(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    servers = {"chatty": {"command": "sh", "args": ["-c", "echo hello; sleep 60"]}}
    started = anyio.current_time()
    warning = await _warning(session, agent_env, tmp_path, servers)
    assert anyio.current_time() - started < 25  # not the 30 s startup timeout
    assert warning == (
        'coding-agent: warning: MCP server chatty failed to start: it wrote "hello" on stdout, '
        "which is not MCP's JSON-RPC: is this an MCP server, and does it log to stdout?; going "
        "on without its tools"
    )


async def test_headless_declines_a_servers_elicitation(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    servers = {"x": {"command": sys.executable, "args": [SERVER, "--extras"]}}
    env = _config(tmp_path, agent_env, {"mcpServers": servers})
    script = write_script(
        tmp_path / "s.json",
        [{"toolCalls": [{"name": "mcp__x__ask", "arguments": {}}]}, {"text": "done"}],
    )
    config = WorkerConfig(session, faux_script=script, env=env)
    out, err = io.StringIO(), io.StringIO()
    code = await run_headless("go", config, mode="json", out=out, err=err, approve="allow")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    (result,) = [
        line["entry"]
        for line in lines
        if line["type"] == "entry.added" and line["entry"]["kind"] == "pi.tool_result"
    ]
    assert result["model"][0]["content"][0]["text"] == "decline"
    assert code == 0 and err.getvalue() == ""


async def test_headless_sampling_follows_approve(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    servers = {"x": {"command": sys.executable, "args": [SERVER, "--extras"]}}
    env = _config(tmp_path, agent_env, {"mcpServers": servers})
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps(
            {
                "steps": [
                    {"toolCalls": [{"name": "mcp__x__sample", "arguments": {"topic": "tea"}}]},
                    {"text": "done"},
                ],
                # the server's sampling request (its system prompt says "Be brief.")
                "conversations": [{"when": "Be brief.", "steps": [{"text": "A drink."}]}],
            }
        )
    )
    config = WorkerConfig(session, faux_script=script, env=env)
    out, err = io.StringIO(), io.StringIO()
    code = await run_headless("go", config, mode="json", out=out, err=err, approve="allow")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    (result,) = [
        line["entry"]
        for line in lines
        if line["type"] == "entry.added" and line["entry"]["kind"] == "pi.tool_result"
    ]
    assert result["model"][0]["content"][0]["text"] == "sampled (faux/faux-1): A drink."
    assert code == 0
