"""The headless contract (issue 14 items 3 and 4, issue 24's session-list items).

``-p`` prints only the final answer on stdout; every failure is one ``coding-agent: error:``
line on stderr with a documented exit status (usage 2, provider/model 1, blocked tool call 3);
``--json`` starts with the session line and ends with the result; piped stdin joins the
prompt. A start that fails leaves no session behind, ``--continue`` picks by last activity and
a broken ``session.json`` is reported by name. Most cases run ``main`` in process (it is the
console script's function); the ones about processes, stdin and the cwd run the real binary.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from coding_agent.cli.main import main
from coding_agent.session_files.folders import create_session, list_sessions, record_activity

BINARY = Path(sys.executable).with_name("coding-agent")
TIMEOUT = 120


@pytest.fixture
def env(agent_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The agent's environment with a private config home (no user config.toml or trust)."""
    environ = dict(agent_env)
    environ["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    return environ


@pytest.fixture
def here(project: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run ``main`` in process in the project folder with ``env``."""
    monkeypatch.chdir(project)
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    for key in ("XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(key, env[key])
    return project


def run(
    args: list[str], cwd: Path, env: dict[str, str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BINARY), *args],
        cwd=cwd,
        env=env,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def answers(folder: Path, *texts: str) -> Path:
    path = folder / "answers.json"
    path.write_text(json.dumps([{"text": text} for text in texts]))
    return path


def err_of(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    return captured.err


# -- usage errors: one line, exit 2 ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["--bogus"], "unrecognized arguments: --bogus (see coding-agent --help)"),
        (["-p", ""], '-p needs a prompt: -p "PROMPT", or pipe one in (echo PROMPT | coding-agent -p)'),
        (["-p"], '-p needs a prompt: -p "PROMPT", or pipe one in (echo PROMPT | coding-agent -p)'),
        (["--json"], '--json needs a prompt: --json "PROMPT", or pipe one in (echo PROMPT | coding-agent --json)'),
        (["--thinking", "hot", "-p", "x"], "argument --thinking: invalid choice: 'hot' (choose from 'off', 'minimal', 'low', 'medium', 'high', 'xhigh') (see coding-agent --help)"),
        (["--permission-mode", "yolo", "-p", "x"], "argument --permission-mode: invalid choice: 'yolo' (choose from 'ask', 'accept-edits', 'sandbox', 'plan', 'auto') (see coding-agent --help)"),
        (["-p", "x", "attach"], "attach does not take -p or --json (see coding-agent --help)"),
        (["--resume", "nope", "-p", "x"], None),
    ],
)  # fmt: skip
def test_a_usage_error_is_one_line_and_exit_2(
    here: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str], argv: list[str],
    line: str | None,
) -> None:  # fmt: skip
    try:
        code = main(argv)
    except SystemExit as exited:  # argparse's own errors leave through exit()
        code = exited.code
    assert code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    if line is None:  # the session lookup names the id and where it looked
        root = Path(env["XDG_STATE_HOME"]) / "coding-agent" / "sessions"
        line = f"no session 'nope' in {root}"
    assert captured.err == f"coding-agent: error: {line}\n"
    assert list_sessions(env=env) == []


def test_version_prints_the_version(project: Path, env: dict[str, str]) -> None:
    done = run(["--version"], project, env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "coding-agent 0.1.0\n", "")


# -- provider and model failures: exit 1, and no ghost session ----------------------------------
def test_a_bad_model_or_a_missing_key_fails_with_one_line_and_leaves_no_session(
    here: Path, env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = answers(tmp_path, "The real one.", "Continued.")
    assert main(["-p", "first", "--faux-script", str(script)]) == 0
    [real] = list_sessions(env=env)
    capsys.readouterr()

    config_file = Path(env["XDG_CONFIG_HOME"]) / "coding-agent" / "config.toml"
    assert main(["-p", "hi", "--model", "nope/x"]) == 1
    assert err_of(capsys) == (
        "coding-agent: error: unknown provider 'nope' in 'nope/x' (known: anthropic, openai, "
        "openai-responses, google, bedrock, vertex, faux, openrouter, groq, deepseek, mistral, ollama, lmstudio, vllm, llamacpp; "
        'a provider of your own is [providers.nope] with api = "openai-completions" and a '
        f"base_url in {config_file})\n"
    )
    assert main(["-p", "hi", "--model", "anthropic/claude-sonnet-4-5"]) == 1
    assert err_of(capsys) == (
        "coding-agent: error: anthropic needs an API key: set ANTHROPIC_API_KEY or "
        f"providers.anthropic.api_key in {config_file}\n"
    )
    # The TUI's start fails the same way (its worker exits): one line, naming no worker log
    # (the new session's folder, the log in it, is removed).
    assert main(["--model", "nope/x"]) == 1
    assert err_of(capsys) == (
        "coding-agent: error: unknown provider 'nope' in 'nope/x' (known: anthropic, openai, "
        "openai-responses, google, bedrock, vertex, faux, openrouter, groq, deepseek, mistral, ollama, lmstudio, vllm, llamacpp; "
        'a provider of your own is [providers.nope] with api = "openai-completions" and a '
        f"base_url in {config_file})\n"
    )
    assert [s.id for s in list_sessions(env=env)] == [real.id], "no ghost session"
    # A session that stays (continued) keeps its log, and the line names it.
    assert main(["--continue", "--model", "nope/x"]) == 1
    err = err_of(capsys)
    assert err.startswith("coding-agent: error: unknown provider 'nope' in 'nope/x'")
    log = Path(err.rsplit("(worker log: ", 1)[-1].removesuffix(")\n"))
    assert log == real.log_path and log.is_file()
    # ... so --continue still finds the real session.
    assert main(["--continue", "--json", "again", "--faux-script", str(script)]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0])["session"] == real.id


def test_an_unreachable_base_url_fails_at_once_naming_the_url(
    project: Path, env: dict[str, str]
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    done = run(["--json", "hi"], project, {**env, "OPENAI_BASE_URL": url})
    assert done.returncode == 1
    assert done.stderr == (
        "coding-agent: error: the turn ended unanswered (model openai/gpt-4.1): openai: cannot "
        f"connect to {url}/chat/completions: connection refused (is the server running, and "
        "is the base URL right?)\n"
    )
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [event["type"] for event in events]
    assert "generation.retrying" not in kinds, "a refused connection is not retried"
    assert kinds.count("generation.started") == 1
    assert events[-1]["type"] == "result" and events[-1]["ok"] is False
    assert list_sessions(env=env) == [], "a new session the model never answered is not kept"


def test_a_deleted_working_folder_is_a_usage_error(tmp_path: Path, env: dict[str, str]) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    done = subprocess.run(
        ["sh", "-c", f'cd "{gone}" && rmdir "{gone}" && exec "{BINARY}" -p hi'],
        env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        "coding-agent: error: the current folder no longer exists (it was deleted): cd into a "
        "folder that exists\n"
    )
    assert done.stdout == ""


def test_a_corrupt_session_file_is_named_with_its_line_and_left_alone(
    here: Path, env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = answers(tmp_path, "One.", "Two.")
    assert main(["-p", "one", "--faux-script", str(script)]) == 0
    [session] = list_sessions(env=env)
    log = session.storage_dir / "main.jsonl"
    lines = log.read_bytes().split(b"\n")
    lines[1] = lines[1][:-1] + b" " + lines[1][-1:]  # still JSON; the checksum no longer matches
    log.write_bytes(b"\n".join(lines))
    before = log.read_bytes()
    capsys.readouterr()
    assert main(["--continue", "-p", "two", "--faux-script", str(script)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"coding-agent: error: {log}:2: checksum mismatch (the line was altered) "
        "(the file was left as it is)\n"
    )
    assert log.read_bytes() == before
    assert [s.id for s in list_sessions(env=env)] == [session.id]


# -- the output: stdout, --json's first and last line, --verbose, stdin ------------------------
def test_piped_stdin_joins_the_prompt_and_only_the_answer_reaches_stdout(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    script = answers(tmp_path, "Looks fine.", "Still fine.")
    diff = "--- a/main.py\n+++ b/main.py\n-print('hello')\n+print('bye')\n"
    done = run(["--json", "review this", "--faux-script", str(script)], project, env, stdin=diff)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    [session] = list_sessions(env=env)
    assert events[0] == {
        "type": "session", "session": session.id, "model": "faux/faux-1", "cwd": str(project),
    }  # fmt: skip
    assert events[-1] == {"type": "result", "ok": True, "status": "done", "text": "Looks fine."}
    [user] = [
        e["entry"] for e in events if e["type"] == "entry.added" and e["entry"]["kind"] == "pi.user"
    ]
    assert user["model"][0]["content"] == f"review this\n\n{diff}"

    # -p with only stdin; --verbose names the session on stderr; stdout is the answer alone.
    done = run(["--continue", "-p", "--verbose"], project, env, stdin="and now?\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Still fine.\n"
    assert done.stderr == f"coding-agent: session {session.id} (faux/faux-1, {project})\n"


# -- which session --continue picks ----------------------------------------------------------
def test_continue_picks_the_session_active_last_and_names_a_broken_one(
    here: Path, env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    older = create_session(here, env=env)
    newer = create_session(here, env=env)
    # The clock was set back: the session with the smaller id was active last (by its record
    # of the user's last prompt; its file times say otherwise and do not count).
    for session, when in ((older, 2_000_000_000), (newer, 1_000_000_000)):
        record_activity(session, datetime.fromtimestamp(when, UTC), fsync=False)
        for path in (session.metadata_path, session.storage_dir):
            os.utime(path, (3_000_000_000 - when, 3_000_000_000 - when))
    broken = create_session(here, env=env)
    broken.metadata_path.write_text('{"version": 1, "id": ')
    script = answers(tmp_path, "Picked.")
    assert main(["--continue", "--json", "which?", "--faux-script", str(script)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out.splitlines()[0])["session"] == older.id
    assert captured.err.startswith(
        f"coding-agent: warning: {broken.metadata_path}: invalid session metadata: "
    )
    assert captured.err.endswith("(the file was left as it is: fix it, or move the folder away)\n")
    assert broken.metadata_path.read_text() == '{"version": 1, "id": '


# -- launch settings (issue 14 item 1): stored at the start, reused, a later flag overrides ------
def test_launch_settings_are_stored_reused_and_overridden_by_a_later_flag(
    here: Path, env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": f"echo {n} >> ran.txt"}}]}
        if n % 2 == 0 else {"text": f"Answer {n // 2}."}
        for n in range(6)
    ]  # fmt: skip
    script = tmp_path / "steps.json"
    script.write_text(json.dumps(steps))
    flags = ["--faux-script", str(script), "--permission-mode", "auto", "--thinking", "high"]
    assert main(["-p", "one", *flags, "--linger", "30"]) == 0
    [session] = list_sessions(env=env)
    settings = json.loads(session.metadata_path.read_text())["settings"]
    assert settings == {
        "model": "faux/faux-1", "thinking": "high", "permission_mode": "auto",
        "faux_script": str(script), "linger": 30.0,
    }  # fmt: skip
    assert capsys.readouterr().out == "Answer 0.\n"

    # No flags: the stored script answers and the stored mode lets bash run unasked.
    assert main(["--continue", "-p", "two"]) == 0
    assert capsys.readouterr().out == "Answer 1.\n"
    assert (here / "ran.txt").read_text() == "0\n2\n"

    # A later flag overrides and is recorded: in ask mode nobody approves headless bash.
    assert main(["--continue", "-p", "three", "--permission-mode", "ask"]) == 3
    captured = capsys.readouterr()
    assert captured.out == "Answer 2.\n"
    assert captured.err.startswith("coding-agent: error: blocked the bash call (echo 4 >> ran.txt)")
    assert (here / "ran.txt").read_text() == "0\n2\n"
    stored = json.loads(session.metadata_path.read_text())["settings"]
    assert stored["permission_mode"] == "ask" and stored["faux_script"] == str(script)
