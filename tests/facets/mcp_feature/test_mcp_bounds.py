"""Bounds on what a server can do to the worker (issue 40 item 5): a message over
``max_message_bytes`` is refused with a message naming the server and the cap, without the
worker ever holding it, and the connection goes on."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp_support import SDK_LEAKS, SERVER, free_port, session, stdio_server, write_config

from chord.context import BACKGROUND
from facets_mcp.stdio import _request_id  # pyright: ignore[reportPrivateUsage]
from pico3.models.faux import faux_response, faux_tool_call

pytestmark = [pytest.mark.anyio, *SDK_LEAKS]

MIB = 1024 * 1024


def _peak_rss() -> int:
    """This process's peak resident size in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


async def test_an_oversized_reply_is_refused_naming_the_server_and_the_cap(tmp_path: Path) -> None:
    path = write_config(tmp_path / "config", {"big": stdio_server("--big")})
    path.write_text(json.dumps({**json.loads(path.read_text()), "max_message_bytes": MIB}))
    script = [
        faux_response(faux_tool_call("mcp__big__big", {"megabytes": 40}, id="c0")),
        faux_response(faux_tool_call("mcp__big__big", {"megabytes": 0}, id="c1")),
        faux_response(faux_tool_call("mcp__big__echo", {"text": "still here"}, id="c2")),
        faux_response("done"),
    ]
    async with session(tmp_path, script) as s:
        await s.server("big", "ready")
        before = _peak_rss()
        huge, empty, echo = await s.turn()
        grown = _peak_rss() - before
    assert huge["isError"] is True
    text = huge["content"][0]["text"]
    assert text.startswith("MCP server 'big' sent a message of more than 1048576 bytes")
    assert "max_message_bytes = 1048576" in text and "mcp.json" in text
    # the 40 MB answer was skipped, never held (the SDK's buffer would grow by > 80 MB)
    assert grown < 30 * MIB, f"the worker grew by {grown / MIB:.0f} MiB"
    assert empty["isError"] is False and echo["content"][0]["text"] == "echo: still here"


def test_the_id_of_a_refused_answer_is_read_from_its_head_only() -> None:
    assert _request_id(b'{"jsonrpc":"2.0","id":7,"result":{"content":[') == 7
    assert _request_id(b'{"id": "a\\"b", "jsonrpc":"2.0"') == 'a"b'
    # an "id" inside the result is not the answer's
    assert _request_id(b'{"jsonrpc":"2.0","result":{"id":3}') is None
    assert _request_id(b"not json at all") is None


@pytest.mark.parametrize("answers", ["sse", "json"])
async def test_an_oversized_http_reply_is_refused_too(tmp_path: Path, answers: str) -> None:
    port = free_port()
    json_response = ["--json-response"] if answers == "json" else []
    process = await anyio.open_process(
        [sys.executable, SERVER, "--http", str(port), "--name", "web", "--big", *json_response],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        server = {"type": "http", "url": f"http://127.0.0.1:{port}/mcp"}
        path = write_config(tmp_path / "config", {"web": server})
        path.write_text(json.dumps({**json.loads(path.read_text()), "max_message_bytes": MIB}))
        script = [
            faux_response(faux_tool_call("mcp__web__big", {"megabytes": 8}, id="c0")),
            faux_response(faux_tool_call("mcp__web__echo", {"text": "still here"}, id="c1")),
            faux_response("done"),
        ]
        async with session(tmp_path, script) as s:
            await s.server("web", "failed", "ready")
            await s.mcp.restart("web", BACKGROUND)  # the server may have come after the first try
            await s.server("web", "ready")
            huge, echo = await s.turn()
        assert huge["isError"] is True
        assert huge["content"][0]["text"].startswith(
            "MCP server 'web' sent a message of more than 1048576 bytes"
        )
        assert echo["content"][0]["text"] == "echo: still here"
    finally:
        process.terminate()
        with anyio.fail_after(10):
            await process.wait()
        await process.aclose()
