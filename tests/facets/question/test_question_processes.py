"""Questions across two real processes over the wire, and a SIGKILLed session worker (issue 7).

``session_worker.py`` runs the session side in a child process on JSONL storage; the TUI facet
runs here, reaching the worker's ``pi.question-dialog`` through a wire service source over a
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

from facets_question.tui import tui_facet

pytestmark = pytest.mark.anyio

SCRIPT = Path(__file__).with_name("session_worker.py")


def worker(state: Path, name: str, *options: str) -> AbstractAsyncContextManager[Worker]:
    return dialog_support.worker(SCRIPT, state, name, *options)


def presentation(child: Worker, kit: Any) -> AbstractAsyncContextManager[Any]:
    """The question TUI facet over a scripted ``Tui``, reaching the worker over the wire."""
    return dialog_support.wire_presentation(child, kit.ScriptedTui(), tui_facet)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path


async def test_a_question_in_the_worker_is_answered_by_the_tui_process(
    kit: Any, state: Path
) -> None:
    async with worker(state, "w1") as child, presentation(child, kit) as tui:
        prompt = await tui.next_prompt()
        assert (prompt.title, prompt.choices) == ("Which colour?", ["red", "green"])
        prompt.answer("green")
        assert await child.until("RESULT") == "RESULT User answered: green"
        await child.stop()
    assert [line for line in child.lines if line.startswith("DIALOG")] == ["DIALOG 1:q-1"]


async def test_a_killed_worker_asks_the_question_again(kit: Any, state: Path) -> None:
    # docs/design/harness.md#tools: crash before the memo -> the safe tool is re-invoked and asks again
    async with worker(state, "w1") as first:
        assert await first.until("DIALOG") == "DIALOG 1:q-1"
        await first.kill()
    async with worker(state, "w2") as second, presentation(second, kit) as tui:
        assert await second.until("DIALOG") == "DIALOG 1:q-1"
        (await tui.next_prompt()).answer("red")
        assert await second.until("RESULT") == "RESULT User answered: red"
        await second.stop()
