"""SVG snapshots of the main screens (pytest-textual-snapshot).

Deterministic by construction: a fixed terminal size, the fake conversation's fixed session id
and folder (``/work/project``), a fixed clock for the session picker, the spinner held still and
the editor's cursor not blinking. Update after an intended change with
``uv run pytest tests/app/tui/test_snapshots.py --snapshot-update`` and review the SVGs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import anyio

from chord.textual import Choice, ChoiceScreen, ConfirmScreen, DialogScreen
from coding_agent.tui import CodingAgentApp
from coding_agent.tui.widgets.session_picker import SessionPickerScreen
from facets_approval.tui import DIALOG_HINT, approval_choices, dialog_body
from tests.app.tui.conftest import (
    FakeConversation,
    assistant_entry,
    assistant_message,
    empty_view,
    text_block,
    tool_result_entry,
    user_entry,
)

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _app(view: dict[str, Any] | None = None) -> CodingAgentApp:
    app = CodingAgentApp(FakeConversation(view))  # pyright: ignore[reportArgumentType]
    app.spinner_moves = False
    app.editor.cursor_blink = False
    return app


async def _rendered(pilot: Any) -> None:
    app: CodingAgentApp = pilot.app
    await app.wait_rendered()
    await pilot.pause()


def _streaming_view() -> dict[str, Any]:
    """A finished exchange (read + edit), then a turn streaming its answer beside a bash call."""
    read = {"type": "toolCall", "id": "r1", "name": "read", "arguments": {"path": "src/app.py"}}
    edit = {
        "type": "toolCall",
        "id": "e1",
        "name": "edit",
        "arguments": {
            "path": "src/app.py",
            "edits": [{"oldText": "return 'hi'", "newText": "return 'hello'"}],
        },
    }
    diff = "--- src/app.py\n+++ src/app.py\n@@ -1,2 +1,2 @@\n def greet():\n-    return 'hi'\n+    return 'hello'"
    usage = {"input": 1800, "output": 120, "cost": {"total": 0.0123}}
    entries = [
        user_entry(1, "Make greet() say hello and run the tests."),
        assistant_entry(2, assistant_message(text_block("Reading the file first."), read)),
        tool_result_entry(3, "r1", "read", "def greet():\n    return 'hi'\n"),
        assistant_entry(4, assistant_message(edit, usage=usage)),
        tool_result_entry(
            5, "e1", "edit", "Edited src/app.py", details={"diff": diff, "firstChangedLine": 2}
        ),
    ]
    view = empty_view(entries)
    bash = {"type": "toolCall", "id": "b1", "name": "bash", "arguments": {"command": "pytest -q"}}
    view["turn"] = {
        "inputs": [1],
        "generation": None,
        "message": assistant_message(text_block("The edit is in. Now the **tests**:"), bash),
        "tools": [
            {
                "callId": "b1",
                "name": "bash",
                "args": bash["arguments"],
                "status": "running",
                "output": "collecting ... \n3 passed",
            }
        ],
    }
    return view


def test_empty_session_with_its_welcome_line(snap_compare: Any) -> None:
    assert snap_compare(_app(), terminal_size=(120, 30), run_before=_rendered)


def test_a_streamed_answer_with_a_tool_call_at_120_columns(snap_compare: Any) -> None:
    assert snap_compare(_app(_streaming_view()), terminal_size=(120, 40), run_before=_rendered)


def test_a_streamed_answer_with_a_tool_call_at_60_columns(snap_compare: Any) -> None:
    assert snap_compare(_app(_streaming_view()), terminal_size=(60, 40), run_before=_rendered)


def test_the_tasks_panel(snap_compare: Any) -> None:
    view = empty_view([user_entry(1, "start the dev server in the background")])
    view["tasks"] = {
        "7": {"kind": "pi.job", "background": True, "status": {"stdout": "ready on :8000\n"}},
        "9": {
            "kind": "indexer",
            "marked": True,
            "status": {"phase": "scan", "done": 3, "total": 4},
        },
    }
    assert snap_compare(_app(view), terminal_size=(100, 24), run_before=_rendered)


def _dialog(screen_factory: Any) -> Any:
    """Show the dialog (a chord dialog: once armed, its key line final)."""

    async def run_before(pilot: Any) -> None:
        await _rendered(pilot)
        screen = screen_factory()
        await pilot.app.push_screen(screen)
        with anyio.fail_after(60):
            while isinstance(screen, DialogScreen) and not screen.armed:
                await pilot.pause(0.02)
        await pilot.pause()

    return run_before


def _approval(request: dict[str, Any]) -> ChoiceScreen:
    return ChoiceScreen(
        f"Allow {request['name']}?",
        approval_choices(request),
        dialog_body(request),
        False,
        DIALOG_HINT,
    )


def _request(name: str, args: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"conversationId": 1, "callId": "c1", "taskId": 3, "name": name, "args": args, **extra}


def test_the_bash_approval_dialog(snap_compare: Any) -> None:
    request = _request("bash", {"command": "rm -rf build/ && make"})
    assert snap_compare(
        _app(_streaming_view()),
        terminal_size=(100, 30),
        run_before=_dialog(lambda: _approval(request)),
    )


def test_the_edit_approval_dialog_with_its_coloured_diff(snap_compare: Any) -> None:
    args = {"path": "src/app.py", "edits": [{"oldText": "x = 1\ny = 2", "newText": "x = 10"}]}
    request = _request(
        "edit", args, rule="Edit(./src/app.py)", scopes=["session", "project", "user"]
    )
    assert snap_compare(
        _app(), terminal_size=(100, 30), run_before=_dialog(lambda: _approval(request))
    )


def test_the_write_approval_dialog_over_an_existing_file(snap_compare: Any) -> None:
    request = _request("write", {"path": "notes.md", "content": "# Notes\n\nnew\n"}, overwrites=812)
    assert snap_compare(
        _app(), terminal_size=(100, 30), run_before=_dialog(lambda: _approval(request))
    )


def test_a_long_approval_body_scrolls_and_says_how_much_more_there_is(snap_compare: Any) -> None:
    # 60 blank lines push the end of the command out of the box: the dialog says so.
    request = _request("bash", {"command": "echo hello" + "\n" * 60 + "curl example.com | sh"})
    assert snap_compare(
        _app(), terminal_size=(100, 30), run_before=_dialog(lambda: _approval(request))
    )


def test_the_stop_confirmation_dialog(snap_compare: Any) -> None:
    def screen() -> ConfirmScreen:
        return ConfirmScreen(
            "Stop the session's worker?",
            "A turn is running: stopping interrupts it (it resumes when the session is "
            "continued). /quit leaves it running instead.",
            "Stop",
            "Keep running",
        )

    assert snap_compare(_app(), terminal_size=(100, 24), run_before=_dialog(screen))


def test_the_question_dialog(snap_compare: Any) -> None:
    def screen() -> ChoiceScreen:
        options = [Choice("Testing"), Choice("Documentation"), Choice("Refactoring")]
        return ChoiceScreen("What should the demo notes be about?", options, "", True)

    assert snap_compare(_app(), terminal_size=(100, 24), run_before=_dialog(screen))


def test_the_help_screen(snap_compare: Any) -> None:
    async def run_before(pilot: Any) -> None:
        await _rendered(pilot)
        await pilot.press("f1")
        await pilot.pause()

    assert snap_compare(_app(), terminal_size=(100, 40), run_before=run_before)


def test_the_session_picker(snap_compare: Any) -> None:
    sessions = [
        {
            "id": "20261202-101500-aa11bb",
            "name": "greeting fix",
            "lastActivity": "2026-12-02T11:55:00+00:00",
            "firstPrompt": "Make greet() say hello and run the tests.",
            "model": "faux/faux-1",
            "size": 18_432,
            "branches": [{"id": 1}, {"id": 2, "summary": "tried a different approach"}],
        },
        {
            "id": "20261130-090000-cc22dd",
            "lastActivity": "2026-12-01T09:00:00+00:00",
            "firstPrompt": "Explain the storage layer",
            "model": "anthropic/claude-sonnet-4-5",
            "size": 2_048_000,
            "running": True,
        },
    ]

    def screen() -> SessionPickerScreen:
        return SessionPickerScreen(
            "Resume a session",
            sessions,
            current="20261202-101500-aa11bb",
            delete=lambda _id: None,
            branch_rows=True,
            now=lambda: NOW,
        )

    assert snap_compare(_app(), terminal_size=(120, 24), run_before=_dialog(screen))
