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


async def test_a_commit_that_does_not_wait_is_written_with_the_next_one_that_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``durable=False``: the commit returns before its write and reports nothing; a read that
    does not wait returns at once; the next commit that waits writes both, in one write, and
    then both are reported, in order."""
    from pico3.storage._log import MainLog

    folder = tmp_path / "session"
    h = await Harness.open(JsonlStorage(folder, fsync=True), None, BACKGROUND)
    c = await h.root(BACKGROUND)
    kernel = h.kernel
    heard: list[Any] = []
    kernel.add_commit_listener(lambda batch: heard.extend(e.data for e in batch.new_entries))
    appends: list[str] = []
    real = MainLog.append

    def append(log: MainLog, data: bytes) -> None:
        appends.append(Path(log._path).name)  # pyright: ignore[reportPrivateUsage]
        real(log, data)

    monkeypatch.setattr(MainLog, "append", append)

    def note(n: int) -> Any:
        def build(tx: Any, ctx: Any) -> int:
            tx.write(c.id, "ci.note", data={"n": n})
            return kernel.storage.seq + 1

        return build

    lazy = await kernel.commit(note(1), BACKGROUND, conversation_id=c.id, durable=False)
    assert lazy not in on_disk(folder)[0] and heard == []  # not written, not reported
    seen = await kernel.commit(
        lambda tx, ctx: kernel.storage.seq, BACKGROUND, conversation_id=c.id, durable=False
    )
    assert seen == lazy and lazy not in on_disk(folder)[0]  # the read did not wait
    waited = await kernel.commit(note(2), BACKGROUND, conversation_id=c.id)
    assert {lazy, waited} <= on_disk(folder)[0]  # both written when the second returned
    assert appends == ["main.jsonl"]  # in one write
    assert heard == [{"n": 1}, {"n": 2}]  # reported once written, in order
    third = await kernel.commit(note(3), BACKGROUND, conversation_id=c.id, durable=False)
    await kernel.settle()  # waits for what does not wait
    assert third in on_disk(folder)[0] and heard[-1] == {"n": 3}
    await kernel.commit(note(4), BACKGROUND, conversation_id=c.id, durable=False)
    await h.close(BACKGROUND)  # writes what is queued
    again = await Harness.open(JsonlStorage(folder, fsync=True), None, BACKGROUND)
    root = await again.root(BACKGROUND)
    notes = [
        e.data["n"]
        for e in await root.entries(BACKGROUND, limit=10)
        if e.kind == "ci.note" and isinstance(e.data, dict)
    ]
    assert sorted(notes) == [1, 2, 3, 4]
    await again.close(BACKGROUND)
