"""The ``read`` tool: a text file, a window at a time, with a hint for reading on.

Arguments: ``path`` (relative to the working directory or absolute, ``~`` allowed), ``offset``
(first line, 1-indexed) and ``limit`` (most lines). The selected lines are cut to 2000 lines or
50 KB, whichever comes first, and the footer says exactly how to continue:

* ``[Showing lines A-B of N. Use offset=B+1 to continue.]`` when the line cap hit,
* ``[Showing lines A-B of N (50.0KB limit). Use offset=B+1 to continue.]`` for the byte cap,
* ``[K more lines in file. Use offset=M to continue.]`` when the caller's ``limit`` stopped it.

Lines carry no number prefixes (models then copy text into ``edit`` verbatim). Line endings are
shown as ``\\n`` and a UTF-8 byte order mark is hidden; ``edit`` matches the same way.

Images (PNG, JPEG, GIF, WebP) come back as an image block, scaled to fit 2000x2000
(:mod:`coding_agent.context.images`), with a line naming the format and size; for a model that does not
accept images (``ToolContext.accepts_images``) the call is refused saying so. Other binary files
(a NUL byte near the start) come back as a note suggesting bash. An offset past the end of the file, a
missing file and a directory are errors that name the path.

The path is resolved once to its real path (symlinks followed: a link inside the project to a
file inside it reads that file); when the approval left the real path it checked
(``ToolContext.checked_target``), the two must agree, and the file is opened by the no-follow
walk of :mod:`.exact`. So a read approved (or let through) for ``d/notes.txt`` fails, reading
nothing, when ``d`` became a symlink to ``~/.ssh`` or to a denied ``.env`` after the check:
``Cannot read d/notes.txt: its path changed while the call ran ...``.

With an editor's buffers in the context (``ToolContext.editor``, ``coding-agent acp``), a text
file's content is the editor's, unsaved changes included (an image or a binary file is read from
the disk); the file must exist on disk.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from coding_agent.context.images import MAX_FILE_BYTES, ImageError, detect_image_type, prepare_image

from .files import (
    buffer_fd,
    editor_read,
    hash_fd,
    open_regular,
    read_whole,
    real_target,
)
from .host import HASH_LIMIT, FileStamp
from .spec import (
    OnUpdate,
    ToolContext,
    ToolError,
    ToolResult,
    ToolSpec,
    resolve_path,
    text_result,
)
from .truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_head

__all__ = ["READ_TOOL", "detect_image_type", "looks_binary", "read_file_bytes"]

_SNIFF_BYTES = 8192
_CHUNK = 1024 * 1024
_BOM = b"\xef\xbb\xbf"

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


def looks_binary(head: bytes) -> bool:
    """Whether a file's first bytes mark it as binary (a NUL byte, as git and ripgrep decide)."""
    return b"\x00" in head[:_SNIFF_BYTES]


async def read_file_bytes(path: anyio.Path | Path, shown: str) -> bytes:
    """Read a whole regular file, turning the usual failures (missing, a folder, a FIFO or a
    device, no permission, an open that hangs, a symlink swapped in on the way after ``path``
    was resolved) into :class:`ToolError` naming ``shown``."""
    real = real_target(Path(path), shown, None, verb="read")
    data, _info = await read_whole(real, shown)
    return data


@dataclass
class _Window:
    """What one streaming pass over a text file found (see :func:`_scan`)."""

    lines: list[str] = field(default_factory=list[str])
    """The decoded lines of the window, bounded: a few more than the caps can show, at most."""
    total: int = 0
    """Lines in the whole file."""
    first_bytes: int = 0
    """The length in bytes of the window's first line (it may be too long to show)."""
    window_bytes: int = 0
    sha256: str | None = None


def _finish(piece: bytearray, complete: bool) -> str:
    if complete:
        del piece[-1:]
        if piece.endswith(b"\r"):
            del piece[-1:]
    return piece.decode("utf-8", errors="replace")


def _scan(fd: int, size: int, skip: int, start: int, end: float) -> _Window:
    """Stream the file behind ``fd`` once (from byte ``skip``): keep the decoded lines
    ``start`` (0-based) up to ``end`` while the output caps may still show them, count every
    line, and hash the whole file when it is small enough. Memory stays bounded by the caps
    whatever the file's size or line lengths."""
    found = _Window()
    digest = hashlib.sha256() if size <= HASH_LIMIT else None
    if digest is not None and skip:
        digest.update(os.pread(fd, skip, 0))
    os.lseek(fd, skip, os.SEEK_SET)
    keep_limit = DEFAULT_MAX_BYTES + 8  # bytes of one line worth keeping
    kept_bytes = 0
    collecting = True
    line = 0
    pending = False  # in the middle of a line
    piece: bytearray | None = None
    piece_len = 0
    with os.fdopen(os.dup(fd), "rb", buffering=_CHUNK) as file:
        # Line by line while inside the window; the rest only counted, a chunk at a time.
        at_end = False
        while line < end and (collecting or end != float("inf")):
            data = file.readline(_CHUNK)
            if not data:
                at_end = True
                break
            if digest is not None:
                digest.update(data)
            complete = data.endswith(b"\n")
            pending = not complete
            if line >= start:
                found.window_bytes += len(data)
                if piece is None:
                    piece, piece_len = bytearray(), 0
                piece_len += len(data)
                if collecting and len(piece) < keep_limit:
                    piece += data[: keep_limit - len(piece)]
                if complete:
                    if line == start:
                        crlf = 2 if piece.endswith(b"\r\n") else 1
                        found.first_bytes = piece_len - crlf
                    if collecting:
                        text = _finish(piece, True)
                        found.lines.append(text)
                        kept_bytes += len(text.encode("utf-8", "surrogatepass")) + 1
                        if len(found.lines) > DEFAULT_MAX_LINES or kept_bytes > keep_limit:
                            collecting = False
                    piece = None
            if complete:
                line += 1
        newlines = 0
        tail_open = False
        if at_end:
            if pending:  # the last line has no newline
                if piece is not None:
                    if line == start:
                        found.first_bytes = piece_len
                    if collecting:
                        found.lines.append(_finish(piece, False))
                line += 1
        else:
            while True:
                data = file.read(_CHUNK)
                if not data:
                    break
                if digest is not None:
                    digest.update(data)
                newlines += data.count(b"\n")
                tail_open = not data.endswith(b"\n")
                if line >= start and end == float("inf"):
                    found.window_bytes += len(data)
    found.total = line + newlines + (1 if tail_open else 0)
    found.sha256 = digest.hexdigest() if digest is not None else None
    return found


async def _note(
    tools: ToolContext,
    real: Path,
    fd: int,
    info: os.stat_result,
    text: str,
    details: dict[str, Any],
) -> ToolResult:
    sha = await anyio.to_thread.run_sync(hash_fd, fd, info.st_size)
    await _remember(tools, real, FileStamp.of(info, sha))
    return text_result(text, details)


async def _image(
    tools: ToolContext,
    path: Path,
    real: Path,
    shown: str,
    fd: int,
    info: os.stat_result,
    mime: str,
) -> ToolResult:
    """An image file: an image block (scaled to fit 2000x2000) for a model that accepts
    images, a refusal naming the reason for one that does not."""
    if tools.accepts_images is not None and not await tools.accepts_images():
        raise ToolError(
            f"{shown} is an image ({mime}), and the current model does not accept images. "
            "Switch to a model that does (/model) to look at it, or inspect it with bash "
            f"(for example: file {shown})."
        )
    if info.st_size > MAX_FILE_BYTES:
        raise ToolError(
            f"{shown} is an image too large to attach ({format_size(info.st_size)}; the limit "
            f"is {format_size(MAX_FILE_BYTES)})"
        )
    data = await anyio.to_thread.run_sync(_read_all, fd, info.st_size)
    try:
        prepared = await anyio.to_thread.run_sync(prepare_image, data, shown)
    except ImageError as error:
        raise ToolError(str(error)) from None
    sha = hashlib.sha256(data).hexdigest() if len(data) <= HASH_LIMIT else None
    await _remember(tools, real, FileStamp.of(info, sha))
    details = {
        "path": str(path),
        "image": {
            "mime_type": prepared.mime_type,
            "bytes": info.st_size,
            "width": prepared.width,
            "height": prepared.height,
            "original_width": prepared.original_width,
            "original_height": prepared.original_height,
        },
    }
    note = f"Read image file {shown} {prepared.note()}"
    return ToolResult(content=[{"type": "text", "text": note}, prepared.block()], details=details)


def _read_all(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while offset < size:
        chunk = os.pread(fd, min(_CHUNK, size - offset), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


async def _remember(tools: ToolContext, real: Path, stamp: FileStamp) -> None:
    if tools.reads is not None:  # keyed by the real path (ledger_key), resolved already
        await tools.reads.put(os.fspath(real), stamp)


async def _read(args: dict[str, Any], tools: ToolContext, on_update: OnUpdate | None) -> ToolResult:
    shown: str = args["path"]
    path = resolve_path(shown, tools.cwd)
    real = real_target(path, shown, tools.checked_target, verb="read")  # resolved once
    await tools.about_to_read(real, shown)
    fd, info = await open_regular(real, shown)  # exactly there, no symlink followed
    try:
        if tools.editor is not None:  # a text file's content is the editor's buffer
            head = await anyio.to_thread.run_sync(os.pread, fd, _SNIFF_BYTES, 0)
            if detect_image_type(head[:16]) is None and not looks_binary(head):
                text = await editor_read(tools.editor, real)
                if text is not None:
                    os.close(fd)
                    fd = -1  # closed: a failure below must not close it again
                    fd, info = buffer_fd(text)
        return await _read_open(args, tools, path, real, shown, fd, info)
    except OSError as error:
        raise ToolError(f"Cannot read {shown}: {error.strerror or error}") from None
    finally:
        if fd >= 0:
            os.close(fd)


async def _read_open(
    args: dict[str, Any],
    tools: ToolContext,
    path: Path,
    real: Path,
    shown: str,
    fd: int,
    info: os.stat_result,
) -> ToolResult:
    head = await anyio.to_thread.run_sync(os.pread, fd, _SNIFF_BYTES, 0)
    size = info.st_size
    mime = detect_image_type(head[:16])
    if mime is not None:
        return await _image(tools, path, real, shown, fd, info, mime)
    if looks_binary(head):
        note = (
            f"[{shown} is a binary file ({format_size(size)}); its content is not shown. "
            f"Use bash (for example: file {shown}; xxd {shown} | head) to inspect it.]"
        )
        details = {"path": str(path), "binary": True, "bytes": size}
        return await _note(tools, real, fd, info, note, details)

    offset: int | None = args.get("offset")
    limit: int | None = args.get("limit")
    start = (offset or 1) - 1
    end = float("inf") if limit is None else start + limit
    skip = len(_BOM) if head.startswith(_BOM) else 0
    found = await anyio.to_thread.run_sync(_scan, fd, size, skip, start, end)
    await _remember(tools, real, FileStamp.of(info, found.sha256))
    total = found.total
    if total == 0 and start == 0:
        return text_result("(empty file)", {"path": str(path), "total_lines": 0})
    if start >= total:
        raise ToolError(f"Offset {offset} is beyond end of file {shown} ({total} lines total)")
    last_line = int(min(end, total))
    window_lines = last_line - start

    cut = truncate_head("\n".join(found.lines))
    if cut.truncated or len(found.lines) < window_lines:
        cut = replace(
            cut,
            truncated=True,
            truncated_by=cut.truncated_by or "lines",
            total_lines=window_lines,
            total_bytes=max(found.window_bytes - 1, 0),
        )
    first = start + 1
    details: dict[str, Any] = {"path": str(path), "total_lines": total}
    if found.first_bytes > DEFAULT_MAX_BYTES:
        size_text = format_size(found.first_bytes)
        text = (
            f"[Line {first} is {size_text}, exceeds {format_size(DEFAULT_MAX_BYTES)} limit. "
            f"Use bash: sed -n '{first}p' {shown} | head -c {DEFAULT_MAX_BYTES}]"
        )
        details["truncation"] = replace(
            cut,
            content="",
            first_line_exceeds_limit=True,
            truncated_by="bytes",
            output_lines=0,
            output_bytes=0,
        ).as_details()
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
    elif last_line < total:
        text = (
            f"{cut.content}\n\n[{total - last_line} more lines in file. "
            f"Use offset={last_line + 1} to continue.]"
        )
    else:
        text = cut.content
    return text_result(text, details)


READ_TOOL = ToolSpec(
    name="read",
    description=(
        "Read the contents of a file. Text output is truncated to "
        f"{DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB (whichever is hit first). "
        "Use offset/limit for large files; when you need the whole file, continue with offset "
        "until complete. PNG, JPEG, GIF and WebP images are returned as images (scaled to fit "
        "2000x2000); other binary files are reported, not shown."
    ),
    parameters=READ_PARAMETERS,
    handler=_read,
)
