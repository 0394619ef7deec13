"""The question feature end to end: a harness with a faux model calling ``question``, the
session facet in a session host, and presentation hosts (the real TUI facet over a scripted
``Tui``) joined through chord's loopback source — docs/design/harness.md#tools, docs/design/chord.md#observe, docs/design/harness.md#memos,
issue 7's bad input.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, MutableMapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import dialog_support
import pytest

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.remote import RemoteServiceError, ServiceCall
from chord.services import InstanceAddress
from facets_question.contract import QuestionDialogs, QuestionRequest, QuestionResponse
from facets_question.session import question_tool, session_facet
from facets_question.tui import tui_facet
from pico3 import HarnessService, HarnessServiceApi, harness_session_facet
from pico3.harness import HarnessOptions
from pico3.models.faux import FauxProvider, FauxStep, faux_response, faux_tool_call
from pico3.storage import MemoryStorage
from pico3.tools import InvalidArguments, ToolApi
from pico3.turn.models import Models

pytestmark = pytest.mark.anyio

MODEL = {"provider": "faux", "modelId": "faux-1"}
ANSWER_MEMO = "tool:answer"


Session = dialog_support.FeatureSession


def result_message(entry: Any) -> dict[str, Any]:
    return entry.model[0]


@asynccontextmanager
async def session(script: Sequence[FauxStep]) -> AsyncIterator[Session]:
    """A session worker as the app composes it: pico3's harness session facet and the question
    session facet; dispatch resumes once the host is up (docs/design/chord.md#built-in-services)."""
    options = HarnessOptions(services={"models": Models([FauxProvider(script)])})
    workers: list[HarnessServiceApi] = []

    def worker(env: FacetEnvironment) -> None:
        workers.append(env.use(HarnessService))

    async with anyio.create_task_group() as group:
        harness_facet = harness_session_facet(MemoryStorage, options, task_group=group)
        async with create_facet_host(
            [harness_facet, session_facet, define_facet("test/worker", worker)]
        ) as host:
            (service,) = workers
            await service.resume(BACKGROUND)
            root = await service.harness.root(BACKGROUND)
            await root.set_config({"model": MODEL, "selectedTools": ["question"]}, BACKGROUND)
            yield Session(service, host, group)
        group.cancel_scope.cancel()


@asynccontextmanager
async def presentation(s: Session, kit: Any) -> AsyncIterator[Any]:
    tui = kit.ScriptedTui()
    async with kit.presentation(s.host, [tui_facet], tui, s.group):
        yield tui


def ask(arguments: dict[str, Any]) -> list[FauxStep]:
    """The model asks once with ``arguments`` (call id ``q-1``), then ends the turn."""
    return [faux_response(faux_tool_call("question", arguments, id="q-1")), faux_response("ok")]


COLOUR = {"question": "Which colour?", "options": ["red", "green"]}


async def test_the_answer_is_the_tool_result_with_the_arguments_as_details(kit: Any) -> None:
    async with session(ask(COLOUR)) as s, presentation(s, kit) as tui:
        handle = await (await s.root()).send("go", BACKGROUND)
        prompt = await tui.next_prompt()
        # The observer task got the hydrated request.
        assert (prompt.title, prompt.choices, prompt.allow_text) == (
            "Which colour?",
            ["red", "green"],
            True,
        )
        prompt.answer("green")
        with anyio.fail_after(60):
            await handle.wait(BACKGROUND)
        (entry,) = await s.result_entries()
        message = result_message(entry)
        assert message["isError"] is False
        assert message["content"][0]["text"] == "User answered: green"
        assert entry.data["details"] == {**COLOUR, "answer": "green"}


async def test_a_cancelled_question_is_an_error_result(kit: Any) -> None:
    async with session(ask({"question": "Name?"})) as s, presentation(s, kit) as tui:
        handle = await (await s.root()).send("go", BACKGROUND)
        prompt = await tui.next_prompt()
        assert prompt.choices == [] and prompt.allow_text is True
        prompt.answer(None)  # Escape
        with anyio.fail_after(60):
            await handle.wait(BACKGROUND)
        (entry,) = await s.result_entries()
        assert result_message(entry)["isError"] is True
        assert result_message(entry)["content"][0]["text"] == "User cancelled"


async def test_the_first_answer_wins_and_the_other_presentation_is_dismissed(kit: Any) -> None:
    async with (
        session(ask(COLOUR)) as s,
        presentation(s, kit) as first,
        presentation(s, kit) as second,
    ):
        handle = await (await s.root()).send("go", BACKGROUND)
        one = await first.next_prompt()
        two = await second.next_prompt()
        two.answer("red")
        with anyio.fail_after(60):
            await one.dismissed.wait()
            await handle.wait(BACKGROUND)
        (entry,) = await s.result_entries()
        assert result_message(entry)["content"][0]["text"] == "User answered: red"


async def test_a_late_presentation_sees_and_answers_the_open_question(kit: Any) -> None:
    # docs/design/chord.md#observe: late-joiner hydration of an open dialog instance
    opened = anyio.Event()

    def watcher(env: FacetEnvironment) -> None:
        env.observe(QuestionDialogs, lambda dialog, ctx: opened.set())

    async with session(ask(COLOUR)) as s:
        handle = await (await s.root()).send("go", BACKGROUND)
        async with kit.presentation(
            s.host, [define_facet("watcher", watcher)], kit.ScriptedTui(), s.group
        ):
            with anyio.fail_after(60):
                await opened.wait()
        async with presentation(s, kit) as late:
            (await late.next_prompt()).answer("red")
            with anyio.fail_after(60):
                await handle.wait(BACKGROUND)
        (entry,) = await s.result_entries()
        assert result_message(entry)["content"][0]["text"] == "User answered: red"


async def test_bad_answers_and_unknown_keys_are_refused_and_nothing_is_recorded(kit: Any) -> None:
    # issue 7 "Bad input"
    dialogs: list[Any] = []
    opened = anyio.Event()

    def client(env: FacetEnvironment) -> None:
        async def hold(dialog: Any, ctx: Context) -> None:
            dialogs.append(dialog)
            opened.set()
            await ctx.wait_cancelled()

        env.observe(QuestionDialogs, hold)

    strict = {"question": "Which colour?", "options": ["red", "green"], "allowText": False}
    async with session(ask(strict)) as s:
        handle = await (await s.root()).send("go", BACKGROUND)
        async with kit.presentation(
            s.host, [define_facet("client", client)], kit.ScriptedTui(), s.group
        ):
            with anyio.fail_after(60):
                await opened.wait()
            (dialog,) = dialogs
            cases: list[tuple[Any, str]] = [
                ({"outcome": "answered", "answer": 42}, "must be a string, got int"),
                ({"outcome": "answered", "answer": ["red"]}, "must be a string, got list"),
                ({"outcome": "answered"}, "answer is required"),
                ({"outcome": "answered", "answer": "  "}, "must not be blank"),
                ({"outcome": "answered", "answer": "blue"}, "not one of the options"),
                ({"outcome": "cancelled", "answer": "red"}, "must be absent"),
                ({"outcome": "maybe"}, "'answered' or 'cancelled', got 'maybe'"),
                ({"outcome": "answered", "answer": "red", "extra": 1}, "unknown field(s) extra"),
                ("red", "expected an object, got str"),
            ]
            for value, message in cases:
                with pytest.raises(RemoteServiceError) as caught:
                    await dialog.submit(value, BACKGROUND)
                assert caught.value.code == "service_invalid_value"
                assert message in caught.value.message
            missing = ServiceCall(
                QuestionDialogs.id,
                "submit",
                ({"outcome": "cancelled"},),
                InstanceAddress("1:nope", 1),
            )
            with pytest.raises(RemoteServiceError) as unknown:
                await s.host.services.invoke(missing, BACKGROUND)
            assert unknown.value.code == "service_instance_not_found"
            for name in ("wait", "_wait"):  # only request and submit are served
                hidden = ServiceCall(QuestionDialogs.id, name, (), InstanceAddress("1:q-1", 1))
                with pytest.raises(RemoteServiceError) as caught_member, anyio.fail_after(5):
                    await s.host.services.invoke(hidden, BACKGROUND)
                assert caught_member.value.code == "service_member_not_found"
            assert ANSWER_MEMO not in (await s.tool_slot()).get("memos", {})  # nothing recorded
            assert await s.result_entries() == []
            await dialog.submit({"outcome": "answered", "answer": "green"}, BACKGROUND)
            with anyio.fail_after(60):
                await handle.wait(BACKGROUND)
        (entry,) = await s.result_entries()
        assert result_message(entry)["content"][0]["text"] == "User answered: green"


async def test_wrongly_typed_tool_arguments_are_refused_by_the_schema() -> None:
    tool = question_tool(_never_asked)
    with pytest.raises(InvalidArguments) as caught:
        tool.validate({"question": 3, "options": "red", "colour": 1})
    assert set(caught.value.problems) == {
        "arguments.colour: is not allowed (the allowed properties are: allowText, options, question)",
        "arguments.options: 'red' is not of type 'array'",
        "arguments.question: 3 is not of type 'string'",
    }
    tool.validate({"question": "Ok?", "options": ["yes", "no"], "allowText": False})


# -- the tool's memo, with a slot kept in a dict (docs/design/harness.md#tools) -----------
class DictSlot:
    """A tool slot outside any harness: ``fn(tx, slot)`` runs on a plain dict."""

    def __init__(self) -> None:
        self.slot: dict[str, Any] = {}

    async def __call__(
        self, fn: Callable[[Any, MutableMapping[str, Any]], Any], ctx: Context, /
    ) -> Any:
        return fn(None, self.slot)


def tool_api(slot: DictSlot) -> ToolApi:
    return ToolApi(task_id=5, conversation_id=1, call_id="q-1", slot=slot)


async def _never_asked(request: QuestionRequest, api: ToolApi, ctx: Context) -> QuestionResponse:
    raise AssertionError("asked although an answer was recorded")


async def test_a_recorded_answer_is_returned_without_asking_again() -> None:
    # docs/design/harness.md#tools: crash after the memo -> re-invoked, memo present, returns without asking
    slot = DictSlot()
    slot.slot["memos"] = {ANSWER_MEMO: {"outcome": "answered", "answer": "red"}}
    result = await question_tool(_never_asked).execute(COLOUR, tool_api(slot), BACKGROUND)
    assert result.content == [{"type": "text", "text": "User answered: red"}]


async def test_two_racing_answers_both_return_the_recorded_winner() -> None:
    # docs/design/harness.md#tools: two answers racing both receive the winner
    slot = DictSlot()
    release = anyio.Event()
    answers = iter(["red", "green"])

    async def ask_human(request: QuestionRequest, api: ToolApi, ctx: Context) -> QuestionResponse:
        answer = next(answers)
        await release.wait()
        return {"outcome": "answered", "answer": answer}

    tool = question_tool(ask_human)
    texts: list[str] = []

    async def run() -> None:
        result = await tool.execute(COLOUR, tool_api(slot), BACKGROUND)
        assert result.content is not None
        texts.append(result.content[0]["text"])

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        group.start_soon(run)
        await anyio.wait_all_tasks_blocked()
        release.set()
    assert texts == ["User answered: red", "User answered: red"]
    assert slot.slot["memos"] == {ANSWER_MEMO: {"outcome": "answered", "answer": "red"}}


async def test_the_textual_modal_answers_a_real_question_with_free_text(kit: Any) -> None:
    # The whole chain: model call -> question tool -> dialog instance -> Textual modal (Pilot).
    app = kit.DialogApp()
    async with (
        session(ask(COLOUR)) as s,
        app.run_test() as pilot,
        kit.presentation(s.host, [tui_facet], app.tui, s.group),
    ):
        handle = await (await s.root()).send("go", BACKGROUND)
        screen = await app.shown_dialog(pilot)
        assert kit.title(screen) == "Which colour?"
        assert kit.options(screen) == ["1. red", "2. green"]
        await pilot.press(*"teal", "enter")  # letters go to the text field
        with anyio.fail_after(60):
            await handle.wait(BACKGROUND)
        await app.until(lambda: app.dialog() is None)
        (entry,) = await s.result_entries()
        assert result_message(entry)["content"][0]["text"] == "User answered: teal"
        assert entry.data["details"] == {**COLOUR, "answer": "teal"}
