"""Frame connections over anyio byte streams: Unix sockets, TCP on loopback, a process's stdio.

A :class:`FrameConnection` turns any ``anyio.abc.ByteStream`` into a stream of
:mod:`chord.transport.frames`: :meth:`~FrameConnection.send` writes one frame atomically (frames
from concurrent senders never interleave), :meth:`~FrameConnection.receive` returns the next
frame or raises ``anyio.EndOfStream`` when the peer is gone. Decoding errors raise
:class:`~chord.transport.frames.FrameError`; the caller decides whether to tell the peer and close.

Connectors::

    conn = await connect_unix(path)                     # client
    await tg.start(serve_unix, path, handle)            # server: handle(conn) per client
    port = await tg.start(serve_tcp, handle)            # TCP on 127.0.0.1, free port
    conn = await connect_tcp("127.0.0.1", port)
    process, conn = await open_process_connection([sys.executable, "worker.py"])
    conn = stdio_connection()                           # inside that child process
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, Literal

import anyio
import anyio.abc
from anyio.streams.stapled import StapledByteStream

from chord.transport.frames import (
    DEFAULT_MAX_FRAME_SIZE,
    DEFAULT_MAX_MESSAGE_SIZE,
    PART_SIZE,
    ClosedFrame,
    Frame,
    FrameDecoder,
    encode_frame,
    encode_parts,
)
from chord.transport.unix import UnixSocketStream, open_unix_stream, serve_unix_streams

__all__ = [
    "FrameConnection",
    "connect_tcp",
    "connect_unix",
    "open_process_connection",
    "serve_tcp",
    "serve_unix",
    "stdio_connection",
]

_READ_SIZE = 65536

DEFAULT_SERVER_MAX_MESSAGE_SIZE = 64 * 1024 * 1024
"""Largest request a server reassembles from ``part`` frames (64 MiB)."""


class FrameConnection:
    """Frames over a byte stream. One reader task, any number of writer tasks.

    A frame longer than ``max_frame_size`` goes out as a run of ``part`` frames (written
    together, never interleaved with another frame); incoming runs are reassembled up to
    ``max_message_size`` bytes.
    """

    def __init__(
        self,
        stream: anyio.abc.ByteStream,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        name: str = "",
    ) -> None:
        self.stream = stream
        self.name = name
        self._decoder = FrameDecoder(max_frame_size, max_message_size)
        self._pending: list[Frame] = []
        # The stream's send is the checkpoint. A semaphore, not a lock: send_nowait takes it in
        # the task that pushes a frame and flush, in the writer's task, gives it back (an anyio
        # Lock belongs to the task that took it, and its release elsewhere raised RuntimeError,
        # ending the whole peer: a session worker died when a frame of a few MB only partly fit).
        self._send_lock = anyio.Semaphore(1, fast_acquire=True)
        self._rest: memoryview | None = None  # what send_nowait left of a frame, for flush
        self._closed = False
        self.bytes_sent = 0
        self.bytes_received = 0

    @property
    def max_frame_size(self) -> int:
        return self._decoder.max_frame_size

    @property
    def max_message_size(self) -> int:
        return self._decoder.max_message_size

    async def send(self, frame: Frame) -> None:
        """Write one frame (in parts when it is over the frame size limit). Raises
        ``FrameError`` for a non-strict payload."""
        await self._write(encode_frame(frame))

    async def send_encoded(self, data: bytes) -> None:
        """Write one frame already produced by ``encode_frame``
        (a single line ending in a newline); lets a sender encode at enqueue time."""
        if not data.endswith(b"\n") or data.find(b"\n") != len(data) - 1:
            raise ValueError("an encoded frame is exactly one line ending in a newline")
        await self._write(data)

    async def send_encoded_many(self, frames: list[bytes]) -> None:
        """Write frames from ``encode_frame`` in order, in one send when each fits in a frame
        (a writer with several frames waiting wakes its peer once, not once per frame)."""
        limit = self._decoder.max_frame_size
        for data in frames:
            if not data.endswith(b"\n") or data.find(b"\n") != len(data) - 1:
                raise ValueError("an encoded frame is exactly one line ending in a newline")
        if len(frames) == 1 or any(len(data) - 1 > limit for data in frames):
            for data in frames:
                await self._write(data)
            return
        joined = b"".join(frames)
        async with self._send_lock:
            await self.stream.send(joined)
            self.bytes_sent += len(joined)

    def send_nowait(self, data: bytes) -> Literal["sent", "partial", "busy"]:
        """Start writing one frame from ``encode_frame`` without waiting or yielding.

        ``"busy"``: nothing was written, because that cannot start now (another send is under
        way, the frame needs parts, or the stream cannot write without waiting: a full buffer, or
        a stream without ``send_nowait``); send it with :meth:`send_encoded` instead.
        ``"sent"``: all of it was written. ``"partial"``: only a part was; the rest is held here
        with the send lock, and the caller must await :meth:`flush` to write it (other senders
        wait for that, so frames never interleave).
        """
        send_now = getattr(self.stream, "send_nowait", None)
        if (
            send_now is None
            or self._rest is not None
            or self._send_lock.value == 0
            or len(data) - 1 > self._decoder.max_frame_size
        ):
            return "busy"
        sent: int = send_now(data)
        if sent == 0:
            return "busy"
        self.bytes_sent += sent
        if sent == len(data):
            return "sent"
        self._send_lock.acquire_nowait()
        self._rest = memoryview(data)[sent:]
        return "partial"

    @property
    def flush_needed(self) -> bool:
        """True while a frame :meth:`send_nowait` took is still partly unwritten."""
        return self._rest is not None

    async def flush(self) -> None:
        """Write what :meth:`send_nowait` left of its frame (nothing if it wrote it all)."""
        rest = self._rest
        if rest is None:
            return
        try:
            await self.stream.send(rest)  # type: ignore[arg-type]
            self.bytes_sent += len(rest)
        finally:
            self._rest = None
            self._send_lock.release()

    async def _write(self, data: bytes) -> None:
        limit = self._decoder.max_frame_size
        async with self._send_lock:
            if len(data) - 1 <= limit:
                await self.stream.send(data)
                self.bytes_sent += len(data)
                return
            for part in encode_parts(data, min(limit, PART_SIZE)):
                await self.stream.send(part)
                self.bytes_sent += len(part)

    async def receive(self) -> Frame:
        """The next frame. ``anyio.EndOfStream`` when the stream ends cleanly."""
        while not self._pending:
            try:
                data = await self.stream.receive(_READ_SIZE)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._decoder.eof()
                raise anyio.EndOfStream from None
            self.bytes_received += len(data)
            self._pending.extend(self._decoder.feed(data))
        return self._pending.pop(0)

    def __aiter__(self) -> FrameConnection:
        return self

    async def __anext__(self) -> Frame:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def close(self, reason: str = "") -> None:
        """Say ``closed`` (best effort, bounded) and close the stream. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with anyio.move_on_after(1, shield=True):
            try:
                await self.send(ClosedFrame(reason=reason))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass
        await self.aclose()

    async def aclose(self) -> None:
        """Close the byte stream without a goodbye."""
        self._closed = True
        with anyio.CancelScope(shield=True):
            await self.stream.aclose()

    async def __aenter__(self) -> FrameConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


Handler = Callable[[FrameConnection], Awaitable[Any]]


async def connect_unix(path: str | os.PathLike[str], **kwargs: Any) -> FrameConnection:
    """Connect to a Unix domain socket served by :func:`serve_unix`."""
    stream = await open_unix_stream(path)
    return FrameConnection(stream, name=f"unix:{os.fspath(path)}", **kwargs)


async def connect_tcp(host: str, port: int, **kwargs: Any) -> FrameConnection:
    """Connect over TCP (meant for loopback)."""
    stream = await anyio.connect_tcp(host, port)
    return FrameConnection(stream, name=f"tcp:{host}:{port}", **kwargs)


async def _serve(
    listener: anyio.abc.Listener[anyio.abc.SocketStream],
    handler: Handler,
    label: str,
    max_frame_size: int,
    max_message_size: int,
) -> None:
    async def handle(stream: anyio.abc.SocketStream) -> None:
        conn = FrameConnection(
            stream, name=label, max_frame_size=max_frame_size, max_message_size=max_message_size
        )
        try:
            await handler(conn)
        finally:
            await conn.aclose()

    async with listener:
        await listener.serve(handle)


def _remove_stale_socket(path: str) -> None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise FileExistsError(f"{path} exists and is not a socket; refusing to replace it")
    os.unlink(path)


async def serve_unix(
    path: str | os.PathLike[str],
    handler: Handler,
    *,
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    max_message_size: int = DEFAULT_SERVER_MAX_MESSAGE_SIZE,
    task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``handler(conn)`` for each client of a Unix socket at ``path`` (a stale file is
    replaced). Reports the path through ``task_status``; runs until cancelled. A request may
    arrive in parts up to ``max_message_size`` bytes."""
    path = os.fspath(path)
    _remove_stale_socket(path)
    label = f"unix:{path}"

    async def handle(stream: UnixSocketStream) -> None:
        conn = FrameConnection(
            stream, name=label, max_frame_size=max_frame_size, max_message_size=max_message_size
        )
        try:
            await handler(conn)
        finally:
            await conn.aclose()

    try:
        async with anyio.create_task_group() as group:
            await group.start(partial(serve_unix_streams, path, handle))
            task_status.started(path)
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


async def serve_tcp(
    handler: Handler,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    max_message_size: int = DEFAULT_SERVER_MAX_MESSAGE_SIZE,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``handler(conn)`` over TCP; reports the bound port through ``task_status``."""
    listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
    bound = listener.extra(anyio.abc.SocketAttribute.local_port)
    task_status.started(bound)
    await _serve(listener, handler, f"tcp:{host}:{bound}", max_frame_size, max_message_size)  # type: ignore[arg-type]


async def open_process_connection(
    command: Sequence[str], **kwargs: Any
) -> tuple[anyio.abc.Process, FrameConnection]:
    """Start ``command`` and talk frames over its stdin/stdout (stderr is inherited)."""
    process = await anyio.open_process(command, stderr=None, **kwargs)
    assert process.stdin is not None and process.stdout is not None
    stream = StapledByteStream(process.stdin, process.stdout)
    return process, FrameConnection(stream, name=f"process:{process.pid}")


class _FdByteStream(anyio.abc.ByteStream):
    """A byte stream over two pipe file descriptors, read and written in worker threads."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._closed = False

    async def receive(self, max_bytes: int = _READ_SIZE) -> bytes:
        if self._closed:
            raise anyio.ClosedResourceError
        data = await anyio.to_thread.run_sync(
            os.read, self._read_fd, max_bytes, abandon_on_cancel=True
        )
        if not data:
            raise anyio.EndOfStream
        return data

    async def send(self, item: bytes) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        view = memoryview(item)
        while view:
            try:
                written = await anyio.to_thread.run_sync(os.write, self._write_fd, view)
            except BrokenPipeError:
                raise anyio.BrokenResourceError from None
            view = view[written:]

    async def send_eof(self) -> None:
        self._closed = True

    async def aclose(self) -> None:
        self._closed = True


def stdio_connection(**kwargs: Any) -> FrameConnection:
    """Frames over this process's stdin/stdout (the child side of
    :func:`open_process_connection`). Nothing else may write to stdout afterwards."""
    sys.stdout.flush()
    return FrameConnection(
        _FdByteStream(sys.stdin.fileno(), sys.stdout.fileno()), name="stdio", **kwargs
    )
