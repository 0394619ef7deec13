"""chord's own transport: newline-delimited JSON frames over anyio byte streams.

Chord's service grammar (calls, snapshots, updates) says nothing about framing; this package is
the framing and the envelope we use (``docs/wire.md``): :mod:`~chord.transport.frames` defines and
strictly decodes the frames, :mod:`~chord.transport.streams` carries them over Unix sockets, TCP
and a child process's stdio, and :mod:`~chord.transport.memory` pairs two ends in one process.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from chord.lazy import lazy_exports as _lazy_exports
from chord.transport.frames import (
    DEFAULT_MAX_FRAME_SIZE,
    DEFAULT_MAX_MESSAGE_SIZE,
    PART_SIZE,
    CancelFrame,
    ClosedFrame,
    ErrorInfo,
    Frame,
    FrameDecoder,
    FrameError,
    PartFrame,
    RequestFrame,
    ResultFrame,
    UpdateFrame,
    decode_frame,
    encode_frame,
    encode_parts,
)

if _TYPE_CHECKING:  # bound at first use (_LAZY below)
    from chord.transport.memory import memory_byte_stream_pair, memory_connection_pair
    from chord.transport.streams import (
        FrameConnection,
        connect_tcp,
        connect_unix,
        open_process_connection,
        serve_tcp,
        serve_unix,
        stdio_connection,
    )
    from chord.transport.unix import (
        PeerRefused,
        UnixSocketStream,
        open_unix_stream,
        peer_uid,
        serve_unix_streams,
    )

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "PART_SIZE",
    "CancelFrame",
    "ClosedFrame",
    "ErrorInfo",
    "Frame",
    "FrameConnection",
    "FrameDecoder",
    "FrameError",
    "PartFrame",
    "PeerRefused",
    "RequestFrame",
    "ResultFrame",
    "UnixSocketStream",
    "UpdateFrame",
    "connect_tcp",
    "connect_unix",
    "decode_frame",
    "encode_frame",
    "encode_parts",
    "memory_byte_stream_pair",
    "memory_connection_pair",
    "open_process_connection",
    "open_unix_stream",
    "peer_uid",
    "serve_tcp",
    "serve_unix",
    "serve_unix_streams",
    "stdio_connection",
]

_LAZY: dict[str, str] = {
    "memory_byte_stream_pair": "chord.transport.memory",
    "memory_connection_pair": "chord.transport.memory",
    "FrameConnection": "chord.transport.streams",
    "connect_tcp": "chord.transport.streams",
    "connect_unix": "chord.transport.streams",
    "open_process_connection": "chord.transport.streams",
    "serve_tcp": "chord.transport.streams",
    "serve_unix": "chord.transport.streams",
    "stdio_connection": "chord.transport.streams",
    "PeerRefused": "chord.transport.unix",
    "UnixSocketStream": "chord.transport.unix",
    "open_unix_stream": "chord.transport.unix",
    "peer_uid": "chord.transport.unix",
    "serve_unix_streams": "chord.transport.unix",
}
"""Public name -> the module that defines it, imported when the name is first used (PEP 562)."""


__getattr__, __dir__ = _lazy_exports(globals(), _LAZY)
