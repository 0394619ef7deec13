"""chord's own transport: newline-delimited JSON frames over anyio byte streams.

Chord's service grammar (calls, snapshots, updates) says nothing about framing; this package is
the framing and the envelope we use (``docs/wire.md``): :mod:`~chord.transport.frames` defines and
strictly decodes the frames, :mod:`~chord.transport.streams` carries them over Unix sockets, TCP
and a child process's stdio, and :mod:`~chord.transport.memory` pairs two ends in one process.
"""

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
