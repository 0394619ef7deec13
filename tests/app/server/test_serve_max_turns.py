"""``-p --server URL --max-turns N``: the limit of a run on a ``coding-agent serve`` session is
enforced by the server's worker, which runs the turn (the prompt goes through its
``coding-agent.turn-limit`` service), exactly as a local run's: the N-th answer's tools run and
the turn ends there, a call past N has its tools stopped, and the limit is that run's alone (the
next prompt in the session runs unlimited). Real ``serve`` and client processes, the scripted
faux model; one
run's worker is SIGKILLed mid-turn and the limit holds on the worker that resumes it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

pytestmark = pytest.mark.anyio

TOKEN = "max-turns-token-0123456789abcdef"


def _touch(*names: str) -> list[dict[str, Any]]:
    calls = [{"toolCalls": [{"name": "bash", "arguments": {"command": f"touch {name}"}}]}
             for name in names]  # fmt: skip
    return [*calls, {"text": "all touched"}]


async def _client(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    with anyio.fail_after(120):
        done = await anyio.run_process(
            [sys.executable, "-m", "coding_agent.cli.main", "-p", "go", "--insecure", *args],
            env={**env, "CODING_AGENT_TOKEN": TOKEN}, cwd=cwd, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


async def test_a_server_session_stops_at_max_turns_and_the_next_prompt_is_not_limited(
    servers: Any, agent_env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(_touch("t1", "t2", "t3", "t4")))
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    os.chmod(token, 0o600)
    server = await servers(agent_env, [
        "--faux-script", str(script), "serve", "--cwd", str(project),
        "--listen", "tcp://127.0.0.1:0", "--insecure", "--token-file", str(token),
    ], lines=2)  # fmt: skip

    done = await _client(agent_env, tmp_path, "--server", server.tcp, "--max-turns", "2",
                         "--approve", "allow", "--output-format", "json")  # fmt: skip
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert (result["subtype"], result["is_error"], result["num_turns"]) == (
        "error_max_turns", True, 2
    )  # fmt: skip
    assert "--max-turns 2" in result["result"]
    # the second answer's tools ran on the server; no third model call was made
    assert (project / "t1").exists() and (project / "t2").exists()
    assert not (project / "t3").exists()

    # the limit was that run's: the session's next prompt runs to the end
    session = result["session_id"]
    done = await _client(agent_env, tmp_path, "--server", f"{server.tcp}/{session}",
                         "--approve", "allow", "--output-format", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    again = json.loads(done.stdout)
    assert (again["subtype"], again["result"]) == ("success", "all touched")
    assert (project / "t3").exists() and (project / "t4").exists()


async def test_a_call_past_the_limit_has_its_tools_stopped_on_the_server(
    servers: Any, agent_env: dict[str, str], project: Path, tmp_path: Path, faux_script: Path
) -> None:
    await anyio.Path(faux_script).write_text(json.dumps(_touch("first", "second")))
    server = await servers(
        agent_env, ["--faux-script", str(faux_script), "serve", "--cwd", str(project)]
    )
    # --approve deny refuses the first call, so the limit's turn ran no tool and the model is
    # called again: past the limit, its tools never run and the run ends error_max_turns
    done = await _client(agent_env, tmp_path, "--server", server.unix, "--max-turns", "1",
                         "--output-format", "stream-json")  # fmt: skip
    assert done.returncode == 1, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0]["type"] == "system" and lines[-1]["type"] == "result"
    assert lines[-1]["subtype"] == "error_max_turns"
    assert not (project / "first").exists() and not (project / "second").exists()
    assert "all touched" not in done.stdout


async def test_the_limit_survives_a_sigkilled_worker_and_counts_the_calls_made_before(
    servers: Any, agent_env: dict[str, str], project: Path, tmp_path: Path, faux_script: Path
) -> None:
    """The limit is stored with the turn: the server's worker is SIGKILLed while the first
    answer's tool runs, the server starts a new worker, which resumes the turn from storage with
    the limit and the one call already made: the second answer's tools run and the turn ends
    there, so two model calls in all (the third's ``touch t3`` never runs)."""
    marker = tmp_path / "ran.txt"
    await anyio.Path(faux_script).write_text(json.dumps([
        {"toolCalls": [{"name": "bash",
                        "arguments": {"command": f"echo ran >> {marker}; sleep 60"}}]},
        *_touch("t2", "t3", "t4"),
    ]))  # fmt: skip
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    os.chmod(token, 0o600)
    server = await servers(agent_env, [
        "--faux-script", str(faux_script), "serve", "--cwd", str(project),
        "--listen", "tcp://127.0.0.1:0", "--insecure", "--token-file", str(token),
    ], lines=2)  # fmt: skip
    client = await anyio.open_process(
        [sys.executable, "-m", "coding_agent.cli.main", "-p", "go", "--insecure", "--server",
         server.tcp, "--max-turns", "2", "--approve", "allow", "--output-format", "json"],
        env={**agent_env, "CODING_AGENT_TOKEN": TOKEN}, cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    output: dict[str, bytes] = {"out": b"", "err": b""}

    async def drain(name: str, stream: Any) -> None:
        async for chunk in stream:
            output[name] += chunk

    async with client, anyio.create_task_group() as group:
        group.start_soon(drain, "out", client.stdout)
        group.start_soon(drain, "err", client.stderr)
        with anyio.fail_after(60):  # the first answer's tool runs on the worker
            while not marker.exists():
                assert client.returncode is None, output
                await anyio.sleep(0.02)
        started = await server.wait_event(lambda e: "worker started" in e, "the worker")
        match = re.search(r"pid (\d+)", started)
        assert match is not None, started
        os.kill(int(match.group(1)), signal.SIGKILL)  # mid-turn, after the first model call
        with anyio.fail_after(120):
            await client.wait()
    out, err = output["out"].decode(), output["err"].decode()
    started = [e for e in server.events if "worker started" in e]
    assert len(started) == 2, server.events  # the turn was finished by a new worker
    assert client.returncode == 1, err
    result = json.loads(out)
    assert (result["subtype"], result["is_error"], result["num_turns"]) == (
        "error_max_turns", True, 2
    )  # fmt: skip
    assert marker.read_text() == "ran\n", "the interrupted command was not run again"
    assert (project / "t2").exists(), "the second call's tools ran"
    assert not (project / "t3").exists(), "a third model call was made after the restart"
    # the stored limit was that turn's: forgotten once it ended, the next prompt is unlimited
    done = await _client(agent_env, tmp_path, "--server", f"{server.tcp}/{result['session_id']}",
                         "--approve", "allow", "--output-format", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "all touched"
    assert (project / "t3").exists() and (project / "t4").exists()
