"""Claude Code's command-line spellings through the real binary: its permission modes that mean
the same are taken (``--permission-mode acceptEdits``), and its other flags stop the run with a
usage error naming what to write here (``--output-format json`` → ``--json``, ``--model opus``
→ ``anthropic/claude-opus-…``), nothing run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

pytestmark = pytest.mark.anyio

BINARY = Path(sys.executable).with_name("coding-agent")
TIMEOUT = 120


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


async def _run(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    script = project.parent / "faux-script.json"
    write = {"name": "write", "arguments": {"path": "notes.md", "content": "hello\n"}}
    script.write_text(json.dumps([{"toolCalls": [write]}, {"text": "done"}]))
    with anyio.fail_after(TIMEOUT):
        result = await anyio.run_process(
            [str(BINARY), "--faux-script", str(script), *args],
            env=env, cwd=project, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    return subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.decode(), result.stderr.decode()
    )


async def test_claude_codes_accept_edits_mode_is_taken_on_the_command_line(
    project: Path, agent_env: dict[str, str]
) -> None:
    result = await _run(project, agent_env, "-p", "--permission-mode", "acceptEdits", "write it")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "done"
    assert (project / "notes.md").read_text() == "hello\n"  # the edit ran unasked


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--input-format", "stream-json"], "--input-format stream-json needs --output-format"),
        (["--dangerously-skip-permissions"], "here: --permission-mode auto"),
        (["--permission-prompt-tool", "mcp__x__ask"], "mcp__x__ask: only stdio is served here"),
        (["--include-partial-messages"], "--include-partial-messages needs --output-format"),
        (["--permission-mode", "bypassPermissions"], "bypassPermissions is --permission-mode auto"),
        # the flags of published claude -p scripts (budgets, schemas, CI's bare runs)
        (["--max-budget-usd", "1.00"], "--max-budget-usd is Claude Code's flag, here: no count"),
        (["--json-schema", "{}"], "read it from .result"),
        (["--no-session-persistence"], "every session is stored"),
        (["--bare"], "--bare is Claude Code's flag, here: no counterpart: --strict-mcp-config"),
        (["--setting-sources", "user"], "--settings adds one more file"),
        # a model the command line cannot use: exit 1, as a model that is not set up
        (["--model", "opus"], "got 'opus'; for Claude Code's 'opus': anthropic/claude-opus-"),
    ],
)
async def test_a_claude_code_flag_is_a_usage_error_naming_what_to_write_here(
    project: Path, agent_env: dict[str, str], flags: list[str], says: str
) -> None:
    result = await _run(project, agent_env, "-p", *flags, "write it")
    assert result.returncode == (1 if flags[0] == "--model" else 2)
    (line,) = result.stderr.splitlines()
    assert line.startswith("coding-agent: error: ") and says in line, line
    assert not (project / "notes.md").exists()  # nothing ran


@pytest.mark.parametrize(
    "args",
    [
        ["Output a JSON object", "--output-format", "json"],  # claude "PROMPT" (its TUI)
        ["--output-format=json", "fix the tests"],
    ],
)
async def test_a_prompt_without_p_is_a_usage_error_that_says_to_add_p(
    project: Path, agent_env: dict[str, str], args: list[str]
) -> None:
    result = await _run(project, agent_env, *args)
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert 'a prompt needs -p here: coding-agent -p "PROMPT"' in line, line
    assert not (project / "notes.md").exists()


async def test_a_prompt_taken_by_allowed_tools_says_where_it_went(
    project: Path, agent_env: dict[str, str]
) -> None:
    """``-p --allowedTools Read "write it"``: the list takes the prompt's words as rules (as
    Claude Code's does); the usage error says so and how to write it."""
    result = await _run(project, agent_env, "-p", "--allowedTools", "Read", "write it")
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("coding-agent: error: -p needs a prompt"), line
    assert "--allowedTools takes every next word" in line, line
    assert '(-p "PROMPT" --allowedTools ...)' in line, line
    assert not (project / "notes.md").exists()
