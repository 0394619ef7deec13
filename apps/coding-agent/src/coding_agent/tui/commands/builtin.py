"""The app's own commands: ``/help``, ``/quit`` and ``/stop``.

Every other command comes from a facet that can carry it out; these three act on the app
itself (:class:`AppTarget`, which :class:`~coding_agent.tui.app.CodingAgentApp` is):

* ``/help`` (and F1) — the help screen: the commands, then the keys as they are bound now;
* ``/quit`` — leave the app; the session's worker keeps running (``/quit --stop`` is ``/stop``);
* ``/stop`` — stop the session's worker and leave; asks first when a turn or a job is live,
  since stopping interrupts it (it resumes with the session). A session on a server is the
  server's to stop: there ``/stop`` says so and the TUI stays.
"""

from __future__ import annotations

from typing import Protocol

from chord import Context
from chord.textual import Arguments, Command, CommandOutcome, Notice, TuiService

__all__ = [
    "BUILTIN_COMMANDS",
    "SERVER_STOP",
    "AppTarget",
    "help_command",
    "quit_command",
    "stop_command",
]


class AppTarget(Protocol):
    """What the app's own commands need from the app."""

    @property
    def tui(self) -> TuiService: ...

    stop_requested: bool
    on_server: bool

    def action_help(self) -> None:
        """Show the help screen."""
        ...

    def live_work(self) -> str | None:
        """What would be cut short if the worker stopped now (``None``: nothing)."""
        ...

    def exit(self) -> None:
        """Leave the app."""
        ...


def help_command(app: AppTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/help``: the help screen."""
    app.action_help()
    return None


async def quit_command(app: AppTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/quit``: leave, the session keeps running; ``/quit --stop`` is ``/stop``."""
    if args.text == "--stop":
        return await stop_command(app, args, ctx)
    app.exit()
    return None


async def stop_command(app: AppTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/stop``: stop the worker and leave, after asking when work is live. A session on a
    server is not this TUI's to stop: it says so and stays (``/quit`` leaves)."""
    if app.on_server:
        return Notice(SERVER_STOP, severity="warning")
    live = app.live_work()
    if live is not None:
        modal = await app.tui.acquire_modal(ctx)
        try:
            stop = await modal.confirm(
                "Stop the session's worker?",
                f"{live}: stopping interrupts it (it resumes when the session is "
                "continued). /quit leaves it running instead.",
                yes="Stop",
                no="Keep running",
            )
        finally:
            modal.close()
        if not stop:
            return "The worker keeps running"
    app.stop_requested = True
    app.exit()
    return None


SERVER_STOP = (
    "This session runs on a coding-agent server, shared with its other clients: /stop cannot "
    "stop it from here. It keeps running there and stops by itself once no client is attached "
    "and nothing runs (serve --idle). /quit leaves it; Esc or Ctrl+C interrupts a turn."
)
"""What ``/stop`` says in a TUI attached to a server's session."""

BUILTIN_COMMANDS: tuple[Command[AppTarget], ...] = (
    Command("help", "List the commands", help_command),
    # Free text (args=None): "/quit --stop" stops; anything else typed after /quit is ignored.
    Command("quit", "Leave the app (the session keeps running)", quit_command, args=None),
    Command("stop", "Stop the session's worker and leave (asks when work is live)", stop_command),
)
"""The app's own commands, registered by the app when it mounts."""
