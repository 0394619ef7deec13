"""The listings of a server (every page): tools, resources, resource templates, prompts."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp import ClientSession, types

from .contract import McpPrompt, McpResource, McpTemplate

__all__ = ["list_prompts", "list_resources", "list_templates", "list_tools", "needs_task"]


async def list_tools(session: ClientSession) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        page = await session.list_tools(cursor)
        tools += page.tools
        cursor = page.nextCursor
        if not cursor:
            return tools


async def list_templates(session: ClientSession) -> list[McpTemplate]:
    found: list[McpTemplate] = []
    cursor: str | None = None
    while True:
        page = await session.list_resource_templates(cursor)
        for t in page.resourceTemplates:
            item: McpTemplate = {"uriTemplate": t.uriTemplate, "name": t.name}
            if t.description:
                item["description"] = t.description
            found.append(item)
        cursor = page.nextCursor
        if not cursor:
            return found


async def list_resources(session: ClientSession) -> list[McpResource]:
    found: list[McpResource] = []
    cursor: str | None = None
    while True:
        page = await session.list_resources(cursor)
        for r in page.resources:
            item: McpResource = {"uri": str(r.uri), "name": r.name}
            if r.description:
                item["description"] = r.description
            if r.mimeType:
                item["mimeType"] = r.mimeType
            found.append(item)
        cursor = page.nextCursor
        if not cursor:
            return found


async def list_prompts(session: ClientSession) -> list[McpPrompt]:
    found: list[McpPrompt] = []
    cursor: str | None = None
    while True:
        page = await session.list_prompts(cursor)
        for p in page.prompts:
            item: McpPrompt = {"name": p.name, "arguments": [a.name for a in p.arguments or []]}
            if p.description:
                item["description"] = p.description
            found.append(item)
        cursor = page.nextCursor
        if not cursor:
            return found


def needs_task(tool: types.Tool) -> bool:
    """Whether ``tool`` must be called task-augmented (``execution.taskSupport: required``)."""
    execution = tool.execution
    return execution is not None and execution.taskSupport == "required"
