"""A session whose transcript is gone fails loudly, naming the file (issue 24 item 10).

The session is used once (``-p``), then its ``storage/main.jsonl`` is deleted. Resuming it with
``-p`` and serving it with a worker both fail with exit code 2 and an error naming the file;
neither opens an empty session in its place, creates the file, or cuts the sidecars.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from worker_support import TIMEOUT, worker_command

from coding_agent.session_files.folders import latest_session

pytestmark = pytest.mark.anyio


async def test_a_missing_main_jsonl_fails_loudly_and_nothing_is_touched(
    project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "Stored."}, {"text": "Never."}]))
    cli = [sys.executable, "-m", "coding_agent.cli.main", "--faux-script", str(script)]
    with anyio.fail_after(TIMEOUT):
        first = await anyio.run_process(
            [*cli, "-p", "first"], env=agent_env, cwd=project, check=False
        )
    assert first.returncode == 0, first.stderr.decode()
    session = latest_session(project, env=agent_env)
    assert session is not None
    main = session.storage_dir / "main.jsonl"
    main.unlink()
    before = {path.name: path.read_bytes() for path in session.storage_dir.iterdir()}
    assert any(name.startswith("sticky-") for name in before), before
    with anyio.fail_after(TIMEOUT):
        again = await anyio.run_process(
            [*cli, "--resume", session.id, "-p", "second"], env=agent_env, cwd=project, check=False
        )
        served = await anyio.run_process(
            worker_command(session, "--faux-script", str(script)), env=agent_env, check=False
        )
    for done, prefix in ((again, "coding-agent: "), (served, "coding-agent worker: ")):
        stderr = done.stderr.decode()
        assert done.returncode == 2, stderr
        assert f"{main}: the session's transcript is missing while sticky-" in stderr
        assert "Traceback" not in stderr and prefix in stderr
    assert b"READY" not in served.stdout
    assert not main.exists(), "no empty session was opened in its place"
    after = {path.name: path.read_bytes() for path in session.storage_dir.iterdir()}
    assert after == before, "the sidecars are as they were"
