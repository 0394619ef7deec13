"""A session worker for the subagent SIGKILL test, run as a separate process.

Usage: ``python subagent_worker.py STATE_DIR``. JSONL storage (fsync) in STATE_DIR, a
faux model: the root asks for one subagent; the subagent calls ``wait_gate`` (a replay-safe tool
that returns once a line ``open`` arrives on stdin), then reports. On a fresh session it sends ``go``; on a
restarted one recovery carries the turn and the subagent on. Prints ``RUNNING <child id>`` once
the subagent's ``wait_gate`` call started, and ``DONE <json>`` with the root's tool results and
the number of conversations once the root is idle with a result.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio

from chord.context import BACKGROUND
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from facets_subagents.plugin import chord_facets
from pico3 import (
    HarnessOptions,
    HarnessService,
    HarnessServiceApi,
    JsonlStorage,
    Models,
    ToolDeclaration,
    ToolResult,
    harness_session_facet,
)
from pico3.models.faux import FauxProvider, FauxResponse, FauxState, faux_response, faux_tool_call
from pico3.models.provider import Request, ToolResultMessage, UserMessage

MODEL = {"provider": "faux", "modelId": "faux-1"}


def report(line: str) -> None:
    print(line, flush=True)


def model(request: Request, state: FauxState) -> FauxResponse:
    last = request.messages[-1]
    if not any("subagent" in s for s in request.system):
        if isinstance(last, UserMessage):
            return faux_response(
                faux_tool_call(
                    "agent", {"description": "wait", "prompt": "wait for the gate"}, id="a1"
                )
            )
        return faux_response("parent done")
    if isinstance(last, ToolResultMessage):
        return faux_response("report: the gate opened")
    return faux_response(faux_tool_call("wait_gate", {}, id="w1"))


def gate_tool(gate: anyio.Event) -> ToolDeclaration:
    async def execute(args: dict[str, Any], api: Any, ctx: Any) -> ToolResult:
        report(f"RUNNING {api.conversation_id}")
        await gate.wait()
        return ToolResult.text("gate open")

    return ToolDeclaration(
        name="wait_gate",
        description="Wait for the gate.",
        parameters={"type": "object", "properties": {}},
        execute=execute,
        replay="safe",
    )


async def read_stdin(gate: anyio.Event, eof: anyio.Event) -> None:
    """``open`` on stdin opens the gate; end of file ends the worker."""
    async for line in anyio.wrap_file(sys.stdin):
        if line.strip() == "open":
            gate.set()
    eof.set()


async def main(state: str) -> None:
    gate, eof = anyio.Event(), anyio.Event()
    services = {"models": Models([FauxProvider([model] * 50)]), "workspace": state}
    workers: list[HarnessServiceApi] = []

    def worker(env: FacetEnvironment) -> None:
        harness = env.use(HarnessService)
        workers.append(harness)
        env.on_activate(
            lambda: env.own(harness.add_registration(lambda h: h.register_tool(gate_tool(gate))))
        )

    async with anyio.create_task_group() as group:
        group.start_soon(read_stdin, gate, eof)
        facets = [
            harness_session_facet(
                lambda: JsonlStorage(str(Path(state) / "store"), fsync=True),
                HarnessOptions(services=services),
                task_group=group,
            ),
            define_facet("test/worker", worker),
            *chord_facets("session"),
        ]
        async with create_facet_host(facets):
            (service,) = workers
            await service.resume(BACKGROUND)
            root = await service.harness.root(BACKGROUND)
            if not await root.entries(BACKGROUND, limit=1):
                await root.set_config(
                    {"model": MODEL, "selectedTools": ["agent", "wait_gate"]}, BACKGROUND
                )
                await root.send("go", BACKGROUND)
            while True:
                await root.wait_for_idle(BACKGROUND)
                entries = await root.entries(BACKGROUND, limit=50, kind="pi.tool_result")
                if entries:
                    break
            results = [e.model[0]["content"][0]["text"] for e in reversed(entries)]  # pyright: ignore[reportIndexIssue]
            conversations = await service.harness.kernel.commit(
                lambda tx, _c: sum(tx.conversation(i) is not None for i in range(100)), BACKGROUND
            )
            report("DONE " + json.dumps({"results": results, "conversations": conversations}))
            await eof.wait()
        group.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
