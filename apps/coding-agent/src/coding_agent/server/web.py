"""The session in a browser: ``coding-agent serve --web`` and ``coding-agent web`` (docs/server.md#the-web-page).

One listener (``--web tcp://HOST:PORT``) answers two things:

* ``GET /``, ``/app.js``, ``/render.js``, ``/style.css``: the page, from the files shipped in
  this package (``web_static/``; nothing is fetched from anywhere else, and the
  ``Content-Security-Policy`` header lets the page load nothing but its own files and its
  WebSocket);
* ``GET /ws``: a WebSocket. The page's first message is ``{"token", "session"}`` (or
  ``"new": {}``), within 10 s; the token is compared (``hmac.compare_digest``, every token of
  the server's token file) **before anything else is looked at**, exactly like the preface of
  the chord wire's clients (:mod:`.preface`), and a wrong one is answered
  ``{"type": "error", "code": "unauthorized"}`` and closed. Then the session is found (or made),
  its worker started if none runs, and :class:`~.web_bridge.PageBridge` carries the session
  between the worker and the page for as long as the page stays.

The token never travels in a URL the server sees: the page takes it from the URL's fragment
(``#token=…``, which a browser never sends) or asks for it, keeps it in the tab's
``sessionStorage`` and removes it from the address bar. The log names who connected
(``accepted peer=web:… token=NAME``), never the token.

Why the ``websockets`` library: it is the maintained, dependency-free WebSocket implementation
for asyncio (which the server's anyio runs on), its server answers plain HTTP requests too
(``process_request``), which is all the page's files need, and it handles the protocol's
details we would otherwise get wrong (handshake, masking, fragmentation, ping/pong, close codes,
``permessage-deflate``, size limits).
"""

from __future__ import annotations

import hmac
import json
import secrets
import ssl
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus
from importlib import resources
from typing import Any, cast

import anyio
import anyio.abc
from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request as HttpRequest
from websockets.http11 import Response

from chord import BACKGROUND
from coding_agent.server.addresses import is_loopback
from coding_agent.server.preface import PREFACE_TIMEOUT, PrefaceError, Request, parse_request
from coding_agent.server.serve import SessionServer
from coding_agent.server.web_bridge import PageBridge, PageError

__all__ = ["STATIC_FILES", "new_token", "serve_web"]

STATIC_FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/render.js": ("render.js", "text/javascript; charset=utf-8"),
    "/style.css": ("style.css", "text/css; charset=utf-8"),
}
"""The page's files: URL path -> (file in ``web_static/``, content type)."""

_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def new_token() -> str:
    """A fresh random token (``coding-agent web``'s, good for one run)."""
    return secrets.token_urlsafe(32)


def _file(name: str) -> bytes:
    return (resources.files("coding_agent.server") / "web_static" / name).read_bytes()


def _respond(connection: ServerConnection, request: HttpRequest) -> Response | None:
    """``process_request``: the page's files; ``/ws`` goes on to the WebSocket handshake."""
    path = request.path.split("?", 1)[0]
    if path == "/ws":
        return None
    found = STATIC_FILES.get(path)
    if found is None:
        return connection.respond(HTTPStatus.NOT_FOUND, "not found\n")
    body = _file(found[0])
    headers = Headers({**_HEADERS, "Content-Type": found[1], "Content-Length": str(len(body))})
    return Response(200, "OK", headers, body)


def _hello(raw: str | bytes, tokens: Mapping[str, bytes]) -> tuple[str, Request]:
    """The page's first message: the name of its token (checked first), and its request."""
    try:
        hello = json.loads(raw)
    except ValueError:
        hello = None
    if not isinstance(hello, dict):
        raise PrefaceError("bad_preface", 'the first message is {"token", "session"}')
    hello = cast(dict[str, Any], hello)
    token = hello.pop("token", None)
    given = token.encode() if isinstance(token, str) else b""
    found: str | None = None
    for name, known in tokens.items():  # every one compared, in constant time
        if hmac.compare_digest(given, known):
            found = name
    if found is None:
        raise PrefaceError("unauthorized", "wrong or missing token (the server's token)")
    return found, parse_request(json.dumps(hello).encode())


async def serve_web(
    server: SessionServer,
    host: str,
    port: int,
    *,
    tls: ssl.SSLContext | None = None,
    tokens: Callable[[], Mapping[str, bytes] | None] | None = None,
    only_session: str | None = None,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the page and its WebSocket on ``host:port`` until cancelled; ``task_status`` gets
    the bound port. ``tokens()`` gives the tokens in force (default: the server's, so SIGHUP's
    reload applies); ``only_session`` restricts the listener to one session (``coding-agent
    web``)."""

    def tokens_in_force() -> Mapping[str, bytes]:
        found = tokens() if tokens is not None else server.credentials.tokens
        return found or {}

    async def handler(connection: ServerConnection) -> None:
        address = connection.remote_address
        peer = f"web:{address[0]}:{address[1]}" if address else "web"
        try:
            await _page(server, connection, peer, tokens_in_force(), only_session)
        except ConnectionClosed:
            pass
        except Exception as error:  # one page's trouble ends that page only
            server.log("error", f"{type(error).__name__}: {error}", peer=peer)

    listener = await serve(
        handler, host, port, ssl=tls, process_request=_respond, server_header=None,
        open_timeout=PREFACE_TIMEOUT, max_size=1 << 20,
        compression=None if is_loopback(host) else "deflate",  # on loopback it only costs time
    )  # fmt: skip
    try:
        bound = cast(int, next(iter(listener.sockets)).getsockname()[1])
        shown = f"[{host}]" if ":" in host else host
        server.log("listening", address=f"{'https' if tls else 'http'}://{shown}:{bound}/")
        task_status.started(bound)
        await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True):
            listener.close()  # every page's connection too; their handlers end with them
            with anyio.move_on_after(10):
                await listener.wait_closed()


async def _page(
    server: SessionServer,
    connection: ServerConnection,
    peer: str,
    tokens: Mapping[str, bytes],
    only_session: str | None,
) -> None:
    name: str | None = None
    try:
        with anyio.fail_after(PREFACE_TIMEOUT):
            raw = await connection.recv()
        name, request = _hello(raw, tokens)
        if only_session is not None and request.session != only_session:
            raise PrefaceError("not_found", f"this page serves session {only_session} only")
        session = await server._session_for(request)  # pyright: ignore[reportPrivateUsage]
    except TimeoutError:
        server.log("refused", f"no hello within {PREFACE_TIMEOUT:g} s", peer=peer,
                   reason="preface_timeout")  # fmt: skip
        await connection.close(4408, "no hello in time")
        return
    except PrefaceError as error:
        server.log("refused", error.message, peer=peer, reason=error.code, token=name)
        await connection.send(json.dumps({"type": "error", "code": error.code,
                                          "message": error.message}))  # fmt: skip
        await connection.close(4401 if error.code == "unauthorized" else 4404, error.code)
        return
    lock = anyio.Lock()

    async def send(text: str | bytes) -> None:
        async with lock:  # one message at a time, whole
            await connection.send(text, text=True)

    bridge = PageBridge(lambda: server._dial(session), send)  # pyright: ignore[reportPrivateUsage]
    welcome = {"type": "welcome", "session": session.id, "cwd": str(session.cwd),
               "model": session.model}  # fmt: skip
    await send(json.dumps(welcome))
    server.log("accepted", peer=peer, token=name, session=session.id)
    async with anyio.create_task_group() as group:
        by_token = server._by_token  # pyright: ignore[reportPrivateUsage]
        if name is not None:  # a revoked token (SIGHUP) closes its pages too
            by_token.setdefault(name, set()).add(group.cancel_scope)
        try:
            group.start_soon(bridge.run)
            async for raw in connection:
                group.start_soon(_answer, bridge, raw, send)
        except ConnectionClosed:
            pass
        finally:
            if name is not None:
                by_token.get(name, set()).discard(group.cancel_scope)
            group.cancel_scope.cancel()


async def _answer(
    bridge: PageBridge, raw: str | bytes, send: Callable[[str], Awaitable[None]]
) -> None:
    """Do one request of the page and send its reply (an error names the problem)."""
    try:
        request = json.loads(raw)
    except ValueError:
        request = None
    if not isinstance(request, dict):
        return await send(json.dumps({"type": "reply", "id": None, "ok": False,
                                      "error": {"code": "invalid_request",
                                                "message": "a request is a JSON object"}}))  # fmt: skip
    request = cast(dict[str, Any], request)
    reply: dict[str, Any] = {"type": "reply", "id": request.get("id")}
    try:
        reply["result"] = await bridge.handle(request, BACKGROUND)
        reply["ok"] = True
    except PageError as error:
        reply.update(ok=False, error={"code": error.code, "message": str(error)})
    except Exception as error:  # the worker refused (busy, gone): its code and message
        code = getattr(error, "code", None)
        reply.update(ok=False, error={"code": code if isinstance(code, str) else "failed",
                                      "message": str(error) or type(error).__name__})  # fmt: skip
    try:
        await send(json.dumps(reply))
    except ConnectionClosed:
        pass
