"""The editor and the busy-time queue: steer, follow-up, cancel, abort, history, commands."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord.context import Context
from coding_agent.tui import CodingAgentApp
from coding_agent.tui import app as app_module
from coding_agent.tui.widgets.help import HelpScreen
from tests.app.tui.conftest import FakeConversation

pytestmark = pytest.mark.anyio


def _busy(doc: Any) -> None:
    doc["turn"] = {"inputs": [1], "generation": {"stage": "requesting", "attempt": 1}, "tools": []}


async def test_busy_submit_goes_out_as_steer_is_shown_queued_and_can_be_cancelled(
    conversation, docs
) -> None:
    conversation.change(_busy)
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        assert app.busy
        await pilot.press(*"look at b.py", "enter")
        await docs.until(pilot, lambda: conversation.sent)
        assert conversation.sent == [("look at b.py", "steer")]
        await app.wait_rendered()
        assert [(mode, text) for _, mode, text in app.queue.items] == [("steer", "look at b.py")]
        assert app.queue.display
        input_id = app.queue.items[0][0]

        await pilot.click(f"#cancel-{input_id}")
        await docs.until(pilot, lambda: conversation.input_aborts)
        assert conversation.input_aborts == [input_id]
        await app.wait_rendered()
        assert app.queue.items == [] and not app.queue.display


async def test_alt_enter_while_busy_queues_a_follow_up(conversation, docs) -> None:
    conversation.change(_busy)
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        await pilot.press(*"then run tests", "alt+enter")
        await docs.until(pilot, lambda: conversation.sent)
        assert conversation.sent == [("then run tests", "followUp")]
        await app.wait_rendered()
        assert app.queue.items[0][1] == "followUp"


async def test_alt_up_dequeues_the_newest_item_back_into_the_editor(conversation, docs) -> None:
    conversation.change(_busy)
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        await pilot.press(*"oops", "enter")
        await docs.until(pilot, lambda: conversation.sent)
        await app.wait_rendered()
        await pilot.press("alt+up")
        await docs.until(pilot, lambda: conversation.input_aborts)
        await docs.until(pilot, lambda: app.editor.text == "oops")


async def test_escape_aborts_the_turn_and_restores_queued_text(conversation, docs) -> None:
    conversation.change(_busy)
    conversation.change(
        lambda doc: doc["inbox"].append(
            {"id": 77, "mode": "followUp", "input": {"content": "and then docs"}}
        )
    )
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        await pilot.press("escape")
        await docs.until(pilot, lambda: conversation.aborts == 1)
        await app.wait_rendered()
        assert not app.busy
        await docs.until(pilot, lambda: app.editor.text == "and then docs")


async def test_escape_when_idle_does_not_abort(conversation, docs) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        await pilot.press("escape")
        await pilot.pause()
        assert conversation.aborts == 0


async def test_editor_newlines_and_history(conversation, docs) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        await pilot.press("a", "ctrl+j", "b", "shift+enter", "c")
        assert app.editor.text == "a\nb\nc"
        await pilot.press("enter")
        await docs.until(pilot, lambda: conversation.sent)
        assert conversation.sent[0] == ("a\nb\nc", "prompt")
        assert app.editor.text == ""
        await pilot.press(*"draft")
        await pilot.press("up")
        assert app.editor.text == "a\nb\nc"
        await pilot.press("down")  # cursor is on the first line: moves within the text
        await pilot.press("down", "down")
        assert app.editor.text == "draft"


async def test_slash_commands_route_through_the_tui_service(conversation, docs) -> None:
    calls: list[str] = []

    async def index(args: str, ctx: Context) -> None:
        calls.append(args)

    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        assert set(app.tui.commands) == {"help", "quit", "stop"}, (
            "only commands that have a handler"
        )
        app.tui.register_command("index", "Index the repository", index)
        await pilot.press("/", "i", "n")
        assert app.editor.completions() == ["index"]
        await pilot.press("tab")
        assert app.editor.text == "/index "
        await pilot.press(*"--full", "enter")
        await docs.until(pilot, lambda: calls)
        assert calls == ["--full"]
        assert conversation.sent == []

        await pilot.press(*"/nope", "enter")
        await pilot.pause()
        assert app.editor.text == "/nope", "an unknown command stays in the editor"
        app.editor.clear()
        await pilot.press(*"//etc is a path", "enter")
        await docs.until(pilot, lambda: conversation.sent)
        assert conversation.sent == [("/etc is a path", "prompt")]


async def test_quit_command_exits(conversation, docs) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        await pilot.press(*"/quit", "enter")
        await docs.until(pilot, lambda: not app.is_running)


async def test_help_lists_the_registered_commands_and_stays_until_esc(conversation, docs) -> None:
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40), notifications=True) as pilot:
        await app.wait_rendered()
        await pilot.press(*"/help", "enter")
        await docs.until(pilot, lambda: isinstance(app.screen, HelpScreen))
        shown = app.screen.text  # type: ignore[attr-defined]
        assert "/help" in shown and "/quit" in shown and "esc abort" in shown
        assert "pageup scroll up a page" in shown and "alt+enter newline (idle)" in shown
        assert "shift+enter" not in shown  # this terminal cannot deliver it
        await pilot.press("down", "pagedown", "a")  # keys do not close it
        assert isinstance(app.screen, HelpScreen) and app.editor.text == ""
        await pilot.press("escape")
        await docs.until(pilot, lambda: not isinstance(app.screen, HelpScreen))
        await pilot.press("f1")
        await docs.until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await docs.until(pilot, lambda: not isinstance(app.screen, HelpScreen))


async def test_ctrl_c_right_after_typing_clears_what_was_typed_and_does_not_arm_quitting(
    conversation, docs
) -> None:
    """Ctrl+C is the app's own (priority) binding, while typed keys go on to the editor's
    queue: read in one burst (a loaded machine, a fast typist), Ctrl+C must still act on what
    was typed before it — clear it — not on the editor as it was when the burst arrived."""
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        for key in [*"draft", "ctrl+c"]:  # all queued before any of them is handled
            app.simulate_key(key)
        await pilot.pause()
        await pilot.pause()
        assert app.editor.text == ""
        assert not any("again to quit" in str(n.message) for n in app._notifications)
        await pilot.press("ctrl+c")  # now a first press on an empty editor: the notice
        await docs.until(
            pilot, lambda: any("again to quit" in str(n.message) for n in app._notifications)
        )
        assert app.is_running


def _toasts(app: CodingAgentApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def test_ctrl_c_while_a_turn_runs_interrupts_it_as_escape_does(conversation, docs) -> None:
    """Claude Code's gesture: Ctrl+C on an empty editor stops the running turn through the same
    abort as Esc (queued text returns to the editor) and says a second Ctrl+C leaves."""
    conversation.change(_busy)
    conversation.change(
        lambda doc: doc["inbox"].append(
            {"id": 77, "mode": "followUp", "input": {"content": "and then docs"}}
        )
    )
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40), notifications=True) as pilot:
        await app.wait_rendered()
        await pilot.press("ctrl+c")
        await docs.until(pilot, lambda: conversation.aborts == 1)
        await app.wait_rendered()
        assert not app.busy
        await docs.until(pilot, lambda: app.editor.text == "and then docs")
        assert any(t.startswith("Interrupted. Press Ctrl+C again to quit") for t in _toasts(app))
        assert app.is_running


async def test_ctrl_c_over_a_dialog_of_the_turn_closes_it_without_an_answered_elsewhere_toast(
    conversation, docs
) -> None:
    """Ctrl+C aborts the turn; the dialog its call had open is then taken away by its holder,
    and the user, who pressed the key, is not told it was "answered in another window"."""
    from chord.textual import CLOSED_NOTICE, ConfirmScreen

    conversation.change(_busy)
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40), notifications=True) as pilot:
        await app.wait_rendered()
        dialog = ConfirmScreen("Run npm test?", "", "Allow", "Deny")
        app.push_screen(dialog)
        await pilot.pause()
        await pilot.press("ctrl+c")
        await docs.until(pilot, lambda: conversation.aborts == 1)
        dialog.close_from_outside(CLOSED_NOTICE.format(title="Run npm test?"))
        await pilot.pause()
        toasts = _toasts(app)
        assert any(t.startswith("Interrupted. Press Ctrl+C again to quit") for t in toasts)
        assert not any(t.startswith("Already answered") for t in toasts), toasts

    # without the key, a dialog taken away still says so
    conversation.change(_busy)
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40), notifications=True) as pilot:
        await app.wait_rendered()
        dialog = ConfirmScreen("Run npm test?", "", "Allow", "Deny")
        app.push_screen(dialog)
        await pilot.pause()
        dialog.close_from_outside(CLOSED_NOTICE.format(title="Run npm test?"))
        await pilot.pause()
        assert any(t.startswith("Already answered") for t in _toasts(app))


async def test_ctrl_c_with_text_while_a_turn_runs_clears_the_editor_and_keeps_the_turn(
    conversation, docs
) -> None:
    conversation.change(_busy)
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40), notifications=True) as pilot:
        await app.wait_rendered()
        await pilot.press(*"half a thought", "ctrl+c")
        await docs.until(pilot, lambda: app.editor.text == "")
        await pilot.pause()
        assert conversation.aborts == 0 and app.busy and app.is_running
        assert not any("again to quit" in t for t in _toasts(app))


class _SlowAbort(FakeConversation):
    """An abort that reaches the worker only when the test says so."""

    def __init__(self) -> None:
        super().__init__()
        self.release = anyio.Event()
        self.aborted = False

    async def abort(self, ctx: Context) -> None:
        await self.release.wait()
        await super().abort(ctx)
        self.aborted = True


async def test_ctrl_c_twice_during_a_turn_leaves_only_once_the_interrupt_arrived(
    docs, monkeypatch
) -> None:
    """Ctrl+C, Ctrl+C in a hurry: the first interrupts, the second leaves — after the abort
    reached the worker, so the turn never goes on running behind a closed terminal."""
    monkeypatch.setattr(app_module, "DOUBLE_CTRL_C", 600.0)  # a slow machine's two presses
    conversation = _SlowAbort()
    conversation.change(_busy)
    app = CodingAgentApp(conversation)  # pyright: ignore[reportArgumentType]
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        await pilot.press("ctrl+c", "ctrl+c")
        await docs.until(pilot, lambda: any(w.group == "exit" for w in app.workers))
        assert app.is_running and not conversation.aborted
        conversation.release.set()
        await docs.until(pilot, lambda: not app.is_running)
        assert conversation.aborted and conversation.aborts == 1


async def test_ctrl_c_twice_when_idle_leaves(conversation, docs, monkeypatch) -> None:
    monkeypatch.setattr(app_module, "DOUBLE_CTRL_C", 600.0)
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40), notifications=True) as pilot:
        await app.wait_rendered()
        await pilot.press("ctrl+c")
        await docs.until(
            pilot, lambda: any(t.startswith("Press Ctrl+C again") for t in _toasts(app))
        )
        assert app.is_running and conversation.aborts == 0
        await pilot.press("ctrl+c")
        await docs.until(pilot, lambda: not app.is_running)
        assert conversation.aborts == 0


async def test_the_welcome_names_the_add_dir_folders_beside_the_project(conversation) -> None:
    """``--add-dir`` folders are read without asking: the first screen says which (it named
    only the project folder)."""
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        first_line = app.welcome_text().plain.splitlines()[0]
        assert " + " not in first_line
        app.add_dirs = ("/srv/shared-lib", "/opt/docs")
        await pilot.pause()
        first_line = app.welcome_text().plain.splitlines()[0]
        assert first_line.endswith(" + /srv/shared-lib, /opt/docs"), first_line


async def test_the_welcome_promises_the_tour_only_when_no_script_plays(conversation, docs) -> None:
    """With ``--faux-script`` the faux model answers from the script: typing starts no tour."""
    app = CodingAgentApp(conversation)
    async with app.run_test(size=(100, 40)) as pilot:
        await app.wait_rendered()
        assert "Type anything to start a short tour." in app.welcome_text().plain
        app.faux_script = "/tmp/demo/script.json"
        await pilot.pause()
        shown = app.welcome_text().plain
        assert "It answers from the script script.json (--faux-script)." in shown
        assert "tour" not in shown


async def test_stop_in_a_tui_on_a_server_says_the_server_keeps_it_and_stays(conversation) -> None:
    """``attach tcp://…``: the worker is the server's, shared with its other clients; ``/stop``
    cannot stop it, and saying so beats leaving as if it had stopped (the old ``/quit``)."""
    from coding_agent.tui.commands.builtin import SERVER_STOP

    app = CodingAgentApp(conversation)
    app.on_server = True
    async with app.run_test(size=(100, 40), notifications=True) as pilot:
        await app.wait_rendered()
        await pilot.press(*"/stop", "enter")
        await pilot.pause()
        toasts = _toasts(app)
        assert SERVER_STOP in toasts, toasts
        assert not app.stop_requested
        assert app.is_running
