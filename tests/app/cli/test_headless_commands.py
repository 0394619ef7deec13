"""``-p "/greet Bob"`` expands the template as Claude Code and pi do (issue 39 deliver 2), through
the real binary: a command from ``~/.claude/commands`` (``$CLAUDE_CONFIG_DIR``), namespaced
sub-folders, ``!`cmd``` only with ``--approve allow`` or ``allowed-tools``, and skills."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from tests.app.cli._scripted import run_scripted

pytestmark = pytest.mark.anyio


def _user_message(stdout: bytes) -> str:
    lines = [json.loads(line) for line in stdout.decode().splitlines()]
    (user,) = [
        line["entry"] for line in lines
        if line["type"] == "entry.added" and line["entry"]["kind"] == "pi.user"
    ]  # fmt: skip
    content = user["model"][0]["content"]
    return content if isinstance(content, str) else "".join(b["text"] for b in content)


async def _run(
    project: Path, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[bytes]:
    return await run_scripted(project, env, [{"text": "ok"}], *args)


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


async def test_a_claude_code_command_is_expanded_with_the_arguments_as_typed(
    project: Path, agent_env: dict[str, str], commands: Path
) -> None:
    (commands / "greet.md").write_text(
        "---\nargument-hint: [name] [mood]\n---\nGreet $1 warmly. Everything: $ARGUMENTS\n"
    )
    (commands / "git").mkdir()
    (commands / "git" / "summary.md").write_text("Summarise the branch $1.\n")
    result = await _run(project, agent_env, "--json", '/greet Bob "very  happy"')
    assert result.returncode == 0, result.stderr.decode()
    assert _user_message(result.stdout) == 'Greet Bob warmly. Everything: Bob "very  happy"'
    result = await _run(project, agent_env, "--json", "/git:summary main")
    assert _user_message(result.stdout) == "Summarise the branch main."
    # A prompt that only looks like a command is sent as written.
    result = await _run(project, agent_env, "--json", "/etc/hosts looks odd")
    assert _user_message(result.stdout) == "/etc/hosts looks odd"


async def test_a_commands_shell_command_runs_only_when_allowed(
    project: Path, agent_env: dict[str, str], commands: Path
) -> None:
    (commands / "status.md").write_text("State:\n!`echo ran > marker.txt; echo fine`\nAnswer.\n")
    result = await _run(project, agent_env, "--json", "/status")
    assert result.returncode == 3
    assert result.stderr.decode() == (
        f"coding-agent: error: /status runs `echo ran > marker.txt; echo fine` first "
        f"({commands / 'status.md'}), and -p/--json asks nobody; allow it with --approve allow, "
        "--permission-mode auto, an allow rule Bash(echo:*) in your settings, or with "
        "allowed-tools: Bash(echo:*) in the template\n"
    )
    assert not (project / "marker.txt").exists()
    result = await _run(project, agent_env, "--approve", "allow", "--json", "/status")
    assert result.returncode == 0, result.stderr.decode()
    assert _user_message(result.stdout) == "State:\nfine\nAnswer."
    assert (project / "marker.txt").read_text() == "ran\n"
    (commands / "branch.md").write_text(
        "---\nallowed-tools: Bash(git branch:*)\n---\nOn !`git branch --show-current`.\n"
    )
    await anyio.run_process(["git", "init", "-q", "-b", "trunk"], cwd=project)
    result = await _run(project, agent_env, "--json", "/branch")
    assert result.returncode == 0, result.stderr.decode()
    assert _user_message(result.stdout) == "On trunk."


async def test_a_skill_is_expanded_in_headless_mode(
    project: Path, agent_env: dict[str, str]
) -> None:
    skill = Path(agent_env["CLAUDE_CONFIG_DIR"]) / "skills" / "tidy"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: tidy\ndescription: Tidy up.\n---\nRemove dead code.\n"
    )
    result = await _run(project, agent_env, "--json", "/skill:tidy src/")
    assert result.returncode == 0, result.stderr.decode()
    message = _user_message(result.stdout)
    assert message.startswith('<skill name="tidy"')
    assert message.endswith("Remove dead code.\n\nARGUMENTS: src/\n</skill>")  # as Claude Code


async def test_a_skill_is_a_slash_command_of_its_own_name_as_in_claude_code(
    project: Path, agent_env: dict[str, str], commands: Path
) -> None:
    """Claude Code runs a skill as ``/NAME``; a template of that name keeps it, and a skill
    saying ``user-invocable: false`` has only ``/skill:NAME``."""
    skills = Path(agent_env["CLAUDE_CONFIG_DIR"]) / "skills"
    for name, extra in (("tidy", ""), ("greet", ""), ("hidden", "user-invocable: false\n")):
        (skills / name).mkdir(parents=True)
        (skills / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: The {name} skill.\n{extra}---\nDo $ARGUMENTS.\n"
        )
    (commands / "greet.md").write_text("Greet $1.\n")
    result = await _run(project, agent_env, "--json", "/tidy src/ now")
    assert result.returncode == 0, result.stderr.decode()
    message = _user_message(result.stdout)
    assert message.startswith('<skill name="tidy"') and "Do src/ now." in message
    result = await _run(project, agent_env, "--json", "/greet Bob")
    assert _user_message(result.stdout) == "Greet Bob."  # the template wins
    result = await _run(project, agent_env, "--json", "/hidden x")
    assert result.returncode == 2
    assert "unknown command /hidden" in result.stderr.decode()
    result = await _run(project, agent_env, "--json", "/skill:hidden x")
    assert '<skill name="hidden"' in _user_message(result.stdout)


async def test_a_plugins_skill_is_also_plugin_colon_name_as_in_claude_code(
    project: Path, agent_env: dict[str, str], claude_plugins: Callable[..., Path]
) -> None:
    claude_plugins(Path(agent_env["CLAUDE_CONFIG_DIR"]), "example-plugin")
    for command in ("/example-plugin:example-skill", "/example-skill"):
        result = await _run(project, agent_env, "--json", f"{command} now")
        assert result.returncode == 0, result.stderr.decode()
        message = _user_message(result.stdout)
        assert message.startswith('<skill name="example-skill"')
        assert message.endswith("\n\nARGUMENTS: now\n</skill>")


COMMIT_MD = """---
allowed-tools: Bash(git add:*), Bash(git status:*), Bash(git commit:*)
description: Create a git commit
---

## Context

- Current git status: !`git status`
- Current git diff (staged and unstaged changes): !`git diff HEAD`
- Current branch: !`git branch --show-current`
- Recent commits: !`git log --oneline -10`

## Your task

Based on the above changes, create a single git commit.
"""
"""Anthropic's /commit (plugins/commit-commands/commands/commit.md in anthropics/claude-code)."""


async def test_the_official_commit_command_runs_under_auto_mode_or_settings_rules(
    project: Path, agent_env: dict[str, str], commands: Path
) -> None:
    (commands / "commit.md").write_text(COMMIT_MD)
    await anyio.run_process(["git", "init", "-q", "-b", "trunk"], cwd=project)
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"permissions": {"allow": ["Bash(git diff:*)"]}}))
    result = await _run(project, agent_env, "--trust", "--json", "/commit")
    assert result.returncode == 3  # git branch and git log are not covered
    assert "runs `git branch --show-current` first" in result.stderr.decode()
    result = await _run(project, agent_env, "--permission-mode", "auto", "--json", "/commit")
    assert result.returncode == 0, result.stderr.decode()
    assert "- Current branch: trunk" in _user_message(result.stdout)
    rules = ["Bash(git diff:*)", "Bash(git branch:*)", "Bash(git log:*)"]
    settings.write_text(json.dumps({"permissions": {"allow": rules}}))
    result = await _run(project, agent_env, "--json", "/commit")  # a new session: mode ask
    assert result.returncode == 0, result.stderr.decode()
    assert "- Current branch: trunk" in _user_message(result.stdout)
    # a deny rule or an ask rule stops the line in auto mode too, as it stops a bash call
    settings.write_text(json.dumps({"permissions": {"deny": ["Bash(git log:*)"]}}))
    result = await _run(project, agent_env, "--permission-mode", "auto", "--json", "/commit")
    assert result.returncode == 3
    assert f"the deny rule Bash(git log:*) in {settings} matches, so it is not run" in (
        result.stderr.decode()
    )
    settings.write_text(json.dumps({"permissions": {"ask": ["Bash(git log:*)"]}}))
    result = await _run(project, agent_env, "--permission-mode", "auto", "--json", "/commit")
    assert result.returncode == 3
    assert result.stderr.decode().endswith("matches); allow it with --approve allow\n")
    result = await _run(project, agent_env, "--approve", "allow", "--json", "/commit")
    assert result.returncode == 0, result.stderr.decode()


async def test_an_unknown_command_is_an_error_naming_the_closest_ones(
    project: Path, agent_env: dict[str, str], commands: Path
) -> None:
    (commands / "greet.md").write_text("Greet $1.\n")
    result = await _run(project, agent_env, "--json", "/gret Bob")
    assert result.returncode == 2
    assert result.stderr.decode().startswith(
        "coding-agent: error: unknown command /gret; did you mean /greet?"
    )
    assert b"entry.added" not in result.stdout  # nothing was sent
    result = await _run(project, agent_env, "--json", "/skill:nope now")
    assert result.returncode == 2
    assert "unknown command /skill:nope" in result.stderr.decode()
    # a path is text, and // sends text starting with / (the TUI's escape)
    result = await _run(project, agent_env, "--json", "/etc/hosts looks odd")
    assert _user_message(result.stdout) == "/etc/hosts looks odd"
    result = await _run(project, agent_env, "--json", "//gret is not a command")
    assert result.returncode == 0, result.stderr.decode()
    assert _user_message(result.stdout) == "/gret is not a command"


async def test_a_commands_git_line_asks_when_the_repository_runs_a_script(
    project: Path, agent_env: dict[str, str], commands: Path
) -> None:
    # allowed-tools spares the dialog for `git status`, but not for the fsmonitor the
    # untrusted repository configured: -p refuses it and says how to go on
    marker = project.parent / "FSMONITOR-RAN"
    await anyio.run_process(["git", "init", "-q"], cwd=project)
    hook = project.parent / "run.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    await anyio.run_process(["git", "config", "core.fsmonitor", str(hook)], cwd=project)
    (commands / "st.md").write_text(
        "---\nallowed-tools: Bash(git status:*)\n---\nState: !`git status --short`\n"
    )
    result = await _run(project, agent_env, "--json", "/st")
    assert result.returncode == 3
    assert result.stderr.decode() == (
        f"coding-agent: error: /st runs `git status --short` first ({commands / 'st.md'}), and "
        f"-p/--json asks nobody (this repository's git configuration runs {hook} "
        "(core.fsmonitor in .git/config)); trust the project (--trust, or /trust in the TUI) "
        "or allow it with --approve allow\n"
    )
    assert not marker.exists()
    result = await _run(project, agent_env, "--trust", "--json", "/st")
    assert result.returncode == 0, result.stderr.decode()
    assert marker.exists()
