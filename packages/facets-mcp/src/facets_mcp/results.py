"""MCP results as the harness's tool-result pieces.

:func:`map_result` maps a ``tools/call`` result: text blocks, images (``{"type": "image",
"data", "mimeType"}``), embedded text resources as text, other resources, audio and resource
links as a short text note, and ``structuredContent`` in ``details`` (and as JSON text when the
server sent no content). :func:`map_contents` maps a ``resources/read`` result the same way.
:func:`tool_declarations` goes the other way: a server's listed tools as the harness's tool
declarations (a session's servers and a subagent's own both register them so).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pico3 import ToolDeclaration

from .contract import tool_name

if TYPE_CHECKING:
    from mcp import types

__all__ = ["map_contents", "map_result", "progress_text", "resource_text", "tool_declarations"]


def tool_declarations(
    server: str, tools: list[dict[str, Any]], execute: Callable[[str], Any]
) -> tuple[list[ToolDeclaration], list[str]]:
    """Server ``server``'s listed ``tools`` (``tool``, ``description``, ``schema``) as tool
    declarations named ``mcp__SERVER__TOOL``, each run by ``execute(tool)``, and a line per tool
    left out: a name that clashes once made a tool name, or a schema the harness refuses.
    Never replayed after a crash (``replay="unsafe"``): a server's effects are unknown."""
    skipped: list[str] = []
    declarations: list[ToolDeclaration] = []
    for tool in tools:
        name = tool_name(server, tool["tool"])
        if any(d.name == name for d in declarations):
            skipped.append(f"tool {tool['tool']!r} skipped: its name clashes as {name}")
            continue
        try:
            declarations.append(
                ToolDeclaration(
                    name=name,
                    description=tool["description"] or f"{tool['tool']} (MCP server {server})",
                    parameters=tool["schema"],
                    execute=execute(tool["tool"]),
                    replay="unsafe",
                )
            )
        except (ValueError, TypeError) as exc:
            skipped.append(f"tool {tool['tool']!r} skipped: {exc}")
    return declarations, skipped


def resource_text(
    resource: types.TextResourceContents | types.BlobResourceContents,
) -> dict[str, Any]:
    from mcp import types

    uri = str(resource.uri)
    if isinstance(resource, types.TextResourceContents):
        return {"type": "text", "text": f"[resource {uri}]\n{resource.text}"}
    mime = resource.mimeType or "application/octet-stream"
    if mime.startswith("image/"):
        return {"type": "image", "data": resource.blob, "mimeType": mime}
    size = len(resource.blob) * 3 // 4
    return {"type": "text", "text": f"[resource {uri}: {mime}, about {size} bytes, not shown]"}


def map_contents(result: types.ReadResourceResult) -> list[dict[str, Any]]:
    """The pieces of a ``resources/read`` result (one per content; a note when empty)."""
    content = [resource_text(item) for item in result.contents]
    return content or [{"type": "text", "text": "(the resource is empty)"}]


def map_result(result: types.CallToolResult, *, server: str, tool: str) -> dict[str, Any]:
    """``{"content", "is_error", "details"}`` for a ``ToolResult``."""
    from mcp import types

    content: list[dict[str, Any]] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            content.append({"type": "text", "text": block.text})
        elif isinstance(block, types.ImageContent):
            content.append({"type": "image", "data": block.data, "mimeType": block.mimeType})
        elif isinstance(block, types.AudioContent):
            size = len(block.data) * 3 // 4
            content.append(
                {
                    "type": "text",
                    "text": f"[audio: {block.mimeType}, about {size} bytes, not shown]",
                }
            )
        elif isinstance(block, types.ResourceLink):
            content.append({"type": "text", "text": f"[resource link: {block.name} <{block.uri}>]"})
        elif isinstance(block, types.EmbeddedResource):  # pyright: ignore[reportUnnecessaryIsInstance]
            content.append(resource_text(block.resource))
    details: dict[str, Any] = {"server": server, "tool": tool}
    structured = result.structuredContent
    if structured is not None:
        details["structuredContent"] = structured
        if not content:
            content.append({"type": "text", "text": json.dumps(structured, ensure_ascii=False)})
    if not content:
        content.append({"type": "text", "text": "(no output)"})
    return {"content": content, "is_error": bool(result.isError), "details": details}


def progress_text(done: float, total: float | None, message: str | None) -> str:
    """``3/10 · message`` (``3`` without a total; numbers without a needless ``.0``)."""
    text = f"{done:g}/{total:g}" if total else f"{done:g}"
    return f"{text} · {message}" if message else text
