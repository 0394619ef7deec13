"""JsonlStorage open-time reconciliation (docs/design/storage.md#recovery, #worst-cases).

Crashes are staged by editing the files exactly as a dying writer would leave them: a torn
final line, a sidecar record without its main marker, a marker whose sidecar never reached the
disk. ``test_crash_kill.py`` does the same with real SIGKILLed processes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chord.context import BACKGROUND
from pico3.storage import (
    UNSET,
    Conversation,
    ConversationWrite,
    CorruptStorage,
    DocRef,
    DocWrite,
    Entry,
    EntryWrite,
    JsonlStorage,
    Task,
    TaskPatch,
    TaskPatchWrite,
    TaskWrite,
)

pytestmark = pytest.mark.anyio
ctx = BACKGROUND


async def opened(path: Path) -> JsonlStorage:
    storage = JsonlStorage(path, fsync=False)
    await storage.open(ctx)
    return storage


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def drop_last_line(path: Path) -> bytes:
    kept = lines(path)
    path.write_bytes(b"".join(kept[:-1]))
    return kept[-1]


async def session(path: Path) -> tuple[int, int]:
    """A session with a root conversation (1) and a live task (2) with a task sidecar."""
    storage = await opened(path)
    cid, tid = storage.mint_id(), storage.mint_id()
    await storage.commit(
        [
            ConversationWrite(Conversation(id=cid)),
            TaskWrite(Task(id=tid, conversation_id=cid, kind="k")),
        ],
        ctx,
    )
    await storage.commit(
        [
            TaskPatchWrite(TaskPatch(id=tid, status="running")),
            DocWrite(DocRef.sticky(cid), [["s", ["n"], 1]]),
            DocWrite(DocRef.rewindable(cid), [["s", ["m"], 1]]),  # main: a marker names both
        ],
        ctx,
    )
    await storage.close(ctx)
    return cid, tid


async def commit_tick(path: Path, cid: int, tid: int, n: int) -> None:
    storage = await opened(path)
    await storage.commit(
        [
            EntryWrite(
                Entry(id=storage.mint_id(), conversation_id=cid, kind="tick", data={"n": n})
            ),
            DocWrite(DocRef.sticky(cid), [["s", ["n"], n]]),
            TaskPatchWrite(TaskPatch(id=tid, checkpoint={"phase": "tick", "n": n})),
        ],
        ctx,
    )
    await storage.close(ctx)


@pytest.mark.parametrize("file", ["main.jsonl", "sticky-1.jsonl", "task-2.jsonl"])
async def test_a_torn_final_line_is_cut_before_appending(tmp_path: Path, h, file: str) -> None:
    cid, tid = await session(tmp_path)
    storage = await opened(tmp_path)
    before = await h.dump(storage)
    await storage.close(ctx)
    size = (tmp_path / file).stat().st_size
    torn = tmp_path / file
    torn.write_bytes(torn.read_bytes() + b'{"seq":3,"maxId":9,"wri')
    storage = await opened(tmp_path)
    assert (tmp_path / file).stat().st_size == size  # physically truncated
    assert await h.dump(storage) == before
    await storage.close(ctx)
    await commit_tick(tmp_path, cid, tid, 5)
    storage = await opened(tmp_path)
    assert h.fold(await storage.doc(DocRef.sticky(cid), ctx)) == {"n": 5}
    await storage.close(ctx)


async def test_crash_before_the_main_marker_rolls_the_sidecars_back(tmp_path: Path, h) -> None:
    # the sidecars were appended, the marker never was
    cid, tid = await session(tmp_path)
    storage = await opened(tmp_path)
    before = await h.dump(storage)
    await storage.close(ctx)
    await commit_tick(tmp_path, cid, tid, 7)
    drop_last_line(tmp_path / "main.jsonl")
    sticky_size = len(b"".join(lines(tmp_path / "sticky-1.jsonl")[:-1]))
    storage = await opened(tmp_path)
    assert await h.dump(storage) == before
    assert (tmp_path / "sticky-1.jsonl").stat().st_size == sticky_size  # rolled back on disk
    assert storage.mint_id() == 3  # the unpublished commit's ids are free again
    await storage.close(ctx)


async def test_crash_after_the_main_marker_keeps_the_whole_commit(tmp_path: Path, h) -> None:
    cid, tid = await session(tmp_path)
    await commit_tick(tmp_path, cid, tid, 7)
    storage = await opened(tmp_path)
    task = await storage.task(tid, ctx)
    assert task is not None and task.checkpoint == {"phase": "tick", "n": 7}
    assert h.fold(await storage.doc(DocRef.sticky(cid), ctx)) == {"n": 7}
    assert storage.seq == 3
    await storage.close(ctx)


async def test_a_crash_between_two_sidecar_appends_rolls_back(tmp_path: Path, h) -> None:
    # the task sidecar got its record, the sticky sidecar and main did not
    cid, tid = await session(tmp_path)
    storage = await opened(tmp_path)
    before = await h.dump(storage)
    await storage.close(ctx)
    await commit_tick(tmp_path, cid, tid, 7)
    drop_last_line(tmp_path / "main.jsonl")
    drop_last_line(tmp_path / "sticky-1.jsonl")
    storage = await opened(tmp_path)
    assert await h.dump(storage) == before
    await storage.close(ctx)


async def test_a_malformed_complete_line_fails_open_naming_file_and_line(tmp_path: Path) -> None:
    cid, tid = await session(tmp_path)
    await commit_tick(tmp_path, cid, tid, 3)
    main = tmp_path / "main.jsonl"
    kept = lines(main)
    kept[1] = b'{"seq": 2, "oops"\n'
    main.write_bytes(b"".join(kept))
    with pytest.raises(CorruptStorage) as caught:
        await opened(tmp_path)
    assert caught.value.path == str(main) and caught.value.line == 2
    assert f"{main}:2: malformed record" in str(caught.value)


async def test_an_altered_byte_fails_the_checksum(tmp_path: Path) -> None:
    cid, tid = await session(tmp_path)
    await commit_tick(tmp_path, cid, tid, 3)
    sticky = tmp_path / "sticky-1.jsonl"
    sticky.write_bytes(sticky.read_bytes().replace(b'["n"],3', b'["n"],4'))
    with pytest.raises(CorruptStorage, match=r"sticky-1\.jsonl:2: checksum mismatch"):
        await opened(tmp_path)


async def test_a_record_without_seq_fails_open(tmp_path: Path) -> None:
    await session(tmp_path)
    main = tmp_path / "main.jsonl"
    main.write_bytes(main.read_bytes() + b'{"maxId":1,"writes":[],"crc":0}\n')
    with pytest.raises(CorruptStorage, match=r"main\.jsonl:3: malformed record.*seq"):
        await opened(tmp_path)


async def test_a_marker_naming_a_missing_sidecar_record_fails_open(tmp_path: Path) -> None:
    # the marker reached the disk, the sidecar record did not
    cid, tid = await session(tmp_path)
    await commit_tick(tmp_path, cid, tid, 3)
    drop_last_line(tmp_path / "task-2.jsonl")
    with pytest.raises(CorruptStorage) as caught:
        await opened(tmp_path)
    assert caught.value.path == str(tmp_path / "main.jsonl") and caught.value.line == 3
    assert "names task-2.jsonl, which has no record for it" in str(caught.value)


async def test_a_missing_sticky_file_fails_open(tmp_path: Path) -> None:
    await session(tmp_path)
    os.unlink(tmp_path / "sticky-1.jsonl")
    with pytest.raises(CorruptStorage, match=r"main\.jsonl:2: marker for seq 2 names sticky-1"):
        await opened(tmp_path)


async def test_a_non_monotonic_seq_fails_open_naming_file_and_line(tmp_path: Path) -> None:
    cid, tid = await session(tmp_path)
    await commit_tick(tmp_path, cid, tid, 3)
    await commit_tick(tmp_path, cid, tid, 4)
    main = tmp_path / "main.jsonl"
    kept = lines(main)
    kept[2], kept[3] = kept[3], kept[2]  # each line keeps a valid checksum
    main.write_bytes(b"".join(kept))
    with pytest.raises(CorruptStorage) as caught:
        await opened(tmp_path)
    assert (caught.value.path, caught.value.line) == (str(main), 4)
    assert "seq 3 does not increase (previous seq 4)" in str(caught.value)


async def test_an_unconfirmed_record_before_a_confirmed_one_fails_open(tmp_path: Path) -> None:
    cid, tid = await session(tmp_path)
    await commit_tick(tmp_path, cid, tid, 3)
    await commit_tick(tmp_path, cid, tid, 4)
    main = tmp_path / "main.jsonl"
    kept = lines(main)
    # main's marker 3 loses its refs: its sidecar records become unconfirmed, seq 4's are not
    main.write_bytes(b"".join(kept[:2] + kept[3:]))
    with pytest.raises(CorruptStorage, match="follows an unconfirmed one at line 2"):
        await opened(tmp_path)


async def test_a_stale_retired_task_sidecar_never_resurrects_state(tmp_path: Path, h) -> None:
    # unlink happened after the terminal record... or did not happen
    cid, tid = await session(tmp_path)
    await commit_tick(tmp_path, cid, tid, 3)
    stale = (tmp_path / "task-2.jsonl").read_bytes()
    storage = await opened(tmp_path)
    await storage.commit([TaskPatchWrite(TaskPatch(id=tid, status="terminal"))], ctx)
    live = await h.dump(storage)
    await storage.close(ctx)  # the retirement thread's unlink is done once close returns
    assert not (tmp_path / "task-2.jsonl").exists()
    (tmp_path / "task-2.jsonl").write_bytes(stale + b"garbage that is not json\n")
    (tmp_path / "task-99.jsonl").write_bytes(b"an unknown task's leftovers\n")
    storage = await opened(tmp_path)
    assert await h.dump(storage) == live
    assert not (tmp_path / "task-2.jsonl").exists() and not (tmp_path / "task-99.jsonl").exists()
    await storage.close(ctx)


async def test_the_id_high_water_survives_retired_sidecars(tmp_path: Path) -> None:
    _, tid = await session(tmp_path)
    storage = await opened(tmp_path)
    minted = [storage.mint_id() for _ in range(5)]  # e.g. ids a checkpoint refers to
    await storage.commit([TaskPatchWrite(TaskPatch(id=tid, checkpoint={"ids": minted}))], ctx)
    await storage.commit([TaskPatchWrite(TaskPatch(id=tid, status="terminal"))], ctx)
    await storage.close(ctx)
    storage = await opened(tmp_path)
    assert storage.mint_id() == minted[-1] + 1
    await storage.close(ctx)


async def test_a_leftover_rewrite_temp_file_is_discarded(tmp_path: Path, h) -> None:
    await session(tmp_path)
    storage = await opened(tmp_path)
    live = await h.dump(storage)
    await storage.close(ctx)
    (tmp_path / "sticky-1.jsonl.tmp").write_bytes(b"half a rewrite")
    storage = await opened(tmp_path)
    assert await h.dump(storage) == live
    assert not (tmp_path / "sticky-1.jsonl.tmp").exists()
    await storage.close(ctx)


async def test_a_batch_that_does_not_replay_fails_open(tmp_path: Path) -> None:
    cid, _ = await session(tmp_path)
    storage = await opened(tmp_path)
    await storage.commit(
        [EntryWrite(Entry(id=storage.mint_id(), conversation_id=cid, kind="k"))], ctx
    )
    await storage.close(ctx)
    main = tmp_path / "main.jsonl"
    main.write_bytes(lines(main)[2])  # seq 3 alone: an entry in a conversation nobody created
    with pytest.raises(CorruptStorage, match=r"main\.jsonl:1: batch does not replay.*unknown conv"):
        await opened(tmp_path)


async def sidecar_only(path: Path, cid: int, tid: int, n: int) -> None:
    """One commit of the conversation's sticky ops and its task's checkpoint, nothing else:
    published by its one sticky line."""
    storage = await opened(path)
    await storage.commit(
        [
            DocWrite(DocRef.sticky(cid), [["s", ["n"], n]]),
            TaskPatchWrite(TaskPatch(id=tid, checkpoint={"phase": "own", "n": n})),
        ],
        ctx,
    )
    await storage.close(ctx)


async def test_a_sidecar_published_commit_survives_and_a_lost_one_rolls_back(
    tmp_path: Path, h
) -> None:
    cid, tid = await session(tmp_path)
    main_size = (tmp_path / "main.jsonl").stat().st_size
    await sidecar_only(tmp_path, cid, tid, 8)
    assert (tmp_path / "main.jsonl").stat().st_size == main_size  # no main line at all
    storage = await opened(tmp_path)
    task = await storage.task(tid, ctx)
    assert task is not None and task.checkpoint == {"phase": "own", "n": 8}
    assert h.fold(await storage.doc(DocRef.sticky(cid), ctx)) == {"n": 8}
    assert storage.seq == 3
    await storage.close(ctx)
    drop_last_line(tmp_path / "sticky-1.jsonl")  # the crash came before its line was whole
    storage = await opened(tmp_path)
    task = await storage.task(tid, ctx)
    assert task is not None and task.checkpoint is UNSET
    assert h.fold(await storage.doc(DocRef.sticky(cid), ctx)) == {"n": 1}
    assert storage.seq == 2
    await storage.close(ctx)


async def test_a_sidecar_published_commit_after_an_unconfirmed_record_fails_open(
    tmp_path: Path,
) -> None:
    cid, tid = await session(tmp_path)
    await commit_tick(tmp_path, cid, tid, 3)
    await sidecar_only(tmp_path, cid, tid, 4)
    drop_last_line(tmp_path / "main.jsonl")  # the tick's marker: its sticky record is unconfirmed
    with pytest.raises(CorruptStorage) as caught:
        await opened(tmp_path)
    # main.jsonl lost the line (issue 36 item 8): the error names it, not the intact sticky file
    assert str(caught.value) == (
        f"{tmp_path / 'main.jsonl'}: ends at seq 2 (line 2), yet sticky-1.jsonl holds seq 3 "
        "(line 2), written after it: main.jsonl lost lines at its end (it was cut or truncated) "
        "and the session cannot be opened without them. Restore it from a backup"
    )


async def test_an_unconfirmed_record_inside_mains_range_still_names_the_sidecar(
    tmp_path: Path,
) -> None:
    cid, tid = await session(tmp_path)
    await commit_tick(tmp_path, cid, tid, 3)
    await sidecar_only(tmp_path, cid, tid, 4)
    await commit_tick(tmp_path, cid, tid, 5)
    main = tmp_path / "main.jsonl"
    kept = lines(main)
    main.write_bytes(b"".join(kept[:-2] + kept[-1:]))  # seq 3's marker gone, seq 5's kept
    with pytest.raises(CorruptStorage, match="follows an unconfirmed one at line 2"):
        await opened(tmp_path)


async def test_a_sticky_rewrite_keeps_the_live_tasks_patches_before_its_base(
    tmp_path: Path, h
) -> None:
    cid, tid = await session(tmp_path)
    await sidecar_only(tmp_path, cid, tid, 5)  # the checkpoint lives in the sticky file only
    storage = await opened(tmp_path)
    other = storage.mint_id()
    await storage.commit(
        [
            TaskWrite(Task(id=other, conversation_id=cid, kind="k")),
            DocWrite(DocRef.sticky(cid), [["r", {"n": 6}]]),
        ],
        ctx,
    )
    await storage.truncate(DocRef.sticky(cid), ctx)
    live = await h.dump(storage)
    await storage.close(ctx)
    assert len(lines(tmp_path / "sticky-1.jsonl")) == 2  # the kept patch, then the base
    storage = await opened(tmp_path)
    assert await h.dump(storage) == live
    task = await storage.task(tid, ctx)
    assert task is not None and task.checkpoint == {"phase": "own", "n": 5}
    assert h.fold(await storage.doc(DocRef.sticky(cid), ctx)) == {"n": 6}
    await storage.close(ctx)


async def test_a_lone_patch_joins_the_sticky_file_the_session_writes(tmp_path: Path, h) -> None:
    storage = await opened(tmp_path)
    cid = await h.with_root(storage)
    tid = storage.mint_id()
    await storage.commit([TaskWrite(Task(id=tid, conversation_id=cid, kind="k"))], ctx)
    await storage.commit([TaskPatchWrite(TaskPatch(id=tid, status="running"))], ctx)
    assert (tmp_path / f"task-{tid}.jsonl").exists()  # no sticky file written yet
    other = storage.mint_id()
    await storage.commit([TaskWrite(Task(id=other, conversation_id=cid, kind="k"))], ctx)
    await storage.commit([DocWrite(DocRef.sticky(cid), [["s", ["n"], 1]])], ctx)
    await storage.commit([TaskPatchWrite(TaskPatch(id=other, status="running"))], ctx)
    assert not (tmp_path / f"task-{other}.jsonl").exists()  # the line went to sticky-<cid>
    live = await h.dump(storage)
    await storage.close(ctx)
    storage = await opened(tmp_path)
    assert await h.dump(storage) == live
    task = await storage.task(other, ctx)
    assert task is not None and task.status == "running"
    await storage.close(ctx)
