"""The parts of :mod:`coding_agent.acp.editor` and :mod:`coding_agent.acp.terminal` that need no
editor: an editor's MCP servers in ``mcp.json``'s shape, the exit code a ``bash`` result
reports, and the follower an editor's terminal runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from acp.schema import EnvVariable, HttpHeader, HttpMcpServer, McpServerStdio, SseMcpServer

from coding_agent.acp.editor import mcp_servers_entry
from coding_agent.acp.terminal import FOLLOW, bash_exit_code


def test_the_editors_servers_become_mcp_json_entries_with_names_our_tools_can_carry() -> None:
    assert mcp_servers_entry([]) is None and mcp_servers_entry(None) is None
    entry = mcp_servers_entry(
        [
            McpServerStdio(
                name="My files",
                command="/usr/bin/files",
                args=["--root", "/src"],
                env=[EnvVariable(name="TOKEN", value="t")],
            ),
            HttpMcpServer(
                type="http",
                name="web",
                url="http://127.0.0.1:9/mcp",
                headers=[HttpHeader(name="Authorization", value="Bearer x")],
            ),
            SseMcpServer(type="sse", name="old.sse", url="http://127.0.0.1:9/sse", headers=[]),
        ]
    )
    assert entry is not None and entry["source"].startswith("the editor")
    assert entry["mcpServers"] == {
        "My-files": {
            "command": "/usr/bin/files",
            "args": ["--root", "/src"],
            "env": {"TOKEN": "t"},
        },
        "web": {
            "type": "http",
            "url": "http://127.0.0.1:9/mcp",
            "headers": {"Authorization": "Bearer x"},
        },
        "old-sse": {"type": "sse", "url": "http://127.0.0.1:9/sse", "headers": {}},
    }


def test_a_bash_results_exit_code() -> None:
    assert bash_exit_code("hi\n\nCommand exited with code 3", failed=True) == 3
    assert bash_exit_code("hi", failed=False) == 0
    assert bash_exit_code("hi\n\nCommand timed out after 5 seconds", failed=True) == 1
    assert bash_exit_code("x\n\nCommand exited with code 300", failed=True) == 255


def test_the_terminal_follower_prints_the_output_and_exits_with_the_status(tmp_path: Path) -> None:
    output, status = tmp_path / "call.out", tmp_path / "call.status"
    output.write_text("hello\n")
    status.write_text("3")
    done = subprocess.run(
        [sys.executable, "-c", FOLLOW, str(output), str(status), str(os.getpid())],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (3, b"hello\n")


def test_the_terminal_follower_ends_when_the_session_closed_before_the_command(
    tmp_path: Path,
) -> None:
    output, status = tmp_path / "call.out", tmp_path / "call.status"
    output.write_text("half")
    with subprocess.Popen(
        [sys.executable, "-c", FOLLOW, str(output), str(status), str(os.getpid())],
        stdout=subprocess.PIPE,
    ) as follower:
        assert follower.stdout is not None
        assert follower.stdout.read(4) == b"half"  # it follows: no status yet
        output.unlink()  # the session closed (its folder removed)
        assert follower.wait(timeout=60) == 1
        assert b"stopped before the command ended" in follower.stdout.read()
