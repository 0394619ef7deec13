"""Claude Code's headless shapes where a script migrating from ``claude -p`` reads them: a run
that fails before its turn still writes the error result on stdout (``| jq .result`` reads
why), ``stream-json`` streams a subagent's messages with ``parent_tool_use_id``, ``--max-turns``
works against a ``coding-agent serve`` session, and ``--settings``' ``permissions.defaultMode``
sets the run's permission mode behind the gates ``--permission-mode`` has. Each runs the real
binary on the scripted faux model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.app.cli._scripted import run_scripted


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "notes.txt").write_text("the build is green\n")
    return folder


def _error_result(stdout: str) -> dict[str, Any]:
    """The one line on stdout: Claude Code's error result."""
    (line,) = stdout.splitlines()
    result = json.loads(line)
    assert (result["type"], result["subtype"], result["is_error"]) == (
        "result", "error_during_execution", True
    )  # fmt: skip
    assert result["num_turns"] == 0 and result["errors"] == [result["result"]]
    return result


@pytest.mark.parametrize(
    ("flags", "code", "says"),
    [
        (["--settings", "missing.json"], 2, "missing.json: no such file"),
        (["--model", "nowhere/none"], 1, "unknown provider 'nowhere'"),
        (["--add-dir", "gone"], 2, "--add-dir gone: no such folder"),
        (["--server", "tcp://127.0.0.1:9/s1"], 1, "cannot reach the server at"),
        (["--resume", "no-such-session"], 2, "no-such-session"),
    ],
)
@pytest.mark.parametrize("output", ["json", "stream-json"])
@pytest.mark.anyio
async def test_a_run_that_cannot_start_writes_the_error_result(
    project: Path,
    agent_env: dict[str, str],
    flags: list[str],
    code: int,
    says: str,
    output: str,
) -> None:
    done = await run_scripted(project, agent_env, [{"text": "never"}], "-p", "hi",
                              "--output-format", output, *flags, text=True)  # fmt: skip
    assert done.returncode == code, done.stderr
    result = _error_result(done.stdout)
    assert says in result["result"], result
    (line,) = done.stderr.splitlines()  # the human line stays on stderr, as before
    assert line.startswith("coding-agent: error: ") and says in line, line


@pytest.mark.anyio
async def test_an_unknown_command_writes_the_error_result_and_a_parse_error_does_not(
    project: Path, agent_env: dict[str, str]
) -> None:
    done = await run_scripted(project, agent_env, [{"text": "never"}], "-p", "/no-such-command",
                              "--output-format", "json", text=True)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "/no-such-command" in _error_result(done.stdout)["result"]

    # argparse's own errors come before the format is known: stderr only, as Claude Code's
    done = await run_scripted(project, agent_env, [{"text": "never"}], "-p", "hi",
                              "--output-format", "json", "--no-such-flag", text=True)  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    # text output keeps stdout empty on a failure
    done = await run_scripted(project, agent_env, [{"text": "never"}], "-p", "hi",
                              "--settings", "missing.json", text=True)  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""


SUBAGENT_SCRIPT = {
    "steps": [
        {"toolCalls": [{"name": "agent", "arguments": {"description": "check the notes",
                                                       "prompt": "task 1: read notes.txt"}}]},
        {"text": "All green."},
    ],
    "conversations": [
        {"when": "task 1:", "steps": [
            {"toolCalls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
            {"text": "The notes say green."},
        ]},
    ],
}  # fmt: skip


@pytest.mark.anyio
async def test_stream_json_streams_a_subagents_messages_with_its_task_call_as_parent(
    project: Path, agent_env: dict[str, str]
) -> None:
    done = await run_scripted(project, agent_env, SUBAGENT_SCRIPT, "-p", "check",
                              "--output-format", "stream-json", text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    shape = [(line["type"], line.get("parent_tool_use_id", "-")) for line in lines]
    task = lines[1]["message"]["content"][0]
    assert (task["type"], task["name"]) == ("tool_use", "Task")
    assert shape == [
        ("system", "-"),
        ("assistant", None),  # the Task call
        ("assistant", task["id"]),  # the subagent reads
        ("user", task["id"]),  # its read's result
        ("assistant", task["id"]),  # its report
        ("user", None),  # the Task call's result: the report
        ("assistant", None),  # the run's answer
        ("result", "-"),
    ]
    read = lines[2]["message"]["content"][0]
    assert (read["name"], read["input"]) == ("Read", {"file_path": str(project / "notes.txt")})
    assert lines[3]["message"]["content"][0]["tool_use_id"] == read["id"]
    assert "the build is green" in lines[3]["message"]["content"][0]["content"]
    assert lines[4]["message"]["content"] == [{"type": "text", "text": "The notes say green."}]
    assert lines[5]["message"]["content"][0]["content"] == "The notes say green."
    assert lines[-1]["result"] == "All green."
    assert lines[-1]["num_turns"] == 2  # the run's own model calls
    assert len({line["uuid"] for line in lines}) == len(lines)


def _touch(name: str) -> list[dict[str, Any]]:
    return [{"toolCalls": [{"name": "bash", "arguments": {"command": f"touch {name}"}}]},
            {"text": "done"}]  # fmt: skip


def _write(name: str) -> list[dict[str, Any]]:
    call = {"name": "write", "arguments": {"path": name, "content": "x\n"}}
    return [{"toolCalls": [call]}, {"text": "done"}]


def _settings(**permissions: Any) -> str:
    return json.dumps({"permissions": permissions})


@pytest.mark.anyio
async def test_settings_default_mode_is_the_runs_permission_mode(
    project: Path, agent_env: dict[str, str]
) -> None:
    # acceptEdits: an edit runs unasked, and stderr says which mode and where from
    done = await run_scripted(project, agent_env, _write("edited.txt"), "-p", "go", "--settings",
                              _settings(defaultMode="acceptEdits"), text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (project / "edited.txt").read_text() == "x\n"
    assert "coding-agent: permission mode accept-edits (from permissions.defaultMode " in (
        done.stderr
    )
    # bypassPermissions is our auto: a command runs unasked (a file of settings, too)
    settings = project.parent / "ci-settings.json"
    settings.write_text(_settings(defaultMode="bypassPermissions"))
    done = await run_scripted(project, agent_env, _touch("bypassed"), "-p", "go",
                              "--settings", str(settings), "--output-format", "json",
                              text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (project / "bypassed").exists()
    assert f"permission mode auto (from permissions.defaultMode 'bypassPermissions' of " \
        f"--settings {settings}" in done.stderr  # fmt: skip
    # --permission-mode wins over the file, as in Claude Code
    done = await run_scripted(project, agent_env, _touch("asked"), "-p", "go", "--settings",
                              str(settings), "--permission-mode", "ask", text=True)  # fmt: skip
    assert done.returncode == 3 and not (project / "asked").exists()
    assert "permission mode" not in done.stderr


@pytest.mark.parametrize("where", ["the same --settings", "your own settings file"])
@pytest.mark.anyio
async def test_a_disabled_bypass_refuses_settings_default_mode_bypass(
    project: Path, agent_env: dict[str, str], where: str
) -> None:
    disable = {"disableBypassPermissionsMode": "disable"}
    settings = _settings(defaultMode="bypassPermissions", **disable)
    if where == "your own settings file":
        user = Path(agent_env["CLAUDE_CONFIG_DIR"]) / "settings.json"
        user.parent.mkdir(parents=True, exist_ok=True)
        user.write_text(_settings(**disable))
        settings = _settings(defaultMode="bypassPermissions")
    done = await run_scripted(project, agent_env, _touch("bypassed"), "-p", "go",
                              "--settings", settings, "--output-format", "json",
                              text=True)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert not (project / "bypassed").exists()
    result = _error_result(done.stdout)
    assert (
        "the auto permission mode is disabled by permissions.disableBypassPermissionsMode"
        in (result["result"])
    )
    assert "permissions.defaultMode 'bypassPermissions' of --settings" in result["result"]


@pytest.mark.anyio
async def test_max_turns_with_wait_for_approval_is_enforced_by_the_sessions_worker(
    project: Path, agent_env: dict[str, str]
) -> None:
    # --wait-for-approval runs the session in a worker of its own: the limit is the worker's
    steps = [{"toolCalls": [{"name": "bash", "arguments": {"command": f"touch t{n}"}}]}
             for n in (1, 2, 3)]  # fmt: skip
    done = await run_scripted(project, agent_env, steps, "-p", "go", "--wait-for-approval", "0",
                              "--approve", "allow", "--max-turns", "2", "--output-format", "json",
                              text=True)  # fmt: skip
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert (result["subtype"], result["num_turns"]) == ("error_max_turns", 2)
    assert (project / "t1").exists() and (project / "t2").exists()
    assert not (project / "t3").exists()
