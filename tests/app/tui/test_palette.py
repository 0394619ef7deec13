"""The ``/`` command palette above the prompt editor (docs/design/agent.md#features)."""

from __future__ import annotations

from typing import Any

import pytest
from textual import events

from chord.context import Context
from coding_agent.tui import CodingAgentApp

pytestmark = pytest.mark.anyio


def _labels(app: CodingAgentApp) -> list[str]:
    return [item.label for item in app.editor.palette.suggestions]


def _selected(app: CodingAgentApp) -> str | None:
    chosen = app.editor.palette.selected
    return chosen.label if chosen is not None else None


def _busy(doc: Any) -> None:
    doc["turn"] = {"inputs": [1], "generation": {"stage": "requesting", "attempt": 1}, "tools": []}


async def _noop(args: str, ctx: Context) -> None:
    del args, ctx


async def test_slash_opens_the_palette_with_every_command_and_its_description(
    conversation, docs
) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        assert not app.editor.palette.display
        await pilot.press("/")
        await docs.until(pilot, lambda: app.editor.palette.display)
        assert _labels(app) == ["/help", "/quit", "/stop"]
        descriptions = [item.description for item in app.editor.palette.suggestions]
        assert descriptions == [
            "List the commands",
            "Leave the app (the session keeps running)",
            "Stop the session's worker and leave (asks when work is live)",
        ]
        palette_region = app.editor.palette.region
        assert palette_region.bottom <= app.editor.region.y, "the palette sits above the editor"


async def test_typing_filters_prefix_matches_first_then_fuzzy_matches(conversation, docs) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        for name in ("index", "compact", "model"):
            app.tui.register_command(name, f"{name} things", _noop)
        await pilot.press("/", "i")
        await docs.until(pilot, lambda: _labels(app) == ["/index", "/quit"])
        await pilot.press("n")
        await docs.until(pilot, lambda: _labels(app) == ["/index"])
        await pilot.press("backspace", "backspace", "m", "t")
        await docs.until(pilot, lambda: _labels(app) == ["/compact"])
        await pilot.press("z")
        await docs.until(pilot, lambda: not app.editor.palette.display)


async def test_down_moves_the_highlight_and_tab_accepts_it(conversation, docs) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        app.editor.remember("an older prompt")
        await pilot.press("/")
        await docs.until(pilot, lambda: app.editor.palette.display)
        assert _selected(app) == "/help"
        await pilot.press("down")
        assert _selected(app) == "/quit"
        await pilot.press("down")
        assert _selected(app) == "/stop"
        await pilot.press("down")
        assert _selected(app) == "/help", "the highlight wraps around"
        await pilot.press("up", "up")
        assert _selected(app) == "/quit"
        assert app.editor.text == "/", "up/down do not walk the history while the palette is open"
        await pilot.press("tab")
        assert app.editor.text == "/quit "
        await docs.until(pilot, lambda: not app.editor.palette.display)
        assert app.is_running


async def test_enter_accepts_a_partial_command_and_runs_an_exact_one(conversation, docs) -> None:
    calls: list[str] = []

    async def index(args: str, ctx: Context) -> None:
        calls.append(args)

    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        app.tui.register_command("index", "Index the repository", index)
        await pilot.press("/", "n", "d")
        await docs.until(pilot, lambda: _labels(app) == ["/index"])
        await pilot.press("enter")
        assert app.editor.text == "/index ", "enter accepted the suggestion instead of sending"
        assert calls == []
        await docs.until(pilot, lambda: not app.editor.palette.display)

        app.editor.clear()
        await pilot.press(*"/index")
        await docs.until(pilot, lambda: _selected(app) == "/index")
        await pilot.press("enter")
        await docs.until(pilot, lambda: calls)
        assert calls == [""]
        assert app.editor.text == "" and not app.editor.palette.display
        assert conversation.sent == []


async def test_escape_closes_the_palette_without_aborting_the_turn(conversation, docs) -> None:
    conversation.change(_busy)
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        assert app.busy
        await pilot.press("/", "h")
        await docs.until(pilot, lambda: app.editor.palette.display)
        await pilot.press("escape")
        await docs.until(pilot, lambda: not app.editor.palette.display)
        assert conversation.aborts == 0 and app.busy
        assert app.editor.text == "/h"
        await pilot.press("tab")
        assert app.editor.text == "/help ", "tab still completes after the palette was closed"

        await pilot.press("escape")
        await docs.until(pilot, lambda: conversation.aborts == 1)


async def test_the_palette_reopens_when_the_text_changes_after_escape(conversation, docs) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        await pilot.press("/")
        await docs.until(pilot, lambda: app.editor.palette.display)
        await pilot.press("escape")
        await docs.until(pilot, lambda: not app.editor.palette.display)
        await pilot.press("q")
        await docs.until(pilot, lambda: _labels(app) == ["/quit"])


async def test_clicking_a_row_accepts_it(conversation, docs) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        await pilot.press("/")
        await docs.until(pilot, lambda: _labels(app) == ["/help", "/quit", "/stop"])
        await pilot.click("#editor-palette", offset=(4, 1))
        await docs.until(pilot, lambda: app.editor.text == "/quit ")
        assert app.focused is app.editor


async def test_a_command_recalled_from_history_does_not_capture_up(conversation, docs) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        app.editor.remember("first prompt")
        app.editor.remember("/help")
        await pilot.press("up")
        assert app.editor.text == "/help"
        await pilot.pause()
        assert not app.editor.palette.display
        await pilot.press("up")
        assert app.editor.text == "first prompt"


async def test_enter_typed_ahead_of_the_palette_update_still_runs_the_command(
    conversation, docs
) -> None:
    calls: list[str] = []

    async def index(args: str, ctx: Context) -> None:
        calls.append(args)

    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        app.tui.register_command("index", "Index the repository", index)
        await pilot.press("/", "i")
        await docs.until(pilot, lambda: _labels(app) == ["/index", "/quit"])
        for key in [*"ndex", "enter"]:  # queued at once, like a fast typist
            character = key if len(key) == 1 else None
            app.editor.post_message(events.Key(key, character))
        await docs.until(pilot, lambda: calls)
        assert calls == [""]
        assert app.editor.text == ""


async def test_one_thing_under_several_names_shows_once_under_the_best_ranked_name(
    conversation, docs
) -> None:
    """A skill is ``/pdf``, ``/skill:pdf`` and ``/tools:pdf`` (a plugin's): the palette shows it
    once, under the name that ranks first for what was typed, and each name still completes
    when it is what the user types; a different command with the same last part stays."""
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        for name in ("pdf", "skill:pdf", "tools:pdf"):
            app.tui.register_command(name, "Fill and read PDF forms", _noop)
        app.tui.register_command("other:pdf", "Another tool's pdf", _noop)
        await pilot.press("/", "p", "d")
        await docs.until(pilot, lambda: _labels(app)[:1] == ["/pdf"])
        assert sorted(_labels(app)) == ["/other:pdf", "/pdf"]
        await pilot.press("backspace", "backspace", *"skill:")
        await docs.until(pilot, lambda: _labels(app)[:1] == ["/skill:pdf"])
        assert "/pdf" not in _labels(app) and "/tools:pdf" not in _labels(app)
        await pilot.press(*["backspace"] * 6, *"tools")
        await docs.until(pilot, lambda: _labels(app)[:1] == ["/tools:pdf"])
        assert "/pdf" not in _labels(app) and "/skill:pdf" not in _labels(app)
