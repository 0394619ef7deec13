"""The JSON-RPC errors the agent answers with: the message itself names the problem and the fix
(an editor shows ``message``; ``data`` repeats it for one that shows only data)."""

from __future__ import annotations

from acp import RequestError

__all__ = ["failed", "invalid"]


def invalid(message: str) -> RequestError:
    """``Invalid params`` (-32602): the request asked for something that cannot be."""
    return RequestError(-32602, message, {"message": message})


def failed(message: str) -> RequestError:
    """``Internal error`` (-32603): what the agent tried failed, and why."""
    return RequestError(-32603, message, {"message": message})
