"""``!cmd`` / ``!!cmd`` in the editor: how a line is read and how a command is shown.

A submitted line starting with ``!`` is a shell command for the session worker
(:mod:`coding_agent.worker.shell_service`): ``!cmd`` puts the command and its output into the
model's context, ``!!cmd`` only shows them. The app hands it to its :class:`ShellRunner` (the
client's, :class:`coding_agent.tui.commands.shell.RemoteShellRunner`).
"""

from __future__ import annotations

from typing import Any, Protocol

from rich.text import Text

from chord import Context, inert

__all__ = ["ShellRunner", "parse_bang", "shell_text"]


class ShellRunner(Protocol):
    """What the app needs to run ``!`` commands."""

    @property
    def running(self) -> dict[str, Any] | None:
        """The command running now (``{"command", "include", "output"}``), or ``None``."""
        ...

    async def run(self, command: str, include: bool, ctx: Context) -> dict[str, Any]:
        """Run ``command`` to its end (the worker writes its entry); returns the entry's data."""
        ...

    async def abort(self, ctx: Context) -> bool:
        """Stop the running command (``False`` when none runs)."""
        ...


def parse_bang(text: str) -> tuple[str, bool] | None:
    """``(command, include)`` of an editor line ``!cmd`` (include) or ``!!cmd`` (exclude);
    ``None`` when ``text`` does not start with ``!``."""
    if not text.startswith("!"):
        return None
    if text.startswith("!!"):
        return text[2:].strip(), False
    return text[1:].strip(), True


def shell_text(command: str, output: str, *, excluded: bool, status: str = "") -> Text:
    """How a ``!`` command looks: ``! $ command`` (a note when excluded), then its output; both
    made inert (:func:`chord.inert`)."""
    line = Text()
    line.append(f"{'!!' if excluded else '!'} $ {inert(command)}", style="bold")
    if excluded:
        line.append("  (not sent to the model)", style="dim")
    if status:
        line.append(f"  {status}", style="dim")
    if output:
        line.append("\n" + inert(output.rstrip("\n")))
    return line
