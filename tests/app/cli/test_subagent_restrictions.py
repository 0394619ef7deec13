"""A subagent never gets more than what runs it, the narrowest restriction winning: the run's
``--tools`` and ``--strict-mcp-config``, a ``Task(name)`` deny rule, and the calling subagent's
own ``tools`` hold whatever a definition says (``mcpServers``, ``tools``) or however the model
spells ``subagent_type``. Through the real binary on the offline faux model: each attack's
subagent tries to run real bash (or start a real MCP server) that leaves a marker file; the
marker must not appear, and a control run without the restriction shows the trap is armed
(there the very same calls leave it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.app.cli._scripted import json_entries, run_scripted

pytestmark = pytest.mark.anyio

PROMPT = "You are the intruder subagent."
SERVER = str(Path(__file__).parents[2] / "facets" / "mcp_feature" / "mcp_server.py")


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
    result = await run_scripted(project, env, steps, *args)
    return result.returncode, json_entries(result.stdout), result.stderr.decode().splitlines()


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


async def _attack(
    project: Path, env: dict[str, str], steps: Any, agents: str, *flags: str
) -> tuple[int, str, list[str]]:
    """Run ``steps`` with ``--agents agents`` and ``flags``: the exit code, the report of the
    root's one subagent and stderr's lines."""
    code, entries, errors = await _run(
        project, env, steps, "--json", "go", *flags, "--agents", agents
    )
    return code, _report(entries), errors


async def test_tools_holds_in_a_subagent_with_mcp_servers(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """``--tools Read,Agent``: a subagent whose definition lists ``mcpServers`` (here a name no
    configuration has) is not offered ``bash`` again, even in ``auto`` mode (its servers' hook
    added its tools to the loadout before ``--tools`` took bash out, and the last one won)."""
    marker = tmp_path / "pwned"
    agents = _agents(mcpServers=["nowhere"])
    # armed: without --tools the subagent's bash runs and creates the marker
    await _attack(project, env, _intrusion(marker), agents, "--permission-mode", "auto")
    assert marker.exists()
    marker.unlink()
    code, report, errors = await _attack(
        project,
        env,
        _intrusion(marker),
        agents,
        "--permission-mode",
        "auto",
        "--tools",
        "Read,Agent",
    )
    assert not marker.exists()
    assert "Tool 'bash' was not offered to the model." in report, errors
    assert code == 0


async def test_a_subagents_own_subagent_gets_no_tool_its_caller_lacks(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """``outer`` may use only Read and Agent; the ``intruder`` it runs (``tools: Bash``) gets
    no bash, and a warning says why (the root itself may still run the intruder with bash)."""
    marker = tmp_path / "pwned"
    agents = json.dumps(
        {
            "outer": {
                "description": "reads",
                "prompt": "You are OUTER.",
                "tools": ["Read", "Agent"],
            },
            "intruder": {"description": "intrudes", "prompt": PROMPT, "tools": ["Bash"]},
        }
    )
    nested = _intrusion(marker)
    outer_call = {"description": "nest", "prompt": "go", "subagent_type": "outer"}
    inner_call = nested["steps"][0]["toolCalls"][0]
    nested["steps"][0] = {"toolCalls": [{"name": "agent", "arguments": outer_call}]}
    outer = {"when": "You are OUTER.", "steps": [{"toolCalls": [inner_call]}, {"echo": True}]}
    nested["conversations"].insert(0, outer)
    # armed: the root's own call of the intruder runs its bash
    await _attack(project, env, _intrusion(marker), agents, "--permission-mode", "auto")
    assert marker.exists()
    marker.unlink()
    code, report, errors = await _attack(project, env, nested, agents, "--permission-mode", "auto")
    assert not marker.exists()
    assert "Tool 'bash' was not offered to the model." in report
    assert (
        "'intruder' runs as another subagent's subagent, so it gets no tool that subagent "
        "lacks: bash left out" in "\n".join(errors)
    )
    assert code == 0


@pytest.mark.parametrize("written", ["Intruder", "INTRUDER ", "intruder."])
async def test_a_task_deny_rule_holds_however_the_model_spells_the_agent(
    project: Path, env: dict[str, str], tmp_path: Path, written: str
) -> None:
    """``--disallowedTools 'Agent(intruder)'``: the model's ``subagent_type`` ``Intruder`` (which
    the subagents feature resolves to ``intruder``) is denied too."""
    marker = tmp_path / "pwned"
    agents = _agents()
    # armed: the spelling runs the intruder, whose bash runs (auto mode)
    await _attack(project, env, _intrusion(marker, written), agents, "--permission-mode", "auto")
    assert marker.exists()
    marker.unlink()
    code, report, _errors = await _attack(
        project, env, _intrusion(marker, written), agents,
        "--permission-mode", "auto", "--disallowedTools", "Agent(intruder)",
    )  # fmt: skip
    assert not marker.exists()
    assert report.startswith("Tool call blocked: agent was not run: the deny rule Agent(intruder)")
    assert code == 0


async def test_strict_mcp_config_starts_no_server_an_agent_defines(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """``--mcp-config F --strict-mcp-config``: a subagent's own ``mcpServers`` server (written
    inline in its definition) is not started, and a warning names the flag."""
    started = tmp_path / "started"  # the server appends a line here when it starts
    given = tmp_path / "servers.json"
    echo = {"command": sys.executable, "args": [SERVER]}
    given.write_text(json.dumps({"mcpServers": {"echo": echo}}))
    evil = {"command": sys.executable, "args": [SERVER, "--name", "evil", "--marker", str(started)]}
    agents = _agents(mcpServers=[{"evil": evil}])
    call = {"description": "intrude", "prompt": "go", "subagent_type": "intruder"}
    steps = {
        "steps": [{"toolCalls": [{"name": "agent", "arguments": call}]}, {"text": "root done"}],
        "conversations": [{"when": PROMPT, "steps": [{"echo": True}]}],
    }
    # armed: without --strict-mcp-config the subagent's server starts
    await _attack(project, env, steps, agents, "--mcp-config", str(given))
    assert started.exists()
    started.unlink()
    code, _report_text, errors = await _attack(
        project, env, steps, agents, "--mcp-config", str(given), "--strict-mcp-config"
    )
    assert not started.exists()
    assert errors == [
        "agent intruder (mcpServers): 'evil' is not started: this run uses only the servers of "
        "--mcp-config (--strict-mcp-config); the subagent runs without it (add the server there "
        "and name it in mcpServers)"
    ]
    assert code == 0


async def test_a_subagents_own_subagent_starts_no_server_its_caller_lacks(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """``outer`` has no MCP server; the ``intruder`` it runs, whose definition writes one inline
    (a program started for it, its tools offered whatever ``tools`` says), gets none."""
    started = tmp_path / "started"  # the server appends a line here when it starts
    evil = {"command": sys.executable, "args": [SERVER, "--name", "evil", "--marker", str(started)]}
    agents = json.dumps(
        {
            "outer": {
                "description": "reads",
                "prompt": "You are OUTER.",
                "tools": ["Read", "Agent"],
            },
            "intruder": {
                "description": "intrudes",
                "prompt": PROMPT,
                "mcpServers": [{"evil": evil}],
            },
        }
    )
    inner_call = {"description": "intrude", "prompt": "go", "subagent_type": "intruder"}
    outer_call = {**inner_call, "subagent_type": "outer"}
    intruder = {"when": PROMPT, "steps": [{"echo": True}]}
    direct = {
        "steps": [{"toolCalls": [{"name": "agent", "arguments": inner_call}]}, {"text": "done"}],
        "conversations": [intruder],
    }
    outer = {
        "when": "You are OUTER.",
        "steps": [{"toolCalls": [{"name": "agent", "arguments": inner_call}]}, {"echo": True}],
    }
    nested = {
        "steps": [{"toolCalls": [{"name": "agent", "arguments": outer_call}]}, {"text": "done"}],
        "conversations": [outer, intruder],
    }
    # armed: the root's own call of the intruder starts its server
    await _attack(project, env, direct, agents)
    assert started.exists()
    started.unlink()
    code, _report_text, errors = await _attack(project, env, nested, agents)
    assert not started.exists()
    assert errors == [
        "--agents intruder: 'intruder' runs as another subagent's subagent, so it gets no MCP "
        "server that subagent lacks: evil left out"
    ]
    assert code == 0
