"""Sampling: a server asks to use the session's model (``sampling/createMessage``).

:func:`session_sampler` is the ``sampler`` every :class:`~.client.ServerRunner` gets. Each
request opens a keyed instance of :data:`~.contract.McpSampling` (a chord keyed dialog,
:class:`chord.Dialogs`, answered with ``decide``) whose replicated ``request``
shows what the server sends (its messages, its system prompt, the token limit); nothing reaches
the model until a presentation decides ``allow`` (the TUI asks the user; ``-p``/``--json``
follow ``--approve``). Allowed, the request goes to the root conversation's model, with no
tools and no conversation context (the server sees only the answer's text). Denied, or when
the model fails, the server gets an error answer naming why.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from chord import BACKGROUND, Dialogs, MutableReplicatedState, RemoteServiceError, ServiceSpawner
from pico3 import HarnessServiceApi, Models
from pico3.models import (
    AssistantMessage,
    DoneEvent,
    ErrorEvent,
    Request,
    TextContent,
    UserMessage,
)

from .contract import SamplingRequest

__all__ = ["check_sampling_decision", "session_sampler"]


def check_sampling_decision(decision: Any, request: SamplingRequest) -> str:
    """``"allow"`` or ``"deny"`` from a presentation's ``{"decision": ...}``; anything else is
    ``service_invalid_value``."""
    del request
    value = decision.get("decision") if isinstance(decision, dict) else None  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
    if value not in ("allow", "deny"):
        raise RemoteServiceError(
            "service_invalid_value",
            f'sampling decision: expected {{"decision": "allow" | "deny"}}, got {decision!r}',
        )
    return str(value)  # pyright: ignore[reportUnknownArgumentType]


async def _generate(harness: HarnessServiceApi, request: SamplingRequest) -> dict[str, Any]:
    models = harness.handle.services.get("models")
    root = await harness.harness.root(BACKGROUND)
    config = await root.config(BACKGROUND)
    resolved = models.resolve(config.get("model")) if isinstance(models, Models) else None
    if resolved is None:
        return {"error": "the session has no model to sample with"}
    messages: list[Any] = [
        UserMessage(content=m["text"])
        if m["role"] == "user"
        else AssistantMessage(content=[TextContent(text=m["text"])])
        for m in request["messages"]
    ]
    prompt = request.get("systemPrompt")
    system = [prompt] if prompt else []
    sent = Request(
        model=resolved.info.id, messages=messages, system=system, max_tokens=request["maxTokens"]
    )
    async for event in resolved.provider.stream(sent, BACKGROUND):
        if isinstance(event, ErrorEvent):
            why = event.error.error_message or event.reason
            return {"error": f"the model failed: {why}"}
        if isinstance(event, DoneEvent):
            text = "".join(b.text for b in event.message.content if isinstance(b, TextContent))
            return {"text": text, "model": f"{resolved.provider.name}/{resolved.info.id}"}
    return {"error": "the model's answer ended without a result"}


def session_sampler(
    harness: HarnessServiceApi,
    dialogs: ServiceSpawner[Any],
    states: Callable[[dict[str, Any]], MutableReplicatedState],
) -> Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]:
    """The sampler of one facet activation (see the module docstring)."""
    count = [0]
    approvals: Dialogs[SamplingRequest, str] = Dialogs(
        dialogs, states, check_sampling_decision, answer="decide"
    )

    async def sample(server: str, raw: dict[str, Any]) -> dict[str, Any]:
        count[0] += 1
        request: SamplingRequest = {"server": server, **raw}  # type: ignore[typeddict-item]
        # no deadline: the request waits for a presentation's decision (-p/--json decide at once)
        decision = await approvals.ask(f"{server}:{count[0]}", request, BACKGROUND)
        if decision != "allow":
            return {"error": f"the user denied MCP server {server!r} the use of the model"}
        try:
            return await _generate(harness, request)
        except Exception as exc:  # a provider that raises: the server hears why
            return {"error": f"the model failed: {type(exc).__name__}: {exc}"}

    return sample
