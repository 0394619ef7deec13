"""The storage contract (docs/design/storage.md#interface, #memory-backend), run against both backends.

Every test gets ``backend`` (memory or jsonl) and ``h`` (helpers from conftest). Reopening goes
through ``backend.reopen``, so each property also holds across a close/open cycle.
"""

from __future__ import annotations

import math
import os
from typing import Any

import pytest

from chord.context import BACKGROUND
from pico3.storage import (
    UNSET,
    Conversation,
    ConversationWrite,
    DocRef,
    DocWrite,
    Entry,
    EntryScan,
    EntryWrite,
    Input,
    InputWrite,
    InvalidBatch,
    Parent,
    Storage,
    StorageClosed,
    StorageInUse,
    Task,
    TaskPatch,
    TaskPatchWrite,
    TaskScan,
    TaskWrite,
)

pytestmark = pytest.mark.anyio
ctx = BACKGROUND


def entry(storage: Storage, cid: int, kind: str = "test.note", **fields: Any) -> Entry:
    return Entry(id=storage.mint_id(), conversation_id=cid, kind=kind, **fields)


async def test_a_commit_is_readable_and_survives_reopen(backend, h) -> None:
    storage = await backend.opened()
    cid = await h.with_root(storage)
    e = entry(storage, cid, model=[{"role": "user", "content": "hi"}], data={"x": None})
    task = Task(id=storage.mint_id(), conversation_id=cid, kind="test.job", input={"n": 1})
    item = Input(id=storage.mint_id(), conversation_id=cid, status="queued", request_id="r1")
    seq = await storage.commit(
        [
            EntryWrite(e),
            TaskWrite(task),
            InputWrite(item),
            DocWrite(DocRef.rewindable(cid), [["s", ["mode"], "plan"]]),
            DocWrite(DocRef.sticky(cid), [["s", ["inbox"], []]]),
            DocWrite(DocRef.session(), [["s", ["plugins"], {}]]),
        ],
        ctx,
    )
    assert seq == 2 == storage.seq
    before = await h.dump(storage)
    assert (await storage.entries([e.id, 999], ctx)) == {e.id: e}
    assert await storage.task(task.id, ctx) == task
    assert await storage.input(item.id, ctx) == item
    assert await storage.input_by_request(cid, "r1", ctx) == item
    assert await storage.input_by_request(cid, "r2", ctx) is None
    assert await storage.conversation(cid, ctx) == Conversation(id=cid)
    assert h.fold(await storage.doc(DocRef.rewindable(cid), ctx)) == {"mode": "plan"}
    assert h.fold(await storage.doc(DocRef.sticky(cid), ctx)) == {"inbox": []}
    assert h.fold(await storage.doc(DocRef.session(), ctx)) == {"plugins": {}}
    storage = await backend.reopen(storage)
    assert await h.dump(storage) == before
    assert (await storage.entries([e.id], ctx))[e.id].data == {"x": None}  # null is a value


async def test_absent_fields_stay_absent_and_null_stays_null(backend) -> None:
    storage = await backend.opened()
    cid = storage.mint_id()
    item = Input(id=storage.mint_id(), conversation_id=cid, status="done", detail=None)
    await storage.commit([ConversationWrite(Conversation(id=cid)), InputWrite(item)], ctx)
    storage = await backend.reopen(storage)
    stored = await storage.input(item.id, ctx)
    assert stored is not None and stored.detail is None and stored.entry is UNSET


async def test_reads_return_copies_and_commits_copy_their_input(backend, h) -> None:
    storage = await backend.opened()
    cid = await h.with_root(storage)
    data: dict[str, Any] = {"items": [1]}
    e = entry(storage, cid, data=data)
    await storage.commit([EntryWrite(e)], ctx)
    data["items"].append(2)  # the caller keeps its object
    read = (await storage.entries([e.id], ctx))[e.id]
    assert read.data == {"items": [1]}
    read.data["items"].append(3)  # type: ignore[index]
    assert (await storage.entries([e.id], ctx))[e.id].data == {"items": [1]}


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        ({"x": math.nan}, "$.writes[1].entry.data.x"),
        ({"x": math.inf}, "$.writes[1].entry.data.x"),
        ({1: "key"}, "$.writes[1].entry.data"),
        ({"x": 2**1024}, "$.writes[1].entry.data.x"),
        ({"x": (1, 2)}, "$.writes[1].entry.data.x"),
        ({"x": b"bytes"}, "$.writes[1].entry.data.x"),
        ({"x": object()}, "$.writes[1].entry.data.x"),
    ],
)
async def test_non_strict_json_is_refused_naming_the_path(backend, h, payload, where) -> None:
    storage = await backend.opened()
    cid = await h.with_root(storage)
    before = await h.dump(storage)
    good = entry(storage, cid)
    with pytest.raises(InvalidBatch) as caught:
        await storage.commit([EntryWrite(good), EntryWrite(entry(storage, cid, data=payload))], ctx)
    assert where in str(caught.value)
    assert await h.dump(storage) == before  # the valid first write did not land either
    storage = await backend.reopen(storage)
    assert await h.dump(storage) == before


async def test_wrong_field_types_are_refused_naming_the_write(backend, h) -> None:
    storage = await backend.opened()
    cid = await h.with_root(storage)
    bad = Entry(id="7", conversation_id=cid, kind="k")  # type: ignore[arg-type]
    with pytest.raises(InvalidBatch, match=r"writes\[0\]\.entry\.id"):
        await storage.commit([EntryWrite(bad)], ctx)
    with pytest.raises(InvalidBatch, match=r"writes\[0\]\.entry\.id"):
        await storage.commit([EntryWrite(Entry(id=0, conversation_id=cid, kind="k"))], ctx)
    with pytest.raises(InvalidBatch, match=r"writes\[0\] is a dict"):
        await storage.commit([{"type": "entry"}], ctx)  # type: ignore[list-item]
    with pytest.raises(InvalidBatch, match="sequence of writes"):
        await storage.commit(EntryWrite(entry(storage, cid)), ctx)  # type: ignore[arg-type]


async def test_structural_errors_refuse_the_whole_batch(backend, h) -> None:
    # a failing batch changes no table, doc, seq or id high-water
    storage = await backend.opened()
    cid = await h.with_root(storage)
    e = entry(storage, cid)
    await storage.commit([EntryWrite(e)], ctx)
    before = await h.dump(storage)
    seq = storage.seq
    doc = DocWrite(DocRef.sticky(cid), [["s", ["k"], 1]])
    cases: list[tuple[list[Any], str]] = [
        ([doc, EntryWrite(Entry(id=e.id, conversation_id=cid, kind="k"))], "already in use"),
        ([doc, TaskWrite(Task(id=cid, conversation_id=cid, kind="k"))], "already in use"),
        ([doc, EntryWrite(Entry(id=900, conversation_id=77, kind="k"))], "unknown conversation"),
        ([doc, TaskPatchWrite(TaskPatch(id=901, status="running"))], "unknown task"),
        ([doc, EntryWrite(Entry(id=902, conversation_id=cid, kind="k", head=903))], "head"),
        ([doc, DocWrite(DocRef(doc="sticky"), [["s", ["k"], 2]])], "conversation_id"),
        ([doc, DocWrite(DocRef.sticky(cid), [[]])], "verb"),
        ([doc, DocWrite(DocRef(doc="session", conversation_id=cid), [])], "session"),
        (
            [
                doc,
                ConversationWrite(Conversation(id=904, parent=Parent(conversation_id=cid, at=5))),
            ],
            "fork point",
        ),
        ([doc, ConversationWrite(Conversation(id=905, owner=906))], "owner"),
        (
            [
                EntryWrite(Entry(id=907, conversation_id=cid, kind="k")),
                EntryWrite(Entry(id=907, conversation_id=cid, kind="k")),
            ],
            "already in use",
        ),
    ]
    for batch, message in cases:
        with pytest.raises(InvalidBatch, match=message):
            await storage.commit(batch, ctx)
        assert storage.seq == seq
        assert await h.dump(storage) == before
    storage = await backend.reopen(storage)
    assert await h.dump(storage) == before
    assert storage.mint_id() == e.id + 1  # 900..907 never landed: the high-water held


async def test_request_ids_are_unique_per_conversation_and_inputs_replace_whole(backend, h) -> None:
    storage = await backend.opened()
    cid = await h.with_root(storage)
    other = await h.with_root(storage)
    first = Input(id=storage.mint_id(), conversation_id=cid, status="queued", request_id="r")
    await storage.commit([InputWrite(first)], ctx)
    twin = Input(id=storage.mint_id(), conversation_id=cid, status="queued", request_id="r")
    with pytest.raises(InvalidBatch, match="request_id 'r' is already used"):
        await storage.commit([InputWrite(twin)], ctx)
    elsewhere = Input(id=twin.id, conversation_id=other, status="queued", request_id="r")
    await storage.commit([InputWrite(elsewhere)], ctx)  # another conversation: fine
    placed = Input(id=first.id, conversation_id=cid, status="done", request_id="r", answer=2)
    await storage.commit([InputWrite(placed)], ctx)
    assert await storage.input(first.id, ctx) == placed
    moved = Input(id=first.id, conversation_id=other, status="done", request_id="r")
    with pytest.raises(InvalidBatch, match="cannot change"):
        await storage.commit([InputWrite(moved)], ctx)
    storage = await backend.reopen(storage)
    assert await storage.input_by_request(cid, "r", ctx) == placed
    assert await storage.input_by_request(other, "r", ctx) == elsewhere


async def test_an_inputs_own_model_and_allow_rules_survive_reopen(backend, h) -> None:
    storage = await backend.opened()
    cid = await h.with_root(storage)
    plain = Input(id=storage.mint_id(), conversation_id=cid, status="placed", entry=1)
    model = {"provider": "faux", "modelId": "faux-big"}
    own = Input(
        id=storage.mint_id(),
        conversation_id=cid,
        status="queued",
        model=model,
        allow=["Bash(git add:*)", "Read"],
    )
    await storage.commit([InputWrite(plain), InputWrite(own)], ctx)
    storage = await backend.reopen(storage)
    assert await storage.input(own.id, ctx) == own
    reread = await storage.input(plain.id, ctx)
    assert reread == plain
    assert reread is not None and reread.model is UNSET and reread.allow is UNSET


async def test_task_patches_merge_and_terminal_drops_transient_fields(backend, h) -> None:
    storage = await backend.opened()
    cid = await h.with_root(storage)
    tid = storage.mint_id()
    child = storage.mint_id()
    await storage.commit([TaskWrite(Task(id=tid, conversation_id=cid, kind="k", after=[]))], ctx)
    await storage.commit(
        [TaskPatchWrite(TaskPatch(id=tid, status="running", checkpoint={"phase": "a"}))], ctx
    )
    await storage.commit([TaskPatchWrite(TaskPatch(id=tid, checkpoint=None, abort=True))], ctx)
    task = await storage.task(tid, ctx)
    assert task is not None and task.checkpoint is UNSET and task.abort is True
    await storage.commit(
        [
            TaskPatchWrite(TaskPatch(id=tid, checkpoint={"phase": "b"})),
            ConversationWrite(Conversation(id=child, owner=tid)),
            TaskPatchWrite(TaskPatch(id=tid, owns=[child])),
        ],
        ctx,
    )
    live = await h.dump(storage)
    storage = await backend.reopen(storage)
    assert await h.dump(storage) == live
    outcome = {"completed": True, "result": None}
    await storage.commit(
        [TaskPatchWrite(TaskPatch(id=tid, status="terminal", outcome=outcome))], ctx
    )
    done = await storage.task(tid, ctx)
    assert done is not None
    assert (done.status, done.checkpoint, done.abort) == ("terminal", UNSET, UNSET)
    assert (done.outcome, done.owns) == (outcome, [child])
    with pytest.raises(InvalidBatch, match="is terminal"):
        await storage.commit([TaskPatchWrite(TaskPatch(id=tid, status="running"))], ctx)
    final = await h.dump(storage)
    storage = await backend.reopen(storage)
    assert await h.dump(storage) == final


async def test_scan_tasks_filters_by_conversation_status_and_kind(backend, h) -> None:
    storage = await backend.opened()
    a = await h.with_root(storage)
    b = await h.with_root(storage)
    t1 = Task(id=storage.mint_id(), conversation_id=a, kind="x")
    t2 = Task(id=storage.mint_id(), conversation_id=a, kind="y", status="running")
    t3 = Task(id=storage.mint_id(), conversation_id=b, kind="x")
    await storage.commit([TaskWrite(t1), TaskWrite(t2), TaskWrite(t3)], ctx)
    assert await storage.scan_tasks(TaskScan(), ctx) == [t1, t2, t3]
    assert await storage.scan_tasks(TaskScan(conversation_id=a), ctx) == [t1, t2]
    assert await storage.scan_tasks(TaskScan(kind="x"), ctx) == [t1, t3]
    assert await storage.scan_tasks(TaskScan(status=frozenset({"running"})), ctx) == [t2]


async def test_a_terminal_task_reads_back_whole_beside_live_ones_and_after_reopen(
    backend, h
) -> None:
    # storage keeps a terminal task compactly (docs/design/storage.md#memory): every member
    # still reads back, through task() and through scans that mix it with live tasks
    storage = await backend.opened()
    a = await h.with_root(storage)
    b = await h.with_root(storage)
    live = Task(id=storage.mint_id(), conversation_id=a, kind="x", input={"n": [1, 2]})
    done = Task(
        id=storage.mint_id(),
        conversation_id=a,
        kind="x",
        input=["text", {"deep": None}],
        after=[live.id],
        background=True,
    )
    bare = Task(id=storage.mint_id(), conversation_id=b, kind="y")
    await storage.commit([TaskWrite(live), TaskWrite(done), TaskWrite(bare)], ctx)
    await storage.commit(
        [
            TaskPatchWrite(
                TaskPatch(
                    id=done.id,
                    status="terminal",
                    checkpoint={"phase": "last"},
                    abort=True,
                    outcome={"status": "completed", "result": {"ok": True}},
                    owns=[bare.id],
                )
            ),
            TaskPatchWrite(TaskPatch(id=bare.id, status="terminal")),
        ],
        ctx,
    )
    ended = Task(
        id=done.id,
        conversation_id=a,
        kind="x",
        input=["text", {"deep": None}],
        status="terminal",
        checkpoint={"phase": "last"},
        abort=True,
        outcome={"status": "completed", "result": {"ok": True}},
        after=[live.id],
        owns=[bare.id],
        background=True,
    )
    bare_ended = Task(id=bare.id, conversation_id=b, kind="y", status="terminal")
    for _ in range(2):
        assert await storage.task(done.id, ctx) == ended
        assert await storage.scan_tasks(TaskScan(), ctx) == [live, ended, bare_ended]
        assert await storage.scan_tasks(TaskScan(kind="x"), ctx) == [live, ended]
        assert await storage.scan_tasks(TaskScan(conversation_id=b), ctx) == [bare_ended]
        terminal = frozenset({"terminal"})
        assert await storage.scan_tasks(TaskScan(status=terminal), ctx) == [ended, bare_ended]
        assert await storage.scan_tasks(TaskScan(status=frozenset({"pending"})), ctx) == [live]
        copy = await storage.task(done.id, ctx)
        assert copy is not None and copy.input is not None
        copy.input[1]["deep"] = "changed"  # a private copy: the stored record is untouched
        copy.after.append(0)
        assert await storage.task(done.id, ctx) == ended
        storage = await backend.reopen(storage)
    await storage.close(ctx)


async def test_scan_entries_is_newest_first_and_fork_aware(backend, h) -> None:
    storage = await backend.opened()
    root = await h.with_root(storage)
    e1 = entry(storage, root)
    e2 = entry(storage, root, kind="test.head", head=e1.id)
    await storage.commit([EntryWrite(e1), EntryWrite(e2)], ctx)
    fork = storage.mint_id()
    e3 = entry(storage, root)  # after the fork point: invisible to the fork
    await storage.commit(
        [
            ConversationWrite(Conversation(id=fork, parent=Parent(conversation_id=root, at=e2.id))),
            EntryWrite(e3),
        ],
        ctx,
    )
    e4 = entry(storage, fork)
    await storage.commit([EntryWrite(e4)], ctx)

    async def scan(**fields: Any) -> list[int]:
        found = await storage.scan_entries(EntryScan(**fields), ctx)
        return [e.id for e in found]

    assert await scan(conversation_id=fork, limit=10) == [e4.id, e2.id, e1.id]
    assert await scan(conversation_id=root, limit=10) == [e3.id, e2.id, e1.id]
    assert await scan(conversation_id=fork, limit=2) == [e4.id, e2.id]
    assert await scan(conversation_id=fork, limit=10, before=e4.id) == [e2.id, e1.id]
    assert await scan(conversation_id=fork, limit=10, with_head=True) == [e2.id]
    assert await scan(conversation_id=fork, limit=10, kind="test.note") == [e4.id, e1.id]
    assert await scan(conversation_id=12345, limit=10) == []


async def test_an_entry_minted_early_and_committed_late_reads_in_id_order(backend, h) -> None:
    # storage keeps entries compactly, indexed by id (docs/design/storage.md#memory): an entry
    # whose id was minted before an already committed one's still reads back whole, by id and
    # in its place in scans, before and after a reopen
    storage = await backend.opened()
    root = await h.with_root(storage)
    early = entry(storage, root, kind="test.head", model=[{"role": "user", "content": "é"}])
    e1 = entry(storage, root, data={"n": [1, None, {"x": 1.5}]})
    e2 = entry(storage, root, kind="test.head", head=e1.id, edits=[["s", ["a"], 1]], by_task_id=7)
    await storage.commit([EntryWrite(e1), EntryWrite(e2)], ctx)
    late = Entry(
        id=early.id, conversation_id=root, kind="test.head", model=early.model, head=early.id
    )
    await storage.commit([EntryWrite(late)], ctx)

    async def check(storage: Storage) -> None:
        found = await storage.entries([e2.id, late.id, e1.id, 999_999], ctx)
        assert found == {e2.id: e2, late.id: late, e1.id: e1}

        async def scan(**fields: Any) -> list[Entry]:
            return await storage.scan_entries(EntryScan(conversation_id=root, **fields), ctx)

        assert await scan(limit=10) == [e2, e1, late]
        assert await scan(limit=2) == [e2, e1]
        assert await scan(limit=10, before=e2.id) == [e1, late]
        assert await scan(limit=10, kind="test.head") == [e2, late]
        assert await scan(limit=10, with_head=True) == [e2, late]
        assert await scan(limit=1, with_head=True, kind="test.head", before=e2.id) == [late]
        assert await scan(limit=10, with_head=True, kind="test.note") == []
        assert await storage.doc_as_of(root, late.id, ctx) is None  # no rewindable doc

    await check(storage)
    await check(await backend.reopen(storage))


async def test_doc_as_of_is_commit_granular_and_walks_the_fork_chain(backend, h) -> None:
    storage = await backend.opened()
    root = await h.with_root(storage)
    rew = DocRef.rewindable(root)
    a, b = entry(storage, root), entry(storage, root)
    # one commit: entry a, then two rewindable writes; "as of a" sees the whole commit
    await storage.commit(
        [EntryWrite(a), DocWrite(rew, [["s", ["m"], 1]]), DocWrite(rew, [["s", ["n"], 1]])], ctx
    )
    await storage.commit([DocWrite(rew, [["r", {"m": 2}]]), EntryWrite(b)], ctx)
    await storage.commit([DocWrite(rew, [["s", ["m"], 3]])], ctx)
    fork = storage.mint_id()
    await storage.commit(
        [ConversationWrite(Conversation(id=fork, parent=Parent(conversation_id=root, at=a.id)))],
        ctx,
    )
    for reopen in (False, True):
        current = await backend.reopen(storage) if reopen else storage
        assert h.fold(await current.doc_as_of(root, a.id, ctx)) == {"m": 1, "n": 1}
        assert h.fold(await current.doc_as_of(root, b.id, ctx)) == {"m": 2}
        assert await current.doc_as_of(root, b.id, ctx) == [[["r", {"m": 2}]]]  # from the base
        assert h.fold(await current.doc_as_of(fork, a.id, ctx)) == {"m": 1, "n": 1}
        assert await current.doc_as_of(fork, b.id, ctx) is None  # after the fork point
        assert await current.doc_as_of(root, 999, ctx) is None
        assert h.fold(await current.doc(rew, ctx)) == {"m": 3}
        assert await current.doc(DocRef.rewindable(fork), ctx) is None
        storage = current


async def test_session_and_sticky_docs_read_from_their_last_base(backend, h) -> None:
    storage = await backend.opened()
    cid = await h.with_root(storage)
    sticky, session = DocRef.sticky(cid), DocRef.session()
    for n in range(3):
        await storage.commit([DocWrite(sticky, [["s", ["a"], n]])], ctx)
    await storage.commit(
        [DocWrite(sticky, [["r", {"b": 1}]]), DocWrite(session, [["r", {"plugins": {}}]])], ctx
    )
    await storage.commit([DocWrite(sticky, [["s", ["c"], 2]])], ctx)
    assert await storage.doc(sticky, ctx) == [[["r", {"b": 1}]], [["s", ["c"], 2]]]
    await storage.truncate(sticky, ctx)
    await storage.truncate(session, ctx)  # no-op for other documents
    assert await storage.doc(sticky, ctx) == [[["r", {"b": 1}]], [["s", ["c"], 2]]]
    assert await storage.doc(session, ctx) == [[["r", {"plugins": {}}]]]
    storage = await backend.reopen(storage)
    assert h.fold(await storage.doc(sticky, ctx)) == {"b": 1, "c": 2}


async def test_ids_are_never_reused_while_open_and_committed_ids_never(backend, h) -> None:
    storage = await backend.opened()
    cid = await h.with_root(storage)
    wasted = storage.mint_id()  # minted in a builder that failed: never committed
    with pytest.raises(InvalidBatch):
        await storage.commit([EntryWrite(Entry(id=wasted, conversation_id=999, kind="k"))], ctx)
    assert storage.mint_id() == wasted + 1
    storage = await backend.reopen(storage)
    assert storage.mint_id() == wasted  # may be reused after reopen: it was never exposed
    await storage.commit([EntryWrite(Entry(id=wasted, conversation_id=cid, kind="k"))], ctx)
    storage = await backend.reopen(storage)
    assert storage.mint_id() == wasted + 1  # committed: never again


async def test_a_second_open_is_refused_and_a_closed_storage_rejects(backend, h) -> None:
    storage = await backend.opened()
    with pytest.raises(StorageInUse):
        await storage.open(ctx)
    await storage.close(ctx)
    await storage.close(ctx)  # idempotent
    with pytest.raises(StorageClosed):
        await storage.commit([], ctx)
    with pytest.raises(StorageClosed):
        await storage.entries([1], ctx)
    with pytest.raises(StorageClosed):
        storage.mint_id()


async def test_an_empty_batch_still_gets_a_seq(backend) -> None:
    storage = await backend.opened()
    assert await storage.commit([], ctx) == 1
    storage = await backend.reopen(storage)
    assert storage.seq == 1


async def test_terminal_tasks_stay_readable_after_many_retirements_and_reopen(backend, h) -> None:
    storage = await backend.opened()
    cid = await h.with_root(storage)
    ids: list[int] = []
    for n in range(40):
        tid = storage.mint_id()
        ids.append(tid)
        await storage.commit([TaskWrite(Task(id=tid, conversation_id=cid, kind="k", input=n))], ctx)
        await storage.commit(
            [TaskPatchWrite(TaskPatch(id=tid, status="running", checkpoint={"n": n}))], ctx
        )
        outcome = {"completed": True, "result": n}
        await storage.commit(
            [TaskPatchWrite(TaskPatch(id=tid, status="terminal", outcome=outcome))], ctx
        )
    storage = await backend.reopen(storage)
    tasks = await storage.scan_tasks(TaskScan(status=frozenset({"terminal"})), ctx)
    assert [(t.id, t.input, t.outcome) for t in tasks] == [
        (tid, n, {"completed": True, "result": n}) for n, tid in enumerate(ids)
    ]
    if backend.directory is not None:
        assert sorted(os.listdir(backend.directory)) == ["main.jsonl"]  # every sidecar retired
