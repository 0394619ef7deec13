"""Edit the prompt in ``$VISUAL`` / ``$EDITOR`` (Ctrl+G), the way git opens a commit message.

The prompt goes into a temporary file, the user's editor opens it, and whatever the file holds
when the editor exits *successfully* becomes the prompt (one trailing newline, which editors
add, is dropped). A non-zero exit means "never mind": the caller keeps the text it had.

The editor needs the terminal, so the app is suspended around it (:meth:`textual.app.App.suspend`)
and the editor runs in the foreground, blocking the app's loop as Textual documents: nothing
can draw over the editor's screen meanwhile. The session itself lives in the worker process
and carries on. Where the app cannot suspend (headless runs such as tests, or a driver without
suspend support) the editor runs as a plain child process with its output captured, which is
what a scripted ``$EDITOR`` needs.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from textual.app import App, SuspendNotSupported

__all__ = ["ExternalEditorError", "editor_command", "run_external_editor"]


class ExternalEditorError(Exception):
    """The editor could not run or exited unsuccessfully; the text was not changed."""


def editor_command(environ: Mapping[str, str] | None = None) -> list[str]:
    """The editor to run, as an argument list: ``$VISUAL``, else ``$EDITOR``, else ``vi``.

    The variable is split like a shell word list, so ``EDITOR="code --wait"`` works.
    """
    env = os.environ if environ is None else environ
    for name in ("VISUAL", "EDITOR"):
        value = env.get(name, "").strip()
        if value:
            try:
                argv = shlex.split(value)
            except ValueError as error:
                raise ExternalEditorError(f"${name} is not a valid command: {error}") from None
            if argv:
                return argv
    return ["vi"]


async def run_external_editor(
    app: App[Any], text: str, *, command: Sequence[str] | None = None
) -> str:
    """Open ``text`` in the external editor and return the edited text.

    ``command`` defaults to :func:`editor_command`; the temporary file's path is appended.
    Raises :class:`ExternalEditorError` when the editor cannot start or exits non-zero.
    """
    argv = list(command) if command is not None else editor_command()
    path = _write_temporary(text)
    try:
        status, detail = await _run(app, [*argv, str(path)])
        if status != 0:
            message = f"{argv[0]} exited with status {status}; the prompt is unchanged"
            raise ExternalEditorError(f"{message}\n{detail}" if detail else message)
        edited = _read(path)
    finally:
        path.unlink(missing_ok=True)
    return edited[:-1] if edited.endswith("\n") else edited


def _write_temporary(text: str) -> Path:
    fd, name = tempfile.mkstemp(prefix="coding-agent-prompt-", suffix=".md")
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
    return Path(name)


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _run_in_terminal(app: App[Any], argv: list[str]) -> int | None:
    """Run the editor in the foreground of the suspended app (``None``: cannot suspend).

    This blocks the event loop on purpose: while the editor owns the terminal, nothing in
    this process may draw, and Textual's suspend is built for exactly this use.
    """
    if app.is_headless:
        return None
    try:
        with app.suspend():
            return subprocess.run(argv, check=False).returncode
    except SuspendNotSupported:
        return None


async def _run(app: App[Any], argv: list[str]) -> tuple[int, str]:
    """Run the editor; returns its exit status and (when captured) the tail of its stderr."""
    try:
        status = _run_in_terminal(app, argv)
        if status is not None:
            return status, ""
        result = await anyio.run_process(
            argv, check=False, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
        )
    except OSError as error:
        raise ExternalEditorError(f"could not start {argv[0]}: {error}") from None
    detail = result.stderr.decode("utf-8", errors="replace").strip()
    return result.returncode, detail[-500:]
