""" "Allow always while this repository's git configuration stays as is", through the real
worker and the app's store (``coding_agent.settings.git_approvals``): the approval outlives the
worker, ``-p`` honours it, an edited hook asks again, and a corrupt store is an error naming
the file, never silently reset.

The repository is the session's folder with a ``pre-commit`` hook that leaves a marker; the
user's ``config.toml`` allows ``Bash(git commit:*)``, so without the check every commit would
run its hook unasked.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from permissions_support import CommandTui, presentation
from worker_support import Client, connected, deny, text_of, worker_process, write_script

from chord.context import BACKGROUND, Context
from coding_agent.cli.headless import run_headless
from coding_agent.session_files.folders import Session, create_session
from coding_agent.settings.git_approvals import GitApprovalStore
from coding_agent.worker.main import WorkerConfig

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]

COMMIT = "git commit -q --allow-empty -m x"


@pytest.fixture
def env(agent_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """A private home and configuration folder; the user allows ``Bash(git commit:*)``."""
    found = {
        **agent_env,
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "GIT_CONFIG_GLOBAL": "/dev/null",
    }
    config = tmp_path / "config" / "coding-agent" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[permissions]\nallow = ["Bash(git commit:*)"]\n')
    return found


def arm(repo: Path, marker: Path) -> Path:
    """A repository in ``repo`` whose ``pre-commit`` hook touches ``marker``; the hook."""
    for args in (
        ["init", "-q", "."],
        ["config", "user.name", "t"],
        ["config", "user.email", "t@example.com"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    return hook


async def remember(facade: Any, request: dict[str, Any], ctx: Context) -> None:
    await facade.decide({"decision": "allow", "by": "test", "remember": True}, BACKGROUND)


async def commit_once(session: Session, env: dict[str, str], tmp: Path, client: Client) -> str:
    """One turn of a fresh worker whose model runs :data:`COMMIT`; the tool result."""
    steps = [{"toolCalls": [{"name": "bash", "arguments": {"command": COMMIT}}]}, {"text": "ok"}]
    script = write_script(tmp / "script.json", steps)
    async with (
        worker_process(session, env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "commit"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        (result,) = [text_of(entry) for entry in client.entries("pi.tool_result")]
    return result


async def test_a_remembered_approval_outlives_the_worker_and_holds_in_headless_mode(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    marker = tmp_path / "HOOK-RAN"
    hook = arm(project, marker)
    first = Client(approve=remember)
    result = await commit_once(create_session(project, env=env), env, tmp_path, first)
    assert result == "(no output)"  # git commit -q, and its hook, ran
    (dialog,) = first.approvals
    assert dialog.request["repositories"][0]["gitDir"] == str((project / ".git").resolve())
    assert marker.exists()
    store = GitApprovalStore.default(env)
    assert [a["gitDir"] for a in store.listed()] == [str((project / ".git").resolve())]

    marker.unlink()  # a new worker (a restart): the approval is read from the file
    second = Client(approve=deny)
    await commit_once(create_session(project, env=env), env, tmp_path, second)
    assert second.approvals == []
    assert marker.exists()

    marker.unlink()  # -p asks nobody, and needs not: the user approved it in the TUI
    script = write_script(
        tmp_path / "headless.json",
        [{"toolCalls": [{"name": "bash", "arguments": {"command": COMMIT}}]}, {"text": "ok"}],
    )
    config = WorkerConfig(create_session(project, env=env), faux_script=script, env=env)
    out, err = io.StringIO(), io.StringIO()
    assert await run_headless("commit", config, mode="print", out=out, err=err) == 0, err.getvalue()
    assert marker.exists()

    marker.unlink()  # an edited hook is another configuration: it asks again
    hook.write_text(hook.read_text() + "echo edited\n")
    third = Client(approve=deny)
    result = await commit_once(create_session(project, env=env), env, tmp_path, third)
    assert len(third.approvals) == 1
    assert result == "Tool call blocked: denied by test"
    assert not marker.exists()


async def test_a_corrupt_store_is_an_error_naming_the_file_and_is_left_as_it_is(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    marker = tmp_path / "HOOK-RAN"
    arm(project, marker)
    store = GitApprovalStore.default(env)
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_text("{not json")
    client = Client(approve=deny)
    result = await commit_once(create_session(project, env=env), env, tmp_path, client)
    (dialog,) = client.approvals
    reason = dialog.request["reason"]
    assert f"The remembered approvals could not be read: {store.path}: the git approvals" in reason
    assert "repositories" not in dialog.request  # nowhere to keep it: not offered
    assert result == "Tool call blocked: denied by test"
    assert not marker.exists()
    with pytest.raises(ValueError, match=f"{store.path}: the git approvals file is corrupt"):
        store.approve(str(project / ".git"), "f", [])
    assert store.path.read_text() == "{not json"  # never silently reset


async def test_permissions_lists_an_approval_and_forgets_it(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    marker = tmp_path / "HOOK-RAN"
    arm(project, marker)
    git_dir = str((project / ".git").resolve())
    store = GitApprovalStore.default(env)
    store.approve(git_dir, "an older configuration", ["./old.sh (core.fsmonitor in .git/config)"])
    steps = [{"toolCalls": [{"name": "bash", "arguments": {"command": COMMIT}}]}, {"text": "ok"}]
    script = write_script(tmp_path / "script.json", steps)
    client = Client(approve=remember)
    async with (
        worker_process(create_session(project, env=env), env, "--faux-script", str(script)) as w,
        connected(client, w.socket),
    ):
        await client.root.send({"content": "commit"}, BACKGROUND)  # the hook is not ./old.sh
        await client.wait_for(client.turn_ended)
        assert len(client.approvals) == 1  # asked: the approval was of another configuration
        (kept,) = store.listed()
        assert kept["programs"] == [".git/hooks/pre-commit (the pre-commit hook in .git/hooks)"]
        tui = CommandTui()
        async with presentation(w.socket, tui), anyio.create_task_group() as group:
            group.start_soon(tui.commands["permissions"], "", BACKGROUND)
            _title, labels, respond = await tui.next_dialog()
            (shown,) = [label for label in labels if label.startswith("git:0=")]
            assert shown.startswith(
                f"git:0=git    {git_dir}  — its git configuration as allowed on"
            )
            respond("git:0")
            title, _labels, respond = await tui.next_dialog()
            assert title == f"Forget the approval of {git_dir}'s git configuration?"
            assert tui.bodies[-1] == f"It runs:\n• {kept['programs'][0]}"
            respond("remove")
        assert tui.notices[-1] == f"Forgot the approval of {git_dir}'s git configuration"
    assert store.listed() == []
