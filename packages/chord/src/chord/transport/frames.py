"""Wire frames: newline-delimited JSON objects, one per line, typed with msgspec.

Every frame is a JSON object whose ``type`` field selects one of five shapes (see ``docs/wire.md``):

``request``  ``{"type": "request", "id": 7, "call": <ServiceCall>}``
``result``   ``{"type": "result", "id": 7, "ok": true, "result": <json>}`` or
             ``{"type": "result", "id": 7, "ok": false, "error": {"code": "...", "message": "..."}}``
``cancel``   ``{"type": "cancel", "id": 7}``
``update``   ``{"type": "update", "subscriptionId": "s1", "update": <ServiceProviderUpdate>}``
``closed``   ``{"type": "closed", "reason": "..."}`` — the sender will send nothing more
``part``     ``{"type": "part", "data": "...", "last": true}`` — a piece of a frame too large for
             one line (see below)

Decoding is strict: a line must be one JSON object of a known type with exactly the fields of
that type; NaN, infinities, duplicate object keys and integers beyond the range of a double are
rejected anywhere in the frame (:mod:`chord.json`); a line longer than the frame size limit is
refused before it is parsed. Each problem raises :class:`FrameError` with a stable ``code`` and a
message naming the problem.

Large frames
    A frame whose line would exceed the sender's frame size limit is sent as a run of ``part``
    frames, consecutive on the stream: their ``data`` strings, concatenated, are the frame's JSON
    text, and the run ends with ``"last": true`` (:func:`encode_parts`). The receiver reassembles
    it (up to its ``max_message_size``) and decodes it like any other line. Any other frame in
    the middle of a run, a part holding a part, or a stream ending inside a run is an error.
"""

from __future__ import annotations

import json
from typing import Any, TypeAlias

import msgspec

from chord.json import JsonError, validate_json

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "PART_SIZE",
    "CancelFrame",
    "ClosedFrame",
    "ErrorInfo",
    "Frame",
    "FrameDecoder",
    "FrameError",
    "PartFrame",
    "RequestFrame",
    "ResultFrame",
    "UpdateFrame",
    "decode_frame",
    "encode_frame",
    "encode_parts",
]

DEFAULT_MAX_FRAME_SIZE = 8 * 1024 * 1024
"""Largest accepted frame in bytes, newline excluded (8 MiB)."""

DEFAULT_MAX_MESSAGE_SIZE = 1024 * 1024 * 1024
"""Largest frame reassembled from ``part`` frames, in bytes of its parts' lines (1 GiB)."""

PART_SIZE = 1024 * 1024
"""Largest ``part`` line a sender writes (1 MiB, or the frame size limit when that is smaller)."""

MAX_REQUEST_ID = 2**53 - 1


class FrameError(ValueError):
    """A frame could not be decoded or is not allowed here.

    ``code`` is one of ``frame_too_large``, ``invalid_json``, ``invalid_frame``,
    ``frame_after_close``, ``protocol_error``.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class _Base(msgspec.Struct, tag_field="type", forbid_unknown_fields=True, omit_defaults=True):
    pass


class RequestFrame(_Base, tag="request", kw_only=True):
    """Invoke a service member (or a ``$chord.service`` control call). ``call`` is the JSON call."""

    id: int
    call: dict[str, Any]


class ErrorInfo(msgspec.Struct, forbid_unknown_fields=True):
    """A failure as it crosses the wire: a stable ``code`` and a human ``message``."""

    code: str
    message: str


class ResultFrame(_Base, tag="result", kw_only=True):
    """The outcome of request ``id``: ``ok`` with ``result`` (absent for ``None``), or ``error``."""

    id: int
    ok: bool
    result: Any = None
    error: ErrorInfo | None = None


class CancelFrame(_Base, tag="cancel", kw_only=True):
    """The client gave up on request ``id``; the provider cancels that call's context."""

    id: int


class UpdateFrame(_Base, tag="update", kw_only=True, rename={"subscription_id": "subscriptionId"}):
    """A service provider update for one subscription, in order."""

    subscription_id: str
    update: dict[str, Any]


class ClosedFrame(_Base, tag="closed", kw_only=True):
    """The sender is closing the connection; ``reason`` says why (informational)."""

    reason: str = ""


class PartFrame(_Base, tag="part", kw_only=True):
    """A piece of a frame too large for one line; ``last`` ends the run."""

    data: str
    last: bool = False


Frame: TypeAlias = RequestFrame | ResultFrame | CancelFrame | UpdateFrame | ClosedFrame
_AnyFrame: TypeAlias = Frame | PartFrame

_encoder = msgspec.json.Encoder()


def encode_frame(frame: Frame) -> bytes:
    """Encode ``frame`` as one line (with the trailing newline).

    Payloads (``call``, ``result``, ``update``) must be strict JSON; a violation raises
    :class:`FrameError` (``invalid_frame``) naming the path, and nothing is produced.

    The check is fast for the usual payload: when decoding the encoded line gives back an equal
    frame (and it holds no integer too large for a double), the payload was plain JSON values.
    Anything msgspec encodes into something else (NaN as ``null``, a tuple, a set, bytes, a
    date, a non-string key) decodes unequal, and :func:`~chord.json.validate_json` then walks
    the payload to accept it or name the offending path.
    """
    if type(frame) is not CancelFrame and type(frame) is not ClosedFrame:
        try:
            data = _encoder.encode(frame)
            if _fast_decoder.decode(data) == frame and not _long_digits(data):
                return data + b"\n"
        except (TypeError, ValueError, OverflowError, RecursionError):
            pass  # the careful walk below names the problem
    try:
        if isinstance(frame, RequestFrame):
            validate_json(frame.call, ("call",))
        elif isinstance(frame, ResultFrame):
            validate_json(frame.result, ("result",))
        elif isinstance(frame, UpdateFrame):
            validate_json(frame.update, ("update",))
    except JsonError as exc:
        raise FrameError("invalid_frame", str(exc)) from None
    return _encoder.encode(frame) + b"\n"


def encode_parts(data: bytes, max_line: int) -> list[bytes]:
    """Split one encoded frame (a line ending in a newline) into ``part`` lines of at most
    ``max_line`` bytes each, newline excluded. Pieces end on UTF-8 character boundaries."""
    if max_line < 64:
        raise FrameError(
            "frame_too_large", f"a frame size limit of {max_line} leaves no room for parts"
        )
    body = memoryview(data)[: len(data) - 1] if data.endswith(b"\n") else memoryview(data)
    # A frame's JSON text holds no raw control characters, so escaping a piece as a JSON
    # string at most doubles it (a quote or a backslash becomes two bytes).
    budget = (max_line - 48) // 2
    parts: list[bytes] = []
    start, size = 0, len(body)
    while start < size:
        end = min(start + budget, size)
        while end < size and (body[end] & 0xC0) == 0x80:
            end -= 1  # never split a UTF-8 sequence
        piece = bytes(body[start:end]).decode("utf-8")
        parts.append(_encoder.encode(PartFrame(data=piece, last=end >= size)) + b"\n")
        start = end
    return parts


def _reject_constant(name: str) -> Any:
    raise FrameError("invalid_json", f"{name} is not allowed in strict JSON")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise FrameError("invalid_json", f"duplicate key {key!r}")
            seen.add(key)
    return out


_strict_json = json.JSONDecoder(object_pairs_hook=_unique_pairs, parse_constant=_reject_constant)


def decode_frame(line: bytes | str) -> Frame:
    """Decode one line (without its newline) into a frame, strictly (``part`` frames are
    :class:`FrameDecoder`'s business and are refused here)."""
    frame = _decode_line(line)
    if isinstance(frame, PartFrame):
        raise FrameError("invalid_frame", "a part frame is only valid inside a frame stream")
    return frame


_fast_decoder = msgspec.json.Decoder(_AnyFrame, strict=True)

_DIGITS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x2E for byte in range(256))
_LONG_DIGITS = b"0" * 309


def _long_digits(data: bytes) -> bool:
    """True when ``data`` holds 309 digits in a row: it may hold an integer beyond the range
    of a double (about 1.8e308), which a canonical encoding does not exclude."""
    return len(data) >= 309 and _LONG_DIGITS in data.translate(_DIGITS)


def _decode_line(line: bytes | str) -> _AnyFrame:
    """Decode one line strictly: a fast path for canonical frames, the careful path otherwise.

    The fast path is one typed msgspec decode. It is taken only when re-encoding the decoded
    frame gives back exactly ``line``: such a line is the canonical encoding of a frame, so it
    holds no duplicate key (a duplicate is dropped by the decode and missing from the
    re-encoding), no NaN or infinity, no ``7.0`` id, no lone surrogate (neither decodes nor
    encodes) and no whitespace. Integers too large for a double are the one thing a canonical
    line may still hold, so a line with 309 digits in a row takes the careful path too. Every
    line the fast path does not accept is decoded by :func:`_decode_careful`, which names the
    problem (``chord`` peers write canonical lines, so that is a foreign or broken peer's cost).
    """
    data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
    try:
        frame = _fast_decoder.decode(data)
    except (msgspec.DecodeError, RecursionError):
        frame = None
    if frame is not None and _encoder.encode(frame) == data and not _long_digits(data):
        _check_frame(frame)
        return frame
    return _decode_careful(line)


def _check_frame(frame: _AnyFrame) -> None:
    if isinstance(frame, (RequestFrame, ResultFrame, CancelFrame)) and not (
        0 <= frame.id <= MAX_REQUEST_ID
    ):
        raise FrameError("invalid_frame", f"request id {frame.id} is out of range")
    if isinstance(frame, ResultFrame) and (frame.ok == (frame.error is not None)):
        raise FrameError("invalid_frame", "a result carries either ok=true or an error, not both")


def _decode_careful(line: bytes | str) -> _AnyFrame:
    try:
        text = line.decode("utf-8") if isinstance(line, bytes) else line
    except UnicodeDecodeError as exc:
        raise FrameError("invalid_json", f"frame is not UTF-8: {exc.reason}") from None
    try:
        raw = _strict_json.decode(text)
    except FrameError:
        raise
    except (ValueError, RecursionError) as exc:
        raise FrameError("invalid_json", f"frame is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise FrameError("invalid_frame", f"a frame is a JSON object, got {type(raw).__name__}")
    try:
        validate_json(raw)
    except JsonError as exc:
        raise FrameError("invalid_frame", str(exc)) from None
    ident = raw.get("id")
    if type(ident) is float and ident.is_integer():
        raw["id"] = int(ident)  # JSON has one number type: an id written 7.0 is 7
    try:
        frame: _AnyFrame = msgspec.convert(raw, type=_AnyFrame, strict=True)
    except msgspec.ValidationError as exc:
        kind = raw.get("type")
        raise FrameError("invalid_frame", f"bad {kind!r} frame: {exc}") from None
    _check_frame(frame)
    return frame


class FrameDecoder:
    """Incremental decoder: feed bytes as they arrive, get complete frames out.

    A line longer than ``max_frame_size`` raises ``frame_too_large`` as soon as the limit is
    passed, without buffering the rest. After a ``closed`` frame any further frame raises
    ``frame_after_close``.
    """

    def __init__(
        self,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    ) -> None:
        if max_frame_size < 16:
            raise ValueError("max_frame_size must be at least 16 bytes")
        self.max_frame_size = max_frame_size
        self.max_message_size = max(max_message_size, max_frame_size)
        self._buffer = bytearray()
        self._closed = False
        self._parts: list[str] | None = None  # a run of part frames being reassembled
        self._parts_size = 0

    @property
    def closed(self) -> bool:
        """True once a ``closed`` frame was decoded."""
        return self._closed

    @property
    def pending(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Frame]:
        """Add ``data`` and return every frame it completes, in order."""
        frames: list[Frame] = []
        buffer = self._buffer
        start = len(buffer)
        buffer += data
        while True:
            newline = buffer.find(b"\n", start)
            if newline < 0:
                if len(buffer) > self.max_frame_size:
                    raise FrameError(
                        "frame_too_large",
                        f"frame exceeds {self.max_frame_size} bytes",
                    )
                return frames
            if newline > self.max_frame_size:
                raise FrameError("frame_too_large", f"frame exceeds {self.max_frame_size} bytes")
            line = bytes(buffer[:newline])
            del buffer[: newline + 1]
            start = 0
            if not line.strip():
                continue
            if self._closed:
                raise FrameError("frame_after_close", "a frame arrived after the peer closed")
            frame = _decode_line(line)
            if isinstance(frame, PartFrame):
                assembled = self._add_part(frame, len(line))
                if assembled is None:
                    continue
                frame = assembled
            elif self._parts is not None:
                raise FrameError(
                    "invalid_frame", f"a {type(frame).__name__} interrupted a run of part frames"
                )
            if isinstance(frame, ClosedFrame):
                self._closed = True
            frames.append(frame)

    def _add_part(self, part: PartFrame, size: int) -> Frame | None:
        if self._parts is None:
            self._parts, self._parts_size = [], 0
        self._parts_size += size
        if self._parts_size > self.max_message_size:
            raise FrameError(
                "frame_too_large", f"a frame in parts exceeds {self.max_message_size} bytes"
            )
        self._parts.append(part.data)
        if not part.last:
            return None
        text = "".join(self._parts)
        self._parts = None
        frame = _decode_line(text)
        if isinstance(frame, PartFrame):
            raise FrameError("invalid_frame", "a part frame holds another part frame")
        return frame

    def eof(self) -> None:
        """The byte stream ended; raise if a partial frame was left behind."""
        if self._buffer.strip():
            raise FrameError("invalid_frame", "stream ended inside a frame")
        if self._parts is not None:
            raise FrameError("invalid_frame", "stream ended inside a run of part frames")
