"""OAuth 2.1 for remote MCP servers, through the MCP SDK's client auth, as Claude Code does it.

No configuration: an ``http`` or ``sse`` server that answers ``401`` *needs login*. The runner
shows ``needs login: /mcp login NAME`` and waits (no retry loop). ``/mcp login NAME`` (the TUI)
runs the SDK's :class:`~mcp.client.auth.OAuthClientProvider` flow on a new connection: protected
resource and authorization server metadata discovery, dynamic client registration, PKCE. The
authorization URL it produces is handed to the TUI (which prints it and opens a browser); the
browser's redirect lands on a loopback callback server this module runs on ``127.0.0.1`` (a free
port, ``/callback``); the code is exchanged and the connection goes on with the tokens.

Tokens, the registered client and the discovered metadata are kept in one file per server,
``<agent state>/mcp-auth/<name>-<url hash>.json``, mode 0600 in a 0700 folder (:class:`TokenFile`).
The expiry is stored as a time, so a restarted worker knows an expired token and refreshes it
(with the stored token endpoint) before the first request rather than meeting a 401. A refresh
that is refused falls back to *needs login*. Headless runs never open a login: they report the
server with the same one line.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import anyio
from anyio.abc import SocketAttribute

if TYPE_CHECKING:
    from anyio.abc import SocketListener
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

__all__ = [
    "LOGIN_TIMEOUT",
    "LoginFailed",
    "LoginFlow",
    "LoginNeeded",
    "TokenFile",
    "login_problem",
    "oauth_provider",
    "token_path",
]

LOGIN_TIMEOUT = 300.0
"""Seconds the browser has to come back to the callback after the URL was shown."""
_REQUEST_LIMIT = 16 * 1024


class LoginNeeded(Exception):
    """The server wants OAuth and no usable token is stored; the message is the one line shown."""

    def __init__(self, server: str) -> None:
        super().__init__(f"needs login: /mcp login {server} (in the TUI)")


class LoginFailed(Exception):
    """A login did not complete (refused, timed out, the callback carried an error)."""


def login_problem(exc: BaseException, server: str, *, logging_in: bool) -> str | None:
    """The one line to show when ``exc`` (or one it groups, wraps or follows) is about OAuth:
    *needs login* for :class:`LoginNeeded` or an HTTP ``401``; *login failed* for
    :class:`LoginFailed`, or (``logging_in``) an error of the SDK's flow. ``None`` otherwise:
    the connection failed for another reason and is retried as usual."""
    import httpx
    from mcp.client.auth import OAuthFlowError

    found: list[BaseException] = []
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        found.append(item)
        if isinstance(item, BaseExceptionGroup):
            todo.extend(item.exceptions)
        todo.extend(x for x in (item.__cause__, item.__context__) if x is not None)
    again = f"; /mcp login {server} to try again"
    for item in found:
        if isinstance(item, LoginFailed):
            return f"login failed: {item}{again}"
    for item in found:
        if isinstance(item, LoginNeeded):
            return str(item)
        if isinstance(item, httpx.HTTPStatusError) and item.response.status_code == 401:
            return str(LoginNeeded(server))
    for item in found:
        if logging_in and isinstance(item, OAuthFlowError):
            return f"login failed: {item}{again}"
    return None


def token_path(folder: str | os.PathLike[str], server: str, url: str) -> Path:
    """The token file of ``server`` at ``url`` under the agent's state ``folder`` (the URL's
    hash in the name: a server renamed to another URL does not get the old tokens)."""
    digest = hashlib.sha256(url.encode()).hexdigest()[:12]
    return Path(folder) / "mcp-auth" / f"{server}-{digest}.json"


class TokenFile:
    """The SDK's ``TokenStorage`` over one JSON file, written 0600 (atomically, by rename);
    ``path=None`` keeps everything in memory (no state folder known)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._data: dict[str, Any] | None = None
        self._seen: tuple[int, int] | None = None
        self.provider: OAuthClientProvider | None = None
        """Set by :func:`oauth_provider`: its discovered metadata is saved with the tokens."""

    def _stamp(self) -> tuple[int, int] | None:
        """The file's identity: every save replaces it (a new inode)."""
        try:
            found = self.path.stat() if self.path is not None else None
        except OSError:
            return None
        return None if found is None else (found.st_ino, found.st_mtime_ns)

    def _load(self) -> dict[str, Any]:
        """The file's content, read again when another process replaced it since."""
        if self._data is not None and self.path is not None and self._stamp() != self._seen:
            self._data = None
        if self._data is None:
            self._data = {}
            self._seen = self._stamp()
            if self.path is not None:
                try:
                    found = json.loads(self.path.read_text(encoding="utf-8"))
                    if isinstance(found, dict):
                        self._data = found  # pyright: ignore[reportUnknownVariableType]
                except (OSError, ValueError):
                    pass  # missing or damaged: a login writes it again
        return self._data  # pyright: ignore[reportReturnType]

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.path.parent, 0o700)
        # a name of its own: another session's worker may write the same server's file
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.{id(self)}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_EXCL, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, json.dumps(self._load(), indent=1).encode())
        finally:
            os.close(fd)
        os.replace(temporary, self.path)
        self._seen = self._stamp()

    def adopt_newer(self, provider: OAuthClientProvider) -> None:
        """When another session's worker wrote the file since (it refreshed, and the server
        rotated the refresh token this one holds), take its tokens instead of refreshing."""
        from mcp.shared.auth import OAuthToken

        if self.path is None or self._data is None or self._stamp() == self._seen:
            return
        raw = self._load().get("tokens")
        if not isinstance(raw, dict):
            return
        try:
            provider.context.current_tokens = OAuthToken.model_validate(raw)
        except ValueError:
            return
        expires = self._load().get("expiresAt")
        provider.context.token_expiry_time = (
            float(expires) if isinstance(expires, int | float) else None
        )

    def has_tokens(self) -> bool:
        return isinstance(self._load().get("tokens"), dict)

    def forget_tokens(self) -> None:
        """Drop the tokens (a new login replaces them); the registered client stays."""
        if self._load().pop("tokens", None) is not None:
            self._load().pop("expiresAt", None)
            self._save()

    def restore(self, provider: OAuthClientProvider) -> None:
        """Give ``provider`` the stored expiry and metadata (the SDK keeps them in memory only)."""
        from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata

        data = self._load()
        context = provider.context
        try:
            if context.oauth_metadata is None and isinstance(data.get("oauthMetadata"), dict):
                context.oauth_metadata = OAuthMetadata.model_validate(data["oauthMetadata"])
            if context.protected_resource_metadata is None and isinstance(
                data.get("resourceMetadata"), dict
            ):
                context.protected_resource_metadata = ProtectedResourceMetadata.model_validate(
                    data["resourceMetadata"]
                )
        except ValueError:
            pass  # discovered again on the next 401
        if isinstance(data.get("authServer"), str) and context.auth_server_url is None:
            context.auth_server_url = data["authServer"]
        expires = data.get("expiresAt")
        if context.current_tokens is not None and isinstance(expires, int | float):
            context.token_expiry_time = float(expires)

    # -- the SDK's TokenStorage ----------------------------------------------------------------
    async def get_tokens(self) -> OAuthToken | None:
        from mcp.shared.auth import OAuthToken

        raw = self._load().get("tokens")
        try:
            return OAuthToken.model_validate(raw) if isinstance(raw, dict) else None
        except ValueError:
            return None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        data = self._load()
        data["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        if tokens.expires_in is not None:
            data["expiresAt"] = time.time() + int(tokens.expires_in)
        else:
            data.pop("expiresAt", None)
        if self.provider is not None:
            context = self.provider.context
            if context.oauth_metadata is not None:
                data["oauthMetadata"] = context.oauth_metadata.model_dump(
                    mode="json", exclude_none=True
                )
            if context.protected_resource_metadata is not None:
                data["resourceMetadata"] = context.protected_resource_metadata.model_dump(
                    mode="json", exclude_none=True
                )
            if context.auth_server_url:
                data["authServer"] = context.auth_server_url
        self._save()

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        from mcp.shared.auth import OAuthClientInformationFull

        raw = self._load().get("client")
        try:
            return OAuthClientInformationFull.model_validate(raw) if isinstance(raw, dict) else None
        except ValueError:
            return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._load()["client"] = client_info.model_dump(mode="json", exclude_none=True)
        self._save()


class LoginFlow:
    """One ``/mcp login``: the loopback callback server and the authorization URL's hand-over.

    :meth:`open` binds ``127.0.0.1`` on a free port; the provider's redirect handler
    :meth:`publish`-es the URL (``/mcp login`` is waiting for it in :meth:`url`); its callback
    handler :meth:`callback` serves the browser's redirect and returns ``(code, state)``."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.authorization_url: str | None = None
        self._settled = anyio.Event()
        self._error: str | None = None
        self._listener: SocketListener | None = None
        self.used = False

    async def open(self) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self._listener = listener.listeners[0]  # pyright: ignore[reportAttributeAccessIssue]

    @property
    def redirect_uri(self) -> str:
        assert self._listener is not None, "LoginFlow.open() first"
        port = self._listener.extra(SocketAttribute.local_port)
        return f"http://127.0.0.1:{port}/callback"

    async def url(self) -> str | None:
        """The authorization URL; ``None`` when the server connected without asking for one;
        raises :class:`LoginFailed` when the connection failed first."""
        await self._settled.wait()
        if self._error is not None:
            raise LoginFailed(self._error)
        return self.authorization_url

    def settle(self, error: str | None = None) -> None:
        """The connection is ready (no login was asked) or failed with ``error``."""
        if not self._settled.is_set():
            self._error = error
            self._settled.set()

    async def publish(self, url: str) -> None:
        """The provider's redirect handler (once per flow; later it means a new login)."""
        if self.used:
            raise LoginNeeded(self.server)
        self.used = True
        self.authorization_url = url
        self._settled.set()

    async def callback(self) -> tuple[str, str | None]:
        """The provider's callback handler: serve requests until the redirect comes."""
        listener = self._listener
        if listener is None:
            raise LoginFailed("the login's callback server is closed")
        try:
            with anyio.fail_after(LOGIN_TIMEOUT):
                while True:
                    stream = await listener.accept()
                    async with stream:
                        found = await _serve_callback(stream)
                    if found is not None:
                        break
        except TimeoutError:
            raise LoginFailed(
                f"no answer from the browser within {LOGIN_TIMEOUT:g} s: "
                f"/mcp login {self.server} to try again"
            ) from None
        finally:
            await self.aclose()
        query = found
        if "error" in query:
            described = query.get("error_description", "")
            raise LoginFailed(
                f"the authorization server refused the login: {query['error']}"
                + (f" ({described})" if described else "")
            )
        return query.get("code", ""), query.get("state")

    async def aclose(self) -> None:
        if self._listener is not None:
            listener, self._listener = self._listener, None
            await listener.aclose()


async def _serve_callback(stream: Any) -> dict[str, str] | None:
    """Answer one HTTP request; its query when it is ``GET /callback``."""
    data = b""
    with anyio.move_on_after(30):
        while b"\r\n\r\n" not in data and len(data) < _REQUEST_LIMIT:
            try:
                data += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                break
    line = data.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    target = urlsplit(parts[1]) if len(parts) == 3 and parts[0] == "GET" else None
    if target is None or target.path != "/callback":
        await _answer(stream, "404 Not Found", "Not the login callback.")
        return None
    query = {k: v[0] for k, v in parse_qs(target.query).items()}
    if "error" in query:
        await _answer(stream, "200 OK", "The login was refused. You can close this tab.")
    else:
        await _answer(stream, "200 OK", "Logged in. You can close this tab.")
    return query


async def _answer(stream: Any, status: str, text: str) -> None:
    body = text.encode()
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    try:
        await stream.send(head + body)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass


def oauth_provider(
    server: str, url: str, storage: TokenFile, login: LoginFlow | None
) -> OAuthClientProvider | None:
    """The httpx auth for one connection: ``None`` when no token is stored and no login runs
    (a 401 then says *needs login* without registering a client); otherwise the SDK's provider,
    which adds the token, refreshes it, and in a login runs the whole flow."""
    import httpx
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata
    from pydantic import AnyUrl

    if login is None and not storage.has_tokens():
        return None
    redirect = login.redirect_uri if login is not None else "http://127.0.0.1/callback"

    async def redirect_handler(authorization_url: str) -> None:
        if login is None:
            raise LoginNeeded(server)
        await login.publish(authorization_url)

    async def callback_handler() -> tuple[str, str | None]:
        if login is None:
            raise LoginNeeded(server)
        return await login.callback()

    class _Provider(OAuthClientProvider):
        async def _auth_flow(
            self, request: httpx.Request
        ) -> AsyncGenerator[httpx.Request, httpx.Response]:
            if self._initialized:
                storage.adopt_newer(self)
            flow = super()._auth_flow(request)
            try:
                step = await flow.__anext__()
                while True:
                    step = await flow.asend((yield step))
            except StopAsyncIteration:
                return
            finally:
                await flow.aclose()

        async def _initialize(self) -> None:
            await super()._initialize()
            storage.restore(self)
            info = self.context.client_info
            if (
                login is not None
                and info is not None
                and AnyUrl(redirect) not in (info.redirect_uris or [])
            ):
                self.context.client_info = None  # registered for another callback port

    metadata = OAuthClientMetadata(
        redirect_uris=[AnyUrl(redirect)],
        token_endpoint_auth_method="none",
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        client_name="coding-agent",
    )
    provider = _Provider(
        url,
        metadata,
        storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
        timeout=LOGIN_TIMEOUT,
    )
    storage.provider = provider
    return provider


class _QuietLoginNeeded(logging.Filter):
    """The SDK logs every OAuth flow error with its traceback; *needs login* is no error."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, LoginNeeded)


logging.getLogger("mcp.client.auth.oauth2").addFilter(_QuietLoginNeeded())
