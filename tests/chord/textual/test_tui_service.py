"""chord.textual: the Tui contract over a real Textual app, driven with Pilot."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.pilot import Pilot
from textual.widgets import Input, Static

from chord.context import BACKGROUND, ContextCancelled, with_cancel
from chord.textual import ChoiceScreen, ConfirmScreen, DialogScreen, TextualTui

pytestmark = pytest.mark.anyio


class DemoApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Vertical(id="panels")
        yield Input(id="prompt")

    def on_mount(self) -> None:
        self.tui = TextualTui(self)


async def wait_for_screen(pilot: Pilot[None], kind: type[DialogScreen[Any]]) -> None:
    """Wait (polling between frames, with a deadline) until a ``kind`` dialog takes answers:
    a dialog answers nothing while it arms (ARMING_SECONDS after it appears)."""
    with anyio.fail_after(60):
        while not (isinstance(pilot.app.screen, kind) and pilot.app.screen.armed):
            await pilot.pause(0.01)


async def test_confirm_returns_the_users_answer() -> None:
    app = DemoApp()
    answers: list[bool] = []
    async with app.run_test() as pilot, anyio.create_task_group() as tg:

        async def ask() -> None:
            modal = await app.tui.acquire_modal(BACKGROUND)
            try:
                answers.append(await modal.confirm("Allow bash?", "rm -rf build/"))
            finally:
                modal.close()

        tg.start_soon(ask)
        await wait_for_screen(pilot, ConfirmScreen)
        await pilot.press("enter")  # the focused "yes"
    assert answers == [True]


async def test_escape_denies() -> None:
    app = DemoApp()
    answers: list[bool] = []
    async with app.run_test() as pilot, anyio.create_task_group() as tg:

        async def ask() -> None:
            modal = await app.tui.acquire_modal(BACKGROUND)
            answers.append(await modal.confirm("Allow write?"))
            modal.close()

        tg.start_soon(ask)
        await wait_for_screen(pilot, ConfirmScreen)
        await pilot.press("escape")
    assert answers == [False]


async def test_modals_are_served_one_at_a_time_in_order() -> None:
    app = DemoApp()
    order: list[str] = []
    async with app.run_test() as pilot, anyio.create_task_group() as tg:

        async def ask(name: str, ready: anyio.Event | None) -> None:
            if ready is not None:
                await ready.wait()
            modal = await app.tui.acquire_modal(BACKGROUND)
            try:
                await modal.confirm(f"{name}?")
                order.append(name)
            finally:
                modal.close()

        first_holding = anyio.Event()
        tg.start_soon(ask, "first", None)
        await wait_for_screen(pilot, ConfirmScreen)
        first_holding.set()
        tg.start_soon(ask, "second", first_holding)
        await pilot.pause()
        assert len(app.screen_stack) == 2  # only one dialog on screen
        await pilot.press("enter")
        await wait_for_screen(pilot, ConfirmScreen)
        await pilot.press("2", "enter")
    assert order == ["first", "second"]


async def test_cancelling_the_context_dismisses_the_dialog() -> None:
    app = DemoApp()
    ctx, cancel = with_cancel(BACKGROUND)
    outcome: list[str] = []
    async with app.run_test() as pilot, anyio.create_task_group() as tg:

        async def ask() -> None:
            modal = await app.tui.acquire_modal(ctx)
            try:
                await modal.confirm("Allow?")
            except ContextCancelled:
                outcome.append("cancelled")
            finally:
                modal.close()

        tg.start_soon(ask)
        await wait_for_screen(pilot, ConfirmScreen)
        cancel("dialog closed by the session")
        with anyio.fail_after(60):  # a deadline, not a pace: a loaded machine is slow
            while isinstance(app.screen, ConfirmScreen):
                await pilot.pause(0.01)
    assert outcome == ["cancelled"]


async def test_choose_picks_an_option_or_free_text() -> None:
    app = DemoApp()
    picked: list[str | None] = []
    async with app.run_test() as pilot, anyio.create_task_group() as tg:

        async def ask() -> None:
            modal = await app.tui.acquire_modal(BACKGROUND)
            picked.append(await modal.choose("Which?", ["red", "green"]))
            modal.close()
            modal = await app.tui.acquire_modal(BACKGROUND)
            picked.append(await modal.choose("Name?", [], allow_text=True))
            modal.close()

        tg.start_soon(ask)
        await wait_for_screen(pilot, ChoiceScreen)
        await pilot.press("down", "enter")
        with anyio.fail_after(60):
            while len(picked) != 1:
                await pilot.pause(0.01)
        await wait_for_screen(pilot, ChoiceScreen)
        await pilot.press(*"blue", "enter")
    assert picked == ["green", "blue"]


async def test_commands_register_run_and_unregister() -> None:
    app = DemoApp()
    seen: list[str] = []
    async with app.run_test():
        unregister = app.tui.register_command(
            "index", "Index the repo", lambda a, c: seen.append(a)
        )
        with pytest.raises(ValueError, match="already registered"):
            app.tui.register_command("/index", "again", lambda a, c: None)
        with pytest.raises(ValueError, match="invalid command name"):
            app.tui.register_command("bad name", "x", lambda a, c: None)
        assert await app.tui.run_command("/index --full", BACKGROUND)
        assert not await app.tui.run_command("plain text", BACKGROUND)
        unregister()
        unregister()
        assert "index" not in app.tui.commands
        # unknown now: notified, and not done (the app gives the user the line back)
        assert not await app.tui.run_command("/index", BACKGROUND)
    assert seen == ["--full"]


async def test_a_failing_command_names_the_error_and_where_it_was_raised() -> None:
    """A runtime error in a facet's command showed no file or line (issue 38 item 8)."""
    app = DemoApp()
    shown: list[str] = []

    def boom(args: str, ctx: Any) -> None:
        del args, ctx
        _ = 1 // 0

    async with app.run_test():
        app.tui.notify = lambda message, severity="information": shown.append(message)  # type: ignore[method-assign]
        app.tui.register_command("boom", "Fails", boom)
        assert not await app.tui.run_command("/boom", BACKGROUND)  # failed: not done
    line = boom.__code__.co_firstlineno + 2
    assert shown == [
        f"/boom failed: ZeroDivisionError: integer division or modulo by zero "
        f"(textual/test_tui_service.py:{line} in boom)"
    ]


async def test_panels_mount_and_unmount() -> None:
    app = DemoApp()
    async with app.run_test() as pilot:
        remove = app.tui.mount_panel("status", lambda: Static("indexing…", id="status"))
        await pilot.pause()
        assert app.query_one("#status", Static)
        with pytest.raises(ValueError, match="already mounted"):
            app.tui.mount_panel("status", lambda: Static("again"))
        remove()
        await pilot.pause()
        assert not app.query("#status")


async def test_run_app_with_facets_hosts_presentation_facets_beside_the_app() -> None:

    from chord.facets import FacetEnvironment, define_facet
    from chord.services import define_service
    from chord.state import replicated_state
    from chord.textual import Tui, run_app_with_facets

    Counter = define_service("demo.counter")
    deactivated: list[str] = []

    class CounterImpl:
        def __init__(self) -> None:
            self.count = replicated_state({"n": 0})

        async def bump(self, ctx: object) -> int:
            self.count.change(ctx, lambda d: d.__setitem__("n", d["n"] + 1))  # type: ignore[arg-type]
            return self.count.value["n"]

    def session_setup(env: FacetEnvironment) -> None:
        env.provide(Counter, CounterImpl())

    def tui_setup(env: FacetEnvironment) -> None:
        tui = env.use(Tui)
        counter = env.use(Counter)

        def activate() -> None:
            env.own(tui.mount_panel("counter", lambda: Static("count panel", id="counter")))

            async def bump(args: str, ctx: object) -> None:
                tui.notify(f"count is {await counter.bump(ctx)}")

            env.own(tui.register_command("bump", "Increment", bump))
            tui.notify("counter ready")

        env.on_activate(activate)
        env.on_deactivate(lambda: deactivated.append("tui"))

    class HostedApp(App[None]):
        def compose(self) -> ComposeResult:
            yield Vertical(id="panels")

        def on_mount(self) -> None:
            tui.mark_ready()

    app = HostedApp()
    tui = TextualTui(app, ready=False)
    seen: dict[str, object] = {}

    async def drive(pilot: Pilot[None]) -> None:
        seen["panel"] = bool(app.query("#counter"))
        from chord.context import BACKGROUND

        await tui.run_command("/bump", BACKGROUND)
        await tui.run_command("/bump", BACKGROUND)
        seen["commands"] = sorted(tui.commands)
        app.exit()

    await run_app_with_facets(
        app,
        tui,
        [define_facet("session", session_setup), define_facet("tui", tui_setup)],
        headless=True,
        auto_pilot=drive,
    )
    assert seen == {"panel": True, "commands": ["bump"]}
    assert deactivated == ["tui"]  # the host was disposed after the app exited
    assert tui.commands == {}  # owned unregistration ran


class _GatedSource:
    """A loopback source whose catalogue is withheld until ``gate`` is set (a provider that is
    still starting); ``asked`` is set once the host asks for it."""

    def __init__(self, provider: Any, task_group: Any) -> None:
        from chord.remote import LoopbackServiceSource

        self._inner = LoopbackServiceSource(provider, task_group=task_group)
        self.gate = anyio.Event()
        self.asked = anyio.Event()

    @property
    def accepts_unavailable_services(self) -> bool:
        return False

    async def catalogue(self, ctx: Any) -> Any:
        self.asked.set()
        await self.gate.wait()
        return await self._inner.catalogue(ctx)

    def open(self, **options: Any) -> Any:
        return self._inner.open(**options)


def _beside_parts() -> tuple[Any, Any, list[str]]:
    """A provider of ``demo.greeting`` and a facet over it registering ``/greet``; the log."""
    from chord.facets import FacetEnvironment, define_facet
    from chord.remote import RemoteServiceProvider
    from chord.services import define_service
    from chord.textual import Tui

    Greeting = define_service("demo.greeting")
    log: list[str] = []

    class GreetingImpl:
        async def text(self, ctx: object) -> str:
            return "hello from the provider"

    provider = RemoteServiceProvider([Greeting])
    provider.provide(Greeting, GreetingImpl())

    def setup(env: FacetEnvironment) -> None:
        tui = env.use(Tui)
        greeting = env.use(Greeting)

        def activate() -> None:
            async def greet(args: str, ctx: object) -> None:
                log.append(await greeting.text(ctx))

            env.own(tui.register_command("greet", "Greet", greet))
            log.append("activated")

        env.on_activate(activate)
        env.on_deactivate(lambda: log.append("deactivated"))

    return provider, define_facet("greeter", setup), log


class _TypingApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Vertical(id="panels")
        yield Input(id="prompt")

    def on_mount(self) -> None:
        self.tui.mark_ready()  # type: ignore[attr-defined]


async def _until(pilot: Pilot[None], predicate: Any, what: str) -> None:
    """Let the app run until ``predicate()``; fail naming ``what`` after the deadline."""
    try:
        with anyio.fail_after(60):
            while not predicate():
                await pilot.pause(0.02)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def test_host_beside_runs_the_app_and_takes_typing_before_the_host_is_up() -> None:
    from chord.textual import run_app_with_facets

    provider, greeter, log = _beside_parts()
    app = _TypingApp()
    tui = TextualTui(app, ready=False)
    app.tui = tui  # type: ignore[attr-defined]
    built: list[bool] = []

    def facets() -> list[Any]:
        built.append(app.is_running)  # called once the app runs (after its first frame)
        return [greeter]

    async def drive(pilot: Pilot[None]) -> None:
        await pilot.press(*"typed early")  # the host waits for the source: the app does not
        assert app.query_one("#prompt", Input).value == "typed early"
        await _until(pilot, source.asked.is_set, "the host to ask for the catalogue")
        assert built == [True] and tui.commands == {} and log == []
        source.gate.set()  # the provider is up
        await _until(pilot, lambda: "greet" in tui.commands, "the facet to activate")
        await tui.run_command("/greet", BACKGROUND)
        app.exit()

    async with anyio.create_task_group() as group:
        source = _GatedSource(provider, group)
        await run_app_with_facets(
            app,
            tui,
            facets,
            service_sources=[source],  # type: ignore[list-item]
            host_beside=True,
            headless=True,
            auto_pilot=drive,
        )
        group.cancel_scope.cancel()
    assert log == ["activated", "hello from the provider", "deactivated"]


async def test_host_beside_cancels_a_host_still_starting_when_the_app_exits() -> None:
    from chord.textual import run_app_with_facets

    provider, greeter, log = _beside_parts()
    app = _TypingApp()
    tui = TextualTui(app, ready=False)
    app.tui = tui  # type: ignore[attr-defined]

    async def drive(pilot: Pilot[None]) -> None:
        await _until(pilot, source.asked.is_set, "the host to ask for the catalogue")
        app.exit()  # the provider never came up

    async with anyio.create_task_group() as group:
        source = _GatedSource(provider, group)
        with anyio.fail_after(60):  # returns, rather than waiting for the provider
            await run_app_with_facets(
                app,
                tui,
                [greeter],
                service_sources=[source],  # type: ignore[list-item]
                host_beside=True,
                headless=True,
                auto_pilot=drive,
            )
        group.cancel_scope.cancel()
    assert "activated" not in log and tui.commands == {}  # never activated
