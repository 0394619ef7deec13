"""``"type": "agent"`` hooks: a read-only subagent investigates before it answers, through the
real session worker.

The faux model plays the session, and the hook's subagent by its first user message (the hook's
prompt with ``$ARGUMENTS`` replaced by the event's JSON, so the command of the call it judges):
the subagent reads a file of the project, then answers ``{"ok", "reason"}``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the hooks worker tests' helpers
sys.path.insert(0, str(Path(__file__).parents[2] / "app" / "worker"))  # worker_support
from test_hooks_worker import (  # pyright: ignore[reportMissingImports]
    command,
    home_env,
    results,
    run_turn,
    script,
    settings,
)
from worker_support import (  # pyright: ignore[reportMissingImports]
    Client,
    connected,
    deny,
    text_of,
    worker_process,
)

from chord import BACKGROUND
from coding_agent.session_files.folders import create_session
from facets_hooks.agent_hooks import HOOK_AGENT_KIND

pytestmark = pytest.mark.anyio

POLICY = "No walruses in this project (policy mark: tusked-narwhal-7)."


def agent_hook(prompt: str, **fields: Any) -> dict[str, Any]:
    return {"type": "agent", "prompt": prompt, **fields}


def bash_step(command: str) -> dict[str, Any]:
    return {"toolCalls": [{"name": "bash", "arguments": {"command": command}}]}


def investigates(when: str, verdict: dict[str, Any]) -> dict[str, Any]:
    """The hook subagent judging the call whose command holds ``when``: it reads policy.txt,
    then answers ``verdict``."""
    read = {"toolCalls": [{"name": "read", "arguments": {"path": "policy.txt"}}]}
    return {"when": when, "steps": [read, {"text": json.dumps(verdict)}]}


def stored_outside(tmp: Path, project: Path, text: str) -> bool:
    """Whether a file under ``tmp`` but outside ``project`` (the session's storage) holds
    ``text``."""
    return any(
        path.is_file() and project not in path.parents and text in path.read_text(errors="replace")
        for path in tmp.rglob("*")
    )


async def test_an_agent_hook_reads_the_project_and_its_verdict_blocks_or_lets_through(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    project = tmp_path / "project"
    project.mkdir()
    (project / "policy.txt").write_text(POLICY)
    log = tmp_path / "read-hook.log"
    guard = agent_hook("Check policy.txt: may this command run? $ARGUMENTS")
    settings(
        tmp_path,
        {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [guard]},
                # the session's hooks never run for the hook subagent's own calls
                {"matcher": "Read", "hooks": [command(f"echo read >> {log}")]},
            ]
        },
    )
    steps = {
        "steps": [
            bash_step("touch tusked-walrus.txt"),
            bash_step("touch calm-okapi.txt"),
            {"text": "done"},
        ],
        "conversations": [
            investigates("tusked-walrus", {"ok": False, "reason": "policy.txt forbids walruses"}),
            investigates("calm-okapi", {"ok": True}),
        ],
    }
    stderr: list[str] = []
    client = await run_turn(tmp_path, env, steps, stderr=stderr)
    blocked, ran = results(client)
    assert blocked["isError"] is True
    assert blocked["content"][0]["text"] == (
        "Tool call blocked: PreToolUse hook: policy.txt forbids walruses"
    )
    assert not (project / "tusked-walrus.txt").exists()
    assert ran["isError"] is False and (project / "calm-okapi.txt").exists()
    # the subagent read the file: its result is in the session's storage
    assert stored_outside(tmp_path, project, "tusked-narwhal-7")
    assert not log.exists(), log.read_text()
    assert not [line for line in stderr if "not supported" in line], stderr


async def test_an_agent_hook_that_outlives_its_timeout_gives_no_verdict(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    """Every faux answer waits 1 s; the hook waits 0.3 s: no verdict, so the dialog asks
    (fail closed, as a prompt hook's), and the log says it timed out."""
    env = {**agent_env, **home_env(tmp_path)}
    judge = agent_hook("May this run? $ARGUMENTS", timeout=0.3)
    settings(tmp_path, {"PermissionRequest": [{"matcher": "Bash", "hooks": [judge]}]})
    steps = {
        "latency": 1.0,
        "steps": [bash_step("touch slow-sloth.txt"), {"text": "done"}],
        "conversations": [investigates("slow-sloth", {"ok": False, "reason": "too late"})],
    }
    stderr: list[str] = []
    client = await run_turn(tmp_path, env, steps, mode="ask", approve=deny, stderr=stderr)
    assert [d.request["args"]["command"] for d in client.approvals] == ["touch slow-sloth.txt"]
    (result,) = results(client)
    assert result["isError"] is True and "too late" not in result["content"][0]["text"]
    assert any(
        "PermissionRequest hook `agent: May this run? $ARGUMENTS`" in line
        and "gave no verdict: it timed out after 0.3 s" in line
        for line in stderr
    ), stderr


async def test_an_agent_hook_that_is_still_looking_after_50_turns_gives_no_verdict(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    """Claude Code gives an agent hook's subagent up to 50 turns: one whose 50th answer still
    calls a tool is stopped (its 51st answer, a block, is never asked for), and the hook gives
    no verdict, so the call is left to the session's approval (auto: it runs)."""
    env = {**agent_env, **home_env(tmp_path)}
    project = tmp_path / "project"
    project.mkdir()
    (project / "policy.txt").write_text(POLICY)
    guard = agent_hook("Check policy.txt: may this command run? $ARGUMENTS")
    settings(tmp_path, {"PreToolUse": [{"matcher": "Bash", "hooks": [guard]}]})
    read = {"toolCalls": [{"name": "read", "arguments": {"path": "policy.txt"}}]}
    late = {"text": json.dumps({"ok": False, "reason": "decided too late"})}
    steps = {
        "steps": [bash_step("touch patient-walrus.txt"), {"text": "done"}],
        "conversations": [{"when": "patient-walrus", "steps": [read] * 50 + [late]}],
    }
    stderr: list[str] = []
    client = await run_turn(tmp_path, env, steps, stderr=stderr)
    (ran,) = results(client)
    assert ran["isError"] is False and (project / "patient-walrus.txt").exists()
    assert any(
        "gave no verdict: its subagent did not finish: it did not decide within 50 turns" in line
        for line in stderr
    ), stderr


async def test_a_stop_agent_hook_makes_the_model_go_on_with_its_reason(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    """On ``Stop`` (the root's turn about to end) the subagent runs beside that turn, and its
    ``ok: false`` continues it with the reason, as a prompt hook's."""
    env = {**agent_env, **home_env(tmp_path)}
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "policy.txt").write_text(POLICY)
    judge = agent_hook("Check policy.txt: has the agent finished? $ARGUMENTS")
    settings(tmp_path, {"Stop": [{"hooks": [judge]}]})
    steps = {
        "steps": [{"text": "all done"}, {"text": "the tests pass"}],
        "conversations": [
            investigates('"stop_hook_active": false', {"ok": False, "reason": "run the tests"}),
            investigates('"stop_hook_active": true', {"ok": True}),
        ],
    }
    client = await run_turn(tmp_path, env, steps)
    answers = [text_of(e) for e in client.view["entries"] if e["kind"] == "pi.assistant"]
    assert answers == ["all done", "the tests pass"]
    users = [text_of(e) for e in client.view["entries"] if e["kind"] == "pi.user"]
    assert users[-1] == "run the tests"


def answers_stored(tmp: Path, text: str) -> int:
    """How many assistant answers holding ``text`` the session's storage (under ``tmp``, one
    record a line) holds."""
    return sum(
        line.count('"pi.assistant"') * (text in line)
        for path in tmp.rglob("*.jsonl")
        for line in path.read_text(errors="replace").splitlines()
    )


async def test_an_agent_hooks_run_cut_by_a_sigkill_ends_at_once_and_the_hook_runs_again(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    """The worker dies while the hook's subagent waits on the model. After the restart the
    call's hook runs again, with a subagent of its own; the one that was cut off is resumed
    only to end at once (no hook waits for it), so only one subagent ever answers."""
    env = {**agent_env, **home_env(tmp_path)}
    project = tmp_path / "project"
    project.mkdir()
    (project / "policy.txt").write_text(POLICY)
    guard = agent_hook("Check policy.txt: may this command run? $ARGUMENTS")
    settings(tmp_path, {"PreToolUse": [{"matcher": "Bash", "hooks": [guard]}]})
    steps = {
        "latency": 1.0,
        "steps": [bash_step("echo ran >> ran.txt"), {"text": "done"}],
        "conversations": [investigates("ran.txt", {"ok": True, "reason": "verdict-mark-42"})],
    }
    session = create_session(project, env=env)
    args = ("--faux-script", str(script(tmp_path, steps)), "--permission-mode", "auto")

    def agent_runs() -> bool:
        tasks = client.view.get("tasks") or {}
        return any(t.get("kind") == HOOK_AGENT_KIND for t in tasks.values())

    client = Client()
    async with (
        worker_process(session, env, *args) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "go"}, BACKGROUND)
        await client.wait_for(agent_runs)
        await worker.kill()
    assert not (project / "ran.txt").exists()
    assert answers_stored(tmp_path, "verdict-mark-42") == 0
    client = Client()
    async with (
        worker_process(session, env, *args) as worker,
        connected(client, worker.socket),
    ):
        await client.wait_for(lambda: any(text_of(e) == "done" for e in client.view["entries"]))
    assert (project / "ran.txt").read_text() == "ran\n"
    assert answers_stored(tmp_path, "verdict-mark-42") == 1  # the new run's alone
