"""What every side of the MCP feature agrees on: one service id, JSON shapes, tool names.

The session worker connects to the configured MCP servers and offers each server's tools to the
model as ``mcp__<server>__<tool>`` (:func:`tool_name`). It provides one singleton instance of
:data:`McpServers` whose replicated ``state`` is an :class:`McpState`: every configured server with
its state (``starting``, ``ready``, ``failed`` with the tail of its stderr, ``stopped``), its
tools, resources and prompts, and the configuration problems found. Presentations (the TUI's
``/mcp`` panel) render that state and may ask for a restart.

This module imports no host code (no Textual, no harness, no MCP SDK).
"""

from __future__ import annotations

import re
from typing import Any, Literal, NotRequired, Protocol, TypedDict

from chord import Context, RemoteServiceError, ReplicatedState, define_service

__all__ = [
    "ELICITATION_ACTIONS",
    "SERVER_STATES",
    "ElicitationDialog",
    "ElicitationRequest",
    "ElicitationResponse",
    "McpElicitations",
    "McpHookTools",
    "McpPrompt",
    "McpResource",
    "McpSampling",
    "McpServer",
    "McpServers",
    "McpServersApi",
    "McpState",
    "McpTemplate",
    "McpTool",
    "SamplingDialog",
    "SamplingRequest",
    "ServerState",
    "check_elicitation",
    "tool_name",
]

ServerState = Literal["starting", "ready", "failed", "stopped"]
SERVER_STATES: tuple[ServerState, ...] = ("starting", "ready", "failed", "stopped")


class McpTool(TypedDict):
    """One tool of a server: the model-facing ``name`` (``mcp__server__tool``) and the
    server's own ``tool`` name."""

    name: str
    tool: str
    description: str


class McpResource(TypedDict):
    uri: str
    name: str
    description: NotRequired[str]
    mimeType: NotRequired[str]


class McpTemplate(TypedDict):
    """A resource template (RFC 6570 ``uriTemplate``): read with the URI filled in."""

    uriTemplate: str
    name: str
    description: NotRequired[str]


class McpPrompt(TypedDict):
    name: str
    description: NotRequired[str]
    arguments: list[str]


class McpServer(TypedDict):
    """One configured server as the panel shows it."""

    name: str
    transport: Literal["stdio", "http", "sse"]
    source: str
    """The configuration file that declared it."""
    state: ServerState
    error: NotRequired[str]
    """Why it failed (``failed``), or why a tool was skipped; while ``starting``, what is wrong
    so far (it wrote something else than JSON-RPC on stdout) or why the last start failed."""
    stderr: NotRequired[str]
    """The tail of the server's stderr (stdio servers)."""
    stderrGist: NotRequired[str]
    """Of ``stderr``, the lines that say what went wrong (npm's ``404 Not Found`` line rather
    than its closing ``A complete log …``): at most 3 lines and 300 characters, joined by
    `` | ``; with ``stderr``."""
    tools: list[McpTool]
    resources: list[McpResource]
    prompts: list[McpPrompt]
    templates: NotRequired[list[McpTemplate]]
    notes: NotRequired[list[str]]
    """What is not offered, and why (a tool that requires task-augmented execution)."""
    restarts: int
    """How many times it was started again after dying."""
    retryInSeconds: NotRequired[float]
    """When ``failed``: the backoff before the next start."""
    loginUrl: NotRequired[str]
    """While an OAuth login (``/mcp login``) waits for the browser: the URL to open."""
    gaveUpAfter: NotRequired[int]
    """When ``failed`` and not tried again: after this many failed starts in a row (``restart``
    tries again)."""
    sandboxed: NotRequired[bool]
    """A stdio server configured to run in the OS sandbox (``"sandbox": true``)."""


class McpState(TypedDict):
    servers: list[McpServer]
    errors: list[str]
    """Configuration problems (a file that is not JSON, a server entry that is not valid)."""
    startupTimeout: NotRequired[float]
    """The configuration's ``startup_timeout``; present once the configuration is read (the
    ``servers`` are then every configured server): ``-p``/``--json`` wait for each to be ready
    or failed, at most this long."""


class McpServersApi(Protocol):
    """The singleton :data:`McpServers` instance."""

    @property
    def state(self) -> ReplicatedState:
        """Follows :class:`McpState`."""
        ...

    async def restart(self, name: str, ctx: Context) -> None:
        """Stop server ``name`` and start it again now (no backoff): a configured server, or a
        running subagent's own (its definition's ``mcpServers``). Raises
        ``service_invalid_value`` for an unknown name, or a subagent's server whose subagent
        is not running (the message says so)."""
        ...

    async def login(self, name: str, ctx: Context) -> str | None:
        """Start an OAuth login for remote server ``name``: the authorization URL to open in a
        browser (the worker's loopback callback receives the redirect; the server's state
        follows), or ``None`` when the server connected without asking for one. Raises
        ``service_invalid_value`` for an unknown or stdio server, or when the server failed
        before asking (the message says why)."""
        ...

    async def get_prompt(
        self, server: str, prompt: str, arguments: dict[str, str], ctx: Context
    ) -> dict[str, Any]:
        """``prompts/get`` of ``prompt`` of ``server``: ``{"messages": [{"role", "text"}]}``,
        or ``{"error": why}`` when the server failed (not ready, an unknown prompt, a missing
        argument); raises ``service_invalid_value`` for an unknown server."""
        ...


McpServers = define_service("mcp.servers", McpServersApi)
"""Provided by the session facet; the TUI observes and calls it."""

McpHookTools = define_service("mcp.hook-tools", local=True)
"""The session's MCP servers' tools, for the hooks feature's ``"type": "mcp_tool"`` hooks: one
local keyed instance (key ``"session"``) while the session facet is active, whose
``async call(server, tool, arguments, seconds) -> {"text": ...} | {"error": why}`` (and
``"timedOut": true`` when ``seconds`` passed) calls
``tool`` of ``server`` (a server the session already runs, never a new one) and answers its
text, or why it could not (not configured, not connected, unknown tool, the tool's own error,
a timeout after ``seconds``). The hooks feature observes it with ``optional=True`` under the
same id, so it works without this feature (docs/design/chord.md)."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """The model-facing name of ``tool`` of ``server``: ``mcp__<server>__<tool>``, every
    character a provider refuses replaced by ``_``, at most 64 characters."""
    return _UNSAFE.sub("_", f"mcp__{server}__{tool}")[:64]


# -- elicitation: a server asks the user, during a tool call -------------------------------------
ELICITATION_ACTIONS = ("accept", "decline", "cancel")


class ElicitationRequest(TypedDict):
    """What a server asks (``elicitation/create``): ``form`` mode with a flat JSON Schema of
    strings, numbers, integers, booleans and enums; or ``url`` mode (open a page)."""

    server: str
    message: str
    mode: Literal["form", "url"]
    schema: NotRequired[dict[str, Any]]
    url: NotRequired[str]


class ElicitationResponse(TypedDict):
    action: Literal["accept", "decline", "cancel"]
    content: NotRequired[dict[str, Any]]
    """With ``accept`` in form mode: a value per property of the schema."""


class ElicitationDialog(Protocol):
    """One pending elicitation (a keyed instance of :data:`McpElicitations`)."""

    @property
    def request(self) -> ReplicatedState:
        """Follows :class:`ElicitationRequest`; set once when the dialog opens."""
        ...

    async def submit(self, response: ElicitationResponse, ctx: Context) -> None:
        """Answer it; raises ``service_invalid_value`` for a response that does not fit."""
        ...


McpElicitations = define_service("mcp.elicitation", ElicitationDialog)
"""Keyed ``"<conversationId>:<callId>:<n>"``; provided by the session facet while a tool call
waits for the answer. The TUI asks the user; ``-p``/``--json`` decline."""


def _bad(why: str) -> RemoteServiceError:
    return RemoteServiceError("service_invalid_value", f"elicitation response: {why}")


def check_elicitation(response: Any, request: ElicitationRequest) -> ElicitationResponse:
    """A checked copy of ``response`` for ``request``, else ``service_invalid_value`` naming the
    field: the action is one of :data:`ELICITATION_ACTIONS`; an accepted form answers every
    required property with a value of its type (an enum's one of its values)."""
    if not isinstance(response, dict):
        raise _bad("must be an object")
    action = response.get("action")  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
    if action not in ELICITATION_ACTIONS:
        raise _bad(f"action must be one of {', '.join(ELICITATION_ACTIONS)}, got {action!r}")
    if action != "accept" or request["mode"] != "form":
        return {"action": action}  # pyright: ignore[reportReturnType]
    content: Any = response.get("content") or {}  # pyright: ignore[reportUnknownMemberType]
    if not isinstance(content, dict):
        raise _bad("content must be an object")
    schema = request.get("schema") or {}
    properties: dict[str, Any] = schema.get("properties") or {}
    checked: dict[str, Any] = {}
    for name, value in content.items():  # pyright: ignore[reportUnknownVariableType]
        spec = properties.get(str(name))  # pyright: ignore[reportUnknownArgumentType]
        if not isinstance(spec, dict):
            raise _bad(f"{name!r} is not a field of the form")
        checked[str(name)] = _field(str(name), value, spec)  # pyright: ignore[reportUnknownArgumentType]
    for name in schema.get("required") or []:
        if name not in checked:
            raise _bad(f"the required field {name!r} is missing")
    return {"action": "accept", "content": checked}


def _field(name: str, value: Any, spec: dict[str, Any]) -> Any:
    kind = spec.get("type")
    ok = {
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
    }.get(str(kind), False)
    if not ok:
        raise _bad(f"{name!r} must be a {kind}, got {value!r}")
    if "enum" in spec and value not in spec["enum"]:
        raise _bad(f"{name!r} must be one of {spec['enum']!r}, got {value!r}")
    return value


# -- sampling: a server asks to use the session's model -------------------------------------------
class SamplingRequest(TypedDict):
    """What a server asks the model (``sampling/createMessage``), as the user approves it."""

    server: str
    messages: list[dict[str, str]]
    """``{"role": "user" | "assistant", "text"}`` each (other content as a short note)."""
    systemPrompt: NotRequired[str]
    maxTokens: int


class SamplingDialog(Protocol):
    """One pending sampling approval (a keyed instance of :data:`McpSampling`)."""

    @property
    def request(self) -> ReplicatedState:
        """Follows :class:`SamplingRequest`."""
        ...

    async def decide(self, decision: dict[str, Any], ctx: Context) -> None:
        """``{"decision": "allow" | "deny"}``; anything else is ``service_invalid_value``."""
        ...


McpSampling = define_service("mcp.sampling", SamplingDialog)
"""Keyed ``"<server>:<n>"``; provided by the session facet while a server's sampling request
waits for approval. The TUI shows the request; ``-p``/``--json`` follow ``--approve``."""
