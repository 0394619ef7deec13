"""An enabled Claude Code plugin's agents reach the subagents feature in the real worker (the
``claude_plugins`` harness service): a real published plugin (feature-dev, from
anthropics/claude-plugins-official: tests/app/fixtures/claude_plugins) installed in the
session's ``~/.claude/plugins`` and enabled in its ``settings.json``."""

from __future__ import annotations

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
from worker_support import TIMEOUT, Client, connected, worker_process  # pyright: ignore[reportMissingImports]

pytestmark = pytest.mark.anyio


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
