"""The ``todo`` tool in a real session host: kept in the rewindable ``coding-agent.todo``
namespace, projected into the view, surviving a ``kill -9`` and following a fork.

A session host runs in a child process (real JSONL storage with fsync, the faux model making the
calls) and is killed with ``SIGKILL`` at one of two points of the second turn:

* ``during-todo`` — inside the ``todo`` call, before its result (and the list with it) is
  committed: the restarted worker runs the call again (it is replay-safe), so the list is the
  new one;
* ``after-todo`` — in the next tool call (``ls``), after the ``todo`` result's commit: the new
  list is in the journal.

A new host then opens the session; once recovery is done the view shows the second list, and a
fork at the end of the first turn has the first list.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from coding_agent.session_files.folders import Session
from coding_agent.worker.main import WorkerConfig, open_session_host
from coding_agent.worker.tools import TODO_NAMESPACE

pytestmark = pytest.mark.anyio

CHILD = """
import os, signal, sys
from pathlib import Path

import anyio

from chord.context import BACKGROUND
from coding_agent.session_files.folders import load_session
from coding_agent.worker.main import WorkerConfig, open_session_host
from coding_agent.worker.tools import spec as spec_module

folder, script, prompt, point = sys.argv[1:5]
execute = spec_module.ToolSpec.execute
victim = {"during-todo": "todo", "after-todo": "ls"}.get(point)


async def crashing_execute(self, args, ctx, *, on_update=None):
    if self.name == victim:
        os.kill(os.getpid(), signal.SIGKILL)
    return await execute(self, args, ctx, on_update=on_update)


spec_module.ToolSpec.execute = crashing_execute


async def main():
    config = WorkerConfig(
        load_session(folder), faux_script=Path(script), permission_mode="ask", fsync=True
    )
    async with open_session_host(config) as runtime:
        root = await runtime.harness.harness.root(BACKGROUND)
        sent = await root.send(prompt, BACKGROUND)
        await sent.wait(BACKGROUND)
        await root.wait_for_idle(BACKGROUND)


anyio.run(main)
"""

FIRST = [
    {"content": "Read the code", "status": "in_progress", "activeForm": "Reading the code"},
    {"content": "Fix the bug", "status": "pending", "activeForm": "Fixing the bug"},
]
SECOND = [
    {"content": "Read the code", "status": "completed", "activeForm": "Reading the code"},
    {"content": "Fix the bug", "status": "in_progress", "activeForm": "Fixing the bug"},
]


def _todo(items: list[dict[str, str]]) -> dict[str, Any]:
    return {"name": "todo", "arguments": {"todos": items}}


STEPS = [
    {"text": "Planning.", "toolCalls": [_todo(FIRST)]},
    {"text": "Planned."},
    {"text": "Progress.", "toolCalls": [_todo(SECOND)]},
    {"text": "Looking around.", "toolCalls": [{"name": "ls", "arguments": {}}]},
    {"text": "Done for now."},
    {"text": "Nothing more."},
]


def run_child(session: Session, script: Path, child: Path, prompt: str, point: str) -> int:
    done = subprocess.run(
        [sys.executable, str(child), str(session.path), str(script), prompt, point],
        cwd=session.cwd,
        timeout=120,
        check=False,
    )
    return done.returncode


async def _todos(conversation: Any) -> list[dict[str, str]]:
    watch = await conversation.watch(BACKGROUND)
    try:
        return watch.view["plugins"][TODO_NAMESPACE]["todos"]
    finally:
        watch.stop()


@pytest.mark.parametrize("point", ["during-todo", "after-todo"])
async def test_the_todo_list_survives_a_sigkill_and_follows_a_fork(
    session: Session, tmp_path: Path, point: str
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(STEPS))
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    assert run_child(session, script, child, "make a plan", "none") == 0
    assert run_child(session, script, child, "go on", point) == -signal.SIGKILL

    config = WorkerConfig(session, faux_script=script, permission_mode="ask", fsync=False)
    async with open_session_host(config) as runtime:
        root = await runtime.harness.harness.root(BACKGROUND)
        with anyio.fail_after(60):
            await root.wait_for_idle(BACKGROUND)  # recovery: replay-safe calls run again
        assert await _todos(root) == SECOND
        entries = list(reversed(await root.entries(BACKGROUND, limit=100)))
        messages: list[Any] = [e.model[0] for e in entries if e.kind == "pi.tool_result"]  # pyright: ignore[reportIndexIssue]
        results = [m for m in messages if m["toolName"] == "todo"]
        assert [r["isError"] for r in results] == [False, False]
        assert "[x] Read the code\n[~] Fix the bug" in results[1]["content"][0]["text"]
        first_turn_end = next(
            e.id for e in entries if e.kind == "pi.assistant" and "Planned." in json.dumps(e.model)
        )
        fork = await root.fork(first_turn_end, BACKGROUND)
        assert await _todos(fork) == FIRST
