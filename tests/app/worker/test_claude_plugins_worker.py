"""An enabled Claude Code plugin's agents and hooks reach the subagents and hooks features in
the real worker (the ``claude_plugins`` harness service): real published plugins (feature-dev,
explanatory-output-style, from anthropics/claude-plugins-official:
tests/app/fixtures/claude_plugins) installed in the session's ``~/.claude/plugins`` and enabled
in its ``settings.json``."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from chord.facets import FacetEnvironment, define_facet
from coding_agent.session_files.folders import create_session
from facets_subagents.contract import SubagentDefinitions

sys.path.insert(0, str(Path(__file__).parent))  # worker_support
from worker_support import (  # pyright: ignore[reportMissingImports]
    TIMEOUT,
    Client,
    allow,
    connected,
    text_of,
    until_mcp_ready,
    worker_process,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <function MemoryObject:pytest.PytestUnraisableExceptionWarning"
    ),
]

SERVER = Path(__file__).parents[2] / "facets" / "mcp_feature" / "mcp_server.py"


async def test_an_enabled_plugins_agents_are_subagents(
    tmp_path: Path, agent_env: dict[str, str], claude_plugins: Callable[..., Path]
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    claude = Path(agent_env["CLAUDE_CONFIG_DIR"])
    folder = claude_plugins(claude, "feature-dev")
    claude_plugins(claude, "commit-commands", enable=False)  # installed, not on: nothing
    session = create_session(project, env=agent_env)
    services: list[Any] = []

    def observer(fenv: FacetEnvironment) -> None:
        services.append(fenv.use(SubagentDefinitions))

    client = Client()
    async with (
        worker_process(session, agent_env) as worker,
        connected(client, worker.socket, define_facet("test/observer", observer)),
    ):
        with anyio.fail_after(TIMEOUT):
            summary = await services[0].summary(BACKGROUND)
    agents = {agent["name"]: agent for agent in summary["agents"]}
    assert set(agents) == {"general-purpose", "code-explorer"}
    explorer = agents["code-explorer"]
    assert explorer["source"] == str(folder / "agents" / "code-explorer.md")
    assert explorer["description"].startswith("Deeply analyzes existing codebase features")


async def test_an_enabled_plugins_session_start_hook_runs_with_its_plugin_root(
    tmp_path: Path, agent_env: dict[str, str], claude_plugins: Callable[..., Path]
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    # its hooks.json runs "${CLAUDE_PLUGIN_ROOT}/hooks-handlers/session-start.sh", whose JSON
    # additionalContext is the context before the first prompt
    claude_plugins(Path(agent_env["CLAUDE_CONFIG_DIR"]), "explanatory-output-style")
    steps = {
        "steps": [{"text": "no hook context"}],
        "conversations": [
            {"when": "You are in 'explanatory' output style mode", "steps": [{"text": "on"}]}
        ],
    }
    script = tmp_path / "script.json"
    script.write_text(json.dumps(steps))
    session = create_session(project, env=agent_env)
    client = Client()
    async with (
        worker_process(session, agent_env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "go"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
    answers = [text_of(e) for e in client.view["entries"] if e["kind"] == "pi.assistant"]
    assert answers == ["on"]


async def test_an_enabled_plugins_mcp_server_starts_from_its_plugin_root(
    tmp_path: Path, agent_env: dict[str, str], claude_plugins: Callable[..., Path]
) -> None:
    """A plugin whose ``.mcp.json`` runs ``${CLAUDE_PLUGIN_ROOT}/server.py`` (written here:
    the published MCP plugins reach the network), installed next to a real one."""
    project = tmp_path / "project"
    project.mkdir()
    claude = Path(agent_env["CLAUDE_CONFIG_DIR"])
    folder = claude_plugins(claude, "commit-commands")  # the real plugin, then ours beside it
    plugin = folder.parents[2] / "local" / "echo-tools" / "1.0.0"
    shutil.copytree(folder, plugin)
    (plugin / ".claude-plugin/plugin.json").write_text(json.dumps({"name": "echo-tools"}))
    shutil.copy(SERVER, plugin / "server.py")
    entry = {"command": sys.executable, "args": ["${CLAUDE_PLUGIN_ROOT}/server.py"]}
    (plugin / ".mcp.json").write_text(json.dumps({"echo": entry}))
    records = json.loads((claude / "plugins/installed_plugins.json").read_text())
    records["plugins"]["echo-tools@local"] = [{"scope": "user", "installPath": str(plugin)}]
    (claude / "plugins/installed_plugins.json").write_text(json.dumps(records))
    settings = json.loads((claude / "settings.json").read_text())
    settings["enabledPlugins"]["echo-tools@local"] = True
    (claude / "settings.json").write_text(json.dumps(settings))
    call = {"name": "mcp__echo__echo", "arguments": {"text": "plugin"}}
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"toolCalls": [call]}, {"text": "Done."}]}))
    session = create_session(project, env=agent_env)
    client = Client(approve=allow)
    async with (
        worker_process(session, agent_env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await until_mcp_ready(client, worker.socket, "echo")
        await client.root.send({"content": "use the tool"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
    (result,) = client.entries("pi.tool_result")
    assert text_of(result) == "echo: plugin"
