"""Keeping the server up whatever its clients do (docs/server.md#limits): the open-file limit,
the caps on connections, and a TCP accept loop that never dies.

A connection is *pending* from its accept until its preface's token is accepted (the TLS
handshake and the preface line, within :data:`~.preface.PREFACE_TIMEOUT` in all), then
*admitted* until it ends. Three caps, each from ``serve``'s flags or derived from the open-file
limit (:func:`default_limits`):

* ``max_pending``: pending connections in all. When it is reached, a new connection takes the
  place of the **oldest** pending one, which is closed: an idle flood cannot keep a client that
  completes its preface at once out, it can only hurry its own connections out.
* ``max_per_address``: pending connections from one address (IP). Past it a new one is closed
  at once.
* ``max_connections``: admitted connections in all (each holds two descriptors: the client's
  and the worker's). Past it the preface is answered ``ERR busy`` (a client with a list of
  servers moves on to the next).

Accepting never ends the server. When the process is out of file descriptors (``EMFILE``,
``ENFILE``) it sheds load: it closes the :data:`SHED_ON_EMFILE` oldest pending connections and
lowers ``max_pending`` to what is left, so from then on a new connection replaces the oldest
pending one before the descriptors run out again, and the admitted sessions keep descriptors
for their workers. With no pending connection to close, it closes its reserve descriptor,
accepts the waiting connection and closes it at once (so the backlog drains instead of
spinning), and reopens the reserve. Each is a ``shed reason=no_file_descriptors`` log line.
Other accept errors (``ECONNABORTED``, ``ENOBUFS``, ``ENOMEM``) wait a moment and go on.
"""

from __future__ import annotations

import errno
import os
import resource
import socket
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel

__all__ = [
    "RESERVED_FDS",
    "Gate",
    "Limits",
    "Ticket",
    "default_limits",
    "raise_fd_limit",
    "serve_tcp",
]

RESERVED_FDS = 64
"""Descriptors kept out of the caps' budget: the workers' pipes, the database, the log."""

SHED_ON_EMFILE = 16
"""Pending connections closed when the process runs out of descriptors."""


@dataclass(frozen=True)
class Limits:
    """The connection caps in force (see the module docstring)."""

    max_pending: int
    max_per_address: int
    max_connections: int


def raise_fd_limit() -> tuple[int, int]:
    """Raise the soft open-file limit to the hard one (where the kernel allows); return the
    ``(before, now)`` soft limits."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if hard == resource.RLIM_INFINITY:
        try:
            with open("/proc/sys/fs/nr_open") as file:
                target = int(file.read())
        except (OSError, ValueError):
            target = max(soft, 65536)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError):
            return soft, soft
        return soft, target
    return soft, soft


def default_limits(
    fd_limit: int,
    *,
    max_pending: int | None = None,
    max_per_address: int | None = None,
    max_connections: int | None = None,
) -> Limits:
    """The caps for a process allowed ``fd_limit`` descriptors: the ones given, the others
    from what is left after :data:`RESERVED_FDS` (an eighth for pending connections, the rest
    for admitted ones at two descriptors each, and a worker's pipes for every other one)."""
    budget = max(fd_limit - RESERVED_FDS, 32)
    pending = max_pending if max_pending is not None else max(8, min(256, budget // 8))
    per_address = max_per_address if max_per_address is not None else max(2, pending // 4)
    connections = (
        max_connections if max_connections is not None else max(8, (budget - pending) // 3)
    )
    return Limits(max_pending=pending, max_per_address=per_address, max_connections=connections)


class Ticket:
    """One connection's place in the :class:`Gate` (use as a context manager: it leaves on
    exit). ``scope`` is cancelled when the connection is shed (the oldest pending one)."""

    def __init__(self, gate: Gate, address: str) -> None:
        self._gate = gate
        self.address = address
        self.scope = anyio.CancelScope()
        self.admitted = False

    def admit(self) -> bool:
        """Move from pending to admitted; ``False`` (still pending) when the server is full."""
        return self._gate._admit(self)

    def __enter__(self) -> Ticket:
        return self

    def __exit__(self, *_: object) -> None:
        self._gate._leave(self)


class Gate:
    """Counts pending and admitted connections against :class:`Limits`."""

    def __init__(self, limits: Limits, on_shed: Callable[[Ticket, str], None]) -> None:
        self.limits = limits
        self._on_shed = on_shed
        self._pending: OrderedDict[int, Ticket] = OrderedDict()
        self._per_address: dict[str, int] = {}
        self.admitted = 0

    @property
    def pending(self) -> int:
        return len(self._pending)

    def enter(self, address: str) -> Ticket | None:
        """A pending ticket for a new connection from ``address``, or ``None`` when that address
        has its cap of pending connections (the connection is to be closed)."""
        if self._per_address.get(address, 0) >= self.limits.max_per_address:
            return None
        while len(self._pending) >= self.limits.max_pending:
            if not self.shed_oldest("pending_full"):
                break
        ticket = Ticket(self, address)
        self._pending[id(ticket)] = ticket
        self._per_address[address] = self._per_address.get(address, 0) + 1
        return ticket

    def shed_oldest(self, reason: str) -> bool:
        """Close the oldest pending connection (``reason`` in the log); ``False``: none."""
        if not self._pending:
            return False
        _, ticket = self._pending.popitem(last=False)
        self._forget_address(ticket.address)
        ticket.scope.cancel()
        self._on_shed(ticket, reason)
        return True

    def out_of_fds(self) -> int:
        """Shed load (see the module docstring); return how many connections were closed."""
        shed = 0
        while shed < SHED_ON_EMFILE and self.shed_oldest("no_file_descriptors"):
            shed += 1
        if shed:
            lowered = max(1, len(self._pending))
            if lowered < self.limits.max_pending:
                self.limits = replace(self.limits, max_pending=lowered)
        return shed

    def _forget_address(self, address: str) -> None:
        left = self._per_address.get(address, 0) - 1
        if left > 0:
            self._per_address[address] = left
        else:
            self._per_address.pop(address, None)

    def _admit(self, ticket: Ticket) -> bool:
        if ticket.admitted:
            return True
        if self.admitted >= self.limits.max_connections:
            return False
        if self._pending.pop(id(ticket), None) is not None:
            self._forget_address(ticket.address)
        ticket.admitted = True
        self.admitted += 1
        return True

    def _leave(self, ticket: Ticket) -> None:
        if ticket.admitted:
            ticket.admitted = False
            self.admitted -= 1
        elif self._pending.pop(id(ticket), None) is not None:
            self._forget_address(ticket.address)


_OUT_OF_FDS = (errno.EMFILE, errno.ENFILE)
_TRANSIENT = (errno.ECONNABORTED, errno.ENOBUFS, errno.ENOMEM, errno.EPROTO, errno.EPERM)


async def serve_tcp(
    host: str,
    port: int,
    handle: Callable[[socket.socket, str], Coroutine[Any, Any, object]],
    *,
    on_shed: Callable[[str, str], None],
    out_of_fds: Callable[[], int],
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on ``host:port`` and run ``handle(sock, address)`` in a task per connection,
    until cancelled; ``task_status.started(port)`` with the bound port. Out of descriptors it
    calls ``out_of_fds()`` (:meth:`Gate.out_of_fds`: how many pending connections it closed);
    when that is none, it closes the waiting connection and calls ``on_shed(address,
    "no_file_descriptors")``."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.create_server((host, port), family=family, backlog=1024)
    listener.setblocking(False)
    reserve: int | None = os.open(os.devnull, os.O_RDONLY)
    try:
        async with anyio.create_task_group() as group:
            task_status.started(listener.getsockname()[1])
            while True:
                await anyio.wait_readable(listener)
                try:
                    conn, peer = listener.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError as error:
                    if error.errno in _OUT_OF_FDS:
                        if out_of_fds():
                            await anyio.sleep(0.01)  # the shed connections' tasks close them
                        else:
                            reserve = await _shed_one(listener, reserve, on_shed)
                        continue
                    if error.errno in _TRANSIENT:
                        await anyio.sleep(0.01)
                        continue
                    raise
                if reserve is None:  # it could not be reopened before: try again now
                    reserve = _reopen_reserve()
                conn.setblocking(False)
                group.start_soon(handle, conn, str(peer[0]))
    finally:
        anyio.notify_closing(listener)
        listener.close()
        if reserve is not None:
            os.close(reserve)


def _reopen_reserve() -> int | None:
    try:
        return os.open(os.devnull, os.O_RDONLY)
    except OSError:
        return None


async def _shed_one(
    listener: socket.socket, reserve: int | None, on_shed: Callable[[str, str], None]
) -> int | None:
    """Out of descriptors: use the reserve one to take the waiting connection off the backlog
    and close it; tell ``on_shed``; return the reserve (reopened, or ``None``)."""
    if reserve is None:
        on_shed("?", "no_file_descriptors")
        await anyio.sleep(0.05)  # nothing to accept with: let connections end first
        return _reopen_reserve()
    os.close(reserve)
    try:
        conn, peer = listener.accept()
    except OSError:
        peer = ("?",)
    else:
        conn.close()
    on_shed(str(peer[0]), "no_file_descriptors")
    await anyio.lowlevel.checkpoint()  # let the shed connections' tasks close their descriptors
    return _reopen_reserve()
