"""``web_fetch`` against a real local HTTP server (never the internet).

The server is on 127.0.0.1, a loopback address ``web_fetch`` refuses by default: the tests that
read pages allow it with ``WebSettings(allow_private=("127.0.0.1",))``, as a user's
``web_fetch.allow_private`` would; the refusal tests leave it out.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from coding_agent.worker.tools import ToolContext
from coding_agent.worker.tools import web_fetch as web_fetch_module
from coding_agent.worker.tools.web import WebSettings
from coding_agent.worker.tools.web_fetch import web_fetch_tool

from .web_server import Handler, Server, serve

pytestmark = pytest.mark.anyio

LOCAL = WebSettings(allow_private=("127.0.0.1",))

PAGE = """<!doctype html><html><head><title>The  Guide</title>
<style>body { color: red }</style><script>var secret = "tracking";</script></head>
<body><h1>Getting started</h1><p>Read the <a href="/docs">docs</a> first.</p>
<ul><li>one</li><li>two</li></ul><img src="data:image/png;base64,AAAA" alt="x">
<form><input name="q"></form></body></html>"""

release = threading.Event()


def _long(handler: Handler) -> None:
    rows = "".join(f"<p>row {n}</p>" for n in range(1500))
    handler.reply(200, f"<html><body>{rows}</body></html>", {"Content-Type": "text/html"})


def _stall(handler: Handler) -> None:
    release.wait(60)
    handler.reply(200, "late", {"Content-Type": "text/plain"})


ROUTES = {
    "/page": lambda h: h.reply(200, PAGE, {"Content-Type": "text/html; charset=utf-8"}),
    "/long": _long,
    "/data": lambda h: h.reply(200, '{"a":[1,2],"b":"ü"}', {"Content-Type": "application/json"}),
    "/notes.txt": lambda h: h.reply(200, "plain\ntext\n", {"Content-Type": "text/plain"}),
    "/image": lambda h: h.reply(
        200, b"\x89PNG\r\n\x1a\n" + b"\0" * 64, {"Content-Type": "image/png"}
    ),
    "/moved": lambda h: h.reply(302, "", {"Location": "/page"}),
    "/loop": lambda h: h.reply(302, "", {"Location": "/loop"}),
    "/to-localhost": lambda h: h.reply(
        302, "", {"Location": f"http://localhost:{h.server_info.port}/page"}
    ),
    "/to-public": lambda h: h.reply(301, "", {"Location": "https://example.com/x"}),
    "/gone": lambda h: h.reply(
        410,
        "<html><body><p>This page was removed.</p></body></html>",
        {"Content-Type": "text/html"},
    ),
    "/stall": _stall,
    "/untyped": lambda h: h.reply(
        200, "<!DOCTYPE html><h1>Hi</h1>", {"Content-Type": "application/octet-stream"}
    ),
    "/blob": lambda h: h.reply(
        200, b"\x00\x01binary", {"Content-Type": "application/octet-stream"}
    ),
    "/denied.png": lambda h: h.reply(403, b"\x89PNG", {"Content-Type": "image/png"}),
}


@pytest.fixture
def server() -> Iterator[Server]:
    release.clear()
    with serve(ROUTES) as running:
        yield running
    release.set()


async def _fetch(args: dict[str, object], settings: WebSettings = LOCAL, cwd: Path = Path(".")):
    return await web_fetch_tool(settings).execute(args, ToolContext(cwd=cwd))


async def test_html_becomes_markdown_without_scripts_or_styles(server: Server) -> None:
    result = await _fetch({"url": server.url("/page")})
    text = result.plain_text
    assert not result.is_error, text
    assert f"URL: {server.url('/page')}" in text
    assert "Title: The Guide" in text
    assert "# Getting started" in text
    assert "[docs](/docs)" in text
    assert "- one\n- two" in text
    assert "tracking" not in text and "color: red" not in text and "data:image" not in text
    assert result.details is not None and result.details["content_type"] == "text/html"


async def test_a_long_page_is_cut_with_a_hint_to_continue(server: Server) -> None:
    first = await _fetch({"url": server.url("/long")})
    assert "Use offset=" in first.plain_text
    assert "row 0" in first.plain_text and "row 1499" not in first.plain_text
    offset = int(first.plain_text.rsplit("Use offset=", 1)[1].split(" ")[0])
    later = await _fetch({"url": server.url("/long"), "offset": offset})
    assert "row 1499" in later.plain_text
    assert "row 0\n" not in later.plain_text
    window = await _fetch({"url": server.url("/long"), "offset": 3, "limit": 2})
    assert "more lines. Use offset=5 to continue." in window.plain_text


async def test_a_body_past_the_download_cap_is_read_only_to_the_cap(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(web_fetch_module, "MAX_DOWNLOAD", 2000)
    result = await _fetch({"url": server.url("/long")})
    assert "only its start was read" in result.plain_text
    assert result.details is not None and result.details["bytes"] == 2000


async def test_json_is_pretty_printed_and_text_returned_as_is(server: Server) -> None:
    data = await _fetch({"url": server.url("/data")})
    assert json.dumps({"a": [1, 2], "b": "ü"}, indent=2, ensure_ascii=False) in data.plain_text
    plain = await _fetch({"url": server.url("/notes.txt")})
    assert plain.plain_text.endswith("plain\ntext")


async def test_an_untyped_body_is_sniffed(server: Server) -> None:
    page = await _fetch({"url": server.url("/untyped")})
    assert not page.is_error and "# Hi" in page.plain_text
    blob = await _fetch({"url": server.url("/blob")})
    assert blob.is_error and "application/octet-stream, which web_fetch does not read" in (
        blob.plain_text
    )


async def test_a_binary_type_is_refused_naming_it(server: Server) -> None:
    result = await _fetch({"url": server.url("/image")})
    assert result.is_error
    assert "image/png, which web_fetch does not read" in result.plain_text
    assert "curl -L -o FILE" in result.plain_text


async def test_a_same_host_redirect_is_followed(server: Server) -> None:
    result = await _fetch({"url": server.url("/moved")})
    assert not result.is_error
    assert f"URL: {server.url('/page')}" in result.plain_text
    assert "# Getting started" in result.plain_text


async def test_a_redirect_loop_stops(server: Server) -> None:
    result = await _fetch({"url": server.url("/loop")})
    assert result.is_error and "redirected more than 5 times" in result.plain_text


async def test_a_redirect_to_a_loopback_host_is_refused(server: Server) -> None:
    """127.0.0.1 is allowed, ``localhost`` is not: the redirect's target is checked on its own."""
    result = await _fetch({"url": server.url("/to-localhost")})
    assert result.is_error
    assert "refused" in result.plain_text
    assert "localhost (127.0.0.1) is a loopback address" in result.plain_text
    assert "web_fetch.allow_private" in result.plain_text
    assert all(seen.path != "/page" for seen in server.seen)


async def test_a_redirect_to_another_public_host_is_reported_not_followed(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def public(host: str, port: int, settings: WebSettings) -> list[str]:
        return ["93.184.215.14"]  # example.com's: resolving it would need the internet

    monkeypatch.setattr(web_fetch_module, "resolve_checked", public)
    result = await _fetch({"url": server.url("/to-public")})
    assert not result.is_error
    assert "redirects to another host: https://example.com/x" in result.plain_text
    assert "call web_fetch again with url='https://example.com/x'" in result.plain_text


async def test_loopback_is_refused_unless_allowed(server: Server) -> None:
    result = await _fetch({"url": server.url("/page")}, WebSettings())
    assert result.is_error
    assert "127.0.0.1 is a loopback address" in result.plain_text
    assert 'allow_private = ["127.0.0.1"]' in result.plain_text
    assert server.seen == []  # refused before connecting


async def test_with_the_sandbox_on_only_its_domains_are_reached(server: Server) -> None:
    settings = WebSettings(allow_private=("127.0.0.1",), sandbox_domains=("pypi.org",))
    result = await _fetch({"url": server.url("/page")}, settings)
    assert result.is_error
    assert "127.0.0.1 is not in sandbox.allow_domains" in result.plain_text
    assert "listed: pypi.org" in result.plain_text
    # an allowed domain means its web ports (80, 443): the test server's port is another
    domain = WebSettings(allow_private=("127.0.0.1",), sandbox_domains=("127.0.0.1",))
    port = urlsplit(server.url("/page")).port
    result = await _fetch({"url": server.url("/page")}, domain)
    assert result.is_error
    assert f"port {port} of 127.0.0.1 is not allowed by sandbox.allow_domains" in result.plain_text
    assert f'Add "127.0.0.1:{port}" to sandbox.allow_domains' in result.plain_text
    assert server.seen == []  # refused before connecting
    allowed = WebSettings(allow_private=("127.0.0.1",), sandbox_domains=(f"127.0.0.1:{port}",))
    assert not (await _fetch({"url": server.url("/page")}, allowed)).is_error


async def test_other_schemes_are_refused() -> None:
    result = await _fetch({"url": "file:///etc/passwd"})
    assert result.is_error and "http:// and https:// URLs only, not file" in result.plain_text


async def test_an_error_status_is_an_error_with_the_page_text(server: Server) -> None:
    result = await _fetch({"url": server.url("/gone")})
    assert result.is_error
    assert "answered HTTP 410" in result.plain_text
    assert "This page was removed." in result.plain_text


async def test_an_error_status_with_a_binary_body_names_the_status(server: Server) -> None:
    result = await _fetch({"url": server.url("/denied.png")})
    assert result.is_error and "answered HTTP 403 (image/png)" in result.plain_text


async def test_a_server_that_does_not_answer_times_out(server: Server) -> None:
    result = await _fetch({"url": server.url("/stall"), "timeout": 0.5})
    release.set()
    assert result.is_error
    assert "timed out after 0.5 s" in result.plain_text


async def test_a_closed_port_is_a_connection_error() -> None:
    with serve({}) as gone:
        port = gone.port
    result = await _fetch({"url": f"http://127.0.0.1:{port}/"})
    assert result.is_error and f"Cannot connect to 127.0.0.1:{port}" in result.plain_text
