"""A session reopened after ``/rewind`` or ``/fork`` shows the branch it is on, and a prompt
lands there: ``--resume``/``--continue`` (a TUI with a supervisor), ``attach`` (a TUI without
one, on the worker that lingers) and ``-p --continue`` (headless, in process). Real worker
processes, the real TUI driven with Textual's Pilot."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from coding_agent.cli.headless import run_print
from coding_agent.session_files.export import branch_entries
from coding_agent.session_files.folders import Session

from .test_tree_commands import choose, keeper, turn, user_texts

pytestmark = pytest.mark.anyio

STEPS = [
    {"text": "Writing.", "toolCalls": [{"name": "write", "arguments": {"path": "a.txt",
                                                                    "content": "one\n"}}]},
    {"text": "Written."},
    {"text": "Second answer."},
    {"text": "Third answer."},
]  # fmt: skip


def prompts(session: Session, branch: int) -> list[str]:
    """The prompts stored in conversation ``branch`` (its own and inherited), oldest first."""
    _, _, entries = branch_entries(session, branch)
    out: list[str] = []
    for entry in entries:
        if entry["kind"] == "pi.user":
            content = entry["model"][0]["content"]
            out.append(content if isinstance(content, str) else content[0]["text"])
    return out


async def test_rewind_then_resume_and_continue_follow_the_new_branch(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    written = session.cwd / "a.txt"
    seen: dict[str, Any] = {}

    async def rewind(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        seen["root"] = root = app.client.conversation_id
        await turn(kit, pilot, "alpha", "Written.")
        assert written.read_text() == "one\n"
        await pilot.press("escape", "escape")  # /rewind, to before "alpha": conversation and files
        await choose(kit, pilot, "Rewind to before which prompt?", 0)
        await choose(kit, pilot, "Rewind what?", 0)
        await kit.wait_for(pilot, lambda: not written.exists(), "a.txt removed")
        await kit.wait_for(pilot, lambda: app.client.conversation_id not in (root, None), "branch")
        seen["branch"] = app.client.conversation_id

    await kit.drive(session, keeper(kit, session, agent_env, STEPS, tmp_path), rewind)
    root, branch = seen["root"], seen["branch"]
    assert session.current_branch() == branch

    async def resumed(pilot: Any) -> None:  # what --resume ID and --continue run
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        seen["followed"] = app.client.conversation_id
        seen["shown"] = user_texts(kit, app)
        await turn(kit, pilot, "beta", "Second answer.")
        seen["after"] = user_texts(kit, app)

    await kit.drive(session, keeper(kit, session, agent_env, STEPS[2:], tmp_path), resumed)
    assert seen["followed"] == branch
    assert seen["shown"] == []  # the new branch, not branch 1's "alpha"
    assert seen["after"] == ["beta"]
    assert prompts(session, branch) == ["beta"]
    assert prompts(session, root) == ["alpha"]
    assert not written.exists()

    # -p --continue: the headless turn goes on in the same branch.
    script = tmp_path / "headless-script.json"
    script.write_text('[{"text": "Headless answer."}]')
    out = io.StringIO()
    code = await run_print("gamma", session, out=out, model="faux/faux-1", faux_script=script)
    assert code == 0, out.getvalue()
    assert prompts(session, branch) == ["beta", "gamma"]
    assert prompts(session, root) == ["alpha"]


async def test_fork_then_attach_follows_the_fork(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}
    keep = keeper(kit, session, agent_env, STEPS, tmp_path)
    assert await keep.ensure_started()
    try:

        async def fork(pilot: Any) -> None:
            app = kit.app_of(pilot)
            await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
            seen["root"] = root = app.client.conversation_id
            await turn(kit, pilot, "alpha", "Written.")
            await pilot.press(*"/fork", "enter")
            await kit.wait_for(
                pilot, lambda: app.client.conversation_id not in (root, None), "the fork"
            )
            seen["fork"] = app.client.conversation_id

        await kit.drive(session, None, fork)

        async def attached(pilot: Any) -> None:  # coding-agent attach SESSION: no supervisor
            app = kit.app_of(pilot)
            await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
            seen["followed"] = app.client.conversation_id
            await turn(kit, pilot, "beta", "Second answer.")
            seen["after"] = user_texts(kit, app)

        await kit.drive(session, None, attached)
    finally:
        await keep.stop()
    root, forked = seen["root"], seen["fork"]
    assert seen["followed"] == forked
    assert seen["after"] == ["alpha", "beta"]  # the fork holds alpha (inherited) and beta
    assert prompts(session, forked) == ["alpha", "beta"]
    assert prompts(session, root) == ["alpha"]
