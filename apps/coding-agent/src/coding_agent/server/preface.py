"""The preface: one raw line each way before the chord wire starts (docs/server.md#preface).

A client of ``coding-agent serve`` opens the connection (TLS first, on TCP) and writes one line::

    coding-agent-serve/1 <token> <request JSON>\\n

``<token>`` is the bearer token (``-`` for none); ``<request JSON>`` is ``{"session": "ID"}``
(attach an existing session) or ``{"new": {"model"?: "provider/id"}}`` (start one). The server
reads at most :data:`MAX_PREFACE` bytes within :data:`PREFACE_TIMEOUT` seconds, and compares the
token (``hmac.compare_digest``) **before it parses anything else** of the line: a client without
the token never reaches the JSON decoder, the session table, a worker or a chord frame. It
answers one line, ``OK <JSON>`` (``{"session", "cwd", "model"}``) after which both directions
carry the chord wire unchanged (docs/wire.md), or ``ERR <code> <message>`` and closes.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ANSWER_TIMEOUT",
    "MAGIC",
    "MAX_PREFACE",
    "PREFACE_TIMEOUT",
    "PrefaceError",
    "Request",
    "check_token",
    "encode_preface",
    "encode_reply",
    "parse_reply",
    "parse_request",
    "split_preface",
]

MAGIC = b"coding-agent-serve/1"
"""The first word of every preface (a version: a later protocol gets another word)."""

MAX_PREFACE = 4096
"""The longest preface line a server reads (bytes, the newline included)."""

PREFACE_TIMEOUT = 10.0
"""Seconds a server waits for the preface (and a TLS handshake) before it hangs up."""

ANSWER_TIMEOUT = 180.0
"""Seconds a client waits for the server's answer line after its preface: the server may be
starting the session's worker, or queueing its start behind a start-up storm."""

NO_TOKEN = b"-"


class PrefaceError(Exception):
    """A refused or malformed preface; ``code`` is the ``ERR`` code on the wire."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


@dataclass(frozen=True)
class Request:
    """What the client asked for: a session by id, or a new one (with ``model``)."""

    session: str | None = None
    new: bool = False
    model: str | None = None


def encode_preface(token: str | None, request: Request) -> bytes:
    """The client's preface line for ``request``."""
    if token is not None and (not token or any(ch.isspace() for ch in token)):
        raise ValueError("a token is one word of printable characters (no spaces)")
    body: dict[str, Any]
    if request.new:
        body = {"new": {"model": request.model} if request.model else {}}
    else:
        body = {"session": request.session}
    word = token.encode() if token is not None else NO_TOKEN
    line = b" ".join((MAGIC, word, json.dumps(body, separators=(",", ":")).encode()))
    if len(line) + 1 > MAX_PREFACE:
        raise ValueError(f"the preface is longer than {MAX_PREFACE} bytes")
    return line + b"\n"


def split_preface(line: bytes) -> tuple[bytes, bytes]:
    """``(token, rest)`` of a preface line (without its newline); nothing is decoded."""
    parts = line.split(b" ", 2)
    if len(parts) != 3 or parts[0] != MAGIC:
        raise PrefaceError(
            "bad_preface",
            "this is a coding-agent session server: connect with coding-agent attach or "
            "--server (the connection must start with a coding-agent-serve/1 line)",
        )
    return parts[1], parts[2]


def check_token(given: bytes, tokens: Mapping[str, bytes] | None) -> str | None:
    """The name of the token ``given`` is; raise ``unauthorized`` when it is none of ``tokens``
    (every one compared, in constant time: no early return). ``tokens`` ``None``: no token is
    needed (the Unix socket), and the name is ``None``."""
    if tokens is None:
        return None
    found: str | None = None
    for name, token in tokens.items():
        if hmac.compare_digest(given, token):
            found = name
    if found is None:
        raise PrefaceError(
            "unauthorized",
            "wrong or missing token (give the server's token with --token-file FILE or "
            "$CODING_AGENT_TOKEN)",
        )
    return found


def parse_request(rest: bytes) -> Request:
    """The request part of a preface (only called once the token was accepted)."""
    try:
        body = json.loads(rest)
    except (ValueError, UnicodeDecodeError):
        raise PrefaceError("bad_preface", "the preface's request is not JSON") from None
    if isinstance(body, dict) and set(body) == {"session"} and isinstance(body["session"], str):
        session = body["session"]
        if not session or "/" in session or session in (".", ".."):
            raise PrefaceError("bad_preface", f"invalid session id {session!r}")
        return Request(session=session)
    if isinstance(body, dict) and set(body) == {"new"} and isinstance(body["new"], dict):
        options: dict[str, Any] = body["new"]
        model = options.get("model")
        if set(options) - {"model"} or not (model is None or isinstance(model, str)):
            raise PrefaceError("bad_preface", 'a new session takes only {"model": "provider/id"}')
        return Request(new=True, model=model)
    raise PrefaceError("bad_preface", 'the request is {"session": "ID"} or {"new": {}}')


def encode_reply(info: dict[str, Any] | None = None, error: PrefaceError | None = None) -> bytes:
    """The server's answer line: ``OK <json>`` or ``ERR <code> <message>``."""
    if error is not None:
        message = " ".join(error.message.split())
        return f"ERR {error.code} {message}\n".encode()
    return b"OK " + json.dumps(info or {}, separators=(",", ":")).encode() + b"\n"


def parse_reply(line: bytes) -> dict[str, Any]:
    """The session info of an ``OK`` line; raises :class:`PrefaceError` for ``ERR`` (or junk)."""
    if line.startswith(b"OK "):
        try:
            info = json.loads(line[3:])
        except ValueError:
            info = None
        if isinstance(info, dict):
            return info
    if line.startswith(b"ERR "):
        _, code, *message = line.decode(errors="replace").split(" ", 2)
        raise PrefaceError(code, message[0] if message else "")
    raise PrefaceError("bad_reply", "the server did not answer like a coding-agent server")
