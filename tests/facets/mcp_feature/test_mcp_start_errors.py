"""Why a server failed to start, worded: the lines of its stderr that say so, the URL and cause
of an unreachable remote server, what a stdio server wrote that is not JSON-RPC (and failing
soon then). Real misbehaving servers: scripts in ``tmp_path``, a refused port, a tiny HTTP
server answering an error; nothing reaches the internet."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from mcp_support import SDK_LEAKS, free_port, session, write_config

from facets_mcp.client import INIT_TIMEOUT
from facets_mcp.problems import GIST_CHARS, connect_problem, stderr_gist

pytestmark = [pytest.mark.anyio, *SDK_LEAKS]

STATUS_SERVER = """\
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class Answer(BaseHTTPRequestHandler):
    def do_POST(self):
        code = int(self.path.strip("/").split("/")[0])
        self.send_response(code)
        self.send_header("Content-Length", "4")
        self.end_headers()
        self.wfile.write(b"nope")

    do_GET = do_POST

    def log_message(self, *args):
        pass

HTTPServer(("127.0.0.1", int(sys.argv[1])), Answer).serve_forever()
"""


async def test_a_server_that_exits_says_how_and_the_telling_lines_of_its_stderr(
    tmp_path: Path,
) -> None:
    script = tmp_path / "server.sh"
    script.write_text(
        "echo 'Starting server v1.2' >&2\n"
        "echo 'Error: GITHUB_TOKEN environment variable is required' >&2\n"
        "echo 'See https://example.org/docs for help' >&2\n"
        "exit 3\n"
    )
    write_config(tmp_path / "config", {"gh": {"command": "sh", "args": [str(script)]}})
    async with session(tmp_path) as s:
        failed = await s.server("gh", "failed")
    assert failed["error"] == "the server exited with code 3 before it was ready"
    assert failed["stderrGist"] == "Error: GITHUB_TOKEN environment variable is required"
    assert failed["stderr"].endswith("See https://example.org/docs for help")


async def test_a_refused_port_names_the_url_and_the_cause(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/sse"
    write_config(tmp_path / "config", {"old": {"type": "sse", "url": url}})
    async with session(tmp_path) as s:
        failed = await s.server("old", "failed")
    assert failed["error"] == f"cannot connect to {url} (connection refused)"


async def test_an_http_error_names_the_url_and_the_status(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "status.py").write_text(STATUS_SERVER)
    base = f"http://127.0.0.1:{port}"
    write_config(
        tmp_path / "config",
        {
            "denied": {"type": "http", "url": f"{base}/403/mcp"},
            "wrong": {"type": "http", "url": f"{base}/404/mcp"},
            "broken": {"type": "http", "url": f"{base}/500/mcp"},
        },
    )
    process = await anyio.open_process(
        [sys.executable, str(tmp_path / "status.py"), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with anyio.fail_after(30):  # listening
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    await anyio.sleep(0.1)
        async with session(tmp_path) as s:
            denied = await s.server("denied", "failed")
            wrong = await s.server("wrong", "failed")
            broken = await s.server("broken", "failed")
    finally:
        process.terminate()
        with anyio.fail_after(10):
            await process.wait()
        await process.aclose()
    assert denied["error"] == (
        f"{base}/403/mcp answered HTTP 403 Forbidden (check the credentials in its headers)"
    )
    assert wrong["error"] == (
        f"{base}/404/mcp answered HTTP 404 Not Found (is this the server's MCP endpoint?)"
    )
    assert broken["error"] == f"{base}/500/mcp answered HTTP 500 Internal Server Error"


async def test_a_server_writing_no_json_rpc_fails_before_the_startup_timeout(
    tmp_path: Path,
) -> None:
    script = tmp_path / "chatty.sh"
    script.write_text("echo 'Server listening on port 3000'\nsleep 60\n")
    write_config(tmp_path / "config", {"chatty": {"command": "sh", "args": [str(script)]}})
    wrote = (
        'it wrote "Server listening on port 3000" on stdout, which is not MCP\'s JSON-RPC: is '
        "this an MCP server, and does it log to stdout?"
    )
    started = anyio.current_time()
    async with session(tmp_path) as s:
        # while it starts, the state says it already (a headless run's "not ready" line)
        starting = await s.until(
            lambda v: any(x["state"] == "starting" and x.get("error") for x in v["servers"])
        )
        assert starting["servers"][0]["error"] == wrote
        failed = await s.server("chatty", "failed")
    assert anyio.current_time() - started < INIT_TIMEOUT - 5
    assert failed["error"] == wrote


async def test_garbage_then_an_exit_says_both(tmp_path: Path) -> None:
    write_config(tmp_path / "config", {"once": {"command": "sh", "args": ["-c", "echo hi"]}})
    async with session(tmp_path) as s:
        failed = await s.server("once", "failed")
    assert failed["error"] == (
        'the server exited with code 0 before it was ready; it wrote "hi" on stdout, which is '
        "not MCP's JSON-RPC: is this an MCP server, and does it log to stdout?"
    )


def test_the_stderr_gist_prefers_what_went_wrong_and_is_bounded() -> None:
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/srv/server.py", line 3, in <module>\n'
        "    import fastmcp\n"
        "ModuleNotFoundError: No module named 'fastmcp'\n"
    )
    assert stderr_gist(traceback) == "ModuleNotFoundError: No module named 'fastmcp'"
    node = (
        "node:internal/modules/cjs/loader:1228\n  throw err;\n  ^\n\n"
        "Error: Cannot find module '/srv/index.js'\n"
        "    at Module._resolveFilename (node:internal/modules/cjs/loader:1225:15)\n"
        "Node.js v20.11.0\n"
    )
    assert stderr_gist(node) == "Error: Cannot find module '/srv/index.js'"
    # nothing says error: the last distinct lines
    assert stderr_gist("one\ntwo\ntwo\nthree\nfour\n") == "two | three | four"
    long = "\n".join(f"fatal: problem number {n} " + "x" * 150 for n in range(5))
    gist = stderr_gist(long)
    assert len(gist) == GIST_CHARS and gist.endswith("…") and gist.count(" | ") == 1


def test_a_connection_error_names_dns_tls_and_timeouts() -> None:
    url = "https://mcp.example.invalid/mcp"

    def failed(exc: Exception, cause: BaseException | None) -> Exception:
        exc.__cause__ = cause
        return exc

    dns = failed(httpx.ConnectError("[Errno -2]"), socket.gaierror(-2, "Name or service not known"))
    assert connect_problem(dns, url, starting=True) == (
        f"cannot connect to {url} (host name not found: Name or service not known)"
    )
    verify = ssl.SSLCertVerificationError(1, "certificate verify failed")
    verify.verify_message = "self-signed certificate"
    tls = failed(httpx.ConnectError("[SSL]"), verify)
    assert connect_problem(tls, url, starting=True) == (
        f"cannot connect to {url} (TLS certificate not accepted: self-signed certificate)"
    )
    slow = httpx.ConnectTimeout("timed out")
    assert connect_problem(slow, url, starting=True) == f"cannot connect to {url} (timed out)"
    assert connect_problem(ValueError("other"), url, starting=True) is None
