"""The parked-approval harness of test_parked_approvals.py and test_notifications.py: the real
binary run headless (``--json``) on a faux script whose one bash call needs approval, its stderr
read as it comes (:class:`Run`), and a second client of the session's worker that answers the
open approval (:func:`answer`), as ``coding-agent attach`` would.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.text import TextReceiveStream

from chord import (
    Context,
    FacetEnvironment,
    connect_service_source,
    connect_unix,
    create_facet_host,
    define_facet,
    define_service,
)
from coding_agent.session_files.folders import Session

BINARY = Path(sys.executable).with_name("coding-agent")
TIMEOUT = 120
APPROVALS = define_service("pi.approval-dialog")
STEPS = [
    {"toolCalls": [{"name": "bash", "arguments": {"command": "touch parked.txt"}}]},
    {"text": "Touched."},
]
"""The faux script (``script.json`` beside the project): a bash call that asks, then the answer."""


class Run:
    """The headless process, its stderr read line by line as it comes."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self._buffer = ""
        assert process.stderr is not None
        self._stream = TextReceiveStream(process.stderr)

    async def line_with(self, text: str, count: int = 1) -> None:
        """Read stderr until ``count`` of its lines hold ``text``."""
        while sum(text in line for line in self.lines) < count:
            chunk = await self._stream.receive()
            self._buffer += chunk
            *complete, self._buffer = self._buffer.split("\n")
            self.lines.extend(complete)

    async def result(self) -> dict[str, Any]:
        """The run's JSON result (its last stdout line), once the process ended."""
        assert self.process.stdout is not None
        out = b""
        async for chunk in self.process.stdout:
            out += chunk
        await self.process.wait()
        return json.loads(out.decode().splitlines()[-1])


async def start(project: Path, env: dict[str, str], *flags: str) -> Run:
    """``coding-agent --faux-script ../script.json FLAGS --json "touch it"`` in ``project``."""
    process = await anyio.open_process(
        [str(BINARY), "--faux-script", str(project.parent / "script.json"), *flags, "--json",
         "touch it"],
        cwd=project, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return Run(process)


async def answer(session: Session, decision: str) -> None:
    """Answer the open approval as a second client of the session's worker."""
    answered = anyio.Event()

    def setup(env: FacetEnvironment) -> None:
        async def on_dialog(dialog: Any, ctx: Context) -> None:
            try:
                await dialog.decide({"decision": decision, "by": "tui"}, ctx)
            finally:  # the answer closes the dialog, which may cancel this call before it returns
                answered.set()

        env.observe(APPROVALS, on_dialog)

    async with anyio.create_task_group() as group:
        source = connect_service_source(lambda: connect_unix(session.socket_path), task_group=group)
        async with create_facet_host(
            [define_facet("test/answer", setup)], service_sources=[source]
        ):
            await answered.wait()
        await source.aclose()
        group.cancel_scope.cancel()
