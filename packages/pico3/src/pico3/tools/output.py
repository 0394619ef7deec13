"""Bounded tool output: :class:`OutputBounds` (how much is kept) and :class:`OutputBuffer`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["OutputBounds", "OutputBuffer"]


@dataclass(frozen=True, slots=True)
class OutputBounds:
    """How much of a tool's output is kept: ``max_bytes`` (UTF-8) and ``max_lines``, keeping the
    ``head`` or the ``tail`` (docs/design/turn.md#tool; default 64 KiB / 200 lines / head)."""

    max_bytes: int = 64 * 1024
    max_lines: int = 200
    retain: Literal["head", "tail"] = "head"

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_lines"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"OutputBounds.{name} must be a positive int, got {value!r}")
        if self.retain not in ("head", "tail"):
            raise ValueError(f"OutputBounds.retain must be 'head' or 'tail', got {self.retain!r}")


# -- the stream buffer ---------------------------------------------------------------------
class OutputBuffer:
    """A bounded buffer of streamed output (bytes and lines, head or tail retention).

    ``push`` never grows the buffer past its bounds: with ``head`` retention everything after
    the limit is dropped; with ``tail`` the oldest output is. A single chunk larger than the
    bounds is sliced on push. Dropped output is counted (``dropped_bytes``; ``dropped_lines`` =
    newlines in the dropped bytes). :meth:`text` decodes UTF-8 without splitting a character.
    """

    __slots__ = ("_data", "_lines", "bounds", "dropped_bytes", "dropped_lines", "pushed")

    def __init__(self, bounds: OutputBounds | None = None) -> None:
        self.bounds = bounds or OutputBounds()
        self._data = bytearray()
        self._lines = 0  # newlines currently held
        self.dropped_bytes = 0
        self.dropped_lines = 0
        self.pushed = False

    def push(self, chunk: str | bytes) -> None:
        """Append a chunk (``str`` is UTF-8 encoded)."""
        if isinstance(chunk, str):
            data = chunk.encode("utf-8")
        elif isinstance(chunk, (bytes, bytearray, memoryview)):
            data = bytes(chunk)
        else:
            raise TypeError(f"stream chunks are str or bytes, got {type(chunk).__name__}")
        self.pushed = True
        if self.bounds.retain == "head":
            self._push_head(data)
        else:
            self._push_tail(data)

    def _drop(self, data: bytes | bytearray) -> None:
        self.dropped_bytes += len(data)
        self.dropped_lines += data.count(b"\n")

    def _push_head(self, data: bytes) -> None:
        room = self.bounds.max_bytes - len(self._data)
        keep = data[: max(room, 0)]
        # Line bound: keep at most max_lines lines (a line ends at its newline).
        allowed = self.bounds.max_lines - self._lines
        cut = len(keep)
        if keep.count(b"\n") >= allowed:
            position = -1
            for _ in range(max(allowed, 0)):
                position = keep.index(b"\n", position + 1)
            cut = position + 1 if allowed > 0 else 0
        keep = keep[:cut]
        self._data += keep
        self._lines += keep.count(b"\n")
        self._drop(data[len(keep) :])

    def _push_tail(self, data: bytes) -> None:
        self._data += data
        self._lines += data.count(b"\n")
        excess = len(self._data) - self.bounds.max_bytes
        if excess > 0:
            self._drop(self._data[:excess])
            self._lines -= self._data[:excess].count(b"\n")
            del self._data[:excess]
        # Keep the last max_lines lines: drop through the newline that ends the oldest one.
        while self._lines > self.bounds.max_lines or (
            self._lines == self.bounds.max_lines and not self._data.endswith(b"\n")
        ):
            end = self._data.index(b"\n") + 1
            self._drop(self._data[:end])
            del self._data[:end]
            self._lines -= 1

    @property
    def truncated(self) -> bool:
        """True when anything was dropped."""
        return self.dropped_bytes > 0

    def text(self) -> str:
        """The retained output as text (never a split UTF-8 sequence at either edge)."""
        data = bytes(self._data)
        if self.bounds.retain == "tail":
            start = 0
            while start < len(data) and start < 3 and (data[start] & 0xC0) == 0x80:
                start += 1
            data = data[start:]
        return data.decode("utf-8", errors="ignore")
