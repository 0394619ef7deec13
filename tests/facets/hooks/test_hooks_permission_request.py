"""Claude Code's ``PermissionRequest`` hooks answer the approval dialog, through the real session
worker and the real headless binary.

Each test writes a real hook script (Python) into a temporary ``~/.claude/settings.json`` and
runs a scripted faux model in ``ask`` mode, where every ``bash`` call would open the approval
dialog. The client answers any dialog that still opens (``allow`` or ``deny``, per test) and
records it, so "no dialog" is ``client.approvals == []``. Nothing sleeps to synchronise: the
tests wait on the conversation's view and on the worker's stderr.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_agent.settings.trust import TrustStore

sys.path.insert(0, str(Path(__file__).parent))  # the hooks worker tests' helpers
sys.path.insert(0, str(Path(__file__).parents[2] / "app" / "worker"))  # worker_support
from test_hooks_worker import (  # pyright: ignore[reportMissingImports]
    command,
    home_env,
    results,
    run_turn,
    settings,
    write,
)
from worker_support import allow, deny  # pyright: ignore[reportMissingImports]

pytestmark = pytest.mark.anyio

PYTHON = sys.executable

ANSWER = """import json, sys, time
event = json.load(sys.stdin)
with open(sys.argv[1], "a") as log:
    log.write(json.dumps(event) + "\\n")
assert event["hook_event_name"] == "PermissionRequest", event
command = event["tool_input"]["command"]
def answer(decision):
    print(json.dumps({"hookSpecificOutput": {
        "hookEventName": "PermissionRequest", "decision": decision}}))
if command.startswith("echo"):
    answer({"behavior": "allow"})
elif command.startswith("rm"):
    answer({"behavior": "deny", "message": "no deleting in this repo"})
elif command.startswith("touch crash"):
    sys.exit(1)
elif command.startswith("touch slow"):
    time.sleep(30)
    answer({"behavior": "allow"})
elif command.startswith("touch garbage"):
    print('{"hookSpecificOutput": {"decision": {"behavior": "allow"')  # cut short: not JSON
elif command.startswith("touch rewritten"):
    answer({"behavior": "allow", "updatedInput": {"command": "touch other"}})
elif command.startswith("touch exit2"):
    print("exit 2 denies", file=sys.stderr)
    sys.exit(2)
# any other command: no decision (the dialog asks)
"""


def answering_hook(tmp: Path, matcher: str = "Bash", timeout: float | None = None) -> Path:
    """The ``ANSWER`` script as a PermissionRequest hook of the user's settings; returns the
    file each run appends its event to."""
    seen = tmp / "permission-events.log"
    script = write(tmp / "hooks" / "answer.py", ANSWER)
    hook = command(f"{PYTHON} {script} {seen}", timeout)
    settings(tmp, {"PermissionRequest": [{"matcher": matcher, "hooks": [hook]}]})
    return seen


def events(seen: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in seen.read_text().splitlines()] if seen.exists() else []


def bash(*commands: str) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = [
        {"toolCalls": [{"name": "bash", "arguments": {"command": c}}]} for c in commands
    ]
    return [*steps, {"text": "done"}]


async def test_a_hook_that_allows_runs_the_call_without_a_dialog(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    seen = answering_hook(tmp_path)
    stderr: list[str] = []
    client = await run_turn(
        tmp_path, env, bash("echo ran > ran.txt"), mode="ask", approve=deny, stderr=stderr
    )
    assert client.approvals == []  # no dialog opened
    (result,) = results(client)
    assert result["isError"] is False
    assert (tmp_path / "project" / "ran.txt").read_text() == "ran\n"
    (event,) = events(seen)
    assert event["tool_name"] == "Bash"
    assert event["tool_input"]["command"] == "echo ran > ran.txt"
    assert event["cwd"] == str(tmp_path / "project")
    script = tmp_path / "hooks" / "answer.py"
    said = f"bash call allowed by PermissionRequest hook `{PYTHON} {script} {seen}`"
    assert any(said in line for line in stderr), stderr


async def test_a_hook_that_denies_refuses_the_call_with_its_message(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    seen = answering_hook(tmp_path)
    keep = write(tmp_path / "project" / "keep.txt", "kept\n")
    client = await run_turn(
        tmp_path, env, bash("rm keep.txt", "touch exit2"), mode="ask", approve=allow
    )
    assert client.approvals == []
    denied, exit2 = results(client)
    script = tmp_path / "hooks" / "answer.py"
    assert denied["isError"] is True
    assert denied["content"][0]["text"] == (
        f"Tool call blocked: denied by PermissionRequest hook `{PYTHON} {script} {seen}`: "
        "no deleting in this repo"
    )
    assert keep.exists()
    assert exit2["isError"] is True and exit2["content"][0]["text"].endswith(": exit 2 denies")
    assert not (tmp_path / "project" / "exit2").exists()


async def test_a_hook_that_crashes_times_out_prints_no_json_or_rewrites_leaves_the_dialog(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    """Fail closed: an error is never an allow; the dialog asks as it would have (here the
    person denies, and nothing runs)."""
    env = {**agent_env, **home_env(tmp_path)}
    seen = answering_hook(tmp_path, timeout=2)
    calls = ("touch crash", "touch slow", "touch garbage", "touch rewritten", "touch quiet")
    stderr: list[str] = []
    client = await run_turn(tmp_path, env, bash(*calls), mode="ask", approve=deny, stderr=stderr)
    assert [d.request["args"]["command"] for d in client.approvals] == list(calls)
    assert all(r["isError"] is True for r in results(client))
    project = tmp_path / "project"
    assert not any((project / name).exists() for name in ("crash", "slow", "garbage", "other"))
    assert len(events(seen)) == 5
    log = "\n".join(stderr)
    assert "failed with exit code 1" in log and "timed out after 2 s" in log
    assert "printed something that is not a JSON object, so it gave no decision" in log
    assert "allowed with an updatedInput that differs from the call's input" in log


async def test_a_deny_rule_wins_over_a_hook_that_allows(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    seen = tmp_path / "permission-events.log"
    script = write(tmp_path / "hooks" / "answer.py", ANSWER)
    claude_settings = {
        "permissions": {"deny": ["Bash(echo secret:*)"]},
        "hooks": {
            "PermissionRequest": [{"hooks": [command(f"{PYTHON} {script} {seen}")]}],
        },
    }
    write(tmp_path / "home" / ".claude" / "settings.json", json.dumps(claude_settings))
    client = await run_turn(
        tmp_path, env, bash("echo secret > leaked.txt"), mode="ask", approve=allow
    )
    (result,) = results(client)
    assert result["isError"] is True and "deny rule" in result["content"][0]["text"]
    assert not (tmp_path / "project" / "leaked.txt").exists()
    assert events(seen) == [] and client.approvals == []  # refused before the hook ran


async def test_deny_instead_of_prompting_refuses_before_the_hook_runs(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    seen = tmp_path / "permission-events.log"
    script = write(tmp_path / "hooks" / "answer.py", ANSWER)
    claude_settings = {
        "permissions": {"denyInsteadOfPrompting": True},
        "hooks": {"PermissionRequest": [{"hooks": [command(f"{PYTHON} {script} {seen}")]}]},
    }
    write(tmp_path / "home" / ".claude" / "settings.json", json.dumps(claude_settings))
    client = await run_turn(tmp_path, env, bash("echo ran > ran.txt"), mode="ask", approve=allow)
    (result,) = results(client)
    assert result["isError"] is True and "denyInsteadOfPrompting" in result["content"][0]["text"]
    assert not (tmp_path / "project" / "ran.txt").exists()
    assert events(seen) == [] and client.approvals == []


async def test_an_untrusted_projects_permission_request_hook_never_runs(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    seen = tmp_path / "permission-events.log"
    script = write(tmp_path / "hooks" / "answer.py", ANSWER)
    hooks = {"PermissionRequest": [{"hooks": [command(f"{PYTHON} {script} {seen}")]}]}
    write(tmp_path / "project" / ".claude" / "settings.json", json.dumps({"hooks": hooks}))
    client = await run_turn(tmp_path, env, bash("echo ran > ran.txt"), mode="ask", approve=deny)
    assert [d.request["name"] for d in client.approvals] == ["bash"]  # asked: the hook did not
    assert events(seen) == [] and not (tmp_path / "project" / "ran.txt").exists()
    # trusted, the same file's hook answers
    TrustStore.default(env).set(tmp_path / "project", True)
    client = await run_turn(tmp_path, env, bash("echo ran > ran.txt"), mode="ask", approve=deny)
    assert client.approvals == [] and len(events(seen)) == 1
    assert (tmp_path / "project" / "ran.txt").read_text() == "ran\n"


async def test_a_headless_run_applies_the_hooks_answer(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    """``-p`` without ``--approve`` refuses what would ask; a hook's allow runs it, its deny
    refuses it with the hook's message, and no answer refuses as before."""
    seen = tmp_path / "permission-events.log"
    script = write(tmp_path / "hooks" / "answer.py", ANSWER)
    hooks = {"PermissionRequest": [{"hooks": [command(f"{PYTHON} {script} {seen}")]}]}
    write(Path(agent_env["CLAUDE_CONFIG_DIR"]) / "settings.json", json.dumps({"hooks": hooks}))
    project = tmp_path / "project"
    project.mkdir()
    steps = bash("echo ran > ran.txt", "rm -f ran.txt", "touch quiet")
    faux = write(tmp_path / "faux.json", json.dumps(steps))
    binary = Path(sys.executable).with_name("coding-agent")
    with anyio.fail_after(120):
        done = await anyio.run_process(
            [str(binary), "--faux-script", str(faux), "--json", "go"],
            env=agent_env,
            cwd=project,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    lines = [json.loads(line) for line in done.stdout.decode().splitlines()]
    tool_results = [
        line["entry"]["model"][0]
        for line in lines
        if line["type"] == "entry.added" and line["entry"]["kind"] == "pi.tool_result"
    ]
    texts = [r["content"][0]["text"] for r in tool_results]
    assert (project / "ran.txt").read_text() == "ran\n", done.stderr.decode()
    assert tool_results[0]["isError"] is False
    assert texts[1].endswith(": no deleting in this repo")
    assert tool_results[2]["isError"] is True and not (project / "quiet").exists()
    assert len(events(seen)) == 3


async def test_a_hooks_allow_does_not_cover_an_edit_only_a_person_may_allow(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    """An edit of a guarded path (``.git/``: it makes the machine run code) asks in every mode
    but auto, and no allow rule covers it: a hook's allow does not either (the dialog asks)."""
    env = {**agent_env, **home_env(tmp_path)}
    allow_all = json.dumps(
        {"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                                "decision": {"behavior": "allow"}}}
    )  # fmt: skip
    hook = command(f"echo '{allow_all}'")
    settings(tmp_path, {"PermissionRequest": [{"matcher": "Write", "hooks": [hook]}]})
    (tmp_path / "project" / ".git").mkdir(parents=True)
    steps = [
        {"toolCalls": [{"name": "write", "arguments": {"path": "notes.md", "content": "hi\n"}}]},
        {"toolCalls": [{"name": "write", "arguments": {"path": ".git/config", "content": "x"}}]},
        {"text": "done"},
    ]
    stderr: list[str] = []
    client = await run_turn(tmp_path, env, steps, mode="ask", approve=deny, stderr=stderr)
    assert [d.request["args"]["path"] for d in client.approvals] == [".git/config"]
    written, guarded = results(client)
    assert written["isError"] is False
    assert (tmp_path / "project" / "notes.md").read_text() == "hi\n"
    assert guarded["isError"] is True
    assert not (tmp_path / "project" / ".git" / "config").exists()
    assert any("no rule or hook allows a call that asks in every mode" in s for s in stderr)
