"""Ctrl+C (SIGINT) and SIGTERM in a headless run: the turn is aborted, durably, as Esc aborts it
in the TUI.

While :func:`~coding_agent.cli.headless.follow_turn` follows its turn it *arms* the run's
:class:`Interrupt`: the first signal then asks it to abort the turn (the conversation's
``abort``, docs/design/harness.md#abort: a durable mark, so neither a ``--resume`` nor a
restarted worker runs the turn again), it waits at most :data:`ABORT_WAIT` seconds for the
turn to end, and the run writes its last line (``--json``: the result line, ``"status":
"interrupted"``; ``-p``: one ``coding-agent: error:`` line) and exits 130. A second signal, or
one before the turn was sent (or after it ended), cancels the run at once: exit 130, with the
same last line (:attr:`Interrupt.report`).
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

__all__ = ["ABORT_WAIT", "EXIT_INTERRUPTED", "Interrupt", "until_interrupted"]

EXIT_INTERRUPTED = 130
ABORT_WAIT = 10.0
"""Seconds an interrupted run waits for its turn's abort to be committed and the turn to end."""

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupt:
    """The signals of one headless run (:func:`until_interrupted`)."""

    def __init__(self) -> None:
        self.requested = anyio.Event()
        """Set at the first signal while :attr:`armed`: the turn is to be aborted."""
        self.armed = False
        """Whether a turn is followed that the first signal should abort (else it cancels)."""
        self.signal: str | None = None
        """The first signal's name (``SIGINT``, ``SIGTERM``)."""
        self.report: Callable[[str], None] | None = None
        """Writes the run's last line (``--json``'s result, ``-p``'s error line) with the given
        detail when the run is cancelled by a signal (it reports itself otherwise)."""

    def describe(self) -> str:
        return f"interrupted ({self.signal or 'SIGINT'})"


async def until_interrupted(
    interrupt: Interrupt, run: Callable[..., Awaitable[int]], *args: Any
) -> int:
    """``await run(*args)``; SIGINT and SIGTERM (those not ignored: a background job keeps
    ignoring SIGINT) go to ``interrupt``: while it is armed the first one asks the run to abort
    its turn (the run then returns its exit code, 130); otherwise, or at the second, the run is
    cancelled and ``KeyboardInterrupt`` raised (the command's exit 130).

    Why a cancel scope, not asyncio's own SIGINT handling: that cancels the main task once
    (``Task.cancel``): one ``CancelledError`` at one await, which a cleanup path that catches it
    can absorb, and the run then goes on as if no SIGINT had come (seen under load: a ``-p`` run
    waiting on a bash call ignored its SIGINT). anyio's cancel scope is level-triggered: every
    await inside it raises again until the run has unwound. Once the run is cancelled the
    signals' handlers are the default ones again: one more interrupts at once."""
    handled = [number for number in _SIGNALS if signal.getsignal(number) is not signal.SIG_IGN]
    if not handled:
        return await run(*args)
    cancelled = False
    code = EXIT_INTERRUPTED
    error: BaseException | None = None
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            nonlocal cancelled
            with anyio.open_signal_receiver(*handled) as signals:
                async for number in signals:
                    first = interrupt.signal is None
                    if first:
                        interrupt.signal = signal.Signals(number).name
                    if first and interrupt.armed:
                        interrupt.requested.set()  # the run aborts its turn and returns
                        continue
                    cancelled = True
                    group.cancel_scope.cancel()
                    return

        group.start_soon(watch)
        try:
            code = await run(*args)
        except BaseException as raised:  # re-raised below as itself, not in a task group's group
            error = raised
        group.cancel_scope.cancel()
    if cancelled:
        if interrupt.report is not None:  # the run did not report: its last line
            detail = interrupt.describe()
            if interrupt.requested.is_set():
                detail += ": a second signal: exited without waiting for the turn's abort"
            interrupt.report(detail)
        raise KeyboardInterrupt
    if error is not None:
        raise error
    return code
