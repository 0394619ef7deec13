"""Claude Code's headless output through the real binary on the scripted faux model:
``-p --output-format json`` (one result object), ``stream-json`` (init first, a line per
message, the result last) and ``--max-turns N`` (a model that keeps calling tools is stopped
after N turns: ``error_max_turns``, exit 1), as a CI script reads them (``| jq -r .result``)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.app.cli._scripted import BINARY, TIMEOUT, run_scripted
from tests.conftest import sigint_as_in_a_terminal

USAGE = {
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "notes.txt").write_text("the build is green\n")
    return folder


def _read(path: str) -> dict[str, Any]:
    return {"name": "read", "arguments": {"path": path}}


def _bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command}}


READ_THEN_ANSWER = [{"toolCalls": [_read("notes.txt")]}, {"text": "The build is green."}]


@pytest.mark.anyio
async def test_json_is_one_result_object_with_claude_codes_fields(
    project: Path, agent_env: dict[str, str]
) -> None:
    steps = [*READ_THEN_ANSWER, {"text": "Still green."}]  # the session goes on in its script
    done = await run_scripted(project, agent_env, steps, "-p", "how is the build?",
                              "--output-format", "json", text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()  # nothing but the JSON on stdout
    result = json.loads(line)
    assert result["type"] == "result"
    assert result["subtype"] == "success"
    assert result["is_error"] is False
    assert result["result"] == "The build is green."
    assert result["num_turns"] == 2  # the call that read, the one that answered
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]+", result["session_id"])
    assert result["total_cost_usd"] == 0  # the faux model has no prices
    assert set(result["usage"]) == USAGE
    assert result["usage"]["input_tokens"] > 0 and result["usage"]["output_tokens"] > 0
    assert result["permission_denials"] == []
    assert isinstance(result["duration_ms"], int) and isinstance(result["duration_api_ms"], int)
    assert 0 <= result["duration_api_ms"] <= result["duration_ms"]

    # the session id is ours: --resume takes it, and the result names the same session
    again = await run_scripted(project, agent_env, steps, "-p", "and now?",
                               "--resume", result["session_id"], "--output-format", "json",
                               text=True)  # fmt: skip
    assert again.returncode == 0, again.stderr
    follow = json.loads(again.stdout)
    assert (follow["session_id"], follow["result"]) == (result["session_id"], "Still green.")


@pytest.mark.anyio
async def test_stream_json_starts_with_init_and_ends_with_the_result(
    project: Path, agent_env: dict[str, str]
) -> None:
    done = await run_scripted(project, agent_env, READ_THEN_ANSWER, "-p", "how is the build?",
                              "--output-format", "stream-json", text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(line["type"], line.get("subtype")) for line in lines] == [
        ("system", "init"),
        ("assistant", None),
        ("user", None),
        ("assistant", None),
        ("result", "success"),
    ]
    init, calling, results, answer, result = lines
    session = init["session_id"]
    assert {line["session_id"] for line in lines} == {session}
    assert init["cwd"] == str(project)
    assert init["model"] == "faux/faux-1"
    assert init["permissionMode"] == "default"  # a new session asks: Claude Code's default
    assert {"Bash", "Read", "Edit", "Write", "Glob", "Grep"} <= set(init["tools"])

    message = calling["message"]
    assert (message["type"], message["role"], message["stop_reason"]) == (
        "message", "assistant", "tool_use"
    )  # fmt: skip
    (use,) = message["content"]
    assert use["type"] == "tool_use"
    assert (use["name"], use["input"]) == ("Read", {"file_path": str(project / "notes.txt")})
    assert set(message["usage"]) == USAGE

    (tool_result,) = results["message"]["content"]
    assert results["message"]["role"] == "user"
    assert tool_result["type"] == "tool_result"
    assert tool_result["tool_use_id"] == use["id"]
    assert "the build is green" in tool_result["content"]
    assert tool_result["is_error"] is False

    assert answer["message"]["content"] == [{"type": "text", "text": "The build is green."}]
    assert answer["message"]["stop_reason"] == "end_turn"
    assert result["result"] == "The build is green." and result["num_turns"] == 2
    assert len({line["uuid"] for line in lines}) == len(lines)


@pytest.mark.anyio
async def test_max_turns_stops_a_model_that_keeps_calling_tools(
    project: Path, agent_env: dict[str, str]
) -> None:
    steps = [{"toolCalls": [_bash(f"touch turn{n}")]} for n in (1, 2, 3, 4)]
    done = await run_scripted(project, agent_env, steps, "-p", "go on", "--approve", "allow",
                              "--max-turns", "2", "--output-format", "json", text=True)  # fmt: skip
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["subtype"] == "error_max_turns"
    assert result["is_error"] is True
    assert result["num_turns"] == 2
    assert "--max-turns 2" in result["result"]
    assert result["errors"] == [result["result"]]
    # the second turn's tools ran; no third model call was made
    assert (project / "turn1").exists() and (project / "turn2").exists()
    assert not (project / "turn3").exists()

    # text: nothing on stdout, one line on stderr, exit 1
    steps = [{"toolCalls": [_read("notes.txt")]} for _ in range(4)]
    done = await run_scripted(
        project, agent_env, steps, "-p", "go on", "--max-turns", "1", text=True
    )
    assert done.returncode == 1
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("coding-agent: error: the run reached --max-turns 1 "), line

    # this agent's own --json: the result line is not ok, the error says why
    done = await run_scripted(
        project, agent_env, steps, "--json", "go on", "--max-turns", "1", text=True
    )
    assert done.returncode == 1
    last = json.loads(done.stdout.splitlines()[-1])
    assert last["type"] == "result" and last["ok"] is False
    assert last["error"].startswith("the run reached --max-turns 1 ")

    # a run that answers within the limit is a success
    done = await run_scripted(project, agent_env, READ_THEN_ANSWER, "-p", "how is it?",
                              "--max-turns", "2", "--output-format", "json", text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["subtype"] == "success"


@pytest.mark.anyio
async def test_max_turns_past_a_refused_call_blocks_the_next_turns_tools(
    project: Path, agent_env: dict[str, str]
) -> None:
    steps = [{"toolCalls": [_bash("touch first")]}, {"toolCalls": [_bash("touch second")]},
             {"text": "never"}]  # fmt: skip
    done = await run_scripted(project, agent_env, steps, "-p", "go", "--max-turns", "1",
                              "--output-format", "stream-json", text=True)  # fmt: skip
    assert done.returncode == 1
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0]["type"] == "system" and lines[-1]["type"] == "result"
    result = lines[-1]
    assert result["subtype"] == "error_max_turns" and result["is_error"] is True
    first_use = lines[1]["message"]["content"][0]
    (denial,) = result["permission_denials"]  # --approve deny refused the first call
    assert denial == {
        "tool_name": "Bash",
        "tool_use_id": first_use["id"],
        "tool_input": {"command": "touch first"},
    }
    assert not (project / "first").exists() and not (project / "second").exists()
    assert "never" not in done.stdout


@pytest.mark.anyio
async def test_a_failed_run_is_an_error_result_with_the_error_text(
    project: Path, agent_env: dict[str, str]
) -> None:
    steps = [{"error": "the provider is overloaded"}]
    done = await run_scripted(
        project, agent_env, steps, "-p", "hi", "--output-format", "json", text=True
    )
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["subtype"] == "error_during_execution"
    assert result["is_error"] is True
    assert "the provider is overloaded" in result["result"]
    (line,) = done.stderr.splitlines()
    assert line.startswith("coding-agent: error: ") and "the provider is overloaded" in line


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--json", "hi", "--output-format", "json"], "choose one"),
        (["--output-format", "json"], "--output-format is for a headless run"),
        (["-p", "hi", "--max-turns", "0"], "expected a whole number of 1 or more, got '0'"),
        (["-p", "hi", "--output-format", "xml"], "invalid choice: 'xml'"),
    ],
)
@pytest.mark.anyio
async def test_a_bad_combination_is_a_usage_error(
    project: Path, agent_env: dict[str, str], flags: list[str], says: str
) -> None:
    done = await run_scripted(project, agent_env, [{"text": "never"}], *flags, text=True)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("coding-agent: error: ") and says in line, line
    assert done.stdout == ""


def test_an_interrupted_run_ends_with_an_error_result(
    project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps({"steps": [{"text": "The slow answer."}], "latency": 60}))
    env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "CODING_AGENT_WARM_START": "0"}  # fmt: skip
    with sigint_as_in_a_terminal():  # a suite run from a background job ignores SIGINT
        process = subprocess.Popen(
            [str(BINARY), "--faux-script", str(slow), "--verbose", "-p", "go",
             "--output-format", "json"], cwd=project, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
    assert process.stderr is not None
    try:  # --verbose's line is written as the turn is sent: a signal then aborts the turn
        assert "coding-agent: session" in process.stderr.readline()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, err
    result = json.loads(out)
    assert result["subtype"] == "error_during_execution" and result["is_error"] is True
    assert result["result"].startswith("interrupted (SIGINT)")
    assert "coding-agent: error: interrupted (SIGINT)" in err
