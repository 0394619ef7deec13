"""Crash-test child for ``test_crash_kill.py``: commits in a loop and acknowledges each commit.

Run as a *zygote*: it imports everything once, then for every directory read from stdin forks a
worker. The worker prints ``pid <pid>``, opens a :class:`JsonlStorage` on the directory (fsync
off; on when the line is ``<directory>\tdirect`` or ``<directory>\tprealloc``, which also
picks the durable write path of main.jsonl) and commits forever, printing ``ack <seq>``
after each commit returns. The parent SIGKILLs the worker at a moment of its choosing; the zygote
reaps it and prints ``done``. Forking
from a warm process keeps a hundred kill points cheap; every kill is still a real SIGKILL of a
real process in the middle of whatever it was doing (replay, append, rename, unlink).

Commit ``n`` (its seq) always carries, atomically:

* an entry ``{"kind": "tick", "data": {"n": n}}`` in main (from ``n = 2``);
* a sticky document write setting ``n`` (every 7th commit a base ``["r", {"n": n}]``, followed by
  a sticky rewrite) in the sticky sidecar;
* a checkpoint ``{"n": n}`` on the one live task, in its task sidecar; every 5th commit instead
  retires that task (terminal record in main, sidecar unlinked) and creates its successor with
  checkpoint ``{"n": n}``.

So a reopened directory is consistent exactly when the sticky ``n``, the live task's checkpoint
``n`` and the newest entry all equal the seq: a half-published commit cannot hide.
"""

from __future__ import annotations

import os
import sys

import anyio

from chord.context import BACKGROUND
from pico3.storage import (
    Conversation,
    ConversationWrite,
    DocRef,
    DocWrite,
    Entry,
    EntryWrite,
    JsonlStorage,
    Task,
    TaskPatch,
    TaskPatchWrite,
    TaskScan,
    TaskWrite,
    Write,
)
from pico3.storage._log import MainLog

ctx = BACKGROUND
ROOT = 1
LIVE = frozenset({"pending", "running"})


def say(line: str) -> None:
    os.write(1, f"{line}\n".encode())


async def work(directory: str, fsync: bool) -> None:
    storage = JsonlStorage(directory, fsync=fsync)
    await storage.open(ctx)
    sticky = DocRef.sticky(ROOT)
    if storage.seq == 0:
        cid, tid = storage.mint_id(), storage.mint_id()
        assert cid == ROOT
        seq = await storage.commit(
            [
                ConversationWrite(Conversation(id=cid)),
                TaskWrite(Task(id=tid, conversation_id=cid, kind="tick", checkpoint={"n": 1})),
                DocWrite(sticky, [["r", {"n": 1}]]),
            ],
            ctx,
        )
        say(f"ack {seq}")
    while True:
        n = storage.seq + 1
        (live,) = await storage.scan_tasks(TaskScan(status=LIVE), ctx)
        base = n % 7 == 0
        writes: list[Write] = [
            EntryWrite(
                Entry(id=storage.mint_id(), conversation_id=ROOT, kind="tick", data={"n": n})
            ),
            DocWrite(sticky, [["r", {"n": n}]] if base else [["s", ["n"], n]]),
        ]
        if n % 5 == 0:
            successor = Task(
                id=storage.mint_id(), conversation_id=ROOT, kind="tick", checkpoint={"n": n}
            )
            outcome = {"completed": True, "result": n}
            writes.append(TaskPatchWrite(TaskPatch(id=live.id, status="terminal", outcome=outcome)))
            writes.append(TaskWrite(successor))
        else:
            writes.append(
                TaskPatchWrite(TaskPatch(id=live.id, status="running", checkpoint={"n": n}))
            )
        seq = await storage.commit(writes, ctx)
        say(f"ack {seq}")
        if base:
            await storage.truncate(sticky, ctx)


def main() -> None:
    while True:
        directory, _, mode = sys.stdin.readline().strip().partition("\t")
        if not directory:
            break
        pid = os.fork()
        if pid == 0:  # the worker
            code = 0
            try:
                say(f"pid {os.getpid()}")
                MainLog.use_direct = mode == "direct"
                anyio.run(work, directory, mode in ("direct", "prealloc"))
            except BaseException as exc:
                print(f"worker failed: {exc!r}", file=sys.stderr, flush=True)
                code = 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        say(f"done {status}")


if __name__ == "__main__":
    main()
