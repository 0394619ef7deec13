"""The commits of the old-format fixture (``fixtures/v1-session``): every kind of write, with
every optional member used at least once, and one live task with transient patches.

``fixtures/v1-session`` was written by this script with the v1 (object-per-line) JsonlStorage,
``fixtures/v2a-session`` with the first v2 code (write tags ``p`` and ``i``),
``fixtures/v2b-session`` with the v2 code before status codes (statuses by name);
``test_jsonl_formats.py`` replays the same commits into a fresh (v2) storage and compares.
Run ``python tests/pico3/storage/v1_session.py DIR`` to write the session again.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from chord.context import BACKGROUND
from pico3.storage import (
    Conversation,
    ConversationWrite,
    DocRef,
    DocWrite,
    Entry,
    EntryWrite,
    Input,
    InputWrite,
    Storage,
    Task,
    TaskPatch,
    TaskPatchWrite,
    TaskWrite,
)
from pico3.storage.records import Parent, SectionSeed

ctx = BACKGROUND


async def write_session(storage: Storage) -> None:
    """Commit the fixture's batches to an open, empty storage."""
    await storage.commit(
        [
            ConversationWrite(
                Conversation(id=1, sections=[SectionSeed(key="k", value=None, rendered="r")])
            ),
            DocWrite(DocRef.session(), [["s", ["plugins"], {}]]),
            DocWrite(DocRef.rewindable(1), [["s", ["model"], {"id": "m"}]]),
        ],
        ctx,
    )
    await storage.commit(
        [
            EntryWrite(Entry(id=2, conversation_id=1, kind="pi.user", model=[{"role": "user"}])),
            InputWrite(
                Input(
                    id=3,
                    conversation_id=1,
                    status="placed",
                    request_id="req-1",
                    entry=2,
                    detail=None,
                )
            ),
            TaskWrite(
                Task(id=4, conversation_id=1, kind="gen", input={"inputs": [3]}, background=True)
            ),
            DocWrite(DocRef.sticky(1), [["s", ["turn"], {"n": 1}]]),
        ],
        ctx,
    )
    await storage.commit([TaskPatchWrite(TaskPatch(id=4, status="running"))], ctx)
    await storage.commit(
        [
            TaskPatchWrite(TaskPatch(id=4, checkpoint={"phase": "a"}, abort=True)),
            DocWrite(DocRef.sticky(1), [["s", ["t"], "x"]]),
        ],
        ctx,
    )
    await storage.commit([DocWrite(DocRef.sticky(1), [["s", ["t"], "y"]])], ctx)
    await storage.commit(
        [
            EntryWrite(
                Entry(
                    id=5,
                    conversation_id=1,
                    kind="pi.assistant",
                    model=[{"role": "assistant"}],
                    data={"attempt": 1},
                    head=2,
                    edits=[["s", ["x"], 1]],
                    by_task_id=4,
                )
            ),
            InputWrite(
                Input(
                    id=3,
                    conversation_id=1,
                    status="unanswered",
                    request_id="req-1",
                    entry=2,
                    answer=5,
                    reason="failed",
                    detail={"why": "x"},
                )
            ),
            TaskPatchWrite(TaskPatch(id=4, checkpoint=None)),
            TaskPatchWrite(
                TaskPatch(id=4, status="terminal", outcome={"status": "completed"}, owns=[1])
            ),
            DocWrite(DocRef.sticky(1), [["d", ["turn"]]]),
        ],
        ctx,
    )
    await storage.commit(
        [
            TaskWrite(
                Task(
                    id=6,
                    conversation_id=1,
                    kind="sup",
                    status="running",
                    checkpoint={"c": 1},
                    after=[4],
                    owns=[],
                )
            ),
            ConversationWrite(Conversation(id=7, parent=Parent(conversation_id=1, at=5), owner=6)),
            EntryWrite(Entry(id=8, conversation_id=7, kind="note", data={"text": "é\u2028"})),
        ],
        ctx,
    )
    minted = [storage.mint_id() for _ in range(3)]  # ids 9..11, only named in a checkpoint
    await storage.commit([TaskPatchWrite(TaskPatch(id=6, checkpoint={"ids": minted}))], ctx)
    await storage.commit(
        [
            TaskPatchWrite(TaskPatch(id=6, status="running")),
            DocWrite(DocRef.sticky(7), [["s", ["inbox"], []]]),
            DocWrite(DocRef.sticky(1), [["r", {"base": True}]]),
        ],
        ctx,
    )
    for n in range(2):
        assert storage.mint_id() == 12 + 2 * n
        await storage.commit(
            [EntryWrite(Entry(id=12 + 2 * n, conversation_id=7, kind="tick", data={"n": n}))],
            ctx,
        )
        storage.mint_id()  # minted, never written


async def _main(directory: str) -> None:
    from pico3.storage import JsonlStorage

    storage = JsonlStorage(Path(directory), fsync=False)
    await storage.open(ctx)
    await write_session(storage)
    await storage.close(ctx)


if __name__ == "__main__":
    anyio.run(_main, sys.argv[1])
