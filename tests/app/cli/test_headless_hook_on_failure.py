"""A project's guard hook with ``"onFailure": "block"`` that crashes, through the real binary in
``-p`` mode: the Bash call it guards is blocked (its marker file is never created), the model
reads why, and the user's stderr names the hook and its failure. Without ``onFailure`` the same
crash lets the call through (the default ``continue``, as in Claude Code)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_agent.settings.trust import TrustStore

pytestmark = pytest.mark.anyio

BINARY = Path(sys.executable).with_name("coding-agent")
TIMEOUT = 120

GUARD = """#!/bin/bash
set -euo pipefail
command=$(policy-check --field command)   # not installed: the guard crashes (exit 127)
[[ $command == *"rm -rf"* ]] && { echo "no rm -rf" >&2; exit 2; }
exit 0
"""


async def _run(tmp: Path, env: dict[str, str], hook: dict[str, Any]) -> tuple[int, str, str]:
    project = tmp / "project"
    (project / ".claude").mkdir(parents=True, exist_ok=True)
    group = {"matcher": "Bash", "hooks": [hook]}
    (project / ".claude" / "settings.json").write_text(
        json.dumps({"hooks": {"PreToolUse": [group]}})
    )
    TrustStore.default(env).set(project, True)
    script = tmp / "faux-script.json"
    steps = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo ran > marker"}}]},
        {"text": "finished"},
    ]
    script.write_text(json.dumps(steps))
    with anyio.fail_after(TIMEOUT):
        done = await anyio.run_process(
            [str(BINARY), "--faux-script", str(script), "--permission-mode", "auto",
             "--json", "run it"],
            env=env, cwd=project, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_a_crashing_guard_with_on_failure_block_keeps_the_command_from_running(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    guard = tmp_path / "guard.sh"
    guard.write_text(GUARD)
    guard.chmod(0o755)
    env = agent_env
    hook = {"type": "command", "command": str(guard), "onFailure": "block"}
    code, out, err = await _run(tmp_path, env, hook)
    assert code == 0, err
    assert not (tmp_path / "project" / "marker").exists(), err
    said = f"PreToolUse hook `{guard}` ({tmp_path / 'project' / '.claude' / 'settings.json'}) "
    said += 'failed and its onFailure is "block", so this was blocked: it exited with code 127'
    assert said in err, err  # the user sees it
    events = [json.loads(line) for line in out.splitlines()]
    entries = [e["entry"] for e in events if e["type"] == "entry.added"]
    (result,) = [e["model"][0] for e in entries if e["kind"] == "pi.tool_result"]
    assert result["isError"] is True  # and the model reads it
    assert result["content"][0]["text"].startswith(f"Tool call blocked: {said}")

    # the default: the same crash is a non-blocking error and the command runs
    code, _out, err = await _run(tmp_path, env, {"type": "command", "command": str(guard)})
    assert code == 0, err
    assert (tmp_path / "project" / "marker").read_text() == "ran\n"
