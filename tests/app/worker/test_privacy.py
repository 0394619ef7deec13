"""Private by construction, whatever the umask (issue 24 deliver 2).

* Under ``umask 000`` a session made by the command line and served by a real worker has
  ``0700`` folders and ``0600`` files all the way down (transcript, sidecars, ``session.json``,
  the lock, the socket), and the state folders above it are ``0700`` too; a second local user
  cannot reach the socket.
* When the socket goes to ``$TMPDIR/coding-agent-<uid>/`` (the session path is too long for a
  socket), a folder someone made first — world-writable, another user's, a symbolic link — is
  refused with an error naming it, and the worker does not serve.
"""

from __future__ import annotations

import json
import os
import pwd
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from worker_support import TIMEOUT, Client, connected, write_script

from chord.context import BACKGROUND
from coding_agent.session_files.folders import SOCKET_PATH_LIMIT, create_session, latest_session

pytestmark = pytest.mark.anyio

CONNECT = """
import socket, sys
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    sock.connect(sys.argv[1])
except OSError as error:
    print(type(error).__name__)
else:
    print("connected")
"""


def _modes(top: Path) -> dict[str, str]:
    """Every entry under ``top`` (itself included) that is not private: path -> its mode."""
    loose: dict[str, str] = {}
    for path in [top, *top.rglob("*")]:
        info = os.lstat(path)
        mode = stat.S_IMODE(info.st_mode)
        wanted = 0o700 if stat.S_ISDIR(info.st_mode) else 0o600
        if mode != wanted or info.st_uid != os.geteuid():
            loose[str(path)] = f"{mode:04o}"
    return loose


def _sockets(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_socket()]


def _worker(session_dir: Path, env: dict[str, str], *args: str) -> list[str]:
    return [sys.executable, "-m", "coding_agent.worker.main", str(session_dir), *args]


async def test_under_umask_000_everything_is_private_and_other_users_get_nothing(
    other_user: pwd.struct_passwd,
    other_python: list[str],
    shared_tmp: Path,
    project: Path,
    agent_env: dict[str, str],
) -> None:
    env = {**agent_env, "XDG_STATE_HOME": str(shared_tmp / "state")}
    env["XDG_CONFIG_HOME"] = str(shared_tmp / "config")
    script = write_script(shared_tmp / "script.json", [{"text": "Done."}])
    script.chmod(0o600)
    cli = [sys.executable, "-m", "coding_agent.cli.main", "-p", "hi", "--faux-script", str(script)]
    cli.append("--no-trust")  # a decision: trust.json is written too
    done = await anyio.run_process(cli, env=env, cwd=project, umask=0, check=False)
    assert done.returncode == 0, done.stderr.decode()
    session = latest_session(project, env=env)
    assert session is not None
    state = shared_tmp / "state"
    assert _modes(state / "coding-agent") == {}, "the state folders and the -p session"
    config = shared_tmp / "config" / "coding-agent"
    assert (config / "trust.json").exists()
    assert _modes(config) == {}, "the trust file and its folder"
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o777, "the base is the user's, not ours"

    process = await anyio.open_process(
        _worker(session.path, env, "--faux-script", str(script), "--exit-on-stdin-eof"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        cwd=project,
        umask=0,
    )
    async with process:
        assert process.stdout is not None and process.stdin is not None
        with anyio.fail_after(TIMEOUT):
            line = (await process.stdout.receive()).decode()
        assert line.startswith("READY ")
        socket = Path(line.split(" ", 1)[1].strip())
        async with connected(Client(), socket) as client:
            await client.root.send({"content": "again"}, BACKGROUND)
            await client.wait_for(client.turn_ended)
            assert stat.S_IMODE(os.lstat(socket).st_mode) == 0o600
            loose = _modes(session.path)
            theirs = await anyio.run_process(
                [*other_python, "-c", CONNECT, str(socket)],
                user=other_user.pw_uid,
                group=other_user.pw_gid,
                extra_groups=[],
            )
        await process.stdin.aclose()
        with anyio.fail_after(TIMEOUT):
            await process.wait()
    assert loose == {}, "every folder 0700, every file and the socket 0600"
    assert theirs.stdout.decode().strip() == "PermissionError", "another user cannot connect"
    assert (session.storage_dir / "main.jsonl").exists()


@pytest.fixture
def deep_session(tmp_path: Path, project: Path, agent_env: dict[str, str]) -> tuple[Path, dict]:
    """A session whose folder path is too long for a socket: it goes to the temp folder."""
    env = {**agent_env, "XDG_STATE_HOME": str(tmp_path / ("s" * SOCKET_PATH_LIMIT))}
    session = create_session(project, env=env)
    return session.path, env


def _squat(folder: Path, how: str, other: pwd.struct_passwd | None = None) -> str:
    if how == "open":
        folder.mkdir()
        folder.chmod(0o777)
        return f"{folder} has mode 0777, not 0700"
    if how == "link":
        target = folder.with_name("elsewhere")
        target.mkdir(mode=0o700)
        folder.symlink_to(target)
        return f"{folder} is a symbolic link"
    assert other is not None
    folder.mkdir(mode=0o700)
    os.chown(folder, other.pw_uid, other.pw_gid)
    me = pwd.getpwuid(os.geteuid()).pw_name
    return f"{folder} is owned by {other.pw_name}, not by you ({me})"


@pytest.mark.parametrize("how", ["open", "link", "theirs"])
async def test_a_squatted_socket_folder_is_refused(
    how: str,
    deep_session: tuple[Path, dict[str, str]],
    shared_tmp: Path,
    request: pytest.FixtureRequest,
) -> None:
    session_dir, env = deep_session
    other = request.getfixturevalue("other_user") if how == "theirs" else None
    problem = _squat(shared_tmp / f"coding-agent-{os.geteuid()}", how, other)
    env = {**env, "TMPDIR": str(shared_tmp)}
    with anyio.fail_after(TIMEOUT):
        done = await anyio.run_process(_worker(session_dir, env), env=env, check=False)
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert f"coding-agent worker: {problem}: refusing to put the session's socket there" in stderr
    assert "Remove it, or set TMPDIR" in stderr and "Traceback" not in stderr
    assert b"READY" not in done.stdout
    assert not _sockets(shared_tmp), "no socket was made"


async def test_a_fresh_socket_folder_is_made_private(
    deep_session: tuple[Path, dict[str, str]], shared_tmp: Path
) -> None:
    session_dir, env = deep_session
    env = {**env, "TMPDIR": str(shared_tmp)}
    process = await anyio.open_process(
        _worker(session_dir, env, "--exit-on-stdin-eof"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        umask=0,
    )
    async with process:
        assert process.stdout is not None and process.stdin is not None
        with anyio.fail_after(TIMEOUT):
            line = (await process.stdout.receive()).decode()
        socket = Path(line.split(" ", 1)[1].strip())
        folder = shared_tmp / f"coding-agent-{os.geteuid()}"
        assert socket.parent == folder
        assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700
        assert stat.S_IMODE(os.lstat(socket).st_mode) == 0o600
        await process.stdin.aclose()
        with anyio.fail_after(TIMEOUT):
            await process.wait()
    assert json.loads((session_dir / "session.json").read_text())["id"] == session_dir.name
