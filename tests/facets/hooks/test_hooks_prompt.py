"""``"type": "prompt"`` hooks: the session's own model decides, through the real session worker.

The faux model plays both the session and the hooks' one-off requests: a hook's request is told
apart by its first user message (the hook's prompt with ``$ARGUMENTS`` replaced by the event's
JSON), which the faux script's ``conversations`` match on (``when``: a text unique to that
event, such as the command of the call it judges).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from facets_hooks.prompt_hooks import PROMPT_SYSTEM, prompt_for, read_answer
from facets_hooks.settings import parse_settings

sys.path.insert(0, str(Path(__file__).parent))  # the hooks worker tests' helpers
sys.path.insert(0, str(Path(__file__).parents[2] / "app" / "worker"))  # worker_support
from test_hooks_worker import (  # pyright: ignore[reportMissingImports]
    home_env,
    results,
    run_turn,
    settings,
)
from worker_support import allow, deny, text_of  # pyright: ignore[reportMissingImports]

pytestmark = pytest.mark.anyio


def prompt_hook(prompt: str, **fields: Any) -> dict[str, Any]:
    return {"type": "prompt", "prompt": prompt, **fields}


def answer(when: str, value: Any) -> dict[str, Any]:
    """A faux conversation answering the hook request whose prompt holds ``when``."""
    text = value if isinstance(value, str) else json.dumps(value)
    return {"when": when, "steps": [{"text": text}]}


def bash_step(command: str) -> dict[str, Any]:
    return {"toolCalls": [{"name": "bash", "arguments": {"command": command}}]}


def test_the_prompt_gets_the_events_json_and_the_answer_is_read() -> None:
    payload = {"hook_event_name": "Stop", "stop_hook_active": False}
    assert prompt_for("Judge $ARGUMENTS now", payload) == (
        'Judge {"hook_event_name": "Stop", "stop_hook_active": false} now'
    )
    assert prompt_for("Judge", payload).endswith(
        '\n\n{"hook_event_name": "Stop", "stop_hook_active": false}'
    )
    assert read_answer('{"ok": true}') == (True, "")
    assert read_answer('```json\n{"ok": false, "reason": " not yet "}\n```') == (False, "not yet")
    assert read_answer("Sure! ok") == "its answer is not JSON: 'Sure! ok'"
    assert read_answer('{"ok": "yes"}') == 'its answer has no boolean "ok": \'{"ok": "yes"}\''
    assert '"ok": true' in PROMPT_SYSTEM


def test_prompt_and_agent_hooks_load_for_claude_codes_events_and_are_named_elsewhere() -> None:
    data = {
        "hooks": {
            "Stop": [{"hooks": [prompt_hook("Is the work done? $ARGUMENTS", model="haiku")]}],
            "SessionStart": [{"hooks": [prompt_hook("Greet")]}],
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "prompt"}]}],
            "PostToolUse": [{"hooks": [{"type": "agent", "prompt": "Check it", "model": 3}]}],
            "Notification": [{"hooks": [{"type": "agent", "prompt": "Tell me"}]}],
        }
    }
    hooks, problems = parse_settings(data, "s.json")
    stop, check = hooks
    assert (stop.event, stop.kind, stop.command, stop.timeout, stop.model) == (
        "Stop",
        "prompt",
        "Is the work done? $ARGUMENTS",
        30.0,
        "haiku",
    )
    assert stop.label == "prompt: Is the work done? $ARGUMENTS"
    # an agent hook: Claude Code's default timeout for it is 60 s
    assert (check.event, check.kind, check.command, check.timeout, check.model) == (
        "PostToolUse",
        "agent",
        "Check it",
        60.0,
        None,
    )
    assert check.label == "agent: Check it"
    assert problems == [
        's.json: hooks.SessionStart[0].hooks[0]: type "prompt" is not supported for SessionStart '
        "(only for PermissionRequest, PostToolUse, PostToolUseFailure, PreToolUse, Stop, "
        "SubagentStop, UserPromptSubmit, as in Claude Code); skipped",
        's.json: hooks.PreToolUse[0].hooks[0]: a prompt hook needs "prompt" (a non-empty '
        "string); skipped",
        "s.json: hooks.PostToolUse[0].hooks[0]: model must be a model name (haiku, sonnet, opus, "
        "inherit or provider/id), got 3; the session's model answers",
        's.json: hooks.Notification[0].hooks[0]: type "agent" is not supported for Notification '
        "(only for PermissionRequest, PostToolUse, PostToolUseFailure, PreToolUse, Stop, "
        "SubagentStop, UserPromptSubmit, as in Claude Code); skipped",
    ]


async def test_a_pre_tool_use_prompt_hook_blocks_what_the_model_judges_unsafe(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    guard = prompt_hook("Is this command safe to run? $ARGUMENTS")
    settings(tmp_path, {"PreToolUse": [{"matcher": "Bash", "hooks": [guard]}]})
    steps = {
        "steps": [
            bash_step("touch forbidden-zebra.txt"),
            bash_step("touch allowed-okapi.txt"),
            bash_step("touch garbled-lemur.txt"),
            {"text": "done"},
        ],
        "conversations": [
            answer("forbidden-zebra", {"ok": False, "reason": "zebras are not allowed"}),
            answer("allowed-okapi", {"ok": True}),
            answer("garbled-lemur", "I think it is fine"),
        ],
    }
    stderr: list[str] = []
    client = await run_turn(tmp_path, env, steps, stderr=stderr)
    blocked, ran, garbled = results(client)
    assert blocked["isError"] is True
    assert (
        blocked["content"][0]["text"]
        == "Tool call blocked: PreToolUse hook: zebras are not allowed"
    )
    project = tmp_path / "project"
    assert not (project / "forbidden-zebra.txt").exists()
    assert ran["isError"] is False and (project / "allowed-okapi.txt").exists()
    # no verdict is a non-blocking error, as a failing command hook's: approval (auto) decides
    assert garbled["isError"] is False
    assert any(
        "PreToolUse hook `prompt: Is this command safe to run? $ARGUMENTS`" in line
        and "gave no verdict: its answer is not JSON: 'I think it is fine'" in line
        for line in stderr
    ), stderr


async def test_a_stop_prompt_hook_makes_the_model_go_on_with_its_reason(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    judge = prompt_hook("Has the agent run the tests? $ARGUMENTS")
    settings(tmp_path, {"Stop": [{"hooks": [judge]}]})
    steps = {
        "steps": [{"text": "all done"}, {"text": "the tests pass"}],
        "conversations": [
            answer('"stop_hook_active": false', {"ok": False, "reason": "run the tests first"}),
            answer('"stop_hook_active": true', {"ok": True}),
        ],
    }
    client = await run_turn(tmp_path, env, steps)
    answers = [text_of(e) for e in client.view["entries"] if e["kind"] == "pi.assistant"]
    assert answers == ["all done", "the tests pass"]
    users = [text_of(e) for e in client.view["entries"] if e["kind"] == "pi.user"]
    assert users[-1] == "run the tests first"


async def test_a_permission_request_prompt_hook_can_deny_but_never_skips_the_dialog(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    """Its ``ok: false`` refuses the call; its ``ok: true`` (a model judging a call a model
    made) and a broken answer leave the dialog to ask."""
    env = {**agent_env, **home_env(tmp_path)}
    judge = prompt_hook("May this run? $ARGUMENTS")
    settings(tmp_path, {"PermissionRequest": [{"matcher": "Bash", "hooks": [judge]}]})
    steps = {
        "steps": [
            bash_step("touch forbidden-zebra.txt"),
            bash_step("touch allowed-okapi.txt"),
            bash_step("touch garbled-lemur.txt"),
            {"text": "done"},
        ],
        "conversations": [
            answer("forbidden-zebra", {"ok": False, "reason": "zebras are not allowed"}),
            answer("allowed-okapi", {"ok": True}),
            answer("garbled-lemur", "{not json"),
        ],
    }
    client = await run_turn(tmp_path, env, steps, mode="ask", approve=allow)
    asked = [d.request["args"]["command"] for d in client.approvals]
    assert asked == ["touch allowed-okapi.txt", "touch garbled-lemur.txt"]
    denied, ran, garbled = results(client)
    assert denied["isError"] is True
    assert denied["content"][0]["text"] == (
        "Tool call blocked: denied by PermissionRequest hook `prompt: May this run? $ARGUMENTS`: "
        "zebras are not allowed"
    )
    project = tmp_path / "project"
    assert not (project / "forbidden-zebra.txt").exists()
    assert ran["isError"] is False and garbled["isError"] is False  # the person allowed them
    # ...and a person's deny is a deny
    client = await run_turn(tmp_path, env, steps, mode="ask", approve=deny)
    assert [r["isError"] for r in results(client)] == [True, True, True]


async def test_a_prompt_hook_whose_model_outlives_its_timeout_gives_no_verdict(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    """Every faux answer waits 1 s (``latency``); the hook waits 0.2 s: no verdict, so the
    dialog asks (fail closed), and the log says it timed out."""
    env = {**agent_env, **home_env(tmp_path)}
    judge = prompt_hook("May this run? $ARGUMENTS", timeout=0.2)
    settings(tmp_path, {"PermissionRequest": [{"matcher": "Bash", "hooks": [judge]}]})
    steps = {
        "latency": 1.0,
        "steps": [bash_step("touch slow-sloth.txt"), {"text": "done"}],
        "conversations": [answer("slow-sloth", {"ok": False, "reason": "too late to count"})],
    }
    stderr: list[str] = []
    client = await run_turn(tmp_path, env, steps, mode="ask", approve=deny, stderr=stderr)
    assert [d.request["args"]["command"] for d in client.approvals] == ["touch slow-sloth.txt"]
    (result,) = results(client)
    assert result["isError"] is True and "too late" not in result["content"][0]["text"]
    assert any("gave no verdict: it timed out after 0.2 s" in line for line in stderr), stderr


async def test_a_prompt_hooks_model_answers_and_one_the_session_lacks_is_named_at_load(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    """``model`` is resolved as a subagent definition's ``model:`` is: ``faux/judge`` (a model
    the script adds) answers its hook; ``haiku`` (no such model on the faux provider) is one
    warning, and the session's model answers it; ``nope/judge`` (no such provider) and
    ``sonnet``, on an event that never fires here, are warned about when the hooks load."""
    env = {**agent_env, **home_env(tmp_path)}
    env.pop("ANTHROPIC_DEFAULT_HAIKU_MODEL", None)
    hooks = [
        prompt_hook("Judge A $ARGUMENTS", model="faux/judge"),
        prompt_hook("Judge B $ARGUMENTS", model="haiku"),
    ]
    never = [
        prompt_hook("Judge C $ARGUMENTS", model="nope/judge"),
        prompt_hook("Judge D $ARGUMENTS", model="sonnet"),
    ]
    path = settings(
        tmp_path,
        {
            "PreToolUse": [{"matcher": "Bash", "hooks": hooks}],
            "PostToolUseFailure": [{"hooks": never}],
        },
    )

    def judged(when: str, model: str, reason: str) -> list[dict[str, Any]]:
        """``ok`` from ``model``, a block naming ``reason`` from any other model."""
        return [
            {**answer(when, {"ok": True}), "model": model},
            answer(when, {"ok": False, "reason": reason}),
        ]

    steps = {
        "models": [{"id": "judge"}],
        "steps": [bash_step("touch judged-walrus.txt"), {"text": "done"}],
        "conversations": [
            *judged("Judge A", "judge", "the session's model answered A"),
            *judged("Judge B", "faux-1", "another model answered B"),
        ],
    }
    stderr: list[str] = []
    client = await run_turn(tmp_path, env, steps, stderr=stderr)
    (ran,) = results(client)
    assert ran["isError"] is False, ran
    assert (tmp_path / "project" / "judged-walrus.txt").exists()
    where = f"{path}: PreToolUse hook `prompt: Judge B $ARGUMENTS`"
    assert any(
        f"{where}: model 'haiku' has no model on provider 'faux': the hook uses the caller's "
        "(set ANTHROPIC_DEFAULT_HAIKU_MODEL=provider/id to choose one)" in line
        for line in stderr
    ), stderr
    assert any(
        f"{path}: PostToolUseFailure hook `prompt: Judge C $ARGUMENTS`: model 'nope/judge' "
        "(nope/judge) is not a model of this session: the session's model answers" in line
        for line in stderr
    ), stderr
    # an alias is checked once the new session has its model, before any hook runs
    assert any(
        f"{path}: PostToolUseFailure hook `prompt: Judge D $ARGUMENTS`: model 'sonnet' has no "
        "model on provider 'faux'" in line
        for line in stderr
    ), stderr
    assert not [line for line in stderr if "not supported" in line], stderr


async def test_a_hook_without_model_is_answered_by_the_providers_fast_model(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    """As Claude Code, a prompt hook that names no model asks a fast one: the model the
    ``haiku`` alias names (here ``ANTHROPIC_DEFAULT_HAIKU_MODEL=faux/quick``), not the session's
    ``faux-1``; nothing is warned (nobody asked for a model)."""
    env = {**agent_env, **home_env(tmp_path), "ANTHROPIC_DEFAULT_HAIKU_MODEL": "faux/quick"}
    settings(
        tmp_path, {"PreToolUse": [{"matcher": "Bash", "hooks": [prompt_hook("Fast $ARGUMENTS")]}]}
    )
    steps = {
        "models": [{"id": "quick"}],
        "steps": [bash_step("touch quick-heron.txt"), {"text": "done"}],
        "conversations": [
            {**answer("Fast", {"ok": True}), "model": "quick"},
            answer("Fast", {"ok": False, "reason": "the session's model answered"}),
        ],
    }
    stderr: list[str] = []
    client = await run_turn(tmp_path, env, steps, stderr=stderr)
    (ran,) = results(client)
    assert ran["isError"] is False, ran
    assert (tmp_path / "project" / "quick-heron.txt").exists()
    assert not [line for line in stderr if "model" in line and "hook" in line], stderr
