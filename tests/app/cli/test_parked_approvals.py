"""Parked approvals (issue 43 deliver 3): ``-p --wait-for-approval`` leaves a dialog open for
another client instead of denying it, through a worker restart, and answers it as ``--approve``
says when the wait runs out. The real binary; the other client is a chord wire client of the
session's worker, as ``coding-agent attach`` is."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.text import TextReceiveStream

from chord import (
    Context,
    FacetEnvironment,
    connect_service_source,
    connect_unix,
    create_facet_host,
    define_facet,
    define_service,
)
from coding_agent.session_files.folders import list_sessions

pytestmark = pytest.mark.anyio

BINARY = Path(sys.executable).with_name("coding-agent")
TIMEOUT = 120
APPROVALS = define_service("pi.approval-dialog")
STEPS = [
    {"toolCalls": [{"name": "bash", "arguments": {"command": "touch parked.txt"}}]},
    {"text": "Touched."},
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (tmp_path / "script.json").write_text(json.dumps(STEPS))
    return folder


class Run:
    """The headless process, its stderr read line by line as it comes."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self._buffer = ""
        assert process.stderr is not None
        self._stream = TextReceiveStream(process.stderr)

    async def line_with(self, text: str, count: int = 1) -> None:
        while sum(text in line for line in self.lines) < count:
            chunk = await self._stream.receive()
            self._buffer += chunk
            *complete, self._buffer = self._buffer.split("\n")
            self.lines.extend(complete)


async def _answer(session: Any, decision: str) -> None:
    """Answer the open approval as a second client of the session's worker."""
    answered = anyio.Event()

    def setup(env: FacetEnvironment) -> None:
        async def on_dialog(dialog: Any, ctx: Context) -> None:
            try:
                await dialog.decide({"decision": decision, "by": "tui"}, ctx)
            finally:  # the answer closes the dialog, which may cancel this call before it returns
                answered.set()

        env.observe(APPROVALS, on_dialog)

    async with anyio.create_task_group() as group:
        source = connect_service_source(lambda: connect_unix(session.socket_path), task_group=group)
        async with create_facet_host(
            [define_facet("test/answer", setup)], service_sources=[source]
        ):
            await answered.wait()
        await source.aclose()
        group.cancel_scope.cancel()


async def _start(project: Path, env: dict[str, str], *flags: str) -> Run:
    process = await anyio.open_process(
        [str(BINARY), "--faux-script", str(project.parent / "script.json"), "--linger", "0.5",
         *flags, "--json",
         "touch it"],
        cwd=project, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return Run(process)


async def _result(run: Run) -> dict[str, Any]:
    assert run.process.stdout is not None
    out = b""
    async for chunk in run.process.stdout:
        out += chunk
    await run.process.wait()
    return json.loads(out.decode().splitlines()[-1])


async def test_a_parked_approval_is_answered_by_another_client_even_after_a_worker_restart(
    project: Path, agent_env: dict[str, str]
) -> None:
    with anyio.fail_after(TIMEOUT):
        run = await _start(project, agent_env, "--wait-for-approval")
        async with run.process:
            await run.line_with("waiting for approval of the bash call (touch parked.txt)")
            (session,) = list_sessions(project, env=agent_env)
            assert f"coding-agent attach {session.id}" in run.lines[-1]
            # The worker dies while the dialog waits: it is restarted and the dialog reopens.
            pid = int(session.lock_path.read_text().split()[0])
            os.kill(pid, signal.SIGKILL)
            await run.line_with("waiting for approval of the bash call", count=2)
            assert not (project / "parked.txt").exists()
            await _answer(session, "allow")
            result = await _result(run)
    assert run.process.returncode == 0, "\n".join(run.lines)
    assert result["ok"] is True and result["text"] == "Touched."
    assert (project / "parked.txt").exists()


async def test_a_parked_approval_nobody_answers_is_denied_when_the_wait_runs_out(
    project: Path, agent_env: dict[str, str]
) -> None:
    with anyio.fail_after(TIMEOUT):
        run = await _start(project, agent_env, "--wait-for-approval", "0.2")
        async with run.process:
            result = await _result(run)
            await run.line_with("blocked the bash call")
    assert run.process.returncode == 3
    assert result["blocked"] == ["bash (touch parked.txt)"]
    assert any("waiting 0.2 s" in line for line in run.lines)
    assert not (project / "parked.txt").exists()


def test_wait_for_approval_needs_a_headless_run(agent_env: dict[str, str], project: Path) -> None:
    done = subprocess.run(
        [str(BINARY), "--wait-for-approval"], cwd=project, env=agent_env, capture_output=True,
        text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--wait-for-approval is for -p/--json" in done.stderr
