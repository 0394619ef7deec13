"""The custom-kind example of docs/design/harness.md#task-kinds (a repository indexer), written in Python against pico3.

A background repository indexer, resumable and observable:

* the **checkpoint** says where to resume: ``scanning{cursor}`` or, right before an effect,
  the in-flight ``writing{batchKey}``;
* the **slot** holds progress (``files``, ``lastFile``), shown through ``describe()`` as
  ``tasks[id].status = {stage, files}``;
* a rewindable **config** key of the kind (``indexIgnore``) is read through the runtime;
* the finished run writes a ``pi.notice`` **entry** for the model.

The batch key is committed *before* ``write_batch(key)``; after a crash the in-flight phase
``writing`` is the recovery program and repeats the write with the same key. That is only safe
because the receiving side is idempotent by key: here :class:`IdempotentSink`, a fake that
records every delivery in a file (so a test can see the repeat) while its logical content is
one write per key.

Module, not test: imported by the tests of this folder (see conftest.py) and by the crash
child process.
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chord.context import Context
from pico3.kernel.tx import Transaction
from pico3.storage.records import Task
from pico3.tasks import Completion, Done, Next, Runtime, Step, TaskInfo, TaskKind, define_task

AfterWrite = Callable[[str], Awaitable[None]]


class IdempotentSink:
    """A fake receiving side that dedupes by key.

    Every delivery is appended to ``deliveries`` (one key per line, fsynced: it is the
    evidence a crash test reads); :meth:`store` is the logical content, first write per key.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def write_batch(self, key: str, files: list[str] | None = None) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"key": key, "files": files}) + "\n")
            out.flush()
            os.fsync(out.fileno())

    def deliveries(self) -> list[str]:
        """Every delivered key, in order (repeats included)."""
        if not self.path.exists():
            return []
        return [json.loads(line)["key"] for line in self.path.read_text().splitlines()]

    def store(self) -> dict[str, Any]:
        """The logical content: one entry per key (the first delivery wins)."""
        out: dict[str, Any] = {}
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                record = json.loads(line)
                out.setdefault(record["key"], record["files"])
        return out


@dataclass(frozen=True, slots=True)
class Batch:
    key: str
    files: list[str]


def next_batch(root: str, cursor: str | None, ignore: list[str], size: int) -> Batch | None:
    """The next ``size`` files under ``root`` after ``cursor`` (sorted relative paths, ignored
    patterns left out); the key is the batch's last path, which is also the next cursor."""
    base = Path(root)
    files = sorted(
        p.relative_to(base).as_posix()
        for p in base.rglob("*")
        if p.is_file() and not any(fnmatch.fnmatch(p.name, pat) for pat in ignore)
    )
    rest = [f for f in files if cursor is None or f > cursor]
    if not rest:
        return None
    chunk = rest[:size]
    return Batch(key=chunk[-1], files=chunk)


def make_indexer(
    sink: IdempotentSink,
    *,
    batch_size: int = 2,
    after_write: AfterWrite | None = None,
    with_describe: bool = True,
) -> TaskKind:
    """The ``repo.indexer`` kind writing to ``sink``. ``after_write(key)`` runs between the
    effect and the next checkpoint (the crash window of docs/design/storage.md#worst-cases); tests park there.
    ``with_describe=False`` leaves ``describe`` out (the view then shows ``{phase}``)."""

    async def write_batch(key: str, files: list[str] | None, ctx: Context) -> None:
        ctx.raise_if_cancelled()
        sink.write_batch(key, files)

    def describe(task: TaskInfo) -> Any:
        return {"stage": task.phase or "starting", "files": (task.slot or {}).get("files", 0)}

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
        def start(tx: Transaction, current: Task, _ctx: Context) -> None:
            tx.slot(current)["files"] = 0
            tx.checkpoint({"phase": "scanning", "cursor": None})

        await rt.commit(start, ctx)
        return await scan(task, None, rt, ctx)

    async def scanning(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
        assert task.checkpoint is not None
        return await scan(task, task.checkpoint["cursor"], rt, ctx)

    # In-flight: only entered after a crash. The batch key was persisted before the effect;
    # the write is repeated with the same key, which is safe only because the sink is
    # idempotent by key.
    async def writing(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
        assert task.checkpoint is not None
        await write_batch(task.checkpoint["batchKey"], None, ctx)
        return Next({"phase": "scanning", "cursor": task.checkpoint["batchKey"]})

    async def abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
        return lambda tx, current, ctx: None

    async def scan(task: TaskInfo, cursor: str | None, rt: Runtime, ctx: Context) -> Step:
        ignore = (await rt.rewindable(task.conversation_id, ctx))["indexIgnore"]
        batch = next_batch(task.input["root"], cursor, ignore, batch_size)
        if batch is None:
            now = rt.now()

            def done(tx: Transaction, current: Task, _ctx: Context) -> Completion:
                files = tx.slot(current)["files"]
                message = {"role": "user", "content": f"Indexed {files} files.", "timestamp": now}
                tx.write(current.conversation_id, "pi.notice", model=[message])
                return Completion.completed({"files": files})

            return Done(done)
        key = batch.key
        await rt.commit(
            lambda tx, current, _ctx: tx.checkpoint({"phase": "writing", "batchKey": key}), ctx
        )  # idempotency key before the effect
        await write_batch(key, batch.files, ctx)
        if after_write is not None:
            await after_write(key)

        def advance(tx: Transaction, current: Task, _ctx: Context) -> dict[str, Any]:
            slot = tx.slot(current)
            slot["files"] += len(batch.files)
            slot["lastFile"] = batch.files[-1]
            return {"phase": "scanning", "cursor": key}

        return Next(advance)

    return define_task(
        "repo.indexer",
        config={"rewindable": {"indexIgnore": []}},
        describe=describe if with_describe else None,
        initial=initial,
        phases={"scanning": scanning, "writing": writing},
        inflight=("writing",),
        abort=abort,
    )
