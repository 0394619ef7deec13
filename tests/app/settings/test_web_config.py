"""config.toml's ``[web_fetch]`` and ``[web_search]`` tables: read into the worker's
:class:`WebSettings`, checked with errors naming file, line and key, and refused in a project
file (a project could open fetches to the private network or send the search key elsewhere)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coding_agent.cli.main import main
from coding_agent.session_files.folders import create_session
from coding_agent.settings.config import ConfigError, load_config
from coding_agent.settings.secret_env import secret_names
from coding_agent.worker.main import session_worker_config
from coding_agent.worker.provider_search import PROVIDER_SEARCH_DESCRIPTION
from coding_agent.worker.tools import WebSettings, builtin_tools
from tests.app.settings.conftest import config_env, user_config


def test_the_web_tables_reach_the_worker(tmp_path: Path) -> None:
    env = config_env(tmp_path)
    user_config(
        tmp_path,
        '[web_fetch]\nallow_private = ["localhost"]\n\n'
        '[web_search]\nbackend = "searxng"\nurl = "http://127.0.0.1:8888"\n'
        'api_key_env = "SEARX_TOKEN"\n\n'
        '[sandbox]\nenabled = true\nallow_domains = ["pypi.org"]\n',
    )
    project = tmp_path / "project"
    project.mkdir()
    session = create_session(project, env=env)
    config = session_worker_config(session, env=env)
    assert config.web == WebSettings(
        allow_private=("localhost",),
        sandbox_domains=("pypi.org",),
        search_backend="searxng",
        search_url="http://127.0.0.1:8888",
        search_key_env="SEARX_TOKEN",
    )
    assert config.environment is not None
    assert "SEARX_TOKEN" in config.environment.withheld  # kept from commands
    names = [spec.name for spec in builtin_tools(config.web)]
    assert names[-2:] == ["web_fetch", "web_search"]


def test_without_a_backend_web_search_is_the_providers_own_and_the_sandbox_is_off(
    tmp_path: Path,
) -> None:
    env = config_env(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    config = session_worker_config(create_session(project, env=env), env=env)
    assert config.web == WebSettings()
    search = builtin_tools(config.web)[-1]  # offered only where the model's provider searches
    assert (search.name, search.description) == ("web_search", PROVIDER_SEARCH_DESCRIPTION)
    assert {"BRAVE_API_KEY", "TAVILY_API_KEY"} <= set(secret_names())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[web_search]\nbackend = "bing"\n',
            r":2: key `web_search.backend`: 'bing' is not a search",
        ),
        (
            '[web_search]\nbackend = "searxng"\n',
            r":1: key `web_search`: the searxng backend needs url",
        ),
        (
            '[web_search]\nbackend = "brave"\nurl = "ftp://x"\n',
            r":3: key `web_search.url`: 'ftp://x' is not an http",
        ),
        ('[web_fetch]\nallow_private = "localhost"\n', r"key `web_fetch.allow_private`"),
        ('[web_fetch]\nallow = ["x"]\n', r":2: key `web_fetch.allow`: unknown key"),
    ],
)
def test_bad_web_settings_name_the_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    user_config(tmp_path, text)
    with pytest.raises(ConfigError, match=message):
        load_config(env=config_env(tmp_path))


@pytest.mark.parametrize(
    "table", ['[web_fetch]\nallow_private = ["*"]\n', '[web_search]\nbackend = "brave"\n']
)
def test_a_project_file_may_not_configure_the_web_tools(tmp_path: Path, table: str) -> None:
    env = config_env(tmp_path)
    project = tmp_path / "project"
    (project / ".coding-agent").mkdir(parents=True)
    (project / ".coding-agent" / "config.toml").write_text(table)
    with pytest.raises(ConfigError, match=r"only your own config.toml may configure web_"):
        load_config(project, env=env, trusted=True)


def test_coding_agent_config_shows_the_web_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in config_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert "web_fetch.allow_private = none (public addresses only)" in out
    assert "web_search = the model provider's own search only" in out
    path = user_config(tmp_path, '[web_search]\nbackend = "brave"\n')
    assert main(["config"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(
        line.startswith("web_search.backend = brave") and line.endswith(f"# {path}:2")
        for line in lines
    )
    assert any(
        line.startswith("web_search.api_key_env = BRAVE_API_KEY")
        and "NOT SET: web_search will fail" in line
        for line in lines
    )
