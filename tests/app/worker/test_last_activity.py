"""``--continue`` resumes the session the user last used (issue 38 item 1).

Last activity is the user's last prompt or command, recorded by the worker, never a file time:
a lingering worker of an older session that stops later (and so touches its storage files)
does not make ``--continue`` pick that session, and a session opened and left untouched keeps
its creation time.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import msgspec
import pytest
from worker_support import TIMEOUT, worker_process, write_script

from coding_agent.session_files.folders import (
    create_session,
    latest_session,
    list_sessions,
    load_session,
)
from coding_agent.session_files.index import describe

pytestmark = pytest.mark.anyio


def _cli(script: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "coding_agent.cli.main", "--faux-script", str(script), *args]


async def test_continue_picks_the_session_prompted_last_not_the_one_whose_worker_stopped_last(
    project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    script = write_script(tmp_path / "script.json", [{"text": "Noted."}] * 4)
    with anyio.fail_after(TIMEOUT):
        first = await anyio.run_process(
            _cli(script, "-p", "session A"), env=agent_env, cwd=project, check=False
        )
        assert first.returncode == 0, first.stderr.decode()
        (older,) = list_sessions(project, env=agent_env)
        second = await anyio.run_process(
            _cli(script, "-p", "session B"), env=agent_env, cwd=project, check=False
        )
        assert second.returncode == 0, second.stderr.decode()
    newer = next(s for s in list_sessions(project, env=agent_env) if s.id != older.id)
    # A's worker lingers and stops after B was used: it writes its storage files as it closes
    async with worker_process(older, agent_env, "--faux-script", str(script)):
        pass
    assert latest_session(project, env=agent_env) == newer
    with anyio.fail_after(TIMEOUT):
        listed = await anyio.run_process(
            [sys.executable, "-m", "coding_agent.cli.main", "sessions", "--json"],
            env=agent_env,
            cwd=project,
        )
    assert [row["id"] for row in json.loads(listed.stdout)][:2] == [newer.id, older.id]
    with anyio.fail_after(TIMEOUT):
        again = await anyio.run_process(
            _cli(script, "-c", "--json", "-p", "which one?"), env=agent_env, cwd=project
        )
    assert newer.id in again.stdout.decode() and older.id not in again.stdout.decode()


async def test_an_untouched_session_keeps_its_creation_time(
    project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    session = create_session(project, env=agent_env)
    long_ago = "2020-01-02T03:04:05+00:00"
    metadata = msgspec.structs.replace(session.metadata, created=long_ago)
    session.metadata_path.write_bytes(msgspec.json.encode(metadata))
    session = load_session(session.path)
    script = write_script(tmp_path / "script.json", [{"text": "Unused."}])
    async with worker_process(session, agent_env, "--faux-script", str(script)):
        pass
    assert describe(session)["lastActivity"] == long_ago
    assert not session.activity_path.exists()


async def test_continue_skips_a_session_opened_later_but_never_prompted(
    project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    """Prompt in B, then open C and /quit without a word: ``--continue`` is "the session you
    prompted last", so it opens B; C still lists (first: it is the newest) and opens by id."""
    script = write_script(tmp_path / "script.json", [{"text": "Noted."}] * 2)
    with anyio.fail_after(TIMEOUT):
        used = await anyio.run_process(
            _cli(script, "-p", "session B"), env=agent_env, cwd=project, check=False
        )
        assert used.returncode == 0, used.stderr.decode()
    (prompted,) = list_sessions(project, env=agent_env)
    untouched = create_session(project, env=agent_env)  # what `coding-agent` then /quit leaves
    later = (datetime.now(UTC) + timedelta(minutes=5)).isoformat(timespec="seconds")
    metadata = msgspec.structs.replace(untouched.metadata, created=later)  # not the same second
    untouched.metadata_path.write_bytes(msgspec.json.encode(metadata))
    untouched = load_session(untouched.path)
    async with worker_process(untouched, agent_env, "--faux-script", str(script)):
        pass
    assert [s.id for s in list_sessions(project, env=agent_env)] == [untouched.id, prompted.id]
    assert latest_session(project, env=agent_env) == prompted
    with anyio.fail_after(TIMEOUT):
        again = await anyio.run_process(
            _cli(script, "-c", "--json", "-p", "which one?"), env=agent_env, cwd=project
        )
    assert prompted.id in again.stdout.decode() and untouched.id not in again.stdout.decode()


def test_continue_falls_back_to_the_newest_session_when_none_was_prompted(
    project: Path, agent_env: dict[str, str]
) -> None:
    older = create_session(project, env=agent_env)
    metadata = msgspec.structs.replace(older.metadata, created="2020-01-02T03:04:05+00:00")
    older.metadata_path.write_bytes(msgspec.json.encode(metadata))
    newest = create_session(project, env=agent_env)
    assert latest_session(project, env=agent_env) == newest


async def test_a_prompt_records_the_activity(
    project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    script = write_script(tmp_path / "script.json", [{"text": "Noted."}])
    before = datetime.now(UTC)
    with anyio.fail_after(TIMEOUT):
        await anyio.run_process(_cli(script, "-p", "hello"), env=agent_env, cwd=project)
    (session,) = list_sessions(project, env=agent_env)
    record = json.loads(session.activity_path.read_text())
    recorded = datetime.fromisoformat(record["at"])
    assert before <= recorded <= datetime.now(UTC)
    assert record["branch"] == session.current_branch() == 1
    assert session.last_active() == recorded.timestamp()


def test_a_turn_records_its_prompt_not_its_end() -> None:
    """The input of a prompt is placed (the user's doing) and later resolved (the turn's end):
    only the first counts, so a turn writes the activity record once, not twice."""
    from types import SimpleNamespace

    from coding_agent.worker.activity import is_user_activity

    def batch(**inputs: str) -> SimpleNamespace:
        records = {int(k[1:]): SimpleNamespace(status=v) for k, v in inputs.items()}
        return SimpleNamespace(inputs=records, created=[], config_changed={})

    admitted: set[int] = set()
    assert is_user_activity(batch(i2="placed"), admitted)
    assert not is_user_activity(batch(i2="done"), admitted)
    assert is_user_activity(batch(i5="queued"), admitted)  # a follow-up typed during a turn
    assert is_user_activity(batch(i5="placed"), admitted)
    assert not is_user_activity(batch(i5="unanswered"), admitted)
    assert is_user_activity(batch(i9="done"), admitted)  # a !cmd line's output, done at once
    assert admitted == set()
    assert is_user_activity(batch(i2="done"))  # without the memory every input counts
