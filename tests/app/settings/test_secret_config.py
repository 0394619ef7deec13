"""The ``secrets`` and ``secrets_passthrough`` config keys (issue 36 item 7): what they add to
the withheld variables, ``coding-agent config`` showing them, and each bad value's message."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from coding_agent.settings.config import ConfigError, load_config
from coding_agent.settings.secret_env import child_environment, secret_names

BINARY = Path(sys.executable).with_name("coding-agent")


def _user(tmp_path: Path, text: str) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "config" / "coding-agent" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path, {"XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path)}


def test_the_withheld_names_are_the_provider_keys_the_token_and_the_listed_ones(
    tmp_path: Path,
) -> None:
    text = (
        'secrets = ["GITHUB_TOKEN", "NPM_TOKEN"]\nsecrets_passthrough = ["NPM_TOKEN"]\n'
        '[providers.openai]\napi_key_env = "LOCAL_LLM_KEY"\n'
    )
    _, env = _user(tmp_path, text)
    config = load_config(env=env)
    assert secret_names(secrets=config.secrets, registry=config.registry()) == (
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
        "OPENROUTER_API_KEY",
        "GROQ_API_KEY",
        "DEEPSEEK_API_KEY",
        "MISTRAL_API_KEY",
        "AWS_BEARER_TOKEN_BEDROCK",
        "GOOGLE_API_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "LOCAL_LLM_KEY",
        "CODING_AGENT_TOKEN",
        "BRAVE_API_KEY",
        "TAVILY_API_KEY",
        "GITHUB_TOKEN",
        "NPM_TOKEN",
    )
    environment = child_environment(
        secrets=config.secrets,
        passthrough=config.secrets_passthrough,
        registry=config.registry(),
        env={},
    )
    assert environment.withheld == {
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
        "OPENROUTER_API_KEY",
        "GROQ_API_KEY",
        "DEEPSEEK_API_KEY",
        "MISTRAL_API_KEY",
        "AWS_BEARER_TOKEN_BEDROCK",
        "GOOGLE_API_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "LOCAL_LLM_KEY",
        "CODING_AGENT_TOKEN",
        "BRAVE_API_KEY",
        "TAVILY_API_KEY",
        "GITHUB_TOKEN",
    }


def test_a_bad_variable_name_is_refused_naming_file_line_and_key(tmp_path: Path) -> None:
    path, env = _user(tmp_path, 'thinking = "low"\nsecrets = ["GITHUB-TOKEN"]\n')
    with pytest.raises(ConfigError) as caught:
        load_config(env=env)
    assert str(caught.value) == (
        f"{path}:2: key `secrets`: 'GITHUB-TOKEN' is not an environment variable name "
        "(letters, digits, _)"
    )


def test_a_project_file_may_add_secrets_but_never_pass_one_through(tmp_path: Path) -> None:
    _, env = _user(tmp_path, 'secrets = ["GITHUB_TOKEN"]\n')
    project = tmp_path / "project"
    (project / ".coding-agent").mkdir(parents=True)
    (project / ".git").mkdir()
    local = project / ".coding-agent" / "config.toml"
    local.write_text('secrets = ["DEPLOY_KEY"]\n')
    assert load_config(project, env=env, trusted=True).secrets == ["GITHUB_TOKEN", "DEPLOY_KEY"]
    local.write_text('secrets_passthrough = ["ANTHROPIC_API_KEY"]\n')
    with pytest.raises(ConfigError) as caught:
        load_config(project, env=env, trusted=True)
    assert str(caught.value) == (
        f"{local}:1: key `secrets_passthrough`: only your own config.toml may pass secrets to "
        "commands (a project could hand your keys to what it runs): move the key to your user "
        "config"
    )


def test_coding_agent_config_lists_what_is_withheld(tmp_path: Path) -> None:
    path, env = _user(
        tmp_path, 'secrets = ["GITHUB_TOKEN", "NPM_TOKEN"]\nsecrets_passthrough = ["NPM_TOKEN"]\n'
    )
    environ = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    environ.update(env, XDG_STATE_HOME=str(tmp_path / "state"))
    done = subprocess.run(
        [str(BINARY), "config"], env=environ, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    withheld = next(line for line in lines if line.startswith("secrets = "))
    assert withheld.startswith(
        "secrets = ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY, OPENROUTER_API_KEY, "
        "GROQ_API_KEY, DEEPSEEK_API_KEY, MISTRAL_API_KEY, AWS_BEARER_TOKEN_BEDROCK, "
        "GOOGLE_API_KEY, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, "
        "GOOGLE_APPLICATION_CREDENTIALS, "
        "CODING_AGENT_TOKEN, BRAVE_API_KEY, TAVILY_API_KEY, GITHUB_TOKEN  # "
    )
    assert withheld.endswith(f"provider keys, server token + {path}:1")
    passed = next(line for line in lines if line.startswith("secrets_passthrough = "))
    assert passed.startswith("secrets_passthrough = NPM_TOKEN") and passed.endswith(f"{path}:2")


HIDE = """
import subprocess
from coding_agent.settings.secret_env import hide_secrets_from_proc
hide_secrets_from_proc()
with open("/proc/self/environ", "rb") as handle:
    print("block:", b"sk-ant-api03" in handle.read())
child = subprocess.run(["sh", "-c", "echo $ANTHROPIC_API_KEY"], capture_output=True, text=True)
print("child:", child.stdout.strip())
"""


def test_the_tui_keeps_its_keys_for_the_worker_but_not_in_its_proc_environ(
    tmp_path: Path,
) -> None:
    # the TUI starts its worker with the key; a command reading the TUI's /proc environ finds
    # nothing (what /proc/<pid>/environ shows is blanked, the C library's copy is kept)
    key = "sk-ant-api03-hide0123456789abcdefghijklmnop"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(XDG_CONFIG_HOME=str(tmp_path), HOME=str(tmp_path), ANTHROPIC_API_KEY=key)
    done = subprocess.run(
        [sys.executable, "-c", HIDE], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["block: False", f"child: {key}"]
