"""Unix domain sockets as anyio byte streams, built on ``anyio.wait_readable``/``wait_writable``.

anyio ships Unix socket streams of its own. On asyncio they hand the event loop a reader callback
that completes a future; when a ``receive()`` is cancelled at the instant data arrives, that
callback completes an already-cancelled future and the loop reports an ``InvalidStateError``
(the same family as agronholm/anyio#1267). A chord server cancels readers all the time (a peer
leaves, a host shuts down), so it uses these streams instead: non-blocking ``recv``/``send`` on
the socket, waiting with anyio's readiness primitives, which tolerate that race, and
``anyio.notify_closing`` before a close so a waiting task wakes with ``ClosedResourceError``.
They behave the same on asyncio and trio.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel

__all__ = ["UnixSocketStream", "open_unix_stream", "serve_unix_streams"]

_BROKEN = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class UnixSocketStream(anyio.abc.ByteStream):
    """A connected ``AF_UNIX`` stream socket. One reader and one writer at a time."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._closed = False

    @property
    def extra_attributes(self) -> Mapping[Any, Callable[[], Any]]:
        return {
            anyio.abc.SocketAttribute.raw_socket: lambda: self._sock,
            anyio.abc.SocketAttribute.family: lambda: socket.AF_UNIX,
        }

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await anyio.lowlevel.checkpoint_if_cancelled()
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                data = self._sock.recv(max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._sock)
                continue
            except _BROKEN as exc:
                raise anyio.BrokenResourceError from exc
            if not data:
                raise anyio.EndOfStream
            await anyio.lowlevel.cancel_shielded_checkpoint()
            return data

    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint_if_cancelled()
        view = memoryview(item)
        while view:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                sent = self._sock.send(view)
            except BlockingIOError:
                await anyio.wait_writable(self._sock)
                continue
            except _BROKEN as exc:
                raise anyio.BrokenResourceError from exc
            view = view[sent:]
        await anyio.lowlevel.cancel_shielded_checkpoint()

    async def send_eof(self) -> None:
        if not self._closed:
            try:
                self._sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            anyio.notify_closing(self._sock)
            self._sock.close()
        await anyio.lowlevel.checkpoint()


async def open_unix_stream(path: str | os.PathLike[str]) -> UnixSocketStream:
    """Connect to the Unix socket at ``path``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        try:
            sock.connect(os.fspath(path))
        except BlockingIOError:
            await anyio.wait_writable(sock)
            code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                raise OSError(code, os.strerror(code), os.fspath(path)) from None
    except BaseException:
        sock.close()
        raise
    return UnixSocketStream(sock)


async def serve_unix_streams(
    path: str,
    handle: Callable[[UnixSocketStream], Coroutine[Any, Any, object]],
    *,
    backlog: int = 128,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Listen at ``path`` and run ``handle(stream)`` in its own task for every client, until
    cancelled. ``task_status.started()`` is called once the socket accepts connections."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.setblocking(False)
        listener.bind(path)
        listener.listen(backlog)
        async with anyio.create_task_group() as group:
            task_status.started()
            while True:
                await anyio.wait_readable(listener)
                try:
                    conn, _ = listener.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError as exc:  # pragma: no cover - resource exhaustion
                    if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                        await anyio.sleep(0.05)  # let connections close before accepting more
                        continue
                    raise
                group.start_soon(handle, UnixSocketStream(conn))
    finally:
        anyio.notify_closing(listener)
        listener.close()
