"""Claude Code's ``--session-id`` and ``--fork-session`` through the real binary, on the offline
faux model (:mod:`coding_agent.session_files.forks`): a script names its session with a UUID and
resumes it by that id; a bad or taken id is one usage line (exit 2) and changes nothing;
``--resume ID --fork-session`` runs in a new session holding the resumed conversation and
leaves the original's entries as they were."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

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


def _sessions(env: dict[str, str]) -> Path:
    return Path(env["XDG_STATE_HOME"]) / "coding-agent" / "sessions"


async def _run(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    with anyio.fail_after(TIMEOUT):
        result = await anyio.run_process(
            [str(BINARY), *args], env=env, cwd=project, check=False, stdin=subprocess.DEVNULL
        )
    return subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.decode(), result.stderr.decode()
    )


async def _ask(project: Path, env: dict[str, str], *args: str) -> dict[str, Any]:
    """``-p … --output-format json``'s result object (the run must succeed); the model
    answers in text."""
    script = project.parent / "faux-script.json"
    script.write_text(json.dumps([{"text": "noted"}] * 8))
    done = await _run(
        project, env, "--faux-script", str(script), "-p", *args, "--output-format", "json"
    )
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    return json.loads(line)


async def _prompts(project: Path, env: dict[str, str], session: str) -> list[str]:
    """The user prompts of ``session``'s branch, oldest first (``export --format jsonl``)."""
    out = project.parent / f"{session}.jsonl"
    done = await _run(project, env, "export", session, "--format", "jsonl", "-o", str(out))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()[1:]]
    return [line["model"][0]["content"] for line in lines if line.get("kind") == "pi.user"]


async def test_a_session_named_by_session_id_is_resumed_by_that_id(
    project: Path, agent_env: dict[str, str]
) -> None:
    session = str(uuid.uuid4()).upper()  # as macOS's uuidgen prints it
    first = await _ask(project, agent_env, "remember the word teal", "--session-id", session)
    assert first["session_id"] == session.lower()
    assert (_sessions(agent_env) / session.lower() / "session.json").is_file()
    again = await _ask(project, agent_env, "--resume", session, "which word?")
    assert again["session_id"] == session.lower()  # the same session, not a new one
    assert await _prompts(project, agent_env, session.lower()) == [
        "remember the word teal",
        "which word?",
    ]


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--session-id", "not-a-uuid"], "--session-id 'not-a-uuid' is not a UUID"),
        (["--session-id", "1234"], "is not a UUID (8-4-4-4-12 hex digits"),
        (["--fork-session"], "--fork-session forks the session of --resume ID or --continue"),
        (["--continue", "--session-id", str(uuid.uuid4())], "it needs --fork-session"),
    ],
)
async def test_a_bad_session_flag_is_one_usage_line_and_nothing_is_made(
    project: Path, agent_env: dict[str, str], flags: list[str], says: str
) -> None:
    done = await _run(project, agent_env, "-p", "hello", *flags)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("coding-agent: error: ") and says in line, line
    assert not _sessions(agent_env).exists() or not list(_sessions(agent_env).iterdir())


async def test_a_session_id_in_use_is_refused_and_its_session_left_alone(
    project: Path, agent_env: dict[str, str]
) -> None:
    session = str(uuid.uuid4())
    await _ask(project, agent_env, "the first", "--session-id", session)
    log = _sessions(agent_env) / session / "storage" / "main.jsonl"
    before = log.read_bytes()
    done = await _run(project, agent_env, "-p", "the second", "--session-id", session)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line == (
        f"coding-agent: error: session {session} already exists (continue it with --resume "
        f"{session}, or give a new id: uuidgen)"
    )
    assert log.read_bytes() == before
    assert [p.name for p in _sessions(agent_env).iterdir()] == [session]


async def test_fork_session_continues_in_a_copy_and_leaves_the_original(
    project: Path, agent_env: dict[str, str]
) -> None:
    original = (await _ask(project, agent_env, "the first"))["session_id"]
    log = _sessions(agent_env) / original / "storage" / "main.jsonl"
    before = log.read_bytes()
    fork_id = str(uuid.uuid4())
    forked = await _ask(
        project, agent_env, "--resume", original, "--fork-session", "--session-id", fork_id,
        "the second",
    )  # fmt: skip
    assert forked["session_id"] == fork_id
    assert log.read_bytes() == before  # not a byte of the original changed
    assert await _prompts(project, agent_env, original) == ["the first"]
    assert await _prompts(project, agent_env, fork_id) == ["the first", "the second"]
    # without --session-id the fork gets an id of its own; --continue forks the newest session
    again = await _ask(project, agent_env, "--continue", "--fork-session", "the third")
    assert again["session_id"] not in (original, fork_id)
    assert await _prompts(project, agent_env, again["session_id"]) == [
        "the first",
        "the second",
        "the third",
    ]
