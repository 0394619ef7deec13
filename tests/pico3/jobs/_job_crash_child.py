"""Child process for ``test_job_crash.py``: a harness running one ``pi.job``, to be SIGKILLed.

``python _job_crash_child.py DIR STAGE GATE``: JSONL session in ``DIR/session`` (fsync off) and
a :class:`LocalProcessHost` on ``DIR/processes``.

* ``start``   — create a job whose process writes ``DIR/count``, blocks on the FIFO ``GATE`` and
  exits 6; print ``running <task id>`` once the job's ``running`` checkpoint is committed, then
  wait forever (the test SIGKILLs this process; the job's process lives on);
* ``recover`` — reopen with a fresh host object on the same state directory; print
  ``done <outcome json>`` when the job ends.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio

from chord.context import BACKGROUND
from pico3 import jobs
from pico3.handle import HarnessHandle
from pico3.harness import HarnessOptions
from pico3.process_host import LocalProcessHost
from pico3.storage import JsonlStorage

ctx = BACKGROUND


def say(line: str) -> None:
    os.write(1, f"{line}\n".encode())


async def main(directory: Path, stage: str, gate: str) -> None:
    host = LocalProcessHost(directory / "processes")
    storage = lambda: JsonlStorage(directory / "session", fsync=False)  # noqa: E731
    options = HarnessOptions(services={"process_host": host})
    async with HarnessHandle(storage, options) as handle:
        handle.add_registration(jobs.install)
        await handle.open(ctx)
        h = handle.harness
        if stage == "start":
            count = str(directory / "count")
            code = f"open({count!r}, 'a').write('x'); open({gate!r}).read(); raise SystemExit(6)"
            job = jobs.job_input(sys.executable, ["-c", code], cwd=str(directory))
            root = await h.root(ctx)
            task_id = await root.commit(
                lambda tx, _c: tx.create_task(jobs.JOB_KIND, job, background=True), ctx
            )
            running = anyio.Event()

            def listener(_batch: object) -> None:
                task = h.kernel.task_index.get(task_id)
                checkpoint = None if task is None else task.checkpoint
                if isinstance(checkpoint, dict) and checkpoint.get("phase") == "running":
                    running.set()

            h.kernel.add_commit_listener(listener)
            await running.wait()
            say(f"running {task_id}")
            await anyio.sleep_forever()
        found = await h.kernel.commit(lambda tx, _c: tx.tasks(kind="pi.job"), ctx)
        final = await h.wait_for_task(found[0].id, ctx)
        say(f"done {json.dumps(final.outcome)}")


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]), sys.argv[2], sys.argv[3])
