"""``coding-agent config`` lists what a session picks up: a Claude Code user's hooks, context
files, subagents, skills, commands and MCP servers, each with its file, read through the loaders
the session uses; an untrusted project's own are marked waiting for /trust and nothing of it is
run; a broken file's problem is shown under its section. The real binary, a temporary HOME
holding a Claude Code user's ``~/.claude``, and a project with its own ``.claude/`` and
``.mcp.json``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest

from coding_agent.settings.trust import TrustStore, trust_path

BINARY = Path(sys.executable).with_name("coding-agent")
TIMEOUT = 120


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _agent(name: str | None, description: str) -> str:
    head = f"name: {name}\n" if name else ""
    return f"---\n{head}description: {description}\n---\nYou review code.\n"


@pytest.fixture
def setup(tmp_path: Path) -> dict[str, Path]:
    """A Claude Code user's home and a project; ``ran`` is the file a hook or an MCP server
    would create if ``config`` ran one."""
    home = tmp_path / "home"
    claude = home / ".claude"
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    ran = tmp_path / "ran"
    _write(
        claude / "settings.json",
        json.dumps(
            {
                "hooks": {
                    "PreToolUse": [
                        {
                            "matcher": "Bash",
                            "hooks": [
                                {"type": "command", "command": "~/guard.sh", "onFailure": "block"}
                            ],
                        }
                    ],
                    "Stop": [{"hooks": [{"type": "command"}]}],  # no command: a problem
                }
            }
        ),
    )
    _write(claude / "CLAUDE.md", "Be terse.\n@style.md\n")
    _write(claude / "style.md", "Use British spelling.\n")
    _write(claude / "agents" / "reviewer.md", _agent("reviewer", "Reviews diffs."))
    _write(claude / "agents" / "nameless.md", _agent(None, "Has no name."))
    _write(claude / "commands" / "deploy.md", "Deploy $ARGUMENTS.\n")
    _write(
        claude / "skills" / "tidy" / "SKILL.md",
        "---\nname: tidy\ndescription: Tidy the imports.\n---\nSort them.\n",
    )
    _write(project / "CLAUDE.md", "This project uses uv.\n")
    _write(
        project / ".claude" / "settings.json",
        json.dumps(
            {
                "hooks": {
                    "PostToolUse": [
                        {
                            "matcher": "Edit",
                            "hooks": [{"type": "command", "command": f"touch {ran}"}],
                        }
                    ]
                }
            }
        ),
    )
    _write(project / ".claude" / "agents" / "reviewer.md", _agent("reviewer", "The project's."))
    _write(project / ".claude" / "commands" / "ship.md", "Ship it.\n")
    _write(
        project / ".mcp.json",
        json.dumps({"mcpServers": {"db": {"command": "sh", "args": ["-c", f"touch {ran}"]}}}),
    )
    return {"home": home, "claude": claude, "project": project, "ran": ran, "tmp": tmp_path}


def _env(setup: dict[str, Path]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("CLAUDE_CONFIG_DIR", None)  # the user's ~/.claude, as a Claude Code user has it
    env.update(
        HOME=str(setup["home"]),
        XDG_CONFIG_HOME=str(setup["home"] / ".config"),
        XDG_STATE_HOME=str(setup["tmp"] / "state"),
        XDG_DATA_HOME=str(setup["tmp"] / "data"),
        CODING_AGENT_WARM_START="0",
    )
    return env


async def _config(setup: dict[str, Path]) -> str:
    with anyio.fail_after(TIMEOUT):
        result = await anyio.run_process(
            [str(BINARY), "config"], env=_env(setup), cwd=setup["project"], check=False
        )
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


def _section(output: str, title: str) -> str:
    """The lines of section ``title`` (from its ``# title:`` line to the next section)."""
    assert f"\n# {title}:" in output, f"no {title} section in:\n{output}"
    start = output.index(f"\n# {title}:")
    end = output.find("\n\n# ", start + 1)
    lines = output[start : end if end != -1 else None].splitlines()
    return "\n".join(" ".join(line.split()) for line in lines) + "\n"  # the columns' padding


@pytest.mark.anyio
async def test_config_lists_what_a_session_loads_and_the_untrusted_project_waits(
    setup: dict[str, Path],
) -> None:
    output = await _config(setup)
    claude, project = "~/.claude", str(setup["project"])

    hooks = _section(output, "hooks")
    assert f"PreToolUse Bash: ~/guard.sh (onFailure: block) # {claude}/settings.json" in hooks
    assert f"PostToolUse Edit: touch {setup['ran']} # {project}/.claude/settings.json " \
        "(waiting for /trust)" in hooks  # fmt: skip
    assert f"! {setup['claude']}/settings.json: " in hooks  # the Stop entry without a command
    assert "command" in hooks.split("! ", 1)[1]

    context = _section(output, "context files")
    assert f"{claude}/CLAUDE.md" in context
    assert f"{claude}/style.md" in context  # the @import
    assert f"{project}/CLAUDE.md" in context

    agents = _section(output, "agents")
    assert f"reviewer # {claude}/agents/reviewer.md\n" in agents
    assert f"{project}/.claude/agents (waiting for /trust)" in agents
    assert f"! {setup['claude']}/agents/nameless.md" in agents  # the file without a name

    skills = _section(output, "skills")
    assert "tidy (/tidy)" in skills and f"{claude}/skills/tidy/SKILL.md" in skills
    commands = _section(output, "commands")
    assert "/deploy" in commands and f"{claude}/commands/deploy.md" in commands
    assert ".claude/commands (1)" in commands and "(waiting for /trust)" in commands

    mcp = _section(output, "mcp")
    assert "db (stdio)" in mcp
    assert f"{project}/.mcp.json (waiting for /trust)" in mcp
    assert not setup["ran"].exists()  # neither the project's hook nor its server ran


@pytest.mark.anyio
async def test_config_in_a_trusted_project_marks_the_shadowed_agent_and_a_broken_mcp_json(
    setup: dict[str, Path],
) -> None:
    TrustStore(trust_path(_env(setup))).set(setup["project"], True)
    _write(setup["project"] / ".mcp.json", "{not json")
    output = await _config(setup)
    claude, project = "~/.claude", str(setup["project"])

    agents = _section(output, "agents")
    assert f"{project}/.claude/agents/reviewer.md" in agents
    assert f"{claude}/agents/reviewer.md (shadowed by {project}/.claude/agents/reviewer.md)" \
        in agents  # fmt: skip
    hooks = _section(output, "hooks")
    assert f"PostToolUse Edit: touch {setup['ran']} # {project}/.claude/settings.json\n" in hooks
    commands = _section(output, "commands")
    assert "/ship" in commands and "waiting for /trust" not in commands
    mcp = _section(output, "mcp")
    assert f"! {project}/.mcp.json: not valid JSON" in mcp
    assert "fix the file" in mcp
    assert not setup["ran"].exists()


def test_config_in_process_leaves_no_feature_module_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``config`` hosts the features' ``"config"`` facets from generations of their packages,
    and purges them once listed: called in a process that lives on (a test, an embedding
    program), it leaves none of their modules imported (they would count as a leaked
    generation for every later load in that process)."""
    from chord.facet_packages.generation import GENERATION_PREFIX
    from coding_agent.cli.main import main

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "home" / ".local" / "state"))
    monkeypatch.chdir(tmp_path)
    before = {name for name in sys.modules if name.startswith(GENERATION_PREFIX)}
    assert main(["config"]) == 0
    assert "# hooks:" in capsys.readouterr().out  # the features' sections were listed
    after = {name for name in sys.modules if name.startswith(GENERATION_PREFIX)}
    assert after - before == set()
