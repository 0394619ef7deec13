"""The optional synchronous commit (``commit_nowait``) and when the kernel may use it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from chord.context import BACKGROUND, Context
from pico3.storage import Conversation, ConversationWrite, JsonlStorage, MemoryStorage, Write
from pico3.storage.base import sync_commit


class _Overrides(MemoryStorage):
    async def commit(self, writes: Sequence[Write], ctx: Context) -> int:
        return await super().commit(writes, ctx)


class _OverridesBoth(MemoryStorage):
    calls = 0

    async def commit(self, writes: Sequence[Write], ctx: Context) -> int:
        return self.commit_nowait(writes)

    def commit_nowait(self, writes: Sequence[Write]) -> int:
        self.calls += 1
        return super().commit_nowait(writes)


def test_the_built_in_backends_offer_it(tmp_path: Path) -> None:
    memory, jsonl = MemoryStorage(), JsonlStorage(tmp_path)
    assert sync_commit(memory) == memory.commit_nowait
    assert sync_commit(jsonl) == jsonl.commit_nowait


def test_a_subclass_overriding_commit_alone_is_never_bypassed() -> None:
    assert sync_commit(_Overrides()) is None
    storage = _OverridesBoth()
    assert sync_commit(storage) == storage.commit_nowait


def test_a_commit_replaced_on_the_instance_is_never_bypassed() -> None:
    storage = MemoryStorage()
    storage.commit = storage.commit  # type: ignore[method-assign]
    assert sync_commit(storage) is None
    assert sync_commit(object()) is None


@pytest.mark.anyio
async def test_jsonl_commits_now_only_when_nothing_is_ahead(tmp_path: Path) -> None:
    storage = JsonlStorage(tmp_path, fsync=False)
    await storage.open(BACKGROUND)
    first = storage.commit_nowait([ConversationWrite(Conversation(id=storage.mint_id()))])
    assert first == 1 and storage.seq == 1
    lock = storage._lock  # pyright: ignore[reportPrivateUsage]
    assert lock is not None
    async with lock:  # a commit or sticky rewrite in flight: the caller must await commit()
        assert (
            storage.commit_nowait([ConversationWrite(Conversation(id=storage.mint_id()))]) is None
        )
        assert storage.seq == 1  # nothing was done
    assert (
        await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], BACKGROUND)
        == 2
    )
    await storage.close(BACKGROUND)
