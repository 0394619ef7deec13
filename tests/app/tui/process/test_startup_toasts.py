"""The warnings a Claude Code user's settings bring at start, in the real TUI with a real worker.

* The settings of ``~/.claude/settings.json`` this agent does not read are ONE toast: how many,
  which keys, where the reasons are (``/permissions``, ``coding-agent config``).
* The ``sandbox`` note (bash is not sandboxed here) stays a toast of its own.
* A lone such setting is still its own toast, with its whole line, saying it is not used here
  (not calling it a permission rule: ``model`` is none).
* Several warnings about pi's setup (``~/.pi/agent``) are one toast pointing at
  ``coding-agent config``; a key file others may read stays its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.anyio


def _settings(agent_env: dict[str, str], data: dict[str, Any]) -> Path:
    """Write the Claude Code user settings the worker reads (``CLAUDE_CONFIG_DIR``)."""
    path = Path(agent_env["CLAUDE_CONFIG_DIR"]) / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


async def _warnings_at_start(
    kit: Any, session: Any, agent_env: dict[str, str], tmp_path: Path, last: str
) -> list[str]:
    """The warning toasts about the settings file once the one naming ``last`` is shown (the
    notes arrive in one update: every toast of it is shown by then)."""
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, [{"text": "Hi"}]))
    seen: list[str] = []

    def about_settings(app: Any) -> list[str]:
        return [m for s, m in kit.toasts(app) if s == "warning" and "settings" in m]

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(
            pilot, lambda: any(last in m for m in about_settings(app)), f"the {last} toast"
        )
        seen.extend(about_settings(app))

    await kit.drive(session, keeper, test)
    return seen


async def test_settings_not_read_are_one_toast_and_the_sandbox_note_its_own(
    kit: Any, session: Any, agent_env: dict[str, str], tmp_path: Path
) -> None:
    path = _settings(
        agent_env,
        {
            "statusLine": {"type": "command", "command": "~/.claude/statusline.sh"},
            "env": {"DISABLE_TELEMETRY": "1"},
            "model": "opus",
            "alwaysThinkingEnabled": True,
            "sandbox": {"enabled": True},
            "permissions": {"allow": ["Bash(ls:*)"]},
        },
    )
    toasts = await _warnings_at_start(kit, session, agent_env, tmp_path, "sandbox.enabled")
    folded = (
        f"4 settings from {path} are not used here: statusLine, env, model, "
        "alwaysThinkingEnabled — /permissions or `coding-agent config` lists why"
    )
    [sandbox] = [m for m in toasts if "sandbox" in m]
    assert sorted(toasts) == sorted([folded, sandbox])
    assert sandbox.startswith(f"Permission rules: {path}: `sandbox.enabled`: ")
    assert "bash is NOT sandboxed" in sandbox


async def test_a_lone_setting_not_read_is_its_own_toast_as_before(
    kit: Any, session: Any, agent_env: dict[str, str], tmp_path: Path
) -> None:
    path = _settings(agent_env, {"statusLine": {"type": "command", "command": "x"}})
    toasts = await _warnings_at_start(kit, session, agent_env, tmp_path, "statusLine")
    assert toasts == [
        f"Not used here: {path}: `statusLine`: this agent does not run a status line "
        "command; its footer shows the model, the context used and the cost"
    ]


async def test_pi_setup_warnings_are_one_toast_and_a_key_file_open_to_others_its_own(
    kit: Any,
    session: Any,
    agent_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pi user's ``~/.pi/agent`` (the TUI reads it through ``os.environ``): two providers
    that cannot be used are one toast; an ``auth.json`` others may read is a toast of its own."""
    pi = tmp_path / "pi"
    pi.mkdir()
    (pi / "models.json").write_text(json.dumps({"providers": {"mine": 1, "other": 2}}))
    auth = pi / "auth.json"
    auth.write_text("{}")
    auth.chmod(0o644)
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(pi))
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, [{"text": "Hi"}]))
    seen: list[str] = []

    def about_pi(app: Any) -> list[str]:
        return [m for s, m in kit.toasts(app) if s == "warning" and (str(pi) in m or "pi's" in m)]

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: any("auth.json" in m for m in about_pi(app)), "pi")
        seen.extend(about_pi(app))

    await kit.drive(session, keeper, test)
    assert sorted(seen) == [
        f"{auth}: not read: pi's keys are read only from a file that is yours and private "
        "(mode 0600), this one is mode 0644",
        "2 things of pi's setup are not used here: provider 'mine' is not an object; provider "
        "'other' is not an object — `coding-agent config` lists why",
    ]
