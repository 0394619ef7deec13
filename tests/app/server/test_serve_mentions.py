"""``-p --server``: the working folder is the server's, so ``@file`` mentions are not read from
the client's folder; the prompt goes as typed and one warning line says so."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

pytestmark = pytest.mark.anyio


async def test_a_server_run_sends_mentions_as_typed_with_a_warning(
    servers: Any, agent_env: dict[str, str], project: Path, faux_script: Path, tmp_path: Path
) -> None:
    server = await servers(
        agent_env, ["--faux-script", str(faux_script), "serve", "--cwd", str(project)]
    )
    here = tmp_path / "client-folder"
    here.mkdir()
    (here / "notes.md").write_text("local text\n")
    prompt = "Summarise @notes.md"
    run = [sys.executable, "-m", "coding_agent.cli.main", "--json", prompt, "--server", server.unix]

    def client() -> subprocess.CompletedProcess[str]:
        return subprocess.run(run, env=agent_env, cwd=here, capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip

    done = await anyio.to_thread.run_sync(client)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("coding-agent: warning: @file mentions are not attached") == 1
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    (user,) = [
        line["entry"] for line in lines
        if line["type"] == "entry.added" and line["entry"]["kind"] == "pi.user"
    ]  # fmt: skip
    assert user["model"][0]["content"] == prompt
    assert "local text" not in done.stdout
