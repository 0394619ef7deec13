"""A streamed answer is stored once: its deltas live in the sticky log while it streams, and the
commit that appends the final entry writes the sticky document whole so the log is cut there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chord.context import BACKGROUND
from pico3.harness import Harness, HarnessOptions
from pico3.models import FauxProvider, faux_response
from pico3.storage import JsonlStorage
from pico3.turn.models import Models

pytestmark = pytest.mark.anyio

MODEL = {"provider": "faux", "modelId": "faux-1"}


async def _open(directory: Path, script: list[Any]) -> Harness:
    faux = FauxProvider(script, chunk_chars=8)
    options = HarnessOptions(services={"models": Models([faux])})
    return await Harness.open(JsonlStorage(directory, fsync=False), options, BACKGROUND)


async def test_a_long_streamed_answer_leaves_only_its_entry_behind(tmp_path: Path) -> None:
    text = "".join(f"word{i} " for i in range(6_000))  # ~53 KB in 8-character deltas
    directory = tmp_path / "s"
    harness = await _open(directory, [faux_response(text), faux_response("short")])
    async with harness:
        root = await harness.root(BACKGROUND)
        await root.set_config({"model": MODEL}, BACKGROUND)
        await harness.resume(BACKGROUND)
        record = await (await root.send("go", BACKGROUND)).wait(BACKGROUND)
        assert record.status == "done"
        sticky = directory / f"sticky-{root.id}.jsonl"
        assert sticky.stat().st_size < 2_000  # the deltas were cut at the entry's commit
        record = await (await root.send("again", BACKGROUND)).wait(BACKGROUND)
        assert record.status == "done"
    stored = sum(f.stat().st_size for f in directory.iterdir())
    assert stored < 1.1 * len(text) + 20_000
    reopened = await _open(directory, [])
    async with reopened:
        root = await reopened.root(BACKGROUND)
        answers = await root.entries(BACKGROUND, kind="pi.assistant")
        assert [a.model[0]["content"][0]["text"] for a in answers] == ["short", text]
        watch = await root.watch(BACKGROUND)
        assert "turn" not in watch.view and len(watch.view["entries"]) == 4
        watch.stop()
