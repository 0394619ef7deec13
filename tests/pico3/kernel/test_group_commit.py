"""Group commit (JSONL with fsync): the kernel leaves the line before a batch's durable write,
and still reports nothing of a batch before that write is done (docs/design/harness.md#commits).

A batch's commit returns, its commit listeners run and a read that could see it returns only once
its record is in the session's files, however many commits queue meanwhile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from pico3.harness import Harness
from pico3.kernel.tx import Batch
from pico3.storage import JsonlStorage
from pico3.storage._lines import read_lines
from pico3.storage.records import EntryWrite

pytestmark = pytest.mark.anyio


def on_disk(folder: Path) -> tuple[set[int], set[int]]:
    """The seqs whose records are in the session's files (main or a sidecar), and the ids of
    the entries those records append."""
    seqs: set[int] = set()
    entries: set[int] = set()
    for path in folder.glob("*.jsonl"):
        data = path.read_bytes()
        data = data[: data.rfind(b"\n") + 1]  # the preallocated zeros after the last line
        for _, _, record in read_lines(str(path), data, path.name == "main.jsonl"):
            seqs.add(record.seq)
            entries.update(w.entry.id for w in record.writes if isinstance(w, EntryWrite))
    return seqs, entries


async def test_concurrent_commits_are_reported_only_once_written(tmp_path: Path) -> None:
    folder = tmp_path / "session"
    h = await Harness.open(JsonlStorage(folder, fsync=True), None, BACKGROUND)
    c = await h.root(BACKGROUND)
    storage = h.kernel.storage
    heard: list[Any] = []

    def listener(batch: Batch) -> None:
        (entry,) = batch.new_entries
        assert entry.id in on_disk(folder)[1]  # heard only once written
        heard.append(entry.data)

    h.kernel.add_commit_listener(listener)
    returned: list[tuple[int, set[int]]] = []

    async def one(n: int) -> None:
        def build(tx: Any, ctx: Any) -> int:
            tx.write(c.id, "ci.note", data={"n": n})
            return storage.seq + 1  # this batch's seq: the next one

        seq = await c.commit(build, BACKGROUND)
        returned.append((seq, on_disk(folder)[0]))

    async with anyio.create_task_group() as group:
        for n in range(12):
            group.start_soon(one, n)
    for seq, seqs in returned:
        assert seq in seqs  # its record was in the files when its commit returned
    assert sorted(d["n"] for d in heard) == list(range(12))
    # a read-only commit returns what it read once that is written
    last = await c.commit(lambda tx, ctx: storage.seq, BACKGROUND)
    assert last in on_disk(folder)[0]
    await h.close(BACKGROUND)
