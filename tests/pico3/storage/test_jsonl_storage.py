"""JsonlStorage layout and publication (docs/design/storage.md#jsonl-files, #publication-point, #fsync, #sticky-truncation, docs/design/decisions.md#d8-g14)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from chord.context import BACKGROUND
from pico3.storage import (
    Conversation,
    ConversationWrite,
    CorruptStorage,
    DocRef,
    DocWrite,
    Entry,
    EntryScan,
    EntryWrite,
    InvalidBatch,
    JsonlStorage,
    StorageFailed,
    StorageInUse,
    Task,
    TaskPatch,
    TaskPatchWrite,
    TaskWrite,
)
from pico3.storage._lines import read_lines
from pico3.storage.jsonl import MAIN_FILE

pytestmark = pytest.mark.anyio
ctx = BACKGROUND


def plain(writes: list[Any]) -> Any:
    """Writes as plain JSON data (a replayed entry's payloads are its stored text)."""
    return msgspec.json.decode(msgspec.json.encode(writes))


def records(path: Path) -> list[dict[str, Any]]:
    """Each line of a storage file, decoded whatever its format, in the v1 object shape (the
    writes as the records encode them, ``refs`` as file names)."""
    data = path.read_bytes()  # while open with fsync, main.jsonl ends in preallocated zeros
    out: list[dict[str, Any]] = []
    for _, _, line in read_lines(str(path), data[: data.rfind(b"\n") + 1], path.name == MAIN_FILE):
        record = {
            "seq": line.seq,
            "maxId": line.max_id,
            "writes": plain(line.writes),
        }
        if line.refs is not None:
            record["refs"] = list(line.refs)
        if line.own:
            record["own"] = True
        out.append(record)
    return out


async def opened(path: Path, *, fsync: bool = False, thread_above: float = 0.002) -> JsonlStorage:
    storage = JsonlStorage(path, fsync=fsync, thread_above=thread_above)
    await storage.open(ctx)
    return storage


async def test_writes_are_split_into_main_sticky_and_task_files(tmp_path: Path, h) -> None:
    storage = await opened(tmp_path)
    cid, tid = storage.mint_id(), storage.mint_id()
    await storage.commit(
        [
            ConversationWrite(Conversation(id=cid)),
            TaskWrite(Task(id=tid, conversation_id=cid, kind="k")),
            DocWrite(DocRef.sticky(cid), [["s", ["inbox"], []]]),
            DocWrite(DocRef.rewindable(cid), [["s", ["m"], 1]]),
            TaskPatchWrite(TaskPatch(id=tid, status="running", checkpoint={"phase": "a"})),
        ],
        ctx,
    )
    assert sorted(os.listdir(tmp_path)) == [
        "main.jsonl",
        f"sticky-{cid}.jsonl",
        f"task-{tid}.jsonl",
    ]
    (main,) = records(tmp_path / "main.jsonl")
    assert main["seq"] == 1 and main["maxId"] == 0  # 0: its writes create the greatest id
    assert [w["type"] for w in main["writes"]] == ["conversation", "task", "doc"]
    assert main["refs"] == [f"task-{tid}.jsonl", f"sticky-{cid}.jsonl"] or main["refs"] == [
        f"sticky-{cid}.jsonl",
        f"task-{tid}.jsonl",
    ]
    (sticky,) = records(tmp_path / f"sticky-{cid}.jsonl")
    assert sticky["seq"] == 1 and sticky["maxId"] == tid and "refs" not in sticky
    assert sticky["writes"] == [
        {
            "type": "doc",
            "ref": {"doc": "sticky", "conversation_id": cid},
            "ops": [["s", ["inbox"], []]],
        }
    ]
    (task,) = records(tmp_path / f"task-{tid}.jsonl")
    assert task["writes"][0]["patch"] == {
        "id": tid,
        "status": "running",
        "checkpoint": {"phase": "a"},
    }
    # a sticky-only commit is published by its own sidecar line: main gets no line
    await storage.commit([DocWrite(DocRef.sticky(cid), [["s", ["k"], 1]])], ctx)
    assert [r["seq"] for r in records(tmp_path / "main.jsonl")] == [1]
    last = records(tmp_path / f"sticky-{cid}.jsonl")[-1]
    assert (last["seq"], last.get("own")) == (2, True)
    # and so is a commit of that conversation's sticky ops and its task's transient patches
    await storage.commit(
        [
            DocWrite(DocRef.sticky(cid), [["s", ["k"], 2]]),
            TaskPatchWrite(TaskPatch(id=tid, checkpoint={"phase": "b"})),
        ],
        ctx,
    )
    assert [r["seq"] for r in records(tmp_path / "main.jsonl")] == [1]
    last = records(tmp_path / f"sticky-{cid}.jsonl")[-1]
    assert (last["seq"], last.get("own"), len(last["writes"])) == (3, True, 2)
    live = await h.dump(storage)
    await storage.close(ctx)
    storage = await opened(tmp_path)
    assert await h.dump(storage) == live
    task = await storage.task(tid, ctx)
    assert task is not None and task.checkpoint == {"phase": "b"}
    await storage.close(ctx)


async def test_terminal_record_goes_to_main_and_retires_the_task_file(tmp_path: Path, h) -> None:
    storage = await opened(tmp_path)
    cid = await h.with_root(storage)
    tid = storage.mint_id()
    await storage.commit([TaskWrite(Task(id=tid, conversation_id=cid, kind="k"))], ctx)
    await storage.commit([TaskPatchWrite(TaskPatch(id=tid, status="running"))], ctx)
    assert (tmp_path / f"task-{tid}.jsonl").exists()
    await storage.commit(
        [
            TaskPatchWrite(TaskPatch(id=tid, checkpoint={"phase": "z"})),
            TaskPatchWrite(TaskPatch(id=tid, status="terminal", outcome={"orphaned": True})),
        ],
        ctx,
    )
    last = records(tmp_path / "main.jsonl")[-1]
    assert [w["patch"].get("status") for w in last["writes"]] == [None, "terminal"]  # together
    assert "refs" not in last
    live = await h.dump(storage)
    await storage.close(ctx)  # the retirement thread's unlink is done once close returns
    assert not (tmp_path / f"task-{tid}.jsonl").exists()
    storage = await opened(tmp_path)
    assert await h.dump(storage) == live
    await storage.close(ctx)


async def test_owns_patches_outlive_the_task_file(tmp_path: Path, h) -> None:
    storage = await opened(tmp_path)
    cid = await h.with_root(storage)
    tid, child = storage.mint_id(), storage.mint_id()
    await storage.commit([TaskWrite(Task(id=tid, conversation_id=cid, kind="k"))], ctx)
    await storage.commit(
        [
            ConversationWrite(Conversation(id=child, owner=tid)),
            TaskPatchWrite(TaskPatch(id=tid, owns=[child])),
        ],
        ctx,
    )
    await storage.commit([TaskPatchWrite(TaskPatch(id=tid, status="terminal"))], ctx)
    await storage.close(ctx)
    storage = await opened(tmp_path)
    task = await storage.task(tid, ctx)
    assert task is not None and task.owns == [child]
    await storage.close(ctx)


async def test_refused_batches_touch_no_file(tmp_path: Path, h) -> None:
    storage = await opened(tmp_path)
    cid = await h.with_root(storage)
    snapshot = {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)}
    with pytest.raises(InvalidBatch):
        await storage.commit(
            [
                DocWrite(DocRef.sticky(cid), [["s", ["k"], 1]]),
                EntryWrite(
                    Entry(
                        id=storage.mint_id(),
                        conversation_id=cid,
                        kind="k",
                        data={"x": float("nan")},
                    )
                ),
            ],
            ctx,
        )
    assert {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)} == snapshot
    await storage.close(ctx)


@pytest.mark.parametrize("thread_above", [0.0, 10.0], ids=["worker-thread", "inline"])
async def test_fsync_mode_commits_in_order_from_concurrent_callers(
    tmp_path: Path, h, thread_above: float
) -> None:
    storage = await opened(tmp_path, fsync=True, thread_above=thread_above)
    assert storage.fsync
    cid = await h.with_root(storage)
    seqs: list[int] = []

    async def one(n: int) -> None:
        e = Entry(id=storage.mint_id(), conversation_id=cid, kind="k", data={"n": n})
        seqs.append(
            await storage.commit(
                [EntryWrite(e), DocWrite(DocRef.sticky(cid), [["s", ["n"], n]])], ctx
            )
        )

    async with anyio.create_task_group() as group:
        for n in range(12):
            group.start_soon(one, n)
    assert sorted(seqs) == list(range(2, 14))
    assert [r["seq"] for r in records(tmp_path / "main.jsonl")] == list(range(1, 14))
    live = await h.dump(storage)
    await storage.close(ctx)
    storage = await opened(tmp_path, fsync=True)
    assert await h.dump(storage) == live
    await storage.close(ctx)


def test_fsync_is_the_default() -> None:
    assert JsonlStorage("unused").fsync is True


async def test_a_second_storage_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    storage = await opened(tmp_path)
    with pytest.raises(StorageInUse):
        await opened(tmp_path)
    await storage.close(ctx)
    again = await opened(tmp_path)  # the lock went with the close
    await again.close(ctx)


async def test_sticky_rewrite_keeps_state_and_uses_a_temp_file_and_rename(
    tmp_path: Path, h
) -> None:
    # (the kernel calls truncate on its line; here: no append races it)
    storage = await opened(tmp_path, fsync=True, thread_above=0.0)
    cid = await h.with_root(storage)
    sticky = DocRef.sticky(cid)
    for n in range(5):
        await storage.commit([DocWrite(sticky, [["s", ["n"], n]])], ctx)
    await storage.commit([DocWrite(sticky, [["r", {"base": True}]])], ctx)
    await storage.commit([DocWrite(sticky, [["s", ["after"], 1]])], ctx)
    path = tmp_path / f"sticky-{cid}.jsonl"
    inode = path.stat().st_ino
    async with anyio.create_task_group() as group:  # a commit queued behind the rewrite
        group.start_soon(storage.truncate, sticky, ctx)
        group.start_soon(storage.commit, [DocWrite(sticky, [["s", ["late"], 2]])], ctx)
    assert path.stat().st_ino != inode  # replaced by rename, not edited in place
    assert [r["seq"] for r in records(path)] == [7, 8, 9]
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]
    live = await h.dump(storage)
    assert live[f"sticky {cid}"] == {"base": True, "after": 1, "late": 2}
    await storage.close(ctx)
    storage = await opened(tmp_path)  # markers 2..6 name the file: explained by the later base
    assert await h.dump(storage) == live
    await storage.commit([DocWrite(sticky, [["s", ["more"], 3]])], ctx)  # appends after rewrite
    await storage.close(ctx)
    assert [r["seq"] for r in records(path)] == [7, 8, 9, 10]


async def test_a_write_failure_makes_the_storage_fail_stop(tmp_path: Path, h) -> None:
    storage = await opened(tmp_path)
    cid = await h.with_root(storage)
    other = storage.mint_id()
    await storage.commit([ConversationWrite(Conversation(id=other))], ctx)
    (tmp_path / f"sticky-{other}.jsonl").mkdir()  # the sidecar cannot be opened for append
    with pytest.raises(StorageFailed):
        await storage.commit([DocWrite(DocRef.sticky(other), [["s", ["k"], 1]])], ctx)
    with pytest.raises(StorageFailed, match="an earlier commit failed"):
        await storage.commit([DocWrite(DocRef.sticky(cid), [["s", ["k"], 1]])], ctx)
    await storage.close(ctx)
    (tmp_path / f"sticky-{other}.jsonl").rmdir()
    storage = await opened(tmp_path)
    assert storage.seq == 2  # the failed commit never published
    assert await storage.doc(DocRef.sticky(other), ctx) is None
    await storage.close(ctx)


async def test_patches_of_a_task_created_terminal_stay_in_main(tmp_path: Path, h) -> None:
    storage = await opened(tmp_path)
    cid = await h.with_root(storage)
    tid = storage.mint_id()
    await storage.commit(
        [
            TaskWrite(Task(id=tid, conversation_id=cid, kind="k", status="terminal")),
            TaskPatchWrite(TaskPatch(id=tid, abort=True)),
        ],
        ctx,
    )
    assert sorted(os.listdir(tmp_path)) == ["main.jsonl"]
    live = await h.dump(storage)
    await storage.close(ctx)
    storage = await opened(tmp_path)
    assert await h.dump(storage) == live
    await storage.close(ctx)


async def test_a_lone_surrogate_is_refused_and_the_storage_goes_on(tmp_path: Path, h) -> None:
    """Issue 24 deliver 5: text UTF-8 cannot encode is a refused batch naming the field, not a
    failed commit that fail-stops the session."""
    storage = await opened(tmp_path)
    cid = await h.with_root(storage)
    snapshot = {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)}
    entry = Entry(id=storage.mint_id(), conversation_id=cid, kind="k", data={"text": "a\ud800"})
    with pytest.raises(InvalidBatch, match=r"writes\[0\].*data.text: a lone surrogate \(\\ud800\)"):
        await storage.commit([EntryWrite(entry)], ctx)
    assert {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)} == snapshot
    fine = Entry(id=storage.mint_id(), conversation_id=cid, kind="k", data={"text": "a\u00e9"})
    await storage.commit([EntryWrite(fine)], ctx)  # not failed: the next commit is stored
    await storage.close(ctx)
    storage = await opened(tmp_path)
    assert [
        e.data for e in await storage.scan_entries(EntryScan(conversation_id=cid, limit=10), ctx)
    ] == [{"text": "a\u00e9"}]
    await storage.close(ctx)


async def test_a_missing_main_file_fails_loudly_and_changes_nothing(tmp_path: Path, h) -> None:
    """Issue 24 item 10: a missing main.jsonl never opens as an empty session, and never cuts
    the sticky sidecar it would no longer confirm."""
    storage = await opened(tmp_path)
    cid = await h.with_root(storage)
    await storage.commit([DocWrite(DocRef.sticky(cid), [["s", ["inbox"], [1]]])], ctx)
    await storage.close(ctx)
    (tmp_path / "main.jsonl").unlink()
    sticky = tmp_path / f"sticky-{cid}.jsonl"
    before = sticky.read_bytes()
    main = tmp_path / "main.jsonl"
    message = (
        f"{main}: the session's transcript is missing while sticky-{cid}.jsonl still exist; "
        "nothing was opened or changed"
    )
    with pytest.raises(CorruptStorage, match=re.escape(message)):
        await opened(tmp_path)
    assert sticky.read_bytes() == before and not main.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CorruptStorage, match="the session's transcript is missing;"):
        storage = JsonlStorage(empty, fsync=False, create=False)
        await storage.open(ctx)
    assert os.listdir(empty) == [], "create=False creates nothing"


@pytest.mark.parametrize("thread_above", [0.0, 10.0], ids=["worker-thread", "inline"])
async def test_group_commit_publishes_at_once_and_writes_in_order_when_waited_for(
    tmp_path: Path, h, thread_above: float
) -> None:
    storage = await opened(tmp_path, fsync=True, thread_above=thread_above)
    cid = await h.with_root(storage)
    assert storage.commit_deferred([]) is not None  # an empty batch queues too
    seqs = []
    for n in range(3):
        e = Entry(id=storage.mint_id(), conversation_id=cid, kind="k", data={"n": n})
        seq = storage.commit_deferred(
            [EntryWrite(e), DocWrite(DocRef.sticky(cid), [["s", ["n"], n]])]
        )
        assert seq is not None
        seqs.append(seq)
    assert h.fold(await storage.doc(DocRef.sticky(cid), ctx)) == {"n": 2}  # visible at once
    on_disk = [r["seq"] for r in records(tmp_path / "main.jsonl")]
    assert seqs[0] not in on_disk  # queued, not written: nobody may report it yet
    await storage.durable(seqs[1])
    on_disk = [r["seq"] for r in records(tmp_path / "main.jsonl")]
    assert on_disk[-3:] == seqs  # the writer took the whole queue, in order
    await storage.durable(seqs[2])  # already written
    # a plain commit behind queued ones writes them first
    queued = storage.commit_deferred([DocWrite(DocRef.sticky(cid), [["s", ["q"], 1]])])
    plain_seq = await storage.commit([DocWrite(DocRef.sticky(cid), [["s", ["p"], 1]])], ctx)
    assert queued is not None and plain_seq == queued + 1
    assert [r["seq"] for r in records(tmp_path / f"sticky-{cid}.jsonl")][-2:] == [queued, plain_seq]
    last = storage.commit_deferred([DocWrite(DocRef.sticky(cid), [["s", ["last"], 1]])])
    live = await h.dump(storage)
    await storage.close(ctx)  # writes what is still queued
    assert last is not None and records(tmp_path / f"sticky-{cid}.jsonl")[-1]["seq"] == last
    storage = await opened(tmp_path, fsync=True)
    assert await h.dump(storage) == live
    await storage.close(ctx)


async def test_group_commit_without_fsync_commits_plainly(tmp_path: Path, h) -> None:
    storage = await opened(tmp_path)
    await h.with_root(storage)
    assert storage.commit_deferred([]) is None  # a plain write is cheaper than the queue
    await storage.close(ctx)


async def test_a_failed_queued_write_fails_it_and_every_batch_behind_it(tmp_path: Path, h) -> None:
    storage = await opened(tmp_path, fsync=True)
    cid = await h.with_root(storage)
    other = storage.mint_id()
    await storage.commit([ConversationWrite(Conversation(id=other))], ctx)
    good = storage.commit_deferred([DocWrite(DocRef.sticky(cid), [["s", ["k"], 1]])])
    (tmp_path / f"sticky-{other}.jsonl").mkdir()  # the sidecar cannot be opened for append
    bad = storage.commit_deferred([DocWrite(DocRef.sticky(other), [["s", ["k"], 1]])])
    behind = storage.commit_deferred([DocWrite(DocRef.sticky(cid), [["s", ["k"], 2]])])
    assert good is not None and bad is not None and behind is not None
    with pytest.raises(StorageFailed):
        await storage.durable(behind)
    await storage.durable(good)  # written before the failure: durable
    with pytest.raises(StorageFailed):
        await storage.durable(bad)
    with pytest.raises(StorageFailed, match="an earlier commit failed"):
        storage.commit_deferred([])
    await storage.close(ctx)
    (tmp_path / f"sticky-{other}.jsonl").rmdir()
    storage = await opened(tmp_path)
    assert storage.seq == good  # neither the failed batch nor the one behind it was published
    assert h.fold(await storage.doc(DocRef.sticky(cid), ctx)) == {"k": 1}
    await storage.close(ctx)
