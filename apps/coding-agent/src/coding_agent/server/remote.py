"""The client side of ``coding-agent serve``: dial, TLS, token, preface, then the chord wire.

``tcp://HOST:PORT/SESSION`` names a session on a server (``tcp://HOST:PORT`` alone: a new one
for ``-p``/``--json``). TLS is on for every TCP address: the server's certificate is checked
against the system's CAs or ``--tls-ca FILE`` (a self-signed server's certificate or its CA),
and the host name must match it. ``--insecure`` dials plain TCP, and only to a loopback
address. The token comes from ``--token-file FILE`` or ``$CODING_AGENT_TOKEN``.

:func:`connect_server` returns a :class:`~chord.FrameConnection` that carries the chord wire
from the first byte after the server's ``OK`` line, and the session the server named.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.stapled import StapledByteStream

from chord import FrameConnection, connect_unix
from coding_agent.server.addresses import is_loopback, parse_listen
from coding_agent.server.preface import (
    ANSWER_TIMEOUT,
    MAX_PREFACE,
    PrefaceError,
    Request,
    encode_preface,
    parse_reply,
)

__all__ = [
    "FAILOVER_DELAY",
    "TOKEN_ENV",
    "NoServerReachable",
    "ServerAddress",
    "ServerRefused",
    "client_tls_context",
    "connect_any",
    "connect_server",
    "parse_server_url",
    "parse_server_urls",
    "resolve_token",
    "session_connector",
]

TOKEN_ENV = "CODING_AGENT_TOKEN"
"""The environment variable a client reads its token from (without ``--token-file``)."""


class ServerRefused(ConnectionError):
    """The server refused the connection at its preface (``code``: ``unauthorized``,
    ``not_found``, ``start_failed``, ``bad_preface``); the message says why."""

    def __init__(self, address: str, error: PrefaceError) -> None:
        super().__init__(f"{address}: the server refused: {error.message} ({error.code})")
        self.address = address
        self.code = error.code


@dataclass(frozen=True)
class ServerAddress:
    """Where a server listens: TCP (``host``, ``port``) or a Unix socket (``path``)."""

    host: str = ""
    port: int = 0
    path: Path | None = None

    def __str__(self) -> str:
        if self.path is not None:
            return f"unix:{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"tcp://{host}:{self.port}"


def parse_server_url(url: str) -> tuple[ServerAddress, str | None]:
    """``tcp://HOST:PORT[/SESSION]`` or ``unix:PATH`` → the address and the session id (if
    any). Raises ``ValueError`` naming the form."""
    if url.startswith("unix:"):
        return ServerAddress(path=Path(url.removeprefix("unix:"))), None
    if not url.startswith("tcp://"):
        raise ValueError(f"{url!r} is not a server address: give tcp://HOST:PORT[/SESSION]")
    rest = url.removeprefix("tcp://")
    where, _, session = rest.partition("/")
    try:
        host, port = parse_listen(f"tcp://{where}")
    except Exception:
        raise ValueError(
            f"{url!r} is not a server address: give tcp://HOST:PORT[/SESSION]"
        ) from None
    return ServerAddress(host=host, port=port), session or None


def parse_server_urls(text: str) -> tuple[list[ServerAddress], str | None]:
    """A comma-separated list of server URLs (``tcp://a:7433/S,tcp://b:7433/S``: the servers
    of one database, tried in order) → the addresses and the session id. Raises
    ``ValueError`` when the URLs name different sessions."""
    addresses: list[ServerAddress] = []
    session: str | None = None
    for part in (piece.strip() for piece in text.split(",")):
        if not part:
            continue
        address, named = parse_server_url(part)
        if named is not None:
            if session is not None and named != session:
                raise ValueError(f"{text!r} names two sessions ({session}, {named}): name one")
            session = named
        addresses.append(address)
    if not addresses:
        raise ValueError(f"{text!r} is not a server address: give tcp://HOST:PORT[/SESSION]")
    return addresses, session


class NoServerReachable(ConnectionError):
    """None of the servers of a list could be reached (the message has each one's reason)."""


FAILOVER_DELAY = 0.2
"""Seconds before the second failover of one attempt; each next one waits twice as long, up to
:data:`FAILOVER_DELAY_MAX` (the first failover is at once)."""
FAILOVER_DELAY_MAX = 2.0


async def connect_any(
    addresses: list[ServerAddress],
    request: Request,
    *,
    start: int = 0,
    token: str | None = None,
    tls: ssl.SSLContext | None = None,
    insecure: bool = False,
    on_failover: Callable[[str], None] | None = None,
) -> tuple[FrameConnection, dict[str, Any], int]:
    """:func:`connect_server` to the first of ``addresses`` (from ``start`` on, wrapping) that
    answers ``OK``; also returns its index.

    Any failure to connect (refused, reset, a failed or reset TLS handshake, the connection
    ending before the answer, a server that is busy or cannot start the session) moves on to
    the next address, with a growing pause from the second failover on
    (:data:`FAILOVER_DELAY`), and ``on_failover`` hears one line saying which server failed,
    why, and which one is tried next. A wrong token or a malformed preface is raised at once
    (every server of a list has the same tokens). With one address its error is raised as it
    is; with several, :class:`NoServerReachable` names each one's reason."""
    failures: list[tuple[ServerAddress, BaseException]] = []
    for offset in range(len(addresses)):
        index = (start + offset) % len(addresses)
        if offset >= 2:
            await anyio.sleep(min(FAILOVER_DELAY * 2 ** (offset - 2), FAILOVER_DELAY_MAX))
        try:
            conn, info = await connect_server(
                addresses[index], request, token=token, tls=tls, insecure=insecure
            )
        except ServerRefused as error:
            if error.code in ("unauthorized", "bad_preface") or len(addresses) == 1:
                raise
            failures.append((addresses[index], error))
        except OSError as error:  # every connection failure is one (see connect_server)
            if len(addresses) == 1:
                raise
            failures.append((addresses[index], error))
        else:
            return conn, info, index
        if on_failover is not None and offset + 1 < len(addresses):
            following = addresses[(index + 1) % len(addresses)]
            on_failover(f"{_reason(addresses[index], failures[-1][1])}; trying {following}")
    reasons = "; ".join(_reason(address, error) for address, error in failures)
    raise NoServerReachable(f"no server of the list answered: {reasons}")


def _reason(address: ServerAddress, error: BaseException) -> str:
    if isinstance(error, ServerRefused):
        return str(error)
    text = str(error)
    if text.startswith(f"{address}:"):
        return text
    return f"{address}: {getattr(error, 'strerror', None) or text or type(error).__name__}"


def resolve_token(
    token_file: str | os.PathLike[str] | None, env: Mapping[str, str] | None = None
) -> str | None:
    """The token from ``token_file`` or ``$CODING_AGENT_TOKEN``, or ``None``.

    The file holds the token alone, or is a server's token file with one ``NAME TOKEN`` line
    (blank lines and ``#`` comments skipped, as the server reads it), so the file that
    ``serve --token-file`` was given works for its own user's clients too. A file of several
    named tokens is refused naming them: which one to present is the user's choice."""
    if token_file is not None:
        try:
            text = Path(token_file).read_text()
        except OSError as error:
            raise ValueError(
                f"--token-file {token_file}: cannot read it: {error.strerror}"
            ) from None
        lines = [
            line.split()
            for line in text.splitlines()
            if line.strip() and not line.strip().startswith("#")
        ]
        if not lines:
            raise ValueError(f"--token-file {token_file}: it holds no token")
        if len(lines) > 1:
            names = ", ".join(words[0] for words in lines)
            raise ValueError(
                f"--token-file {token_file}: it holds {len(lines)} tokens ({names}), a server's "
                "token file; a client presents one: put that token alone in a file for "
                "--token-file, or in $CODING_AGENT_TOKEN"
            )
        words = lines[0]
        if len(words) > 2:
            raise ValueError(
                f"--token-file {token_file}: its line is neither a token alone nor NAME TOKEN "
                "(a token has no spaces)"
            )
        return words[-1]
    value = (os.environ if env is None else env).get(TOKEN_ENV, "").strip()
    return value or None


def client_tls_context(ca_file: str | os.PathLike[str] | None = None) -> ssl.SSLContext:
    """TLS 1.2+ with certificate and host name checks, against ``ca_file`` or the system CAs."""
    try:
        context = ssl.create_default_context(
            cafile=os.fspath(ca_file) if ca_file is not None else None
        )
    except (OSError, ssl.SSLError) as error:
        raise ValueError(f"--tls-ca {ca_file}: cannot load it: {error}") from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


async def connect_server(
    address: ServerAddress,
    request: Request,
    *,
    token: str | None = None,
    tls: ssl.SSLContext | None = None,
    insecure: bool = False,
) -> tuple[FrameConnection, dict[str, Any]]:
    r"""Dial ``address``, say the preface, and return the wire connection and the session info
    (``{"session", "cwd", "model"}``). Raises :class:`ServerRefused` when the server says
    ``ERR``, ``ssl.SSLError`` for a failed TLS check, and another ``OSError`` for every other
    way the connection fails (refused, reset, ended during the TLS handshake or before the
    answer): a reconnecting wire source retries exactly the ``OSError``\ s."""
    try:
        stream = await _dial(address, tls=tls, insecure=insecure)
    except _STREAM_ERRORS as error:  # a reset or ended TLS handshake (a dying server, a balancer)
        raise ConnectionResetError(
            f"{address}: the connection ended during the TLS handshake ({_cause(error)})"
        ) from None
    try:
        await stream.send(encode_preface(token, request))
        buffered = BufferedByteReceiveStream(stream)
        line = b""
        with anyio.move_on_after(ANSWER_TIMEOUT):  # the server may be starting a worker
            try:
                line = await buffered.receive_until(b"\n", MAX_PREFACE)
            except (*_STREAM_ERRORS, anyio.IncompleteRead, OSError):
                hint = (
                    " (with --insecure the connection is plain TCP: if the server listens with "
                    "TLS, drop --insecure and give --tls-ca for its certificate)"
                    if insecure
                    else ""
                )
                raise ConnectionResetError(
                    f"{address}: the server closed the connection before it answered{hint}"
                ) from None
        if not line:
            raise TimeoutError(f"{address}: the server did not answer the preface")
        try:
            info = parse_reply(line)
        except PrefaceError as error:
            raise ServerRefused(str(address), error) from None
    except _STREAM_ERRORS as error:
        await anyio.aclose_forcefully(stream)
        raise ConnectionResetError(f"{address}: the connection ended ({_cause(error)})") from None
    except BaseException:
        await anyio.aclose_forcefully(stream)
        raise
    wire = StapledByteStream(stream, buffered)
    return FrameConnection(wire, name=str(address)), info


_STREAM_ERRORS = (anyio.BrokenResourceError, anyio.EndOfStream, anyio.ClosedResourceError)


def _cause(error: BaseException) -> str:
    seen: BaseException | None = error
    while seen is not None:
        if str(seen).strip():
            return f"{type(seen).__name__}: {seen}"
        seen = seen.__cause__ or seen.__context__
    return "reset by the server"


async def _dial(
    address: ServerAddress, *, tls: ssl.SSLContext | None, insecure: bool
) -> anyio.abc.ByteStream:
    if address.path is not None:
        return (await connect_unix(address.path)).stream
    if insecure:
        if not is_loopback(address.host):
            raise ValueError(
                f"{address}: --insecure (plain TCP) is only allowed to a loopback address; "
                "use TLS (the server's --tls-cert, and --tls-ca FILE here for its certificate)"
            )
        return await anyio.connect_tcp(address.host, address.port)
    context = tls if tls is not None else client_tls_context()
    return await anyio.connect_tcp(
        address.host, address.port, ssl_context=context, tls_standard_compatible=False
    )


def session_connector(
    address: ServerAddress,
    session_id: str,
    *,
    token: str | None,
    tls: ssl.SSLContext | None,
    insecure: bool,
) -> Callable[[], Awaitable[FrameConnection]]:
    """A connect function for a reconnecting wire source: the session on the server, again."""

    async def connect() -> FrameConnection:
        conn, _info = await connect_server(
            address, Request(session=session_id), token=token, tls=tls, insecure=insecure
        )
        return conn

    return connect
