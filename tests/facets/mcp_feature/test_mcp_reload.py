"""A hot reload of facets-mcp: a new generation of the package's code replaces the running one
(docs/design/reload.md#session-worker-reload: hold, reload, release); the servers are reconnected and the conversation goes on."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp_support import SDK_LEAKS, session, stdio_server, write_config

from chord.facet_packages import facet_package_from_folder, load_generation
from pico3.models.faux import faux_response, faux_tool_call

pytestmark = [pytest.mark.anyio, *SDK_LEAKS]

PACKAGE = Path(__file__).parents[3] / "packages" / "facets-mcp"


async def test_a_reload_reconnects_and_keeps_the_conversation(tmp_path: Path) -> None:
    marker = tmp_path / "starts"
    write_config(tmp_path / "config", {"echo": stdio_server("--marker", str(marker))})
    script = [
        faux_response(faux_tool_call("mcp__echo__echo", {"text": "one"}, id="a")),
        faux_response("first done"),
        faux_response(faux_tool_call("mcp__echo__echo", {"text": "two"}, id="b")),
        faux_response("second done"),
    ]
    async with session(tmp_path, script) as s:
        await s.server("echo", "ready")
        (first,) = await s.turn()
        assert first["content"][0]["text"] == "echo: one"

        (package,) = facet_package_from_folder(PACKAGE)
        generation = load_generation(package, "session")
        try:
            release = s.worker.hold()
            try:
                await s.host.reload(list(generation.facets))
            finally:
                release()
            # the old generation stopped its server; the new one started another
            await s.until(
                lambda v: (
                    v["servers"][0]["state"] == "ready"
                    and len(marker.read_text().splitlines()) == 2
                )
            )
            first_again, second = await s.turn()
            assert first_again == first  # the conversation is intact
            assert second["content"][0]["text"] == "echo: two"
            assert [a["callId"] for a in s.approvals] == ["a", "b"]
        finally:
            await generation.dispose()
