"""Approval across two real processes over the wire, and a SIGKILLed session worker (issue 7).

``session_worker.py`` runs the session side in a child process on JSONL storage; the TUI facet
runs here, reaching the worker's ``pi.approval-dialog`` through a wire service source over a
Unix socket. Nothing sleeps to synchronise: the tests wait on lines the worker prints and on the
dialogs the presentation shows.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import dialog_support
import pytest
from dialog_support import Worker

from facets_approval.tui import tui_facet

pytestmark = pytest.mark.anyio

SCRIPT = Path(__file__).with_name("session_worker.py")


def worker(state: Path, name: str, *options: str) -> AbstractAsyncContextManager[Worker]:
    return dialog_support.worker(SCRIPT, state, name, *options)


def presentation(child: Worker, kit: Any) -> AbstractAsyncContextManager[Any]:
    """The approval TUI facet over a scripted ``Tui``, reaching the worker over the wire."""
    return dialog_support.wire_presentation(child, kit.ScriptedTui(), tui_facet)


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
    async with worker(state, "w1", "--hold") as first, presentation(first, kit) as tui:
        (await tui.next_prompt()).answer("allow")
        await first.until("HELD")
        await first.kill()
    async with worker(state, "w2") as second:
        await second.until("RAN")
    assert [line for line in second.lines if line.startswith("DIALOG")] == []
    assert "RAN" not in first.lines
