"""The ``read`` tool: a text file, a window at a time, with a hint for reading on.

Arguments: ``path`` (relative to the working directory or absolute, ``~`` allowed), ``offset``
(first line, 1-indexed) and ``limit`` (most lines). The selected lines are cut to 2000 lines or
50 KB, whichever comes first, and the footer says exactly how to continue:

* ``[Showing lines A-B of N. Use offset=B+1 to continue.]`` when the line cap hit,
* ``[Showing lines A-B of N (50.0KB limit). Use offset=B+1 to continue.]`` for the byte cap,
* ``[K more lines in file. Use offset=M to continue.]`` when the caller's ``limit`` stopped it.

Lines carry no number prefixes (models then copy text into ``edit`` verbatim). Line endings are
shown as ``\\n`` and a UTF-8 byte order mark is hidden; ``edit`` matches the same way.

Images (PNG, JPEG, GIF, WebP) come back as a short note rather than bytes, other binary files
(a NUL byte near the start) as a note suggesting bash. An offset past the end of the file, a
missing file and a directory are errors that name the path.
"""

from __future__ import annotations

from typing import Any

import anyio

from .spec import OnUpdate, ToolContext, ToolError, ToolResult, ToolSpec, resolve_path, text_result
from .truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, split_lines, truncate_head

__all__ = ["READ_TOOL", "detect_image_type", "looks_binary", "read_file_bytes"]

_SNIFF_BYTES = 8192

READ_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": "Path to the file to read (relative or absolute)",
        },
        "offset": {
            "type": "integer",
            "minimum": 1,
            "description": "Line number to start reading from (1-indexed)",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "description": "Maximum number of lines to read",
        },
    },
    "required": ["path"],
    "additionalProperties": False,
}


def detect_image_type(head: bytes) -> str | None:
    """The MIME type of a PNG, JPEG, GIF or WebP file from its first bytes, else ``None``."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def looks_binary(head: bytes) -> bool:
    """Whether a file's first bytes mark it as binary (a NUL byte, as git and ripgrep decide)."""
    return b"\x00" in head[:_SNIFF_BYTES]


async def read_file_bytes(path: anyio.Path, shown: str) -> bytes:
    """Read a whole file, turning the usual failures into :class:`ToolError` naming ``shown``."""
    try:
        if await path.is_dir():
            raise ToolError(f"{shown} is a directory, not a file. Use ls to list it.")
        return await path.read_bytes()
    except FileNotFoundError:
        raise ToolError(f"File not found: {shown}") from None
    except PermissionError:
        raise ToolError(f"Cannot read {shown}: permission denied") from None
    except IsADirectoryError:
        raise ToolError(f"{shown} is a directory, not a file. Use ls to list it.") from None
    except OSError as error:
        raise ToolError(f"Cannot read {shown}: {error.strerror or error}") from None


def _decode(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n")


async def _read(args: dict[str, Any], tools: ToolContext, on_update: OnUpdate | None) -> ToolResult:
    shown: str = args["path"]
    path = resolve_path(shown, tools.cwd)
    data = await read_file_bytes(anyio.Path(path), shown)

    mime = detect_image_type(data[:16])
    if mime is not None:
        note = (
            f"Read image file [{mime}] ({format_size(len(data))}). "
            "Image content is not attached by this tool."
        )
        return text_result(
            note, {"path": str(path), "image": {"mime_type": mime, "bytes": len(data)}}
        )
    if looks_binary(data):
        note = (
            f"[{shown} is a binary file ({format_size(len(data))}); its content is not shown. "
            f"Use bash (for example: file {shown}; xxd {shown} | head) to inspect it.]"
        )
        return text_result(note, {"path": str(path), "binary": True, "bytes": len(data)})

    lines = split_lines(_decode(data))
    total = len(lines)
    offset: int | None = args.get("offset")
    limit: int | None = args.get("limit")
    start = (offset or 1) - 1
    if total == 0 and start == 0:
        return text_result("(empty file)", {"path": str(path), "total_lines": 0})
    if start >= total:
        raise ToolError(f"Offset {offset} is beyond end of file {shown} ({total} lines total)")
    end = total if limit is None else min(start + limit, total)

    cut = truncate_head("\n".join(lines[start:end]))
    first = start + 1
    details: dict[str, Any] = {"path": str(path), "total_lines": total}
    if cut.first_line_exceeds_limit:
        size = format_size(len(lines[start].encode("utf-8", "surrogatepass")))
        text = (
            f"[Line {first} is {size}, exceeds {format_size(DEFAULT_MAX_BYTES)} limit. "
            f"Use bash: sed -n '{first}p' {shown} | head -c {DEFAULT_MAX_BYTES}]"
        )
        details["truncation"] = cut.as_details()
    elif cut.truncated:
        last = first + cut.output_lines - 1
        limit_note = (
            "" if cut.truncated_by == "lines" else f" ({format_size(DEFAULT_MAX_BYTES)} limit)"
        )
        text = (
            f"{cut.content}\n\n[Showing lines {first}-{last} of {total}{limit_note}. "
            f"Use offset={last + 1} to continue.]"
        )
        details["truncation"] = cut.as_details()
    elif end < total:
        text = f"{cut.content}\n\n[{total - end} more lines in file. Use offset={end + 1} to continue.]"
    else:
        text = cut.content
    return text_result(text, details)


READ_TOOL = ToolSpec(
    name="read",
    description=(
        "Read the contents of a file. Text output is truncated to "
        f"{DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB (whichever is hit first). "
        "Use offset/limit for large files; when you need the whole file, continue with offset "
        "until complete. Images and binary files are reported, not shown."
    ),
    parameters=READ_PARAMETERS,
    handler=_read,
)
