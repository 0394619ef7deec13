"""When an unattended worker stops by itself.

A session worker outlives its TUI on purpose (docs/design/decisions.md#d9): a crashed or closed terminal must
not stop a turn, a background job or a pending approval, and ``coding-agent --continue`` or
``attach`` reconnects to the same worker. Nothing would ever stop a worker nobody comes back to,
though, so the worker *lingers*: once no client has been connected and nothing has been live
(no turn, no task, no job) for ``linger`` seconds, it stops cleanly, as on SIGTERM. Its session
is on disk; the next ``coding-agent --resume`` starts a new worker on it.

:class:`ClientCount` wraps the wire's connection handler to count the connected clients (it is
also the session's :class:`pico3.Attendance`: facets-mcp stops its servers while it is zero), and
:func:`wait_unattended` returns once the worker has been unattended and idle long enough.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

__all__ = ["DEFAULT_LINGER", "ClientCount", "wait_unattended"]

DEFAULT_LINGER = 600.0
"""Seconds an unattended, idle worker waits before it stops (``--linger``; 0 never stops)."""

_POLL = 1.0
"""Seconds between two looks at the harness while a client is attached or work is live."""


class ClientCount:
    """How many wire clients are connected now; :meth:`changed` wakes on every change."""

    def __init__(self) -> None:
        self.count = 0
        self._changed = anyio.Event()

    def handler(self, inner: Callable[[Any], Awaitable[None]]) -> Callable[[Any], Awaitable[None]]:
        """``inner`` (a per-connection handler), counting the connection while it runs."""

        async def handle(connection: Any) -> None:
            self._step(+1)
            try:
                await inner(connection)
            finally:
                self._step(-1)

        return handle

    async def changed(self) -> None:
        """Wait for the next connection or disconnection."""
        await self._changed.wait()

    def _step(self, delta: int) -> None:
        self.count += delta
        changed, self._changed = self._changed, anyio.Event()
        changed.set()


async def wait_unattended(
    clients: ClientCount, busy: Callable[[], bool], linger: float, *, poll: float = _POLL
) -> None:
    """Return once no client has been connected and ``busy()`` has been false for ``linger``
    seconds in a row. A connection resets the wait at once; live work is looked at every
    ``poll`` seconds (and whenever a client comes or goes)."""
    if linger <= 0:
        raise ValueError("linger must be positive (0 means: never stop, so do not wait)")
    quiet_since: float | None = None
    while True:
        now = anyio.current_time()
        if clients.count or busy():
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= linger:
            return
        timeout = poll if quiet_since is None else min(poll, quiet_since + linger - now)
        with anyio.move_on_after(max(timeout, 0.0)):
            await clients.changed()
