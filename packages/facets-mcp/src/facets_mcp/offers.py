"""What the MCP feature adds to the harness beside the servers' own tools.

* **Instructions**: the system section ``mcp-instructions`` (:data:`INSTRUCTIONS_KEY`) holds the
  ``instructions`` of every ready server that sent some (Claude Code passes them to the model
  the same way); a ``system_instructions`` hook sets it before each generation and removes it
  when no server has any. ``/context`` lists it with its size like every section. Each server's
  text is cut at :data:`MAX_INSTRUCTIONS` characters.
* **Resources**: the tools ``mcp__list_resources`` (every ready server's resources and resource
  templates) and ``mcp__read_resource`` (``server`` and ``uri``: a listed resource, or a
  template's URI filled in), registered once a server offers resources. Their names start with
  ``mcp__`` like every MCP tool, so the approval feature's rules for ``mcp__*`` apply.
* **Elicitation**: :func:`elicitation_asker` answers a server's ``elicitation/create`` during
  a call with a keyed instance of :data:`~.contract.McpElicitations` (the TUI asks the user,
  ``-p``/``--json`` decline); the answer is a memo on the tool's slot (``elicitation-<n>``, the
  n-th of the call) before the server gets it, so it is recorded once and never asked again.
* **Progress**: :class:`ProgressSlot` puts a call's progress notifications in its tool slot's
  ``progress`` (the tool card shows it), newest first, one commit at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio

from chord import Context, Dialogs, MutableReplicatedState, ServiceSpawner, dialog_key
from pico3 import (
    MISSING,
    MODEL_CALL_KIND,
    Harness,
    ToolApi,
    ToolDeclaration,
    ToolResult,
    define_section,
)

from .contract import ElicitationRequest, ElicitationResponse, check_elicitation

if TYPE_CHECKING:
    from .client import ServerRunner

__all__ = [
    "INSTRUCTIONS_KEY",
    "LIST_RESOURCES",
    "MAX_INSTRUCTIONS",
    "READ_RESOURCE",
    "ProgressSlot",
    "elicitation_asker",
    "instructions_registration",
    "render_instructions",
    "resource_tools",
]

INSTRUCTIONS_KEY = "mcp-instructions"
MAX_INSTRUCTIONS = 8000
LIST_RESOURCES = "mcp__list_resources"
READ_RESOURCE = "mcp__read_resource"

Runners = Callable[[], Mapping[str, "ServerRunner"]]


def render_instructions(value: Any) -> str:
    """The section's text for ``{"servers": [{"name", "instructions"}]}``."""
    servers = value.get("servers") if isinstance(value, dict) else None
    parts = [
        "Instructions from the connected MCP servers (each server's tools are named "
        "mcp__<server>__<tool>):"
    ]
    for server in servers if isinstance(servers, list) else []:
        if isinstance(server, dict):
            parts.append(f"## MCP server {server.get('name')}\n{server.get('instructions')}")
    return "\n\n".join(parts)


def _current(runners: Runners) -> list[dict[str, str]]:
    found: list[dict[str, str]] = []
    for name, runner in runners().items():
        text = runner.instructions
        if text:
            if len(text) > MAX_INSTRUCTIONS:
                text = text[:MAX_INSTRUCTIONS] + f"\n[cut at {MAX_INSTRUCTIONS} characters]"
            found.append({"name": name, "instructions": text})
    return found


def instructions_registration(runners: Runners) -> Callable[[Harness], Callable[[], None]]:
    """The harness registration of the section and its hook (for ``add_registration``)."""
    section = define_section(INSTRUCTIONS_KEY, render_instructions)

    async def instruct(payload: dict[str, Any], api: Any, ctx: Context) -> None:
        del api, ctx
        draft = payload["sections"]
        servers = _current(runners)
        if servers:
            draft.set(section, {"servers": servers})
        elif section in draft:
            draft.delete(section)

    def install(harness: Harness) -> Callable[[], None]:
        removers: list[Callable[[], None]] = []

        def uninstall() -> None:
            for remove in reversed(removers):
                remove()
            removers.clear()

        try:
            removers.append(harness.register_section(section))
            ns = harness.namespace("mcp-instructions")
            removers.append(ns.unregister)
            removers.append(harness.hooks(ns, MODEL_CALL_KIND, {"system_instructions": instruct}))
        except BaseException:
            uninstall()
            raise
        return uninstall

    return install


def _listing(runners: Runners, only: str | None) -> str:
    lines: list[str] = []
    for name, runner in runners().items():
        if only is not None and name != only:
            continue
        shown: dict[str, Any] = dict(runner.snapshot())
        if shown["state"] != "ready":
            continue
        for resource in shown["resources"]:
            note = f" — {resource['description']}" if resource.get("description") else ""
            mime = f" ({resource['mimeType']})" if resource.get("mimeType") else ""
            lines.append(f"{name}: {resource['name']} <{resource['uri']}>{mime}{note}")
        for template in shown.get("templates") or []:
            note = f" — {template['description']}" if template.get("description") else ""
            lines.append(
                f"{name}: {template['name']} <{template['uriTemplate']}> (a template: fill in "
                f"the {{placeholders}} and read that URI){note}"
            )
    if only is not None and only not in runners():
        return f"No MCP server named {only!r} (configured: {', '.join(runners()) or 'none'})."
    return "\n".join(lines) or "No MCP server that is ready offers resources."


def resource_tools(runners: Runners) -> list[ToolDeclaration]:
    """``mcp__list_resources`` and ``mcp__read_resource``."""

    async def list_all(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        del api, ctx
        only = args.get("server")
        return ToolResult.text(_listing(runners, only if isinstance(only, str) else None))

    async def read(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        del api, ctx
        from .client import McpCallError

        server, uri = str(args["server"]), str(args["uri"])
        runner = runners().get(server)
        if runner is None:
            known = ", ".join(runners()) or "none"
            return ToolResult.text(
                f"No MCP server named {server!r} (configured: {known}).", is_error=True
            )
        try:
            content = await runner.read_resource(uri)
        except McpCallError as exc:
            return ToolResult.text(str(exc), is_error=True)
        return ToolResult(content=content, details={"server": server, "uri": uri})

    return [
        ToolDeclaration(
            name=LIST_RESOURCES,
            description=(
                "List the resources (and resource templates) the MCP servers offer: files, "
                "records, documents the user connected. Read one with mcp__read_resource."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "server": {"type": "string", "description": "Only this server's resources."}
                },
            },
            execute=list_all,
        ),
        ToolDeclaration(
            name=READ_RESOURCE,
            description=(
                "Read one resource of an MCP server by its URI (from mcp__list_resources, or a "
                "resource template with its placeholders filled in)."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "server": {"type": "string", "description": "The MCP server's name."},
                    "uri": {"type": "string", "description": "The resource's URI."},
                },
                "required": ["server", "uri"],
            },
            execute=read,
        ),
    ]


class ProgressSlot:
    """A call's progress lines into its slot's ``progress``: :meth:`heard` keeps the newest,
    :meth:`run` writes it (one commit at a time; lines heard meanwhile collapse to the newest)."""

    def __init__(self, api: ToolApi) -> None:
        self._api = api
        self._latest: str | None = None
        self._changed = anyio.Event()

    def heard(self, line: str) -> None:
        self._latest = line
        self._changed.set()

    async def run(self, ctx: Context) -> None:
        while True:
            await self._changed.wait()
            self._changed = anyio.Event()
            line = self._latest
            if line is None:
                continue

            def update(free: dict[str, Any], line: str = line) -> None:
                free["progress"] = line[:200]

            await self._api.progress(update, ctx)


def elicitation_asker(
    server: str,
    api: ToolApi,
    ctx: Context,
    dialogs: ServiceSpawner[Any],
    state: Callable[[dict[str, Any]], MutableReplicatedState],
) -> Callable[[dict[str, Any]], Any]:
    """The ``on_elicit`` of one call of ``server`` (see the module docstring): each
    elicitation of the call is a chord keyed dialog (:class:`chord.Dialogs`, answered with
    ``submit``, checked by :func:`~.contract.check_elicitation`) under
    ``"<conversationId>:<callId>:<n>"`` (:func:`chord.dialog_key`)."""
    count = [0]
    asker: Dialogs[ElicitationRequest, ElicitationResponse] = Dialogs(
        dialogs, state, check_elicitation
    )

    async def ask(raw: dict[str, Any]) -> dict[str, Any]:
        count[0] += 1
        name = f"elicitation-{count[0]}"
        found = await api.memo(name, ctx)  # answered before a crash?
        if found is not MISSING:
            return found
        request: ElicitationRequest = {"server": server, **raw}  # type: ignore[typeddict-item]
        key = dialog_key(api.conversation_id, api.call_id, count[0])
        answer = await asker.ask(key, request, ctx)
        return await api.memo(name, dict(answer), ctx)  # first writer wins

    return ask
