"""``coding-agent export ID`` exports the branch the user is on (issue 38 item 3).

A session is used in a real session host: two prompts, a rewind to the first (an empty branch,
made last), and a switch back to the first branch (as ``/branch 1`` or Ctrl+B does). The real
binary's ``export`` then writes the branch the user is on, not the newest-made empty one; an
empty branch exports with a warning, and a session with no conversation is refused with a
message saying so. ``coding-agent sessions`` lists the branches by the numbers ``--branch`` takes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from chord.remote import ServiceCall
from coding_agent.session_files.folders import Session, create_session
from coding_agent.session_files.tree import path_prompts
from coding_agent.worker.main import SessionRuntime, WorkerConfig, open_session_host

pytestmark = pytest.mark.anyio

TREE = "coding-agent.session-tree"


async def _call(runtime: SessionRuntime, method: str, *args: Any) -> Any:
    return await runtime.host.services.invoke(ServiceCall(TREE, method, args), BACKGROUND)


async def _prompt(runtime: SessionRuntime, conversation: int, text: str) -> None:
    handle = await runtime.harness.conversation(conversation, BACKGROUND)
    assert handle is not None
    sent = await handle.send(text, BACKGROUND)
    with anyio.fail_after(60):
        await sent.wait(BACKGROUND)
        await handle.wait_for_idle(BACKGROUND)


async def _export(env: dict[str, str], cwd: Path, *args: str) -> tuple[int, str, str]:
    command = [sys.executable, "-m", "coding_agent.cli.main", "export", *args]
    with anyio.fail_after(60):
        done = await anyio.run_process(command, env=env, cwd=cwd, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_export_writes_the_branch_the_user_is_on_and_warns_on_an_empty_one(
    session: Session, tmp_path: Path, agent_env: dict[str, str]
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "First answer."}, {"text": "Second answer."}]))
    config = WorkerConfig(session, faux_script=script, fsync=False, installed_features=True)
    async with open_session_host(config) as runtime:
        root = (await runtime.harness.harness.root(BACKGROUND)).id
        await _prompt(runtime, root, "the first question")
        await _prompt(runtime, root, "the second question")
        first = path_prompts(await _call(runtime, "outline"), root)[0]["id"]
        rewound = (await _call(runtime, "rewind", root, first, "conversation", []))["conversation"]
        assert rewound != root
        assert session.current_branch() == rewound, "a branch just made is the one the user is on"
        await _call(runtime, "visit", root)  # /branch 1, Ctrl+B
        assert session.current_branch() == root

    code, page, warning = await _export(agent_env, session.cwd, session.id, "-o", "-")
    assert code == 0 and warning == ""
    assert "the second question" in page and "Second answer." in page

    # --branch takes the number users see: the rewind branch was made second
    code, page, warning = await _export(
        agent_env, session.cwd, session.id, "--branch", "2", "-o", "-"
    )
    assert code == 0
    assert "the second question" not in page and "branch 2" in page
    assert f"warning: branch 2 of session {session.id} has no prompt or answer" in warning
    code, _, error = await _export(agent_env, session.cwd, session.id, "--branch", "3")
    assert code == 2
    assert f"session {session.id} has no branch 3 (its branches: 1 to 2;" in error

    # `coding-agent sessions` lists the branches under the session, by the same numbers, with
    # the one the user is on marked
    with anyio.fail_after(60):
        listed = await anyio.run_process(
            [sys.executable, "-m", "coding_agent.cli.main", "sessions"],
            env=agent_env,
            cwd=session.cwd,
        )
    head, *rows = listed.stdout.decode().splitlines()
    assert head.startswith(session.id)
    assert rows[0] == "  * branch 1  the first question", rows
    assert rows[1].startswith("    branch 2  "), rows
    assert len(rows) == 2


async def test_exporting_a_session_with_no_conversation_says_so(
    project: Path, agent_env: dict[str, str]
) -> None:
    empty = create_session(project, env=agent_env)
    (empty.storage_dir / "main.jsonl").write_bytes(b"")  # as a worker that never opened leaves it
    code, out, error = await _export(agent_env, project, empty.id)
    assert code == 2 and out == ""
    assert error == (
        f"coding-agent: error: session {empty.id} has no conversation yet, so there is nothing "
        f"to export (send a prompt in it first: coding-agent --resume {empty.id})\n"
    )
    assert "min()" not in error
