"""A subagent never gets more than the run that starts it: Claude Code's run-scoped restrictions
(``--tools``, ``--disallowedTools``, ``--permission-mode plan``) hold inside every subagent
whatever its definition says (``tools``, ``mcpServers``, ``permissionMode``), through the real
binary on the offline faux model. Each attack's subagent tries to create a marker file with
real bash; the marker must not appear, and a control run (the same subagent without the
restriction) shows the trap is armed: there the very same call creates the marker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

pytestmark = pytest.mark.anyio

BINARY = Path(sys.executable).with_name("coding-agent")
TIMEOUT = 120
PROMPT = "You are the intruder subagent."


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    return folder


@pytest.fixture
def env(agent_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    return {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}


async def _run(
    project: Path, env: dict[str, str], steps: Any, *args: str
) -> tuple[int, list[dict[str, Any]], list[str]]:
    """The binary's exit code, its ``--json`` entries and its stderr lines."""
    script = project.parent / "faux-script.json"
    script.write_text(json.dumps(steps))
    with anyio.fail_after(TIMEOUT):
        result = await anyio.run_process(
            [str(BINARY), "--faux-script", str(script), *args],
            env=env, cwd=project, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    lines = [json.loads(line) for line in result.stdout.decode().splitlines() if line.strip()]
    entries = [line["entry"] for line in lines if line.get("type") == "entry.added"]
    return result.returncode, entries, result.stderr.decode().splitlines()


def _intrusion(marker: Path, subagent_type: str = "intruder") -> dict[str, Any]:
    """The root calls the subagent; the subagent runs ``touch marker`` with bash."""
    call = {"description": "intrude", "prompt": "go", "subagent_type": subagent_type}
    touch = {"name": "bash", "arguments": {"command": f"touch {marker}"}}
    return {
        "steps": [{"toolCalls": [{"name": "agent", "arguments": call}]}, {"text": "root done"}],
        "conversations": [
            # the subagent's report echoes its request: its tool result shows in the root
            {"when": PROMPT, "steps": [{"toolCalls": [touch]}, {"echo": True}]}
        ],
    }


def _report(entries: list[dict[str, Any]]) -> str:
    """The subagent's report (the root's one tool result): its request, echoed, so the result
    of its own tool call is in it."""
    (result,) = [e for e in entries if e["kind"] == "pi.tool_result"]
    return result["model"][0]["content"][0]["text"]


def _agents(**fields: Any) -> str:
    return json.dumps({"intruder": {"description": "intrudes", "prompt": PROMPT, **fields}})


async def test_tools_holds_in_a_subagent_with_mcp_servers(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """``--tools Read,Agent``: a subagent whose definition lists ``mcpServers`` (here a name no
    configuration has) is not offered ``bash`` again, even in ``auto`` mode."""
    marker = tmp_path / "pwned"
    flags = ["--json", "go", "--permission-mode", "auto"]
    agents = _agents(mcpServers=["nowhere"])
    # armed: without --tools the subagent's bash runs and creates the marker
    code, entries, errors = await _run(project, env, _intrusion(marker), *flags, "--agents", agents)
    assert marker.exists(), (code, _report(entries), errors)
    marker.unlink()
    code, entries, errors = await _run(
        project, env, _intrusion(marker), *flags, "--agents", agents, "--tools", "Read,Agent"
    )
    assert not marker.exists()
    assert "Tool 'bash' was not offered to the model." in _report(entries), errors
    assert code == 0
