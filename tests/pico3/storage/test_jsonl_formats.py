"""JsonlStorage reads both of its line formats (docs/design/storage.md#line-formats).

``fixtures/v1-session`` is a session written by the v1 (object-per-line) JsonlStorage from the
commits of ``v1_session.py`` (``fixtures/v2a-session``: the same, by the first v2 code;
``fixtures/v2b-session``: by the v2 code before status codes); the same commits written today
(v2, compact arrays) and the
fixture must open to the same state, and a v1 session keeps working once v2 lines are appended.
"""

from __future__ import annotations

import importlib.util
import shutil
import zlib
from pathlib import Path
from typing import Any

import pytest

from chord.context import BACKGROUND
from pico3 import stored_writes
from pico3.storage import (
    Conversation,
    ConversationWrite,
    CorruptStorage,
    DocRef,
    DocWrite,
    Entry,
    EntryWrite,
    JsonlStorage,
    MemoryStorage,
    Storage,
    Task,
    TaskPatch,
    TaskPatchWrite,
    TaskWrite,
)
from pico3.storage._lines import encode_line

pytestmark = pytest.mark.anyio
ctx = BACKGROUND
HERE = Path(__file__).parent
FIXTURE = HERE / "fixtures" / "v1-session"
EARLY_V2 = HERE / "fixtures" / "v2a-session"  # the first v2 code's write tags "p" and "i"
NAMED_V2 = HERE / "fixtures" / "v2b-session"  # v2 before status codes: statuses by name
STATUS_NAMES = (b'"pending"', b'"running"', b'"terminal"', b'"queued"', b'"placed"', b'"done"')


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("v1_session", HERE / "v1_session.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def state(storage: Storage, h: Any) -> Any:
    """The observable state plus the raw document logs and the next id."""
    out = await h.dump(storage)
    for cid in (1, 7):
        for ref in (DocRef.sticky(cid), DocRef.rewindable(cid)):
            out[f"log {ref.doc} {cid}"] = await storage.doc(ref, ctx)
    out["log session"] = await storage.doc(DocRef.session(), ctx)
    out["next id"] = storage.mint_id()
    return out


async def reference(h: Any, extra: bool = False) -> Any:
    storage = MemoryStorage()
    await storage.open(ctx)
    await _script().write_session(storage)
    await storage.close(ctx)
    await storage.open(ctx)  # as reopened: the next id is one past the last one stored
    if extra:
        await more(storage)
        await storage.close(ctx)
        await storage.open(ctx)
    return await state(storage, h)


async def more(storage: Storage) -> None:
    await storage.commit([TaskPatchWrite(TaskPatch(id=6, checkpoint={"c": 2}))], ctx)
    await storage.commit(
        [
            EntryWrite(Entry(id=storage.mint_id(), conversation_id=7, kind="tick")),
            DocWrite(DocRef.sticky(7), [["s", ["inbox"], [1]]]),
        ],
        ctx,
    )


def first_bytes(path: Path) -> list[bytes]:
    return [line[:1] for line in path.read_bytes().splitlines()]


async def test_a_v1_session_opens_to_the_state_its_commits_made(tmp_path: Path, h) -> None:
    directory = tmp_path / "session"
    shutil.copytree(FIXTURE, directory)
    assert set(first_bytes(directory / "main.jsonl")) == {b"{"}  # really the old format
    storage = JsonlStorage(directory, fsync=False)
    await storage.open(ctx)
    assert await state(storage, h) == await reference(h)
    await storage.close(ctx)


async def test_the_same_commits_written_today_open_to_the_same_state(tmp_path: Path, h) -> None:
    storage = JsonlStorage(tmp_path, fsync=False)
    await storage.open(ctx)
    await _script().write_session(storage)
    await storage.close(ctx)
    assert set(first_bytes(tmp_path / "main.jsonl")) == {b"["}
    storage = JsonlStorage(tmp_path, fsync=False)
    await storage.open(ctx)
    assert await state(storage, h) == await reference(h)
    await storage.close(ctx)


async def test_a_v1_session_appended_to_in_v2_reopens(tmp_path: Path, h) -> None:
    directory = tmp_path / "session"
    shutil.copytree(FIXTURE, directory)
    storage = JsonlStorage(directory, fsync=True)
    await storage.open(ctx)
    await more(storage)
    await storage.close(ctx)
    assert first_bytes(directory / "main.jsonl")[0] == b"{"
    assert first_bytes(directory / "main.jsonl")[-1] == b"["  # one file, both formats
    storage = JsonlStorage(directory, fsync=False)
    await storage.open(ctx)
    assert await state(storage, h) == await reference(h, extra=True)
    await storage.close(ctx)


@pytest.mark.parametrize(
    ("fixture", "marks"),
    [
        pytest.param(
            EARLY_V2,
            {"task-6.jsonl": [b'["p",'], "main.jsonl": [b'["i",']},
            id="the first v2 tags",
        ),
        pytest.param(
            NAMED_V2,
            {"main.jsonl": [b'"running"', b'"unanswered"'], "sticky-1.jsonl": [b'"running"']},
            id="statuses by name",
        ),
    ],
)
async def test_a_session_of_an_earlier_v2_opens_to_the_same_state(
    tmp_path: Path, h, fixture: Path, marks: dict[str, list[bytes]]
) -> None:
    directory = tmp_path / "session"
    shutil.copytree(fixture, directory)
    for name, needles in marks.items():  # the fixture holds what makes it that earlier format
        assert all(needle in (directory / name).read_bytes() for needle in needles), name
    storage = JsonlStorage(directory, fsync=False)
    await storage.open(ctx)
    assert await state(storage, h) == await reference(h)
    await storage.close(ctx)


async def test_statuses_are_written_as_codes_and_read_back_by_name(tmp_path: Path, h) -> None:
    """A task's and an input's status is a small integer on disk (a short turn writes four),
    the record's status name everywhere else."""
    directory = tmp_path / "session"
    storage = JsonlStorage(directory, fsync=False)
    await storage.open(ctx)
    await _script().write_session(storage)
    await storage.close(ctx)
    for path in directory.glob("*.jsonl"):
        assert not any(name in path.read_bytes() for name in STATUS_NAMES), path.name
    storage = JsonlStorage(directory, fsync=False)
    await storage.open(ctx)
    assert await state(storage, h) == await reference(h)
    await storage.close(ctx)


async def test_a_status_code_out_of_range_fails_open(tmp_path: Path) -> None:
    storage = JsonlStorage(tmp_path, fsync=False)
    await storage.open(ctx)
    await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
    await storage.close(ctx)
    rest = b'2,0,[["t",2,1,"k",null,7]]]'  # a task of status code 7: there are three
    with (tmp_path / "main.jsonl").open("ab") as file:
        file.write(b"[%d,%s\n" % (zlib.crc32(rest), rest))
    with pytest.raises(CorruptStorage, match=r"main\.jsonl"):
        await JsonlStorage(tmp_path, fsync=False).open(ctx)


async def test_a_replayed_entry_payload_of_the_wrong_type_fails_open(tmp_path: Path) -> None:
    storage = JsonlStorage(tmp_path, fsync=False)
    await storage.open(ctx)
    await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
    await storage.close(ctx)
    bad = Entry(id=2, conversation_id=1, kind="k", model={"not": "a list"})  # type: ignore[arg-type]
    with (tmp_path / "main.jsonl").open("ab") as handle:
        handle.write(encode_line(2, 2, [EntryWrite(bad)]))
    with pytest.raises(CorruptStorage, match=r"main\.jsonl:2: malformed record: entry model"):
        await JsonlStorage(tmp_path, fsync=False).open(ctx)


async def test_an_entry_written_after_a_greater_id_is_found_as_of_its_commit(
    tmp_path: Path,
) -> None:
    storage = JsonlStorage(tmp_path, fsync=False)
    await storage.open(ctx)
    cid = storage.mint_id()
    await storage.commit([ConversationWrite(Conversation(id=cid))], ctx)
    early, late = storage.mint_id(), storage.mint_id()
    for n, id in enumerate((late, early)):  # the greater id first
        await storage.commit(
            [
                EntryWrite(Entry(id=id, conversation_id=cid, kind="k", data={"n": n})),
                DocWrite(DocRef.rewindable(cid), [["s", ["n"], n]]),
            ],
            ctx,
        )
    await storage.close(ctx)
    storage = JsonlStorage(tmp_path, fsync=False)
    await storage.open(ctx)
    assert await storage.doc_as_of(cid, late, ctx) == [[["s", ["n"], 0]]]
    assert await storage.doc_as_of(cid, early, ctx) == [[["s", ["n"], 0]], [["s", ["n"], 1]]]
    found = await storage.entries([early, late], ctx)
    assert (found[early].data, found[late].data) == ({"n": 1}, {"n": 0})
    await storage.close(ctx)


async def test_stored_writes_reads_either_format_and_skips_what_does_not_decode(
    tmp_path: Path,
) -> None:
    storage = JsonlStorage(tmp_path, fsync=False)
    await storage.open(ctx)
    await _script().write_session(storage)
    await storage.close(ctx)
    today = (tmp_path / "main.jsonl").read_bytes()
    old = (FIXTURE / "main.jsonl").read_bytes()
    writes = stored_writes(today)
    assert writes == stored_writes(old)
    assert [w["type"] for w in writes[:3]] == ["conversation", "doc", "doc"]
    entry = next(w["entry"] for w in writes if w["type"] == "entry")
    assert entry == {"id": 2, "conversation_id": 1, "kind": "pi.user", "model": [{"role": "user"}]}
    torn = today + b'[123,99,0,[["e",' + bytes(64)  # a torn tail and preallocated zeros
    assert stored_writes(torn) == writes
    head = stored_writes(today[: len(today) // 2])  # a read cut a line in two
    assert 0 < len(head) < len(writes) and writes[: len(head)] == head


async def test_a_replayed_task_outcome_of_the_wrong_type_fails_open(tmp_path: Path) -> None:
    storage = JsonlStorage(tmp_path, fsync=False)
    await storage.open(ctx)
    await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
    await storage.close(ctx)
    bad = Task(id=2, conversation_id=1, kind="k", outcome=[1])  # type: ignore[arg-type]
    with (tmp_path / "main.jsonl").open("ab") as handle:
        handle.write(encode_line(2, 2, [TaskWrite(bad)]))
    with pytest.raises(CorruptStorage, match=r"main\.jsonl:2: malformed record: task outcome"):
        await JsonlStorage(tmp_path, fsync=False).open(ctx)
