"""A benchmark's loopback model stub, run in a child process of its own so the stub's work is
never counted in the measured process.

The benchmark script runs itself with ``--serve``; that child calls :func:`serve_until_stdin_closes` with its HTTP
server, which prints the base URL and serves until the parent closes the child's stdin.
:class:`StubProcess` is the parent's side (``with StubProcess(__file__) as url:``).
"""

from __future__ import annotations

import subprocess
import sys
import threading
from http.server import ThreadingHTTPServer


def serve_until_stdin_closes(server: ThreadingHTTPServer) -> None:
    """Print ``server``'s base URL, then serve until stdin closes."""
    server.daemon_threads = True
    host, port = server.server_address[:2]
    print(f"http://{host!s}:{port}", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()  # until the parent closes our stdin
    server.shutdown()


class StubProcess:
    """``script --serve`` as a child process; entering gives its base URL."""

    def __init__(self, script: str) -> None:
        self._script = script

    def __enter__(self) -> str:
        self._process = subprocess.Popen(
            [sys.executable, self._script, "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        return self._process.stdout.readline().strip()

    def __exit__(self, *exc: object) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=10)
