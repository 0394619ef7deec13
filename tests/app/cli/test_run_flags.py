"""Claude Code's run-scoped flags through the real binary, on the offline faux model
(:mod:`coding_agent.settings.run_options`): ``--allowedTools`` / ``--disallowedTools`` are rules
of this run decided as a settings file's are (the bash parser's narrowness, deny beats allow),
``--system-prompt`` / ``--append-system-prompt`` reach the model's request, ``--mcp-config``
starts its servers; bad values are one usage line and nothing runs; nothing is kept after the
run (no lingering worker holding the run's rules)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_agent.session_files.folders import load_session
from tests.app.cli._scripted import BINARY, TIMEOUT, json_entries, run_scripted

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).parents[2] / "facets" / "mcp_feature" / "mcp_server.py")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git repository with one commit, and a folder ``x`` a command might remove."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "x").mkdir()
    (folder / "x" / "keep.txt").write_text("keep\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], cwd=folder, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "first commit"], cwd=folder, check=True)  # fmt: skip
    return folder


@pytest.fixture
def env(agent_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    return {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}


async def _run(
    project: Path, env: dict[str, str], steps: Any, *args: str
) -> tuple[int, list[dict[str, Any]], list[str]]:
    """The binary's exit code, its ``--json`` entries and its stderr lines."""
    result = await run_scripted(project, env, steps, *args)
    return result.returncode, json_entries(result.stdout), result.stderr.decode().splitlines()


def _results(entries: list[dict[str, Any]]) -> list[str]:
    return [
        entry["model"][0]["content"][0]["text"]
        for entry in entries
        if entry["kind"] == "pi.tool_result"
    ]


def _bash(command: str) -> dict[str, Any]:
    return {"toolCalls": [{"name": "bash", "arguments": {"command": command}}]}


def _sessions(env: dict[str, str]) -> list[Path]:
    root = Path(env["XDG_STATE_HOME"]) / "coding-agent" / "sessions"
    return sorted(root.iterdir()) if root.is_dir() else []


async def test_an_allowed_command_runs_unasked_and_a_compound_one_is_refused(
    project: Path, env: dict[str, str]
) -> None:
    steps = [_bash("git log; rm -rf x"), _bash("git log -1 --format=%s"), {"text": "done"}]
    code, entries, errors = await _run(
        project, env, steps, "--json", "look", "--allowedTools", "Bash(git log:*)"
    )
    first, second = _results(entries)
    assert "Tool call blocked" in first  # the rule covers git log, not the rm after it
    assert (project / "x" / "keep.txt").exists()
    assert second.strip() == "first commit"  # ran unasked: the rule allowed it
    assert code == 3  # a call was blocked for lack of approval (-p asks nobody)
    (line,) = errors
    assert line.startswith("coding-agent: error: blocked the bash call (git log; rm -rf x)")


async def test_a_disallowed_tool_is_refused_even_where_an_allow_rule_matches(
    project: Path, env: dict[str, str]
) -> None:
    steps = [_bash("rm -rf x"), {"text": "done"}]
    code, entries, _errors = await _run(
        project, env, steps, "--json", "clean up",
        "--allowedTools", "Bash", "Read", "--disallowedTools=Bash(rm:*),WebFetch",
    )  # fmt: skip
    (result,) = _results(entries)
    assert "the deny rule Bash(rm:*) in command line matches" in result
    assert (project / "x" / "keep.txt").exists()
    assert code == 0  # refused by a rule, as a settings file's deny rule refuses it


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (
            ["--allowedTools", "Edit", "Bash(git * x)"],
            "--allowedTools: allow rule 'Bash(git * x)' is invalid",
        ),
        (["--disallowedTools", "Bash(rm"], "--disallowedTools: deny rule 'Bash(rm' is invalid"),
        (["--system-prompt-file", "missing.md"], "missing.md: no such file"),
        (["--append-system-prompt-file", "missing.md"], "missing.md: no such file"),
        (["--mcp-config", "{not json"], "--mcp-config (JSON): not valid JSON"),
        (["--mcp-config", '{"servers": {}}'], '--mcp-config (JSON): expected {"mcpServers"'),
        (["--mcp-config", "missing.json"], "missing.json: no such file"),
        (["--strict-mcp-config"], "--strict-mcp-config uses only the servers of --mcp-config"),
        (["--system-prompt", "a", "--system-prompt-file", "b"], "not both"),
    ],
)
async def test_a_bad_value_is_one_usage_line_and_nothing_runs(
    project: Path, env: dict[str, str], flags: list[str], says: str
) -> None:
    code, entries, errors = await _run(project, env, [_bash("rm -rf x")], "-p", "go", *flags)
    assert code == 2
    (line,) = errors
    assert line.startswith("coding-agent: error: ") and says in line, line
    assert not entries and (project / "x" / "keep.txt").exists()
    assert _sessions(env) == []  # the session made for the run went with it


async def test_the_system_prompt_flags_reach_the_model_beside_system_md(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "config" / "coding-agent"
    config.mkdir(parents=True)
    (config / "SYSTEM.md").write_text("You are a cat.\n")
    (config / "APPEND_SYSTEM.md").write_text("Always say meow.\n")
    appended = tmp_path / "append.md"
    appended.write_text("Be terse.\n")
    # the faux model answers from what the request's system prompt holds
    steps = {
        "steps": [{"text": "no flag reached me"}],
        "conversations": [
            {"when": "You are a cat", "steps": [{"text": "SYSTEM.md won"}]},
            {"when": "meow.\n\nBe terse.", "steps": [{"text": "both appended"}]},
        ],
    }
    code, entries, errors = await _run(
        project, env, steps, "--json", "hi",
        "--system-prompt", "You are a pirate.", "--append-system-prompt-file", str(appended),
    )  # fmt: skip
    assert code == 0, errors
    (system,) = [e["model"][0]["content"] for e in entries if e["kind"] == "pi.system"]
    assert system.startswith("## system\nYou are a pirate.\n") and "cat" not in system
    assert system.index("Always say meow.") < system.index("Be terse.")
    (answer,) = [e for e in entries if e["kind"] == "pi.assistant"]
    assert answer["model"][0]["content"][0]["text"] == "both appended"


async def test_mcp_config_servers_start_and_strict_leaves_the_configured_ones_out(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    configured = tmp_path / "config" / "coding-agent" / "mcp.json"
    configured.parent.mkdir(parents=True)
    broken = {"command": sys.executable, "args": [SERVER, "--fail"]}
    configured.write_text(json.dumps({"mcpServers": {"broken": broken}}))
    servers = tmp_path / "servers.json"
    echo = {"command": sys.executable, "args": [SERVER]}
    servers.write_text(json.dumps({"mcpServers": {"echo": echo}}))
    steps = [
        {"toolCalls": [{"name": "mcp__echo__echo", "arguments": {"text": "first"}}]},
        {"text": "done"},
    ]
    flags = ["--json", "go", "--mcp-config", str(servers), "--allowedTools", "mcp__echo"]
    code, entries, errors = await _run(project, env, steps, *flags)
    assert _results(entries) == ["echo: first"]  # started, offered, allowed by the rule
    assert code == 0
    (warning,) = errors  # the configured server starts too (and fails)
    assert "MCP server broken failed to start" in warning
    code, entries, errors = await _run(project, env, steps, *flags, "--strict-mcp-config")
    assert _results(entries) == ["echo: first"] and code == 0
    assert errors == []  # only --mcp-config's servers: the broken one never started


async def test_a_run_in_its_own_worker_carries_the_flags_and_leaves_no_worker_holding_them(
    project: Path, env: dict[str, str]
) -> None:
    # --wait-for-approval runs the turn in a session worker of its own, started as the TUI
    # starts one: the flags travel on the worker's command line
    steps = [_bash("git log; rm -rf x"), _bash("git log -1 --format=%s"), {"text": "done"}]
    code, entries, _errors = await _run(
        project, env, steps, "--json", "look", "--wait-for-approval", "0", "--linger", "20",
        "--allowedTools", "Bash(git log:*)",
    )  # fmt: skip
    first, second = _results(entries)
    assert "Tool call blocked" in first and second.strip() == "first commit"
    assert code == 3
    (folder,) = _sessions(env)
    # the worker went with the run: a later --continue cannot find the run's rules in force
    assert not load_session(folder).worker_running()
    assert "allowed" not in (folder / "session.json").read_text()  # stored nowhere


async def test_the_flags_refuse_a_session_whose_worker_already_runs(
    project: Path, env: dict[str, str]
) -> None:
    steps = [{"text": "done"}]
    code, _entries, _errors = await _run(
        project, env, steps, "--json", "hi", "--wait-for-approval", "0", "--linger", "600"
    )
    assert code == 0
    (folder,) = _sessions(env)
    assert load_session(folder).worker_running()  # lingering, with no flags
    pid = int((folder / "worker.lock").read_text().split()[0])
    try:
        code, _entries, errors = await _run(
            project, env, steps, "--continue", "--disallowedTools", "Bash"
        )
        assert code == 2
        (line,) = errors
        assert "--disallowedTools apply to a worker this command starts" in line
    finally:
        os.kill(pid, 15)


async def test_settings_json_denies_a_call_runs_its_hook_and_notes_what_it_does_not_read(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    marker = tmp_path / "hooked.txt"
    hook = {"type": "command", "command": f"echo hooked > {marker}"}
    settings = {
        "permissions": {"deny": ["Bash(rm:*)"]},
        "hooks": {"UserPromptSubmit": [{"hooks": [hook]}]},
        "model": "opus",
    }
    steps = [_bash("rm -rf x"), {"text": "done"}]
    code, entries, errors = await _run(
        project, env, steps, "--json", "clean up", "--settings", json.dumps(settings),
        "--permission-mode", "accept-edits",
    )  # fmt: skip
    (result,) = _results(entries)
    assert "the deny rule Bash(rm:*) in --settings (JSON) matches" in result
    assert (project / "x" / "keep.txt").exists()
    assert code == 0  # refused by its rule, as a settings file's deny rule refuses it
    assert marker.read_text() == "hooked\n"  # its hook ran, as your own settings' hooks do
    (note,) = errors  # the key it does not read: the note a settings file's `model` gets
    assert "--settings (JSON): `model`: this agent does not read Claude Code's model" in note


async def test_settings_file_rules_apply_and_nothing_is_stored(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    settings = tmp_path / "run-settings.json"
    settings.write_text(json.dumps({"permissions": {"allow": ["Bash(git log:*)"]}}))
    steps = [_bash("git log -1 --format=%s"), {"text": "done"}]
    code, entries, errors = await _run(
        project, env, steps, "--json", "look", "--settings", str(settings)
    )
    assert _results(entries) == ["first commit"] and code == 0, errors  # ran unasked
    (folder,) = _sessions(env)
    assert "run-settings" not in (folder / "session.json").read_text()
    # the script counts the conversation's answers: the next run plays its third and fourth
    again = [*steps, *steps]
    code, entries, _errors = await _run(project, env, again, "--json", "look", "--continue")
    assert "Tool call blocked" in _results(entries)[-1] and code == 3  # the next run: no rule


async def test_agents_defines_a_subagent_the_agent_tool_runs(
    project: Path, env: dict[str, str]
) -> None:
    call = {"description": "review", "prompt": "look at the diff", "subagent_type": "reviewer"}
    steps = {
        "steps": [{"toolCalls": [{"name": "agent", "arguments": call}]}, {"text": "done"}],
        # the subagent's conversation: its system prompt is the definition's prompt
        "conversations": [{"when": "You are R2D2, a reviewer.", "steps": [{"text": "R2D2 saw"}]}],
    }
    reviewer = {
        "description": "Reviews a diff",
        "prompt": "You are R2D2, a reviewer.",
        "tools": ["Read", "Grep"],
    }
    code, entries, errors = await _run(
        project, env, steps, "--json", "review it", "--agents", json.dumps({"reviewer": reviewer})
    )
    assert code == 0, errors
    assert _results(entries) == ["R2D2 saw"]


async def test_tools_leaves_the_other_built_in_tools_out_of_the_request(
    project: Path, env: dict[str, str]
) -> None:
    steps = [_bash("rm -rf x"), {"text": "done"}]
    code, entries, errors = await _run(
        project, env, steps, "--json", "go", "--tools", "Read", "--permission-mode", "auto"
    )
    assert code == 0, errors
    (system,) = [e for e in entries if e["kind"] == "pi.system"]
    tools = system["data"]["tools"]
    assert "read" in tools and not {"bash", "edit", "write", "agent"} & set(tools)
    (result,) = _results(entries)
    assert result == "Tool 'bash' was not offered to the model."  # even in auto
    assert (project / "x" / "keep.txt").exists()


async def test_tools_shapes_claude_codes_init_line_and_an_empty_value_offers_none(
    project: Path, env: dict[str, str]
) -> None:
    script = project.parent / "faux-script.json"
    script.write_text(json.dumps([{"text": "done"}]))
    for value, offered in (("Read,Grep", {"Read", "Grep"}), ("", set())):
        with anyio.fail_after(TIMEOUT):
            result = await anyio.run_process(
                [str(BINARY), "--faux-script", str(script), "-p", "hi",
                 "--output-format", "stream-json", f"--tools={value}"],
                env=env, cwd=project, check=False, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        assert result.returncode == 0, result.stderr
        init = json.loads(result.stdout.decode().splitlines()[0])
        builtin = {"Bash", "Read", "Edit", "Write", "Glob", "Grep", "LS", "WebFetch", "Task"}
        assert set(init["tools"]) & builtin == offered, init["tools"]


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--settings", "{not json"], "--settings (JSON): not valid JSON"),
        (["--settings", "missing.json"], "missing.json: no such file"),
        (["--settings", '{"permissions": {"deny": "Bash"}}'], "`permissions.deny` must be a list"),
        (["--agents", "{not json"], "--agents (JSON): not valid JSON"),
        (["--agents", '{"r": {"description": "d"}}'], '--agents: "r" needs "prompt"'),
        (["--tools", "Bash,Frobnicate"], "--tools: unknown tool 'Frobnicate'"),
    ],
)
async def test_a_bad_settings_agents_or_tools_value_is_one_usage_line(
    project: Path, env: dict[str, str], flags: list[str], says: str
) -> None:
    code, entries, errors = await _run(project, env, [_bash("rm -rf x")], "-p", "go", *flags)
    assert code == 2
    (line,) = errors
    assert line.startswith("coding-agent: error: ") and says in line, line
    assert not entries and (project / "x" / "keep.txt").exists()
    assert _sessions(env) == []


async def test_a_blocked_call_names_the_allowed_tools_rule_that_runs_it(
    project: Path, env: dict[str, str]
) -> None:
    """A ``claude -p`` script's fix for a refused call is a rule, not every call allowed: the
    blocked line names the narrowest ``--allowedTools`` rule first (the plain command exactly,
    the tool's Claude Code name), and that rule, given, runs the call; a compound command gets
    no rule (one would not parse), only the broader ways."""
    write = {"toolCalls": [{"name": "write", "arguments": {"path": "n.md", "content": "hi\n"}}]}
    steps = [_bash("touch made.txt"), _bash("touch a; rm -rf x"), write, {"text": "done"}]
    code, _entries, errors = await _run(project, env, steps, "--json", "go")
    assert code == 3
    made, compound, wrote = errors
    assert "allow it with --allowedTools 'Bash(touch made.txt)', --approve allow" in made, made
    assert "--allowedTools" not in compound and "allow it with --approve allow" in compound
    assert "allow it with --allowedTools Write, --approve allow" in wrote, wrote
    assert not (project / "made.txt").exists()

    code, _entries, errors = await _run(
        project, env, [_bash("touch made.txt"), {"text": "done"}], "--json", "go",
        "--allowedTools", "Bash(touch made.txt)",
    )  # fmt: skip
    assert (code, errors) == (0, [])
    assert (project / "made.txt").exists()  # the named rule ran it
