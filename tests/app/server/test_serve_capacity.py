"""Start-up storms and the bound on running sessions (issue 42, deliver 5): starts past
``--max-starting`` wait their turn instead of timing out together, and a server at
``--max-sessions`` queues the next session's start until a worker ends, so the workers (and
their PostgreSQL connections) never exceed the bound."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

pytestmark = pytest.mark.anyio


async def _clients(
    env: dict[str, str], server: Any, count: int
) -> list[subprocess.CompletedProcess[str]]:
    """``count`` ``-p`` runs on new sessions of ``server``, all started at once."""
    done: list[subprocess.CompletedProcess[str]] = []

    def one() -> None:
        done.append(
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "coding_agent.cli.main",
                    "-p",
                    "hi",
                    "--server",
                    server.unix,
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=240,
                stdin=subprocess.DEVNULL,
            )
        )

    async with anyio.create_task_group() as group:
        for _ in range(count):
            group.start_soon(anyio.to_thread.run_sync, one)
    return done


async def test_a_start_up_storm_is_queued_not_failed(
    servers: Any, agent_env: dict[str, str], project: Path, faux_script: Path
) -> None:
    server = await servers(
        agent_env,
        ["--faux-script", str(faux_script), "serve", "--cwd", str(project), "--max-starting", "1"],
    )
    done = await _clients(agent_env, server, 4)
    for run in done:
        assert run.returncode == 0, run.stderr
        assert run.stdout == "Hello from the server.\n"
    assert sum("worker started" in e for e in server.events) == 4
    assert any("queued for a start" in e for e in server.events), "some start waited its turn"


async def test_at_max_sessions_the_next_start_waits_for_a_worker_to_end(
    servers: Any, agent_env: dict[str, str], project: Path, faux_script: Path
) -> None:
    server = await servers(
        agent_env,
        ["--faux-script", str(faux_script), "serve", "--cwd", str(project), "--max-sessions",
         "1", "--idle", "1"],
    )  # fmt: skip
    done = await _clients(agent_env, server, 2)
    for run in done:
        assert run.returncode == 0, run.stderr
    events = server.events
    assert any("queued: the server runs its --max-sessions" in e for e in events)
    started = [i for i, e in enumerate(events) if "worker started" in e]
    reaped = [i for i, e in enumerate(events) if "reaped" in e]
    assert len(started) == 2 and reaped, events
    assert reaped[0] < started[1], "the second worker started only after the first ended"
