"""A custom task kind, the repository indexer example (docs/design/harness.md#task-kinds):
resumable, observable through ``describe``, idempotent batches by key."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from seed_indexer import IdempotentSink, make_indexer

from chord.context import BACKGROUND
from pico3.handle import HarnessHandle
from pico3.harness import HarnessOptions
from pico3.kernel.errors import StaleDefinition
from pico3.storage import Storage
from pico3.tasks import ManualClock, TaskKind

pytestmark = pytest.mark.anyio
ctx = BACKGROUND


@asynccontextmanager
async def session(
    storage_factory: Callable[[], Storage], clock: ManualClock, *kinds: TaskKind
) -> AsyncIterator[HarnessHandle]:
    options = HarnessOptions(clock=clock)
    async with HarnessHandle(storage_factory, options) as handle:
        for kind in kinds:
            handle.add_registration(lambda h, k=kind: h.register_task_kind(k))
        await handle.open(ctx)
        yield handle


async def start_indexer(handle: HarnessHandle, kind: TaskKind, root: Path) -> int:
    c = await handle.harness.root(ctx)
    return await c.commit(
        lambda tx, _c: tx.create_task(kind, {"root": str(root)}, background=True), ctx
    )


async def outcome_of(handle: HarnessHandle, task_id: int) -> Any:
    return (await handle.harness.wait_for_task(task_id, ctx)).outcome


async def view_record(handle: HarnessHandle, task_id: int) -> Any:
    c = await handle.harness.root(ctx)
    watch = await c.watch(ctx)
    watch.stop()
    return watch.view["tasks"].get(str(task_id))


class Parking:
    """An ``after_write`` hook that parks the indexer after each effect until released."""

    def __init__(self) -> None:
        self.parked = anyio.Event()
        self._go = anyio.Event()
        self.keys: list[str] = []
        self._open = False

    async def __call__(self, key: str) -> None:
        self.keys.append(key)
        if self._open:
            return
        self.parked.set()
        await self._go.wait()

    def release(self) -> None:
        """Let the parked indexer go on to its next effect (where it parks again)."""
        go, self._go = self._go, anyio.Event()
        self.parked = anyio.Event()
        go.set()

    def open(self) -> None:
        """Let it go and never park again."""
        self._open = True
        self.release()


async def test_the_indexer_writes_every_batch_once_and_notices_the_count(
    storage_factory: Any, clock: ManualClock, repo: Path, tmp_path: Path
) -> None:
    sink = IdempotentSink(tmp_path / "sink")
    indexer = make_indexer(sink)
    async with session(storage_factory, clock, indexer) as handle:
        task_id = await start_indexer(handle, indexer, repo)
        outcome = await outcome_of(handle, task_id)
        c = await handle.harness.root(ctx)
        notice = await c.commit(lambda tx, _c: tx.newest_entry(c.id, "pi.notice"), ctx)
    assert outcome == {"status": "completed", "result": {"files": 5}}
    assert sink.deliveries() == ["b.py", "src/d.py", "z.log"]
    assert notice is not None and notice.model[0]["content"] == "Indexed 5 files."


async def test_describe_output_appears_as_the_tasks_status_in_the_view(
    storage_factory: Any, clock: ManualClock, repo: Path, tmp_path: Path
) -> None:
    # tasks[id] = {kind, background, status: describe(task)}.
    parking = Parking()
    indexer = make_indexer(IdempotentSink(tmp_path / "sink"), after_write=parking)
    async with session(storage_factory, clock, indexer) as handle:
        task_id = await start_indexer(handle, indexer, repo)
        await parking.parked.wait()
        assert await view_record(handle, task_id) == {
            "kind": "repo.indexer",
            "background": True,
            "status": {"stage": "writing", "files": 0},
        }
        parking.release()
        await parking.parked.wait()
        record = await view_record(handle, task_id)
        assert record["status"] == {"stage": "writing", "files": 2}
        parking.open()
        await outcome_of(handle, task_id)
        assert await view_record(handle, task_id) is None  # terminal tasks leave the view


async def test_without_describe_the_status_is_the_phase(
    storage_factory: Any, clock: ManualClock, repo: Path, tmp_path: Path
) -> None:
    parking = Parking()
    indexer = make_indexer(
        IdempotentSink(tmp_path / "sink"), after_write=parking, with_describe=False
    )
    async with session(storage_factory, clock, indexer) as handle:
        task_id = await start_indexer(handle, indexer, repo)
        await parking.parked.wait()
        assert (await view_record(handle, task_id))["status"] == {"phase": "writing"}
        parking.open()
        await outcome_of(handle, task_id)


async def test_the_kind_reads_its_config_default_and_a_later_set(
    storage_factory: Any, clock: ManualClock, repo: Path, tmp_path: Path
) -> None:
    # Custom kind defaults are visible before any set, like the example's indexIgnore.
    sink = IdempotentSink(tmp_path / "sink")
    indexer = make_indexer(sink)
    async with session(storage_factory, clock, indexer) as handle:
        c = await handle.harness.root(ctx)
        assert (await c.config(ctx))["indexIgnore"] == []
        await c.set_config({"indexIgnore": ["*.log"]}, ctx)
        task_id = await start_indexer(handle, indexer, repo)
        assert await outcome_of(handle, task_id) == {
            "status": "completed",
            "result": {"files": 4},
        }
    assert "z.log" not in sink.store()


async def test_a_suspend_inside_the_inflight_phase_repeats_the_keyed_effect_after_reopen(
    storage_factory: Any, clock: ManualClock, repo: Path, tmp_path: Path
) -> None:
    # Resumable: the checkpoint `writing{batchKey}` is the recovery program counter.
    sink = IdempotentSink(tmp_path / "sink")
    parking = Parking()
    indexer = make_indexer(sink, after_write=parking)
    async with session(storage_factory, clock, indexer) as handle:
        task_id = await start_indexer(handle, indexer, repo)
        await parking.parked.wait()  # after the effect, before the next checkpoint
        task = await handle.harness.get_task(task_id, ctx)
        assert task is not None and task.checkpoint == {"phase": "writing", "batchKey": "b.py"}
        await handle.suspend(ctx)  # cancels the parked invocation
        parking.open()
        await handle.reopen(ctx)
        outcome = await outcome_of(handle, task_id)
    assert sink.deliveries() == ["b.py", "b.py", "src/d.py", "z.log"]
    assert list(sink.store()) == ["b.py", "src/d.py", "z.log"]  # one logical write per key
    # As the example is written, the recovery program repeats the effect but does not count that
    # batch's files again (the slot is progress, not the index): 5 files, 3 counted.
    assert outcome == {"status": "completed", "result": {"files": 3}}


async def test_an_unregistered_kind_leaves_pending_tasks_pending_until_re_registered(
    storage_factory: Any, clock: ManualClock, repo: Path, tmp_path: Path
) -> None:
    # not dispatched, not orphaned; a new registration dispatches it.
    sink = IdempotentSink(tmp_path / "sink")
    first = make_indexer(sink)
    async with session(storage_factory, clock) as handle:
        h = handle.harness
        unregister = h.register_task_kind(first)
        release = h.hold()
        task_id = await start_indexer(handle, first, repo)
        unregister()
        release()
        task = await h.get_task(task_id, ctx)
        assert task is not None and task.status == "pending"
        assert (await view_record(handle, task_id))["kind"] == "repo.indexer"
        with pytest.raises(StaleDefinition):
            await start_indexer(handle, first, repo)
        second = make_indexer(sink)
        h.register_task_kind(second)
        assert (await outcome_of(handle, task_id))["status"] == "completed"
    assert sink.deliveries() == ["b.py", "src/d.py", "z.log"]


async def test_a_kind_missing_at_open_orphans_its_tasks_and_only_at_open(
    storage_factory: Any, clock: ManualClock, repo: Path, tmp_path: Path
) -> None:
    sink = IdempotentSink(tmp_path / "sink")
    indexer = make_indexer(sink)
    async with session(storage_factory, clock) as handle:
        remove = handle.add_registration(lambda h: h.register_task_kind(indexer))
        release = handle.harness.hold()
        task_id = await start_indexer(handle, indexer, repo)
        await handle.suspend(ctx)
        release()
        remove()  # the next opening does not register the kind
        await handle.reopen(ctx)
        task = await handle.harness.get_task(task_id, ctx)
        assert task is not None and task.outcome == {"status": "orphaned"}
        handle.harness.register_task_kind(make_indexer(sink))  # too late: it stays orphaned
        task = await handle.harness.get_task(task_id, ctx)
        assert task is not None and task.outcome == {"status": "orphaned"}
    assert sink.deliveries() == []
