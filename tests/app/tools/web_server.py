"""A real local HTTP server for the web tools' tests: routes are plain functions of the request.

``serve(routes)`` starts a ``ThreadingHTTPServer`` on 127.0.0.1 (an ephemeral port) in a thread;
a route gets the :class:`Handler` and answers with ``reply(status, body, headers)``. Requests
are recorded (path, headers, body) so a test can check what a backend was sent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Server:
    port: int
    seen: list[Seen] = field(default_factory=list)

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


class Handler(BaseHTTPRequestHandler):
    routes: dict[str, Callable[[Handler], None]] = {}
    server_info: Server

    def reply(self, status: int, body: bytes | str, headers: dict[str, str] | None = None) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server_info.seen.append(
            Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        )
        self.body = body
        route = self.routes.get(self.path.split("?", 1)[0])
        if route is None:
            self.reply(
                404, "<html><body><h1>Not here</h1></body></html>", {"Content-Type": "text/html"}
            )
            return
        route(self)

    do_GET = _handle
    do_POST = _handle

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serve(routes: dict[str, Callable[[Handler], None]]) -> Iterator[Server]:
    info = Server(0)
    handler = type("RouteHandler", (Handler,), {"routes": routes, "server_info": info})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    info.port = httpd.server_address[1]
    # shutdown() waits for serve_forever's next poll: at the default 0.5 s that was half a
    # second of every test's teardown
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    try:
        yield info
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)
