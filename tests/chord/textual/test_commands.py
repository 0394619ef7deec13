"""chord.textual's commands: declared arguments, handlers called directly, and the one error
report every command shares (driven through a real Textual app with Pilot)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from textual import on
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.pilot import Pilot
from textual.widgets import Input

from chord.context import BACKGROUND, Context
from chord.textual import (
    Arg,
    ArgumentError,
    Arguments,
    Command,
    CommandError,
    Notice,
    TextualTui,
    register_commands,
)

pytestmark = pytest.mark.anyio


@dataclass
class Counter:
    """A command target: what the handlers act on."""

    count: int = 0
    seen: list[str] = field(default_factory=lambda: [])


async def bump(target: Counter, args: Arguments, ctx: Context) -> str:
    step = int(args["step"] or "1")
    target.count += step
    return f"count is {target.count}"


def say(target: Counter, args: Arguments, ctx: Context) -> Notice:
    target.seen.append(args["text"])
    return Notice(f"said {args['text']!r} {args['how']}", "warning")


async def boom(target: Counter, args: Arguments, ctx: Context) -> None:
    raise RuntimeError("the disk is on fire")


async def refuse(target: Counter, args: Arguments, ctx: Context) -> None:
    raise CommandError("nothing to refuse yet: bump first")


BUMP = Command("bump", "Add to the count", bump, args=(Arg("step", optional=True),))
SAY = Command(
    "say",
    "Say something",
    say,
    args=(Arg("how", choices=("loud", "soft")), Arg("text", rest=True)),
)
TABLE = (
    BUMP,
    SAY,
    Command("boom", "Fail", boom),
    Command("refuse", "Refuse", refuse),
)


# -- no TUI: the handler and the parser, called directly ---------------------------------------


async def test_a_handler_is_a_function_a_test_calls_directly() -> None:
    counter = Counter()
    assert await bump(counter, BUMP.parse("2"), BACKGROUND) == "count is 2"
    assert await BUMP.run(counter, "", BACKGROUND) == "count is 3"
    said = await SAY.run(counter, "loud hello  there ", BACKGROUND)
    assert said == Notice("said 'hello  there' loud", "warning")
    assert counter.seen == ["hello  there"]


def test_arguments_are_parsed_by_their_declaration() -> None:
    parsed = SAY.parse("  soft a b  c ")
    assert parsed["how"] == "soft" and parsed["text"] == "a b  c"
    assert parsed.text == "soft a b  c"
    assert BUMP.parse("")["step"] == ""  # an optional argument not typed
    with pytest.raises(KeyError, match="declares no argument 'nope'"):
        _ = parsed["nope"]
    free = Command("free", "Free text", bump, args=None).parse("  anything at all ")
    assert free.text == "anything at all" and dict(free.values) == {}


@pytest.mark.parametrize(
    ("command", "text", "message"),
    [
        (SAY, "", "/say needs loud|soft: /say loud|soft TEXT..."),
        (SAY, "loud", "/say needs TEXT...: /say loud|soft TEXT..."),
        (SAY, "shout hi", "/say: there is no how 'shout'; use one of loud, soft"),
        (BUMP, "1 2", "/bump does not take '2': /bump [STEP]"),
        (TABLE[2], "now", "/boom takes no arguments: /boom"),
    ],
)
def test_arguments_that_do_not_fit_are_refused_with_the_usage(
    command: Command[Any], text: str, message: str
) -> None:
    with pytest.raises(ArgumentError) as refused:
        command.parse(text)
    assert str(refused.value) == message
    assert isinstance(refused.value, CommandError)


@given(st.lists(st.text(alphabet="abc xyz", min_size=1).map(str.strip).filter(bool), max_size=4))
def test_a_rest_argument_keeps_every_word_typed(words: list[str]) -> None:
    text = " ".join(words)
    if text:
        assert SAY.parse(f"loud {text}")["text"] == text


def test_usage_and_the_palette_line_come_from_the_declaration() -> None:
    assert SAY.usage == "/say loud|soft TEXT..."
    assert SAY.description == "loud|soft TEXT...  Say something"
    assert BUMP.usage == "/bump [STEP]"
    hinted = Command("x", "X", bump, args=(Arg("file", optional=True, hint="[FILE.html]"),))
    assert hinted.usage == "/x [FILE.html]"
    assert TABLE[2].usage == "/boom" and TABLE[2].description == "Fail"


def test_a_command_is_checked_when_declared() -> None:
    with pytest.raises(ValueError, match="invalid command name 'two words'"):
        Command("two words", "x", bump)
    with pytest.raises(ValueError, match="only the last argument"):
        Command("x", "x", bump, args=(Arg("a", rest=True), Arg("b")))


# -- through a real Textual app ---------------------------------------------------------------


class CommandApp(App[None]):
    """A prompt whose submitted line runs as a command, as the coding agent's editor does."""

    def compose(self) -> ComposeResult:
        yield Vertical(id="panels")
        yield Input(id="prompt")

    def on_mount(self) -> None:
        self.tui = TextualTui(self)
        self.ran = 0

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        line = event.value
        event.input.value = ""

        async def run() -> None:
            if not await self.tui.run_command(line, BACKGROUND):
                event.input.value = line  # not done: the line is back, to fix in place
            self.ran += 1

        self.run_worker(run(), group="commands")


def _toasts(app: App[Any]) -> list[tuple[str, str]]:
    notes = app._notifications  # pyright: ignore[reportPrivateUsage]
    return [(str(n.severity), str(n.message)) for n in notes]


async def _type(pilot: Pilot[None], app: CommandApp, line: str) -> None:
    before = app.ran
    app.query_one("#prompt", Input).value = ""  # a refused line before stays: start afresh
    await pilot.press(*line, "enter")
    with anyio.fail_after(20):
        while app.ran == before:
            await pilot.pause(0.01)


async def test_every_failure_is_the_same_kind_of_toast_and_the_app_keeps_running() -> None:
    app = CommandApp()
    counter = Counter()
    async with app.run_test() as pilot:
        unregister = register_commands(app.tui, TABLE, counter)
        await _type(pilot, app, "/boom")
        await _type(pilot, app, "/refuse")
        await _type(pilot, app, "/say shout hi")
        await _type(pilot, app, "/bump 2")
        await _type(pilot, app, "/say soft hi there")
        await pilot.pause()
        assert app.is_running
        assert _toasts(app) == [
            (
                "error",
                "/boom failed: RuntimeError: the disk is on fire "
                f"(textual/test_commands.py:{boom.__code__.co_firstlineno + 1} in boom)",
            ),
            ("error", "nothing to refuse yet: bump first"),
            ("error", "/say: there is no how 'shout'; use one of loud, soft"),
            ("information", "count is 2"),
            ("warning", "said 'hi there' soft"),
        ]
        assert counter.seen == ["hi there"]  # the refused /say never reached its handler
        unregister()
        assert not set(app.tui.commands) & {"bump", "say", "boom", "refuse"}


@pytest.mark.parametrize(
    ("line", "done"),
    [
        ("/bump 2", True),
        ("/say soft hi", True),
        ("/boom", False),  # failed
        ("/refuse", False),  # refused by its handler (CommandError)
        ("/say shout hi", False),  # refused before its handler (ArgumentError)
        ("/bmup 2", False),  # no such command
    ],
)
async def test_only_a_command_that_did_its_job_clears_the_line(line: str, done: bool) -> None:
    """``run_command`` says whether the command did its job, so a refused one's line stays for
    the user to fix (Claude Code and pi keep it) instead of being typed again."""
    app = CommandApp()
    async with app.run_test() as pilot:
        register_commands(app.tui, TABLE, Counter())
        assert await app.tui.run_command(line, BACKGROUND) is done
        await _type(pilot, app, line)
        assert app.query_one("#prompt", Input).value == ("" if done else line)


async def test_a_plain_handler_says_it_did_not_do_its_job_by_returning_false() -> None:
    app = CommandApp()
    async with app.run_test():
        app.tui.register_command("nothing", "Does nothing yet", lambda a, c: False)
        app.tui.register_command("quiet", "Does its job", lambda a, c: None)
        assert not await app.tui.run_command("/nothing", BACKGROUND)
        assert await app.tui.run_command("/quiet", BACKGROUND)
        assert not await app.tui.run_command("plain text", BACKGROUND)  # no command at all


async def test_a_plain_handler_fails_the_same_way() -> None:
    """``register_command(name, description, handler)``: the compatibility path."""
    app = CommandApp()
    async with app.run_test() as pilot:

        def legacy(args: str, ctx: Context) -> None:
            raise ValueError(f"cannot {args}")

        app.tui.register_command("legacy", "An old-style handler", legacy)
        await _type(pilot, app, "/legacy fly")
        await pilot.pause()
        line = legacy.__code__.co_firstlineno + 1
        assert _toasts(app) == [
            (
                "error",
                f"/legacy failed: ValueError: cannot fly (textual/test_commands.py:{line} in legacy)",
            )
        ]
        row = app.tui.commands["legacy"]
        assert (row.usage, row.help) == ("/legacy", "An old-style handler")


async def test_the_registry_rows_carry_usage_and_help() -> None:
    app = CommandApp()
    async with app.run_test():
        register_commands(app.tui, TABLE, Counter())
        row = app.tui.commands["say"]
        assert (row.name, row.usage, row.help) == ("say", "/say loud|soft TEXT...", "Say something")
        assert row.description == "loud|soft TEXT...  Say something"  # the palette's line


async def test_a_table_with_a_taken_name_registers_nothing() -> None:
    app = CommandApp()
    async with app.run_test():
        app.tui.register_command("say", "taken", lambda a, c: None)
        with pytest.raises(ValueError, match="already registered"):
            register_commands(app.tui, TABLE, Counter())
        assert sorted(app.tui.commands) == ["say"]
        assert app.tui.commands["say"].description == "taken"
