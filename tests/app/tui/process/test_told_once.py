"""The note about Claude Code's ``model`` setting is told once per distinct value, not at every
start (a newcomer's first day: it was a toast at each start), in the real TUI with a real
worker; notes that concern safety (``env``) are still told at every start, and
``coding-agent config`` lists the ``model`` note every time."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_agent.session_files.folders import create_session

pytestmark = pytest.mark.anyio

BINARY = Path(sys.executable).with_name("coding-agent")


async def _settings_toasts(
    kit: Any, project: Path, agent_env: dict[str, str], tmp_path: Path
) -> list[str]:
    """The warning toasts about the settings file at the start of a new session (its own
    worker), once the one naming ``env`` (told at every start) is shown: the notes arrive in
    one update, so every toast of it is shown by then."""
    session = create_session(project, env=agent_env)
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, [{"text": "Hi"}]))
    seen: list[str] = []

    def about_settings(app: Any) -> list[str]:
        return [m for s, m in kit.toasts(app) if s == "warning" and "settings.json" in m]

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(
            pilot, lambda: any("env" in m for m in about_settings(app)), "the env note"
        )
        seen.extend(about_settings(app))

    await kit.drive(session, keeper, test)
    return seen


async def test_the_model_note_is_told_once_per_value_and_env_every_time(
    kit: Any, project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    settings = Path(agent_env["CLAUDE_CONFIG_DIR"]) / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"model": "opus", "env": {"DISABLE_TELEMETRY": "1"}}))

    first = await _settings_toasts(kit, project, agent_env, tmp_path)
    assert first == [
        f"2 settings from {settings} are not used here: model, env — /permissions or "
        "`coding-agent config` lists why"
    ]
    again = await _settings_toasts(kit, project, agent_env, tmp_path)
    assert len(again) == 1 and "`model`" not in again[0], again
    assert again[0].startswith(f"Not used here: {settings}: `env`: ")

    settings.write_text(json.dumps({"model": "sonnet", "env": {"DISABLE_TELEMETRY": "1"}}))
    changed = await _settings_toasts(kit, project, agent_env, tmp_path)
    assert changed == [first[0]], "a new value is told again"

    listed = await anyio.run_process([str(BINARY), "config"], cwd=project, env=agent_env)
    assert f"{settings}: `model`: this agent does not read Claude Code's model" in (
        listed.stdout.decode()
    )
