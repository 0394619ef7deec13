"""The size cap on an HTTP server's messages: an httpx transport that refuses one too large.

:func:`bounded_transport` wraps the real transport of the ``httpx.AsyncClient`` the streamable
HTTP client uses. The answer to a JSON-RPC request (a ``POST``) is checked as it arrives:

* ``application/json``: the body is read up to ``max_bytes``; a larger one is replaced by a
  JSON-RPC error answer for the request's ``id``, naming the server and the cap;
* ``text/event-stream``: each event is counted on its own (events arrive as they come, so
  progress notifications and requests mid-call are not delayed); an event larger than the cap
  ends the stream with that error answer as its last event.

Other requests (the ``GET`` stream of server notifications, ``DELETE``) pass unchanged.

httpx is imported when the first transport is made, not with this module: chord imports every
module of a facet package when it loads it, and a worker without an HTTP server never needs
httpx (tests/app/worker/test_worker_imports.py).
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from .stdio import TOO_LARGE_CODE, too_large_text

if TYPE_CHECKING:
    import httpx

__all__ = ["bounded_transport"]


def _error_answer(request: httpx.Request, text: str) -> bytes | None:
    """A JSON-RPC error answer to ``request`` (``None`` when it is no request with an id)."""
    try:
        sent: Any = json.loads(request.content or b"null")
    except ValueError:
        return None
    if not isinstance(sent, dict) or "id" not in sent:
        return None
    answer = {
        "jsonrpc": "2.0",
        "id": sent["id"],
        "error": {"code": TOO_LARGE_CODE, "message": text},
    }
    return json.dumps(answer).encode()


def bounded_transport(
    max_bytes: int, server: str, inner: httpx.AsyncBaseTransport | None = None
) -> httpx.AsyncBaseTransport:
    """An httpx transport that refuses a server's message over ``max_bytes`` (see the module
    docstring); ``inner`` is the real transport (default ``httpx.AsyncHTTPTransport()``)."""
    return _transport_class()(max_bytes, server, inner)


@functools.cache
def _transport_class() -> Any:
    """The transport class, defined on first use (it subclasses httpx's)."""
    import httpx

    class _EventStream(httpx.AsyncByteStream):
        """An SSE body whose events are at most ``max_bytes`` each."""

        def __init__(self, response: httpx.Response, answer: Any, max_bytes: int) -> None:
            self._response = response
            self._answer = answer
            self._max = max_bytes

        async def __aiter__(self) -> AsyncIterator[bytes]:
            size = 0
            tail = b""
            async for chunk in self._response.aiter_raw():
                # the size of the event in progress: bytes since the last blank line
                joined = tail + chunk
                end = max(joined.rfind(b"\n\n"), joined.rfind(b"\r\n\r\n"))
                size = len(joined) - end - 2 if end >= 0 else size + len(chunk)
                tail = joined[-3:]
                if size > self._max:
                    answer = self._answer(size)
                    if answer is not None:
                        yield b"\n\nevent: message\ndata: " + answer + b"\n\n"
                    return
                yield chunk

        async def aclose(self) -> None:
            await self._response.aclose()

    class BoundedTransport(httpx.AsyncBaseTransport):
        """Refuses a server's message over ``max_bytes`` (see the module docstring)."""

        def __init__(
            self, max_bytes: int, server: str, inner: httpx.AsyncBaseTransport | None = None
        ):
            self._max = max_bytes
            self._server = server
            self._inner = inner if inner is not None else httpx.AsyncHTTPTransport()

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            response = await self._inner.handle_async_request(request)
            if request.method != "POST":
                return response

            def answer(size: int) -> bytes | None:
                return _error_answer(request, too_large_text(self._server, size, self._max))

            kind = response.headers.get("content-type", "").lower()
            if kind.startswith("text/event-stream"):
                return httpx.Response(
                    response.status_code,
                    headers=response.headers,
                    stream=_EventStream(response, answer, self._max),
                    extensions=response.extensions,
                )
            if not kind.startswith("application/json"):
                return response
            body = bytearray()
            refused = 0
            async for chunk in response.aiter_raw():
                body += chunk
                if len(body) > self._max:  # not read further: the connection is dropped
                    refused, body = len(body), bytearray()
                    break
            if refused:
                await response.aclose()
                replaced = answer(refused)
                if replaced is not None:
                    headers = {"content-type": "application/json"}
                    return httpx.Response(200, headers=headers, content=replaced)
            await response.aclose()
            headers = [(k, v) for k, v in response.headers.raw if k.lower() != b"content-length"]
            return httpx.Response(response.status_code, headers=headers, content=bytes(body))

        async def aclose(self) -> None:
            await self._inner.aclose()

    return BoundedTransport
