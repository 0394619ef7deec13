"""Shared pieces of the MCP feature's tests: configuration files, a session host with the MCP
and approval session facets, and waits on the ``mcp.servers`` state."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, FacetHost, create_facet_host, define_facet
from chord.state import Delivery
from facets_approval.contract import ApprovalDialogs
from facets_approval.session import session_facet as approval_facet
from facets_mcp.contract import McpServers
from facets_mcp.session import connections_facet
from facets_mcp.session import session_facet as mcp_facet
from pico3 import (
    ConversationHandle,
    HarnessOptions,
    HarnessService,
    HarnessServiceApi,
    MemoryStorage,
    Models,
    harness_session_facet,
)
from pico3.models.faux import FauxProvider, FauxStep

SERVER = str(Path(__file__).parent / "mcp_feature" / "mcp_server.py")
MODEL = {"provider": "faux", "modelId": "faux-1"}
WAIT = 60  # generous: a loaded 2-core machine starts servers slowly (a deadline, not a pace)

SDK_LEAKS = [
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <function MemoryObject:pytest.PytestUnraisableExceptionWarning"
    )
]
"""The SDK's ``stdio_client`` leaks its memory streams when it is cancelled while it spawns
the server (it closes them on ``OSError`` only); a shutdown during a start does that."""


def stdio_server(*args: str, **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [SERVER, *args], **extra}


def write_config(home: Path, servers: dict[str, Any], *, project: Path | None = None) -> Path:
    path = (project / ".mcp.json") if project else (home / "coding-agent" / "mcp.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Session:
    worker: HarnessServiceApi
    host: FacetHost
    group: TaskGroup
    mcp: Any = None
    approvals: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])

    async def root(self) -> ConversationHandle:
        return await self.worker.harness.root(BACKGROUND)

    def state(self) -> Any:
        return self.mcp.state

    async def until(self, predicate: Callable[[Any], bool]) -> Any:
        """Wait (on state deliveries, never a timer) until ``predicate(state value)``."""
        state = self.state()
        changed = anyio.Event()

        def listener(_value: Any, _ctx: Context, _delivery: Delivery) -> None:
            changed.set()

        stop = state.subscribe(listener)
        try:
            with anyio.fail_after(WAIT):
                while not predicate(state.value):
                    await changed.wait()
                    changed = anyio.Event()
        finally:
            stop()
        return state.value

    async def server(self, name: str, *states: str) -> dict[str, Any]:
        def find(value: Any) -> dict[str, Any] | None:
            for s in (value or {}).get("servers", []):
                if s["name"] == name and s["state"] in states:
                    return s
            return None

        return find(await self.until(lambda v: find(v) is not None)) or {}

    async def results(self) -> list[dict[str, Any]]:
        entries = await (await self.root()).entries(BACKGROUND, limit=100)
        return [e.model[0] for e in reversed(entries) if e.kind == "pi.tool_result"]  # pyright: ignore[reportIndexIssue]

    async def turn(self, text: str = "go") -> list[dict[str, Any]]:
        handle = await (await self.root()).send(text, BACKGROUND)
        with anyio.fail_after(WAIT):
            await handle.wait(BACKGROUND)
        return await self.results()


@asynccontextmanager
async def session(
    tmp: Path,
    script: Sequence[FauxStep] = (),
    *,
    trusted: bool = False,
    allow: bool = True,
    services: dict[str, Any] | None = None,
    extra_facets: Sequence[Any] = (),
    gate: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
) -> AsyncIterator[Session]:
    """A session host: pico3's harness facet, the approval facet (its dialogs answered by a
        test facet: allow, or deny), the MCP facet; resumed. ``services`` join the harness's
        (``mcp_env`` entries are added to the config's environment); ``extra_facets`` join them (the
    subagents feature's, say); ``gate(request)``, when given, is awaited before each approval
    dialog is answered (a test holds a call there while it acts)."""
    extra = dict(services or {})
    services = {
        "models": Models([FauxProvider(list(script))]),
        "workspace": str(tmp),
        "project_root": str(tmp),
        "project_trusted": trusted,
        **extra,
        "mcp_env": {
            "XDG_CONFIG_HOME": str(tmp / "config"),
            "HOME": str(tmp),
            **extra.get("mcp_env", {}),
        },
    }
    options = HarnessOptions(services=services)
    workers: list[HarnessServiceApi] = []
    approvals: list[dict[str, Any]] = []
    servers: list[Any] = []

    def worker(env: FacetEnvironment) -> None:
        workers.append(env.use(HarnessService))
        servers.append(env.use(McpServers))

        async def decide(dialog: Any, ctx: Context) -> None:
            approvals.append(dict(dialog.request.value))
            if gate is not None:
                await gate(dict(dialog.request.value))
            await dialog.decide({"decision": "allow" if allow else "deny", "by": "test"}, ctx)

        env.observe(ApprovalDialogs, decide)

    async with anyio.create_task_group() as group:
        harness = harness_session_facet(MemoryStorage, options, task_group=group)
        facets = [
            harness,
            approval_facet,
            mcp_facet,
            connections_facet,
            define_facet("test/worker", worker),
            *extra_facets,
        ]
        async with create_facet_host(facets) as host:
            (service,) = workers
            await service.resume(BACKGROUND)
            root = await service.harness.root(BACKGROUND)
            await root.set_config({"model": MODEL}, BACKGROUND)
            yield Session(service, host, group, servers[0], approvals)
        group.cancel_scope.cancel()
