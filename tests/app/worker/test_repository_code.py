"""A repository's own configuration never runs code through the agent's git (issue 36 deliver 4).

An untrusted project that arrives with a ``.git/config`` setting ``core.fsmonitor`` to a script
and a ``.gitattributes``-selected filter driver whose commands are scripts (each leaves a marker
file). Through the real worker: ``/index`` (``pi.indexer.start``, what the TUI's command calls)
indexes the project with git's listing, and a ``bash`` command is wrapped in file history's
snapshots; no marker appears. Plain git in the same repository does run them (the trap is armed).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from worker_support import Client, allow, connected, text_of, worker_process, write_script

from chord.context import BACKGROUND
from chord.facets import FacetEnvironment, define_facet
from chord.services import define_service
from coding_agent.session_files.folders import Session
from coding_agent.settings.trust import TrustStore

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]

INDEXER = define_service("pi.indexer")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def arm(repo: Path, markers: Path) -> None:
    """Make ``repo`` a committed repository whose config runs marker scripts."""
    markers.mkdir()
    _git(repo, "init", "-q", ".")
    (repo / ".gitattributes").write_text("*.py filter=evil\n*.md filter=evil\n")
    (repo / "kept.log").write_text("tracked although ignored\n")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "init")
    (repo / ".gitignore").write_text("*.log\n")  # git lists kept.log (tracked), a walk would not

    def script(name: str, body: str = "") -> str:
        path = markers.parent / f"{name}.sh"
        path.write_text(f"#!/bin/sh\ntouch {markers / name}\n{body}")
        path.chmod(0o755)
        return str(path)

    _git(repo, "config", "core.fsmonitor", script("fsmonitor"))
    _git(repo, "config", "filter.evil.clean", script("clean", "cat\n"))
    _git(repo, "config", "filter.evil.smudge", script("smudge", "cat\n"))
    _git(repo, "config", "filter.evil.process", script("process"))
    for name in ("README.md", "main.py"):  # same size, newer: git must hash (filter) them
        stamp = (repo / name).stat()
        os.utime(repo / name, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 10**10))


async def test_index_and_file_history_run_nothing_the_repository_configured(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    repo = session.cwd
    markers = tmp_path / "markers"
    arm(repo, markers)
    assert TrustStore.default(agent_env).get(repo) is None  # an untrusted project
    found: dict[str, Any] = {}

    def indexer_client(env: FacetEnvironment) -> None:
        found["indexer"] = env.use(INDEXER)

    script = write_script(
        tmp_path / "script.json",
        [
            {"toolCalls": [{"name": "bash", "arguments": {"command": "echo hi > out.txt"}}]},
            {"text": "done"},
        ],
    )
    client = Client(approve=allow)
    args = ("--faux-script", str(script), "--permission-mode", "auto")
    async with (
        worker_process(session, agent_env, *args) as worker,
        connected(client, worker.socket, define_facet("test/indexer-client", indexer_client)),
    ):
        await client.root.send({"content": "run it"}, BACKGROUND)  # bash: file history snapshots
        await client.wait_for(client.turn_ended)
        assert (repo / "out.txt").read_text() == "hi\n"

        await found["indexer"].start({}, BACKGROUND)  # what /index calls

        def indexed() -> list[str]:
            texts = [text_of(entry) for entry in client.view["entries"]]
            return [t for t in texts if t.startswith("Indexed ")]

        await client.wait_for(lambda: bool(indexed()))
    # git's listing was used (it keeps the tracked kept.log), and nothing it was told to run ran.
    files = ["README.md", "main.py", "kept.log", ".gitattributes", ".gitignore", "out.txt"]
    match = re.match(r"Indexed (\d+) files", indexed()[0])
    assert match is not None and int(match.group(1)) == len(files)
    assert os.listdir(markers) == []

    # The trap was armed: plain git in the same repository runs the scripts.
    await anyio.run_process(["git", "status"], cwd=repo, check=False)
    assert {"fsmonitor", "process"} <= set(os.listdir(markers))
