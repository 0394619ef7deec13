"""Shared fixtures for the storage tests: both backends behind one factory, and a state dump.

``backend`` is parametrized over ``memory``, ``jsonl`` and ``postgresql``. ``backend.new()``
returns a storage object on the *same* backing store each time (the same ``MemoryStorage``, a
fresh ``JsonlStorage`` on the same directory, or a fresh ``PostgresStorage`` on the same session
of the test cluster), which is what "reopen" means for each of them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from chord.context import BACKGROUND
from pico3.storage import (
    Conversation,
    ConversationWrite,
    DocRef,
    EntryScan,
    JsonlStorage,
    MemoryStorage,
    PostgresStorage,
    Storage,
    TaskScan,
)


class Backend:
    """Makes storage objects over one backing store."""

    def __init__(self, name: str, make: Callable[[], Storage], directory: Path | None) -> None:
        self.name = name
        self.new = make
        self.directory = directory

    async def opened(self) -> Storage:
        storage = self.new()
        await storage.open(BACKGROUND)
        return storage

    async def reopen(self, storage: Storage) -> Storage:
        await storage.close(BACKGROUND)
        return await self.opened()


@pytest.fixture(params=["memory", "jsonl", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "memory":
        memory = MemoryStorage()
        return Backend("memory", lambda: memory, None)
    if request.param == "postgresql":
        cluster = request.getfixturevalue("postgres_cluster")
        session = f"test-{uuid.uuid4().hex}"
        return Backend(
            "postgresql", lambda: PostgresStorage(cluster.conninfo, session, fsync=False), None
        )
    directory = tmp_path / "session"
    return Backend("jsonl", lambda: JsonlStorage(directory, fsync=False), directory)


async def with_root(storage: Storage) -> int:
    """Commit a root conversation and return its id."""
    cid = storage.mint_id()
    await storage.commit([ConversationWrite(Conversation(id=cid))], BACKGROUND)
    return cid


def fold(log: list[list[Any]] | None) -> Any:
    """Fold a document log made only of ``r`` and top-level ``s``/``d`` ops (test-local)."""
    value: dict[str, Any] = {}
    for ops in log or []:
        for op in ops:
            if op[0] == "r":
                value = dict(op[1])
            elif op[0] == "s":
                value[op[1][0]] = op[2]
            elif op[0] == "d":
                value.pop(op[1][0], None)
            else:  # pragma: no cover - the tests only write the three verbs above
                raise AssertionError(f"unexpected op {op!r}")
    return value


async def dump(storage: Storage, input_ids: range = range(1, 400)) -> Any:
    """Everything observable through the read API, as plain data (for equality checks)."""
    ctx = BACKGROUND
    conversations = await storage.conversations(ctx)
    out: dict[str, Any] = {"seq": storage.seq, "conversations": conversations}
    for conversation in conversations:
        cid = conversation.id
        out[f"entries {cid}"] = await storage.scan_entries(
            EntryScan(conversation_id=cid, limit=10**9), ctx
        )
        out[f"rewindable {cid}"] = fold(await storage.doc(DocRef.rewindable(cid), ctx))
        out[f"sticky {cid}"] = fold(await storage.doc(DocRef.sticky(cid), ctx))
    out["session"] = fold(await storage.doc(DocRef.session(), ctx))
    out["tasks"] = await storage.scan_tasks(TaskScan(), ctx)
    out["inputs"] = [item for i in input_ids if (item := await storage.input(i, ctx))]
    return msgspec.to_builtins(out)


class Helpers:
    """The helpers above, handed to tests as a fixture (importlib mode cannot import conftest)."""

    with_root = staticmethod(with_root)
    fold = staticmethod(fold)
    dump = staticmethod(dump)


@pytest.fixture(scope="session")
def h() -> type[Helpers]:
    return Helpers
