"""The ``repo.indexer`` task kind: index a working tree into the session's code index, resumably.

This is the custom-kind example of docs/design/harness.md#task-kinds made real. The durable program is the
task's **checkpoint**; progress lives in the task's **slot** and reaches the view through
``describe()``; the index itself is an external effect made safe by an **idempotency key**::

    initial                       slot counters are 0 (the kind's ``slot``); checkpoint scanning
    scanning{cursor}              scan the tree once (``.gitignore`` respected, see .scan), then
                                  for every batch after ``cursor``:
                                    commit   writing{batchKey}        the key, before the effect
                                    effect   store.write_batch(key)   a no-op if the key is held
                                    commit   scanning{cursor: key} + slot counters (one commit)
                                  then commit pruning and prune files that left the tree
    writing{batchKey}  in-flight  entered only on recovery (after a crash or a suspend): write the
                                  batch with that key again, then carry on scanning after it
    pruning                       prune (idempotent by nature), then finish

A crash between the effect and the commit that follows it leaves ``writing{key}``; recovery
repeats the write with the same key and :meth:`~.store.IndexStore.write_batch` returns ``False``
because the key is already there: one logical write per batch, whatever the crash timing.

Batch keys are stable for an unchanged tree (:func:`~.scan.make_batches`). If the tree changed
while the task was down, the saved cursor names no batch of the fresh scan: the run starts over
(counters reset) and the store skips every batch it already holds, so only changed batches cost.

Where things are comes from the harness's ``services`` (``HarnessOptions.services``, which the
session worker fills and which outlive every opening): :data:`STATE_DIR_SERVICE` names the
session's state folder, which holds the index file :data:`~.contract.INDEX_FILE_NAME`;
:data:`WORKSPACE_SERVICE` names the working tree a run indexes when no root is given. The task
input is ``{"root": "<absolute directory>"}``.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import anyio.to_thread
import msgspec

from chord import Context
from pico3 import (
    NOTICE_KIND,
    Completion,
    Done,
    Runtime,
    Step,
    Task,
    TaskInfo,
    TaskKind,
    Transaction,
    define_task,
)

from .contract import INDEX_FILE_NAME, INDEXER_KIND, IndexerStage, IndexerStatus
from .scan import DEFAULT_BATCH_SIZE, DEFAULT_MAX_FILE_BYTES, Batch, read_batch, scan_batches
from .store import AsyncIndexStore, Fts5UnavailableError

__all__ = [
    "STATE_DIR_SERVICE",
    "WORKSPACE_SERVICE",
    "AfterWrite",
    "IndexerNotConfigured",
    "describe_indexer",
    "index_file",
    "indexer_kind",
]

STATE_DIR_SERVICE = "state_dir"
"""``HarnessOptions.services`` key: the session's state folder (``str`` or path)."""

WORKSPACE_SERVICE = "workspace"
"""``HarnessOptions.services`` key: the working tree indexed when no root is given."""

AfterWrite = Callable[[str, bool], Awaitable[None] | None]
"""``after_write(batch_key, written)``: called after every write attempt, before the commit
that records it (``written`` is ``False`` when the store already held the key)."""

_STAGES: frozenset[str] = frozenset({"starting", "scanning", "writing", "pruning", "done"})


class IndexerNotConfigured(LookupError):
    """The harness services name no state folder, so there is nowhere to keep the index."""


def index_file(services: Mapping[str, Any]) -> Path:
    """The index file inside the session's state folder named by ``services``."""
    state = services.get(STATE_DIR_SERVICE)
    if state is None:
        raise IndexerNotConfigured(
            f"the session has no state folder: HarnessOptions.services[{STATE_DIR_SERVICE!r}] "
            "is not set, so the code index has nowhere to live"
        )
    if not isinstance(state, str | os.PathLike):
        raise IndexerNotConfigured(
            f"HarnessOptions.services[{STATE_DIR_SERVICE!r}] must be a path, "
            f"got {type(state).__name__}"
        )
    return Path(state) / INDEX_FILE_NAME


def describe_indexer(task: TaskInfo) -> dict[str, Any]:
    """``view.tasks[id].status`` of a run: an :class:`~.contract.IndexerStatus` as JSON."""
    slot = task.slot or {}
    phase = task.phase or "starting"
    stage = cast(IndexerStage, phase if phase in _STAGES else "starting")
    status = IndexerStatus(
        stage,
        files_total=_count(slot, "filesTotal"),
        files_indexed=_count(slot, "filesIndexed"),
        batches_done=_count(slot, "batchesDone"),
    )
    return msgspec.to_builtins(status)


def _count(slot: Mapping[str, Any], key: str) -> int:
    value = slot.get(key, 0)
    return value if type(value) is int else 0


def _initial_slot(_input: Any) -> dict[str, Any]:
    return {"filesTotal": 0, "filesIndexed": 0, "batchesDone": 0}


def _root_of(task: TaskInfo) -> str | None:
    data = task.input
    if type(data) is dict and isinstance(data.get("root"), str) and data["root"]:
        return data["root"]
    return None


def _failed(reason: str) -> Done:
    return Done(lambda tx, current, ctx: Completion.failed({"reason": reason}))


def indexer_kind(
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    use_git: bool | None = None,
    after_write: AfterWrite | None = None,
) -> TaskKind:
    """A ``repo.indexer`` kind (see the module docstring).

    ``batch_size``, ``max_file_bytes`` and ``use_git`` go to :func:`~.scan.scan_batches`;
    ``after_write`` observes every write attempt (tests park a process there to crash it in the
    worst place). Each call returns a new kind object: register exactly one at a time.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")

    async def scan(root: str) -> list[Batch]:
        return await anyio.to_thread.run_sync(
            lambda: scan_batches(
                root, batch_size=batch_size, max_file_bytes=max_file_bytes, use_git=use_git
            )
        )

    async def write(store: AsyncIndexStore, root: str, batch: Batch) -> None:
        files = await anyio.to_thread.run_sync(read_batch, root, batch)
        written = await store.write_batch(batch.key, files)
        if after_write is not None:
            result = after_write(batch.key, written)
            if inspect.isawaitable(result):
                await result

    async def open_store(rt: Runtime) -> AsyncIndexStore:
        path = index_file(rt.services)
        await anyio.to_thread.run_sync(lambda: path.parent.mkdir(parents=True, exist_ok=True))
        return await AsyncIndexStore.open(path)

    async def run(
        task: TaskInfo,
        rt: Runtime,
        ctx: Context,
        root: str,
        batches: Sequence[Batch],
        cursor: str | None,
        store: AsyncIndexStore,
    ) -> Step:
        """Write every batch after ``cursor``, prune, finish."""
        keys = [batch.key for batch in batches]
        start = keys.index(cursor) + 1 if cursor in keys else 0
        restart = cursor is not None and start == 0
        total = sum(len(batch.files) for batch in batches)

        def refresh(tx: Transaction, current: Task, _ctx: Context) -> None:
            slot = tx.slot(current)
            slot["filesTotal"] = total
            if restart:  # the tree changed while we were down: this run starts over
                slot["filesIndexed"] = 0
                slot["batchesDone"] = 0

        await rt.commit(refresh, ctx)
        for batch in batches[start:]:
            await rt.commit(_checkpoint({"phase": "writing", "batchKey": batch.key}), ctx)
            await write(store, root, batch)
            await rt.commit(_advance(batch), ctx)
        await rt.commit(_checkpoint({"phase": "pruning"}), ctx)
        removed = await store.prune(f.path for batch in batches for f in batch.files)
        return _finish(root, removed, rt.now())

    async def guarded(
        task: TaskInfo, rt: Runtime, ctx: Context, body: Callable[[str, AsyncIndexStore], Any]
    ) -> Step:
        """Open the store and run ``body``; expected environment problems fail the task with a
        reason instead of faulting it."""
        root = _root_of(task)
        if root is None:
            return _failed(f"the task input must be {{'root': <directory>}}, got {task.input!r}")
        try:
            store = await open_store(rt)
        except (IndexerNotConfigured, Fts5UnavailableError, OSError) as error:
            return _failed(str(error))
        async with store:
            try:
                return await body(root, store)
            except NotADirectoryError as error:
                return _failed(str(error))

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
        async def body(root: str, store: AsyncIndexStore) -> Step:
            await rt.commit(_checkpoint({"phase": "scanning", "cursor": None}), ctx)
            return await run(task, rt, ctx, root, await scan(root), None, store)

        return await guarded(task, rt, ctx, body)

    async def scanning(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
        assert task.checkpoint is not None
        cursor = task.checkpoint.get("cursor")

        async def body(root: str, store: AsyncIndexStore) -> Step:
            return await run(task, rt, ctx, root, await scan(root), cursor, store)

        return await guarded(task, rt, ctx, body)

    # In-flight: only entered after a crash or a suspend. The batch key was persisted before the
    # effect; the write is repeated with the same key, which is safe only because the store is
    # idempotent by key. Then the run carries on from that batch with the scan it just made.
    async def writing(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
        assert task.checkpoint is not None
        key = task.checkpoint["batchKey"]

        async def body(root: str, store: AsyncIndexStore) -> Step:
            batches = await scan(root)
            for batch in batches:
                if batch.key == key:
                    await write(store, root, batch)
                    await rt.commit(_advance(batch), ctx)
                    break
            return await run(task, rt, ctx, root, batches, key, store)

        return await guarded(task, rt, ctx, body)

    async def pruning(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
        async def body(root: str, store: AsyncIndexStore) -> Step:
            batches = await scan(root)
            removed = await store.prune(f.path for batch in batches for f in batch.files)
            return _finish(root, removed, rt.now())

        return await guarded(task, rt, ctx, body)

    async def abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
        indexed = _count(task.slot or {}, "filesIndexed")
        return lambda tx, current, ctx: {"filesIndexed": indexed}

    return define_task(
        INDEXER_KIND,
        initial=initial,
        phases={"scanning": scanning, "writing": writing, "pruning": pruning},
        inflight=("writing",),
        abort=abort,
        slot=_initial_slot,
        describe=describe_indexer,
    )


def _checkpoint(value: dict[str, Any]) -> Callable[[Transaction, Task, Context], None]:
    def build(tx: Transaction, current: Task, _ctx: Context) -> None:
        tx.checkpoint(value)

    return build


def _advance(batch: Batch) -> Callable[[Transaction, Task, Context], None]:
    """The commit after a batch's write: count it and move the cursor past it."""

    def build(tx: Transaction, current: Task, _ctx: Context) -> None:
        slot = tx.slot(current)
        slot["filesIndexed"] = _count(slot, "filesIndexed") + len(batch.files)
        slot["batchesDone"] = _count(slot, "batchesDone") + 1
        if batch.files:
            slot["lastFile"] = batch.files[-1].path
        tx.checkpoint({"phase": "scanning", "cursor": batch.key})

    return build


def _finish(root: str, removed: int, now: int) -> Done:
    def close(tx: Transaction, current: Task, _ctx: Context) -> Completion:
        slot = tx.slot(current)
        files = _count(slot, "filesIndexed")
        batches = _count(slot, "batchesDone")
        message = {
            "role": "user",
            "content": f"Indexed {files} files of {root} for code_search.",
            "timestamp": now,
        }
        tx.write(current.conversation_id, NOTICE_KIND, model=[message])
        return Completion.completed({"files": files, "batches": batches, "removed": removed})

    return Done(close)
