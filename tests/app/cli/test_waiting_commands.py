"""``-p "/test"`` in an untrusted project whose ``.claude/commands/test.md`` waits for trust,
through the real binary: the error names ``/test`` as the project's command that loads with
``--trust``, not the closest other commands; trusted, the same line runs the command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.app.cli._scripted import run_scripted

pytestmark = pytest.mark.anyio


@pytest.fixture
def env(agent_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """A private trust store (``XDG_CONFIG_HOME``) and a user command close to ``/test``."""
    commands = Path(agent_env["CLAUDE_CONFIG_DIR"]) / "commands"
    commands.mkdir(parents=True)
    (commands / "tests.md").write_text("List the test files.\n")  # a near miss of /test
    return {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    (folder / ".claude" / "commands").mkdir(parents=True)
    (folder / ".claude" / "commands" / "test.md").write_text("Run the tests.\n")
    (folder / ".claude" / "skills" / "deploy").mkdir(parents=True)
    (folder / ".claude" / "skills" / "deploy" / "SKILL.md").write_text(
        "---\nname: deploy\ndescription: Deploy it\n---\nDeploy.\n"
    )
    return folder


async def test_a_project_command_waiting_for_trust_is_named_not_fuzzy_matched(
    project: Path, env: dict[str, str]
) -> None:
    result = await run_scripted(project, env, [{"text": "ok"}], "--json", "/test now")
    assert result.returncode == 2
    error = result.stderr.decode()
    assert (
        "coding-agent: error: /test is this project's command (.claude/commands/test.md); it "
        "loads after --trust (or /trust in the TUI)"
    ) in error
    assert "did you mean" not in error
    assert b"entry.added" not in result.stdout  # nothing was sent
    result = await run_scripted(project, env, [{"text": "ok"}], "--json", "/skill:deploy")
    assert result.returncode == 2
    assert "/skill:deploy is this project's command (.claude/skills/deploy/SKILL.md)" in (
        result.stderr.decode()
    )
    result = await run_scripted(project, env, [{"text": "ok"}], "--json", "/testz")
    assert "unknown command /testz; did you mean /tests?" in result.stderr.decode()  # a typo
    trusted = await run_scripted(project, env, [{"text": "ok"}], "--trust", "--json", "/test")
    assert trusted.returncode == 0, trusted.stderr.decode()
    lines = [json.loads(line) for line in trusted.stdout.decode().splitlines()]
    assert any(
        line["type"] == "entry.added" and line["entry"]["kind"] == "pi.user" for line in lines
    )
