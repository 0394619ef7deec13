"""The transcript-driven faux provider and its JSON scripts (issue 8 item 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from coding_agent.worker.demo import ScriptedProvider, load_script
from pico3.models import (
    AssistantMessage,
    Request,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    faux_response,
    faux_tool_call,
    reduce_events,
)

pytestmark = pytest.mark.anyio


def assistant(text: str, stop: Any = "stop") -> AssistantMessage:
    return AssistantMessage(content=[TextContent(text)], stop_reason=stop)


async def answer(provider: ScriptedProvider, messages: list[Any]) -> AssistantMessage:
    events = [
        e async for e in provider.stream(Request(model="faux-1", messages=messages), BACKGROUND)
    ]
    return reduce_events(events)


def texts(message: AssistantMessage) -> str:
    return "".join(getattr(block, "text", "") for block in message.content)


async def test_the_step_is_chosen_by_the_finished_answers_in_the_transcript() -> None:
    provider = ScriptedProvider([faux_response("zero"), faux_response("one")])
    user = UserMessage("hi")
    assert texts(await answer(provider, [user])) == "zero"
    assert texts(await answer(provider, [user, assistant("zero"), user])) == "one"
    # The same transcript gets the same answer again (a restarted worker resumes a turn).
    assert texts(await answer(provider, [user])) == "zero"
    # Aborted or failed answers do not count.
    broken = [user, assistant("z", "aborted"), assistant("z", "error")]
    assert texts(await answer(provider, broken)) == "zero"
    assert texts(await answer(provider, [user, assistant("0"), assistant("1")])).startswith(
        "(The faux script has no more answers.)"
    )


async def test_tool_calls_get_ids_unique_per_step() -> None:
    step = faux_response("x", faux_tool_call("ls", {}), faux_tool_call("read", {"path": "a"}))
    provider = ScriptedProvider([step, step])
    first = await answer(provider, [UserMessage("go")])
    result = ToolResultMessage("faux_0_1", "ls", [TextContent("ok")])
    second = await answer(provider, [UserMessage("go"), first, result])
    ids = [getattr(b, "id", None) for m in (first, second) for b in m.content if hasattr(b, "id")]
    assert ids == ["faux_0_1", "faux_0_2", "faux_1_1", "faux_1_2"]


async def test_a_json_script_becomes_faux_answers(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(
        '[{"thinking": "hmm", "text": "hello", "toolCalls": [{"name": "ls"}]},'
        ' {"error": "overloaded"}]'
    )
    provider = ScriptedProvider(load_script(path))
    first = await answer(provider, [UserMessage("hi")])
    kinds = [type(block).__name__ for block in first.content]
    assert kinds == ["ThinkingContent", "TextContent", "ToolCall"]
    assert first.stop_reason == "toolUse"
    second = await answer(provider, [UserMessage("hi"), first])
    assert second.stop_reason == "error" and second.error_message == "overloaded"


def test_a_bad_script_is_refused_naming_the_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text('[{"text": "a", "tools": []}]')
    with pytest.raises(ValueError, match=r"script\.json: invalid faux script: .*tools"):
        load_script(path)
    with pytest.raises(ValueError, match="cannot read the faux script"):
        load_script(tmp_path / "missing.json")


async def test_conversation_scripts_play_apart_by_system_prompt_or_first_message(
    tmp_path: Path,
) -> None:
    path = tmp_path / "script.json"
    path.write_text(
        '{"steps": [{"toolCalls": [{"name": "agent"}]}, {"text": "parent done"}],'
        ' "conversations": ['
        '  {"when": "subtask 1", "steps": [{"toolCalls": [{"name": "ls"}]}, {"text": "one"}]},'
        '  {"when": "You are a reviewer", "steps": [{"text": "reviewed"}]}]}'
    )
    provider = ScriptedProvider(load_script(path))
    parent = await answer(provider, [UserMessage("go")])
    assert [getattr(b, "id", None) for b in parent.content] == ["faux_0_0"]
    # a subagent's conversation, found by its first message: its own step 0, its own ids
    child = await answer(provider, [UserMessage("subtask 1: look around")])
    assert [getattr(b, "id", None) for b in child.content] == ["faux_c0_0_0"]
    result = ToolResultMessage("faux_c0_0_0", "ls", [TextContent("ok")])
    assert texts(await answer(provider, [UserMessage("subtask 1"), child, result])) == "one"
    # found by its system prompt
    request = Request(model="faux-1", messages=[UserMessage("x")], system=["You are a reviewer."])
    events = [e async for e in provider.stream(request, BACKGROUND)]
    assert texts(reduce_events(events)) == "reviewed"
    # the parent's transcript is unaffected by the others
    back = ToolResultMessage("faux_0_0", "agent", [TextContent("one")])
    assert texts(await answer(provider, [UserMessage("go"), parent, back])) == "parent done"


async def test_a_conversation_script_with_a_model_plays_only_to_that_model(
    tmp_path: Path,
) -> None:
    """A hook that names its own ``model`` is told apart from the session's by it."""
    path = tmp_path / "script.json"
    path.write_text(
        '{"steps": [{"text": "main"}], "models": [{"id": "judge"}], "conversations": ['
        '  {"when": "Judge", "model": "judge", "steps": [{"text": "the judge"}]},'
        '  {"when": "Judge", "steps": [{"text": "another model"}]}]}'
    )
    provider = ScriptedProvider(load_script(path))

    async def played(model: str) -> str:
        request = Request(model=model, messages=[UserMessage("Judge this")])
        return texts(reduce_events([e async for e in provider.stream(request, BACKGROUND)]))

    assert await played("judge") == "the judge"
    assert await played("faux-1") == "another model"


def test_a_conversation_script_needs_a_when(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text('{"steps": [], "conversations": [{"when": "", "steps": []}]}')
    with pytest.raises(ValueError, match=r"conversations\[0\]\.when is empty"):
        load_script(path)
    path.write_text('{"steps": [], "conversation": []}')
    with pytest.raises(ValueError, match=r"invalid faux script: .*conversation"):
        load_script(path)


async def test_a_script_latency_holds_every_answer_back_until_it_passed(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text('{"steps": [{"text": "late"}], "latency": 600}')
    script = load_script(path)
    assert script.latency == 600
    provider = ScriptedProvider(script)
    started: list[Any] = []

    async def first_event() -> None:
        async for event in provider.stream(
            Request(model="faux-1", messages=[UserMessage("hi")]), BACKGROUND
        ):
            started.append(event)
            return

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(first_event)
            await anyio.wait_all_tasks_blocked()
            assert started == []  # waiting out the latency, nothing streamed yet
            scope.cancel()
    path.write_text('{"steps": [{"text": "now"}], "latency": 0}')
    assert texts(await answer(ScriptedProvider(load_script(path)), [UserMessage("hi")])) == "now"


def test_a_negative_latency_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text('{"steps": [], "latency": -1}')
    with pytest.raises(ValueError, match=r"script\.json: invalid faux script: latency is -1"):
        load_script(path)


async def test_an_echo_step_answers_with_the_messages_it_was_sent(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text('[{"echo": true}, {"echo": true}]')
    provider = ScriptedProvider(load_script(path))
    messages: list[Any] = [
        UserMessage("list\n  it"),
        AssistantMessage(content=[TextContent("Looking."), ToolCall("c1", "ls", {"path": "."})]),
        ToolResultMessage("c1", "ls", [TextContent("a.txt\nb.txt")]),
        UserMessage("and?"),
    ]
    echoed = texts(await answer(provider, messages))
    assert echoed.splitlines() == [
        "user: list it",
        "assistant: Looking.",
        'call ls {"path":"."}',
        "result ls: a.txt b.txt",
        "user: and?",
    ]
