"""MCP tool round trip over stdio: facets-mcp's tool against a direct SDK client, same run.

One FastMCP server (``tests/facets/mcp_feature/mcp_server.py``) is started twice over stdio:

* **direct**: the SDK's own ``ClientSession.call_tool("echo")`` from the benchmark's loop;
* **facets-mcp**: the ``mcp__echo__echo`` declaration the session facet registered on a real
  harness, its ``execute`` called from the worker's loop: the hop to the MCP event loop (a
  thread), the runner, the SDK call, the result mapping and the hop back.

Each side does ``WARMUP`` calls, then ``CALLS`` timed ones, interleaved in rounds so both see the
same machine load. Prints the medians and p90s and the difference.

Run: ``uv run python benchmarks/mcp_roundtrip.py`` (target: the facet adds <= 5 ms to the direct
median).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
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
WARMUP = 20
CALLS = 300
ROUNDS = 6


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="mcp-bench-"))
    config = tmp / "config" / "coding-agent" / "mcp.json"
    config.parent.mkdir(parents=True)
    config.write_text(
        json.dumps({"mcpServers": {"echo": {"command": sys.executable, "args": [SERVER]}}})
    )
    services = {
        "models": Models(),
        "workspace": str(tmp),
        "mcp_env": {"XDG_CONFIG_HOME": str(tmp / "config")},
    }
    handles: list[Any] = []

    def probe(env: FacetEnvironment) -> None:
        handles.append(env.use(HarnessService))
        handles.append(env.use(McpServers))

    direct: list[float] = []
    facet: list[float] = []
    params = StdioServerParameters(command=sys.executable, args=[SERVER])
    async with anyio.create_task_group() as group:
        harness_facet = harness_session_facet(
            MemoryStorage, HarnessOptions(services=services), task_group=group
        )
        async with (
            create_facet_host(
                [
                    harness_facet,
                    session_facet,
                    connections_facet,
                    define_facet("bench/probe", probe),
                ]
            ),
            stdio_client(params) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            harness: HarnessServiceApi = handles[0]
            servers = handles[1]
            ready = anyio.Event()

            def listener(value: Any, _ctx: Context, _d: Delivery) -> None:
                if any(s["state"] == "ready" for s in value["servers"]):
                    ready.set()

            stop = servers.state.subscribe(listener)
            with anyio.fail_after(30):
                await ready.wait()
            stop()
            declaration = harness.harness.tools.get("mcp__echo__echo")
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
        group.cancel_scope.cancel()

    d50, f50 = statistics.median(direct), statistics.median(facet)
    print(f"MCP stdio echo round trip, {len(direct)} calls each (same run, interleaved rounds)")
    print(
        f"  direct SDK ClientSession.call_tool : p50 {d50 * 1e3:6.2f} ms   p90 {pct(direct, 0.9) * 1e3:6.2f} ms"
    )
    print(
        f"  facets-mcp mcp__echo__echo execute : p50 {f50 * 1e3:6.2f} ms   p90 {pct(facet, 0.9) * 1e3:6.2f} ms"
    )
    added = (f50 - d50) * 1e3
    print(f"  added by facets-mcp (p50): {added:+.2f} ms")
    print(f"target <= 5 ms added: {'met' if added <= 5 else 'MISSED'}")


if __name__ == "__main__":
    anyio.run(main)
