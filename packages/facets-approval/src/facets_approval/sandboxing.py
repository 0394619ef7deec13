"""The ``sandbox`` permission mode's words: why a call asks although the mode runs commands.

In ``sandbox`` mode (:mod:`.contract`) the approval hook lets a command run inside the OS
sandbox without asking and rewrites its call to say so (``outside_sandbox: false``: the
``bash`` tool then runs it in :class:`pico3.Sandbox`, whatever the mode is by then). It asks
instead, with one of these reasons in the dialog, when the model asks to run the command outside
(:func:`outside_sandbox`) or when no sandbox can start here (:data:`SANDBOX_UNAVAILABLE`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["SANDBOX_UNAVAILABLE", "outside_sandbox"]

SANDBOX_UNAVAILABLE = (
    "the session is in sandbox mode but the OS sandbox cannot start here (see /sandbox), so it "
    "asks as ask mode does"
)


def outside_sandbox(arguments: dict[str, Any]) -> str | None:
    """The dialog's reason for a call that asks to run outside the sandbox, else ``None``."""
    if arguments.get("outside_sandbox") is not True:
        return None
    why = arguments.get("reason")
    said = f": {why.strip()}" if isinstance(why, str) and why.strip() else " (no reason given)"
    return f"This command asks to run OUTSIDE the sandbox, unconfined{said}."
