"""Child process for ``test_crash.py``: index a tree on JSONL storage until told to die.

``python _crash_worker.py DIR PARK`` opens the session ``DIR/session`` (fsync off) with the
``repo.indexer`` kind (batches of 4, state folder ``DIR/state``) and resumes; on a session with no
indexer task it starts one over ``DIR/repo``. Every batch write *attempt* is appended (and
fsynced) to ``DIR/attempts`` as ``<key> <written|held>``, before the commit that records it.

``PARK`` is ``N`` (a number): after this process's N-th attempt, print ``parked <key>`` and wait
to be SIGKILLed — the run is then between a batch write and its commit, the worst case of seed
docs/design/harness.md#task-kinds. ``PARK`` is ``recover``: run to the end and print ``done <outcome json>``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio

from chord.context import BACKGROUND
from facets_indexer.contract import INDEXER_KIND
from facets_indexer.kind import STATE_DIR_SERVICE, indexer_kind
from facets_indexer.session import install_indexer
from pico3.handle import HarnessHandle
from pico3.harness import HarnessOptions
from pico3.storage import JsonlStorage


def say(line: str) -> None:
    os.write(1, f"{line}\n".encode())


def main(directory: Path, park: str) -> None:
    attempts = 0

    async def after_write(key: str, written: bool) -> None:
        nonlocal attempts
        attempts += 1
        with (directory / "attempts").open("a") as log:
            log.write(f"{key} {'written' if written else 'held'}\n")
            log.flush()
            os.fsync(log.fileno())
        if park != "recover" and attempts == int(park):
            say(f"parked {key}")
            await anyio.sleep_forever()

    kind = indexer_kind(batch_size=4, after_write=after_write, use_git=False)

    async def run() -> None:
        options = HarnessOptions(services={STATE_DIR_SERVICE: str(directory / "state")})
        storage = lambda: JsonlStorage(directory / "session", fsync=False)  # noqa: E731
        async with HarnessHandle(storage, options) as handle:
            handle.add_registration(lambda h: install_indexer(h, kind))
            await handle.open(BACKGROUND)
            harness = handle.harness
            tasks = await harness.kernel.commit(
                lambda tx, _c: tx.tasks(kind=INDEXER_KIND), BACKGROUND
            )
            if tasks:
                task_id = tasks[0].id
            else:
                root = await harness.root(BACKGROUND)
                task_id = await root.commit(
                    lambda tx, _c: tx.create_task(
                        kind, {"root": str(directory / "repo")}, background=True
                    ),
                    BACKGROUND,
                )
            final = await harness.wait_for_task(task_id, BACKGROUND)
            say(f"done {json.dumps(final.outcome)}")

    anyio.run(run)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
