"""A streamed answer is stored once: its deltas live in the sticky log while it streams, and the
commit that appends the final entry writes the sticky document whole so the log is cut there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chord.context import BACKGROUND
from pico3.harness import Harness, HarnessOptions
from pico3.kernel.tx import Authority, Transaction
from pico3.models import FauxProvider, faux_response
from pico3.storage import JsonlStorage
from pico3.turn.models import Models

pytestmark = pytest.mark.anyio

MODEL = {"provider": "faux", "modelId": "faux-1"}


async def _open(directory: Path, script: list[Any], chunk_chars: int = 8) -> Harness:
    faux = FauxProvider(script, chunk_chars=chunk_chars)
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


async def test_a_fast_stream_flushed_in_few_large_commits_is_stored_once_too(
    tmp_path: Path,
) -> None:
    """A fast stream is flushed in few, large commits (a local server's 100 KB answer in about a
    dozen: each flush waits for the last one's write), fewer than the count that compacts the
    log. Their text compacts it all the same when the turn ends."""
    directory = tmp_path / "s"
    harness = await Harness.open(JsonlStorage(directory, fsync=False), None, BACKGROUND)
    async with harness:
        root = await harness.root(BACKGROUND)

        async def write(change: Any) -> None:
            def build(tx: Transaction, ctx: Any) -> None:
                change(tx.document("sticky"))

            await harness.kernel.commit(
                build, BACKGROUND, conversation_id=root.id, authority=Authority.CORE
            )

        text = ""
        await write(lambda sticky: sticky.__setitem__("turn", {"message": ""}))
        for n in range(10):  # ten flushes of 10 KB: far fewer commits than a count would need
            text += f"{n}" * 10_000
            await write(lambda sticky, text=text: sticky["turn"].__setitem__("message", text))
        sticky_file = directory / f"sticky-{root.id}.jsonl"
        assert sticky_file.stat().st_size > 100_000  # the deltas, while the turn runs
        await write(lambda sticky: sticky.__delitem__("turn"))
        assert sticky_file.stat().st_size < 2_000  # cut when the turn ended
        assert "turn" not in await root.sticky(BACKGROUND)
