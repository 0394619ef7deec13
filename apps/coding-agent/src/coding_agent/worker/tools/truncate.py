"""Bounded tool output: keep the head or the tail, by lines and by UTF-8 bytes.

Every tool result must fit a model's context, so output is cut by two independent caps, and
whichever is hit first wins: :data:`DEFAULT_MAX_LINES` (2000) and :data:`DEFAULT_MAX_BYTES`
(50 KB), pi's defaults. Reads and search results keep the *head* (:func:`truncate_head`);
command output keeps the *tail* (:func:`truncate_tail`), where errors and final results are.

Only whole lines are returned, with one exception: when the last line of command output alone
is bigger than the byte cap, its end is kept (``last_line_partial``). When the first line of a
head cut is bigger than the cap, nothing is returned (``first_line_exceeds_limit``) and the
caller explains how to see it some other way.

The :class:`Truncation` record goes into a result's ``details`` (``as_details()``), and the
callers add an actionable footer ("Use offset=N to continue", "Full output: <path>").
A trailing newline ends the last line rather than starting an empty one, so ``"a\\nb\\n"`` has
two lines.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_LINES",
    "GREP_MAX_LINE_LENGTH",
    "Truncation",
    "format_size",
    "split_lines",
    "truncate_head",
    "truncate_line",
    "truncate_tail",
]

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 50 * 1024
GREP_MAX_LINE_LENGTH = 500


@dataclass(frozen=True)
class Truncation:
    """What a cut kept. ``truncated_by`` is ``"lines"``, ``"bytes"`` or ``None`` (nothing cut)."""

    content: str
    truncated: bool
    truncated_by: Literal["lines", "bytes"] | None
    total_lines: int
    total_bytes: int
    output_lines: int
    output_bytes: int
    last_line_partial: bool
    first_line_exceeds_limit: bool
    max_lines: int
    max_bytes: int

    def as_details(self) -> dict[str, Any]:
        """The record without the content, for a result's ``details``."""
        data = asdict(self)
        del data["content"]
        return data


def _nbytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def split_lines(text: str) -> list[str]:
    """Split on ``\\n``; a trailing newline ends the last line instead of adding an empty one."""
    if not text:
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


def format_size(size: int) -> str:
    """Human-readable size the way pi prints it: ``512B``, ``50.0KB``, ``1.2MB``."""
    if size < 1024:
        return f"{size}B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f}KB"
    return f"{size / (1024 * 1024):.1f}MB"


def _untouched(text: str, lines: int, size: int, max_lines: int, max_bytes: int) -> Truncation:
    return Truncation(
        text, False, None, lines, size, lines, size, False, False, max_lines, max_bytes
    )


def truncate_head(
    text: str, *, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> Truncation:
    """Keep whole lines from the start until either cap would be exceeded."""
    total_bytes = _nbytes(text)
    lines = split_lines(text)
    if len(lines) <= max_lines and total_bytes <= max_bytes:
        return _untouched(text, len(lines), total_bytes, max_lines, max_bytes)
    if _nbytes(lines[0]) > max_bytes:
        return Truncation(
            "", True, "bytes", len(lines), total_bytes, 0, 0, False, True, max_lines, max_bytes
        )
    kept: list[str] = []
    used = 0
    by: Literal["lines", "bytes"] = "lines"
    for line in lines[:max_lines]:
        cost = _nbytes(line) + (1 if kept else 0)
        if used + cost > max_bytes:
            by = "bytes"
            break
        kept.append(line)
        used += cost
    out = "\n".join(kept)
    return Truncation(
        out,
        True,
        by,
        len(lines),
        total_bytes,
        len(kept),
        _nbytes(out),
        False,
        False,
        max_lines,
        max_bytes,
    )


def _tail_of_line(line: str, max_bytes: int) -> str:
    data = line.encode("utf-8", "surrogatepass")
    start = len(data) - max_bytes
    while start < len(data) and (data[start] & 0xC0) == 0x80:  # not on a character boundary
        start += 1
    return data[start:].decode("utf-8", "surrogatepass")


def truncate_tail(
    text: str, *, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> Truncation:
    """Keep whole lines from the end; a single over-long last line keeps its end."""
    total_bytes = _nbytes(text)
    lines = split_lines(text)
    if len(lines) <= max_lines and total_bytes <= max_bytes:
        return _untouched(text, len(lines), total_bytes, max_lines, max_bytes)
    kept: list[str] = []
    used = 0
    by: Literal["lines", "bytes"] = "lines"
    partial = False
    for line in reversed(lines):
        if len(kept) >= max_lines:
            break
        cost = _nbytes(line) + (1 if kept else 0)
        if used + cost > max_bytes:
            by = "bytes"
            if not kept:
                kept.append(_tail_of_line(line, max_bytes))
                partial = True
            break
        kept.append(line)
        used += cost
    kept.reverse()
    out = "\n".join(kept)
    return Truncation(
        out,
        True,
        by,
        len(lines),
        total_bytes,
        len(kept),
        _nbytes(out),
        partial,
        False,
        max_lines,
        max_bytes,
    )


def truncate_line(line: str, max_chars: int = GREP_MAX_LINE_LENGTH) -> tuple[str, bool]:
    """Cut one line to ``max_chars`` characters plus ``... [truncated]``; say whether it was cut."""
    if len(line) <= max_chars:
        return line, False
    return f"{line[:max_chars]}... [truncated]", True
