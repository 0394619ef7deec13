"""The ``write`` tool: create or overwrite a file with the given text.

Arguments: ``path`` and ``content``. Missing parent folders are created; an existing file is
overwritten without asking (approvals are a separate feature) — but with a
:class:`~.files.ReadLedger` in the context only when it was read in this conversation (or
written by the agent) and has not changed on disk since; otherwise the call is refused and the
model is told to read it first. A FIFO, a device or a socket is never written. The result reads
``Successfully wrote N bytes to P`` where N counts UTF-8 bytes. Writes and edits of one file go
through the same per-file lock of the :class:`~.spec.ToolContext`, so parallel calls serialise.
The path is resolved once to its real path (it must still be the one the approval checked,
``ToolContext.checked_target``) and written there without following a symlink on the way
(:mod:`.exact`): a folder swapped for a symlink meanwhile fails the call, nothing written.
With an editor's buffers in the context (``ToolContext.editor``, ``coding-agent acp``), the
content goes to the editor, and an existing file's freshness is checked against its buffer.
"""

from __future__ import annotations

import os
from typing import Any

import anyio

from .exact import TargetChanged
from .files import (
    changed_error,
    check_fresh,
    check_fresh_text,
    describe_mode,
    editor_read,
    open_regular,
    put_content,
    real_target,
)
from .spec import OnUpdate, ToolContext, ToolError, ToolResult, ToolSpec, resolve_path, text_result

__all__ = ["WRITE_TOOL"]

WRITE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": "Path to the file to write (relative or absolute)",
        },
        "content": {"type": "string", "description": "Content to write to the file"},
    },
    "required": ["path", "content"],
    "additionalProperties": False,
}


async def _write(
    args: dict[str, Any], tools: ToolContext, on_update: OnUpdate | None
) -> ToolResult:
    shown: str = args["path"]
    spelled = resolve_path(shown, tools.cwd)
    path = real_target(spelled, shown, tools.checked_target)  # resolved once, used throughout
    data = args["content"].encode("utf-8", errors="replace")
    target = anyio.Path(path)
    async with tools.lock_for(path):
        try:
            try:
                info = await target.stat()
            except (FileNotFoundError, NotADirectoryError):
                info = None
            if info is not None:
                what = describe_mode(info.st_mode)
                if what == "a directory":
                    raise ToolError(f"Cannot write {shown}: it is a directory")
                if what is not None:
                    raise ToolError(f"Cannot write {shown}: it is {what}, not a regular file")
                current = await editor_read(tools.editor, path)
                if current is not None:
                    await check_fresh_text(tools.reads, path, shown, current)
                elif tools.reads is not None:
                    fd, info = await open_regular(path, shown, verb="write")
                    try:
                        await check_fresh(tools.reads, path, shown, info, fd=fd)
                    finally:
                        os.close(fd)
            await tools.about_to_write(path, data, shown)
            await put_content(tools.editor, tools.reads, path, data, create_folders=True)
        except TargetChanged as error:
            raise changed_error(shown, error) from None
        except PermissionError:
            raise ToolError(f"Cannot write {shown}: permission denied") from None
        except FileExistsError:
            raise ToolError(
                f"Cannot write {shown}: a parent path exists and is not a folder"
            ) from None
        except NotADirectoryError:
            raise ToolError(f"Cannot write {shown}: a parent path is not a folder") from None
        except OSError as error:
            raise ToolError(f"Cannot write {shown}: {error.strerror or error}") from None
    return text_result(
        f"Successfully wrote {len(data)} bytes to {shown}",
        {"path": str(spelled), "bytes": len(data)},
    )


WRITE_TOOL = ToolSpec(
    name="write",
    description=(
        "Write content to a file. Creates the file if it doesn't exist, overwrites it if it does. "
        "Automatically creates parent directories."
    ),
    parameters=WRITE_PARAMETERS,
    handler=_write,
)
