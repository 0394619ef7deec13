"""The sandbox's only way out: a local HTTPS proxy that lets through the allowed domains.

A sandboxed command has no network (:mod:`pico3.sandbox`). With ``allow_domains`` its policy
names a unix socket where a :class:`DomainProxy` listens (outside the sandbox, in the host
process); the socket's folder is bound into the sandbox read-only, and a tiny forwarder
(:data:`FORWARDER`, run by the sandbox's Python before the command) listens on
``127.0.0.1:3128`` inside the sandbox's own network namespace and passes every connection to
the socket. ``HTTPS_PROXY``/``HTTP_PROXY`` (and the lower-case spellings) point there, so
``curl``, ``pip``, ``git`` and ``npm`` use it without being told.

The proxy speaks ``CONNECT host:port`` only (HTTPS and any TLS protocol; a plain-HTTP request
is refused with 403: the sandbox reaches the allowed domains over HTTPS). A host is allowed when
it equals an entry of ``allow_domains`` or, for an entry ``*.example.com``, ends in
``.example.com``; every other host gets ``403`` and the body says which domain was refused and
where to allow it (``sandbox.allow_domains``). An allowed domain means web access: ports 80 and
443 (:data:`WEB_PORTS`) only, unless an entry names its port, ``host:port`` (``[::1]:8443`` for
an IPv6 address), the spelling of Claude Code's ``sandbox.network.allowedDomains``; such an
entry allows that port alone (Claude Code's port-less entry allows every port: here it does not,
so an allowed ``example.com`` is not its ssh or redis). Another port gets ``403`` too, its
reason line and body naming the port and the entry that would allow it. A refusal's status line
carries the reason (``403 Forbidden: port not allowed by the sandbox``), which Python's clients
(pip, requests) show; curl shows the code alone. It never sees inside the tunnel.

Threads, standard library only (a leaf of pico3's layers).
"""

from __future__ import annotations

import contextlib
import os
import socket
import socketserver
import threading
from collections.abc import Iterable

from pico3.unix_sockets import LOAD_FILTER

__all__ = ["FORWARDER", "PROXY_PORT", "WEB_PORTS", "DomainProxy", "domain_allowed"]

PROXY_PORT = 3128
"""The port the forwarder listens on inside the sandbox (its own network namespace)."""

WEB_PORTS = (80, 443)
"""The ports an ``allow_domains`` entry without a port of its own opens (HTTP and HTTPS)."""

FORWARDER = (
    LOAD_FILTER
    + r"""
import os, socket, sys, threading
port, path, program, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
server = socket.create_server(("127.0.0.1", port))
if os.fork() == 0:
    if program:  # not dumpable: the filtered command may not ptrace its way into this loop
        import ctypes
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    def pipe(a, b):
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    while True:
        conn, _ = server.accept()
        up = socket.socket(socket.AF_UNIX)
        try:
            up.connect(path)
        except OSError:
            conn.close()
            continue
        threading.Thread(target=pipe, args=(conn, up), daemon=True).start()
        threading.Thread(target=pipe, args=(up, conn), daemon=True).start()
server.close()
if program:
    load_filter(bytes.fromhex(program))
os.execvp(argv[0], argv)
"""
)
"""Run inside the sandbox as ``python -I -S -c FORWARDER PORT SOCKET FILTER COMMAND...``: it
listens, forks the forwarding loop (stdio on ``/dev/null``; not dumpable) and ``exec``s the
command, which keeps the pid, stdin and exit code, after loading ``FILTER`` (the hex of
:func:`pico3.unix_sockets.unix_socket_filter`'s program; empty: none) for it; the PID namespace
ends the loop with the command. The loop itself is not filtered: it connects to ``SOCKET``."""

_HEAD_LIMIT = 16 * 1024
_POLL = 0.05  # seconds between the serving loop's looks for close()
_CONNECT_TIMEOUT = 15.0


def _split_entry(entry: str) -> tuple[str, int | None]:
    """An ``allow_domains`` entry's host pattern and port (``None``: none named). A port that
    is not a number from 1 to 65535 is ``-1``, which no connection has (the entry allows
    nothing rather than every port; the configuration refuses such an entry besides)."""
    text = entry.strip()
    if text.startswith("["):  # [::1] or [::1]:8443
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else (None if not rest else "")
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:  # a bare name, or an IPv6 address without brackets (no port)
        host, port = text, None
    pattern = host.strip().rstrip(".").lower()
    if port is None:
        return pattern, None
    number = int(port) if port.isdigit() else -1
    return pattern, number if 1 <= number <= 65535 else -1


def domain_allowed(host: str, allow: Iterable[str], port: int | None = None) -> bool:
    """Whether ``host`` is allowed: equal to an entry, or under a ``*.domain`` entry
    (case-insensitive, a trailing dot ignored). With ``port``, that port of it too: an entry
    naming a port (``example.com:8443``) allows that one, an entry without one
    :data:`WEB_PORTS`; without ``port`` any entry for the host will do."""
    name = host.strip().strip("[]").rstrip(".").lower()
    for entry in allow:
        pattern, allowed = _split_entry(entry)
        if pattern.startswith("*."):
            matches = name.endswith(pattern[1:]) and name != pattern[2:]
        else:
            matches = name == pattern
        if not matches:
            continue
        if port is None or port == allowed or (allowed is None and port in WEB_PORTS):
            return True
    return False


def _reply(conn: socket.socket, status: str, body: str) -> None:
    data = body.encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(data)}\r\n"
    with contextlib.suppress(OSError):
        conn.sendall(head.encode() + b"Connection: close\r\n\r\n" + data)


def _splice(a: socket.socket, b: socket.socket) -> None:
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass
    for side in (a, b):
        with contextlib.suppress(OSError):
            side.shutdown(socket.SHUT_RDWR)


def _target(line: str) -> tuple[str, int] | None:
    parts = line.split()
    if len(parts) != 3 or parts[0].upper() != "CONNECT":
        return None
    host, _, port = parts[1].rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit():
        return None
    return host, int(port)


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True  # a tunnel still open never holds the process up


class DomainProxy:
    """A CONNECT proxy on the unix socket ``path`` that lets through ``allow``'s domains (see
    the module docstring). :meth:`start` it, :meth:`close` it; ``refused`` lists what it turned
    away, newest last: a refused domain as its host, a refused port of an allowed one as
    ``host:port``."""

    def __init__(self, path: str | os.PathLike[str], allow: Iterable[str]) -> None:
        self.path = os.fspath(path)
        self.allow = tuple(allow)
        self.refused: list[str] = []
        self._server: _Server | None = None

    def start(self) -> DomainProxy:
        """Listen (a stale socket file at ``path`` is replaced); returns ``self``."""
        os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._handle(self.request)

        server = _Server(self.path, Handler)
        self._server = server
        # polled every 50 ms, not socketserver's 500 ms: close() (a worker stopping) waits for
        # the loop to notice, and the wait is the poll's
        threading.Thread(
            target=server.serve_forever, args=(_POLL,), daemon=True, name="sandbox-proxy"
        ).start()
        return self

    def close(self) -> None:
        """Stop listening and remove the socket (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    def _handle(self, conn: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head and len(head) < _HEAD_LIMIT:
            chunk = conn.recv(4096)
            if not chunk:
                return
            head += chunk
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        target = _target(line)
        if target is None:
            _reply(conn, "403 Forbidden", "the sandbox proxy only tunnels HTTPS (CONNECT)\n")
            return
        host, port = target
        if not domain_allowed(host, self.allow):
            self.refused.append(host)
            _reply(
                conn,
                "403 Forbidden: domain not allowed by the sandbox (sandbox.allow_domains)",
                f"domain not allowed by the sandbox: {host} (sandbox.allow_domains)\n",
            )
            return
        if not domain_allowed(host, self.allow, port):
            self.refused.append(f"{host}:{port}")
            entry = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            _reply(
                conn,
                "403 Forbidden: port not allowed by the sandbox (sandbox.allow_domains)",
                f"port not allowed by the sandbox: {host}:{port} (an allowed domain is reached "
                f'on ports 80 and 443 only; add "{entry}" to sandbox.allow_domains in your '
                "config.toml to allow this port)\n",
            )
            return
        try:
            upstream = socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT)
        except OSError as error:
            _reply(conn, "502 Bad Gateway", f"cannot connect to {host}:{port}: {error}\n")
            return
        upstream.settimeout(None)
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        rest = head.split(b"\r\n\r\n", 1)[1]
        if rest:
            upstream.sendall(rest)
        back = threading.Thread(target=_splice, args=(upstream, conn), daemon=True)
        back.start()
        _splice(conn, upstream)
        back.join()
        upstream.close()
