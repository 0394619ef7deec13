"""What the client answers when a server asks (the ``ClientSession`` callbacks): its roots
(the project folder), an elicitation (through the running tool call that caused it) and a
sampling request (through the session's ``sampler``: approval, then the model).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

__all__ = ["elicitation_callback", "roots_callback", "sampling_callback"]

Asker = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
Sampler = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


def roots_callback(root: str | None) -> Any:
    """``roots/list``: the project folder (none without one)."""

    async def list_roots(context: Any) -> Any:
        from mcp import types
        from pydantic import FileUrl

        del context
        if not root:
            return types.ListRootsResult(roots=[])
        path = Path(root)
        return types.ListRootsResult(
            roots=[types.Root(uri=FileUrl(path.as_uri()), name=path.name or str(path))]
        )

    return list_roots


def elicitation_callback(askers: list[Asker]) -> Any:
    """``elicitation/create``: asked through the newest running call's asker (its tool call
    records the answer); outside a call it is refused."""

    async def elicit(context: Any, params: Any) -> Any:
        from mcp import types

        del context
        if not askers:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message="this client answers elicitations only during a tool call",
            )
        request: dict[str, Any] = {"message": params.message, "mode": params.mode}
        if isinstance(params, types.ElicitRequestURLParams):
            request["url"] = params.url
        else:
            request["schema"] = params.requestedSchema
        answer = await askers[-1](request)
        return types.ElicitResult(action=answer["action"], content=answer.get("content"))

    return elicit


def sampling_callback(server: str, sampler: Sampler | None) -> Any:
    """``sampling/createMessage`` through ``sampler`` (``None``: sampling is not offered); a
    denial or a failure is an error answer naming it."""
    if sampler is None:
        return None

    async def sample(context: Any, params: Any) -> Any:
        from mcp import types

        del context
        messages: list[dict[str, str]] = []
        for message in params.messages:
            blocks = message.content if isinstance(message.content, list) else [message.content]
            text = "\n".join(
                b.text if isinstance(b, types.TextContent) else f"[{b.type} content, not sent]"
                for b in blocks
            )
            messages.append({"role": message.role, "text": text})
        request: dict[str, Any] = {"messages": messages, "maxTokens": params.maxTokens}
        if params.systemPrompt:
            request["systemPrompt"] = params.systemPrompt
        answer = await sampler(server, request)
        if "error" in answer:
            return types.ErrorData(code=types.INVALID_REQUEST, message=answer["error"])
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=answer["text"]),
            model=answer["model"],
            stopReason="endTurn",
        )

    return sample
