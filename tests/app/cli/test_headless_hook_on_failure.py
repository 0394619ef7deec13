"""A project's guard hook with ``"onFailure": "block"`` that crashes, through the real binary in
``-p`` mode: the Bash call it guards is blocked (its marker file is never created), the model
reads why, and the user's stderr names the hook and its failure. Without ``onFailure`` the same
crash lets the call through (the default ``continue``, as in Claude Code)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from coding_agent.settings.trust import TrustStore
from tests.app.cli._scripted import json_entries, run_scripted

pytestmark = pytest.mark.anyio

GUARD = """#!/bin/bash
set -euo pipefail
command=$(policy-check --field command)   # not installed: the guard crashes (exit 127)
[[ $command == *"rm -rf"* ]] && { echo "no rm -rf" >&2; exit 2; }
exit 0
"""


async def _run(
    tmp: Path, env: dict[str, str], hook: dict[str, Any]
) -> subprocess.CompletedProcess[bytes]:
    """The trusted project ``tmp/project`` guarding Bash with ``hook``; a ``--json`` run in auto
    mode whose model writes ``marker`` with bash."""
    project = tmp / "project"
    (project / ".claude").mkdir(parents=True, exist_ok=True)
    group = {"matcher": "Bash", "hooks": [hook]}
    (project / ".claude" / "settings.json").write_text(
        json.dumps({"hooks": {"PreToolUse": [group]}})
    )
    TrustStore.default(env).set(project, True)
    steps = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo ran > marker"}}]},
        {"text": "finished"},
    ]
    return await run_scripted(project, env, steps, "--permission-mode", "auto", "--json", "run it")


async def test_a_crashing_guard_with_on_failure_block_keeps_the_command_from_running(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    guard = tmp_path / "guard.sh"
    guard.write_text(GUARD)
    guard.chmod(0o755)
    env = agent_env
    hook = {"type": "command", "command": str(guard), "onFailure": "block"}
    done = await _run(tmp_path, env, hook)
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert not (tmp_path / "project" / "marker").exists(), err
    said = f"PreToolUse hook `{guard}` ({tmp_path / 'project' / '.claude' / 'settings.json'}) "
    said += 'failed and its onFailure is "block", so this was blocked: it exited with code 127'
    assert said in err, err  # the user sees it
    entries = json_entries(done.stdout)
    (result,) = [e["model"][0] for e in entries if e["kind"] == "pi.tool_result"]
    assert result["isError"] is True  # and the model reads it
    assert result["content"][0]["text"].startswith(f"Tool call blocked: {said}")

    # the default: the same crash is a non-blocking error and the command runs
    done = await _run(tmp_path, env, {"type": "command", "command": str(guard)})
    assert done.returncode == 0, done.stderr.decode()
    assert (tmp_path / "project" / "marker").read_text() == "ran\n"
