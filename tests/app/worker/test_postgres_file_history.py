"""File history with the session's commits in PostgreSQL (issue 23): the pre-images ``/rewind``
restores are the session's blobs in the database, not files in the session folder, so a worker
of another folder (another server) rewinds them; a content over ``pico3.BLOB_LIMIT`` is not
kept, and rewinding reports that file and leaves it as it is."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_session_tree import call, prompt

from chord.context import BACKGROUND
from coding_agent.session_files.folders import Session, adopt_session
from coding_agent.session_files.tree import path_prompts
from coding_agent.worker.main import WorkerConfig, open_session_host
from pico3 import BLOB_LIMIT

pytestmark = pytest.mark.anyio


async def test_a_worker_of_another_folder_rewinds_from_the_database_except_an_oversized_file(
    session: Session, tmp_path: Path, postgres_cluster: Any
) -> None:
    url = f"postgresql://{postgres_cluster.user}@127.0.0.1:{postgres_cluster.port}/postgres"
    project = session.cwd
    big = project / "big.bin"
    big.write_bytes(b"x" * (BLOB_LIMIT + 1))
    main = (project / "main.py").read_text()
    steps = [
        {
            "text": "Changing two files.",
            "toolCalls": [
                {
                    "name": "bash",
                    "arguments": {"command": "echo small > big.bin; echo changed > main.py"},
                }
            ],
        },
        {"text": "Changed."},
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps(steps))

    def config(of: Session) -> WorkerConfig:
        return WorkerConfig(
            of, faux_script=script, permission_mode="auto", fsync=False, storage=url
        )

    async with open_session_host(config(session)) as runtime:
        root = (await runtime.harness.harness.root(BACKGROUND)).id
        await prompt(runtime, root, "change them")
    assert (project / "main.py").read_text() == "changed\n"
    assert not (session.path / "file-history").exists()  # nothing of it in the folder

    shutil.rmtree(session.path)  # the first server's machine is gone with its folder
    other = adopt_session(session.metadata, env={"XDG_STATE_HOME": str(tmp_path / "other")})
    async with open_session_host(config(other)) as runtime:
        outline = await call(runtime, "outline")
        first = path_prompts(outline, root)[0]["id"]
        plan = await call(runtime, "rewind_plan", root, first)
        actions = {Path(p["path"]).name: p["action"] for p in plan}
        assert actions == {"main.py": "restore", "big.bin": "lost"}, plan
        result = await call(runtime, "rewind", root, first, "files", ["big.bin"])
        assert [Path(p).name for p in result["restored"]] == ["main.py"]
        assert [Path(p).name for p in result["kept"]] == ["big.bin"]
    assert (project / "main.py").read_text() == main
    assert big.read_bytes() == b"small\n"  # not kept, so left as it is
