"""Slash commands as values: :class:`Command`, its arguments and the one error report.

A command is a name, a help line, the arguments it takes (:class:`Arg`) and a handler: a plain
top-level function ``handler(target, args, ctx)`` a test can call without a TUI. ``target`` is
whatever the handler acts on (a client, a session, a small dataclass of both), bound when the
command is registered; ``args`` are the parsed :class:`Arguments`; ``ctx`` the command's
:class:`~chord.Context`. What the handler returns is said in a toast: a string (information),
a :class:`Notice` (with its severity) or ``None`` (nothing).

A package keeps its commands in a table — a tuple of :class:`Command` values — and registers
them all at once with :func:`register_commands` (own the returned function with ``env.own``)::

    async def index(target: Indexer, args: Arguments, ctx: Context) -> str:
        count = await target.index(args["path"] or ".", ctx)
        return f"Indexed {count} files"

    COMMANDS = (Command("index", "Index the working tree", index, args=(Arg("path", optional=True),)),)

    env.own(register_commands(tui, COMMANDS, indexer))

Every command fails the same way (:func:`report_command_error`): arguments that do not fit
the command's :class:`Arg` list are refused before the handler runs (an
:class:`ArgumentError` naming the problem and the usage); a :class:`CommandError` the handler
raises is shown as its message alone; any other exception becomes ``/name failed: error``. All
are error toasts; none reaches the app. A cancelled context ends the command quietly.
A command that failed in any of these ways did not do its job, and says so to whoever ran it
(:meth:`BoundCommand.__call__` returns ``False``): an app keeps what the user typed then, so a
typo is fixed in place rather than typed again (``/model sonet``).

The registry of registered commands — what the palette, ``/help`` and completion read — is
:attr:`chord.textual.TextualTui.commands`, one :class:`~chord.textual.SlashCommand` row per
name. ``TuiService.register_command(name, description, handler)`` remains the low-level path
(a handler taking the raw argument text); :func:`register_commands` goes through it, so any
:class:`~chord.textual.TuiService` (a test's fake included) takes commands.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeAlias, TypeVar

from chord.context import Context, ContextCancelled

__all__ = [
    "Arg",
    "ArgumentError",
    "Arguments",
    "BoundCommand",
    "Command",
    "CommandError",
    "CommandOutcome",
    "Notice",
    "register_commands",
    "report_command_error",
]

TargetT = TypeVar("TargetT")
Severity = Literal["information", "warning", "error"]


class TuiService(Protocol):
    """The part of :class:`chord.textual.TuiService` commands use (declared here so this
    module does not import :mod:`chord.textual`, which imports it)."""

    def notify(self, message: str, *, severity: Severity = "information") -> None: ...

    def register_command(
        self,
        name: str,
        description: str,
        handler: Callable[[str, Context], Awaitable[bool | None] | bool | None],
    ) -> Callable[[], None]: ...


class CommandError(Exception):
    """A command's refusal meant for the user: shown as its message alone, in an error toast.

    Raise it from a handler for a problem the user can fix ("there is no branch 7 (branches:
    1, 2)"); anything else a handler raises is reported as ``/name failed: error``.
    """


class ArgumentError(CommandError):
    """The arguments typed do not fit the command's :class:`Arg` list (raised before the
    handler runs; the message names the problem and the command's usage)."""


@dataclass(frozen=True, slots=True)
class Notice:
    """What a handler says when it is done, with the toast's severity."""

    message: str
    severity: Severity = "information"


CommandOutcome: TypeAlias = str | Notice | None
"""What a handler returns: a message (an information toast), a :class:`Notice`, or nothing."""


@dataclass(frozen=True, slots=True)
class Arg:
    """One argument of a command, as ``/help`` and the palette show it.

    Arguments are separated by spaces; ``rest`` takes the rest of the line, spaces included
    (a prompt, a name with spaces), so only the last argument may have it. An ``optional``
    argument not typed is ``""``. ``choices`` limits the values (anything else is an
    :class:`ArgumentError` listing them). ``hint`` replaces the upper-cased name in the usage
    line (``"[FILE.html|FILE.jsonl]"``).
    """

    name: str
    help: str = ""
    optional: bool = False
    rest: bool = False
    choices: tuple[str, ...] = ()
    hint: str = ""

    def shown(self) -> str:
        """The argument in a usage line: ``NAME``, ``[NAME]``, ``TEXT...`` or the hint."""
        if self.hint:
            return self.hint
        text = "|".join(self.choices) if self.choices else self.name.upper()
        if self.rest:
            text += "..."
        return f"[{text}]" if self.optional else text


@dataclass(frozen=True, slots=True)
class Arguments:
    """A command's parsed arguments: ``args["name"]`` is the value typed (``""`` when an
    optional one was not); :attr:`text` is the whole argument text, stripped."""

    text: str = ""
    values: Mapping[str, str] = field(default_factory=lambda: {})

    def __getitem__(self, name: str) -> str:
        if name not in self.values:
            declared = ", ".join(self.values) or "none"
            raise KeyError(f"the command declares no argument {name!r} (declared: {declared})")
        return self.values[name]


Handler: TypeAlias = Callable[
    [TargetT, Arguments, Context], Awaitable[CommandOutcome] | CommandOutcome
]


@dataclass(frozen=True, slots=True)
class Command(Generic[TargetT]):
    """A slash command: ``/name`` with its help line, its arguments and its handler.

    ``args=None`` declares nothing: the handler gets the raw text in ``args.text`` (free text
    whose form the handler decides). A name may group with ``:`` (``skill:review``).
    """

    name: str
    help: str
    handler: Handler[TargetT]
    args: tuple[Arg, ...] | None = ()

    def __post_init__(self) -> None:
        name = self.name
        if not name or not name.replace("-", "").replace("_", "").replace(":", "").isalnum():
            raise ValueError(f"invalid command name {name!r}: use letters, digits, -, _ and :")
        for arg in (self.args or ())[:-1]:
            if arg.rest:
                raise ValueError(f"/{name}: only the last argument may take the rest of the line")

    @property
    def usage(self) -> str:
        """``/name ARG [OPTIONAL]``, as ``/help`` shows it."""
        return " ".join([f"/{self.name}", *(a.shown() for a in self.args or ())])

    @property
    def description(self) -> str:
        """The palette's line: the arguments, then the help (``NAME  Label this point``)."""
        hint = " ".join(a.shown() for a in self.args or ())
        return f"{hint}  {self.help}" if hint else self.help

    def parse(self, text: str) -> Arguments:
        """``text`` (what follows ``/name``) split into this command's arguments.

        Raises :class:`ArgumentError` for a missing argument, a value not among an argument's
        ``choices``, or text left over.
        """
        remaining = text.strip()
        if self.args is None:
            return Arguments(remaining, {})
        values: dict[str, str] = {}
        for arg in self.args:
            if arg.rest:
                value, remaining = remaining, ""
            else:
                value, _, remaining = remaining.partition(" ")
                remaining = remaining.lstrip()
            if not value and not arg.optional:
                raise ArgumentError(f"/{self.name} needs {arg.shown()}: {self.usage}")
            if value and arg.choices and value not in arg.choices:
                raise ArgumentError(
                    f"/{self.name}: there is no {arg.name} {value!r}; use one of "
                    f"{', '.join(arg.choices)}"
                )
            values[arg.name] = value
        if remaining:
            takes = "takes no arguments" if not self.args else f"does not take {remaining!r}"
            raise ArgumentError(f"/{self.name} {takes}: {self.usage}")
        return Arguments(text.strip(), values)

    async def run(self, target: TargetT, text: str, ctx: Context) -> CommandOutcome:
        """Parse ``text`` and call the handler (errors are raised, not reported)."""
        result = self.handler(target, self.parse(text), ctx)
        if inspect.isawaitable(result):
            result = await result
        return result

    def bind(self, target: TargetT, tui: TuiService) -> BoundCommand[TargetT]:
        """The ``(text, ctx)`` handler :meth:`TuiService.register_command` takes: runs this
        command on ``target`` and reports its outcome or error through ``tui``."""
        return BoundCommand(self, target, tui)


@dataclass(frozen=True, slots=True)
class BoundCommand(Generic[TargetT]):
    """A :class:`Command` bound to its target and the TUI that reports it; called with the
    raw argument text and a context, it never raises (see :func:`report_command_error`)."""

    command: Command[TargetT]
    target: TargetT
    tui: TuiService

    async def __call__(self, text: str, ctx: Context) -> bool:
        """Run the command on ``text``; ``True`` when it did its job (its outcome, if any, was
        said), ``False`` when it was refused, failed (the error was said) or was cancelled."""
        try:
            outcome = await self.command.run(self.target, text, ctx)
        except ContextCancelled:
            return False
        except Exception as error:
            report_command_error(self.tui, self.command.name, error)
            return False
        if isinstance(outcome, Notice):
            self.tui.notify(outcome.message, severity=outcome.severity)
        elif outcome:
            self.tui.notify(outcome)
        return True


def report_command_error(tui: TuiService, name: str, error: BaseException) -> None:
    """The one error report of every command: an error toast of a :class:`CommandError`'s
    message alone, or ``/name failed: Type: error (file:line in function)`` for anything else
    (where the command's own code raised it: a facet author sees what broke and where)."""
    if isinstance(error, CommandError):
        message = str(error) or f"/{name} was refused"
    else:
        message = f"/{name} failed: {_where_it_failed(error)}"
    tui.notify(message, severity="error")


def _where_it_failed(exc: BaseException) -> str:
    """A command's error as its author needs it: the exception's type and message, and the
    file and line where it was raised (the innermost frame of its traceback outside chord), e.g.
    ``ZeroDivisionError: division by zero (my_feature/plugin.py:42 in bump)``."""
    import os
    import traceback

    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    chord_dir = os.path.dirname(os.path.abspath(__file__))
    frames = [  # the command's own code, not chord's plumbing a remote call went through
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not os.path.abspath(f.filename).startswith(chord_dir + os.sep)
    ]
    if not frames:
        return text
    frame = frames[-1]
    parts = os.path.normpath(frame.filename).split(os.sep)
    shown = os.sep.join(parts[-2:]) if len(parts) > 1 else frame.filename
    return f"{text} ({shown}:{frame.lineno} in {frame.name})"


def register_commands(
    tui: TuiService, commands: Iterable[Command[TargetT]], target: TargetT
) -> Callable[[], None]:
    """Register every command of ``commands`` (a table) on ``tui``, bound to ``target``.

    Returns the function unregistering them all (own it with ``env.own``). A name already
    registered is refused (``ValueError``) and nothing of the table stays registered.
    """
    undo: list[Callable[[], None]] = []

    def unregister() -> None:
        for one in reversed(undo):
            one()
        undo.clear()

    try:
        for command in commands:
            undo.append(
                tui.register_command(command.name, command.description, command.bind(target, tui))
            )
    except BaseException:
        unregister()
        raise
    return unregister


def command_row_fields(handler: Any, name: str, description: str) -> tuple[str, str]:
    """``(usage, help)`` of a registered handler: a :class:`BoundCommand`'s own, else the
    plain ``/name`` and ``description`` (a handler given to ``register_command`` directly)."""
    if isinstance(handler, BoundCommand):
        command: Command[Any] = handler.command  # pyright: ignore[reportUnknownMemberType]
        return command.usage, command.help
    return f"/{name}", description
