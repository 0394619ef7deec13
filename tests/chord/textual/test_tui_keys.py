"""chord.textual: global keys (``TextualTui.register_key`` / ``handle_key``) in a real app (Pilot).

The app routes keys through ``handle_key`` from ``on_event``, as the module docstring shows, so
a registered key is claimed before the focused widget (an ``Input`` here) sees it.
"""

from __future__ import annotations

import anyio
import pytest
from textual import events
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.widgets import Button, Input

from chord.context import BACKGROUND, Context
from chord.textual import ChoiceScreen, TextualTui

pytestmark = pytest.mark.anyio


class KeysApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.tui = TextualTui(self)

    def compose(self) -> ComposeResult:
        yield Vertical(id="panels")
        yield Button("other", id="other")
        yield Input(id="prompt")

    def on_mount(self) -> None:
        self.query_one("#prompt", Input).focus()

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and self.tui.handle_key(event):
            return
        await super().on_event(event)


class Presses:
    """A key handler that counts presses and lets the test wait for the next one."""

    def __init__(self) -> None:
        self.count = 0
        self._pressed = anyio.Event()

    async def __call__(self, ctx: Context) -> None:
        await anyio.lowlevel.checkpoint()  # an async handler, run as an app worker
        self.count += 1
        pressed, self._pressed = self._pressed, anyio.Event()
        pressed.set()

    async def until(self, count: int) -> None:
        """Wait until the handler has run ``count`` times in all."""
        with anyio.fail_after(5):
            while self.count < count:
                await self._pressed.wait()


async def test_a_registered_key_runs_its_handler_before_the_focused_widget() -> None:
    app = KeysApp()
    presses = Presses()
    async with app.run_test() as pilot:
        prompt = app.query_one("#prompt", Input)
        unregister = app.tui.register_key("shift+tab", "Cycle", presses)
        assert app.tui.keys["shift+tab"].description == "Cycle"
        await pilot.press("shift+tab")
        await presses.until(1)
        await pilot.press("shift+tab")
        await presses.until(2)
        assert app.focused is prompt  # Textual's own shift+tab (focus previous) never ran
        await pilot.press("h", "i")  # other keys still reach the focused widget
        assert prompt.value == "hi"
        unregister()
        unregister()  # idempotent
        assert "shift+tab" not in app.tui.keys
        await pilot.press("shift+tab")  # now Textual's binding moves the focus
        assert app.focused is app.query_one("#other", Button)
        assert presses.count == 2


async def test_keys_are_refused_twice_or_malformed() -> None:
    app = KeysApp()
    async with app.run_test():
        app.tui.register_key("ctrl+g", "Edit", lambda ctx: None)
        with pytest.raises(ValueError, match="key 'ctrl\\+g' is already registered"):
            app.tui.register_key("ctrl+g", "again", lambda ctx: None)
        for bad in ("", "shift tab", " f2"):
            with pytest.raises(ValueError, match="invalid key"):
                app.tui.register_key(bad, "x", lambda ctx: None)
        with pytest.raises(TypeError, match="must be callable"):
            app.tui.register_key("f3", "x", "not a function")  # type: ignore[arg-type]
        assert sorted(app.tui.keys) == ["ctrl+g"]


async def test_a_failing_handler_is_a_toast_and_the_key_keeps_working() -> None:
    app = KeysApp()
    presses = Presses()
    failures: list[str] = []
    async with app.run_test() as pilot:
        failed = anyio.Event()

        def fail(ctx: Context) -> None:
            failures.append("boom")
            failed.set()
            raise RuntimeError("boom")

        app.tui.register_key("f2", "Fail", fail)
        app.tui.register_key("f3", "Count", presses)
        await pilot.press("f2")
        with anyio.fail_after(5):
            await failed.wait()
        await pilot.press("f3")
        await presses.until(1)
        await pilot.pause()
        assert app.is_running and failures == ["boom"]
        messages = [str(n.message) for n in app._notifications]  # pyright: ignore[reportPrivateUsage]
        assert "f2 failed: boom" in messages


async def test_keys_are_not_claimed_while_a_modal_dialog_is_on_screen() -> None:
    app = KeysApp()
    presses = Presses()
    async with app.run_test() as pilot, anyio.create_task_group() as group:
        app.tui.register_key("shift+tab", "Cycle", presses)
        answers: list[str | None] = []

        async def ask() -> None:
            modal = await app.tui.acquire_modal(BACKGROUND)
            try:
                answers.append(await modal.choose("Pick", ["a", "b"]))
            finally:
                modal.close()

        group.start_soon(ask)
        with anyio.fail_after(20):  # a dialog answers nothing until it is armed
            while not (isinstance(app.screen, ChoiceScreen) and app.screen.armed):
                await pilot.pause()
        assert not app.tui.handle_key("shift+tab")  # the dialog keeps its own keys
        await pilot.press("escape")
        with anyio.fail_after(5):
            while not answers:
                await pilot.pause()
        assert presses.count == 0
        assert app.tui.handle_key("shift+tab")  # back on the main screen: claimed again
        await presses.until(1)
        assert answers == [None] and presses.count == 1
