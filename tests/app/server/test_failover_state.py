"""What a dead server's session folder held follows the session to the other server (issue 23):
two ``coding-agent serve`` on one PostgreSQL database, each with its own state folder (two
machines). On the first, a turn writes a file, creates another and starts a background job, and
a client switches the thinking level (a launch setting); then the first server and its worker
are SIGKILLed. On the second: ``/rewind`` restores both files from the pre-images kept in the
database, ``session.json`` has the switched setting, and the job's record is there with its
honest end: it ran on the dead machine, so it is reported interrupted (lost), never rerun."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from chord.context import BACKGROUND
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.services import define_service
from chord.transport import connect_unix
from chord.wire import connect_service_source
from coding_agent.session_files.folders import Session, load_session

sys.path.insert(0, str(Path(__file__).parents[1] / "worker"))  # the worker tests' wire client
_support: Any = importlib.import_module("worker_support")
TIMEOUT: float = _support.TIMEOUT
Client: Any = _support.Client
text_of: Any = _support.text_of

pytestmark = pytest.mark.anyio

TOKEN = "failover-token-0123456789abcdef"
TREE = define_service("coding-agent.session-tree")


@asynccontextmanager
async def attached(socket: Path) -> AsyncIterator[tuple[Any, Any]]:
    """A wire client of the worker on ``socket``: its root conversation and the session tree."""
    client = Client()
    tree: list[Any] = []

    def setup(env: FacetEnvironment) -> None:
        tree.append(env.use(TREE))

    async with anyio.create_task_group() as group:
        source = connect_service_source(
            lambda: connect_unix(socket), task_group=group, on_error=lambda _error: None
        )
        try:
            facets = [client.facet(), define_facet("test/tree", setup)]
            async with create_facet_host(facets, service_sources=[source]):
                await client.wait_for(lambda: client.root is not None and not client.root_closed)
                yield client, tree[0]
        finally:
            await source.aclose()
        group.cancel_scope.cancel()


async def _cli(env: dict[str, str], *args: str) -> tuple[int, list[dict[str, Any]], str]:
    with anyio.fail_after(120):
        done = await anyio.run_process(
            [sys.executable, "-m", "coding_agent.cli.main", *args],
            env={**env, "CODING_AGENT_TOKEN": TOKEN}, stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
    lines = [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]
    return done.returncode, lines, done.stderr.decode()


def _blob(conninfo: str, session: str, name: str) -> bytes | None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute(
            "SELECT data FROM pico3_blobs WHERE session = %s AND name = %s", (session, name)
        ).fetchone()
    return None if row is None else bytes(row[0])


@pytest.mark.parametrize("state", ["separate", "shared"])
async def test_file_history_settings_and_job_records_follow_a_session_to_the_other_server(
    servers: Any,
    agent_env: dict[str, str],
    project: Path,
    tmp_path: Path,
    postgres_cluster: Any,
    state: str,
) -> None:
    """``separate``: a state folder per server (two machines): the job is lost with machine A.
    ``shared``: one state folder (one machine): the second server's worker re-finds the job's
    process, which completes once; the file history comes from the database either way."""
    url = f"postgresql://{postgres_cluster.user}@127.0.0.1:{postgres_cluster.port}/postgres"
    readme, created = project / "README.md", project / "created.txt"
    original = readme.read_text()
    effects, gate = tmp_path / "job-effects.log", tmp_path / "gate"
    job = f"echo once >> {effects}; while [ ! -e {gate} ]; do sleep 0.05; done"
    script = tmp_path / "script.json"
    script.write_text(json.dumps([
        {"toolCalls": [{"name": "read", "arguments": {"path": "README.md"}}]},
        {"toolCalls": [
            {"name": "write", "arguments": {"path": "README.md", "content": "rewritten\n"}},
            {"name": "write", "arguments": {"path": "created.txt", "content": "new\n"}},
            {"name": "bash", "arguments": {"command": job, "background": True}},
        ]},
        {"text": "Done on the first server."},
        {"text": "Answered by the second server."},
    ]))  # fmt: skip
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    os.chmod(token, 0o600)
    sockets = Path(tempfile.mkdtemp(prefix="ca-"))
    common = [
        "--faux-script", str(script), "serve", "--cwd", str(project), "--storage", url,
        "--lease", "1", "--listen", "tcp://127.0.0.1:0", "--insecure", "--token-file", str(token),
        "--host-sessions", "0",  # a worker process per session: machine A's is killed with it
    ]  # fmt: skip
    env_a = {**agent_env, "XDG_STATE_HOME": str(tmp_path / "machine-a")}
    machine_b = tmp_path / ("machine-b" if state == "separate" else "machine-a")
    env_b = {**agent_env, "XDG_STATE_HOME": str(machine_b)}
    first = await servers(env_a, [*common, "--socket", str(sockets / "a.sock")], lines=2)
    second = await servers(env_b, [*common, "--socket", str(sockets / "b.sock")], lines=2)
    try:
        code, lines, err = await _cli(
            agent_env, "--json", "set things up", "--approve", "allow", "--insecure",
            "--server", first.tcp,
        )  # fmt: skip
        assert code == 0, err
        assert lines[-1]["text"] == "Done on the first server."
        assert readme.read_text() == "rewritten\n" and created.read_text() == "new\n"
        (folder,) = (tmp_path / "machine-a" / "coding-agent" / "sessions").iterdir()
        session: Session = load_session(folder)
        started = await first.wait_event(lambda e: "worker started" in e, "the first worker")
        worker_pid = int(started.split("pid ")[1].split()[0].rstrip(")"))
        with anyio.fail_after(TIMEOUT):
            while not effects.exists():  # the job's process runs on machine A
                assert first.process.returncode is None
                await anyio.sleep(0.02)
        async with attached(session.socket_path) as (client, _tree):
            await client.root.config_set({"thinkingLevel": "high"}, BACKGROUND)  # /thinking
            with anyio.fail_after(TIMEOUT):  # the worker stores it beside the commits
                while b"high" not in (
                    _blob(postgres_cluster.conninfo, session.id, "coding-agent/launch-settings")
                    or b""
                ):
                    assert not client.root_closed
                    await anyio.sleep(0.02)
        first.process.kill()  # machine A is gone: its server, and the worker with it
        os.kill(worker_pid, signal.SIGKILL)

        code, lines, err = await _cli(
            agent_env, "--json", "how is the job?", "--approve", "allow", "--insecure",
            "--server", f"{second.tcp}/{session.id}",
        )  # fmt: skip
        assert code == 0, err
        assert lines[-1]["text"] == "Answered by the second server."
        if state == "separate":
            assert any("adopting it" in event for event in second.events), second.events
        adopted = load_session(machine_b / "coding-agent" / "sessions" / session.id)
        assert adopted.settings.thinking == "high"  # the launch setting changed on A
        assert not (adopted.path / "file-history").exists()  # it is in the database
        async with attached(adopted.socket_path) as (client, tree):
            assert client.view["config"]["thinkingLevel"] == "high"  # and the conversation's

            def notices() -> list[str]:
                return [text_of(e) for e in client.entries("pi.notice")]

            if state == "separate":  # ran on the dead machine: reported, never rerun
                await client.wait_for(lambda: any("failed (interrupted)" in n for n in notices()))
                assert any("lost" in n and "not started again" in n for n in notices())
            else:  # the same machine's process host re-finds the process: it completes once
                gate.touch()
                await client.wait_for(lambda: any("exited with code 0" in n for n in notices()))
            root = client.view["conversation"]["id"]
            prompt = client.entries("pi.user")[0]["id"]
            plan = await tree.rewind_plan(root, prompt, BACKGROUND)
            actions = {Path(p["path"]).name: p["action"] for p in plan}
            assert actions == {"README.md": "restore", "created.txt": "delete"}, plan
            result = await tree.rewind(root, prompt, "files", [], BACKGROUND)
            assert sorted(Path(p).name for p in result["restored"]) == ["README.md", "created.txt"]
        assert readme.read_text() == original
        assert not created.exists()
        assert effects.read_text() == "once\n", "the job's command ran once"
    finally:
        gate.touch()  # the job's process (detached on "machine A") ends
