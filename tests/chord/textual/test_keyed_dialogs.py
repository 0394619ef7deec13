"""Keyed dialogs end to end (chord.provide_dialogs + chord.textual.show_dialogs), with Pilot.

A session facet asks through a keyed dialog service in one facet host; a real Textual app's
presentation host, joined to it through the loopback source (as the TUI process is joined to the
session worker), shows the dialog with chord's numbered, arming dialog screens and sends the
answer. Waits are on the screen and on events, polled between frames with a deadline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.pilot import Pilot
from textual.widgets import Label, OptionList

from chord import (
    BACKGROUND,
    Context,
    ContextCancelled,
    Dialogs,
    FacetEnvironment,
    RemoteServiceError,
    create_facet_host,
    define_facet,
    define_service,
    dialog_key,
    provide_dialogs,
    with_cancel,
)
from chord.remote import LoopbackServiceSource
from chord.textual import CLOSED_NOTICE, Choice, ChoiceScreen, Modal, TextualTui, show_dialogs
from chord.textual import tui_facet as chord_tui_facet

pytestmark = pytest.mark.anyio

DEADLINE = 20.0
Confirms = define_service("test.keyed-dialogs.confirm")
REQUEST = {"title": "Deploy?", "body": "to production"}


def check(value: object, request: object) -> str:
    if value not in ("go", "wait", "stop"):
        raise RemoteServiceError("service_invalid_value", f"not an answer: {value!r}")
    return str(value)


class Session:
    """The asking side: a session facet providing :data:`Confirms` (answer method ``decide``)."""

    def __init__(self) -> None:
        self.dialogs: Dialogs[Any, str] | None = None

        def setup(env: FacetEnvironment) -> None:
            self.dialogs = provide_dialogs(env, Confirms, check, answer="decide")

        self.facet = define_facet("test/session", setup)

    async def ask(self, ctx: Context = BACKGROUND) -> str:
        assert self.dialogs is not None
        return await self.dialogs.ask(dialog_key(1, "call-1"), REQUEST, ctx)


async def show(modal: Modal, request: Any) -> str:
    choices = [Choice("go", "Go"), Choice("wait", "Wait"), Choice("stop", "Stop")]
    picked = await modal.choose(request["title"], choices, body=request["body"], hint="esc stops")
    return picked or "stop"


@define_facet("test/tui")
def presentation_facet(env: FacetEnvironment) -> None:
    show_dialogs(env, Confirms, show, answer="decide")


class DialogApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.tui = TextualTui(self)

    def compose(self) -> ComposeResult:
        yield Vertical(id="panels")


async def until(pilot: Pilot[None], predicate: Callable[[], object]) -> None:
    with anyio.fail_after(DEADLINE):
        while not predicate():
            await pilot.pause(0.01)


def dialog(app: App[None]) -> ChoiceScreen | None:
    return app.screen if isinstance(app.screen, ChoiceScreen) else None


async def armed_dialog(pilot: Pilot[None]) -> ChoiceScreen:
    """The dialog on screen once it takes answers (it ignores keys while it arms)."""
    await until(pilot, lambda: (screen := dialog(pilot.app)) is not None and screen.armed)
    screen = dialog(pilot.app)
    assert screen is not None
    return screen


def presentation(app: DialogApp, session: Any, group: Any) -> Any:
    source = LoopbackServiceSource(session.services, task_group=group)
    return create_facet_host(
        [chord_tui_facet(app.tui), presentation_facet], service_sources=[source]
    )


async def test_the_tui_shows_numbered_choices_and_the_session_gets_the_checked_answer() -> None:
    app, session = DialogApp(), Session()
    answers: list[str] = []
    async with (
        app.run_test() as pilot,
        anyio.create_task_group() as group,
        create_facet_host([session.facet]) as session_host,
        presentation(app, session_host, group),
    ):

        async def ask() -> None:
            answers.append(await session.ask())

        group.start_soon(ask)
        screen = await armed_dialog(pilot)
        assert str(screen.query_one(".title", Label).content) == "Deploy?"
        options = screen.query_one(OptionList)
        shown = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert shown == ["1. Go", "2. Wait", "3. Stop"]
        await pilot.press("2", "enter")
        await until(pilot, lambda: answers)
        assert answers == ["wait"]
        await until(pilot, lambda: dialog(app) is None)
        group.cancel_scope.cancel()


async def test_escape_is_the_answer_show_gives_it() -> None:
    app, session = DialogApp(), Session()
    answers: list[str] = []
    async with (
        app.run_test() as pilot,
        anyio.create_task_group() as group,
        create_facet_host([session.facet]) as session_host,
        presentation(app, session_host, group),
    ):

        async def ask() -> None:
            answers.append(await session.ask())

        group.start_soon(ask)
        await armed_dialog(pilot)
        await pilot.press("escape")
        await until(pilot, lambda: answers)
        assert answers == ["stop"]
        group.cancel_scope.cancel()


async def test_cancelling_the_ask_takes_the_dialog_off_the_screen_with_a_notice() -> None:
    app, session = DialogApp(), Session()
    cancelled: list[BaseException] = []
    async with (
        app.run_test() as pilot,
        anyio.create_task_group() as group,
        create_facet_host([session.facet]) as session_host,
        presentation(app, session_host, group),
    ):
        ctx, cancel = with_cancel(BACKGROUND)

        async def ask() -> None:
            try:
                await session.ask(ctx)
            except ContextCancelled as error:
                cancelled.append(error)

        group.start_soon(ask)
        await armed_dialog(pilot)
        cancel()  # the call was aborted: the session closes the dialog
        await until(pilot, lambda: dialog(app) is None)
        await until(pilot, lambda: cancelled)
        notice = CLOSED_NOTICE.format(title="Deploy?")
        await until(pilot, lambda: any(n.message == notice for n in app._notifications))  # pyright: ignore[reportPrivateUsage]
        group.cancel_scope.cancel()


async def test_a_dialog_asked_with_no_tui_attached_waits_and_shows_when_one_attaches() -> None:
    app, session = DialogApp(), Session()
    answers: list[str] = []
    async with (
        app.run_test() as pilot,
        anyio.create_task_group() as group,
        create_facet_host([session.facet]) as session_host,
    ):

        async def ask() -> None:
            answers.append(await session.ask())

        group.start_soon(ask)
        assert session.dialogs is not None
        spawner: Any = session.dialogs.spawner
        await until(pilot, lambda: spawner.keys == ["1:call-1"])
        assert answers == [] and dialog(app) is None  # nobody to answer: it waits, unanswered
        async with presentation(app, session_host, group):
            screen = await armed_dialog(pilot)  # the open dialog, shown on attaching
            assert str(screen.query_one(".title", Label).content) == "Deploy?"
            await pilot.press("enter")  # the first choice, highlighted when it opens
            await until(pilot, lambda: answers)
        assert answers == ["go"]
        group.cancel_scope.cancel()
