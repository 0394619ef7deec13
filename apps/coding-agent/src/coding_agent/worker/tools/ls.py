"""The ``ls`` tool: one folder's entries, alphabetically, folders marked with ``/``.

Arguments: ``path`` (default the working directory) and ``limit`` (most entries, default 500).
Entries are sorted case-insensitively; dotfiles are included. Entries that ``.gitignore`` rules
exclude (and ``.git``) are left out, like grep and find leave them out, but never silently: a
notice counts them (``[3 ignored entries not shown (.gitignore)]``) so the model knows to use
bash when it really needs them. An empty folder reads ``(empty directory)``; the entry limit and
the 50 KB cap add pi's notices. A name that is not valid UTF-8 is shown with its undecodable
bytes as ``\\xNN`` escapes (``bad\\xff.txt``), never dropped.

The folder is the real path the approval checked (``ToolContext.checked_target``: a path that
leads elsewhere now fails the call), opened by the no-follow walk of :mod:`.exact` and listed
through that descriptor: a folder on the way swapped for a symlink meanwhile fails the call
rather than listing another folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from pico3 import IgnoreRules

from .exact import TargetChanged, open_folder
from .files import changed_error, real_root
from .spec import (
    OnUpdate,
    ToolContext,
    ToolError,
    ToolResult,
    ToolSpec,
    resolve_path,
    storable_text,
    text_result,
)
from .truncate import DEFAULT_MAX_BYTES, format_size, truncate_head

__all__ = ["LS_TOOL"]

DEFAULT_LS_LIMIT = 500

LS_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Directory to list (default: current directory)"},
        "limit": {
            "type": "integer",
            "minimum": 1,
            "description": f"Maximum number of entries to return (default: {DEFAULT_LS_LIMIT})",
        },
    },
    "additionalProperties": False,
}


def _list(root: Path) -> tuple[list[str], int]:
    rules = IgnoreRules(root)
    shown: list[str] = []
    ignored = 0
    walked = open_folder(os.fspath(root))  # exactly the real path, no symlink followed
    try:
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=walked)
    finally:
        os.close(walked)
    try:
        with os.scandir(fd) as entries:  # lists (a duplicate of) the descriptor
            for entry in entries:
                try:
                    is_dir = entry.is_dir()  # a symlink to a folder lists as a folder
                except OSError:
                    is_dir = False
                if rules.ignored(root / entry.name, is_dir):
                    ignored += 1
                    continue
                name = storable_text(entry.name)  # undecodable bytes as \xNN
                shown.append(name + "/" if is_dir else name)
    finally:
        os.close(fd)
    shown.sort(key=lambda name: (name.lower(), name))
    return shown, ignored


async def _ls(args: dict[str, Any], tools: ToolContext, on_update: OnUpdate | None) -> ToolResult:
    shown_path, root = await real_root(args, tools, verb="list")  # as approved
    if not await anyio.Path(root).is_dir():
        raise ToolError(f"Not a directory: {shown_path}")
    await tools.about_to_read(root, shown_path)
    try:
        entries, ignored = await anyio.to_thread.run_sync(_list, root)
    except TargetChanged as error:
        raise changed_error(shown_path, error, "list") from None
    except PermissionError:
        raise ToolError(f"Cannot list {shown_path}: permission denied") from None
    except OSError as error:
        raise ToolError(f"Cannot list {shown_path}: {error.strerror or error}") from None
    limit = int(args.get("limit") or DEFAULT_LS_LIMIT)
    spelled = resolve_path(shown_path, tools.cwd)  # the path as written, for the details
    details: dict[str, Any] = {"path": str(spelled), "count": len(entries), "ignored": ignored}
    notices: list[str] = []
    if len(entries) > limit:
        entries = entries[:limit]
        notices.append(f"{limit} entries limit reached. Use limit={limit * 2} for more")
        details["entry_limit_reached"] = limit
    text = "\n".join(entries) if entries else "(empty directory)"
    cut = truncate_head(text, max_lines=len(entries) + 1)
    if cut.truncated:
        notices.append(f"{format_size(DEFAULT_MAX_BYTES)} limit reached")
        details["truncation"] = cut.as_details()
        text = cut.content
    if ignored:
        notices.append(
            f"{ignored} ignored entr{'y' if ignored == 1 else 'ies'} not shown (.gitignore)"
        )
    if notices:
        text += "\n\n" + "\n".join(f"[{notice}]" for notice in notices)
    return text_result(text, details)


LS_TOOL = ToolSpec(
    name="ls",
    description=(
        "List directory contents. Entries are sorted alphabetically, with '/' suffix for "
        "directories; dotfiles are included, .gitignore'd entries are counted but not listed. "
        f"Output is truncated to {DEFAULT_LS_LIMIT} entries or {DEFAULT_MAX_BYTES // 1024}KB."
    ),
    parameters=LS_PARAMETERS,
    handler=_ls,
)
