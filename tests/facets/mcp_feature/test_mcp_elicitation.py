"""A server's elicitation during a tool call (issue 40 item 3): the TUI facet asks each field of
the form (a bad number asked again), Decline declines, and ``-p``/``--json`` decline; the
answer is a memo on the tool's slot, so a call that asks again after a crash gets the recorded
answer instead of a second question."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup
from dialog_support import ScriptedTui, presentation
from mcp_support import SDK_LEAKS, session, stdio_server, write_config

from chord import Context, RemoteServiceError
from chord.context import BACKGROUND
from facets_mcp.contract import check_elicitation
from facets_mcp.offers import elicitation_asker
from facets_mcp.tui import tui_facet as mcp_tui_facet
from pico3 import ToolApi
from pico3.models.faux import faux_response, faux_tool_call

pytestmark = [pytest.mark.anyio, *SDK_LEAKS]


class Tui(ScriptedTui):
    feature = "mcp"

    def register_command(self, name: str, description: str, handler: Any) -> Any:
        return lambda: None  # /mcp and the prompt commands: not under test here


async def test_an_elicitation_is_asked_field_by_field_and_declined(tmp_path: Path) -> None:
    write_config(tmp_path / "config", {"x": stdio_server("--extras")})
    script = [
        faux_response(faux_tool_call("mcp__x__ask", {}, id="c0")),
        faux_response(faux_tool_call("mcp__x__ask", {}, id="c1")),
        faux_response("done"),
    ]
    tui = Tui()
    async with session(tmp_path, script) as s:
        await s.server("x", "ready")
        async with presentation(s.host, [mcp_tui_facet], tui, s.group):
            results: list[Any] = []
            async with anyio.create_task_group() as group:

                async def turn() -> None:
                    results.extend(await s.turn())

                group.start_soon(turn)
                name = await tui.next_prompt()
                assert name.title == "MCP server x asks" and name.body.startswith("Who are you?")
                assert name.allow_text and name.choices == ["\0decline"]
                name.answer("Ada")
                age = await tui.next_prompt()
                age.answer("thirty")
                again = await tui.next_prompt()
                assert "'thirty' is not an integer" in again.body
                again.answer("36")
                color = await tui.next_prompt()
                assert color.choices == ["red", "blue", "\0decline"] and not color.allow_text
                color.answer("blue")
                second = await tui.next_prompt()  # the second call: declined
                second.answer("\0decline")
    first, declined = results
    assert first["content"][0]["text"] == "hello Ada (blue, 36)"
    assert declined["content"][0]["text"] == "decline"


# -- the memo, with a slot kept in a dict (as the question feature's tests do) -----------------
class DictSlot:
    """A tool slot outside any harness: ``fn(tx, slot)`` runs on a plain dict."""

    def __init__(self) -> None:
        self.slot: dict[str, Any] = {}

    async def __call__(self, fn: Any, ctx: Context, /) -> Any:
        return fn(None, self.slot)


class Dialogs:
    """The spawner of elicitation dialogs: each is answered at once with ``answer`` (or, with
    none, must never be opened)."""

    def __init__(self, group: TaskGroup, answer: dict[str, Any] | None) -> None:
        self.group, self.answer, self.opened = group, answer, 0

    def spawn(self, key: str, dialog: Any) -> Any:
        assert self.answer is not None, "asked although an answer was recorded"
        self.opened += 1
        self.group.start_soon(dialog.submit, self.answer, BACKGROUND)
        return lambda: None


REQUEST = {"message": "Who?", "mode": "form", "schema": {"properties": {"n": {"type": "string"}}}}


async def test_the_answer_is_a_memo_and_a_recorded_one_is_not_asked_again() -> None:
    slot = DictSlot()
    api = ToolApi(task_id=5, conversation_id=1, call_id="c-1", slot=slot)
    answer = {"action": "accept", "content": {"n": "Ada"}}
    async with anyio.create_task_group() as group:
        dialogs = Dialogs(group, answer)
        ask = elicitation_asker("x", api, BACKGROUND, dialogs, lambda value: value)  # type: ignore[arg-type]
        assert await ask(REQUEST) == answer
        assert dialogs.opened == 1
    assert slot.slot["memos"] == {"tool:elicitation-1": answer}
    # the call run again after a crash: its first elicitation is answered from the memo
    async with anyio.create_task_group() as group:
        again = elicitation_asker("x", api, BACKGROUND, Dialogs(group, None), lambda value: value)  # type: ignore[arg-type]
        assert await again(REQUEST) == answer


async def test_a_response_that_does_not_fit_the_form_is_refused() -> None:
    request: Any = {"server": "x", **REQUEST, "schema": {**REQUEST["schema"], "required": ["n"]}}
    with pytest.raises(RemoteServiceError, match="'n' must be a string"):
        check_elicitation({"action": "accept", "content": {"n": 3}}, request)
    with pytest.raises(RemoteServiceError, match="the required field 'n' is missing"):
        check_elicitation({"action": "accept", "content": {}}, request)
    with pytest.raises(RemoteServiceError, match="action must be one of"):
        check_elicitation({"action": "maybe"}, request)
    assert check_elicitation({"action": "decline", "content": {"n": 3}}, request) == {
        "action": "decline"
    }


async def test_a_sampling_request_is_shown_then_allowed_or_denied(tmp_path: Path) -> None:
    write_config(tmp_path / "config", {"x": stdio_server("--extras")})
    script = [
        faux_response(faux_tool_call("mcp__x__sample", {"topic": "tea"}, id="c0")),
        faux_response("Tea is a drink."),  # the sampling request's answer
        faux_response(faux_tool_call("mcp__x__sample", {"topic": "coffee"}, id="c1")),
        faux_response("done"),
    ]
    tui = Tui()
    async with session(tmp_path, script) as s:
        await s.server("x", "ready")
        async with presentation(s.host, [mcp_tui_facet], tui, s.group):
            results: list[Any] = []
            async with anyio.create_task_group() as group:

                async def turn() -> None:
                    results.extend(await s.turn())

                group.start_soon(turn)
                allowed = await tui.next_prompt()
                assert allowed.title == "MCP server x asks to use the model"
                assert allowed.choices == ["allow", "deny"]
                assert "Up to 64 tokens" in allowed.body and "[system]\nBe brief." in allowed.body
                assert "[user]\nSummarize tea" in allowed.body
                allowed.answer("allow")
                denied = await tui.next_prompt()
                assert "Summarize coffee" in denied.body
                denied.answer("deny")
    tea, coffee = results
    assert tea["content"][0]["text"] == "sampled (faux/faux-1): Tea is a drink."
    assert coffee["content"][0]["text"] == (
        "refused: the user denied MCP server 'x' the use of the model"
    )
