"""``-p --server --output-format json|stream-json``: a run on a ``coding-agent serve`` session
writes Claude Code's shapes as a local run does (the result names the server's session)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

pytestmark = pytest.mark.anyio


async def test_a_server_run_writes_claude_codes_result_and_stream(
    servers: Any, agent_env: dict[str, str], project: Path, faux_script: Path, tmp_path: Path
) -> None:
    server = await servers(
        agent_env, ["--faux-script", str(faux_script), "serve", "--cwd", str(project)]
    )

    def client(*args: str) -> subprocess.CompletedProcess[str]:
        run = [sys.executable, "-m", "coding_agent.cli.main", "-p", "hello", *args,
               "--server", server.unix]  # fmt: skip
        return subprocess.run(run, env=agent_env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip

    done = await anyio.to_thread.run_sync(client, "--output-format", "json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["type"], result["subtype"], result["is_error"]) == ("result", "success", False)
    assert result["result"] == "Hello from the server."
    assert result["num_turns"] == 1 and result["session_id"]

    done = await anyio.to_thread.run_sync(client, "--output-format", "stream-json")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["type"] for line in lines] == ["system", "assistant", "result"]
    assert lines[0]["subtype"] == "init" and lines[0]["cwd"] == str(project)
    assert lines[0]["session_id"] == lines[-1]["session_id"]
    assert lines[-1]["result"] == "Hello from the server."  # a new session: the script anew
    assert lines[0]["permissionMode"] == "default"
