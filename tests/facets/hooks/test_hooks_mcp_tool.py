"""``"type": "mcp_tool"`` hooks against a real stdio MCP server (``mcp_feature/mcp_server.py``,
built with the ``mcp`` SDK), run by a real session worker with the scripted model: the hook's
tool is called through the MCP feature's ``mcp.hook-tools`` service with the event's fields
substituted into its input, and its text is read as a command hook's stdout. A server the
session does not run is a hook failure: it blocks with ``"onFailure": "block"``, else the call
goes on and the user is warned."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord import BACKGROUND, create_facet_host, define_facet, define_service
from facets_hooks.contract import HooksListing
from facets_hooks.mcp_hooks import substitute
from facets_hooks.session import session_facet as hooks_facet
from facets_hooks.settings import parse_settings
from pico3 import HarnessOptions, MemoryStorage, Models, harness_session_facet
from pico3.models.faux import FauxProvider

sys.path.insert(0, str(Path(__file__).parent))
from test_hooks_worker import (  # pyright: ignore[reportMissingImports]
    ScriptedTui,
    home_env,
    results,
    run_turn,
    settings,
    write,
)

SERVER = str(Path(__file__).parents[1] / "mcp_feature" / "mcp_server.py")
BASH = [{"toolCalls": [{"name": "bash", "arguments": {"command": "echo ran > marker"}}]}]


def mcp_config(tmp: Path) -> None:
    """The user's MCP servers: ``policy``, the test server over stdio."""
    servers = {"policy": {"command": sys.executable, "args": [SERVER, "--name", "policy"]}}
    write(tmp / "config" / "coding-agent" / "mcp.json", json.dumps({"mcpServers": servers}))


def verdict_hook(decision: str, reason: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "mcp_tool",
        "server": "policy",
        "tool": "verdict",
        "input": {"decision": decision, "reason": reason},
        **extra,
    }


async def bash_turn(
    tmp: Path,
    env: dict[str, str],
    hook: dict[str, Any],
    stderr: list[str],
    tui: ScriptedTui | None = None,
) -> tuple[Path, dict[str, Any]]:
    source = settings(tmp, {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]})
    client = await run_turn(tmp, env, [*BASH, {"text": "done"}], stderr=stderr, tui=tui)
    (result,) = results(client)
    return source, result


@pytest.mark.anyio
async def test_an_mcp_tool_guard_that_denies_bash_keeps_the_marker_uncreated_and_sees_the_input(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    mcp_config(tmp_path)
    hook = verdict_hook("deny", "policy refuses `${tool_input.command}` in ${cwd}")
    stderr: list[str] = []
    _source, result = await bash_turn(tmp_path, env, hook, stderr)
    text = result["content"][0]["text"]
    assert result["isError"] is True, (text, stderr)
    project = tmp_path / "project"
    # the tool saw the event's fields, substituted into its input
    assert f"policy refuses `echo ran > marker` in {project}" in text, text
    assert not (project / "marker").exists()


@pytest.mark.anyio
async def test_an_mcp_tool_guard_that_allows_lets_bash_run(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    mcp_config(tmp_path)
    # onFailure block: had the call not reached the tool and answered, Bash would be blocked
    hook = verdict_hook("allow", "fine for ${tool_name}", onFailure="block")
    stderr: list[str] = []
    tui = ScriptedTui()
    source, result = await bash_turn(tmp_path, env, hook, stderr, tui)
    assert result["isError"] is False, result
    assert (tmp_path / "project" / "marker").read_text() == "ran\n"
    # /hooks, in the TUI process: the server, the tool and the input as written
    assert tui.shown == [
        (
            "Hooks",
            ["close"],
            "PreToolUse [Bash]: mcp_tool policy verdict\n"
            f"    timeout 60 s · onFailure block · {source}\n"
            '    input {"decision": "allow", "reason": "fine for ${tool_name}"}',
        )
    ]


@pytest.mark.anyio
async def test_an_mcp_tool_hook_on_a_server_the_session_does_not_run_blocks_with_block(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    mcp_config(tmp_path)
    hook = {"type": "mcp_tool", "server": "nowhere", "tool": "verdict", "onFailure": "block"}
    stderr: list[str] = []
    source, result = await bash_turn(tmp_path, env, hook, stderr)
    text = result["content"][0]["text"]
    said = (
        f"PreToolUse hook `mcp_tool nowhere verdict` ({source}) failed and its onFailure is "
        "\"block\", so this was blocked: MCP server 'nowhere' is not one this session runs "
        "(its servers: policy)"
    )
    assert result["isError"] is True and said in text, text
    assert any(said in line for line in stderr), stderr
    assert not (tmp_path / "project" / "marker").exists()


@pytest.mark.anyio
async def test_an_mcp_tool_hook_on_a_missing_server_with_continue_lets_bash_run_and_warns(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    mcp_config(tmp_path)
    hook = {"type": "mcp_tool", "server": "nowhere", "tool": "verdict", "onFailure": "continue"}
    stderr: list[str] = []
    source, result = await bash_turn(tmp_path, env, hook, stderr)
    assert result["isError"] is False, result
    assert (tmp_path / "project" / "marker").read_text() == "ran\n"
    warned = (
        f"PreToolUse hook `mcp_tool nowhere verdict` ({source}) failed: MCP server 'nowhere' is "
        "not one this session runs (its servers: policy)"
    )
    assert any(warned in line for line in stderr), stderr


@pytest.mark.anyio
async def test_a_timeout_an_unknown_tool_and_the_tools_error_are_failures_that_block(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    env = {**agent_env, **home_env(tmp_path)}
    mcp_config(tmp_path)

    def guard(tool: str, **extra: Any) -> dict[str, Any]:
        return {"type": "mcp_tool", "server": "policy", "tool": tool, "onFailure": "block", **extra}

    source = settings(
        tmp_path,
        {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [guard("hang", timeout=2)]},
                {"matcher": "Write", "hooks": [guard("nosuch")]},
                {"matcher": "LS", "hooks": [guard("boom")]},
            ]
        },
    )
    steps = [
        *BASH,
        {"toolCalls": [{"name": "write", "arguments": {"path": "w.txt", "content": "w"}}]},
        {"toolCalls": [{"name": "ls", "arguments": {}}]},
        {"text": "done"},
    ]
    client = await run_turn(tmp_path, env, steps)
    bash, written, listed = results(client)
    where = f'({source}) failed and its onFailure is "block", so this was blocked: '
    expected = [
        (bash, f"`mcp_tool policy hang` {where}it timed out after 2 s"),
        (written, f"`mcp_tool policy nosuch` {where}MCP server 'policy' has no tool 'nosuch'"),
        (listed, f"`mcp_tool policy boom` {where}policy/boom answered with an error: "),
    ]
    for result, said in expected:
        text = result["content"][0]["text"]
        assert result["isError"] is True and said in text, (said, text)
    project = tmp_path / "project"
    assert not (project / "marker").exists() and not (project / "w.txt").exists()


def test_the_input_is_filled_from_the_events_fields_keeping_a_whole_values_type() -> None:
    payload = {"cwd": "/p", "tool_input": {"command": "ls", "timeout": 5}, "tool_name": "Bash"}
    template = {
        "command": "${tool_input.command}",
        "timeout": "${tool_input.timeout}",
        "line": "${tool_name} ran `${tool_input.command}` (${tool_input.timeout} s) in ${cwd}",
        "list": ["${tool_name}", "${tool_input.missing}"],
        "kept": 3,
    }
    assert substitute(template, payload) == {
        "command": "ls",
        "timeout": 5,
        "line": "Bash ran `ls` (5 s) in /p",
        "list": ["Bash", ""],
        "kept": 3,
    }


def test_mcp_tool_hooks_load_and_a_bad_one_is_named() -> None:
    data = {
        "hooks": {
            "PostToolUse": [{"hooks": [{"type": "mcp_tool", "server": "s", "tool": "t"}]}],
            "Stop": [{"hooks": [{"type": "mcp_tool", "server": "s", "tool": "t", "input": []}]}],
            "SessionEnd": [{"hooks": [{"type": "mcp_tool", "server": "s", "tool": "t"}]}],
        }
    }
    (hook,), problems = parse_settings(data, "s.json")
    assert (hook.kind, hook.label, hook.timeout) == ("mcp_tool", "mcp_tool s t", 60.0)
    assert problems == [
        's.json: hooks.Stop[0].hooks[0]: an mcp_tool hook\'s "input" must be an object; skipped',
        "s.json: hooks.SessionEnd[0].hooks[0]: an mcp_tool hook cannot run at SessionEnd here "
        '(the worker is leaving and its MCP servers with it); use a "command" hook; skipped',
    ]


@pytest.mark.anyio
async def test_an_optional_observation_starts_without_a_provider_and_follows_one() -> None:
    """chord's optional dependency: the hooks feature observes ``mcp.hook-tools`` so, and a
    host without the MCP feature starts; with it, the instance reaches the observer."""
    service = define_service("test.optional.tools", local=True)
    seen: list[str] = []
    got = anyio.Event()

    def observer(env: Any) -> None:
        def handle(instance: Any, _ctx: Any) -> None:
            seen.append(instance.name)
            got.set()

        env.observe(service, handle, optional=True)

    class Tools:
        name = "tools"

    def provider(env: Any) -> None:
        spawner = env.provide_many(service)
        env.on_activate(lambda: env.own(spawner.spawn("session", Tools())))

    async with create_facet_host([define_facet("observer", observer)]) as host:
        assert host.phase == "active" and seen == []
    async with create_facet_host(
        [define_facet("observer", observer), define_facet("provider", provider)]
    ):
        with anyio.fail_after(30):
            await got.wait()
    assert seen == ["tools"]


@pytest.mark.anyio
async def test_without_the_mcp_feature_the_session_starts_and_hooks_says_the_hook_fails(
    tmp_path: Path,
) -> None:
    """A session of the harness and the hooks feature, no MCP feature: the host starts (the
    hooks feature observes ``mcp.hook-tools`` optionally), and ``/hooks`` lists the hook with
    a note that each of its calls fails (a failure: a block with ``onFailure: block``)."""
    home = tmp_path / "home"
    hook = {"type": "mcp_tool", "server": "policy", "tool": "verdict", "onFailure": "block"}
    write(
        home / ".claude" / "settings.json",
        json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]}}),
    )
    options = HarnessOptions(
        services={
            "models": Models([FauxProvider([])]),
            "workspace": str(tmp_path),
            "project_root": str(tmp_path),
            "mcp_env": {"HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude")},
        }
    )
    listings: list[Any] = []
    summary: Any = None

    def listing(env: Any) -> None:
        listings.append(env.use(HooksListing))

    async with anyio.create_task_group() as group:
        harness = harness_session_facet(MemoryStorage, options, task_group=group)
        facets = [harness, hooks_facet, define_facet("test/listing", listing)]
        async with create_facet_host(facets):
            with anyio.fail_after(60):
                summary = await listings[0].summary(BACKGROUND)
        group.cancel_scope.cancel()
    (info,) = summary["hooks"]
    assert (info["command"], info["onFailure"]) == ("mcp_tool policy verdict", "block")
    assert info["note"] == (
        "the MCP feature (facets-mcp) is not loaded in this session: each call fails"
    )
