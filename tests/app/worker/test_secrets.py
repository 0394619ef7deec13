"""Secrets stay out of what the session runs (issue 36 item 7).

The real worker holds a provider key, the server token and a variable the config lists in
``secrets``; the ``bash`` tool, a background job and a ``!`` command read their own
``/proc/self/environ``: none of them holds a secret, and a variable named in
``secrets_passthrough`` is there. Nor does the worker's, which ``bash`` reads as
``/proc/$PPID/environ``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from worker_support import Client, allow, connected, worker_process, write_script

from chord.context import BACKGROUND
from chord.remote import ServiceCall
from coding_agent.session_files.folders import Session
from coding_agent.worker.main import open_session_host, session_worker_config

pytestmark = pytest.mark.anyio

KEY = "sk-ant-api03-test0123456789abcdefghijklmnop"
TOKEN = "server-token-0123456789"
LISTED = "ghp_listed0123456789abcdefghijklmnopqrstuv"
PASSED = "passed-through-0123456789"
CONFIG = 'secrets = ["GITHUB_TOKEN", "PASSED_SECRET"]\nsecrets_passthrough = ["PASSED_SECRET"]\n'


def _secret_env(agent_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "config"
    (config / "coding-agent").mkdir(parents=True)
    (config / "coding-agent" / "config.toml").write_text(CONFIG)
    return {
        **agent_env,
        "XDG_CONFIG_HOME": str(config),
        "ANTHROPIC_API_KEY": KEY,
        "CODING_AGENT_TOKEN": TOKEN,
        "GITHUB_TOKEN": LISTED,
        "PASSED_SECRET": PASSED,
    }


def _environ(path: Path) -> dict[str, str]:
    pairs = [item.partition("=") for item in path.read_bytes().decode().split("\0") if item]
    return {name: value for name, _, value in pairs}


def _assert_clean(found: dict[str, str]) -> None:
    assert "ANTHROPIC_API_KEY" not in found
    assert "CODING_AGENT_TOKEN" not in found
    assert "GITHUB_TOKEN" not in found
    text = "\n".join(found.values())
    assert KEY not in text and TOKEN not in text and LISTED not in text
    assert found["PASSED_SECRET"] == PASSED  # named in secrets_passthrough
    assert "PATH" in found  # the rest of the environment is there


async def test_bash_and_a_background_job_of_the_real_worker_see_no_secret(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    env = _secret_env(agent_env, tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    script = write_script(
        tmp_path / "script.json",
        [
            {
                "text": "Reading.",
                "toolCalls": [
                    {
                        "name": "bash",
                        "arguments": {
                            "command": f"cat /proc/self/environ > {out}/bash.env; "
                            f"cat /proc/$PPID/environ > {out}/worker.env"
                        },
                    }
                ],
            },
            {
                "text": "In the background.",
                "toolCalls": [
                    {
                        "name": "bash",
                        "arguments": {
                            "command": f"cat /proc/self/environ > {out}/job.env",
                            "background": True,
                        },
                    }
                ],
            },
            {"text": "Done."},
        ],
    )
    client = Client(approve=allow)
    args = ("--faux-script", str(script), "--model", "faux/faux-1")
    async with worker_process(session, env, *args) as worker, connected(client, worker.socket):
        await client.root.send({"content": "show me the environment"}, BACKGROUND)
        await client.wait_for(lambda: client.turn_ended() and bool(client.entries("pi.notice")))
    _assert_clean(_environ(out / "bash.env"))
    _assert_clean(_environ(out / "job.env"))
    # the worker's own environment block, which /proc shows its children, holds no secret
    worker = _environ(out / "worker.env")
    assert KEY not in str(worker) and TOKEN not in str(worker) and LISTED not in str(worker)
    assert PASSED not in str(worker) and "PATH" in worker


async def test_a_bang_command_sees_no_secret(
    session: Session, agent_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _secret_env(agent_env, tmp_path)
    for name, value in env.items():  # in process: the test process is the worker
        monkeypatch.setenv(name, value)
    out = tmp_path / "bang.env"
    config = session_worker_config(session, env=env, fsync=False)
    async with open_session_host(config) as runtime:
        root = await runtime.harness.harness.root(BACKGROUND)
        call = ServiceCall(
            "coding-agent.shell", "run", (root.id, f"cat /proc/self/environ > {out}", False)
        )
        done = await runtime.host.services.invoke(call, BACKGROUND)
    assert isinstance(done, dict) and done["exitCode"] == 0
    _assert_clean(_environ(out))
    assert os.environ["ANTHROPIC_API_KEY"] == KEY  # an in-process host leaves os.environ alone
