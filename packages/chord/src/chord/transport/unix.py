"""Unix domain sockets as anyio byte streams, built on ``anyio.wait_readable``/``wait_writable``.

anyio ships Unix socket streams of its own. On asyncio they hand the event loop a reader callback
that completes a future; when a ``receive()`` is cancelled at the instant data arrives, that
callback completes an already-cancelled future and the loop reports an ``InvalidStateError``
(the same family as agronholm/anyio#1267). A chord server cancels readers all the time (a peer
leaves, a host shuts down), so it uses these streams instead: non-blocking ``recv``/``send`` on
the socket, waiting with anyio's readiness primitives, which tolerate that race, and
``anyio.notify_closing`` before a close so a waiting task wakes with ``ClosedResourceError``.
They behave the same on asyncio and trio.

On asyncio a stream's reads go through a :class:`_LoopReader`: the socket stays registered with
the event loop while the stream is open and its callback reads into a buffer, the way asyncio's
own transports work, instead of registering and unregistering the socket around every wait (two
``epoll_ctl`` calls and a selector-key update per frame). A receive cancelled while data arrives
loses nothing: the data waits in the buffer, and the callback never completes a cancelled future.

Only the user who runs the process is served and dialled: the socket file is made ``0600``
right after ``bind`` (whatever the umask), the server reads each client's credentials
(``SO_PEERCRED``) as it accepts it and closes a connection from any other uid before reading a
byte, and a client refuses a server of another uid (a socket another user put in its place) the
same way. Where the kernel does not report peer credentials (not Linux) only the file modes
guard the socket.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import struct
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel

__all__ = ["PeerRefused", "UnixSocketStream", "open_unix_stream", "peer_uid", "serve_unix_streams"]

_BROKEN = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
_log = logging.getLogger("chord.transport")


class PeerRefused(PermissionError):
    """The process at the other end of a Unix socket runs as another user."""


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a connected Unix socket (``SO_PEERCRED``),
    or ``None`` where the platform does not say."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:  # pragma: no cover - not Linux
        return None
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, 12))
    return uid


CONNECT_RETRY = 60.0
"""Seconds :func:`open_unix_stream` keeps connecting to a listener whose backlog is full."""


def _refusal(sock: socket.socket) -> str | None:
    """Why the peer of ``sock`` may not talk to this process (another uid), or ``None``."""
    uid = peer_uid(sock)
    if uid is None or uid == os.geteuid():
        return None
    return f"the peer runs as uid {uid}, not as this process's uid {os.geteuid()}"


_CHUNK = 65536
_HIGH_WATER = 4 * _CHUNK
"""Bytes a :class:`_LoopReader` buffers before it stops reading the socket (until a receive)."""


class _LoopReader:
    """asyncio only: the socket registered with the loop for as long as the stream reads."""

    __slots__ = ("_buffer", "_eof", "_error", "_fd", "_loop", "_reading", "_sock", "_waiter")

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
        self._sock = sock
        self._fd = sock.fileno()
        self._loop = loop
        self._buffer = bytearray()
        self._eof = False
        self._error: OSError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._reading = False
        self._resume()

    def _resume(self) -> None:
        if not self._reading and not self._eof and self._error is None:
            self._loop.add_reader(self._fd, self._ready)
            self._reading = True

    def _pause(self) -> None:
        if self._reading:
            self._loop.remove_reader(self._fd)
            self._reading = False

    def _ready(self) -> None:
        try:
            data = self._sock.recv(_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._error = exc
            self._pause()
        else:
            if not data:
                self._eof = True
                self._pause()
            else:
                self._buffer += data
                if len(self._buffer) >= _HIGH_WATER:
                    self._pause()  # a slow reader: the kernel's buffer pushes back on the peer
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def receive(self, max_bytes: int, stream: UnixSocketStream) -> bytes:
        waited = False
        while not self._buffer:
            if stream._closed:  # pyright: ignore[reportPrivateUsage]
                raise anyio.ClosedResourceError
            if self._error is not None:
                if isinstance(self._error, _BROKEN):
                    raise anyio.BrokenResourceError from self._error
                raise self._error
            if self._eof:
                raise anyio.EndOfStream
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
            waited = True
        if len(self._buffer) <= max_bytes:
            data = bytes(self._buffer)
            self._buffer.clear()
        else:
            data = bytes(self._buffer[:max_bytes])
            del self._buffer[:max_bytes]
        self._resume()
        if not waited:  # a receive is a checkpoint; one that waited has already yielded
            await anyio.lowlevel.cancel_shielded_checkpoint()
        return data

    def close(self) -> None:
        """Unregister (before the socket is closed); a waiting receive gets ClosedResourceError."""
        self._pause()
        self._eof = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(anyio.ClosedResourceError())


class UnixSocketStream(anyio.abc.ByteStream):
    """A connected ``AF_UNIX`` stream socket. One reader and one writer at a time."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._closed = False
        self._reader: _LoopReader | None = None
        self._asyncio: bool | None = None  # the event loop's kind, learnt at the first receive

    @property
    def extra_attributes(self) -> Mapping[Any, Callable[[], Any]]:
        return {
            anyio.abc.SocketAttribute.raw_socket: lambda: self._sock,
            anyio.abc.SocketAttribute.family: lambda: socket.AF_UNIX,
        }

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await anyio.lowlevel.checkpoint_if_cancelled()
        if self._reader is not None:
            return await self._reader.receive(max_bytes, self)
        if self._asyncio is None and not self._closed:
            try:
                loop = asyncio.get_running_loop()  # raises under trio
            except RuntimeError:
                self._asyncio = False
            else:
                self._asyncio = True
                self._reader = _LoopReader(self._sock, loop)
                return await self._reader.receive(max_bytes, self)
        waited = False
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                data = self._sock.recv(max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._sock)
                waited = True
                continue
            except _BROKEN as exc:
                raise anyio.BrokenResourceError from exc
            if not data:
                raise anyio.EndOfStream
            if not waited:  # a receive is a checkpoint; one that waited has already yielded
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

    def send_nowait(self, data: bytes | memoryview) -> int:
        """Write as much of ``data`` as the socket takes without waiting; return how much
        (0 when its buffer is full). Not a checkpoint: for a caller that yields next anyway."""
        if self._closed:
            raise anyio.ClosedResourceError
        try:
            return self._sock.send(data)
        except BlockingIOError:
            return 0
        except _BROKEN as exc:
            raise anyio.BrokenResourceError from exc

    async def send_eof(self) -> None:
        if not self._closed:
            try:
                self._sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            if self._reader is not None:
                self._reader.close()
            anyio.notify_closing(self._sock)
            self._sock.close()
        await anyio.lowlevel.checkpoint()


async def open_unix_stream(path: str | os.PathLike[str]) -> UnixSocketStream:
    """Connect to the Unix socket at ``path``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        delay, waited = 0.001, 0.0
        while True:
            try:
                sock.connect(os.fspath(path))
                break
            except BlockingIOError:
                # A Unix socket's connect never completes in the background: EAGAIN means the
                # listener's backlog is full and this socket is not connected (its peer would
                # read as uid -1). Wait for the listener to accept some, and connect again.
                if waited >= CONNECT_RETRY:
                    raise
                await anyio.sleep(delay)
                waited += delay
                delay = min(delay * 2, 0.05)
        refusal = _refusal(sock)
        if refusal is not None:
            raise PeerRefused(f"{os.fspath(path)}: refusing the server: {refusal}")
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
        os.chmod(path, 0o600)  # before listen: nobody connects to a socket file of the umask's
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
                refusal = _refusal(conn)
                if refusal is not None:  # before a byte is read: another user gets nothing
                    _log.warning("%s: refused a connection: %s", path, refusal)
                    conn.close()
                    continue
                group.start_soon(handle, UnixSocketStream(conn))
    finally:
        anyio.notify_closing(listener)
        listener.close()
