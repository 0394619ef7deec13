"""Child process for ``test_indexer_crash.py``: runs the seed indexer on JSONL storage.

``python _indexer_crash_child.py DIR STAGE`` opens ``DIR/session`` (fsync off) with the
``repo.indexer`` kind, indexing ``DIR/repo`` into the fake idempotent sink ``DIR/sink``:

* ``park``    — create the task, and park (print ``parked <key>``, wait forever, to be
  SIGKILLed) right after the first batch's effect, inside the in-flight phase ``writing``;
* ``recover`` — reopen, let recovery run to the end, print ``done <outcome json>``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
from seed_indexer import IdempotentSink, make_indexer

from chord.context import BACKGROUND
from pico3.handle import HarnessHandle
from pico3.harness import HarnessOptions
from pico3.storage import JsonlStorage

ctx = BACKGROUND


def say(line: str) -> None:
    os.write(1, f"{line}\n".encode())


async def main(directory: Path, stage: str) -> None:
    async def park(key: str) -> None:
        if stage == "park":
            say(f"parked {key}")
            await anyio.sleep_forever()

    indexer = make_indexer(IdempotentSink(directory / "sink"), after_write=park)
    storage = lambda: JsonlStorage(directory / "session", fsync=False)  # noqa: E731
    async with HarnessHandle(storage, HarnessOptions()) as handle:
        handle.add_registration(lambda h: h.register_task_kind(indexer))
        await handle.open(ctx)
        h = handle.harness
        c = await h.root(ctx)
        found = await h.kernel.commit(lambda tx, _c: tx.tasks(kind="repo.indexer"), ctx)
        if found:
            task_id = found[0].id
        else:
            root = str(directory / "repo")
            task_id = await c.commit(
                lambda tx, _c: tx.create_task(indexer, {"root": root}, background=True), ctx
            )
        final = await h.wait_for_task(task_id, ctx)
        say(f"done {json.dumps(final.outcome)}")


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]), sys.argv[2])
