"""Session folders (issue 8 item 5): creation, lookup, the socket path and bad metadata."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from coding_agent.session_files.folders import (
    SOCKET_PATH_LIMIT,
    SessionError,
    create_session,
    latest_session,
    list_sessions,
    load_session,
    open_session,
    record_activity,
    sessions_root,
)
from coding_agent.settings.xdg import state_home


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_STATE_HOME": str(tmp_path / "st")}


def test_state_home_follows_xdg_and_falls_back_to_local_state(tmp_path: Path) -> None:
    assert state_home({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path
    home = Path(os.path.expanduser("~"))
    assert state_home({}) == home / ".local" / "state"
    assert state_home({"XDG_STATE_HOME": "relative/path"}) == home / ".local" / "state"


def test_a_new_session_has_its_folder_metadata_and_storage(
    tmp_path: Path, env: dict[str, str]
) -> None:
    session = create_session(tmp_path, model="faux/faux-1", env=env)
    assert session.path.parent == sessions_root(env)
    assert session.path.name == session.id
    assert session.storage_dir.is_dir()
    metadata = json.loads(session.metadata_path.read_text())
    assert metadata == {
        "version": 1,
        "id": session.id,
        "cwd": str(tmp_path.resolve()),
        "created": metadata["created"],
        "model": "faux/faux-1",
    }
    assert session.cwd == tmp_path.resolve()
    assert session.created.tzinfo is not None
    assert load_session(session.path) == session


def test_sessions_are_listed_newest_first_and_filtered_by_project(
    tmp_path: Path, env: dict[str, str]
) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    made = [
        create_session(one, env=env),
        create_session(two, env=env),
        create_session(one, env=env),
    ]
    for age, session in enumerate(reversed(made)):  # the last one made was active last
        record_activity(session, datetime.fromtimestamp(1_000_000 - age, UTC), fsync=False)
        os.utime(session.storage_dir, (2_000_000 + age, 2_000_000 + age))  # file times: ignored
    assert [s.id for s in list_sessions(env=env)] == [s.id for s in reversed(made)]
    assert {s.id for s in list_sessions(one, env=env)} == {made[0].id, made[2].id}
    assert latest_session(two, env=env) == made[1]
    assert latest_session(tmp_path, env=env) is None


def test_no_state_folder_means_no_sessions(env: dict[str, str]) -> None:
    assert list_sessions(env=env) == []
    assert latest_session(env=env) is None


def test_open_session_takes_an_id_or_a_unique_prefix(tmp_path: Path, env: dict[str, str]) -> None:
    first = create_session(tmp_path, env=env)
    assert open_session(first.id, env=env) == first
    assert open_session(first.id[:-2], env=env) == first
    second = create_session(tmp_path, env=env)
    differ = next(i for i, (a, b) in enumerate(zip(first.id, second.id, strict=True)) if a != b)
    common = first.id[:differ]
    with pytest.raises(SessionError, match="is ambiguous"):
        open_session(common, env=env)
    with pytest.raises(SessionError, match="no session 'nope'"):
        open_session("nope", env=env)
    with pytest.raises(SessionError, match="invalid session id"):
        open_session("../x", env=env)


def test_broken_metadata_is_reported_with_its_path_and_skipped_in_lists(
    tmp_path: Path, env: dict[str, str]
) -> None:
    good = create_session(tmp_path, env=env)
    bad = sessions_root(env) / "20200101-000000-aaaaaa"
    bad.mkdir()
    (bad / "session.json").write_text('{"version": 1, "id": 3}')
    with pytest.raises(SessionError, match=r"session\.json: invalid session metadata"):
        load_session(bad)
    other = sessions_root(env) / "20200101-000000-bbbbbb"
    other.mkdir()
    (other / "session.json").write_text(
        json.dumps({"version": 9, "id": other.name, "cwd": "/", "created": "2020-01-01T00:00:00"})
    )
    with pytest.raises(SessionError, match="unsupported session version 9"):
        load_session(other)
    with pytest.raises(SessionError, match="not a session folder"):
        load_session(tmp_path)
    assert list_sessions(env=env) == [good]


def test_a_missing_project_folder_is_refused(tmp_path: Path, env: dict[str, str]) -> None:
    with pytest.raises(SessionError, match="the project folder does not exist"):
        create_session(tmp_path / "missing", env=env)
    assert not sessions_root(env).exists() or list_sessions(env=env) == []


def test_the_socket_lives_in_the_folder_unless_the_path_is_too_long(tmp_path: Path) -> None:
    state = tempfile.mkdtemp(prefix="ca-", dir="/tmp")  # short enough for AF_UNIX
    try:
        short = create_session(tmp_path, env={"XDG_STATE_HOME": state})
        assert short.socket_path == short.path / "worker.sock"
    finally:
        shutil.rmtree(state)
    deep = create_session(tmp_path, env={"XDG_STATE_HOME": str(tmp_path / ("d" * 80))})
    socket = deep.socket_path
    assert len(os.fsencode(deep.path / "worker.sock")) > SOCKET_PATH_LIMIT
    assert len(os.fsencode(socket)) <= SOCKET_PATH_LIMIT
    assert socket == load_session(deep.path).socket_path  # every process computes the same


def test_worker_running_follows_the_lock(tmp_path: Path, env: dict[str, str]) -> None:
    session = create_session(tmp_path, env=env)
    assert not session.worker_running()
    fd = os.open(session.lock_path, os.O_RDWR | os.O_CREAT)
    try:
        assert not session.worker_running()
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert session.worker_running()
    finally:
        os.close(fd)
    assert not session.worker_running()
