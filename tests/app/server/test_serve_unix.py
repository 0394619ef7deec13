"""``coding-agent serve`` over its Unix socket: workers started on demand, reaped when idle,
``-p`` end to end through the server, and the socket's folder and file modes."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_agent.server.preface import Request
from coding_agent.server.remote import ServerRefused, connect_server, parse_server_url
from coding_agent.session_files.folders import list_sessions, open_session

pytestmark = pytest.mark.anyio


def _cli(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coding_agent.cli.main", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


async def test_p_runs_on_the_server_and_the_worker_is_started_on_demand_and_reaped_when_idle(
    servers: Any, agent_env: dict[str, str], project: Path, faux_script: Path, tmp_path: Path
) -> None:
    server = await servers(
        agent_env, ["--faux-script", str(faux_script), "serve", "--cwd", str(project),
                    "--idle", "0.5"],
    )  # fmt: skip
    assert list_sessions(env=agent_env) == [], "nothing is started before a client asks"
    elsewhere = tmp_path / "client-folder"
    elsewhere.mkdir()
    done = await anyio.to_thread.run_sync(
        lambda: _cli(agent_env, "--json", "hello", "--server", server.unix, cwd=elsewhere)
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0]["type"] == "session" and lines[0]["cwd"] == str(project)
    assert lines[-1] == {"type": "result", "ok": True, "status": "done",
                         "text": "Hello from the server."}  # fmt: skip
    session_id = lines[0]["session"]
    session = open_session(session_id, env=agent_env)
    assert session.cwd == project, "the session works in the server's project folder"
    started = await server.wait_event(lambda e: "worker started" in e, "a worker start")
    assert session_id in started
    # Nobody is connected and nothing runs: the worker lingers 0.5 s, stops, the server reaps it.
    await server.wait_event(lambda e: session_id in e and "reaped" in e, "the idle worker's reap")
    assert not session.worker_running()
    # The next client of the session gets a new worker, which resumes from storage.
    mark = len(server.events)
    address, _ = parse_server_url(server.unix)
    conn, info = await connect_server(address, Request(session=session_id))
    try:
        assert info["session"] == session_id
        await server.wait_event(lambda e: "worker started" in e, "a second start", start=mark)
        assert session.worker_running()
    finally:
        await conn.aclose()
    again = await anyio.to_thread.run_sync(
        lambda: _cli(agent_env, "-p", "more", "--server", server.unix, cwd=elsewhere)
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout == "Hello from the server.\n"  # a new session, so the script restarts


async def test_the_unix_socket_is_private_and_unknown_sessions_are_refused(
    servers: Any, agent_env: dict[str, str], project: Path
) -> None:
    server = await servers(agent_env, ["serve", "--cwd", str(project)])
    path = Path(server.unix.removeprefix("unix:"))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    address, _ = parse_server_url(server.unix)
    with pytest.raises(ServerRefused) as refused:
        await connect_server(address, Request(session="no-such-session"))
    assert refused.value.code == "not_found"
    assert "no session 'no-such-session' on this server" in str(refused.value)
    assert "coding-agent/sessions" not in str(refused.value)  # its folders stay its own
    assert list_sessions(env=agent_env) == []
    assert server.process.returncode is None


async def test_a_list_of_servers_skips_one_that_is_down_and_names_each_when_all_are(
    servers: Any, agent_env: dict[str, str], project: Path, faux_script: Path, tmp_path: Path
) -> None:
    server = await servers(
        agent_env, ["--faux-script", str(faux_script), "serve", "--cwd", str(project)]
    )
    dead = "tcp://127.0.0.1:1"  # nothing listens on port 1
    done = await anyio.to_thread.run_sync(
        lambda: _cli(agent_env, "-p", "hi", "--insecure", "--server", f"{dead},{server.unix}",
                     cwd=tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello from the server.\n"
    gone = tmp_path / "gone.sock"
    down = await anyio.to_thread.run_sync(
        lambda: _cli(agent_env, "-p", "hi", "--insecure", "--server", f"{dead},unix:{gone}",
                     cwd=tmp_path),
    )  # fmt: skip
    assert down.returncode == 1
    assert "no server of the list answered" in down.stderr
    assert "tcp://127.0.0.1:1" in down.stderr and str(gone) in down.stderr


def test_a_turn_that_ended_while_the_connection_was_down_is_read_from_the_view() -> None:
    from coding_agent.cli.headless import TurnOutcome, _ended_meanwhile

    answer = {"id": 7, "kind": "pi.assistant", "model": [
        {"role": "assistant", "content": [{"type": "text", "text": "Done meanwhile."}]}]}  # fmt: skip
    user = {"id": 6, "kind": "pi.user"}
    live = {"entries": [user], "turn": {"inputs": [3], "tools": []}, "inbox": []}
    queued = {"entries": [user], "inbox": [{"id": 3, "mode": "followUp"}]}
    ended = {"entries": [user, answer], "inbox": []}
    for view in (live, queued):
        assert not _ended_meanwhile(view, 3, TurnOutcome())
    turn = TurnOutcome()
    assert _ended_meanwhile(ended, 3, turn)
    assert (turn.status, turn.text) == ("done", "Done meanwhile.")
    failed = TurnOutcome()
    assert _ended_meanwhile({"entries": [user], "inbox": []}, 3, failed)
    assert failed.status == "failed" and "connection was down" in failed.detail


async def test_storage_dir_is_the_state_folder_of_the_servers_sessions(
    servers: Any, agent_env: dict[str, str], project: Path, faux_script: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "server-state"
    server = await servers(
        agent_env,
        ["--faux-script", str(faux_script), "serve", "--cwd", str(project), "--storage",
         str(folder)],
    )  # fmt: skip
    done = await anyio.to_thread.run_sync(
        lambda: _cli(agent_env, "-p", "hi", "--server", server.unix, "--verbose", cwd=tmp_path)
    )
    assert done.returncode == 0, done.stderr
    assert list_sessions(env=agent_env) == [], "not in the client's (default) state folder"
    [session] = list_sessions(env={"XDG_STATE_HOME": str(folder)})
    assert f"session {session.id} " in done.stderr
    assert stat.S_IMODE(os.stat(folder / "coding-agent" / "sessions").st_mode) == 0o700


def test_attach_to_a_server_names_the_session_it_needs(
    agent_env: dict[str, str], tmp_path: Path
) -> None:
    done = _cli(agent_env, "attach", "tcp://127.0.0.1:7433", cwd=tmp_path)
    assert done.returncode == 2
    assert "name the session: tcp://HOST:PORT/SESSION" in done.stderr
    resumed = _cli(
        agent_env, "-p", "hi", "--continue", "--server", "tcp://127.0.0.1:7433", cwd=tmp_path
    )
    assert resumed.returncode == 2
    assert "--server takes the session in its URL" in resumed.stderr


async def test_a_servers_wait_for_approval_parks_the_approvals_of_p_runs(
    servers: Any, agent_env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    """Issue 43 deliver 3, the server default: ``serve --wait-for-approval 0.3`` parks a ``-p``
    run's approval (one line says how to answer it) instead of denying at once; nobody answers,
    so it is denied after the wait (exit 3). A run's own flag would win over the default."""
    script = tmp_path / "parked.json"
    script.write_text(json.dumps([
        {"toolCalls": [{"name": "bash", "arguments": {"command": "touch parked.txt"}}]},
        {"text": "done"},
    ]))  # fmt: skip
    server = await servers(
        agent_env, ["--faux-script", str(script), "serve", "--cwd", str(project),
                    "--wait-for-approval", "0.3"],
    )  # fmt: skip
    done = await anyio.to_thread.run_sync(
        lambda: _cli(agent_env, "-p", "go", "--server", server.unix, cwd=tmp_path)
    )
    assert done.returncode == 3, done.stderr
    assert "waiting for approval of the bash call (touch parked.txt)" in done.stderr
    assert "waiting 0.3 s" in done.stderr
    assert "blocked the bash call (touch parked.txt)" in done.stderr
    assert not (project / "parked.txt").exists()
