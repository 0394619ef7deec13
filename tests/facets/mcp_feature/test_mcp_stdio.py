"""MCP over stdio end to end: a real FastMCP server started by the test, its tools offered to a
faux model as ``mcp__<server>__<tool>``, the calls approved through the approval feature, the
results mapped; hangs, garbage and a dying server fail one call only; restart with backoff."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp_support import SDK_LEAKS, session, stdio_server, write_config

from chord.context import BACKGROUND
from pico3.models.faux import faux_response, faux_tool_call

pytestmark = [pytest.mark.anyio, *SDK_LEAKS]


def calls(*pairs: tuple[str, dict[str, Any]]) -> list[Any]:
    steps = [
        faux_response(faux_tool_call(name, args, id=f"c{i}"))
        for i, (name, args) in enumerate(pairs)
    ]
    return [*steps, faux_response("done")]


async def test_tools_are_offered_called_through_approval_and_mapped(tmp_path: Path) -> None:
    write_config(tmp_path / "config", {"echo": stdio_server()})
    script = calls(
        ("mcp__echo__echo", {"text": "hi"}),
        ("mcp__echo__add", {"a": 2, "b": 3}),
        ("mcp__echo__pixel", {}),
        ("mcp__echo__boom", {}),
    )
    async with session(tmp_path, script) as s:
        ready = await s.server("echo", "ready")
        names = {t["name"] for t in ready["tools"]}
        assert {"mcp__echo__echo", "mcp__echo__add", "mcp__echo__hang"} <= names
        assert ready["resources"] == [
            {
                "uri": "memo://greeting",
                "name": "greeting",
                "description": "A greeting.",
                "mimeType": "text/plain",
            }
        ]
        assert ready["prompts"] == [
            {"name": "review", "arguments": ["code"], "description": "Review some code."}
        ]
        declaration = s.worker.harness.tools.get("mcp__echo__echo")
        assert declaration is not None and declaration.replay == "unsafe"
        assert declaration.parameters["properties"]["text"]["type"] == "string"
        assert declaration.parameters["required"] == ["text"]
        config = await (await s.root()).config(BACKGROUND)
        assert "mcp__echo__echo" in config["selectedTools"]

        echo, add, pixel, boom = await s.turn()
        assert [a["name"] for a in s.approvals] == [
            "mcp__echo__echo",
            "mcp__echo__add",
            "mcp__echo__pixel",
            "mcp__echo__boom",
        ]
        assert s.approvals[0]["args"] == {"text": "hi"}
        assert echo["isError"] is False and echo["content"][0]["text"] == "echo: hi"
        assert add["isError"] is False and '"total": 5' in add["content"][0]["text"].replace(
            ":5", ": 5"
        )
        (image,) = pixel["content"]
        assert image["type"] == "image" and image["mimeType"] == "image/png" and image["data"]
        assert boom["isError"] is True and "kaboom" in boom["content"][0]["text"]
        entries = await (await s.root()).entries(BACKGROUND, limit=100, kind="pi.tool_result")
        details = [e.data.get("details") for e in reversed(entries)]
        assert details[1]["structuredContent"] == {"total": 5}


async def test_a_denied_call_does_not_reach_the_server(tmp_path: Path) -> None:
    marker = tmp_path / "calls"
    write_config(tmp_path / "config", {"echo": stdio_server()})
    async with session(tmp_path, calls(("mcp__echo__die", {})), allow=False) as s:
        await s.server("echo", "ready")
        (result,) = await s.turn()
        assert result["isError"] is True and "denied" in result["content"][0]["text"]
        # the server is still the first process: die never ran
        assert (await s.server("echo", "ready"))["restarts"] == 0
    assert not marker.exists()


async def test_a_hang_and_garbage_fail_that_call_only(tmp_path: Path) -> None:
    # 5 s per call: the hang and the garbage wait it out, and the echo, answered at once, must
    # still come within it on a loaded machine (1 s left a descheduled server no margin).
    write_config(tmp_path / "config", {"echo": stdio_server(timeout=5)})
    script = calls(
        ("mcp__echo__garbage", {}),
        ("mcp__echo__hang", {}),
        ("mcp__echo__echo", {"text": "still here"}),
    )
    async with session(tmp_path, script) as s:
        await s.server("echo", "ready")
        garbage, hang, echo = await s.turn()
        assert hang["isError"] is True
        assert hang["content"][0]["text"].startswith(
            "MCP server 'echo' did not answer hang within 5 s"
        )
        assert garbage["isError"] is True
        assert garbage["content"][0]["text"].startswith(
            "MCP server 'echo' did not answer garbage within 5 s"
        )
        # the line the server wrote is named (on whichever call was waiting when it arrived)
        said = garbage["content"][0]["text"] + hang["content"][0]["text"]
        assert "it also wrote output that is not JSON-RPC: 'this is not json-rpc'" in said
        assert echo["content"][0]["text"] == "echo: still here"


async def test_a_dying_server_fails_the_call_and_is_started_again(tmp_path: Path) -> None:
    marker = tmp_path / "starts"
    write_config(tmp_path / "config", {"echo": stdio_server("--marker", str(marker))})
    script = calls(("mcp__echo__die", {}), ("mcp__echo__echo", {"text": "back"}))
    async with session(tmp_path, calls(("mcp__echo__die", {}))) as s:
        await s.server("echo", "ready")
        (died,) = await s.turn()
        assert died["isError"] is True and "echo" in died["content"][0]["text"]
        failed = await s.server("echo", "failed")
        assert "exited" in failed["error"]
        assert "dying on request" in failed["stderr"]
        assert failed["retryInSeconds"] == 0.5
        assert [t["name"] for t in failed["tools"]]  # kept while it restarts
        again = await s.server("echo", "ready")
        assert again["restarts"] == 1 and "stderr" not in again
    assert len(marker.read_text().splitlines()) == 2
    del script


async def test_a_server_that_cannot_start_shows_its_stderr_and_backs_off(tmp_path: Path) -> None:
    write_config(
        tmp_path / "config",
        {"broken": stdio_server("--fail"), "missing": {"command": str(tmp_path / "nope")}},
    )
    async with session(tmp_path) as s:
        broken = await s.server("broken", "failed")
        assert "missing API key" in broken["stderr"]
        missing = await s.server("missing", "failed")
        assert "nope" in missing["error"]
        later = await s.server("broken", "failed")
        await s.until(
            lambda v: any(x["name"] == "broken" and x["restarts"] >= 1 for x in v["servers"])
        )
        assert later["tools"] == []
        # the agent is usable meanwhile: a turn with no tool runs
        assert await s.turn("hello") == []


async def test_restart_on_request(tmp_path: Path) -> None:
    marker = tmp_path / "starts"
    write_config(tmp_path / "config", {"echo": stdio_server("--marker", str(marker))})
    async with session(tmp_path) as s:
        await s.server("echo", "ready")
        await s.mcp.restart("echo", BACKGROUND)
        await s.until(
            lambda v: v["servers"][0]["restarts"] == 1 and v["servers"][0]["state"] == "ready"
        )
        # the new process wrote its line before it answered initialize
        assert len(marker.read_text().splitlines()) == 2


async def test_a_call_right_after_a_restart_waits_for_the_new_connection(tmp_path: Path) -> None:
    """``/mcp restart`` then at once a call: it is answered by the restarted server, not
    refused with "not ready (ready)" while the old connection is being dropped (the state
    still said ``ready`` then)."""
    write_config(tmp_path / "config", {"echo": stdio_server()})
    script = [
        faux_response(faux_tool_call("mcp__echo__echo", {"text": "after"}, id="c0")),
        faux_response("done"),
    ]
    async with session(tmp_path, script) as s:
        await s.server("echo", "ready")
        await s.mcp.restart("echo", BACKGROUND)
        (result,) = await s.turn()
        view = await s.server("echo", "ready")
    assert result["isError"] is False, result
    assert result["content"][0]["text"] == "echo: after"
    assert view["restarts"] == 1
