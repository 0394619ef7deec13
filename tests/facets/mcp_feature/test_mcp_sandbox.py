"""Issue 41: a stdio MCP server with ``"sandbox": true`` runs in the session's OS sandbox.

Two real FastMCP stdio servers with the same tools (``read_path``, ``write_path``), one with
``"sandbox": true``: the sandboxed one is refused ``~/.ssh/id_rsa`` and a write outside the
project while it may write in the project; the other (the control: the test can fail) reads the
key. Where the session has no sandbox, a ``sandbox: true`` server is not started at all and its
state says why. Real bubblewrap, real servers, the real approval path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from mcp_support import SDK_LEAKS, session, stdio_server, write_config

from facets_mcp.client import UNSANDBOXED
from facets_mcp.config import parse_servers
from pico3 import SANDBOX_SERVICE, Sandbox, SandboxPolicy, sandbox_available
from pico3.models.faux import faux_response, faux_tool_call

_STATUS = sandbox_available()
if not _STATUS.available and os.environ.get("CODING_AGENT_REQUIRE_SANDBOX"):  # CI: .ci/run
    raise RuntimeError(f"the sandbox tests need bubblewrap: {_STATUS.reason}")

pytestmark = [pytest.mark.anyio, *SDK_LEAKS]
needs_bwrap = pytest.mark.skipif(not _STATUS.available, reason=_STATUS.reason)

KEY = "PRIVATE-KEY-MATERIAL"


def calls(*pairs: tuple[str, dict[str, Any]]) -> list[Any]:
    steps = [
        faux_response(faux_tool_call(name, args, id=f"c{i}"))
        for i, (name, args) in enumerate(pairs)
    ]
    return [*steps, faux_response("done")]


@needs_bwrap
async def test_a_sandboxed_server_cannot_read_ssh_keys_nor_write_outside_the_project(
    tmp_path: Path,
) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (tmp_path / ".ssh").mkdir()
    key = tmp_path / ".ssh" / "id_rsa"
    key.write_text(KEY + "\n")
    policy = SandboxPolicy(
        project=str(project), temp_dir=str(tmp_path / "sandbox-tmp"), home=str(tmp_path)
    )
    write_config(
        tmp_path / "config",
        {
            "boxed": stdio_server(
                "--name", "boxed", "--files", str(project / "reads"), sandbox=True
            ),
            "open": stdio_server("--name", "open", "--files", str(project / "reads")),
        },
    )
    script = calls(
        ("mcp__boxed__read_path", {"path": str(key)}),
        ("mcp__boxed__write_path", {"path": str(outside / "planted"), "text": "evil"}),
        ("mcp__boxed__write_path", {"path": str(project / "notes.txt"), "text": "fine"}),
        ("mcp__open__read_path", {"path": str(key)}),
    )
    services = {"workspace": str(project), SANDBOX_SERVICE: Sandbox(policy)}
    async with session(tmp_path, script, services=services) as s:
        boxed = await s.server("boxed", "ready")
        assert boxed.get("sandboxed") is True
        assert "sandboxed" not in await s.server("open", "ready")
        read, planted, written, control = await s.turn()
    assert read["content"][0]["text"] == "error: No such file or directory"
    assert planted["content"][0]["text"] == "error: Read-only file system"
    assert not (outside / "planted").exists()
    assert written["content"][0]["text"] == "written"
    assert (project / "notes.txt").read_text() == "fine"
    assert control["content"][0]["text"] == KEY + "\n"  # unconfined: the same tool reads it


async def test_without_a_sandbox_a_sandbox_server_is_not_started_and_says_why(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "started"
    write_config(
        tmp_path / "config",
        {"boxed": stdio_server("--marker", str(marker), sandbox=True)},
    )
    async with session(tmp_path) as s:
        failed = await s.server("boxed", "failed")
        assert failed["error"] == UNSANDBOXED.format(name="boxed")
        assert failed["gaveUpAfter"] >= 1 and failed.get("sandboxed") is True
    assert not marker.exists()


def test_sandbox_is_a_boolean_of_stdio_servers_only() -> None:
    data = {
        "mcpServers": {
            "a": {"command": "x", "sandbox": True},
            "b": {"command": "x", "sandbox": "yes"},
            "c": {"url": "http://127.0.0.1:1/mcp", "sandbox": True},
        }
    }
    servers, errors = parse_servers(data, "mcp.json", {})
    assert [(s.name, s.sandbox) for s in servers] == [("a", True)]
    assert errors == [
        "mcp.json: server 'b': \"sandbox\" must be true or false, got 'yes'; it is skipped",
        "mcp.json: server 'c': \"sandbox\" is for stdio servers only (a http server is not a "
        "process the agent starts); remove it; it is skipped",
    ]
