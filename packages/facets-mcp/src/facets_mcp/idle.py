"""Stdio servers let go while nobody is attached to a lingering worker, and started again.

A session worker outlives its TUI (it lingers, by default ten minutes), and every session runs
its own copy of every server: two servers cost an idle session ~270 MB. When the host says who
is attached (:class:`pico3.Attendance`, the harness service :data:`pico3.ATTENDANCE_SERVICE`;
the coding agent's worker counts its wire clients), :func:`stop_while_unattended` watches one
server: once no client has been attached and no request has been sent to it for
``idle_timeout`` seconds (``mcp.json``, default :data:`~.config.DEFAULT_IDLE_TIMEOUT`), its
process is stopped (:meth:`~.client.ServerRunner.suspend`: state ``stopped``, its tools stay
offered). A client attaching starts it again at once, ready for the next turn; a request made
meanwhile (a turn still running with nobody watching) starts it and waits for it.

Only stdio servers are stopped (an HTTP server is a connection, not a process of ours). A host
without an attendance (headless runs) never stops them.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio

from pico3 import Attendance

from .client import ServerRunner

__all__ = ["stop_while_unattended"]


async def _first(*waits: Callable[[], Awaitable[None]]) -> None:
    """Return when one of ``waits`` returns."""
    async with anyio.create_task_group() as group:

        async def one(wait: Callable[[], Awaitable[None]]) -> None:
            await wait()
            group.cancel_scope.cancel()

        for wait in waits:
            group.start_soon(one, wait)


async def stop_while_unattended(
    runner: ServerRunner, attendance: Attendance, idle_timeout: float
) -> None:
    """Watch ``runner`` for as long as it runs (see the module docstring)."""
    if runner.spec.transport != "stdio" or idle_timeout <= 0:
        return
    unattended_since: float | None = None
    while True:
        if attendance.count:
            unattended_since = None
            runner.wake()  # someone is back: have it ready for the next turn
            await attendance.changed()
            continue
        now = time.monotonic()
        if unattended_since is None:
            unattended_since = now
        if runner.state != "ready" or runner.asleep:  # nothing to stop now: wait for news
            await _first(attendance.changed, runner.state_changed)
            continue
        left = max(unattended_since, runner.last_used) + idle_timeout - now
        if left <= 0 and not runner.busy:
            runner.suspend()
            await _first(attendance.changed, runner.state_changed)
            continue
        with anyio.move_on_after(idle_timeout if left <= 0 else left):  # a call in flight: later
            await _first(attendance.changed, runner.state_changed)
