"""A worker process for the PostgreSQL lease tests: ``_pg_child.py CONNINFO SESSION LEASE [take]``.

It opens :class:`PostgresStorage` on the session (``take``: taking the lease over), prints
``open <epoch> <seq>``, then obeys one command per stdin line: ``commit`` commits an entry and
prints ``ack <seq>``, or ``lost <message>`` for :class:`LeaseLost` (and then refuses every later
commit the same way); ``close`` closes and exits. A refused open prints ``inuse <message>``.
"""

from __future__ import annotations

import os
import sys

import anyio

from chord.context import BACKGROUND
from pico3.storage import (
    Conversation,
    ConversationWrite,
    Entry,
    EntryWrite,
    LeaseLost,
    PostgresStorage,
    StorageInUse,
)


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main(conninfo: str, session: str, lease: float, take: bool) -> None:
    storage = PostgresStorage(conninfo, session, fsync=False, lease_seconds=lease, take_over=take)
    try:
        await storage.open(BACKGROUND)
    except StorageInUse as exc:
        say(f"inuse {exc}")
        return
    say(f"open {storage.epoch} {storage.seq}")
    if storage.seq == 0:
        await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], BACKGROUND)
    while line := await anyio.to_thread.run_sync(sys.stdin.readline):
        command = line.strip()
        if command == "commit":
            note = Entry(
                id=storage.mint_id(), conversation_id=1, kind="note", data={"pid": os.getpid()}
            )
            try:
                say(f"ack {await storage.commit([EntryWrite(note)], BACKGROUND)}")
            except LeaseLost as exc:
                say(f"lost {exc}")
        elif command == "close":
            break
    await storage.close(BACKGROUND)
    say("closed")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:] == ["take"])
