"""keybindings.toml and the ``theme`` setting in the real TUI (issue 18 item 6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coding_agent.session_files.folders import Session
from coding_agent.settings.config import ConfigError, load_config

pytestmark = pytest.mark.anyio

KEYS = """\
toggle_tools = "f3"
model_picker = "f2"
abort = "ctrl+nope+"
"""


@pytest.fixture
def config_dir(tmp_path: Path, agent_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "config"
    (folder / "coding-agent").mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder))
    agent_env["XDG_CONFIG_HOME"] = str(folder)
    return folder / "coding-agent"


async def test_rebound_keys_and_the_light_theme(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path, config_dir: Path
) -> None:
    (config_dir / "keybindings.toml").write_text(KEYS)
    (config_dir / "config.toml").write_text('theme = "light"\n')
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, [{"text": "ok"}]))
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.toasts(app), "the warning")
        seen["warnings"] = [m for s, m in kit.toasts(app) if s == "warning"]
        await kit.wait_for(pilot, lambda: kit.idle(app) and app.client.models, "the view")
        seen["theme"] = app.theme
        collapsed = app._tools_collapsed
        await pilot.press("ctrl+o")  # its old key does nothing now
        seen["after_ctrl_o"] = app._tools_collapsed == collapsed
        await pilot.press("f3")
        seen["after_f3"] = app._tools_collapsed != collapsed
        await pilot.press("ctrl+l")
        await pilot.pause(0.1)
        seen["ctrl_l_opened"] = not isinstance(app.screen, type(app.screen_stack[0]))
        await pilot.press("f2")
        await kit.wait_for(pilot, lambda: kit.picker_open(app, "Switch the model"), "picker")
        await pilot.press("escape")
        await pilot.press(*"/help", "enter")

        def help_text() -> str:  # the help screen (it stays until Esc)
            return str(getattr(app.screen, "text", ""))

        await kit.wait_for(pilot, help_text, "the help")
        seen["help"] = help_text()

    await kit.drive(session, keeper, test)
    assert seen["theme"] == "textual-light"
    assert seen["after_ctrl_o"] and seen["after_f3"]
    assert seen["ctrl_l_opened"] is False
    assert "f3 expand tool output" in seen["help"] and "f2 switch the model" in seen["help"]
    (warning,) = [w for w in seen["warnings"] if "keybindings.toml" in w]
    assert warning.startswith(f"{config_dir / 'keybindings.toml'}:3: abort: 'ctrl+nope+'")


def test_an_unknown_theme_is_a_config_error_naming_the_line(
    tmp_path: Path, config_dir: Path
) -> None:
    (config_dir / "config.toml").write_text('model = "faux/faux-1"\ntheme = "neon"\n')
    env = {"XDG_CONFIG_HOME": str(config_dir.parent), "HOME": str(tmp_path)}
    with pytest.raises(ConfigError, match=r"config.toml:2: key `theme`: 'neon' is not a theme"):
        load_config(tmp_path, env=env)
    (config_dir / "config.toml").write_text('theme = "dark"\n')
    assert load_config(tmp_path, env=env).theme == "dark"


async def test_a_pi_users_keys_theme_and_extensions_in_the_real_tui(
    kit: Any,
    session: Session,
    agent_env: dict[str, str],
    tmp_path: Path,
    config_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pi's keybindings.json and settings.json theme apply, and its extension is named in a
    warning at start (before: nothing happened, and nothing said so)."""
    pi = tmp_path / "pi-agent"
    (pi / "extensions").mkdir(parents=True)
    (pi / "extensions" / "notify.ts").write_text("export default function (pi) {}\n")
    (pi / "keybindings.json").write_text('{"app.model.select": "f2"}')
    (pi / "settings.json").write_text('{"theme": "light"}')
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(pi))
    agent_env["PI_CODING_AGENT_DIR"] = str(pi)
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, [{"text": "ok"}]))
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.toasts(app), "the warning")
        seen["warnings"] = [m for s, m in kit.toasts(app) if s == "warning"]
        await kit.wait_for(pilot, lambda: kit.idle(app) and app.client.models, "the view")
        seen["theme"] = app.theme
        await pilot.press("f2")
        await kit.wait_for(pilot, lambda: kit.picker_open(app, "Switch the model"), "picker")
        await pilot.press("escape")

    await kit.drive(session, keeper, test)
    assert seen["theme"] == "textual-light"
    (warning,) = [w for w in seen["warnings"] if "pi extensions" in w]
    assert warning.startswith("pi extensions are not run here")
    assert f"{pi / 'extensions' / 'notify.ts'}" in warning
