"""Fuzzed damage: truncate or corrupt any file of a JSONL session, then open it.

The property (docs/design/storage.md#recovery, #worst-cases): ``open`` either yields exactly the state after one of the
committed batches (a prefix of the history) or fails with :class:`CorruptStorage`; it never
exposes half a commit and never fails with any other error.

The reference session is built once per test run and covers every file kind: main, a sticky
sidecar rewritten from a base, a live task's sidecar, a retired task, inputs, a fork, all three
documents. ``states[seq]`` is the dump after commit ``seq``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

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
    Input,
    InputWrite,
    InvalidBatch,
    JsonlStorage,
    MemoryStorage,
    Parent,
    Task,
    TaskPatch,
    TaskPatchWrite,
    TaskWrite,
    Write,
)

ctx = BACKGROUND


def history() -> list[list[Write]]:
    """The reference batches; ids are fixed so every run writes the same bytes."""
    sticky, rewindable, session = DocRef.sticky(1), DocRef.rewindable(1), DocRef.session()
    return [
        [
            ConversationWrite(Conversation(id=1)),
            DocWrite(session, [["r", {"plugins": {}}]]),
            DocWrite(sticky, [["r", {"inbox": []}]]),
        ],
        [
            EntryWrite(Entry(id=2, conversation_id=1, kind="pi.user", model=[{"role": "user"}])),
            TaskWrite(Task(id=3, conversation_id=1, kind="gen", input={"from": 2})),
            InputWrite(Input(id=4, conversation_id=1, status="placed", entry=2, request_id="r")),
        ],
        [
            TaskPatchWrite(TaskPatch(id=3, status="running", checkpoint={"phase": "a"})),
            DocWrite(sticky, [["s", ["turn"], {"tools": []}]]),
        ],
        [TaskPatchWrite(TaskPatch(id=3, checkpoint={"phase": "b"}))],
        [
            EntryWrite(Entry(id=5, conversation_id=1, kind="pi.assistant", data={"attempt": 1})),
            TaskPatchWrite(TaskPatch(id=3, status="terminal", outcome={"completed": True})),
            InputWrite(
                Input(id=4, conversation_id=1, status="done", entry=2, request_id="r", answer=5)
            ),
            DocWrite(sticky, [["s", ["turn"], {"tools": [1]}]]),
            DocWrite(rewindable, [["s", ["mode"], "plan"]]),
        ],
        [
            TaskWrite(Task(id=6, conversation_id=1, kind="job", input=None)),
            DocWrite(sticky, [["r", {"inbox": [], "turn": {"tools": []}}]]),
        ],
        [TaskPatchWrite(TaskPatch(id=6, status="running", checkpoint={"phase": "poll"}))],
        [
            ConversationWrite(Conversation(id=7, parent=Parent(conversation_id=1, at=5))),
            EntryWrite(Entry(id=8, conversation_id=7, kind="note", data={"x": None})),
            DocWrite(DocRef.sticky(7), [["s", ["k"], 1]]),
        ],
        [
            DocWrite(sticky, [["s", ["inbox"], [9]]]),
            TaskPatchWrite(TaskPatch(id=6, checkpoint={"phase": "poll", "n": 2})),
            DocWrite(session, [["s", ["plugins"], {"a": 1}]]),
        ],
    ]


async def build(directory: Path, dump: Any) -> list[Any]:
    storage = JsonlStorage(directory, fsync=False)
    await storage.open(ctx)
    states = [await dump(storage)]
    for index, batch in enumerate(history()):
        await storage.commit(batch, ctx)
        if index == 5:
            await storage.truncate(DocRef.sticky(1), ctx)  # sticky-1 now starts at a base
        if index == 7:  # reopened: the last batch's task patch goes to task-6.jsonl, since this
            await storage.close(ctx)  # opening has not written sticky-1 (earlier ones went there)
            storage = JsonlStorage(directory, fsync=False)
            await storage.open(ctx)
        states.append(await dump(storage))
    await storage.close(ctx)
    return states


@pytest.fixture(scope="module")
def reference(h) -> Iterator[tuple[Path, list[Any], list[str]]]:
    root = Path(tempfile.mkdtemp(prefix="pico3-fuzz-"))
    try:
        directory = root / "session"
        states = anyio.run(build, directory, h.dump)
        yield directory, states, sorted(os.listdir(directory))
    finally:
        shutil.rmtree(root)


async def reopen(directory: Path, dump: Any) -> tuple[int, Any] | CorruptStorage:
    storage = JsonlStorage(directory, fsync=False)
    try:
        await storage.open(ctx)
    except CorruptStorage as exc:
        return exc
    try:
        return storage.seq, await dump(storage)
    finally:
        await storage.close(ctx)


damage = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0, 1), st.just(0)),
    st.tuples(st.just("byte"), st.floats(0, 1), st.integers(0, 255)),
)


def test_the_reference_session_uses_every_kind_of_file(reference) -> None:
    _, states, files = reference
    assert files == ["main.jsonl", "sticky-1.jsonl", "sticky-7.jsonl", "task-6.jsonl"]
    assert len(states) == len(history()) + 1


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data(), damages=st.lists(damage, min_size=1, max_size=3))
def test_damaged_files_open_to_a_whole_prefix_or_fail_clearly(reference, h, data, damages) -> None:
    directory, states, files = reference
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "session"
        shutil.copytree(directory, copy)
        for kind, where, value in damages:
            name = data.draw(st.sampled_from(files))
            path = copy / name
            size = path.stat().st_size
            offset = min(int(where * size), max(size - 1, 0))
            if kind == "truncate":
                os.truncate(path, offset)
            elif size:
                raw = bytearray(path.read_bytes())
                raw[offset] = value
                path.write_bytes(bytes(raw))
        outcome = anyio.run(reopen, copy, h.dump)
        if isinstance(outcome, CorruptStorage):
            assert outcome.path.startswith(str(copy)) and str(outcome).startswith(outcome.path)
            return
        seq, state = outcome
        assert state == states[seq], f"seq {seq} is not a committed state"


def test_a_lost_sidecar_published_commit_fails_open(reference, h) -> None:
    """Found by the test above: main's last line cut (seq 9) and the sidecar that holds seq 7
    (task 6 going running, published by its own line) cut before that line lose seq 7 while
    seq 8 stays in main. No retirement and no sticky base explains the gap, so open fails naming
    it instead of opening at seq 8 without seq 7."""
    directory, states, files = reference
    holder, offset = _own_line(directory, files, seq=7)
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "session"
        shutil.copytree(directory, copy)
        os.truncate(copy / "main.jsonl", (copy / "main.jsonl").stat().st_size - 1)
        os.truncate(copy / holder, offset)
        outcome = anyio.run(reopen, copy, h.dump)
        assert isinstance(outcome, CorruptStorage), f"opened at seq {outcome[0]}"
        assert outcome.path == str(copy / "main.jsonl")
        assert "seq 7 is missing" in outcome.reason and holder in outcome.reason
        # the same damage to main alone opens at seq 8 (its torn last line cut)
        shutil.rmtree(copy)
        shutil.copytree(directory, copy)
        os.truncate(copy / "main.jsonl", (copy / "main.jsonl").stat().st_size - 1)
        seq, state = anyio.run(reopen, copy, h.dump)  # type: ignore[misc]
        assert seq == 8 and state == states[8]


def _own_line(directory: Path, files: list[str], seq: int) -> tuple[str, int]:
    """The sidecar holding commit ``seq`` as its own line, and that line's offset."""
    for name in files:
        data = (directory / name).read_bytes()
        offset = 0
        for line in data.splitlines(keepends=True):
            fields = json.loads(line)
            if name != "main.jsonl" and fields[1] == seq and fields[4:] == [[]]:
                return name, offset
            offset += len(line)
    raise AssertionError(f"no sidecar holds seq {seq} as its own line")


# --------------------------------------------------------------------------------------------
# Differential: random batches against both backends must be accepted or refused alike, read
# alike, and read alike again after a reopen (JSONL replays what memory applied).

# The setup batch creates conversations 1..3, tasks 4..6 and entry 7; draws mostly hit those,
# sometimes a missing record, so that both acceptance and refusal are exercised.
cids = st.sampled_from([1, 2, 3, 1, 2, 3, 99])
task_ids = st.sampled_from([4, 5, 6, 4, 5, 6, 99])
fresh = st.integers(8, 40)
fork_points = st.sampled_from([7, 7, 7, 98])
keys = st.sampled_from(["a", "b", "c"])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=4,
)
objects = st.dictionaries(keys, json_values, max_size=3)
SETUP: list[Write] = [
    *(ConversationWrite(Conversation(id=cid)) for cid in (1, 2, 3)),
    *(TaskWrite(Task(id=tid, conversation_id=1, kind="t")) for tid in (4, 5, 6)),
    EntryWrite(Entry(id=7, conversation_id=1, kind="k")),
]


def _maybe(strategy: Any) -> Any:
    return st.just(UNSET) | strategy


doc_refs = (
    st.just(DocRef.session()) | st.builds(DocRef.rewindable, cids) | st.builds(DocRef.sticky, cids)
)
doc_ops = st.lists(
    st.tuples(keys, json_values).map(lambda kv: ["s", [kv[0]], kv[1]]), min_size=1, max_size=2
) | objects.map(lambda o: [["r", o]])
writes = st.one_of(
    st.builds(
        lambda id, parent, at: ConversationWrite(
            Conversation(
                id=id, parent=UNSET if parent is None else Parent(conversation_id=parent, at=at)
            )
        ),
        fresh,
        st.none() | cids,
        fork_points,
    ),
    st.builds(
        lambda id, cid, data, head: EntryWrite(
            Entry(id=id, conversation_id=cid, kind="k", data=data, head=head)
        ),
        fresh,
        cids,
        _maybe(objects),
        _maybe(st.integers(1, 8)),
    ),
    st.builds(
        lambda id, cid, value, status: TaskWrite(
            Task(id=id, conversation_id=cid, kind="t", input=value, status=status)
        ),
        fresh,
        cids,
        json_values,
        st.sampled_from(["pending", "running", "terminal"]),
    ),
    st.builds(
        lambda id, status, checkpoint, abort, owns: TaskPatchWrite(
            TaskPatch(id=id, status=status, checkpoint=checkpoint, abort=abort, owns=owns)
        ),
        task_ids,
        _maybe(st.sampled_from(["running", "terminal"])),
        _maybe(st.none() | objects),
        _maybe(st.just(True)),
        _maybe(st.lists(cids, max_size=2)),
    ),
    st.builds(
        lambda id, cid, status, rid: InputWrite(
            Input(id=id, conversation_id=cid, status=status, request_id=rid)
        ),
        fresh,
        cids,
        st.sampled_from(["queued", "done"]),
        _maybe(st.sampled_from(["r1", "r2"])),
    ),
    st.builds(DocWrite, doc_refs, doc_ops),
)
steps = st.lists(
    st.lists(writes, min_size=1, max_size=2)
    | st.tuples(st.just("truncate"), cids)
    | st.just(("reopen",)),
    min_size=3,
    max_size=20,
)
READ_IDS = range(1, 41)


async def _run_both(directory: Path, plan: list[Any], dump: Any) -> None:
    memory: Any = MemoryStorage()
    jsonl: Any = JsonlStorage(directory, fsync=False)
    for storage in (memory, jsonl):
        await storage.open(ctx)
        await storage.commit(SETUP, ctx)
    accepted = 0
    for step in plan:
        if isinstance(step, tuple) and step[0] == "reopen":
            for storage in (memory, jsonl):
                await storage.close(ctx)
                await storage.open(ctx)
            continue
        outcomes = []
        for storage in (memory, jsonl):
            try:
                if isinstance(step, tuple):
                    await storage.truncate(DocRef.sticky(step[1]), ctx)
                    outcomes.append("truncated")
                else:
                    outcomes.append(await storage.commit(step, ctx))
            except InvalidBatch as exc:
                outcomes.append(str(exc))
        assert outcomes[0] == outcomes[1]
        accepted += type(outcomes[0]) is int
    event(f"accepted batches: {min(accepted, 5)}{'+' if accepted >= 5 else ''}")
    expected = await dump(memory, READ_IDS)
    assert await dump(jsonl, READ_IDS) == expected
    for cid in range(1, 4):
        for at in READ_IDS:
            assert await memory.doc_as_of(cid, at, ctx) == await jsonl.doc_as_of(cid, at, ctx)
    await jsonl.close(ctx)
    reopened = JsonlStorage(directory, fsync=False)
    await reopened.open(ctx)
    assert await dump(reopened, READ_IDS) == expected
    await reopened.close(ctx)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(plan=steps)
def test_memory_and_jsonl_agree_on_random_batches(h, plan) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        anyio.run(_run_both, Path(scratch) / "session", plan, h.dump)
