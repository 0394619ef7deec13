"""The ``grep`` tool: search file contents, respecting ``.gitignore``.

Arguments: ``pattern`` (a regular expression, or plain text with ``literal``), ``path`` (folder
or file, default the working directory), ``glob`` (only files matching it, e.g. ``*.py``),
``ignoreCase``, ``literal``, ``context`` (lines around each match) and ``limit`` (most matches,
default 100).

Output follows pi and grep: ``rel/path:N: text`` for a match, ``rel/path-N- text`` for a
context line, paths relative to the searched folder. Long lines are cut to 500 characters, the
whole output to 50 KB, and each cut is announced in a trailing notice ("100 matches limit
reached. Use limit=200 for more, or refine pattern"). No hits gives ``No matches found``.

ripgrep runs when available (:mod:`.search`); otherwise Python's ``re`` walks the files that
:mod:`.ignore` allows. The two regex dialects agree on everyday patterns (classes, groups,
anchors, ``\\b``, repetition) but not on every exotic feature. Neither follows a symlink
inside the searched folder (a link to a file outside it is left unread, as ripgrep leaves it).
"""

from __future__ import annotations

import base64
import json
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread

from pico3 import walk_files

from .exact import TargetChanged
from .files import changed_error, describe_mode, real_root
from .read import looks_binary
from .search import RG_COMMON_FLAGS, collect, glob_filter, open_rg, read_lines, use_ripgrep
from .spec import (
    OnUpdate,
    ToolContext,
    ToolError,
    ToolResult,
    ToolSpec,
    abortable,
    text_result,
)
from .truncate import (
    DEFAULT_MAX_BYTES,
    GREP_MAX_LINE_LENGTH,
    format_size,
    truncate_head,
    truncate_line,
)

__all__ = ["GREP_TOOL"]

DEFAULT_GREP_LIMIT = 100

GREP_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "description": "Search pattern (regex, or literal text)"},
        "path": {
            "type": "string",
            "description": "Directory or file to search (default: current directory)",
        },
        "glob": {
            "type": "string",
            "description": "Only search files matching this glob, e.g. '*.ts'",
        },
        "ignoreCase": {
            "type": "boolean",
            "description": "Case-insensitive search (default: false)",
        },
        "literal": {
            "type": "boolean",
            "description": "Treat pattern as literal text (default: false)",
        },
        "context": {
            "type": "integer",
            "minimum": 0,
            "description": "Lines to show around each match",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "description": f"Maximum number of matches (default: {DEFAULT_GREP_LIMIT})",
        },
    },
    "required": ["pattern"],
    "additionalProperties": False,
}


@dataclass
class _Collector:
    """Gathers output lines up to ``limit`` matches (plus the last match's trailing context)."""

    limit: int
    context: int
    lines: list[str] = field(default_factory=list)
    matches: int = 0
    limit_reached: bool = False
    cut_lines: bool = False
    _last: tuple[str, int] = ("", 0)

    def _add(self, path: str, number: int, text: str, sep: str) -> None:
        shown, cut = truncate_line(text.rstrip("\r"))
        self.cut_lines = self.cut_lines or cut
        self.lines.append(f"{path}{sep}{number}{sep} {shown}")

    def match(self, path: str, number: int, text: str) -> bool:
        """Record a match; ``False`` once the limit is exceeded (stop searching)."""
        if self.matches >= self.limit:
            self.limit_reached = True
            return False
        self.matches += 1
        self._last = (path, number)
        self._add(path, number, text, ":")
        return True

    def context_line(self, path: str, number: int, text: str) -> None:
        if self.matches >= self.limit:
            last_path, last_number = self._last
            if path != last_path or not last_number < number <= last_number + self.context:
                return
        self._add(path, number, text, "-")


def _rg_text(data: dict[str, Any]) -> str:
    if "text" in data:
        return str(data["text"])
    return base64.b64decode(data.get("bytes", "")).decode("utf-8", errors="replace")


async def _grep_rg(
    rg: str, args: dict[str, Any], root: Path, is_file: bool, found: _Collector
) -> None:
    flags = ["--json", "--line-number", *RG_COMMON_FLAGS]
    if args.get("ignoreCase"):
        flags.append("--ignore-case")
    if args.get("literal"):
        flags.append("--fixed-strings")
    if args.get("context"):
        flags += ["--context", str(args["context"])]
    flags += ["--regexp", args["pattern"]]
    if is_file:
        cwd, flags = root.parent, [*flags, "--", root.name]
    else:
        cwd = root
    errors = bytearray()
    code: int | None = None
    stopped = False
    # Not ``rg --glob``: ripgrep's include globs override .gitignore, so filter here instead.
    wanted = glob_filter(args.get("glob"))
    async with open_rg(rg, flags, cwd) as process, anyio.create_task_group() as group:
        group.start_soon(collect, process.stderr, errors)
        assert process.stdout is not None
        async for raw in read_lines(process.stdout):
            event = json.loads(raw)
            kind = event.get("type")
            if kind not in ("match", "context"):
                continue
            data = event["data"]
            path = _rg_text(data["path"])
            if not wanted(path):
                continue
            text = _rg_text(data["lines"]).rstrip("\n")
            number = int(data["line_number"])
            if kind == "context":
                found.context_line(path, number, text)
            elif not found.match(path, number, text):
                stopped = True
                break
        if stopped:
            process.kill()
        code = await process.wait()
    if not stopped and code == 2 and not found.lines:
        message = errors.decode("utf-8", errors="replace").strip() or "ripgrep failed"
        raise ToolError(f"grep failed: {message}")


def _read_regular(path: Path, *, follow: bool = True) -> bytes | None:
    """The bytes of ``path`` if it is a regular file (opened without blocking), else ``None``;
    without ``follow``, a symlink at the name fails (``OSError``) instead of being followed."""
    nofollow = 0 if follow else os.O_NOFOLLOW
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | nofollow)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        os.set_blocking(fd, True)
        with os.fdopen(os.dup(fd), "rb") as file:
            return file.read()
    finally:
        os.close(fd)


def _grep_python(args: dict[str, Any], root: Path, is_file: bool, found: _Collector) -> None:
    flags = re.IGNORECASE if args.get("ignoreCase") else 0
    source = re.escape(args["pattern"]) if args.get("literal") else args["pattern"]
    try:
        regex = re.compile(source, flags)
    except re.error as error:
        raise ToolError(f"grep failed: invalid regex {args['pattern']!r}: {error}") from None
    wanted: Callable[[str], bool] = glob_filter(args.get("glob"))
    context = int(args.get("context") or 0)
    files = [root.name] if is_file else walk_files(root)
    base = root.parent if is_file else root
    for relative in files:
        anyio.from_thread.check_cancelled()
        if not wanted(relative):
            continue
        try:  # a symlink in the folder is not followed, as ripgrep does not follow it: a
            # cloned repository's link to ~/.config/coding-agent/config.toml stays unread
            data = _read_regular(base / relative, follow=is_file)
        except OSError:
            continue
        if data is None:  # a FIFO, a device or a socket: reading it could block for good
            continue
        if looks_binary(data):
            continue
        lines = data.decode("utf-8", errors="replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        hits = [n for n, line in enumerate(lines) if regex.search(line.rstrip("\r"))]
        if not hits:
            continue
        shown: set[int] = set()
        for n in hits:
            shown.update(range(max(0, n - context), min(len(lines), n + context + 1)))
        matched = set(hits)
        for n in sorted(shown):
            if n in matched:
                if not found.match(relative, n + 1, lines[n]):
                    return
            else:
                found.context_line(relative, n + 1, lines[n])


async def _grep(args: dict[str, Any], tools: ToolContext, on_update: OnUpdate | None) -> ToolResult:
    shown, root = await real_root(args, tools)  # as approved
    is_file = await anyio.Path(root).is_file()
    if not is_file and not await anyio.Path(root).is_dir():
        what = describe_mode((await anyio.Path(root).stat()).st_mode) or "not a regular file"
        raise ToolError(f"Cannot search {shown}: it is {what}, not a file or a folder")
    limit = int(args.get("limit") or DEFAULT_GREP_LIMIT)
    found = _Collector(limit=limit, context=int(args.get("context") or 0))
    rg = use_ripgrep(tools)
    await tools.about_to_read(root, shown)
    with abortable(tools.ctx):
        try:
            if rg is not None:
                await _grep_rg(rg, args, root, is_file, found)
            else:
                await anyio.to_thread.run_sync(_grep_python, args, root, is_file, found)
        except TargetChanged as error:  # a symlink appeared on the way to the folder
            raise changed_error(shown, error, "search") from None
    if tools.ctx.cancelled:
        raise ToolError("Search aborted")
    details: dict[str, Any] = {"backend": "ripgrep" if rg else "python", "matches": found.matches}
    if not found.lines:
        return text_result("No matches found", details)
    cut = truncate_head("\n".join(found.lines), max_lines=len(found.lines) + 1)
    notices: list[str] = []
    if found.limit_reached:
        notices.append(
            f"{limit} matches limit reached. Use limit={limit * 2} for more, or refine pattern"
        )
        details["match_limit_reached"] = limit
    if cut.truncated:
        notices.append(f"{format_size(DEFAULT_MAX_BYTES)} limit reached")
        details["truncation"] = cut.as_details()
    if found.cut_lines:
        notices.append(
            f"Some lines truncated to {GREP_MAX_LINE_LENGTH} chars. Use read tool to see full lines"
        )
        details["lines_truncated"] = True
    text = cut.content
    if notices:
        text += "\n\n" + "\n".join(f"[{notice}]" for notice in notices)
    return text_result(text, details)


GREP_TOOL = ToolSpec(
    name="grep",
    description=(
        "Search file contents for a pattern. Returns matching lines with file paths and line "
        f"numbers. Respects .gitignore. Output is truncated to {DEFAULT_GREP_LIMIT} matches or "
        f"{DEFAULT_MAX_BYTES // 1024}KB (whichever is hit first); long lines are cut to "
        f"{GREP_MAX_LINE_LENGTH} chars."
    ),
    parameters=GREP_PARAMETERS,
    handler=_grep,
)
