"""The commit hot path's shortcuts keep every guarantee they shortcut.

* storage skips the strict-JSON walk only for entries the kernel validated and copied itself,
  and only during that commit; a same-batch ``tx.entry`` read hands out a copy, so a builder
  cannot slip an invalid value into such an entry after validation;
* ``entry.added`` events share the payload inside the batch, but every envelope carries its own
  copy: a watcher mutating one cannot reach the view, a later watch, commit listeners or the
  stored entry;
* entering a free line is still a checkpoint, so a loop of commits lets other tasks run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from pico3.harness import ConversationHandle, Harness
from pico3.kernel.tx import Transaction
from pico3.kernel.view import Envelope
from pico3.storage import InvalidBatch, Storage
from pico3.storage.base import current_prechecked
from pico3.storage.records import Entry, EntryWrite

pytestmark = pytest.mark.anyio
StorageFactory = Callable[[], Storage]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 0}


async def open_root(storage_factory: StorageFactory) -> tuple[Harness, ConversationHandle]:
    h = await Harness.open(storage_factory(), None, BACKGROUND)
    return h, await h.root(BACKGROUND)


async def test_a_same_batch_entry_read_is_a_copy_the_builder_cannot_corrupt(
    storage_factory: StorageFactory,
) -> None:
    h, c = await open_root(storage_factory)

    async def build(tx: Transaction, ctx: Context) -> int:
        input_id = tx.write(c.id, "ci.note", model=[user("kept")])
        record = await tx.input(input_id)
        assert record is not None and isinstance(record.entry, int)
        read = await tx.entry(record.entry)
        assert read is not None
        read.model[0]["content"] = float("nan")  # type: ignore[index]
        again = await tx.entries([record.entry])
        assert again[record.entry].model == [user("kept")]
        return record.entry

    entry_id = await c.commit(build, BACKGROUND)
    stored = await c.commit(lambda tx, ctx: tx.entry(entry_id), BACKGROUND)
    assert stored.model == [user("kept")]
    await h.close(BACKGROUND)
    reopened = await Harness.open(storage_factory(), None, BACKGROUND)
    root = await reopened.root(BACKGROUND)
    assert (await root.commit(lambda tx, ctx: tx.entry(entry_id), BACKGROUND)).model == [
        user("kept")
    ]
    await reopened.close(BACKGROUND)


async def test_storage_still_walks_every_entry_it_was_not_told_about(
    storage_factory: StorageFactory,
) -> None:
    h, c = await open_root(storage_factory)
    await c.write("ci.note", BACKGROUND, model=[user("one")])
    assert current_prechecked() == frozenset()  # nothing leaks out of a commit
    storage = h.kernel.storage
    bad = Entry(
        id=storage.mint_id(), conversation_id=c.id, kind="ci.note", data={"x": float("inf")}
    )
    with pytest.raises(InvalidBatch, match="non-finite"):
        await storage.commit([EntryWrite(entry=bad)], BACKGROUND)
    await h.close(BACKGROUND)


async def test_each_envelope_owns_its_entry_events(storage_factory: StorageFactory) -> None:
    h, c = await open_root(storage_factory)
    first = await c.watch(BACKGROUND)
    second = await c.watch(BACKGROUND)
    seen: list[Envelope] = []

    def vandal(envelope: Envelope) -> None:
        seen.append(envelope)
        for event in envelope.events:
            event["entry"]["model"][0]["content"] = "vandalized"

    first.start(vandal)
    second.start(seen.append)
    listened: list[Any] = []  # commit listeners run after the deliveries
    h.kernel.add_commit_listener(lambda batch: listened.extend(e.model for e in batch.new_entries))
    await c.write("ci.note", BACKGROUND, model=[user("original")])
    assert len(seen) == 2 and seen[0] is seen[1]  # one envelope object per conversation
    assert listened == [[user("original")]]
    fresh = await c.watch(BACKGROUND)
    assert fresh.view["entries"][-1]["model"] == [user("original")]
    entry_id = fresh.view["entries"][-1]["id"]
    stored = await c.commit(lambda tx, ctx: tx.entry(entry_id), BACKGROUND)
    assert stored.model == [user("original")]
    fresh.stop()
    await h.close(BACKGROUND)


async def test_a_loop_of_commits_lets_other_tasks_run(storage_factory: StorageFactory) -> None:
    # entering the line yields to the event loop at least once per time slice (line.SLICE), so
    # a task that does nothing but commit cannot starve the others
    h, c = await open_root(storage_factory)
    ran = anyio.Event()
    commits = 0
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: _set(ran))
        while not ran.is_set():
            await c.write("ci.note", BACKGROUND, model=[user("x")])
            commits += 1
            assert commits < 1_000_000, "the other task never ran"
    assert commits >= 1
    await h.close(BACKGROUND)


async def test_a_loop_of_commits_sees_a_cancelled_scope(storage_factory: StorageFactory) -> None:
    h, c = await open_root(storage_factory)
    commits = 0
    with anyio.CancelScope() as scope:
        scope.cancel()
        while True:
            await c.write("ci.note", BACKGROUND, model=[user("x")])
            commits += 1
            assert commits < 1_000_000, "the cancellation never landed"
    assert scope.cancelled_caught
    notes = await c.entries(BACKGROUND, kind="ci.note", limit=1_000_000)
    assert len(notes) == commits  # what ran before the cancellation landed is committed
    await h.close(BACKGROUND)


async def _set(event: anyio.Event) -> None:
    event.set()
