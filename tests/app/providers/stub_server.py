"""A real HTTP/1.1 server on 127.0.0.1 that plays scripted responses to the SDK clients.

Each request pops the next :class:`Reply` from the script: a plain JSON reply (errors) or a
chunked ``text/event-stream`` body written event by event. A reply may stop half way at a
``hold`` (a :class:`threading.Event`) so a test can abort mid-stream; the server then waits for
the client to hang up and sets :attr:`StubServer.disconnected`, which is how a test proves that
aborting closed the HTTP stream. Every request is recorded (method, path, headers, JSON body;
a form body as a dict). A reply's events may be binary frames (Bedrock's AWS event stream)
with their own ``content-type``.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl


@dataclass
class Reply:
    """One scripted response."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    json_body: Any = None
    events: Sequence[str | bytes] = ()  # SSE text, or binary frames (set a content-type)
    hold_after: int | None = None  # stop after this many events until ``hold`` is set


@dataclass
class Recorded:
    """One request the server saw."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


def sse(data: Any, event: str | None = None) -> str:
    """One server-sent event (``data`` JSON-encoded unless already a string)."""
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event is not None else ""
    return f"{head}data: {payload}\n\n"


class StubServer:
    """Start with ``with StubServer(replies) as server:``; ``server.url`` is the base URL."""

    def __init__(self, replies: Sequence[Reply] = ()) -> None:
        self.replies: deque[Reply] = deque(replies)
        self.requests: list[Recorded] = []
        self.hold = threading.Event()
        self.holding = threading.Event()
        self.disconnected = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> StubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.hold.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                raw = self.rfile.read(length) if length else b""
                stub.requests.append(
                    Recorded(
                        "POST",
                        self.path,
                        {k.lower(): v for k, v in self.headers.items()},
                        _body(raw, self.headers.get("content-type", "")),
                    )
                )
                reply = stub.replies.popleft() if stub.replies else Reply(404, json_body={})
                if reply.json_body is not None or not reply.events:
                    body = json.dumps(reply.json_body).encode()
                    self.send_response(reply.status)
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                if "content-type" not in reply.headers:
                    self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for number, event in enumerate(_chunks(reply.events)):
                    if reply.hold_after is not None and number == reply.hold_after:
                        stub.holding.set()
                        self._wait_for_hangup()
                        return
                    data = event if isinstance(event, bytes) else event.encode()
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def _wait_for_hangup(self) -> None:
                # The client closing its end makes this read return b"" (EOF).
                # Only a real hang-up counts: a timeout leaves ``disconnected`` unset.
                self.connection.settimeout(5)
                try:
                    while self.rfile.read(1):
                        pass
                except OSError:
                    self.close_connection = True
                    return
                stub.disconnected.set()
                self.close_connection = True

        return Handler


def _chunks(events: Sequence[str | bytes]) -> Iterator[str | bytes]:
    yield from events


def _body(raw: bytes, content_type: str) -> Any:
    """A request body: JSON decoded, a form (an OAuth token request) as a dict, else text."""
    if not raw:
        return None
    if content_type.startswith("application/x-www-form-urlencoded"):
        return dict(parse_qsl(raw.decode()))
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")
