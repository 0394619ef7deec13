"""Issue 40: a lingering worker's stdio servers stop while nobody is attached, and start again.

A real FastMCP stdio server (``--marker`` appends its pid each time it starts) under the MCP
facet with an attendance of nobody and ``idle_timeout`` 0.5 s: its process ends and its state
is ``stopped`` with its tools still offered; the next tool call starts it again and gets its
answer; idle again, it stops again. With nobody attached but a call in flight, it is not
stopped under the call. Waits are on the state and on /proc, polled with a deadline.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_support import SDK_LEAKS, WAIT, session, stdio_server

from chord.context import BACKGROUND
from facets_mcp.tui import server_lines
from pico3 import ATTENDANCE_SERVICE
from pico3.models.faux import faux_response, faux_tool_call

pytestmark = [pytest.mark.anyio, *SDK_LEAKS]


class Nobody:
    """A real :class:`pico3.Attendance` of a worker nobody is attached to."""

    count = 0

    async def changed(self) -> None:
        await anyio.sleep_forever()


def configure(tmp: Path, marker: Path, idle: float) -> None:
    path = tmp / "config" / "coding-agent" / "mcp.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    server = stdio_server("--marker", str(marker), "--extras")
    path.write_text(json.dumps({"idle_timeout": idle, "mcpServers": {"echo": server}}))


def pids(marker: Path) -> list[int]:
    return [int(line) for line in marker.read_text().split()] if marker.exists() else []


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def until(condition: Any) -> None:
    """Poll ``condition`` (a file's lines, the clock) with a deadline."""
    with anyio.fail_after(WAIT):
        while not condition():  # noqa: ASYNC110 - a file or the clock: nothing to wait on
            await anyio.sleep(0.05)


async def gone(pid: int) -> None:
    """Wait until process ``pid`` has exited (its pidfd turns readable)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        with anyio.fail_after(WAIT):
            await anyio.wait_readable(fd)
    finally:
        os.close(fd)


async def test_an_unattended_server_stops_and_the_next_call_starts_it_again(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "started"
    configure(tmp_path, marker, 0.5)
    script = [
        faux_response(faux_tool_call("mcp__echo__echo", {"text": "again"}, id="c1")),
        faux_response("done"),
    ]
    async with session(tmp_path, script, services={ATTENDANCE_SERVICE: Nobody()}) as s:
        await s.server("echo", "ready")
        await until(lambda: len(pids(marker)) == 1)
        (first,) = pids(marker)
        stopped = await s.server("echo", "stopped")
        assert "mcp__echo__echo" in {t["name"] for t in stopped["tools"]}  # still offered
        assert any("starts again on the next use" in line for line in server_lines(stopped))
        await gone(first)
        assert s.worker.harness.tools.get("mcp__echo__echo") is not None

        (result,) = await s.turn()  # the call wakes it and waits for it
        assert result["content"][0]["text"] == "echo: again"
        assert len(pids(marker)) == 2 and pids(marker)[1] != first
        second = pids(marker)[1]
        await s.server("echo", "stopped")  # idle again: stopped again
        await gone(second)
        assert s.state().value["servers"][0]["restarts"] == 0  # sleeping is not failing


async def test_a_call_in_flight_is_not_cut_by_the_idle_stop(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    release = tmp_path / "release"
    os.mkfifo(release)
    idle = 0.3
    configure(tmp_path, marker, idle)
    script = [
        faux_response(faux_tool_call("mcp__echo__progress", {"release": str(release)}, id="c1")),
        faux_response("done"),
    ]
    async with session(tmp_path, script, services={ATTENDANCE_SERVICE: Nobody()}) as s:
        await s.server("echo", "ready")
        handle = await (await s.root()).send("go", BACKGROUND)
        # opening the FIFO returns once the tool opened it to read: the call is running (in
        # the first process, or in a second one if the first had already gone idle)
        with anyio.fail_after(WAIT):
            fifo = await anyio.to_thread.run_sync(lambda: open(release, "w"))  # noqa: SIM115
        serving = pids(marker)
        states: list[str] = []
        stop = s.state().subscribe(
            lambda value, _ctx, _d: states.extend(x["state"] for x in value["servers"])
        )
        began = anyio.current_time()
        # hold the call well past idle_timeout (a deadline on the clock, not a sync sleep)
        await until(lambda: anyio.current_time() - began > 4 * idle)
        stop()
        assert "stopped" not in states, states  # never stopped under the call
        assert alive(serving[-1])
        with fifo:
            fifo.write("go\n")
        with anyio.fail_after(WAIT):
            await handle.wait(BACKGROUND)
        (result,) = await s.results()
        assert result["isError"] is False and "go" in result["content"][0]["text"], result
        assert pids(marker) == serving  # the process that ran the call answered it
        await s.server("echo", "stopped")  # and once the call is over, it is stopped


def test_idle_timeout_is_read_next_to_mcp_servers_and_a_bad_one_named() -> None:
    from facets_mcp.config import parse_settings

    assert parse_settings({"idle_timeout": 0}, "mcp.json") == ({"idle_timeout": 0.0}, [])
    assert parse_settings({"idle_timeout": "soon"}, "mcp.json") == (
        {},
        [
            "mcp.json: idle_timeout must be a number of seconds >= 0 (0: never stop), got "
            "'soon'; the default 60 is used"
        ],
    )
