"""The line and the commit lifecycle (docs/design/harness.md#commits)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context, ContextCancelled, with_cancel
from pico3.harness import ConversationHandle, Harness
from pico3.kernel.errors import (
    Closed,
    Faulted,
    NestedLineOperation,
    ReadAfterWrite,
    TransactionClosed,
)
from pico3.kernel.proxy import RevokedProxy
from pico3.kernel.tx import Authority, Batch, Transaction
from pico3.storage import MemoryStorage, Storage, StorageInUse
from pico3.storage.records import Write

StorageFactory = Callable[[], Storage]

pytestmark = pytest.mark.anyio
USER = {"role": "user", "content": "hi", "timestamp": 0}


async def open_root(storage_factory: StorageFactory) -> tuple[Harness, ConversationHandle]:
    h = await Harness.open(storage_factory(), None, BACKGROUND)
    return h, await h.root(BACKGROUND)


async def test_open_creates_the_root_conversation_with_id_one(
    storage_factory: StorageFactory,
) -> None:
    h, c = await open_root(storage_factory)
    assert c.id == 1
    await h.close(BACKGROUND)
    h2 = await Harness.open(storage_factory(), None, BACKGROUND)
    assert (await h2.root(BACKGROUND)).id == 1
    assert await h2.conversation(99, BACKGROUND) is None
    await h2.close(BACKGROUND)


async def test_concurrent_commits_serialize_in_fifo_order(
    storage_factory: StorageFactory,
) -> None:  # 32
    h, c = await open_root(storage_factory)
    order: list[int] = []
    gate = anyio.Event()

    async def first(tx: Transaction, ctx: Context) -> None:
        order.append(0)
        await gate.wait()

    async def run(n: int) -> None:
        await c.commit(lambda tx, ctx: order.append(n), BACKGROUND)

    async with anyio.create_task_group() as tg:
        tg.start_soon(c.commit, first, BACKGROUND)
        await anyio.wait_all_tasks_blocked()
        for n in range(1, 6):
            tg.start_soon(run, n)
            await anyio.wait_all_tasks_blocked()
        gate.set()
    assert order == [0, 1, 2, 3, 4, 5]
    await h.close(BACKGROUND)


async def test_failing_builder_persists_nothing_and_ids_are_not_reused(
    storage_factory: StorageFactory,
) -> None:  # 33
    h, c = await open_root(storage_factory)
    storage = h.kernel.storage
    seq = storage.seq
    minted: list[int] = []

    def failing(tx: Transaction, ctx: Context) -> None:
        minted.append(tx.write(c.id, "ci.note", data={"n": 1}))
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await c.commit(failing, BACKGROUND)
    assert storage.seq == seq
    assert await c.commit(lambda tx, ctx: tx.input(minted[0]), BACKGROUND) is None
    later = await c.write("ci.note", BACKGROUND, data={"n": 2})
    assert later > minted[0] + 1  # the failed input and entry ids stay burnt in this session
    assert storage.seq == seq + 1
    await h.close(BACKGROUND)


async def test_retained_proxies_raise_after_commit_and_after_failure(
    storage_factory: StorageFactory,
) -> None:  # 34
    h, c = await open_root(storage_factory)
    ns = h.namespace("keep", {"sticky": {"box": {"v": 0}}})
    kept: list[Any] = []

    def grab(tx: Transaction, ctx: Context) -> None:
        kept.append(tx.plugins(ns)["box"])

    def grab_root(tx: Transaction, ctx: Context) -> None:
        kept.append(tx.document("sticky"))

    await c.commit(grab, BACKGROUND)
    await h.kernel.commit(grab_root, BACKGROUND, conversation_id=c.id, authority=Authority.CORE)
    for handle in kept:
        with pytest.raises(RevokedProxy):
            handle["v"] = 1
        with pytest.raises(RevokedProxy):
            len(handle)

    failed: list[Any] = []

    def fail(tx: Transaction, ctx: Context) -> None:
        box = tx.plugins(ns)["box"]
        box["v"] = 42
        failed.append(box)
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        await c.commit(fail, BACKGROUND)
    with pytest.raises(RevokedProxy):
        failed[0]["v"] = 43
    await c.commit(lambda tx, ctx: tx.emit(ns, "tick"), BACKGROUND)
    assert (await c.sticky(BACKGROUND))["plugins"]["keep"]["box"] == {"v": 0}
    await h.close(BACKGROUND)
    h2 = await Harness.open(storage_factory(), None, BACKGROUND)
    c2 = await h2.root(BACKGROUND)
    assert (await c2.sticky(BACKGROUND))["plugins"]["keep"]["box"] == {"v": 0}
    await h2.close(BACKGROUND)


async def test_scan_after_same_batch_append_poisons_the_transaction(
    storage_factory: StorageFactory,
) -> None:  # 35
    h, c = await open_root(storage_factory)
    seq = h.kernel.storage.seq

    async def builder(tx: Transaction, ctx: Context) -> None:
        assert await tx.newest_entry(c.id) is None  # before the append: fine
        tx.write(c.id, "ci.note")
        try:
            await tx.newest_entry(c.id)
        except ReadAfterWrite:
            pass  # caught, but the transaction stays poisoned

    with pytest.raises(ReadAfterWrite):
        await c.commit(builder, BACKGROUND)
    assert h.kernel.storage.seq == seq
    for scan in ("scan_entries", "context"):

        async def other(tx: Transaction, ctx: Context, scan: str = scan) -> None:
            tx.write(c.id, "ci.note")
            await getattr(tx, scan)(c.id)

        with pytest.raises(ReadAfterWrite):
            await c.commit(other, BACKGROUND)
    await h.close(BACKGROUND)


async def test_direct_reads_see_same_batch_writes(storage_factory: StorageFactory) -> None:  # 36
    h, c = await open_root(storage_factory)

    async def builder(tx: Transaction, ctx: Context) -> int:
        input_id = tx.write(c.id, "ci.note", data={"x": 1})
        record = await tx.input(input_id)
        assert record is not None and record.status == "done"
        entry_id = record.entry
        assert isinstance(entry_id, int)
        entry = await tx.entry(entry_id)
        assert entry is not None and entry.data == {"x": 1}
        assert await tx.entry(entry_id, "ci.other") is None
        assert list(await tx.entries([entry_id, 999])) == [entry_id]
        child = await tx.create_conversation()
        assert tx.conversation(child) is not None
        return input_id

    input_id = await c.commit(builder, BACKGROUND)
    assert (await c.commit(lambda tx, ctx: tx.input(input_id), BACKGROUND)).status == "done"
    await h.close(BACKGROUND)


async def test_nested_commit_with_the_builder_ctx_raises(
    storage_factory: StorageFactory,
) -> None:  # 37
    h, c = await open_root(storage_factory)

    async def inner_with_builder_ctx(tx: Transaction, ctx: Context) -> None:
        await c.commit(lambda tx2, ctx2: None, ctx)

    async def inner_with_outer_ctx(tx: Transaction, ctx: Context) -> None:
        await c.commit(lambda tx2, ctx2: None, BACKGROUND)

    with pytest.raises(NestedLineOperation):
        await c.commit(inner_with_builder_ctx, BACKGROUND)
    with anyio.fail_after(5):
        with pytest.raises(NestedLineOperation):
            await c.commit(inner_with_outer_ctx, BACKGROUND)
        with pytest.raises(NestedLineOperation):
            await c.commit(lambda tx, ctx: c.watch(BACKGROUND), BACKGROUND)
    await c.write("ci.ok", BACKGROUND)  # the line is free again
    await h.close(BACKGROUND)


async def test_transaction_used_after_its_builder_returned_is_closed(
    storage_factory: StorageFactory,
) -> None:
    h, c = await open_root(storage_factory)
    kept: list[Transaction] = []
    await c.commit(lambda tx, ctx: kept.append(tx), BACKGROUND)
    with pytest.raises(TransactionClosed):
        kept[0].write(c.id, "ci.late")
    await h.close(BACKGROUND)


async def test_cancelled_ctx_is_rejected_before_queueing(storage_factory: StorageFactory) -> None:
    h, c = await open_root(storage_factory)
    ctx, cancel = with_cancel(BACKGROUND)
    cancel("stop")
    ran: list[bool] = []
    with pytest.raises(ContextCancelled):
        await c.commit(lambda tx, ctx: ran.append(True), ctx)
    assert ran == []
    await h.close(BACKGROUND)


async def test_empty_builder_persists_nothing(storage_factory: StorageFactory) -> None:
    h, c = await open_root(storage_factory)
    seq = h.kernel.storage.seq
    assert await c.commit(lambda tx, ctx: 7, BACKGROUND) == 7
    assert h.kernel.storage.seq == seq
    await h.close(BACKGROUND)


class _FailingStorage(MemoryStorage):
    fail = False

    async def commit(self, writes: Sequence[Write], ctx: Context) -> int:
        if self.fail:
            raise OSError("disk on fire")
        return await super().commit(writes, ctx)


async def test_storage_failure_faults_the_session() -> None:  # 43
    storage = _FailingStorage()
    h = await Harness.open(storage, None, BACKGROUND)
    c = await h.root(BACKGROUND)
    await c.write("ci.ok", BACKGROUND)
    storage.fail = True
    seq = storage.seq
    with pytest.raises(Faulted, match="disk on fire"):
        await c.write("ci.lost", BACKGROUND)
    storage.fail = False
    with pytest.raises(Faulted):
        await c.write("ci.after", BACKGROUND)
    with pytest.raises(Faulted):
        await c.watch(BACKGROUND)
    assert storage.seq == seq
    await h.close(BACKGROUND)


async def test_listener_errors_after_persistence_never_fail_the_writer(
    storage_factory: StorageFactory,
) -> None:  # 44
    reported: list[BaseException] = []
    from pico3.harness import HarnessOptions

    h = await Harness.open(storage_factory(), HarnessOptions(on_report=reported.append), BACKGROUND)
    c = await h.root(BACKGROUND)

    def broken(batch: Batch) -> None:
        raise RuntimeError("listener bug")

    h.kernel.add_commit_listener(broken)
    watch = await c.watch(BACKGROUND)
    watch.start(lambda envelope: (_ for _ in ()).throw(ValueError("watch bug")))
    input_id = await c.write("ci.ok", BACKGROUND)
    assert input_id > 0
    assert sorted(type(e).__name__ for e in reported) == ["RuntimeError", "ValueError"]
    assert watch.closed
    await h.close(BACKGROUND)


async def test_second_session_on_the_same_storage_object_rejects() -> None:  # 45
    storage = MemoryStorage()
    h = await Harness.open(storage, None, BACKGROUND)
    with pytest.raises(StorageInUse):
        await Harness.open(storage, None, BACKGROUND)
    await h.close(BACKGROUND)
    h2 = await Harness.open(storage, None, BACKGROUND)  # reopenable after close
    await h2.close(BACKGROUND)


async def test_closed_session_rejects_operations(storage_factory: StorageFactory) -> None:
    h, c = await open_root(storage_factory)
    await h.close(BACKGROUND)
    await h.close(BACKGROUND)
    with pytest.raises(Closed):
        await c.write("ci.late", BACKGROUND)


async def test_a_builder_ctx_kept_after_its_commit_is_usable(
    storage_factory: StorageFactory,
) -> None:
    h, c = await open_root(storage_factory)
    kept: list[Context] = []
    await c.commit(lambda tx, ctx: kept.append(ctx), BACKGROUND)
    assert await c.write("ci.later", kept[0]) > 0
    await h.close(BACKGROUND)


async def test_a_task_spawned_by_a_builder_may_commit_after_the_builder(
    storage_factory: StorageFactory,
) -> None:
    h, c = await open_root(storage_factory)
    release = anyio.Event()
    results: list[int] = []

    async def later() -> None:
        await release.wait()
        results.append(await c.write("ci.spawned", BACKGROUND))

    async with anyio.create_task_group() as tg:
        await c.commit(lambda tx, ctx: tg.start_soon(later), BACKGROUND)
        release.set()
    assert len(results) == 1
    await h.close(BACKGROUND)


class _RefusingStorage(MemoryStorage):
    refuse = False

    async def commit(self, writes: Sequence[Write], ctx: Context) -> int:
        if self.refuse:
            from pico3.storage import InvalidBatch

            raise InvalidBatch("refused before anything changed")
        return await super().commit(writes, ctx)


async def test_a_refused_batch_rejects_without_faulting() -> None:
    storage = _RefusingStorage()
    h = await Harness.open(storage, None, BACKGROUND)
    c = await h.root(BACKGROUND)
    ns = h.namespace("n", {"sticky": {"v": 0}})
    storage.refuse = True

    def bump(tx: Transaction, ctx: Context) -> None:
        tx.plugins(ns)["v"] = 5

    from pico3.storage import InvalidBatch

    with pytest.raises(InvalidBatch):
        await c.commit(bump, BACKGROUND)
    storage.refuse = False
    assert await c.commit(lambda tx, ctx: tx.plugins(ns)["v"], BACKGROUND) == 0
    await h.close(BACKGROUND)


async def test_committed_ids_are_never_reused_after_reopen(
    storage_factory: StorageFactory,
) -> None:  # 33
    h, c = await open_root(storage_factory)
    committed = await c.write("ci.kept", BACKGROUND)

    def lost(tx: Transaction, ctx: Context) -> None:
        tx.write(c.id, "ci.lost")
        raise RuntimeError("builder failed")

    with pytest.raises(RuntimeError):
        await c.commit(lost, BACKGROUND)
    await h.close(BACKGROUND)
    h2 = await Harness.open(storage_factory(), None, BACKGROUND)
    c2 = await h2.root(BACKGROUND)
    fresh = await c2.write("ci.next", BACKGROUND)
    assert fresh > committed + 1  # beyond the committed input and entry ids
    await h2.close(BACKGROUND)
