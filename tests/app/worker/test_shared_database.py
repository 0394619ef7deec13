"""The PostgreSQL connections a host process's sessions share
(:class:`coding_agent.worker.database.SharedDatabase`, issue 42): more sessions committing at
once than the pool has connections all finish (the writers go round instead of the first ones
keeping them), on the pool's connections and one renewer's only."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import psycopg
import pytest

from chord.context import BACKGROUND
from coding_agent.worker.database import SharedDatabase
from pico3.storage import Conversation, ConversationWrite

pytestmark = pytest.mark.anyio


def backends(conninfo: str, name: str) -> int:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
        ).fetchone()
    assert row is not None
    return int(row[0])


async def test_more_active_sessions_than_connections_all_commit(postgres_cluster: Any) -> None:
    name = f"t{uuid.uuid4().hex[:12]}"
    conninfo = f"{postgres_cluster.conninfo} application_name={name}"
    most = 0
    async with SharedDatabase(conninfo, pool_size=2) as database:
        storages = [
            database.storage(f"busy-{uuid.uuid4().hex}", fsync=False, lease=None) for _ in range(6)
        ]
        for storage in storages:
            await storage.open(BACKGROUND)
            database.opened(storage.session)  # served: its writer goes back at once
        done = [0] * len(storages)

        async def busy(index: int, storage: Any) -> None:
            # never a second without a commit, until every session has committed 3 times: a
            # pool whose first two users kept their connections would starve the others
            while min(done) < 3:
                batch = [ConversationWrite(Conversation(id=storage.mint_id()))]
                await storage.commit(batch, BACKGROUND)
                done[index] += 1

        async def watch() -> None:
            nonlocal most
            while min(done) < 3:
                count = await anyio.to_thread.run_sync(backends, postgres_cluster.conninfo, name)
                most = max(most, count)
                await anyio.sleep(0.05)

        with anyio.fail_after(50):  # a session starved of a connection fails after 60 s
            async with anyio.create_task_group() as group:
                group.start_soon(watch)
                for index, storage in enumerate(storages):
                    group.start_soon(busy, index, storage)
        assert all(storage.seq == count for storage, count in zip(storages, done, strict=True))
        for storage in storages:
            await storage.close(BACKGROUND)
    assert 1 <= most <= 2 + 1  # the pool's and the renewer's
