"""A ``PermissionRequest`` hook's deny with ``"interrupt": true`` in a headless run, through the
real binary: the run exits 1 and says which hook stopped the turn (``-p``'s error line,
``--json``'s result), not that the model failed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

pytestmark = pytest.mark.anyio

BINARY = Path(sys.executable).with_name("coding-agent")
TIMEOUT = 120

STOP = """import json, sys
json.load(sys.stdin)
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {
    "behavior": "deny", "message": "no deleting here", "interrupt": True}}}))
"""


async def _run(
    project: Path, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[bytes]:
    script = project.parent / "faux-script.json"
    steps = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "rm -r build"}}]},
        {"text": "never asked for"},
    ]
    script.write_text(json.dumps(steps))
    with anyio.fail_after(TIMEOUT):
        return await anyio.run_process(
            [str(BINARY), "--faux-script", str(script), *args],
            env=env, cwd=project, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip


async def test_a_hook_that_stops_the_turn_is_named_and_the_run_exits_1(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    project = tmp_path / "project"
    (project / "build").mkdir(parents=True)
    hook_script = tmp_path / "stop.py"
    hook_script.write_text(STOP)
    hook = f"{sys.executable} {hook_script}"
    settings = Path(agent_env["CLAUDE_CONFIG_DIR"]) / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    group = {"matcher": "Bash", "hooks": [{"type": "command", "command": hook}]}
    settings.write_text(json.dumps({"hooks": {"PermissionRequest": [group]}}))
    by = f"PermissionRequest hook `{hook}`"

    result = await _run(project, agent_env, "-p", "clean up")
    err = result.stderr.decode()
    assert result.returncode == 1, err
    assert f"coding-agent: error: the turn was stopped by {by} (continue the session: " in err
    assert "the turn ended unanswered" not in err
    assert (project / "build").is_dir()
    assert result.stdout == b""

    result = await _run(project, agent_env, "--json", "clean up")
    assert result.returncode == 1, result.stderr.decode()
    last = json.loads(result.stdout.decode().splitlines()[-1])
    assert last == {
        "type": "result",
        "ok": False,
        "status": "unanswered",
        "text": "",
        "error": f"stopped by {by}",
    }
