"""Child process for ``test_task_crash.py``: runs a task on JSONL storage until told to die.

``python _task_crash_child.py DIR STAGE`` opens ``DIR/session`` (fsync off) with the kind below
and resumes. On an empty session it creates one task. ``STAGE`` says where the worker parks
(prints ``parked <where>`` and waits forever, to be SIGKILLed):

* ``phase``    — inside the ordinary phase ``working`` (checkpoint ``{"phase": "working"}``);
* ``inflight`` — after writing the in-flight checkpoint ``sending{key}`` *and* performing the
  keyed effect, before the next checkpoint (the worst case of docs/design/storage.md#worst-cases);
* ``recover``  — never parks: run to completion and print ``done <outcome json>``.

Every handler entry is appended to ``DIR/log`` and every effect to ``DIR/sink`` (the fake
idempotent sink: it records each delivery; the logical content is the set of keys).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from chord.context import BACKGROUND, Context
from pico3.handle import HarnessHandle
from pico3.harness import HarnessOptions
from pico3.storage import JsonlStorage
from pico3.tasks import Completion, Done, Next, Runtime, TaskInfo, define_task

ctx = BACKGROUND


def say(line: str) -> None:
    os.write(1, f"{line}\n".encode())


def main(directory: Path, stage: str) -> None:
    log, sink = directory / "log", directory / "sink"

    def note(path: Path, line: str) -> None:
        with path.open("a") as f:
            f.write(line + "\n")

    async def park(where: str) -> None:
        if stage == where:
            say(f"parked {where}")
            await anyio.sleep_forever()

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Next:
        note(log, "initial")
        return Next({"phase": "working"})

    async def working(task: TaskInfo, rt: Runtime, ctx: Context) -> Next:
        note(log, "working")
        await park("phase")
        key = f"batch-{task.id}"
        await rt.commit(lambda tx, cur, _c: tx.checkpoint({"phase": "sending", "key": key}), ctx)
        note(sink, key)  # the effect, keyed by the persisted idempotency key
        await park("inflight")
        return Next({"phase": "sent", "key": key})

    async def sending(task: TaskInfo, rt: Runtime, ctx: Context) -> Next:
        assert task.checkpoint is not None
        note(log, "sending")  # only ever entered on recovery
        note(sink, task.checkpoint["key"])
        return Next({"phase": "sent", "key": task.checkpoint["key"]})

    async def sent(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        assert task.checkpoint is not None
        note(log, "sent")
        key = task.checkpoint["key"]
        return Done(lambda tx, cur, c: Completion.completed({"key": key}))

    async def abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
        return lambda tx, cur, c: None

    kind = define_task(
        "test.crashy",
        initial=initial,
        phases={"working": working, "sending": sending, "sent": sent},
        inflight=("sending",),
        abort=abort,
    )

    async def run() -> None:
        storage = lambda: JsonlStorage(directory / "session", fsync=False)  # noqa: E731
        async with HarnessHandle(storage, HarnessOptions()) as handle:
            handle.add_registration(lambda h: h.register_task_kind(kind))
            await handle.open(ctx)
            h = handle.harness
            c = await h.root(ctx)
            tasks = await h.kernel.commit(lambda tx, _c: tx.tasks(kind="test.crashy"), ctx)
            if tasks:
                task_id = tasks[0].id
            else:
                task_id = await c.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
            final = await h.wait_for_task(task_id, ctx)
            say(f"done {json.dumps(final.outcome)}")

    anyio.run(run)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
