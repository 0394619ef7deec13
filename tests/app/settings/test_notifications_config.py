"""config.toml's ``[notifications]``: read into the worker's :class:`WorkerConfig`, quiet
defaults, checked with errors naming file, line and key, and refused in a project file (a
project could post your sessions to its server or run a command of its own)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coding_agent.cli.main import main
from coding_agent.session_files.folders import create_session
from coding_agent.settings.config import ConfigError, load_config
from coding_agent.settings.notifications import NotificationSettings
from coding_agent.worker.main import session_worker_config
from tests.app.settings.conftest import config_env, user_config


def test_the_defaults_are_attention_on_the_terminal_and_desktop_only(tmp_path: Path) -> None:
    env = config_env(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    settings = session_worker_config(create_session(project, env=env), env=env).notifications
    assert settings is not None and settings == NotificationSettings()
    assert (settings.terminal, settings.desktop) == (("attention",), ("attention",))
    assert (settings.desktop_when, settings.when_focused) == ("detached", False)
    assert (settings.webhook, settings.command) == (None, None)
    assert settings.channels("attention") == ["desktop"]
    assert settings.channels("turn") == settings.channels("job") == []


def test_the_table_reaches_the_worker(tmp_path: Path) -> None:
    env = config_env(tmp_path)
    user_config(
        tmp_path,
        '[notifications]\nterminal = []\ndesktop = ["job"]\n'
        'webhook = "https://example.org/hook"\nwebhook_events = ["turn"]\n'
        'command = "cat > /dev/null"\n',
    )
    project = tmp_path / "project"
    project.mkdir()
    settings = session_worker_config(create_session(project, env=env), env=env).notifications
    assert settings is not None and settings.terminal == ()
    assert settings.channels("attention") == ["command"]
    assert settings.channels("turn") == ["webhook", "command"]
    assert settings.channels("job") == ["desktop", "command"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[notifications]\ndesktop = ["attention", "idle"]\n',
            r":1: key `notifications`: `desktop`: unknown event 'idle'; the events are "
            "attention, turn, job",
        ),
        (
            '[notifications]\nwebhook = "example.org"\n',
            r"key `notifications`: `webhook`: 'example.org' is not an http",
        ),
        ('[notifications]\nterminal_style = "osc99"\n', r":2: key `notifications.terminal_style`"),
        ("[notifications]\nsound = true\n", r":2: key `notifications.sound`: unknown key"),
    ],
)
def test_bad_notification_settings_name_the_line_and_key(
    tmp_path: Path, text: str, message: str
) -> None:
    user_config(tmp_path, text)
    with pytest.raises(ConfigError, match=message):
        load_config(env=config_env(tmp_path))


def test_a_project_file_may_not_configure_notifications(tmp_path: Path) -> None:
    env = config_env(tmp_path)
    project = tmp_path / "project"
    (project / ".coding-agent").mkdir(parents=True)
    (project / ".coding-agent" / "config.toml").write_text('[notifications]\ncommand = "x"\n')
    with pytest.raises(ConfigError, match=r"only your own config.toml may configure notif"):
        load_config(project, env=env, trusted=True)


def test_coding_agent_config_shows_the_notifications(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in config_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # no notify-send
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    assert main(["config"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(
        line.startswith("notifications.terminal = attention (auto, while the TUI is unfocused)")
        and line.endswith("# default")
        for line in lines
    )
    assert any(
        line.startswith("notifications.desktop = attention (while no TUI is attached; "
                        "notify-send is not installed: nothing is shown)")
        for line in lines
    )  # fmt: skip
    assert any(line.startswith("notifications.webhook = off") for line in lines)
    path = user_config(tmp_path, '[notifications]\ncommand = "cat"\ncommand_events = ["job"]\n')
    assert main(["config"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(
        line.startswith("notifications.command = cat (job)") and line.endswith(f"# {path}:1")
        for line in lines
    )


def test_an_event_no_channel_takes_is_not_wanted() -> None:
    """The worker records (two commits) only what some channel takes: by default only
    ``attention`` (the terminal and the desktop), never a turn's end or a job's exit."""
    default = NotificationSettings()
    assert default.wanted("attention")
    assert not default.wanted("turn") and not default.wanted("job")
    told = NotificationSettings(terminal=(), desktop=(), command="cat", command_events=("job",))
    assert told.wanted("job") and not told.wanted("attention") and not told.wanted("turn")
    assert NotificationSettings(terminal=("turn",), desktop=()).wanted("turn")
