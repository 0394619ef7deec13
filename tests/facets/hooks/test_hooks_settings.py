"""Hooks settings as Claude Code users write them, matchers, tool names and verdicts (issue 39,
item 4): real files in a temporary HOME, no worker."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from facets_hooks.protocol import HookRun, claude_tool, run_command, tool_names
from facets_hooks.settings import load_hooks, parse_settings, plugin_hooks
from facets_hooks.tui import hooks_text
from facets_hooks.verdicts import (
    post_notes,
    pre_verdict,
    prompt_verdict,
    replaced_output,
    stop_continuation,
)


def write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def env_for(tmp: Path) -> dict[str, str]:
    return {"HOME": str(tmp / "home"), "XDG_CONFIG_HOME": str(tmp / "config")}


def group(matcher: str | None, *commands: str, **extra: Any) -> dict[str, Any]:
    found: dict[str, Any] = {
        "hooks": [{"type": "command", "command": c, **extra} for c in commands]
    }
    if matcher is not None:
        found["matcher"] = matcher
    return found


def test_files_load_in_order_and_a_project_only_when_trusted(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    user = write(tmp_path / "home/.claude/settings.json", {"hooks": {"Stop": [group(None, "u")]}})
    ours = write(
        tmp_path / "config/coding-agent/hooks.json", {"hooks": {"Stop": [group(None, "o")]}}
    )
    project = tmp_path / "project"
    shared = write(project / ".claude/settings.json", {"hooks": {"Stop": [group(None, "p")]}})
    local = write(project / ".claude/settings.local.json", {"hooks": {"Stop": [group("", "l")]}})
    trusted = load_hooks(env=env, project=project, project_trusted=True)
    assert [(h.command, h.source) for h in trusted.hooks] == [
        ("u", str(user)),
        ("o", str(ours)),
        ("p", str(shared)),
        ("l", str(local)),
    ]
    assert trusted.problems == () and trusted.waiting == ()
    untrusted = load_hooks(env=env, project=project, project_trusted=False)
    assert [h.command for h in untrusted.hooks] == ["u", "o"]
    assert untrusted.waiting == (str(shared), str(local))


def test_claude_config_dir_is_where_the_user_settings_are(tmp_path: Path) -> None:
    elsewhere = write(tmp_path / "cc/settings.json", {"hooks": {"Stop": [group(None, "x")]}})
    write(tmp_path / "home/.claude/settings.json", {"hooks": {"Stop": [group(None, "home")]}})
    env = {**env_for(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "cc")}
    assert [(h.command, h.source) for h in load_hooks(env=env).hooks] == [("x", str(elsewhere))]


def test_a_project_at_home_reads_its_claude_settings_once(tmp_path: Path) -> None:
    write(tmp_path / "home/.claude/settings.json", {"hooks": {"Stop": [group(None, "once")]}})
    found = load_hooks(env=env_for(tmp_path), project=tmp_path / "home", project_trusted=False)
    assert [h.command for h in found.hooks] == ["once"] and found.waiting == ()


def test_every_problem_is_named_with_its_file_and_the_rest_loads(tmp_path: Path) -> None:
    data = {
        "permissions": {"allow": ["Bash(ls:*)"]},
        "hooks": {
            "PreToolUse": [
                group("Edit|Write", "fmt"),
                group("(", "never"),
                {"matcher": "Bash"},
                group("Bash", "slow", timeout="ten"),
            ],
            "PostToolUse": [{"matcher": "*", "hooks": [{"type": "mcp_tool", "tool": "judge"}]}],
            "Stop": [group(None, "")],
            "BeforeAnything": [group(None, "x")],
        },
    }
    hooks, problems = parse_settings(data, "s.json")
    assert [(h.event, h.matcher, h.command, h.timeout) for h in hooks] == [
        ("PreToolUse", "Edit|Write", "fmt", 60.0),
        ("PreToolUse", "Bash", "slow", 60.0),
    ]
    assert problems == [
        "s.json: hooks.PreToolUse[1]: matcher '(' is not a regular expression (missing ), "
        "unterminated subpattern at position 0); skipped",
        's.json: hooks.PreToolUse[2]: expected {"matcher": ..., "hooks": [...]}; skipped',
        "s.json: hooks.PreToolUse[3].hooks[0]: timeout must be a positive number of seconds, "
        'got "ten"; it runs with the default 60 s',
        's.json: hooks.PostToolUse[0].hooks[0]: an mcp_tool hook needs "server" (an MCP server '
        "name, as /mcp lists it); skipped",
        's.json: hooks.Stop[0].hooks[0]: "command" must be a non-empty string; skipped',
        "s.json: hooks.BeforeAnything: unknown event (known: PreToolUse, PostToolUse, "
        "UserPromptSubmit, Stop, SubagentStop, SessionStart, SessionEnd, PreCompact, "
        "Notification, PostToolUseFailure, PermissionRequest); skipped",
    ]


def test_what_is_not_honoured_is_named_each_time_with_what_happens_instead() -> None:
    """Claude Code's 2026 events this agent does not run, matchers it does not honour and
    entry fields it ignores are each one precise problem line, never silence."""
    data = {
        "hooks": {
            "PermissionDenied": [group("Bash", "denied.sh")],
            "PermissionRequest": [group("Bash", "answer.sh")],
            "SubagentStart": [group(None, "start.sh")],
            "Notification": [group("idle_prompt", "ding.sh")],
            "PreToolUse": [
                {
                    "matcher": "Bash",
                    "hooks": [
                        {
                            "type": "command",
                            "command": "guard.sh",
                            "if": "Bash(rm *)",
                            "async": True,
                            "once": False,
                            "statusMessage": "Checking…",
                        }
                    ],
                }
            ],
            "PostToolUseFailure": [group("Bash", "explain.sh")],
            "SessionStart": [group("compact", "reinject.sh"), group("startup|clear", "s.sh")],
        }
    }
    hooks, problems = parse_settings(data, "s.json")
    assert [(h.event, h.command) for h in hooks] == [
        ("PermissionRequest", "answer.sh"),
        ("Notification", "ding.sh"),
        ("PreToolUse", "guard.sh"),
        ("PostToolUseFailure", "explain.sh"),
        ("SessionStart", "reinject.sh"),
        ("SessionStart", "s.sh"),
    ]
    assert hooks[3].matches(tool_names("bash", {})) and not hooks[3].matches(("Read",))
    assert hooks[0].matches(tool_names("bash", {})) and not hooks[0].matches(("Read",))
    assert problems == [
        "s.json: hooks.PermissionDenied: not run by this agent (nothing reports a denied call "
        "to hooks here); skipped",
        "s.json: hooks.SubagentStart: not run by this agent (a subagent starts without hooks "
        "here (SubagentStop runs when it ends)); skipped",
        "s.json: hooks.Notification[0]: matcher 'idle_prompt' is not honoured for Notification "
        "here; its hooks run for every Notification",
        "s.json: hooks.PreToolUse[0].hooks[0]: 'if' is not supported here: the hook runs for "
        "every call its matcher takes (its own checks decide)",
        "s.json: hooks.PreToolUse[0].hooks[0]: 'async' is not supported here: it runs before the "
        "call goes on, as a synchronous hook, and its exit 2 blocks",
        "s.json: hooks.SessionStart[0]: matcher 'compact' takes none of startup, resume, the "
        "only SessionStart sources here (no SessionStart after /new or a compaction); its hooks "
        "never run",
    ]


def test_a_broken_file_is_named_with_line_and_column(tmp_path: Path) -> None:
    bad = write(tmp_path / "home/.claude/settings.json", '{"hooks": {\n  "Stop": [,]}}')
    found = load_hooks(env=env_for(tmp_path))
    assert found.hooks == ()
    assert found.problems == (
        f"{bad}:2:12: not valid JSON (Expecting value); its hooks are not loaded",
    )


def matcher(pattern: str) -> Any:
    (hook,), _ = parse_settings({"hooks": {"PreToolUse": [group(pattern, "c")]}}, "s")
    return hook


def test_matchers_take_our_tools_by_claude_codes_names() -> None:
    edit_write = matcher("Edit|Write")
    assert edit_write.matches(tool_names("edit", {})) and edit_write.matches(
        tool_names("write", {})
    )
    assert not edit_write.matches(tool_names("bash", {}))
    assert matcher("MultiEdit").matches(tool_names("edit", {}))
    assert matcher("Glob").matches(tool_names("find", {}))
    assert matcher("LS").matches(tool_names("ls", {}))
    # the tools Claude Code names otherwise: web, todo, subagents, background commands
    assert matcher("WebFetch").matches(tool_names("web_fetch", {}))
    assert matcher("WebSearch").matches(tool_names("web_search", {}))
    assert matcher("TodoWrite").matches(tool_names("todo", {}))
    assert matcher("Task").matches(tool_names("agent", {}))
    assert matcher("Agent").matches(tool_names("agent", {}))
    assert matcher("BashOutput").matches(tool_names("job_output", {}))
    assert matcher("KillShell").matches(tool_names("job_kill", {}))
    assert not matcher("Bash").matches(tool_names("job_output", {}))  # a whole name
    assert [claude_tool(t, {}, "/p")[0] for t in ("web_fetch", "todo", "agent", "job_kill")] == [
        "WebFetch",
        "TodoWrite",
        "Task",
        "KillShell",
    ]
    assert not matcher("Bash").matches(("BashOutput",))  # a whole name, as Claude Code
    assert matcher("mcp__github__.*").matches(tool_names("mcp__github__get_issue", {}))
    assert matcher("*").matches(tool_names("anything", {}))
    assert matcher("").matches(tool_names("anything", {}))


def test_tool_input_uses_claude_codes_field_names(tmp_path: Path) -> None:
    cwd = str(tmp_path)
    assert claude_tool("read", {"path": "a.py", "offset": 3}, cwd) == (
        "Read",
        {"file_path": str(tmp_path / "a.py"), "offset": 3},
    )
    assert claude_tool("edit", {"path": "a.py", "oldText": "x", "newText": "y"}, cwd) == (
        "Edit",
        {"file_path": str(tmp_path / "a.py"), "old_string": "x", "new_string": "y"},
    )
    edits = [{"oldText": "a", "newText": "b"}, {"oldText": "c", "newText": "d"}]
    assert claude_tool("edit", {"path": "/x/a.py", "edits": edits}, cwd) == (
        "MultiEdit",
        {
            "file_path": "/x/a.py",
            "edits": [
                {"old_string": "a", "new_string": "b"},
                {"old_string": "c", "new_string": "d"},
            ],
        },
    )
    assert claude_tool("bash", {"command": "ls", "background": True}, cwd) == (
        "Bash",
        {"command": "ls", "run_in_background": True},
    )
    assert claude_tool("find", {"pattern": "*.py"}, cwd) == ("Glob", {"pattern": "*.py"})
    assert claude_tool("mcp__s__t", {"q": 1}, cwd) == ("mcp__s__t", {"q": 1})


def ok(output: Any) -> HookRun:
    return HookRun(0, json.dumps(output) if not isinstance(output, str) else output, "")


def test_pre_tool_use_verdicts_only_ever_restrict() -> None:
    allow = {"hookSpecificOutput": {"permissionDecision": "allow"}}
    assert pre_verdict(ok(allow)) == {"block": ""}  # approval still decides
    assert pre_verdict(ok({"decision": "approve"})) == {"block": ""}
    ask = {"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "r"}}
    assert pre_verdict(ok(ask))["block"].startswith("A PreToolUse hook asks the user to confirm")
    assert pre_verdict(ok({"decision": "block", "reason": "no"})) == {
        "block": "PreToolUse hook denied it: no"
    }
    assert pre_verdict(ok({"continue": False, "stopReason": "halt"})) == {
        "block": "PreToolUse hook stopped it: halt"
    }
    assert pre_verdict(HookRun(1, "", "oops")) == {"block": ""}  # non-blocking error
    assert pre_verdict(HookRun(None, "", "", timed_out=True)) == {"block": ""}
    assert pre_verdict(HookRun(2, "", "")) == {
        "block": "PreToolUse hook: (the hook gave no reason on stderr)"
    }
    same = {"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"a": 1}}}
    assert pre_verdict(ok(same), {"a": 1}) == {"block": ""}
    assert pre_verdict(ok(same), {"a": 2})["block"].startswith(
        "A PreToolUse hook rewrote this call's input (updatedInput)"
    )


def test_other_events_verdicts() -> None:
    assert post_notes(HookRun(2, "", "lint failed\n")) == ["PostToolUse hook feedback: lint failed"]
    context = {"hookSpecificOutput": {"additionalContext": "ctx"}}
    assert post_notes(ok(context)) == ["PostToolUse hook additional context: ctx"]
    assert replaced_output(ok(context)) is None
    assert replaced_output(ok({"hookSpecificOutput": {"updatedToolOutput": "short"}})) == "short"
    mcp = {"updatedMCPToolOutput": {"content": [{"type": "text", "text": "a"}]}}
    assert replaced_output(ok({"hookSpecificOutput": mcp})) == "a"
    other = {"updatedMCPToolOutput": {"rows": 2}}
    assert replaced_output(ok({"hookSpecificOutput": other})) == '{"rows": 2}'
    assert post_notes(ok(context), "PostToolUseFailure") == [
        "PostToolUseFailure hook additional context: ctx"
    ]
    assert prompt_verdict(ok("plain words\n")) == {"context": "plain words", "blocked": ""}
    assert prompt_verdict(ok({"decision": "block", "reason": "no"})) == {
        "context": "",
        "blocked": "no",
    }
    assert stop_continuation(HookRun(2, "", "run the tests")) == "run the tests"
    assert stop_continuation(ok({"decision": "block", "reason": "not yet"})) == "not yet"
    assert stop_continuation(ok({"decision": "block", "reason": "x", "continue": False})) == ""


def test_hooks_text_lists_event_matcher_command_source_and_what_waits() -> None:
    text = hooks_text(
        {
            "hooks": [
                {
                    "event": "Notification",
                    "matcher": "",
                    "command": "notify-send hi",
                    "timeout": 5.0,
                    "source": "/h/.claude/settings.json",
                }
            ],
            "problems": [],
            "waiting": ["/p/.claude/settings.json"],
        }
    )
    assert text == (
        "Notification: notify-send hi\n"
        "    timeout 5 s · /h/.claude/settings.json\n"
        "\n"
        "Waiting for /trust (and a restart):\n"
        "  /p/.claude/settings.json"
    )


@pytest.mark.anyio
async def test_a_hook_that_reads_no_input_of_a_large_payload_still_times_out(
    tmp_path: Path,
) -> None:
    payload = {"tool_response": {"content": "x" * (1 << 20)}}  # more than a pipe holds
    with anyio.fail_after(60):
        run = await run_command(
            "sleep 120", payload, env=dict(os.environ), cwd=str(tmp_path), seconds=1
        )
    assert run.timed_out and run.exit_code is None


@pytest.mark.anyio
async def test_a_hook_reads_its_json_and_its_exit_code_and_output_are_kept(
    tmp_path: Path,
) -> None:
    run = await run_command(
        "cat; echo oops >&2; exit 3",
        {"hook_event_name": "Stop"},
        env=dict(os.environ),
        cwd=str(tmp_path),
        seconds=30,
    )
    assert run == HookRun(3, '{"hook_event_name": "Stop"}', "oops\n")


REAL_PLUGIN = Path(__file__).parents[2] / "app/fixtures/claude_plugins/explanatory-output-style"
"""A real published plugin (anthropics/claude-plugins-official, Apache-2.0)."""


def test_a_plugins_hooks_load_after_the_settings_with_their_plugin_root(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    inline = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo stop"}]}]}}
    plugins = [
        {"root": str(REAL_PLUGIN), "hooks": [str(REAL_PLUGIN / "hooks/hooks.json")]},
        {"root": str(tmp_path), "hooks": [inline, str(broken)]},
        "not a plugin",
    ]
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    loaded = load_hooks(env=env, plugins=plugins)
    start, stop = loaded.hooks
    assert (start.event, start.command) == (
        "SessionStart", 'bash "${CLAUDE_PLUGIN_ROOT}/hooks-handlers/session-start.sh"'
    )  # fmt: skip
    assert start.source == str(REAL_PLUGIN / "hooks/hooks.json")
    assert start.environ({"PATH": "/bin"}) == {
        "PATH": "/bin", "CLAUDE_PLUGIN_ROOT": str(REAL_PLUGIN)
    }  # fmt: skip
    assert stop.source == str(tmp_path / ".claude-plugin/plugin.json")
    assert stop.environ({"PATH": "/bin"}) == {"PATH": "/bin", "CLAUDE_PLUGIN_ROOT": str(tmp_path)}
    assert loaded.problems == (
        f"{broken}:1:2: not valid JSON (Expecting property name enclosed in double quotes); "
        "its hooks are not loaded",
    )
    assert plugin_hooks(None, []) == []


def test_a_runs_settings_load_after_the_files_under_their_source(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    user = write(tmp_path / "home/.claude/settings.json", {"hooks": {"Stop": [group(None, "u")]}})
    given = {
        "source": "--settings (JSON)",
        "settings": {"hooks": {"Stop": [group(None, "run")], "Nope": [group(None, "x")]}},
    }
    found = load_hooks(env=env, given=given)
    assert [(h.command, h.source) for h in found.hooks] == [
        ("u", str(user)),
        ("run", "--settings (JSON)"),
    ]
    (problem,) = found.problems  # what a file gets for an event it does not know
    assert problem.startswith("--settings (JSON): ") and "Nope" in problem
