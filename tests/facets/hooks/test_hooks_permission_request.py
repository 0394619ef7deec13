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

from chord.context import BACKGROUND
from coding_agent.session_files.folders import create_session
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
from worker_support import (  # pyright: ignore[reportMissingImports]
    Client,
    allow,
    connected,
    deny,
    text_of,
    worker_process,
)

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


INTERRUPT = """import json, os, sys, time
event = json.load(sys.stdin)
command = event["tool_input"]["command"]
if command.startswith("rm"):
    deadline = time.monotonic() + 60  # answers once the other call's dialog is open
    while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
        time.sleep(0.05)
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {
        "behavior": "deny", "message": "deleting is off limits", "interrupt": True}}}))
# any other command: no decision (the dialog asks)
"""


async def two_prompts(
    tmp: Path, env: dict[str, str], steps: Any, stderr: list[str], approve: Any = None
) -> Client:
    """Two prompts of the user in one worker (``ask`` mode): the second once the first turn
    ended; returns the client once the second turn ended."""
    project = tmp / "project"
    project.mkdir(exist_ok=True)
    client = Client(approve=approve)

    def on_stderr(line: str) -> None:
        stderr.append(line)
        client.notify()

    faux = write(tmp / "script.json", json.dumps(steps))
    async with (
        worker_process(
            create_session(project, env=env),
            env,
            "--faux-script",
            str(faux),
            "--permission-mode",
            "ask",
            on_stderr=on_stderr,
        ) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "first"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        await client.root.send({"content": "second"}, BACKGROUND)
        await client.wait_for(lambda: client.turn_ended(2))
    return client


async def test_a_hooks_deny_with_interrupt_refuses_the_call_and_stops_the_turn(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    """Claude Code's ``"interrupt": true``: the model reads the refusal as the call's result,
    the turn ends as Esc ends it (no model call after the refusal, the other call of the same
    message is not run and its dialog closes unanswered), and the next prompt is answered."""
    env = {**agent_env, **home_env(tmp_path)}
    script = write(tmp_path / "hooks" / "interrupt.py", INTERRUPT)
    opened = tmp_path / "dialog-open"
    hook = command(f"{PYTHON} {script} {opened}")
    settings(tmp_path, {"PermissionRequest": [{"matcher": "Bash", "hooks": [hook]}]})
    keep = write(tmp_path / "project" / "keep.txt", "kept\n")
    steps = [
        {
            "toolCalls": [
                {"name": "bash", "arguments": {"command": "rm keep.txt"}},
                {"name": "bash", "arguments": {"command": "touch other"}},
            ]
        },
        {"text": "the answer to the second prompt"},
    ]
    stderr: list[str] = []

    async def leave_open(_facade: Any, _request: dict[str, Any], _ctx: Any) -> None:
        opened.write_text("")  # nobody answers: the interrupt closes it

    client = await two_prompts(tmp_path, env, steps, stderr, approve=leave_open)
    ended = [e for e in client.events if e["type"] == "turn.ended"]
    assert (ended[0]["status"], ended[0].get("reason")) == ("unanswered", "aborted")
    assert ended[1]["status"] != "unanswered"  # the session goes on with the next prompt
    # who stopped it reaches the view (clients render from it alone): the event and the
    # interrupted answer's data name the hook, not "the user"
    by = f"PermissionRequest hook `{PYTHON} {script} {opened}`"
    assert ended[0]["detail"] == f"stopped by {by}"
    (stopped,) = [e for e in client.entries("pi.assistant") if e["data"].get("reason")]
    assert stopped["data"]["stoppedBy"] == by
    (refused,) = [r for r in results(client) if "off limits" in r["content"][0]["text"]]
    (other,) = [r for r in results(client) if r is not refused]
    assert refused["isError"] is True
    assert refused["content"][0]["text"] == (
        f"Tool call blocked: denied by PermissionRequest hook `{PYTHON} {script} {opened}`: "
        "deleting is "
        "off limits. The hook also stopped the turn: wait for the user's next message."
    )
    assert other["isError"] is True and "interrupted the turn" in other["content"][0]["text"]
    assert keep.exists() and not (tmp_path / "project" / "other").exists()
    (dialog,) = client.approvals  # touch's, open when the hook answered: closed unanswered
    assert dialog.request["args"]["command"] == "touch other" and not dialog.open
    texts = [text_of(e) for e in client.entries("pi.assistant")]
    assert texts.count("the answer to the second prompt") == 1
    users = [i for i, e in enumerate(client.view["entries"]) if e["kind"] == "pi.user"]
    answer = next(
        i
        for i, e in enumerate(client.view["entries"])
        if e["kind"] == "pi.assistant" and text_of(e) == "the answer to the second prompt"
    )
    assert answer > users[1]  # answered after the second prompt, not in the first turn
    said = f"PermissionRequest hook `{PYTHON} {script} {opened}` interrupted the turn"
    assert any(said in line for line in stderr), stderr


UPDATED = """import json, sys
event = json.load(sys.stdin)
command = event["tool_input"].get("command", "")
def rules(behavior, destination, *pairs):
    return {"type": "addRules", "behavior": behavior, "destination": destination,
            "rules": [{"toolName": t, "ruleContent": c} for t, c in pairs]}
if command.startswith("echo first"):
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {
        "behavior": "allow", "updatedPermissions": [
            rules("allow", "session", ("Bash", "echo again:*")),
            rules("deny", "projectSettings", ("Bash", "rm:*")),
            rules("allow", "session", ("Bash", None), ("Write", "//tmp/**")),
            rules("allow", "localSettings", ("Write", ".git/**")),
            {"type": "setMode", "mode": "acceptEdits", "destination": "session"},
        ]}}}))
# any other command: no decision (the dialog asks)
"""


async def test_a_hooks_allow_keeps_its_updated_permissions_as_session_rules(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    """``updatedPermissions`` ``addRules`` become session rules (as ``/permissions ...
    --session`` adds them): the allow rule lets the next matching call run without a dialog,
    the deny rule refuses; an allow rule for all of bash is not kept, and an allow rule never
    opens what asks in every mode (an edit of ``.git/``); what is not kept, or kept otherwise
    than asked, is logged."""
    env = {**agent_env, **home_env(tmp_path)}
    script = write(tmp_path / "hooks" / "updated.py", UPDATED)
    hook = command(f"{PYTHON} {script}")
    settings(tmp_path, {"PermissionRequest": [{"hooks": [hook]}]})
    (tmp_path / "project" / ".git").mkdir(parents=True)
    keep = write(tmp_path / "project" / "keep.txt", "kept\n")
    steps = [
        *bash("echo first > first.txt", "echo again and again", "rm keep.txt")[:-1],
        {"toolCalls": [{"name": "bash", "arguments": {"command": "touch unlisted"}}]},
        {"toolCalls": [{"name": "write", "arguments": {"path": ".git/hooks", "content": "x"}}]},
        {"text": "done"},
    ]
    stderr: list[str] = []
    client = await run_turn(tmp_path, env, steps, mode="ask", approve=deny, stderr=stderr)
    first, again, removed, unlisted, guarded = results(client)
    assert first["isError"] is False and again["isError"] is False
    assert again["content"][0]["text"].startswith("again and again")
    assert removed["isError"] is True and "Bash(rm:*)" in removed["content"][0]["text"]
    assert keep.exists()
    # no whole-bash rule was kept (touch asked, denied); the .git/ edit asked too
    assert [d.request["name"] for d in client.approvals] == ["bash", "write"]
    assert unlisted["isError"] is True and guarded["isError"] is True
    assert not (tmp_path / "project" / "unlisted").exists()
    assert not (tmp_path / "project" / ".git" / "hooks").exists()
    log = "\n".join(stderr)
    assert "allow rule Bash(echo again:*) kept for this session" in log
    assert "deny rule Bash(rm:*) kept for this session" in log
    assert "are for 'projectSettings'; they are kept for this session only" in log
    assert "allow rule Bash not kept: it allows all of bash without asking" in log
    assert "allow rule Write(//tmp/**) kept for this session" in log
    assert "allow rule Write(.git/**) kept for this session" in log  # it covers no .git/ edit
    assert "updatedPermissions entry of type 'setMode' is not applied here" in log
    assert "not kept here" not in log and "not honoured here" not in log


EVERY_PATH = """import json, sys
event = json.load(sys.stdin)
if event["tool_input"].get("command", "").startswith("echo first"):
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {
        "behavior": "allow", "updatedPermissions": [{"type": "addRules", "behavior": "allow",
            "destination": "session", "rules": [{"toolName": "Edit", "ruleContent": "**"},
            {"toolName": "Write", "ruleContent": "//**"}]}]}}}))
"""


async def test_a_hooks_allow_for_every_path_is_not_kept(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    """``Edit(**)`` and ``Write(//**)`` match every path: the whole tool spelled as a path,
    which a hook never adds (only a person, after the second question). The next write asks."""
    env = {**agent_env, **home_env(tmp_path)}
    script = write(tmp_path / "hooks" / "every.py", EVERY_PATH)
    settings(tmp_path, {"PermissionRequest": [{"hooks": [command(f"{PYTHON} {script}")]}]})
    steps = [
        *bash("echo first")[:-1],
        {"toolCalls": [{"name": "write", "arguments": {"path": "notes.txt", "content": "x"}}]},
        {"text": "done"},
    ]
    stderr: list[str] = []
    client = await run_turn(tmp_path, env, steps, mode="ask", approve=deny, stderr=stderr)
    first, written = results(client)
    assert first["isError"] is False
    assert [d.request["name"] for d in client.approvals] == ["write"]  # asked, denied
    assert written["isError"] is True
    assert not (tmp_path / "project" / "notes.txt").exists()
    log = "\n".join(stderr)
    assert "allow rule Edit(**) not kept: it allows every edit and write" in log
    assert "allow rule Write(//**) not kept: it allows every write" in log
