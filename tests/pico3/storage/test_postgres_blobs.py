"""Session blobs on PostgreSQL (``PostgresStorage.put_blobs``, schema migration 2): stored
atomically beside the commits, read back by the next opener, bounded in size, and fenced by the
lease like a commit (issue 23: what a dead server's worker kept must follow the session)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from chord.context import BACKGROUND
from pico3.storage import Conversation, ConversationWrite, LeaseLost, PostgresStorage
from pico3.storage.pg_blobs import BLOB_LIMIT, read_blob

pytestmark = pytest.mark.anyio
ctx = BACKGROUND


@pytest.fixture
def conninfo(postgres_cluster: Any) -> str:
    return postgres_cluster.conninfo


@pytest.fixture
def session() -> str:
    return f"blobs-{uuid.uuid4().hex}"


async def test_blobs_are_stored_together_and_the_next_opener_reads_them(
    conninfo: str, session: str
) -> None:
    storage = PostgresStorage(conninfo, session, fsync=False)
    await storage.open(ctx)
    try:
        await storage.put_blobs({"h/journal/1": b"one", "h/blobs/aa": b"\x00\xff", "x": b""}, ctx)
        await storage.put_blobs({"h/journal/1": b"one, replaced"}, ctx)
        assert await storage.get_blob("h/blobs/aa", ctx) == b"\x00\xff"
        assert await storage.get_blob("missing", ctx) is None
    finally:
        await storage.close(ctx)
    again = PostgresStorage(conninfo, session, fsync=False)
    await again.open(ctx)
    try:
        assert await again.blobs("h/", ctx) == {
            "h/blobs/aa": b"\x00\xff",
            "h/journal/1": b"one, replaced",
        }
        assert list(await again.blobs("h/journal/", ctx, data=False)) == ["h/journal/1"]
        assert await again.blobs("", ctx, data=False) == {
            "h/blobs/aa": b"",
            "h/journal/1": b"",
            "x": b"",
        }
    finally:
        await again.close(ctx)
    assert await read_blob(conninfo, session, "x") == b""  # no lease needed to read
    assert await read_blob(conninfo, session, "nothing") is None
    assert await read_blob(conninfo, f"{session}-other", "x") is None


async def test_a_blob_over_the_limit_or_badly_named_is_refused_and_nothing_is_stored(
    conninfo: str, session: str
) -> None:
    storage = PostgresStorage(conninfo, session, fsync=False)
    await storage.open(ctx)
    try:
        with pytest.raises(ValueError, match="over the limit"):
            await storage.put_blobs({"small": b"s", "big": b"x" * (BLOB_LIMIT + 1)}, ctx)
        with pytest.raises(ValueError, match="printable ASCII"):
            await storage.put_blobs({"with space": b"s"}, ctx)
        assert await storage.blobs("", ctx) == {}
        await storage.put_blobs({"ok": b"still writable"}, ctx)  # a refusal is not a failure
        assert await storage.get_blob("ok", ctx) == b"still writable"
    finally:
        await storage.close(ctx)


async def test_a_worker_whose_lease_was_taken_stores_no_blob_and_no_commit(
    conninfo: str, session: str
) -> None:
    first = PostgresStorage(conninfo, session, fsync=False, lease_seconds=30)
    await first.open(ctx)
    await first.put_blobs({"before": b"mine"}, ctx)
    second = PostgresStorage(conninfo, session, fsync=False, take_over=True)
    await second.open(ctx)  # another server took the session over
    try:
        with pytest.raises(LeaseLost, match="nothing was stored"):
            await first.put_blobs({"after": b"fenced", "before": b"overwritten?"}, ctx)
        with pytest.raises(LeaseLost):  # and the storage is fail-stop from there on
            await first.commit([ConversationWrite(Conversation(id=first.mint_id()))], ctx)
        assert await second.blobs("", ctx) == {"before": b"mine"}
        await second.put_blobs({"after": b"the new holder's"}, ctx)
        assert await second.get_blob("after", ctx) == b"the new holder's"
    finally:
        await first.close(ctx)
        await second.close(ctx)
