"""``/rewind`` after a ``kill -9``: the pre-image is durable before the file changes.

A session host runs in a child process (real JSONL storage with fsync, the real ``write`` tool,
the real file history) and is killed with ``SIGKILL`` at one of two points of a ``write``:

* ``after-preimage`` — the journal line and the old content are on disk, the file is not
  written yet;
* ``after-write`` — the file holds the new content, the tool's result is not recorded yet.

The child kills itself at that exact point (a fault injected by the child's own script, around
the real code). A new host then opens the same session (recovery reports the call as
interrupted) and rewinding the files to that prompt gives back the content the file had before.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from chord.context import BACKGROUND
from chord.remote import ServiceCall
from coding_agent.session_files.folders import Session
from coding_agent.session_files.tree import path_prompts
from coding_agent.worker.main import WorkerConfig, open_session_host

pytestmark = pytest.mark.anyio

CHILD = """
import os, signal, sys
from pathlib import Path

import anyio

from chord.context import BACKGROUND
from coding_agent.session_files.folders import load_session
from coding_agent.worker import file_history
from coding_agent.worker.main import WorkerConfig, open_session_host
from coding_agent.worker.tools import spec as spec_module

folder, script, prompt, point = sys.argv[1:5]

if point == "after-preimage":
    record = file_history.FileHistory.record

    def crashing_record(self, *args, **kwargs):
        record(self, *args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)

    file_history.FileHistory.record = crashing_record
elif point == "after-write":
    execute = spec_module.ToolSpec.execute

    async def crashing_execute(self, args, ctx, *, on_update=None):
        result = await execute(self, args, ctx, on_update=on_update)
        if self.name == "write":
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    spec_module.ToolSpec.execute = crashing_execute


async def main():
    config = WorkerConfig(
        load_session(folder), faux_script=Path(script), permission_mode="auto", fsync=True
    )
    async with open_session_host(config) as runtime:
        root = await runtime.harness.harness.root(BACKGROUND)
        sent = await root.send(prompt, BACKGROUND)
        await sent.wait(BACKGROUND)
        await root.wait_for_idle(BACKGROUND)


anyio.run(main)
"""


def _write(content: str) -> dict[str, object]:
    return {"name": "write", "arguments": {"path": "notes.txt", "content": content}}


STEPS = [
    {"text": "First version.", "toolCalls": [_write("version one\n")]},
    {"text": "Wrote it."},
    {"text": "Second version.", "toolCalls": [_write("version two\n")]},
    {"text": "Wrote it again."},
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


@pytest.mark.parametrize("point", ["after-preimage", "after-write"])
async def test_rewind_restores_the_file_after_a_sigkill(
    session: Session, tmp_path: Path, point: str
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(STEPS))
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    notes = session.cwd / "notes.txt"
    assert run_child(session, script, child, "write version one", "none") == 0
    assert notes.read_text() == "version one\n"
    assert run_child(session, script, child, "write version two", point) == -signal.SIGKILL
    expected_now = "version one\n" if point == "after-preimage" else "version two\n"
    assert notes.read_text() == expected_now

    config = WorkerConfig(session, faux_script=script, permission_mode="auto", fsync=False)
    async with open_session_host(config) as runtime:
        root = await runtime.harness.harness.root(BACKGROUND)
        with anyio.fail_after(60):
            await root.wait_for_idle(BACKGROUND)  # recovery: the interrupted call is reported

        async def call(method: str, *args: object) -> object:
            return await runtime.host.services.invoke(
                ServiceCall("coding-agent.session-tree", method, args), BACKGROUND
            )

        outline = await call("outline")
        prompts = path_prompts(outline, root.id)  # type: ignore[arg-type]
        assert [p["text"] for p in prompts] == ["write version one", "write version two"]
        plan = await call("rewind_plan", root.id, prompts[1]["id"])
        action = "unchanged" if point == "after-preimage" else "restore"
        assert [(Path(p["path"]).name, p["action"]) for p in plan] == [("notes.txt", action)]  # type: ignore[index, union-attr]
        result = await call("rewind", root.id, prompts[1]["id"], "files", [])
        assert result["kept"] == []  # type: ignore[index]
        assert notes.read_text() == "version one\n"
        # And all the way back: before the session the file did not exist.
        await call("rewind", root.id, prompts[0]["id"], "files", [])
        assert not notes.exists()
