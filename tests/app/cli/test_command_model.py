"""A command's ``model:`` and ``allowed-tools:`` apply to the turn its prompt starts, and only
that turn (issue 39 deliver 2), through the real binary with the faux model: the request goes to
the command's model and the next prompt to the conversation's; an ``allowed-tools`` rule lets
its calls run in ``-p`` while any other call is refused, and not in the next turn; a ``kill -9``
in the middle of the turn resumes on the command's model (it is in the durable input record).

The faux model answers with the model it was asked for (``AssistantMessage.model``), so each
answer says which model the request went to. Its script is indexed by the answers already in
the conversation, so a run that continues a session lists the earlier answers' steps first.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.app.cli._scripted import BINARY, TIMEOUT, run_scripted

pytestmark = pytest.mark.anyio


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


@pytest.fixture
def commands(agent_env: dict[str, str]) -> Path:
    folder = Path(agent_env["CLAUDE_CONFIG_DIR"]) / "commands"
    folder.mkdir(parents=True)
    return folder


def _entries(stdout: bytes) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stdout.decode().splitlines()]
    return [line["entry"] for line in lines if line["type"] == "entry.added"]


def _answers(stdout: bytes) -> list[tuple[str, str]]:
    """``(text, model)`` of every answer (assistant entry with text) the run reported."""
    found: list[tuple[str, str]] = []
    for entry in _entries(stdout):
        if entry["kind"] == "pi.assistant" and entry.get("model"):
            message = entry["model"][0]
            text = "".join(b.get("text", "") for b in message["content"] if b["type"] == "text")
            if text:
                found.append((text, message["model"]))
    return found


def _results(stdout: bytes) -> dict[str, tuple[str, bool]]:
    """The bash results by command: ``(text, is_error)``."""
    calls: dict[str, str] = {}
    results: dict[str, tuple[str, bool]] = {}
    for entry in _entries(stdout):
        for message in entry.get("model") or []:
            if message["role"] == "assistant":
                for block in message["content"]:
                    if block["type"] == "toolCall":
                        calls[block["id"]] = block["arguments"]["command"]
            if message["role"] == "toolResult":
                text = "".join(b.get("text", "") for b in message["content"])
                results[calls[message["toolCallId"]]] = (text, message["isError"])
    return results


async def test_a_commands_model_answers_its_turn_and_the_next_prompt_goes_to_the_conversations(
    project: Path, agent_env: dict[str, str], commands: Path
) -> None:
    (commands / "quick.md").write_text("---\nmodel: faux/faux-big\n---\nBe quick: $ARGUMENTS\n")
    result = await run_scripted(project, agent_env, [{"text": "one"}], "--json", "/quick now")
    assert result.returncode == 0, result.stderr.decode()
    assert _answers(result.stdout) == [("one", "faux-big")]
    (user,) = [e for e in _entries(result.stdout) if e["kind"] == "pi.user"]
    assert user["data"] == {"model": "faux/faux-big"}  # the transcript says which model
    steps = [{"text": "one"}, {"text": "two"}]
    result = await run_scripted(project, agent_env, steps, "--continue", "--json", "again")
    assert result.returncode == 0, result.stderr.decode()
    assert _answers(result.stdout) == [("two", "faux-1")]
    (user,) = [e for e in _entries(result.stdout) if e["kind"] == "pi.user"]
    assert "data" not in user


async def test_a_model_alias_is_mapped_as_subagent_definitions_map_it(
    project: Path, agent_env: dict[str, str], commands: Path
) -> None:
    (commands / "fast.md").write_text("---\nmodel: haiku\n---\nQuick one.\n")
    # The faux provider has no "haiku": the conversation's model answers, and a warning says so.
    result = await run_scripted(project, agent_env, [{"text": "one"}], "--json", "/fast")
    assert result.returncode == 0, result.stderr.decode()
    assert _answers(result.stdout) == [("one", "faux-1")]
    assert result.stderr.decode().startswith(
        "coding-agent: warning: model 'haiku' has no model on provider 'faux': /fast ("
    )
    # Claude Code's variable chooses the model an alias means.
    env = {**agent_env, "ANTHROPIC_DEFAULT_HAIKU_MODEL": "faux/faux-small"}
    result = await run_scripted(project, env, [{"text": "one"}], "--json", "/fast")
    assert result.returncode == 0, result.stderr.decode()
    assert _answers(result.stdout) == [("one", "faux-small")]
    assert result.stderr.decode() == ""


async def test_allowed_tools_let_their_calls_run_in_that_turn_only(
    project: Path, agent_env: dict[str, str], commands: Path
) -> None:
    (commands / "hello.md").write_text("---\nallowed-tools: Bash(echo:*)\n---\nSay hello.\n")
    calls = [
        {"name": "bash", "arguments": {"command": "echo granted"}},
        {"name": "bash", "arguments": {"command": "touch not-granted"}},
    ]
    steps: list[dict[str, Any]] = [{"toolCalls": calls}, {"text": "done"}]
    result = await run_scripted(project, agent_env, steps, "--json", "/hello")
    assert result.returncode == 3  # a call was refused for lack of approval
    results = _results(result.stdout)
    assert results["echo granted"] == ("granted", False)
    assert results["touch not-granted"] == ("Tool call blocked: denied by headless", True)
    assert not (project / "not-granted").exists()
    assert "blocked the bash call (touch not-granted)" in result.stderr.decode()
    # The next prompt's turn has no such grant: the same call asks, and -p refuses it.
    again: list[dict[str, Any]] = [
        *steps,
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo again"}}]},
        {"text": "done"},
    ]
    result = await run_scripted(project, agent_env, again, "--continue", "--json", "echo again")
    assert result.returncode == 3
    assert _results(result.stdout)["echo again"] == ("Tool call blocked: denied by headless", True)


async def test_a_turn_killed_mid_way_resumes_on_the_commands_model(
    project: Path, agent_env: dict[str, str], commands: Path
) -> None:
    (commands / "slow.md").write_text(
        "---\nmodel: faux/faux-big\nallowed-tools: Bash\n---\nTake your time: $ARGUMENTS\n"
    )
    command = "echo $$ > shell.pid && touch started && exec sleep 300"
    script = project.parent / "first.json"
    script.write_text(
        json.dumps([{"toolCalls": [{"name": "bash", "arguments": {"command": command}}]}])
    )
    started = project / "started"
    with anyio.fail_after(TIMEOUT):
        process = await anyio.open_process(
            [str(BINARY), "--faux-script", str(script), "--json", "/slow go"],
            env=agent_env, cwd=project, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            while not started.exists():  # the command's tool call runs: the turn is mid-way
                assert process.returncode is None, "the run ended before its tool call"
                await anyio.sleep(0.05)
            process.send_signal(signal.SIGKILL)
            assert await process.wait() == -signal.SIGKILL
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.aclose()
            if (project / "shell.pid").exists():
                try:
                    os.kill(int((project / "shell.pid").read_text()), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
    # Continuing the session resumes the turn (its tool call reported as interrupted) on the
    # command's model, then answers the new prompt on the conversation's.
    steps = [{"text": "unused"}, {"text": "resumed"}, {"text": "next answer"}]
    result = await run_scripted(project, agent_env, steps, "--continue", "--json", "next")
    assert result.returncode == 0, result.stderr.decode()
    session = json.loads(result.stdout.decode().splitlines()[0])["session"]
    with anyio.fail_after(TIMEOUT):  # the whole branch (the resumed turn may end before -p
        exported = await anyio.run_process(  # starts reporting)
            [str(BINARY), "export", session, "--format", "jsonl", "-o", "-"],
            env=agent_env, cwd=project, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    lines = [json.loads(line) for line in exported.stdout.decode().splitlines()[1:]]
    stored = "\n".join(json.dumps({"type": "entry.added", "entry": line}) for line in lines)
    assert _answers(stored.encode()) == [("resumed", "faux-big"), ("next answer", "faux-1")]
    (interrupted, _error) = _results(stored.encode())[command]
    assert interrupted.startswith("Command interrupted by a worker restart")


async def test_a_skills_model_and_allowed_tools_apply_to_its_turn_as_a_commands(
    project: Path, agent_env: dict[str, str]
) -> None:
    # A skill as Claude Code users publish one: run as /NAME (or /skill:NAME), its model
    # answers the turn and its allowed-tools let those calls run without asking.
    folder = Path(agent_env["CLAUDE_CONFIG_DIR"]) / "skills" / "hello"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: hello\ndescription: Greets the build.\nmodel: faux/faux-big\n"
        "allowed-tools: Bash(echo:*) Read\narguments: [who]\n---\nSay hello to $who.\n"
    )
    calls = [
        {"name": "bash", "arguments": {"command": "echo granted"}},
        {"name": "bash", "arguments": {"command": "touch not-granted"}},
    ]
    steps: list[dict[str, Any]] = [{"toolCalls": calls}, {"text": "done"}]
    for prompt in ("/hello Bob", "/skill:hello Bob"):
        result = await run_scripted(project, agent_env, steps, "--json", prompt)
        assert result.returncode == 3, result.stderr.decode()  # the other call was refused
        results = _results(result.stdout)
        assert results["echo granted"] == ("granted", False)
        assert results["touch not-granted"] == ("Tool call blocked: denied by headless", True)
        assert not (project / "not-granted").exists()
        assert _answers(result.stdout) == [("done", "faux-big")]
        (user,) = [e for e in _entries(result.stdout) if e["kind"] == "pi.user"]
        assert "Say hello to Bob." in json.dumps(user)
