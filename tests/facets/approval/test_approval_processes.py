"""Approval across two real processes over the wire, and a SIGKILLed session worker (issue 7).

``session_worker.py`` runs the session side in a child process on JSONL storage; the TUI facet
runs here, reaching the worker's ``pi.approval-dialog`` through a wire service source over a
Unix socket. Nothing sleeps to synchronise: the tests wait on lines the worker prints and on the
dialogs the presentation shows.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from chord.facets import create_facet_host
from chord.textual import tui_facet as textual_tui_facet
from chord.transport import connect_unix
from chord.wire import connect_service_source
from facets_approval.tui import tui_facet

pytestmark = pytest.mark.anyio

SCRIPT = Path(__file__).with_name("session_worker.py")
TIMEOUT = 30


class Worker:
    """The session worker process and the lines it printed, read in order."""

    def __init__(self, process: anyio.abc.Process, socket: Path) -> None:
        self.process = process
        self.socket = socket
        self.lines: list[str] = []
        assert process.stdout is not None
        self._stdout = BufferedByteReceiveStream(process.stdout)

    async def until(self, prefix: str) -> str:
        """Read lines until one starting with ``prefix`` (already read ones count); returns it."""
        with anyio.fail_after(TIMEOUT):
            while True:
                for line in self.lines:
                    if line.startswith(prefix):
                        return line
                raw = await self._stdout.receive_until(b"\n", 4096)
                self.lines.append(raw.decode())

    async def stop(self) -> None:
        """End the worker the polite way (its stdin closes) and wait for it."""
        if self.process.returncode is None:
            assert self.process.stdin is not None
            await self.process.stdin.aclose()
            with anyio.fail_after(TIMEOUT):
                await self.process.wait()

    async def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        with anyio.fail_after(TIMEOUT):
            await self.process.wait()


@asynccontextmanager
async def worker(state: Path, name: str, *, hold: bool = False) -> AsyncIterator[Worker]:
    socket = state / f"{name}.sock"
    argv = [sys.executable, str(SCRIPT), str(state), str(socket), *(["--hold"] if hold else [])]
    process = await anyio.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    child = Worker(process, socket)
    try:
        await child.until("READY")
        yield child
    finally:
        with anyio.CancelScope(shield=True):
            await child.stop()
            await process.aclose()


@asynccontextmanager
async def presentation(child: Worker, kit: Any) -> AsyncIterator[Any]:
    """A TUI-process facet host: the approval TUI facet over a scripted ``Tui``, using the
    worker's services through a wire source.

    The worker is gone before the presentation is torn down (the test stops or kills it first),
    so the wire client ends on end-of-stream rather than being cancelled mid-read: anyio 4.16's
    asyncio UNIX socket stream can raise ``InvalidStateError`` from its reader callback when a
    receive is cancelled just as data arrives (cf. agronholm/anyio#1267).
    """
    tui = kit.ScriptedTui()
    async with anyio.create_task_group() as group:
        source = connect_service_source(lambda: connect_unix(child.socket), task_group=group)
        async with create_facet_host([textual_tui_facet(tui), tui_facet], service_sources=[source]):
            yield tui
        await source.aclose()
        group.cancel_scope.cancel()


@pytest.fixture
def state(tmp_path: Path) -> Path:
    # Unix socket paths are short; keep the state folder near the root of tmp.
    return tmp_path


async def test_a_dialog_in_the_worker_is_answered_by_the_tui_process(kit: Any, state: Path) -> None:
    async with worker(state, "w1") as child, presentation(child, kit) as tui:
        prompt = await tui.next_prompt()
        assert prompt.title == "Allow bash?"
        prompt.answer("allow")
        await child.until("RAN")
        await child.stop()
    dialogs = [line for line in child.lines if line.startswith("DIALOG")]
    assert len(dialogs) == 1 and dialogs[0].startswith("DIALOG 1:")
    assert child.lines.index(dialogs[0]) < child.lines.index("RAN")


async def test_a_killed_worker_asks_again_when_no_decision_was_recorded(
    kit: Any, state: Path
) -> None:
    # issue 7: SIGKILL while an approval is open -> after restart the dialog is open again
    async with worker(state, "w1") as first:
        opened = await first.until("DIALOG")
        await first.kill()
    async with worker(state, "w2") as second, presentation(second, kit) as tui:
        assert await second.until("DIALOG") == opened  # the same call is asked once more
        prompt = await tui.next_prompt()
        assert prompt.title == "Allow bash?"
        prompt.answer("allow")
        await second.until("RAN")
        await second.stop()
    assert "RAN" not in first.lines
    assert second.lines.count("RAN") == 1


async def test_a_killed_worker_does_not_ask_again_after_a_recorded_decision(
    kit: Any, state: Path
) -> None:
    # issue 7: after a recorded decision the dialog is not shown again. The first worker holds
    # the call in a second before_tool hook after the approval memo is written, then dies.
    async with worker(state, "w1", hold=True) as first, presentation(first, kit) as tui:
        (await tui.next_prompt()).answer("allow")
        await first.until("HELD")
        await first.kill()
    async with worker(state, "w2") as second:
        await second.until("RAN")
    assert [line for line in second.lines if line.startswith("DIALOG")] == []
    assert "RAN" not in first.lines
