"""A session worker for the two-process question tests, run as a separate process.

Usage: ``python session_worker.py STATE_DIR SOCKET_PATH``.

It composes pico3's harness session facet on JSONL storage in ``STATE_DIR`` (a faux model that
calls ``question`` when the user says ``ask`` and ends the turn after the tool result) with the
question session facet, found through the package's entry-point module. On a fresh session it
sends ``"ask"``; on a restarted one, recovery continues the pending call (``question`` is
``replay: "safe"``, so it is invoked again). It serves its services on ``SOCKET_PATH`` and
reports on stdout, one line each:

* ``DIALOG <key>`` — a question dialog instance opened in this process;
* ``RESULT <text>`` — the question's tool result, once the turn is over;
* ``READY`` — serving.

It exits when its stdin reaches end of file, so it never outlives the test that started it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.transport import serve_unix
from chord.wire import provider_handler
from facets_question.contract import QuestionDialogs
from facets_question.plugin import chord_facets
from pico3 import HarnessService, HarnessServiceApi, harness_session_facet
from pico3.harness import HarnessOptions
from pico3.models.faux import (
    FauxProvider,
    FauxResponse,
    FauxState,
    faux_response,
    faux_tool_call,
)
from pico3.models.provider import Request, ToolResultMessage
from pico3.storage import JsonlStorage
from pico3.turn.models import Models

MODEL = {"provider": "faux", "modelId": "faux-1"}
QUESTION = {"question": "Which colour?", "options": ["red", "green"]}


def report(line: str) -> None:
    print(line, flush=True)


def model(request: Request, state: FauxState) -> FauxResponse:
    if request.messages and isinstance(request.messages[-1], ToolResultMessage):
        return faux_response("thanks")
    return faux_response(faux_tool_call("question", QUESTION, id="q-1"))


async def report_result(service: HarnessServiceApi) -> None:
    root = await service.harness.root(BACKGROUND)
    await root.wait_for_idle(BACKGROUND)
    for entry in await root.entries(BACKGROUND, limit=20, kind="pi.tool_result"):
        message: Any = entry.model[0]  # pyright: ignore[reportIndexIssue]
        report(f"RESULT {message['content'][0]['text']}")


async def main(state: str, socket: str) -> None:
    options = HarnessOptions(services={"models": Models([FauxProvider([model] * 10)])})
    storage = Path(state) / "session"
    workers: list[HarnessServiceApi] = []

    def worker(env: FacetEnvironment) -> None:
        workers.append(env.use(HarnessService))

        async def seen(dialog: Any, ctx: Context) -> None:
            request = dialog.request.value
            report(f"DIALOG {request['conversationId']}:{request['callId']}")

        env.observe(QuestionDialogs, seen)

    async with anyio.create_task_group() as group:
        facets = [
            harness_session_facet(
                lambda: JsonlStorage(storage, fsync=False), options, task_group=group
            ),
            *chord_facets("session"),
            define_facet("test/worker", worker),
        ]
        async with create_facet_host(facets) as host:
            (service,) = workers
            await service.resume(BACKGROUND)
            root = await service.harness.root(BACKGROUND)
            if not await root.entries(BACKGROUND, limit=1):  # a fresh session
                await root.set_config({"model": MODEL, "selectedTools": ["question"]}, BACKGROUND)
                await root.send("ask", BACKGROUND)
            group.start_soon(report_result, service)
            await group.start(serve_unix, socket, provider_handler(host.services))
            report("READY")
            await anyio.to_thread.run_sync(sys.stdin.read)  # EOF: the test is done with us
        group.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
