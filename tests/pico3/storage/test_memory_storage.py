"""MemoryStorage specifics (docs/design/storage.md#memory-backend): reopenable from the same object, atomic batches."""

from __future__ import annotations

import anyio
import pytest

from chord.context import BACKGROUND
from pico3.storage import (
    Conversation,
    ConversationWrite,
    DocRef,
    DocWrite,
    Entry,
    EntryWrite,
    InvalidBatch,
    MemoryStorage,
    Storage,
    TaskPatch,
    TaskPatchWrite,
)

pytestmark = pytest.mark.anyio
ctx = BACKGROUND


async def test_memory_storage_satisfies_the_protocol_and_starts_empty() -> None:
    storage = MemoryStorage()
    assert isinstance(storage, Storage)
    await storage.open(ctx)
    assert storage.seq == 0
    assert await storage.conversations(ctx) == []
    assert await storage.doc(DocRef.session(), ctx) is None
    assert storage.mint_id() == 1


async def test_a_new_session_reopens_the_same_object_with_everything_committed(h) -> None:
    storage = MemoryStorage()
    await storage.open(ctx)
    cid = await h.with_root(storage)
    await storage.commit([DocWrite(DocRef.sticky(cid), [["s", ["k"], 1]])], ctx)
    before = await h.dump(storage)
    await storage.close(ctx)
    await storage.open(ctx)  # "a new session": same object, after close
    assert await h.dump(storage) == before


async def test_a_failing_batch_changes_no_table_doc_seq_or_id_high_water(h) -> None:
    storage = MemoryStorage()
    await storage.open(ctx)
    cid = await h.with_root(storage)
    before = await h.dump(storage)
    fresh = [storage.mint_id() for _ in range(3)]
    batch = [
        ConversationWrite(Conversation(id=fresh[0])),
        EntryWrite(Entry(id=fresh[1], conversation_id=cid, kind="k")),
        DocWrite(DocRef.sticky(cid), [["s", ["k"], 1]]),
        DocWrite(DocRef.session(), [["r", {"plugins": {}}]]),
        TaskPatchWrite(TaskPatch(id=fresh[2], status="running")),  # unknown task: refused
    ]
    with pytest.raises(InvalidBatch, match=r"writes\[4\]: patch for unknown task"):
        await storage.commit(batch, ctx)
    assert await h.dump(storage) == before
    await storage.close(ctx)
    await storage.open(ctx)
    assert storage.mint_id() == fresh[0]  # the committed high-water never moved


async def test_concurrent_commits_each_get_their_own_seq(h) -> None:
    storage = MemoryStorage()
    await storage.open(ctx)
    cid = await h.with_root(storage)
    seqs: list[int] = []

    async def one() -> None:
        e = Entry(id=storage.mint_id(), conversation_id=cid, kind="k")
        seqs.append(await storage.commit([EntryWrite(e)], ctx))

    async with anyio.create_task_group() as group:
        for _ in range(20):
            group.start_soon(one)
    assert sorted(seqs) == list(range(2, 22))
    assert storage.seq == 21
