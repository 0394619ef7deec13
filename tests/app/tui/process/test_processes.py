"""Two TUIs on one worker, and a worker that dies under a TUI (issue 8 §1, docs/design/decisions.md#d9).

* A TUI that quits leaves a worker it did not start running; a TUI attached later (the late
  joiner) sees the transcript, the running turn and the dialog still open, and can answer it.
* A worker killed with SIGKILL: the TUI shows "unavailable", the supervisor starts a new worker,
  the TUI reconnects and rebuilds the same transcript from storage, and the session goes on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chord.textual import ChoiceScreen
from coding_agent.session_files.folders import Session
from coding_agent.tui.app import turn_status

pytestmark = pytest.mark.anyio

QUESTION = {"question": "Which colour?", "options": ["Red", "Blue"], "allowText": False}


def _question_open(app: Any) -> bool:
    """The question dialog is on screen and takes answers (armed, so surely mounted)."""
    screen = app.screen
    return (
        isinstance(screen, ChoiceScreen)
        and screen.armed
        and "Which colour?" in str(screen.query_one(".title").render())
    )


async def test_a_late_joiner_sees_the_transcript_the_turn_and_the_open_dialog(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    steps = [
        {"text": "A question first.", "toolCalls": [{"name": "question", "arguments": QUESTION}]},
        {"text": "Blue it is."},
    ]
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, steps))
    assert await keeper.ensure_started()
    try:

        async def first(pilot: Any) -> None:
            app = kit.app_of(pilot)
            await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
            await pilot.press(*"ask me", "enter")
            await kit.wait_for(pilot, lambda: _question_open(app), "the question")
            # leave without answering: the turn keeps waiting in the worker

        await kit.drive(session, None, first)
        assert session.worker_running(), "the worker outlives a TUI that did not start it"
        seen: dict[str, Any] = {}

        async def second(pilot: Any) -> None:
            app = kit.app_of(pilot)
            await kit.wait_for(pilot, lambda: _question_open(app), "the question, re-offered")
            await app.wait_rendered()
            seen["users"] = [
                e["model"][0]["content"] for e in kit.entries(app) if e["kind"] == "pi.user"
            ]
            seen["texts"] = kit.assistant_texts(app)
            seen["busy"] = app.busy
            seen["status"] = turn_status(app.view)
            seen["rendered"] = [e["id"] for e in kit.entries(app)] == app.transcript.rendered_ids
            await pilot.press("down", "enter")  # Blue
            await kit.wait_for(pilot, lambda: "Blue it is." in kit.assistant_texts(app), "end")

        await kit.drive(session, None, second)
    finally:
        await keeper.stop()
    assert seen == {
        "users": ["ask me"],
        "texts": ["A question first."],
        "busy": True,
        "status": "Running 1 tool",  # the question tool, still waiting for its answer
        "rendered": True,
    }


async def test_a_killed_worker_is_restarted_and_the_tui_rehydrates(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    steps = [{"text": "The first answer."}, {"text": "The second answer."}]
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, steps))

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        client = app.client
        banner = app.query_one("#unavailable")
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        await pilot.press(*"one", "enter")
        await kit.wait_for(pilot, lambda: "The first answer." in kit.assistant_texts(app), "one")
        await kit.wait_for(pilot, lambda: kit.idle(app), "the first turn to end")
        before = kit.entries(app)
        first_pid = kit.kill_worker(keeper)

        await kit.wait_for(pilot, lambda: banner.display, "the unavailable banner")
        assert app.view is None

        await kit.wait_for(pilot, lambda: client.attachments == 2, "the reconnected view")
        await kit.wait_for(pilot, lambda: not banner.display, "the banner to go")
        await app.wait_rendered()
        assert keeper.restarts == 1 and keeper.pid not in (None, first_pid)
        assert kit.entries(app) == before
        assert app.transcript.rendered_ids == [e["id"] for e in before]

        await pilot.press(*"two", "enter")
        await kit.wait_for(pilot, lambda: "The second answer." in kit.assistant_texts(app), "two")

    await kit.drive(session, keeper, test)
