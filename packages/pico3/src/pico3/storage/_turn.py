"""The turn of one storage's commits (:class:`Turn`), and a shielding cancel scope built
without looking the async library up (:func:`shield_scope`): the per-commit machinery of
:class:`~pico3.storage.postgres.PostgresStorage`, kept cheap.

A session's commits are sequential, so the lock they take is nearly always free. anyio's
``Lock`` asks asyncio for the current task on every acquire and release (its owner), and
``anyio.CancelScope(...)`` asks sniffio which library runs before building the scope; on
Python 3.11 each of those asks ``get_running_loop``, which makes a ``getpid`` system call. On
a lone session's commit, between its blocking waits, they came to ~10 % of the Python time
spent on it (py-spy, issue 42).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import anyio

__all__ = ["Turn", "shield_scope"]


class Turn:
    """A first-come, first-served lock that tracks no owner: :meth:`acquire` of a free turn
    takes it at once, with no ``await`` (anyio's ``Lock(fast_acquire=True)`` likewise yields
    no loop turn, but still checks for a cancellation); a busy one is waited for in order, and
    only that wait can be cancelled. :meth:`release` hands the turn to the first waiter (it
    stays taken, so no newcomer overtakes the queue) or frees it."""

    __slots__ = ("_held", "_waiters")

    def __init__(self) -> None:
        self._held = False
        self._waiters: deque[anyio.Event] = deque()

    def locked(self) -> bool:
        return self._held

    async def acquire(self) -> None:
        if not self._held:
            self._held = True
            return
        handed = anyio.Event()
        self._waiters.append(handed)
        try:
            await handed.wait()
        except BaseException:
            if handed.is_set():
                self.release()  # handed the turn just as it was cancelled: pass it on
            else:
                self._waiters.remove(handed)
            raise

    def release(self) -> None:
        if self._waiters:
            self._waiters.popleft().set()  # the turn passes on, still taken
        else:
            self._held = False

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()


def shield_scope() -> type[anyio.CancelScope]:
    """The running async library's own cancel scope class, to be called as
    ``scope(shield=True)``: the scope ``anyio.CancelScope(shield=True)`` builds, without asking
    which library runs each time. Call it inside the event loop that will use the scopes (a
    storage asks at its open)."""
    scope: Any = type(anyio.CancelScope())
    return scope
