"""Failover (issue 23, deliver 4): two ``coding-agent serve`` on one PostgreSQL database and one
state folder; the server running a session's turn is SIGKILLed (it and its worker) while a tool
runs; the client reconnects to the next address of its list, the other server starts a worker,
which takes the session's lease once it expires (``--lease 1``) and resumes the turn: the
command that was running is not run again, nothing acknowledged is lost, and the turn ends."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

pytestmark = pytest.mark.anyio

TOKEN = "failover-token-0123456789abcdef"


@pytest.mark.parametrize(
    ("state", "hosted"), [("shared", False), ("separate", False), ("shared", True)]
)
async def test_a_sigkilled_servers_session_resumes_on_the_other_server(
    servers: Any,
    agent_env: dict[str, str],
    project: Path,
    tmp_path: Path,
    postgres_cluster: Any,
    state: str,
    hosted: bool,
) -> None:
    """``shared``: both servers use one state folder (one machine). ``separate``: each has its
    own, as on two machines; the second finds the session in the database's session directory
    and makes its folder before it starts the worker. ``hosted``: both servers run their
    sessions in host processes (the default on PostgreSQL, a shared pool and lease renewer): the
    first server's host is SIGKILLed with it, and the other server's host takes the lease."""
    url = f"postgresql://{postgres_cluster.user}@127.0.0.1:{postgres_cluster.port}/postgres"
    marker = tmp_path / "ran.txt"
    script = tmp_path / "failover.json"
    command = f"echo ran >> {marker}; sleep 60; echo slept"
    script.write_text(json.dumps([
        {"toolCalls": [{"name": "bash", "arguments": {"command": command}}]},
        {"text": "Resumed on the other server."},
    ]))  # fmt: skip
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    os.chmod(token, 0o600)
    sockets = Path(tempfile.mkdtemp(prefix="ca-"))  # short: a socket path has ~100 bytes
    common = [
        "--faux-script", str(script), "serve", "--cwd", str(project), "--storage", url,
        "--lease", "1", "--listen", "tcp://127.0.0.1:0", "--insecure", "--token-file", str(token),
    ]  # fmt: skip
    # hosted: the default on PostgreSQL (host processes, here on a pool of 2 each); else a
    # worker process per session
    common += ["--db-pool-size", "2"] if hosted else ["--host-sessions", "0"]
    started_line = "session host started" if hosted else "worker started"
    first = await servers(agent_env, [*common, "--socket", str(sockets / "a.sock")], lines=2)
    other_env = dict(agent_env)
    if state == "separate":
        other_env["XDG_STATE_HOME"] = str(tmp_path / "state-of-the-other-machine")
    second = await servers(other_env, [*common, "--socket", str(sockets / "b.sock")], lines=2)
    client = await anyio.open_process(
        [sys.executable, "-m", "coding_agent.cli.main", "--json", "go", "--approve", "allow",
         "--insecure", "--server", f"{first.tcp},{second.tcp}"],
        env={**agent_env, "CODING_AGENT_TOKEN": TOKEN}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    output: dict[str, bytes] = {"out": b"", "err": b""}

    async def drain(name: str, stream: Any) -> None:
        async for chunk in stream:
            output[name] += chunk

    async with client, anyio.create_task_group() as group:
        group.start_soon(drain, "out", client.stdout)
        group.start_soon(drain, "err", client.stderr)
        with anyio.fail_after(60):  # the tool runs on the first server's worker
            while not marker.exists():
                assert client.returncode is None, output
                await anyio.sleep(0.02)
        started = await first.wait_event(lambda e: started_line in e, "the first worker")
        match = re.search(r"pid (\d+)", started)
        assert match is not None
        killed = time.monotonic()
        first.process.kill()  # the machine is gone: the server, and its worker mid-turn
        os.kill(int(match.group(1)), signal.SIGKILL)
        with anyio.fail_after(120):
            await client.wait()
        print(f"failover: the turn ended {time.monotonic() - killed:.2f} s after the SIGKILL")
    out, err = output["out"].decode(), output["err"].decode()
    assert client.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[-1]["ok"] is True and lines[-1]["text"] == "Resumed on the other server."
    await second.wait_event(lambda e: started_line in e, "the second server's worker")
    if state == "separate":
        assert any("adopting it" in event for event in second.events), second.events
    assert marker.read_text() == "ran\n", "the interrupted command was not run again"
    results = [
        line["entry"] for line in lines
        if line.get("type") == "entry.added" and line["entry"].get("kind") == "pi.tool_result"
    ]  # fmt: skip
    assert len(results) == 1, "one result for the one call"
    # Entries committed while the client was reconnecting are reported from the rehydrated
    # view: the --json stream has each of the turn's entries once, whichever side it came from.
    added = [line["entry"]["id"] for line in lines if line.get("type") == "entry.added"]
    assert len(added) == len(set(added)), added
    assert "interrupted" in json.dumps(results[0]).lower()
