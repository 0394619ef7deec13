"""``"onFailure": "block"``: a guard hook that crashes, cannot start, hangs or cannot reach its
server blocks what it guards instead of letting it through (fail closed), and the default
``"continue"`` keeps the old non-blocking error.

Real hooks throughout: bash commands and scripts run by the real shell, a program that does not
exist, a hook stuck reading a fifo nobody writes (its 1 s timeout ends it: nothing sleeps), an
HTTP hook posting to a loopback port nobody listens on and to a real local server answering
500; the worker tests run the real session worker with a scripted model in ``auto`` mode, so
whatever is blocked is blocked by a hook.
"""

from __future__ import annotations

import http.server
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from facets_hooks.contract import HooksSummary
from facets_hooks.http_hooks import http_command
from facets_hooks.on_failure import apply_on_failure, failure_of
from facets_hooks.permission import permission_verdict
from facets_hooks.protocol import HookRun, run_command
from facets_hooks.settings import parse_settings
from facets_hooks.tui import hooks_text
from facets_hooks.verdicts import post_notes, pre_verdict, prompt_verdict, stop_continuation

sys.path.insert(0, str(Path(__file__).parent))
from test_hooks_worker import (  # pyright: ignore[reportMissingImports]
    command,
    home_env,
    results,
    run_turn,
    settings,
    write,
)
from worker_support import text_of  # pyright: ignore[reportMissingImports]

NAME = "PreToolUse hook `guard` (s.json)"


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def failing_server() -> Iterator[str]:
    """A real loopback HTTP server that answers every POST with 500."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(500, "Internal Server Error")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/pre"
    finally:
        server.shutdown()
        server.server_close()


# -- settings ----------------------------------------------------------------------------------


def test_on_failure_is_read_and_a_bad_value_is_named_and_read_as_block() -> None:
    entry = {"type": "command", "command": "guard"}
    data = {
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [
                    {**entry, "onFailure": "block"},
                    entry,
                    {**entry, "onFailure": "deny"},
                    {"type": "prompt", "prompt": "safe?", "onFailure": "block"},
                ]},
            ]
        }
    }  # fmt: skip
    hooks, problems = parse_settings(data, "s.json")
    assert [h.on_failure for h in hooks] == ["block", "continue", "block", "continue"]
    assert problems == [
        's.json: hooks.PreToolUse[0].hooks[2]: onFailure must be "continue" or "block", got '
        '"deny"; it is read as "block" (fail closed: a failure of this hook blocks what it '
        'guards). Write "block" or "continue" to say which you mean',
        's.json: hooks.PreToolUse[0].hooks[3]: "onFailure" applies to command, http and '
        "mcp_tool hooks only (as in Claude Code); a prompt hook's error already gives no "
        "verdict, never a pass: ignored",
    ]


def test_an_mcp_tool_hook_with_on_failure_block_loads_as_an_mcp_tool_hook() -> None:
    guard = {"type": "mcp_tool", "server": "policy", "tool": "check", "onFailure": "block"}
    data = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [guard]}]}}
    (hook,), problems = parse_settings(data, "s.json")
    assert (hook.kind, hook.label, hook.on_failure) == (
        "mcp_tool",
        "mcp_tool policy check",
        "block",
    )
    assert problems == []


# -- what counts as a failure, with real processes ---------------------------------------------


async def run(command: str, tmp: Path, seconds: float = 30) -> HookRun:
    with anyio.fail_after(120):
        return await run_command(
            command,
            {"hook_event_name": "PreToolUse", "tool_input": {"command": "ls"}},
            env=dict(os.environ),
            cwd=str(tmp),
            seconds=seconds,
        )


@pytest.mark.anyio
async def test_each_kind_of_failure_blocks_with_a_reason_naming_the_hook(
    tmp_path: Path, failing_server: str
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    not_executable = write(tmp_path / "guard.sh", "#!/bin/sh\nexit 0\n")
    cases = {
        "echo 'guard crashed: jq: not found' >&2; exit 1": (
            "it exited with code 1: guard crashed: jq: not found"
        ),
        f"{tmp_path}/no-such-guard": "it exited with code 127 (its program was not found): ",
        str(not_executable): "it exited with code 126 (its program is not executable): ",
        "echo '{\"hookSpecificOutput\": ' ": "it printed invalid JSON on stdout",
        'echo \'{"hookSpecificOutput": {"permissionDecision": "Deny"}}\'': (
            'it printed the permissionDecision "Deny", which is none of allow, deny, ask'
        ),
        http_command(f"http://127.0.0.1:{closed_port()}/pre", {}, []): (
            "it exited with code 1: HTTP hook: http://127.0.0.1:"
        ),
        http_command(failing_server, {}, []): (
            f"it exited with code 1: HTTP hook: {failing_server} answered 500"
        ),
    }
    for hook, said in cases.items():
        failed = await run(hook, tmp_path)
        assert said in failure_of(failed, 30), (hook, failed)
        blocked = apply_on_failure(failed, name=NAME, timeout=30)
        assert blocked.exit_code == 2 and said in blocked.failed
        reason = pre_verdict(blocked)["block"]
        assert reason.startswith(f'{NAME} failed and its onFailure is "block", so this was blocked')
        assert said in reason, reason
    # a hook stuck reading a fifo nobody writes: its 1 s timeout stops it
    stuck = await run(f"read line < {fifo}", tmp_path, seconds=1)
    assert stuck.timed_out
    assert pre_verdict(apply_on_failure(stuck, name=NAME, timeout=1))["block"].endswith(
        "it timed out after 1 s and was stopped. Fix the hook (or remove it) for this to go on."
    )


@pytest.mark.anyio
async def test_a_hook_that_answers_is_not_a_failure(tmp_path: Path) -> None:
    for hook in ("exit 0", "echo plain text", "echo no >&2; exit 2", 'echo \'{"decision": "x"}\''):
        done = await run(hook, tmp_path)
        assert failure_of(done, 30) == ""
        assert apply_on_failure(done, name=NAME, timeout=30) is done


# -- through the real worker -------------------------------------------------------------------


def guard(command_line: str, **extra: Any) -> dict[str, Any]:
    return {**command(command_line), "onFailure": "block", **extra}


@pytest.mark.anyio
async def test_failing_guards_with_on_failure_block_block_their_tools_and_continue_lets_through(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    project = tmp_path / "project"
    write(project / "notes.md", "notes\n")
    refused = f"http://127.0.0.1:{closed_port()}/pre"
    mcp = {"type": "mcp_tool", "server": "policy", "tool": "check", "onFailure": "block"}
    source = settings(
        tmp_path,
        {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [guard("echo 'guard: boom' >&2; exit 1")]},
                {"matcher": "Write", "hooks": [guard(f"{tmp_path}/missing-guard")]},
                {"matcher": "Read", "hooks": [guard(f"read line < {fifo}", timeout=1)]},
                {"matcher": "Grep", "hooks": [{"type": "http", "url": refused, "onFailure": "block"}]},
                {"matcher": "Glob", "hooks": [mcp]},
                {"matcher": "LS", "hooks": [command("echo 'ls guard: boom' >&2; exit 1")]},
            ]
        },
    )  # fmt: skip
    steps = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "echo ran > marker"}}]},
        {"toolCalls": [{"name": "write", "arguments": {"path": "w.txt", "content": "w"}}]},
        {"toolCalls": [{"name": "read", "arguments": {"path": "notes.md"}}]},
        {"toolCalls": [{"name": "grep", "arguments": {"pattern": "notes"}}]},
        {"toolCalls": [{"name": "find", "arguments": {"pattern": "*.md"}}]},
        {"toolCalls": [{"name": "ls", "arguments": {}}]},
        {"text": "done"},
    ]
    stderr: list[str] = []
    client = await run_turn(tmp_path, env, steps, stderr=stderr)
    bash, written, read, grep, found, listed = results(client)
    where = f'({source}) failed and its onFailure is "block", so this was blocked: '
    expected = {
        "bash": (bash, "`echo 'guard: boom' >&2; exit 1` " + where + "it exited with code 1: "
                 "guard: boom"),
        "write": (written, f"`{tmp_path}/missing-guard` " + where + "it exited with code 127 "
                  "(its program was not found)"),
        "read": (read, f"`read line < {fifo}` " + where + "it timed out after 1 s"),
        "grep": (grep, f"`POST {refused}` " + where + f"it exited with code 1: HTTP hook: "
                 f"{refused} could not be reached"),
        "find": (found, "`mcp_tool policy check` " + where + "MCP server 'policy' is not one "
                 "this session runs (its servers: none)"),
    }  # fmt: skip
    for tool, (result, said) in expected.items():
        text = result["content"][0]["text"]
        assert result["isError"] is True, (tool, text)
        assert text.startswith("Tool call blocked: PreToolUse hook "), (tool, text)
        assert said in text, (tool, text)
        assert any(said in line for line in stderr), (tool, stderr)  # the user sees it too
    assert not (project / "marker").exists()
    assert not (project / "w.txt").exists()
    assert "notes" not in read["content"][0]["text"].split("blocked", 1)[0]
    # the default "continue": the failure is logged and the call goes on, as before
    assert listed["isError"] is False and "notes.md" in listed["content"][0]["text"]
    assert any("failed with exit code 1: ls guard: boom" in line for line in stderr), stderr


@pytest.mark.anyio
async def test_a_failing_user_prompt_submit_guard_blocks_the_prompt(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    settings(tmp_path, {"UserPromptSubmit": [{"hooks": [guard("exit 3")]}]})
    stderr: list[str] = []
    await run_turn(tmp_path, env, [{"text": "done"}], prompt="the secret", stderr=stderr)
    said = "`exit 3` ("
    blocked = [line for line in stderr if "a UserPromptSubmit hook blocked a prompt" in line]
    assert blocked and said in blocked[0] and "it exited with code 3" in blocked[0], stderr


@pytest.mark.anyio
async def test_a_failing_stop_guard_makes_the_model_go_on_once_then_the_turn_ends(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    settings(tmp_path, {"Stop": [{"hooks": [guard("echo 'checker crashed' >&2; exit 1")]}]})
    stderr: list[str] = []
    steps = [{"text": "all done"}, {"text": "still done"}, {"text": "never asked"}]
    client = await run_turn(tmp_path, env, steps, stderr=stderr)
    answers = [text_of(e) for e in client.view["entries"] if e["kind"] == "pi.assistant"]
    assert answers == ["all done", "still done"]
    users = [text_of(e) for e in client.view["entries"] if e["kind"] == "pi.user"]
    assert users[-1].startswith("Stop hook `echo 'checker crashed' >&2; exit 1` (")
    assert 'failed and its onFailure is "block"' in users[-1]
    assert "it exited with code 1: checker crashed" in users[-1]
    assert any("failed again after the model went on once" in line for line in stderr), stderr


def test_hooks_lists_a_hook_that_fails_closed() -> None:
    data = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [guard("guard.sh")]}]}}
    (hook,), _ = parse_settings(data, "s.json")
    summary: HooksSummary = {
        "hooks": [
            {"event": hook.event, "matcher": hook.matcher, "command": hook.label,
             "timeout": hook.timeout, "source": hook.source, "onFailure": hook.on_failure}
        ],
        "problems": [],
        "waiting": [],
    }  # fmt: skip
    assert "    timeout 60 s · onFailure block · s.json" in hooks_text(summary)


@pytest.mark.anyio
async def test_each_event_reads_a_blocked_failure_as_its_exit_2(tmp_path: Path) -> None:
    crashed = await run("echo 'no policy file' >&2; exit 1", tmp_path)
    blocked = apply_on_failure(crashed, name="hook `guard` (s.json)", timeout=30)
    reason = blocked.stderr
    assert "it exited with code 1: no policy file" in reason
    assert permission_verdict(blocked, {"command": "ls"}) == ("deny", reason)
    assert prompt_verdict(blocked) == {"context": "", "blocked": reason}
    assert stop_continuation(blocked) == reason
    assert post_notes(blocked) == [f"PostToolUse hook feedback: {reason}"]
    # the same failure under the default "continue": nothing blocks
    assert permission_verdict(crashed, {"command": "ls"}) is None
    assert prompt_verdict(crashed) == {"context": "", "blocked": ""}
    assert stop_continuation(crashed) == "" and post_notes(crashed) == []
