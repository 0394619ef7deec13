"""A session worker for the two-process approval tests, run as a separate process.

Usage: ``python session_worker.py STATE_DIR SOCKET_PATH [--hold]``.

It composes what the coding agent's worker composes: pico3's harness session facet on JSONL
storage in ``STATE_DIR`` (a faux model answering with ``faux_echo``), the approval session facet,
and a small worker facet that registers a ``bash`` tool. On a fresh session it sends
``"tool:bash"`` (the model calls ``bash``); on a restarted one, recovery continues the pending
call. It serves its services on ``SOCKET_PATH`` and reports on stdout, one line each:

* ``DIALOG <key>`` — an approval dialog instance opened in this process (an in-process
  observer of ``pi.approval-dialog`` sees it);
* ``HELD`` — with ``--hold``, a second ``before_tool`` hook (namespace ``gate``) holds the call
  *after* the approval hook recorded its decision;
* ``RAN`` — the ``bash`` tool ran;
* ``READY`` — serving.

It exits when its stdin reaches end of file, so it never outlives the test that started it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.transport import serve_unix
from chord.wire import provider_handler
from facets_approval.contract import ApprovalDialogs
from facets_approval.plugin import chord_facets
from pico3 import HarnessService, harness_session_facet
from pico3.harness import Harness, HarnessOptions
from pico3.models.faux import FauxProvider, faux_echo
from pico3.storage import JsonlStorage
from pico3.tools import ToolDeclaration, ToolResult
from pico3.turn.models import Models
from pico3.turn.tool import TOOL_KIND

MODEL = {"provider": "faux", "modelId": "faux-1"}


def report(line: str) -> None:
    print(line, flush=True)


async def run_bash(args: dict[str, Any], api: Any, ctx: Context) -> ToolResult:
    report("RAN")
    return ToolResult.text("bash ran")


def install_gate(h: Harness) -> Callable[[], None]:
    ns = h.namespace("gate", {})

    async def before_tool(call: dict[str, Any], api: Any, ctx: Context) -> None:
        report("HELD")
        await anyio.sleep_forever()

    unhook = h.hooks(ns, TOOL_KIND, {"before_tool": before_tool})

    def undo() -> None:
        unhook()
        ns.unregister()

    return undo


def worker(env: FacetEnvironment, hold: bool) -> None:
    harness = env.use(HarnessService)

    async def seen(dialog: Any, ctx: Context) -> None:
        request = dialog.request.value
        report(f"DIALOG {request['conversationId']}:{request['callId']}")

    env.observe(ApprovalDialogs, seen)

    def activate() -> None:
        bash = ToolDeclaration("bash", "Run a command.", {"type": "object"}, run_bash)
        env.own(harness.add_registration(lambda h: h.register_tool(bash)))
        if hold:
            env.own(harness.add_registration(install_gate))

    env.on_activate(activate)


async def main(state: str, socket: str, hold: bool) -> None:
    models = Models([FauxProvider([faux_echo] * 20)])
    options = HarnessOptions(services={"models": models})
    storage = Path(state) / "session"
    workers: list[Any] = []

    def setup(env: FacetEnvironment) -> None:
        workers.append(env.use(HarnessService))
        worker(env, hold)

    async with anyio.create_task_group() as group:
        facets = [
            harness_session_facet(
                lambda: JsonlStorage(storage, fsync=False), options, task_group=group
            ),
            *chord_facets("session"),
            define_facet("test/worker", setup),
        ]
        async with create_facet_host(facets) as host:
            (service,) = workers
            await service.resume(BACKGROUND)
            root = await service.harness.root(BACKGROUND)
            if not await root.entries(BACKGROUND, limit=1):  # a fresh session
                await root.set_config({"model": MODEL, "selectedTools": ["bash"]}, BACKGROUND)
                await root.send("tool:bash", BACKGROUND)
            await group.start(serve_unix, socket, provider_handler(host.services))
            report("READY")
            await anyio.to_thread.run_sync(sys.stdin.read)  # EOF: the test is done with us
        group.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], "--hold" in sys.argv[3:])
