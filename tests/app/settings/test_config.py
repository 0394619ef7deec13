"""config.toml (issue 14 item 5): the user's file and a trusted project's on top, errors naming
file, line and key, ``coding-agent config``, and a local OpenAI-compatible model configured in
the file answering a real ``-p`` run (the binary against a loopback stub server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coding_agent.cli.main import main
from coding_agent.session_files.folders import list_sessions, load_session
from coding_agent.settings.config import ConfigError, load_config
from coding_agent.settings.trust import TrustStore

sys.path.insert(0, str(Path(__file__).parent.parent / "providers"))
from stub_server import Reply, StubServer, sse

BINARY = Path(sys.executable).with_name("coding-agent")

LOCAL = """\
model = "openai/qwen2.5-coder:7b"
thinking = "low"

[providers.openai]
base_url = "{url}"
api_key_env = "LOCAL_LLM_KEY"

[providers.openai.compat]
max_tokens_field = "max_tokens"
reasoning_effort = false

[[models]]
provider = "openai"
id = "qwen2.5-coder:7b"
context_window = 32768
max_output = 4096
tool_calling = "text"
cost = {{ input = 0.0, output = 0.0 }}
"""


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL")
    }
    environ["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    environ["XDG_STATE_HOME"] = str(tmp_path / "state")
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    for key in ("XDG_CONFIG_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(key, environ[key])
    return environ


@pytest.fixture
def user_file(env: dict[str, str]) -> Path:
    path = Path(env["XDG_CONFIG_HOME"]) / "coding-agent" / "config.toml"
    path.parent.mkdir(parents=True)
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)
    return folder


def test_the_project_file_applies_on_top_only_when_trusted(
    user_file: Path, project: Path, env: dict[str, str]
) -> None:
    user_file.write_text(LOCAL.format(url="http://127.0.0.1:1/v1"))
    local = project / ".coding-agent" / "config.toml"
    local.parent.mkdir()
    local.write_text(
        'thinking = "high"\n\n[providers.openai]\nbase_url = "http://127.0.0.1:2/v1"\n'
    )
    untrusted = load_config(project, env=env)
    assert (untrusted.thinking, untrusted.skipped) == ("low", local)
    assert untrusted.providers["openai"]["base_url"] == "http://127.0.0.1:1/v1"

    TrustStore.default(env).set(project, True)
    config = load_config(project, env=env)
    assert config.files == [user_file, local]
    assert (config.model, config.thinking) == ("openai/qwen2.5-coder:7b", "high")
    openai = config.providers["openai"]
    assert openai["base_url"] == "http://127.0.0.1:2/v1"  # the project's, on top
    assert openai["api_key_env"] == "LOCAL_LLM_KEY"  # the user's, kept
    assert config.origin["thinking"] == f"{local}:1"
    assert config.origin["providers.openai.base_url"] == f"{local}:4"
    assert config.origin["model"] == f"{user_file}:1"
    assert config.origin["models.openai/qwen2.5-coder:7b"] == f"{user_file}:12"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("base_url", "base_urll"), "{f}:5: key `providers.openai.base_urll`: unknown key"),
        (('max_tokens_field = "max_tokens"', "max_tokens_field = 3"),
         "{f}:9: key `providers.openai.compat.max_tokens_field`: Expected `str`, got `int`"),
        (("context_window = 32768", 'context_window = "big"'),
         "{f}:15: key `models[0].context_window`: Expected `int`, got `str`"),
        (('thinking = "low"', 'thinking = "hot"'),
         "{f}:2: key `thinking`: 'hot' is not a thinking level (off, minimal, low, medium, high, "
         "xhigh)"),
        (('model = "openai/qwen2.5-coder:7b"', 'modle = "x/y"'),
         "{f}:1: key `modle`: unknown key (known: model, thinking, theme, permission_mode, "
         "providers, models, secrets, secrets_passthrough, permissions, sandbox, web_fetch, "
         "web_search, notifications, warm_start)"),
        (('model = "openai/qwen2.5-coder:7b"', 'model = "qwen"'),
         "{f}:1: key `model`: 'qwen' is not provider/model-id (e.g. openai/qwen2.5-coder:7b)"),
        (("[providers.openai]", "[providers.openaj]"),
         "{f}:4: key `providers.openaj`: unknown provider 'openaj' (known: anthropic, openai, openai-responses, google, bedrock, vertex, faux, openrouter, groq, deepseek, mistral, ollama, lmstudio, vllm, llamacpp; a provider of your own is an OpenAI-compatible server: give it api = \"openai-completions\" and a base_url)"),
        (("max_output = 4096", "max_output = 4096 ="), "{f}:16: invalid TOML: Expected newline or end of document after a statement"),
        # left open at the end: the last line that holds anything, not "?"
        (("output = 0.0 }", "output = 0.0 }\nmodel = [\n\n"), "{f}:19: invalid TOML: Invalid value"),
    ],
)  # fmt: skip
def test_an_invalid_file_is_an_error_naming_file_line_and_key(
    user_file: Path, env: dict[str, str], edit: tuple[str, str], message: str
) -> None:
    user_file.write_text(LOCAL.format(url="http://127.0.0.1:1/v1").replace(*edit, 1))
    with pytest.raises(ConfigError) as raised:
        load_config(None, env=env)
    assert str(raised.value) == message.format(f=user_file)


def test_the_command_line_reports_an_invalid_file_in_one_line_with_exit_2(
    user_file: Path, project: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(project)
    user_file.write_text('thinking = "hot"\n')
    assert main(["-p", "hi"]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        f"coding-agent: error: {user_file}:1: key `thinking`: 'hot' is not a thinking level "
        "(off, minimal, low, medium, high, xhigh)\n"
    )
    assert list_sessions(env=env) == []


def test_coding_agent_config_prints_each_value_and_where_it_came_from(
    user_file: Path, project: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(project)
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert f"# (no {user_file}: create it to configure the agent)" in out
    assert "model = faux/faux-1" in out and "# default (no API key or base URL set)" in out
    assert any(" ".join(t.split()) == "theme = dark # default" for t in out.splitlines())

    user_file.write_text(LOCAL.format(url="http://127.0.0.1:1/v1"))
    monkeypatch.setenv("LOCAL_LLM_KEY", "sekrit")
    assert main(["config"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"# files read: {user_file}"

    def line(key: str) -> str:
        [found] = [text for text in lines if text.startswith(f"{key} = ")]
        return " ".join(found.split())

    assert line("model") == f"model = openai/qwen2.5-coder:7b # {user_file}:1"
    assert line("thinking") == f"thinking = low # {user_file}:2"
    assert line("providers.openai.base_url") == (
        f"providers.openai.base_url = http://127.0.0.1:1/v1 # {user_file}:5"
    )
    assert line("providers.openai.api_key_env") == (
        f"providers.openai.api_key_env = LOCAL_LLM_KEY # {user_file}:6"
    )
    assert line("providers.openai.api_key") == (
        "providers.openai.api_key = (set) # environment $LOCAL_LLM_KEY"
    )
    assert line("models.openai/qwen2.5-coder:7b").endswith(f"# {user_file}:12")
    assert "sekrit" not in "\n".join(lines)


def _chunk(delta: dict[str, object], finish: str | None = None) -> str:
    return sse({
        "id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "qwen2.5-coder:7b",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    })  # fmt: skip


def test_a_local_model_from_config_toml_answers_a_headless_run(
    user_file: Path, project: Path, env: dict[str, str]
) -> None:
    events = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"content": "Hello from the local model."}),
        _chunk({}, "stop"),
        sse("[DONE]"),
    ]
    with StubServer([Reply(events=events)]) as server:
        user_file.write_text(LOCAL.format(url=f"{server.url}/v1"))
        done = subprocess.run(
            [str(BINARY), "-p", "hi"], cwd=project, env={**env, "LOCAL_LLM_KEY": "sekrit"},
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout == "Hello from the local model.\n"
        [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sekrit"  # from api_key_env's variable
    body = request.body
    assert body["model"] == "qwen2.5-coder:7b"
    assert body["max_tokens"] == 4096 and "max_completion_tokens" not in body
    assert "tools" not in body  # tool_calling = "text": tools are taught in the prompt
    [session] = list_sessions(env=env)
    # The model the session started on is stored with it (a later default does not move it).
    assert load_session(session.path).settings.model == "openai/qwen2.5-coder:7b"
    assert json.loads(session.metadata_path.read_text())["id"] == session.id

    # Without the key the file names, the error names the variable and the file.
    missing = {**env}
    user_file.write_text(
        LOCAL.format(url="https://api.example.invalid/v1").replace("base_url", "# base_url")
    )
    done = subprocess.run(
        [str(BINARY), "-p", "hi"], cwd=project, env=missing, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr == (
        "coding-agent: error: openai needs an API key: set LOCAL_LLM_KEY (or OPENAI_BASE_URL for "
        f"a local OpenAI-compatible server) or providers.openai.base_url in {user_file}\n"
    )


def test_a_default_permission_mode_in_the_user_config_starts_new_sessions_in_it(
    user_file: Path, project: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:  # fmt: skip
    """``permission_mode`` in config.toml (issue 38 item 8): a new session starts in it."""
    monkeypatch.chdir(project)
    script = tmp_path / "script.json"
    write = {"name": "write", "arguments": {"path": "notes.md", "content": "hi\n"}}
    script.write_text(json.dumps([{"toolCalls": [write]}, {"text": "Wrote it."}]))
    user_file.write_text('permission_mode = "accept-edits"\n')
    assert main(["config"]) == 0
    shown = [" ".join(t.split()) for t in capsys.readouterr().out.splitlines()]
    assert f"permission_mode = accept-edits # {user_file}:1" in shown
    assert main(["-p", "write the notes", "--faux-script", str(script)]) == 0
    assert (project / "notes.md").read_text() == "hi\n", "accept-edits: the write ran unasked"
    capsys.readouterr()

    user_file.write_text('permission_mode = "yolo"\n')
    with pytest.raises(ConfigError, match=r"'yolo' is not a permission mode \(ask, accept-edits"):
        load_config(None, env=env)
    user_file.write_text("")
    local = project / ".coding-agent" / "config.toml"
    local.parent.mkdir()
    local.write_text('permission_mode = "auto"\n')
    with pytest.raises(
        ConfigError, match=r"only your own config\.toml may set the permission mode"
    ):
        load_config(project, env=env, trusted=True)


def test_coding_agent_config_lists_the_claude_code_plugins_that_load(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, claude_plugins: Any,
) -> None:  # fmt: skip
    claude = tmp_path / "claude"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    monkeypatch.chdir(project)
    folder = claude_plugins(claude, "example-plugin")
    settings = json.loads((claude / "settings.json").read_text())
    settings["enabledPlugins"]["ghost@nowhere"] = True
    (claude / "settings.json").write_text(json.dumps(settings))
    assert main(["config"]) == 0
    lines = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]
    assert (
        f"plugins.example-plugin@claude-plugins-official = {folder} # {claude / 'settings.json'} "
        "(enabledPlugins): commands, skills, mcpServers"
    ) in lines
    (ghost,) = [line for line in lines if line.startswith("# plugins: ")]
    assert "plugin ghost@nowhere is enabled but not installed" in ghost
