"""An in-memory byte pipe for tests: two connected :class:`FrameConnection` ends.

Bytes go through bounded anyio memory object streams, so a reader that stops reading applies
back-pressure exactly like a socket would, and closing one end shows the other an end of stream.
"""

from __future__ import annotations

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from chord.transport.frames import DEFAULT_MAX_FRAME_SIZE
from chord.transport.streams import FrameConnection

__all__ = ["MemoryByteStream", "memory_byte_stream_pair", "memory_connection_pair"]


class MemoryByteStream(anyio.abc.ByteStream):
    """One end of an in-memory duplex byte pipe."""

    def __init__(
        self, send: MemoryObjectSendStream[bytes], receive: MemoryObjectReceiveStream[bytes]
    ) -> None:
        self._send = send
        self._receive = receive
        self._leftover = b""

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self._leftover:
            self._leftover = await self._receive.receive()
        data, self._leftover = self._leftover[:max_bytes], self._leftover[max_bytes:]
        return data

    async def send(self, item: bytes) -> None:
        await self._send.send(item)

    async def send_eof(self) -> None:
        await self._send.aclose()

    async def aclose(self) -> None:
        await self._send.aclose()
        await self._receive.aclose()


def memory_byte_stream_pair(buffer: int = 64) -> tuple[MemoryByteStream, MemoryByteStream]:
    """Two connected byte streams; each side buffers up to ``buffer`` writes."""
    a_send, b_receive = anyio.create_memory_object_stream[bytes](buffer)
    b_send, a_receive = anyio.create_memory_object_stream[bytes](buffer)
    return MemoryByteStream(a_send, a_receive), MemoryByteStream(b_send, b_receive)


def memory_connection_pair(
    *, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, buffer: int = 64
) -> tuple[FrameConnection, FrameConnection]:
    """Two connected frame connections (``client``, ``server``) in one process."""
    a, b = memory_byte_stream_pair(buffer)
    return (
        FrameConnection(a, max_frame_size=max_frame_size, name="memory:client"),
        FrameConnection(b, max_frame_size=max_frame_size, name="memory:server"),
    )
