"""The TUI over a real session worker: prompts, tools, modals, abort and queued input (issue 8).

Every test starts the worker subprocess through :class:`WorkerSupervisor` with a faux script and
drives :class:`CodingAgentApp` with Textual's Pilot; what the app shows comes over the chord wire.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import OptionList

from chord.textual import ChoiceScreen
from coding_agent.session_files.folders import Session
from coding_agent.tui.widgets import AssistantView

pytestmark = pytest.mark.anyio

ANSWER = "Hello from the faux model. The answer is **forty-two**, as always."


def _modal_title(app: Any) -> str | None:
    """The title of the choice dialog on screen once it takes answers (armed: mounted, and
    past the time it ignores keys), else ``None``."""
    screen = app.screen
    if isinstance(screen, ChoiceScreen) and screen.armed:
        return str(screen.query_one(".title").render())
    return None


async def test_a_prompt_streams_an_answer_from_the_worker(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    keeper = kit.supervisor(
        session, agent_env, faux_script=kit.script(tmp_path, [{"text": ANSWER}])
    )
    partial: list[str] = []

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")

        def record(value: Any, ctx: Any, delivery: Any) -> None:
            turn = value.get("turn") if isinstance(value, dict) else None
            message = turn.get("message") if isinstance(turn, dict) else None
            if isinstance(message, dict):
                text = "".join(b.get("text", "") for b in message.get("content", []))
                partial.append(text)

        unsubscribe = app.client.view.subscribe(record)
        await pilot.press(*"hi there", "enter")
        await kit.wait_for(pilot, lambda: ANSWER in kit.assistant_texts(app), "the answer")
        await kit.wait_for(pilot, lambda: kit.idle(app), "the turn to end")
        await app.wait_rendered()
        unsubscribe()
        users = [e for e in kit.entries(app) if e["kind"] == "pi.user"]
        assert [e["model"][0]["content"] for e in users] == ["hi there"]
        assert kit.kinds(app)[-1] == "pi.assistant"
        widget = app.transcript.widget_for(app.view["entries"][-1]["id"])
        assert isinstance(widget, AssistantView)
        assert widget.text == ANSWER

    await kit.drive(session, keeper, test)
    # the answer arrived in pieces: the live message grew before the entry was written
    assert any(0 < len(text) < len(ANSWER) for text in partial)
    assert keeper.pid is None, "the worker the TUI started is stopped when the TUI exits"


async def test_a_tool_call_waits_for_approval_and_its_result_is_rendered(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path, project: Path
) -> None:
    steps = [
        {
            "text": "I will write a file.",
            "toolCalls": [{"name": "write", "arguments": {"path": "notes.txt", "content": "hi\n"}}],
        },
        {"text": "The file is written."},
    ]
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, steps))

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        await pilot.press(*"write notes", "enter")
        await kit.wait_for(pilot, lambda: _modal_title(app) == "Allow write?", "the approval modal")
        assert not (project / "notes.txt").exists()
        options = app.screen.query_one(OptionList)
        assert str(options.get_option_at_index(0).prompt) == "1. Allow once"  # numbered, no letter
        await pilot.press("enter")  # the first option: Allow
        await kit.wait_for(
            pilot, lambda: "The file is written." in kit.assistant_texts(app), "the end"
        )
        await kit.wait_for(pilot, lambda: kit.idle(app), "the turn to end")
        await app.wait_rendered()
        [result] = kit.tool_results(app)
        card = app.transcript.card(result["toolCallId"])
        assert card is not None and card.status == "done"
        assert "notes.txt" in card.header_text
        assert "notes.txt" in card.result_text

    await kit.drive(session, keeper, test)
    assert (project / "notes.txt").read_text() == "hi\n"


async def test_a_question_modal_sends_the_chosen_answer(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    question = {"question": "Which colour?", "options": ["Red", "Blue"], "allowText": False}
    steps = [
        {"text": "A question first.", "toolCalls": [{"name": "question", "arguments": question}]},
        {"text": "Thanks for answering."},
    ]
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, steps))

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        await pilot.press(*"ask me", "enter")
        await kit.wait_for(pilot, lambda: _modal_title(app) == "Which colour?", "the question")
        await pilot.press("down", "enter")  # Blue
        await kit.wait_for(
            pilot, lambda: "Thanks for answering." in kit.assistant_texts(app), "the end"
        )
        [result] = kit.tool_results(app)
        text = "".join(block.get("text", "") for block in result["content"])
        assert "Blue" in text

    await kit.drive(session, keeper, test)


def _blocking_bash(release: Path) -> dict[str, Any]:
    command = f"while [ ! -e {release} ]; do sleep 0.05; done; echo released"
    return {"name": "bash", "arguments": {"command": command}}


async def test_escape_aborts_a_running_turn(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    never = tmp_path / "never-created"
    call = _blocking_bash(never)
    call["arguments"]["command"] = f"echo halfway there; {call['arguments']['command']}"
    steps = [{"text": "Waiting on a command.", "toolCalls": [call]}]
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, steps))

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        await pilot.press(*"run it", "enter")
        await kit.wait_for(pilot, lambda: _modal_title(app) == "Allow bash?", "the approval modal")
        await pilot.press("enter")

        def bash_printing() -> bool:
            turn = app.view.get("turn") if isinstance(app.view, dict) else None
            tools = turn.get("tools", []) if isinstance(turn, dict) else []
            return any(
                slot.get("status") == "running" and "halfway" in str(slot.get("output", ""))
                for slot in tools
            )

        await kit.wait_for(pilot, bash_printing, "the command to run and print")
        assert app.busy or not kit.idle(app)
        await pilot.press("escape")
        await kit.wait_for(pilot, lambda: kit.idle(app), "the turn to end after Esc")
        await app.wait_rendered()
        assert not app.busy
        [result] = kit.tool_results(app)
        assert result.get("isError") is True
        # what the command printed before Esc stays in the result the model reads
        text = "".join(block.get("text", "") for block in result["content"])
        assert "Output before it stopped:\nhalfway there" in text

    await kit.drive(session, keeper, test)


async def test_a_follow_up_typed_while_busy_is_queued_then_answered(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    release = tmp_path / "release"
    steps = [
        {"text": "Waiting on a command.", "toolCalls": [_blocking_bash(release)]},
        {"text": "The command finished."},
        {"text": "Answering your follow-up."},
    ]
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, steps))

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        await pilot.press(*"run it", "enter")
        await kit.wait_for(pilot, lambda: _modal_title(app) == "Allow bash?", "the approval modal")
        await pilot.press("enter")
        await kit.wait_for(pilot, lambda: app.busy and _modal_title(app) is None, "a busy turn")
        await pilot.press(*"and then this", "alt+enter")

        def queued() -> list[Any]:
            view = app.view
            return [i for i in view.get("inbox", []) if i.get("mode") == "followUp"] if view else []

        await kit.wait_for(pilot, lambda: len(queued()) == 1, "the queued follow-up")
        await app.wait_rendered()
        assert app.queue.display
        assert [(mode, text) for _, mode, text in app.queue.items] == [
            ("followUp", "and then this")
        ]
        release.touch()
        await kit.wait_for(
            pilot, lambda: "Answering your follow-up." in kit.assistant_texts(app), "end"
        )
        await kit.wait_for(pilot, lambda: kit.idle(app), "the turn to end")
        users = [e for e in app.view["entries"] if e["kind"] == "pi.user"]
        assert len(users) == 2
        assert kit.assistant_texts(app)[-2:] == [
            "The command finished.",
            "Answering your follow-up.",
        ]

    await kit.drive(session, keeper, test)


async def test_slash_new_starts_a_fresh_context_in_the_worker(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    steps = [{"text": "The first answer."}, {"text": "The second answer."}]
    keeper = kit.supervisor(session, agent_env, faux_script=kit.script(tmp_path, steps))

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        assert {"new", "compact", "help", "quit"} <= set(app.tui.commands)
        await pilot.press(*"one", "enter")
        await kit.wait_for(pilot, lambda: "The first answer." in kit.assistant_texts(app), "one")
        await kit.wait_for(pilot, lambda: kit.idle(app), "the first turn to end")
        await pilot.press(*"/new", "enter")
        await kit.wait_for(
            pilot, lambda: "The first answer." not in kit.assistant_texts(app), "a fresh context"
        )
        assert kit.kinds(app) == ["pi.reset"]
        # The faux model answers by how many answers it sees: a fresh context gets answer one.
        await pilot.press(*"two", "enter")
        await kit.wait_for(pilot, lambda: "The first answer." in kit.assistant_texts(app), "two")
        users = [e["model"][0]["content"] for e in kit.entries(app) if e["kind"] == "pi.user"]
        assert users == ["two"]

    await kit.drive(session, keeper, test)
