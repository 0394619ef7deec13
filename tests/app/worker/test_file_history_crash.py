"""A ``kill -9`` around a ``bash`` command's journal lines, in a git checkout (issue 38, 9).

A file git holds is no longer copied before the command; if the command changes it, its earlier
content is read back from git and stored *after* the command, before the journal line. A session
host in a child process (real JSONL storage with fsync, the real ``bash`` tool and file history)
kills itself with ``SIGKILL`` at one of two points of that:

* ``before-journal`` — the earlier content is stored, the journal line is not written: a new
  host loads the session and its history (nothing to rewind for that command, as the README
  says of a crash during a command; the stored content is whole, just unused);
* ``after-journal`` — the line is written: a new host rewinds the file to what git held.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from chord.remote import ServiceCall
from coding_agent.session_files.folders import Session
from coding_agent.session_files.tree import path_prompts
from coding_agent.worker.main import WorkerConfig, open_session_host

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]

CHILD = """
import os, signal, sys
from pathlib import Path

import anyio

from chord.context import BACKGROUND
from coding_agent.session_files.folders import load_session
from coding_agent.worker import file_history
from coding_agent.worker.main import WorkerConfig, open_session_host

folder, script, point = sys.argv[1:4]
append = file_history.FileHistory._append


def crashing_append(self, *changes):
    bash = any(change.tool == "bash" for change in changes)
    if bash and point == "before-journal":
        os.kill(os.getpid(), signal.SIGKILL)
    append(self, *changes)
    if bash and point == "after-journal":
        os.kill(os.getpid(), signal.SIGKILL)


file_history.FileHistory._append = crashing_append


async def main():
    config = WorkerConfig(
        load_session(folder), faux_script=Path(script), permission_mode="auto", fsync=True
    )
    async with open_session_host(config) as runtime:
        root = await runtime.harness.harness.root(BACKGROUND)
        sent = await root.send("change it", BACKGROUND)
        await sent.wait(BACKGROUND)
        await root.wait_for_idle(BACKGROUND)


anyio.run(main)
"""

STEPS = [
    {
        "text": "Changing it.",
        "toolCalls": [{"name": "bash", "arguments": {"command": "echo changed > tracked.txt"}}],
    },
    {"text": "Changed it."},
    {"text": "Nothing more."},
]


def git(repo: Path, *args: str) -> None:
    env = {**os.environ, "HOME": str(repo.parent), "GIT_CONFIG_NOSYSTEM": "1"}
    identity = ("-c", "user.email=t@example.com", "-c", "user.name=t")
    subprocess.run(["git", *identity, *args], cwd=repo, env=env, check=True, capture_output=True)


@pytest.mark.parametrize("point", ["before-journal", "after-journal"])
async def test_a_bash_change_to_a_file_git_holds_survives_a_sigkill(
    session: Session, tmp_path: Path, point: str
) -> None:
    project = session.cwd
    original = b"what git holds\n" * 100
    (project / "tracked.txt").write_bytes(original)
    git(project, "init", "-q", ".")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "init")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(STEPS))
    child = tmp_path / "child.py"
    child.write_text(CHILD)

    with anyio.fail_after(120):
        done = await anyio.run_process(
            [sys.executable, str(child), str(session.path), str(script), point],
            cwd=project,
            check=False,
            stdout=None,
            stderr=None,
        )
    assert done.returncode == -signal.SIGKILL
    assert (project / "tracked.txt").read_text() == "changed\n"
    # Stored before any journal line: whole, under its hash, in the project's shared store.
    digest = hashlib.sha256(original).hexdigest()
    (blob,) = (session.path.parent.parent / "projects").glob(f"*/file-history/blobs/{digest}")
    assert blob.read_bytes() == original

    config = WorkerConfig(session, faux_script=script, permission_mode="auto", fsync=True)
    async with open_session_host(config) as runtime:

        async def call(method: str, *args: Any) -> Any:
            service = "coding-agent.session-tree"
            with anyio.fail_after(60):
                return await runtime.host.services.invoke(
                    ServiceCall(service, method, args), BACKGROUND
                )

        root = (await runtime.harness.harness.root(BACKGROUND)).id
        first = path_prompts(await call("outline"), root)[0]["id"]
        plan: list[dict[str, Any]] = await call("rewind_plan", root, first)
        if point == "before-journal":
            assert plan == []  # the command's change was never journalled
            return
        assert [(Path(p["path"]).name, p["action"]) for p in plan] == [("tracked.txt", "restore")]
        await call("rewind", root, first, "files", [])
    assert (project / "tracked.txt").read_bytes() == original
