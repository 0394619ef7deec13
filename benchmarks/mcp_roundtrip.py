"""MCP over stdio through facets-mcp against the raw ``mcp`` SDK client, in the same run.

The server is the tests' FastMCP server (``tests/facets/mcp_feature/mcp_server.py``). Two
measures, each printed beside its baseline:

* **start**: from the MCP session facet's activation (a fresh facet host over a real harness)
  to "all servers ready" for three stdio servers (each started, initialized, its tools,
  resources and prompts listed), against the SDK starting the same three servers itself
  (``stdio_client`` + ``ClientSession.initialize`` + the same three listings, concurrently).
  ``STARTS`` of each, alternating;
* **round trip**: the ``mcp__echo__echo`` declaration the session facet registered on the
  harness, its ``execute`` called on the worker's loop (the runner, the bounded stdio
  transport, the SDK call, the result mapping), against the SDK's own
  ``ClientSession.call_tool("echo")`` on a second copy of the server. ``WARMUP`` calls, then
  ``CALLS`` timed ones each, interleaved in rounds so both see the same machine load.

Prints medians and p90s and the ratio to the baseline.

Run: ``uv run python benchmarks/mcp_roundtrip.py`` (target: the round trip at most 1.2x the
direct SDK call's median).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.state import Delivery
from facets_mcp.contract import McpServers
from facets_mcp.session import connections_facet, session_facet
from pico3 import (
    HarnessOptions,
    HarnessService,
    HarnessServiceApi,
    MemoryStorage,
    Models,
    harness_session_facet,
)

SERVER = str(Path(__file__).parents[1] / "tests" / "facets" / "mcp_feature" / "mcp_server.py")
SERVERS = 3
STARTS = 5
WARMUP = 20
CALLS = 300
ROUNDS = 6


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _config(tmp: Path, count: int) -> dict[str, Any]:
    config = tmp / "config" / "coding-agent" / "mcp.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    servers = {
        f"s{i}": {"command": sys.executable, "args": [SERVER, "--name", f"s{i}"]}
        for i in range(count)
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    return {
        "models": Models(),
        "workspace": str(tmp),
        "mcp_env": {"XDG_CONFIG_HOME": str(tmp / "config")},
    }


@asynccontextmanager
async def facet_session(tmp: Path, count: int) -> AsyncIterator[tuple[HarnessServiceApi, float]]:
    """A harness with the MCP facets and ``count`` servers; yields it once every server is
    ready, with the seconds that took from the facets' activation."""
    services = _config(tmp, count)
    handles: list[Any] = []

    def probe(env: FacetEnvironment) -> None:
        handles.append(env.use(HarnessService))
        handles.append(env.use(McpServers))

    async with anyio.create_task_group() as group:
        harness_facet = harness_session_facet(
            MemoryStorage, HarnessOptions(services=services), task_group=group
        )
        start = time.perf_counter()
        async with create_facet_host(
            [harness_facet, session_facet, connections_facet, define_facet("bench/probe", probe)]
        ):
            harness, servers = handles
            ready = anyio.Event()

            def listener(value: Any, _ctx: Context, _d: Delivery) -> None:
                states = [s["state"] for s in value["servers"]]
                if len(states) == count and all(s == "ready" for s in states):
                    ready.set()

            stop = servers.state.subscribe(listener)
            with anyio.fail_after(60):
                await ready.wait()
            took = time.perf_counter() - start
            stop()
            yield harness, took
        group.cancel_scope.cancel()


async def sdk_start(count: int) -> float:
    """The SDK starting ``count`` servers concurrently, each initialized and listed."""
    start = time.perf_counter()

    async def one(index: int, done: anyio.Event, release: anyio.Event) -> None:
        params = StdioServerParameters(command=sys.executable, args=[SERVER, "--name", f"s{index}"])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            await client.list_tools()
            await client.list_resources()
            await client.list_prompts()
            done.set()
            await release.wait()

    release = anyio.Event()
    dones = [anyio.Event() for _ in range(count)]
    took = 0.0
    async with anyio.create_task_group() as group:
        for index, done in enumerate(dones):
            group.start_soon(one, index, done, release)
        with anyio.fail_after(60):
            for done in dones:
                await done.wait()
        took = time.perf_counter() - start
        release.set()
    return took


async def starts() -> tuple[list[float], list[float]]:
    facet: list[float] = []
    direct: list[float] = []
    for _ in range(STARTS):
        with tempfile.TemporaryDirectory(prefix="mcp-bench-") as folder:
            async with facet_session(Path(folder), SERVERS) as (_harness, took):
                facet.append(took)
        direct.append(await sdk_start(SERVERS))
    return facet, direct


async def round_trips() -> tuple[list[float], list[float]]:
    direct: list[float] = []
    facet: list[float] = []
    params = StdioServerParameters(command=sys.executable, args=[SERVER, "--name", "s0"])
    with tempfile.TemporaryDirectory(prefix="mcp-bench-") as folder:
        async with (
            facet_session(Path(folder), 1) as (harness, _took),
            stdio_client(params) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            declaration = harness.harness.tools.get("mcp__s0__echo")
            assert declaration is not None

            async def via_sdk() -> None:
                result = await client.call_tool("echo", {"text": "x"})
                assert not result.isError

            async def via_facet() -> None:
                result = await declaration.execute({"text": "x"}, None, BACKGROUND)  # type: ignore[arg-type]
                assert not result.is_error, result

            for _ in range(WARMUP):
                await via_sdk()
                await via_facet()
            per_round = CALLS // ROUNDS
            for _ in range(ROUNDS):
                for fn, sink in ((via_sdk, direct), (via_facet, facet)):
                    for _ in range(per_round):
                        start = time.perf_counter()
                        await fn()
                        sink.append(time.perf_counter() - start)
    return facet, direct


def _line(label: str, values: list[float]) -> str:
    return (
        f"  {label:<48}: p50 {statistics.median(values) * 1e3:7.2f} ms   "
        f"p90 {pct(values, 0.9) * 1e3:7.2f} ms"
    )


async def main() -> None:
    facet_starts, sdk_starts = await starts()
    print(f"{SERVERS} stdio servers, start to all ready, {STARTS} starts each (same run)")
    print(_line("raw mcp SDK, concurrently (baseline)", sdk_starts))
    print(_line("facets-mcp, from the facet's activation", facet_starts))
    ratio = statistics.median(facet_starts) / statistics.median(sdk_starts)
    print(f"  ratio (p50): {ratio:.2f}x")
    facet, direct = await round_trips()
    print(f"stdio echo tool round trip, {len(direct)} calls each (same run, interleaved rounds)")
    print(_line("raw mcp SDK ClientSession.call_tool (baseline)", direct))
    print(_line("facets-mcp mcp__s0__echo execute", facet))
    ratio = statistics.median(facet) / statistics.median(direct)
    print(f"  ratio (p50): {ratio:.2f}x   target <= 1.2x: {'met' if ratio <= 1.2 else 'MISSED'}")


if __name__ == "__main__":
    anyio.run(main)
