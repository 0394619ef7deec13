"""Why a server could not start, in one line the user can act on.

* :func:`describe`: any other exception as one line (through exception groups; an SDK error
  with its code, a missing command, a :class:`Worded` exception as its message alone).
* :func:`stderr_gist`: of a stdio server's stderr, the lines that say what went wrong (npm's
  ``npm error 404 Not Found - GET …``, a Python traceback's last ``…Error: …``, a missing
  variable), not the boilerplate that often ends it (npm's ``A complete log of this run can be
  found in …``, a stack trace); at most :data:`GIST_LINES` lines and :data:`GIST_CHARS`
  characters, joined by `` | ``.
* :func:`connect_problem`: an HTTP or SSE server that cannot be reached or answers an HTTP error,
  naming the URL and the cause (the host name not found, the connection refused or timed out, a
  TLS error, the status the server answered).
* :func:`not_json_rpc`: a stdio server that wrote something else than JSON-RPC on its stdout
  before it answered ``initialize`` (it logs to stdout, or it is no MCP server): it fails
  :data:`GARBAGE_GRACE` seconds after that line unless a valid message came meanwhile, rather
  than at the startup timeout.
"""

from __future__ import annotations

import errno
import json
import re
import ssl

__all__ = [
    "GARBAGE_GRACE",
    "GIST_CHARS",
    "GIST_LINES",
    "NotJsonRpc",
    "Worded",
    "connect_problem",
    "describe",
    "garbage_line",
    "garbage_text",
    "innermost",
    "not_json_rpc",
    "stderr_gist",
]

GIST_LINES = 3
GIST_CHARS = 300
GARBAGE_GRACE = 5.0
"""Seconds a stdio server that wrote non-JSON-RPC on stdout (and nothing valid) has left to
answer ``initialize`` before it fails."""

_NOISE = re.compile(
    r"A complete log of this run can be found in"
    r"|^npm (?:error|ERR!)(?: code \S+| \d{3})?$"  # npm's bare prefixes and its code line
    r"|^npm (?:error|ERR!)(?: \d{3})? (?:Note that you can also install from a"
    r"|tarball, folder, http url, or git url)"
    r"|^Traceback \(most recent call last\):$|^File \".*\", line \d+|^at \S"  # stack traces
    r"|^\^+$|^throw err;$|^Node\.js v\d|^[{}\[\]();]+$|^For more information check:"
)
_TELLING = re.compile(
    r"(?i:not found|no such file|enoent|eacces|permission denied|not in this registry"
    r"|cannot find|can't find|could not find|no module named|unsatisfiable|is required"
    r"|\bmissing\b|\b40[134]\b|\bfatal\b|\bpanic)"
    r"|\b[A-Z]\w*(?:Error|Exception)\b"
)
_ERRORISH = re.compile(
    r"(?i:error|fail|cannot|can't|unable|invalid|denied|refused|exception|not allowed)"
)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def stderr_gist(text: str) -> str:
    """The lines of ``text`` (a server's stderr) that say what went wrong: those naming an error
    outright (``not found``, ``404``, ``ENOENT``, ``…Error:``), else those with ``error``,
    ``failed`` and the like, else the last ones; boilerplate and repeats left out; at most
    :data:`GIST_LINES` lines and :data:`GIST_CHARS` characters, joined by `` | ``."""
    lines: list[str] = []
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if line and line not in lines and not _NOISE.search(line):
            lines.append(line)
    chosen = [x for x in lines if _TELLING.search(x)] or [x for x in lines if _ERRORISH.search(x)]
    chosen = chosen[:GIST_LINES] if chosen else lines[-GIST_LINES:]
    return _clip(" | ".join(chosen), GIST_CHARS)


def innermost(exc: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups: a task group wraps what its
    body raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException) -> str:
    """A one-line reason, looking through exception groups."""
    from mcp import McpError

    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, McpError):
        return f"MCP error {exc.error.code}: {exc.error.message}"
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    text = str(exc) or type(exc).__name__
    if isinstance(exc, Worded):
        return text
    return " ".join(f"{type(exc).__name__}: {text}".split())  # one line (httpx's are two)


def garbage_text(exc: Exception) -> str:
    """What a line that is not JSON-RPC said (the SDK hands us its parse error)."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError) and exc.errors():
        return repr(str(exc.errors()[0].get("input"))[:120])
    return describe(exc)[:120]


def garbage_line(exc: Exception) -> str:
    """The line that was not JSON-RPC, as the server wrote it (or why it was refused)."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError) and exc.errors():
        return str(exc.errors()[0].get("input"))[:500]
    return describe(exc)


class Worded(Exception):
    """An exception whose message is the whole reason (:func:`describe` adds no type name)."""


class NotJsonRpc(Worded):
    """A stdio server wrote only something else than JSON-RPC on stdout while starting."""


def not_json_rpc(line: str) -> str:
    """What to say of a server that wrote ``line`` (not JSON-RPC) on its stdout."""
    shown = json.dumps(_clip(" ".join(line.split()), 120), ensure_ascii=False)
    return (
        f"it wrote {shown} on stdout, which is not MCP's JSON-RPC: is this an MCP server, and "
        "does it log to stdout?"
    )


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and every exception it groups, wraps or follows, outermost first."""
    found: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo:
        item = todo.pop(0)
        if any(item is x for x in found):
            continue
        found.append(item)
        if isinstance(item, BaseExceptionGroup):
            todo.extend(item.exceptions)
        todo.extend(x for x in (item.__cause__, item.__context__) if x is not None)
    return found


def _os_cause(found: list[BaseException]) -> str | None:
    import socket

    for item in found:
        if isinstance(item, socket.gaierror):
            return f"host name not found: {item.strerror or item}"
        if isinstance(item, ssl.SSLCertVerificationError):
            return f"TLS certificate not accepted: {item.verify_message or item}"
        if isinstance(item, ssl.SSLError):
            said = re.sub(r"^\[SSL: \w+\] | \(_ssl\.c:\d+\)$", "", str(item.strerror or item))
            return f"TLS error: {said}"
        if isinstance(item, ConnectionRefusedError) or getattr(item, "errno", None) in (
            errno.ECONNREFUSED,
        ):
            return "connection refused"
        if isinstance(item, OSError) and item.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return "network unreachable"
    return None


_STATUS_HINT = {
    403: "check the credentials in its headers",
    404: "is this the server's MCP endpoint?",
    405: 'is this the server\'s MCP endpoint, and its "type" right?',
}


def connect_problem(exc: BaseException, url: str, *, starting: bool) -> str | None:
    """One line for an HTTP or SSE server's connection error, naming ``url`` and the cause;
    ``None`` when ``exc`` is not about reaching the server. ``starting``: before ``initialize``
    was answered (the SDK turns a ``404`` into a *session terminated* error)."""
    import httpx
    from mcp import McpError

    found = _chain(exc)
    for item in found:
        if isinstance(item, httpx.HTTPStatusError):
            response = item.response
            status = f"{response.status_code} {response.reason_phrase}".strip()
            hint = _STATUS_HINT.get(response.status_code)
            if response.is_redirect:  # the SDK says where to and why not followed
                hint = str(item).splitlines()[0]
            return f"{url} answered HTTP {status}" + (f" ({hint})" if hint else "")
        if starting and isinstance(item, McpError) and item.error.message == "Session terminated":
            return f"{url} answered HTTP 404 Not Found ({_STATUS_HINT[404]})"
    for item in found:
        if isinstance(item, httpx.ConnectTimeout):
            return f"cannot connect to {url} (timed out)"
        if isinstance(item, httpx.TimeoutException):
            return f"{url} did not answer in time ({type(item).__name__})"
        if isinstance(item, httpx.TransportError):
            cause = _os_cause(found) or " ".join((str(item) or type(item).__name__).split())
            if isinstance(item, httpx.ConnectError):
                return f"cannot connect to {url} ({cause})"
            return f"the connection to {url} failed ({cause})"
    return None
