"""``context: fork`` in ``-p``: a skill's or a command's ``/NAME`` runs in a subagent of its
``agent`` type (default ``general-purpose``), whose report is what the conversation receives;
its ``allowed-tools`` apply to that subagent, never past the run's restrictions; an agent no
definition has is an error naming the known ones. Through the real binary on the offline faux
model, each subagent scripted by its system prompt (``--agents``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

pytestmark = pytest.mark.anyio

BINARY = Path(sys.executable).with_name("coding-agent")
TIMEOUT = 120
SCOUT = "You are SCOUT."
AGENTS = json.dumps({"scout": {"description": "scouts", "prompt": SCOUT}})


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    return folder


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return tmp_path / "config"


@pytest.fixture
def env(agent_env: dict[str, str], config: Path) -> dict[str, str]:
    return {**agent_env, "XDG_CONFIG_HOME": str(config)}


def _skill(config: Path, name: str, frontmatter: str, body: str) -> Path:
    path = config / "coding-agent" / "skills" / name / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(f"---\nname: {name}\ndescription: {name}\n{frontmatter}---\n{body}\n")
    return path


async def _run(project: Path, env: dict[str, str], steps: Any, *args: str) -> tuple[int, str, str]:
    """The binary's exit code, stdout and stderr."""
    script = project.parent / "faux-script.json"
    script.write_text(json.dumps(steps))
    with anyio.fail_after(TIMEOUT):
        result = await anyio.run_process(
            [str(BINARY), "--faux-script", str(script), *args, "--agents", AGENTS],
            env=env, cwd=project, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    return result.returncode, result.stdout.decode(), result.stderr.decode()


# the root and the scout each echo what they were sent
ECHOES = {"steps": [{"echo": True}], "conversations": [{"when": SCOUT, "steps": [{"echo": True}]}]}


async def test_a_forked_skill_runs_in_its_agent_and_the_conversation_gets_its_report(
    project: Path, env: dict[str, str], config: Path
) -> None:
    """``/scan ISSUE-7`` of a skill with ``context: fork`` and ``agent: scout``: the scout gets
    the skill's body with the argument substituted, and the conversation gets the scout's
    report (the scout's echo of its prompt) as a subagent's result, not the skill itself."""
    _skill(config, "scan", "context: fork\nagent: scout\n", "Investigate issue $ARGUMENTS now.")
    code, out, err = await _run(project, env, ECHOES, "-p", "/scan ISSUE-7")
    assert code == 0, err
    # the root's echo: what it was sent is the scout's report, framed as a subagent's result
    assert '/scan ran in a subagent (scout), which returned: <subagent-result command="/scan" ' in (
        " ".join(out.split())
    ), out
    (framed,) = out.split("<subagent-result")[1:]
    assert "Investigate issue ISSUE-7 now." in framed  # the scout's echo: it got the body
    assert "not honoured" not in err  # context and agent are no longer warned about


async def test_a_forked_command_runs_in_a_general_purpose_subagent(
    project: Path, env: dict[str, str], config: Path
) -> None:
    """A prompt template (Claude Code's command) with ``context: fork`` and no ``agent`` runs
    in a ``general-purpose`` subagent: its expansion is that subagent's prompt."""
    prompts = config / "coding-agent" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "audit.md").write_text("---\ncontext: fork\n---\nAudit the $1 module.\n")
    steps = {"steps": [{"echo": True}, {"echo": True}]}  # the subagent first, then the root
    code, out, err = await _run(project, env, steps, "-p", "/audit parser")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "/audit ran in a subagent (general-purpose), which returned:" in flat, out
    assert "Audit the parser module." in out.split("<subagent-result")[1]


async def test_an_unknown_agent_is_an_error_naming_the_known_ones(
    project: Path, env: dict[str, str], config: Path
) -> None:
    """``agent: nobody``: nothing runs or is sent; the error names the command, the agent and
    the agents there are."""
    _skill(config, "scan", "context: fork\nagent: nobody\n", "Investigate.")
    code, out, err = await _run(project, env, ECHOES, "-p", "/scan")
    assert code == 1
    assert out == ""
    assert (
        "coding-agent: error: /scan (agent: nobody): unknown agent 'nobody'; the known agents: "
        "general-purpose, scout"
    ) in err


async def test_a_forked_skills_allowed_tools_apply_to_its_subagent_within_the_runs_limits(
    project: Path, env: dict[str, str], config: Path, tmp_path: Path
) -> None:
    """The skill's ``allowed-tools: Bash(touch:*)`` lets its subagent's ``touch`` run without
    asking (in ``-p``, where a call that needs asking is refused); ``--disallowedTools Bash``
    and plan mode still stop it, as they stop any subagent."""
    marker = tmp_path / "touched"
    touch = {"name": "bash", "arguments": {"command": f"touch {marker}"}}
    _skill(config, "mark", "context: fork\nagent: scout\nallowed-tools: Bash(touch:*)\n", "Go.")
    steps = {
        "steps": [{"echo": True}],
        "conversations": [{"when": SCOUT, "steps": [{"toolCalls": [touch]}, {"text": "done"}]}],
    }
    for flags in (("--disallowedTools", "Bash"), ("--permission-mode", "plan")):
        code, _out, err = await _run(project, env, steps, "-p", "/mark", *flags)
        assert not marker.exists(), flags
        assert code in (0, 3), err
    code, out, err = await _run(project, env, steps, "-p", "/mark")
    assert code == 0, err
    assert marker.exists()  # the grant reached the subagent
    assert "<subagent-result" in out
