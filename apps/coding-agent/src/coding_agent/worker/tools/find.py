"""The ``find`` tool: files whose path matches a glob, respecting ``.gitignore``.

Arguments: ``pattern`` (a glob such as ``*.py`` or ``src/**/*.test.ts``), ``path`` (folder to
search, default the working directory) and ``limit`` (most results, default 1000). A glob
without ``/`` matches file names at any depth; one with ``/`` is anchored at the searched
folder. Hidden files are included; ``.git`` and ``node_modules`` folders and ignored files are
not. Paths come back relative to the searched folder, one a line, in path order.

ripgrep (``rg --files``) lists the files when available, else :func:`pico3.walk_files`.
Notices follow pi: ``[1000 results limit reached. Use limit=2000 for more, or refine pattern]``
and the 50 KB cap; nothing found gives ``No files found matching pattern``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread

from pico3 import walk_files

from .exact import TargetChanged
from .files import changed_error, real_root
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
from .truncate import DEFAULT_MAX_BYTES, format_size, truncate_head

__all__ = ["FIND_TOOL"]

DEFAULT_FIND_LIMIT = 1000
_SKIPPED_DIRS = frozenset({"node_modules"})

FIND_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {
            "type": "string",
            "description": "Glob pattern to match files, e.g. '*.ts', '**/*.json', 'src/**/*.spec.ts'",
        },
        "path": {
            "type": "string",
            "description": "Directory to search in (default: current directory)",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "description": f"Maximum number of results (default: {DEFAULT_FIND_LIMIT})",
        },
    },
    "required": ["pattern"],
    "additionalProperties": False,
}


async def _find_rg(rg: str, pattern: str, root: Path, limit: int) -> tuple[list[str], bool]:
    # Not ``rg --glob PATTERN``: ripgrep's include globs override .gitignore; filter here.
    flags = ["--files", *RG_COMMON_FLAGS, "--glob", "!node_modules"]
    wanted = glob_filter(pattern)
    found: list[str] = []
    errors = bytearray()
    code: int | None = None
    more = False
    async with open_rg(rg, flags, root) as process, anyio.create_task_group() as group:
        group.start_soon(collect, process.stderr, errors)
        assert process.stdout is not None
        async for raw in read_lines(process.stdout):
            path = raw.decode("utf-8", errors="replace")
            if not wanted(path):
                continue
            if len(found) >= limit:
                more = True
                process.kill()
                break
            found.append(path)
        code = await process.wait()
    if not more and code == 2 and not found:
        message = errors.decode("utf-8", errors="replace").strip() or "ripgrep failed"
        raise ToolError(f"find failed: {message}")
    return found, more


def _find_python(pattern: str, root: Path, limit: int) -> tuple[list[str], bool]:
    wanted = glob_filter(pattern)
    found: list[str] = []
    for relative in walk_files(root, skip_dirs=_SKIPPED_DIRS):
        anyio.from_thread.check_cancelled()
        if wanted(relative):
            if len(found) >= limit:
                return found, True
            found.append(relative)
    return found, False


async def _find(args: dict[str, Any], tools: ToolContext, on_update: OnUpdate | None) -> ToolResult:
    shown, root = await real_root(args, tools)  # as approved
    if not await anyio.Path(root).is_dir():
        raise ToolError(f"Not a directory: {shown}")
    limit = int(args.get("limit") or DEFAULT_FIND_LIMIT)
    rg = use_ripgrep(tools)
    found: list[str] = []
    more = False
    await tools.about_to_read(root, shown)
    with abortable(tools.ctx):
        try:
            if rg is not None:
                found, more = await _find_rg(rg, args["pattern"], root, limit)
            else:
                found, more = await anyio.to_thread.run_sync(
                    _find_python, args["pattern"], root, limit
                )
        except TargetChanged as error:  # a symlink appeared on the way to the folder
            raise changed_error(shown, error, "search") from None
    if tools.ctx.cancelled:
        raise ToolError("Search aborted")
    details: dict[str, Any] = {"backend": "ripgrep" if rg else "python", "count": len(found)}
    if not found:
        return text_result("No files found matching pattern", details)
    cut = truncate_head("\n".join(found), max_lines=len(found) + 1)
    notices: list[str] = []
    if more:
        notices.append(
            f"{limit} results limit reached. Use limit={limit * 2} for more, or refine pattern"
        )
        details["result_limit_reached"] = limit
    if cut.truncated:
        notices.append(f"{format_size(DEFAULT_MAX_BYTES)} limit reached")
        details["truncation"] = cut.as_details()
    text = cut.content
    if notices:
        text += "\n\n" + "\n".join(f"[{notice}]" for notice in notices)
    return text_result(text, details)


FIND_TOOL = ToolSpec(
    name="find",
    description=(
        "Search for files by glob pattern. Returns matching file paths relative to the search "
        "directory. Respects .gitignore. Output is truncated to "
        f"{DEFAULT_FIND_LIMIT} results or {DEFAULT_MAX_BYTES // 1024}KB (whichever is hit first)."
    ),
    parameters=FIND_PARAMETERS,
    handler=_find,
)
