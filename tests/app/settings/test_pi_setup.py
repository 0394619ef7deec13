"""A pi user's ``~/.pi/agent/settings.json`` and ``models.json`` as the lowest layer of the
configuration (coding_agent.settings.pi_setup): the default model, thinking level and theme,
a custom OpenAI-compatible provider answering a real ``-p`` run (the binary against a loopback
stub server), config.toml winning key by key, and every part of pi's setup that is not used
named (extensions at every start, the rest in ``coding-agent config``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coding_agent.settings.config import ConfigError, load_config
from coding_agent.settings.trust import TrustStore
from coding_agent.worker.providers.registry import reachable_providers, resolve_model
from pico3.models import RetryPolicy

sys.path.insert(0, str(Path(__file__).parent.parent / "providers"))
from stub_server import Reply, StubServer, sse

BINARY = Path(sys.executable).with_name("coding-agent")

SETTINGS = {
    "defaultProvider": "local-llm",
    "defaultModel": "qwen3-coder",
    "defaultThinkingLevel": "high",
    "theme": "light",
    "shellPath": "/bin/bash",
    "enabledModels": ["qwen3-*", "anthropic/claude-*"],
    "quietStartup": True,
    "extensions": ["~/my-exts/notify.ts"],
    "packages": ["pi-skills", {"source": "@org/pi-tools", "skills": []}],
}

MODELS = """{
  // pi strips comments and trailing commas from models.json
  "providers": {
    "local-llm": {
      "baseUrl": "URL",
      "api": "openai-completions",
      "apiKey": "LOCAL_LLM_KEY",
      "headers": {"x-team": "core"},
      "compat": {"maxTokensField": "max_tokens", "supportsStore": false},
      "models": [
        {"id": "qwen3-coder", "name": "Qwen3 Coder", "contextWindow": 65536, "maxTokens": 8192,
         "input": ["text", "image"], "thinkingLevelMap": {"off": null},
         "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0.01, "cacheWrite": 0}},
      ],
    },
    "proxy": {"baseUrl": "https://proxy.example/v1", "api": "anthropic-messages", "models": []},
    "vault": {"baseUrl": "https://vault.example/v1", "api": "openai-completions",
              "apiKey": "!op read op://vault/key"},
  },
}
"""


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A pi user's home (``HOME/.pi/agent``), private XDG folders, no provider keys."""
    home = tmp_path / "home"
    (home / ".pi" / "agent").mkdir(parents=True)
    environ = {
        k: v
        for k, v in os.environ.items()
        if k
        not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "PI_CODING_AGENT_DIR")
    }
    environ.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        CLAUDE_CONFIG_DIR=str(tmp_path / "claude"),
    )
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "PI_CODING_AGENT_DIR"):
        monkeypatch.delenv(key, raising=False)
    for key in ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "CLAUDE_CONFIG_DIR"):
        monkeypatch.setenv(key, environ[key])
    return environ


@pytest.fixture
def pi(env: dict[str, str]) -> Path:
    return Path(env["HOME"]) / ".pi" / "agent"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)
    return folder


def _write_pi(pi: Path, url: str = "http://127.0.0.1:1/v1", **settings: object) -> None:
    (pi / "settings.json").write_text(json.dumps({**SETTINGS, **settings}, indent=2))
    (pi / "models.json").write_text(MODELS.replace("URL", url))


def test_pis_settings_and_models_are_the_lowest_layer(
    pi: Path, project: Path, env: dict[str, str]
) -> None:
    _write_pi(pi)
    config = load_config(project, env=env)
    assert (config.model, config.thinking, config.theme) == (
        "local-llm/qwen3-coder",
        "high",
        "light",
    )
    assert config.pi_files == [pi / "settings.json", pi / "models.json"]
    assert config.origin["model"] == f"{pi / 'settings.json'}:3"
    assert config.model_scope == ["*/qwen3-*", "anthropic/claude-*"]  # Ctrl+P's --models
    assert config.providers == {
        "local-llm": {
            "base_url": "http://127.0.0.1:1/v1",
            "api_key_env": "LOCAL_LLM_KEY",
            "compat": {"max_tokens_field": "max_tokens"},
            "api": "openai-completions",
        }
    }
    assert config.models == [
        {
            "provider": "local-llm", "id": "qwen3-coder", "context_window": 65536,
            "max_output": 8192, "supports_images": True,
            "cost": {"input": 0.1, "output": 0.2, "cache_read": 0.01, "cache_write": 0},
        }
    ]  # fmt: skip
    assert config.origin["providers.local-llm.base_url"] == f"{pi / 'models.json'}:5"
    # What is not used is named: extensions and unreachable providers at every start ...
    proxy, vault, extensions = config.warnings
    assert extensions.startswith("pi extensions are not run here")
    assert "~/my-exts/notify.ts (settings.json extensions)" in extensions
    assert "pi-skills (settings.json packages), @org/pi-tools (settings.json packages)" in (
        extensions
    )
    assert "provider 'proxy' is not used" in proxy and "not anthropic-messages" in proxy
    assert (
        "provider 'vault' is not used: its apiKey runs a command (!op read op://vault/key)" in vault
    )
    # ... the rest in `coding-agent config`.
    models_file = pi / "models.json"
    assert config.notes == [
        f"{models_file}:4: provider 'local-llm': compat not used: supportsStore",
        f"{models_file}:4: provider 'local-llm': not used here: headers",
        f"{models_file}: model local-llm/qwen3-coder: not used here: thinkingLevelMap",
        f"{pi / 'settings.json'}: not used here: quietStartup, shellPath",
    ]
    # config.toml wins key by key; the providers merge.
    user = Path(env["XDG_CONFIG_HOME"]) / "coding-agent" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text(
        'thinking = "low"\n\n[providers.local-llm]\nbase_url = "http://127.0.0.1:2/v1"\n'
    )
    config = load_config(project, env=env)
    assert (config.model, config.thinking) == ("local-llm/qwen3-coder", "low")
    assert config.providers["local-llm"]["base_url"] == "http://127.0.0.1:2/v1"
    assert config.providers["local-llm"]["api_key_env"] == "LOCAL_LLM_KEY"
    assert config.origin["thinking"] == f"{user}:1"


def test_a_projects_pi_settings_apply_only_when_trusted(
    pi: Path, project: Path, env: dict[str, str]
) -> None:
    _write_pi(pi)
    local = project / ".pi" / "settings.json"
    local.parent.mkdir()
    local.write_text('{"defaultThinkingLevel": "low", "theme": "my-pi-theme"}')
    assert load_config(project, env=env).thinking == "high"
    TrustStore.default(env).set(project, True)
    config = load_config(project, env=env)
    assert (config.thinking, config.theme) == ("low", None)  # pi's theme files are not read
    assert config.origin["thinking"] == f"{local}:1"
    assert f"{local}:1: theme 'my-pi-theme' is pi's own theme file, not used" in "\n".join(
        config.notes
    )


def test_a_default_model_that_cannot_answer_here_is_a_warning_not_the_default(
    pi: Path, project: Path, env: dict[str, str]
) -> None:
    """pi's /login subscriptions (no API key) and providers this agent lacks do not replace
    the usual default: a warning says why."""
    (pi / "settings.json").write_text('{"defaultProvider": "anthropic", "defaultModel": "x"}')
    config = load_config(project, env=env)
    assert config.model is None and "model" not in config.origin
    [warning] = config.warnings
    assert warning == (
        f"{pi / 'settings.json'}:1: pi's default model anthropic/x is not used: anthropic has "
        "no API key here: set ANTHROPIC_API_KEY (pi's /login subscriptions are pi's own); "
        "--model or model = in config.toml chooses another"
    )
    assert load_config(project, env={**env, "ANTHROPIC_API_KEY": "k"}).model == "anthropic/x"
    (pi / "settings.json").write_text('{"defaultProvider": "openai-codex", "defaultModel": "x"}')
    [warning] = load_config(project, env=env).warnings
    assert "'openai-codex' is not a provider here" in warning


def test_a_broken_pi_file_is_a_warning_naming_it(
    pi: Path, project: Path, env: dict[str, str]
) -> None:
    (pi / "models.json").write_text('{"providers": {')
    config = load_config(project, env=env)
    [warning] = config.warnings
    assert warning.startswith(f"{pi / 'models.json'}: not valid JSON (")
    assert warning.endswith("); its providers and models are not used")


def test_a_provider_of_your_own_is_an_openai_compatible_server(
    pi: Path, project: Path, env: dict[str, str]
) -> None:
    _write_pi(pi)
    registry = load_config(project, env=env).registry()
    selection = resolve_model(None, env=env, config=registry, retry=RetryPolicy(max_retries=0))
    assert selection.ref == "local-llm/qwen3-coder"
    assert selection.model.context_window == 65536 and selection.model.supports_images
    # Any id (a server hosts what it hosts), and /model lists it.
    assert resolve_model("local-llm/other", env=env, config=registry).ref == "local-llm/other"
    assert "local-llm" in [p.name for p in reachable_providers(env=env, config=registry)]
    with pytest.raises(
        ValueError, match=r"unknown provider 'mine'.*openai-completions\" and a base_url"
    ):
        resolve_model(None, env=env, config={"providers": {"mine": {"api_key": "k"}}})


def _chunk(delta: dict[str, object], finish: str | None = None) -> str:
    return sse({
        "id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "qwen3-coder",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    })  # fmt: skip


def test_a_pi_users_local_model_answers_a_headless_run(
    pi: Path, project: Path, env: dict[str, str]
) -> None:
    """The run answers on pi's default model, through the provider of pi's models.json, and
    says on stderr which of pi's extensions it does not run."""
    (pi / "extensions").mkdir()
    (pi / "extensions" / "notify.ts").write_text("export default function (pi) {}\n")
    events = [
        _chunk({"role": "assistant", "content": "Hello from pi's local model."}),
        _chunk({}, "stop"),
        sse("[DONE]"),
    ]
    with StubServer([Reply(events=events)]) as server:
        _write_pi(pi, url=f"{server.url}/v1")
        done = subprocess.run(
            [str(BINARY), "-p", "hi"], cwd=project, env={**env, "LOCAL_LLM_KEY": "sekrit"},
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout == "Hello from pi's local model.\n"
        [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sekrit"
    assert request.body["model"] == "qwen3-coder"
    assert request.body["max_tokens"] == 8192
    warnings = [line for line in done.stderr.splitlines() if "pi extensions" in line]
    assert warnings == [
        "coding-agent: warning: pi extensions are not run here (pi's TypeScript; their tools, "
        "commands and hooks do not exist in this agent): ~/.pi/agent/extensions/notify.ts, "
        "~/my-exts/notify.ts (settings.json extensions), pi-skills (settings.json packages), "
        "@org/pi-tools (settings.json packages). This agent's extensions are feature packages "
        "(coding-agent facets add PATH; docs/authoring-facets.md)"
    ]
    shown = subprocess.run(
        [str(BINARY), "config"], cwd=project, env=env, capture_output=True, text=True,
        timeout=120, check=True,
    ).stdout  # fmt: skip
    assert f"# files read: {pi / 'settings.json'}, {pi / 'models.json'}\n" in shown
    assert f"# pi: {pi / 'settings.json'}: not used here: quietStartup, shellPath\n" in shown


def test_the_keys_pis_login_stored_in_auth_json_are_the_providers_keys(
    pi: Path, project: Path, env: dict[str, str]
) -> None:
    """pi's ``/login`` API keys (auth.json, 0600) answer for pi's default model; an OAuth login
    is pi's own; a file others may read is not read; config.toml's key wins."""
    (pi / "settings.json").write_text('{"defaultProvider": "anthropic", "defaultModel": "x"}')
    auth = pi / "auth.json"
    auth.write_text(
        '{"anthropic": {"type": "api_key", "key": "sk-from-pi"},\n'
        ' "openai": {"type": "oauth", "access": "t"},\n'
        ' "groq": {"type": "api_key", "key": "GROQ_KEY_VAR"}}'
    )
    auth.chmod(0o644)
    config = load_config(project, env=env)
    assert config.model is None  # the key was not read: no key for anthropic
    assert config.warnings[0] == (
        f"{auth}: not read: pi's keys are read only from a file that is yours and private "
        "(mode 0600), this one is mode 0644"
    )
    auth.chmod(0o600)
    config = load_config(project, env=env)
    assert config.warnings == [] and config.model == "anthropic/x"
    assert config.providers == {
        "anthropic": {"api_key": "sk-from-pi"},
        "groq": {"api_key_env": "GROQ_KEY_VAR"},
    }
    assert config.origin["providers.anthropic.api_key"] == f"{auth}:1"
    shown = subprocess.run(
        [str(BINARY), "config"], cwd=project, env=env, capture_output=True, text=True,
        timeout=120, check=True,
    ).stdout  # fmt: skip
    assert "sk-from-pi" not in shown
    user = Path(env["XDG_CONFIG_HOME"]) / "coding-agent" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('[providers.anthropic]\napi_key_env = "MY_ANTHROPIC_KEY"\n')
    config = load_config(project, env=env)
    assert config.providers["anthropic"] == {"api_key_env": "MY_ANTHROPIC_KEY"}


def test_config_toml_names_a_provider_of_your_own_the_same_way(
    project: Path, env: dict[str, str]
) -> None:
    user = Path(env["XDG_CONFIG_HOME"]) / "coding-agent" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text(
        'model = "team-gw/coder"\n\n[providers.team-gw]\napi = "openai-completions"\n'
        'base_url = "http://127.0.0.1:9/v1"\napi_key_env = "TEAM_KEY"\n'
    )
    config = load_config(project, env=env)
    selection = resolve_model(None, env={**env, "TEAM_KEY": "k"}, config=config.registry())
    assert selection.ref == "team-gw/coder"
    user.write_text('[providers.openaj]\nbase_url = "http://127.0.0.1:9/v1"\n')  # a typo stays one
    with pytest.raises(
        ConfigError, match=r"config.toml:1: key `providers.openaj`: unknown provider"
    ):
        load_config(project, env=env)
