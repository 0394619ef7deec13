"""The generation's shared context (``Transaction.shared_context``): the kernel's per-conversation
transcript cache gives the same derived context as a fresh read at every point — as entries
arrive, for an older cutoff, after a new head, and in a fork."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from chord.context import BACKGROUND, Context
from pico3.harness import Harness
from pico3.kernel.tx import Authority, Transaction
from pico3.session_data.entries import NewEntry
from pico3.storage import Storage

pytestmark = pytest.mark.anyio
StorageFactory = Callable[[], Storage]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 0}


async def append(h: Harness, cid: int, *entries: NewEntry) -> list[int]:
    def build(tx: Transaction, ctx: Context) -> list[int]:
        return [tx.append_entry(cid, entry).id for entry in entries]

    return await h.kernel.commit(build, BACKGROUND, conversation_id=cid, authority=Authority.CORE)


async def both(h: Harness, cid: int, at: int | None = None) -> tuple[Any, Any]:
    """(fresh context messages, shared context messages) through ``at``."""

    async def build(tx: Transaction, ctx: Context) -> tuple[Any, Any]:
        fresh = await tx.context(cid, at)
        shared = await tx.shared_context(cid, at)
        assert [e.id for e in shared.entries] == [e.id for e in fresh.entries]
        return fresh.messages, shared.messages

    return await h.kernel.commit(build, BACKGROUND, conversation_id=cid)


def texts(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages]


async def test_the_shared_context_matches_a_fresh_read_at_every_point(
    storage_factory: StorageFactory,
) -> None:
    h = await Harness.open(storage_factory(), None, BACKGROUND)
    c = await h.root(BACKGROUND)
    ids: list[int] = []
    for i in range(40):  # more than one growth step of the tail read at a time
        ids += await append(
            h,
            c.id,
            *(NewEntry(kind="pi.user", model=[user(f"m{i}.{j}")]) for j in range(i % 5 + 1)),
        )
        fresh, shared = await both(h, c.id)
        assert shared == fresh
    assert len(texts(shared)) == len(ids)
    older, shared_older = await both(h, c.id, ids[10])  # a cutoff before the cached tail
    assert shared_older == older and texts(shared_older)[-1] == "m4.0"
    # a new head starts the context over
    await append(h, c.id, NewEntry(kind="pi.summary", model=[user("summary")], head="self"))
    await append(h, c.id, NewEntry(kind="pi.user", model=[user("after")]))
    fresh, shared = await both(h, c.id)
    assert shared == fresh and texts(shared) == ["summary", "after"]
    # a fork sees the parent through the fork point, then its own entries
    fork = await c.fork(ids[5], BACKGROUND)
    await append(h, fork.id, NewEntry(kind="pi.user", model=[user("forked")]))
    fresh, shared = await both(h, fork.id)
    assert shared == fresh and texts(shared)[-1] == "forked" and len(shared) == 7
    await h.close(BACKGROUND)
