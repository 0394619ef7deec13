"""Group commit's runs (docs/design/storage.md#publication-point): batches queued back to back are
written with one write per file, each keeping its own line, seq and publication point; after
the write returns every one of them is durable, and whatever a crash keeps of the run (any cut
of either file, a torn sector of the in-flight write) opens as the state after a prefix of it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from chord.context import BACKGROUND
from pico3.storage import (
    CorruptStorage,
    DocRef,
    DocWrite,
    Entry,
    EntryWrite,
    JsonlStorage,
)
from pico3.storage._lines import read_lines
from pico3.storage._log import MainLog
from pico3.storage.jsonl import MAIN_FILE, RUN_BYTES, SECTOR

pytestmark = pytest.mark.anyio
ctx = BACKGROUND


async def opened(path: Path, *, fsync: bool = True, **kw: Any) -> JsonlStorage:
    storage = JsonlStorage(path, fsync=fsync, **kw)
    await storage.open(ctx)
    return storage


class Appends:
    """Counts the durable log appends (one device write each) while installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.files: list[str] = []
        real = MainLog.append

        def append(log: MainLog, data: bytes) -> None:
            self.files.append(Path(log._path).name)  # pyright: ignore[reportPrivateUsage]
            real(log, data)

        monkeypatch.setattr(MainLog, "append", append)


async def queue_run(
    storage: JsonlStorage, cid: int, h: Any, pad: int = 0
) -> tuple[list[int], list[Any]]:
    """Queue four batches: two published by their own sticky line (the first ``pad`` bytes
    longer), then two on main (the first with a sticky line too); return their seqs and the
    state after each (visible at once)."""
    sticky = DocRef.sticky(cid)
    batches: list[list[Any]] = [
        [DocWrite(sticky, [["s", ["phase"], "prepared"], ["s", ["pad"], "p" * pad]])],
        [DocWrite(sticky, [["s", ["phase"], "requesting"]])],
        [
            EntryWrite(Entry(id=storage.mint_id(), conversation_id=cid, kind="k", data={"n": 1})),
            DocWrite(sticky, [["d", ["phase"]]]),
        ],
        [EntryWrite(Entry(id=storage.mint_id(), conversation_id=cid, kind="k", data={"n": 2}))],
    ]
    seqs: list[int] = []
    states: list[Any] = []
    for writes in batches:
        seq = storage.commit_deferred(writes)
        assert seq is not None
        seqs.append(seq)
        states.append(await h.dump(storage))
    return seqs, states


@pytest.mark.parametrize("thread_above", [0.0, 10.0], ids=["worker-thread", "inline"])
async def test_a_run_of_queued_batches_takes_one_write_per_file_and_all_are_durable(
    tmp_path: Path, h, monkeypatch: pytest.MonkeyPatch, thread_above: float
) -> None:
    storage = await opened(tmp_path, thread_above=thread_above)
    cid = await h.with_root(storage)
    await storage.commit([DocWrite(DocRef.sticky(cid), [["r", {}]])], ctx)
    seqs, states = await queue_run(storage, cid, h)
    appends = Appends(monkeypatch)
    await storage.durable(seqs[-1])
    assert appends.files == [f"sticky-{cid}.jsonl", MAIN_FILE]  # 6 lines, two writes
    sticky = tmp_path / f"sticky-{cid}.jsonl"
    log = storage._sidecars[sticky.name]  # pyright: ignore[reportPrivateUsage]
    on_disk = read_lines(str(sticky), sticky.read_bytes()[: log.end], False)
    assert [line.seq for _, _, line in on_disk][-3:] == seqs[:3]  # each its own line
    main = storage._log  # pyright: ignore[reportPrivateUsage]
    assert main is not None
    lines = read_lines("main.jsonl", (tmp_path / MAIN_FILE).read_bytes()[: main.end], True)
    assert [line.seq for _, _, line in lines][-2:] == seqs[2:]
    await storage.close(ctx)
    again = await opened(tmp_path)
    assert await h.dump(again) == states[-1]
    await again.close(ctx)


async def test_a_batch_published_on_its_own_after_a_main_one_starts_the_next_run(
    tmp_path: Path, h, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = await opened(tmp_path, thread_above=10.0)
    cid = await h.with_root(storage)
    sticky = DocRef.sticky(cid)
    entry = Entry(id=storage.mint_id(), conversation_id=cid, kind="k", data={})
    first = storage.commit_deferred([EntryWrite(entry)])
    own = storage.commit_deferred([DocWrite(sticky, [["s", ["a"], 1]])])
    big = "x" * RUN_BYTES  # more than a run carries: written alone
    alone = storage.commit_deferred([DocWrite(sticky, [["s", ["b"], big]])])
    assert first is not None and own is not None and alone is not None
    appends = Appends(monkeypatch)
    await storage.durable(alone)
    assert appends.files == [MAIN_FILE, f"sticky-{cid}.jsonl", f"sticky-{cid}.jsonl"]
    live = await h.dump(storage)
    await storage.close(ctx)
    again = await opened(tmp_path)
    assert await h.dump(again) == live
    await again.close(ctx)


async def _crash_states(
    tmp_path: Path, h: Any, pad: int = 0
) -> tuple[Path, int, list[int], list[Any]]:
    """A session whose last queued run was written, copied as a crash would leave it (the
    preallocated zeros still there); its sticky file's id, the run's seqs and the states."""
    live = tmp_path / "live"
    storage = await opened(live)
    cid = await h.with_root(storage)
    await storage.commit([DocWrite(DocRef.sticky(cid), [["r", {}]])], ctx)
    before = await h.dump(storage)
    seqs, states = await queue_run(storage, cid, h, pad)
    await storage.durable(seqs[-1])
    image = tmp_path / "image"
    shutil.copytree(live, image)
    await storage.close(ctx)
    return image, cid, [storage.seq - 4, *seqs], [before, *states]


async def _opens_as_a_prefix(copy: Path, seqs: list[int], states: list[Any], h: Any) -> int:
    storage = await opened(copy, fsync=False)
    try:
        assert storage.seq in seqs
        assert await h.dump(storage) == states[seqs.index(storage.seq)]
        return storage.seq
    finally:
        await storage.close(ctx)


async def test_any_cut_of_the_runs_writes_opens_as_a_prefix_of_the_run(tmp_path: Path, h) -> None:
    image, cid, seqs, states = await _crash_states(tmp_path, h)
    sticky, main = f"sticky-{cid}.jsonl", MAIN_FILE
    ends = {name: (image / name).read_bytes().rfind(b"\n") + 1 for name in (sticky, main)}
    run = {
        name: read_lines(name, (image / name).read_bytes()[: ends[name]], name == main)
        for name in (sticky, main)
    }
    starts = {
        sticky: run[sticky][-4][1],  # the sticky file before the run's three lines
        main: run[main][-3][1],  # main before the run's two lines
    }
    seen: set[int] = set()
    # the crash came while the sticky file was written (main not yet), then while main was
    for name, other_done in ((sticky, False), (main, True)):
        for cut in range(starts[name], ends[name] + 1, 3):
            copy = tmp_path / f"cut-{name}-{cut}"
            shutil.copytree(image, copy)
            os.truncate(copy / name, cut)
            if not other_done:
                os.truncate(copy / main, starts[main])
            seen.add(await _opens_as_a_prefix(copy, seqs, states, h))
            shutil.rmtree(copy)
    assert seen == set(seqs)  # every prefix, from none of the run to all of it


async def test_a_lost_sector_early_in_the_in_flight_write_cuts_it_there(tmp_path: Path, h) -> None:
    """A power loss may keep a later sector of one write and lose an earlier one: the line
    holding the lost sector and every line after it (the same write, never acknowledged) are
    cut, instead of failing open on a NUL before the last line."""
    image, cid, seqs, states = await _crash_states(tmp_path, h, pad=1500)
    name = f"sticky-{cid}.jsonl"
    path = image / name
    data = bytearray(path.read_bytes())
    end = data.rfind(b"\n") + 1
    lines = read_lines(name, bytes(data[:end]), False)
    start = lines[-4][1]  # the run's first line starts here
    sector = -(-start // SECTOR) * SECTOR  # the first whole sector inside the run's lines
    assert sector + SECTOR < lines[-3][1], "the test needs a whole sector in the first line"
    data[sector : sector + SECTOR] = bytes(SECTOR)
    path.write_bytes(bytes(data))
    main = image / MAIN_FILE  # main's write never started
    os.truncate(
        main, read_lines("m", main.read_bytes()[: main.read_bytes().rfind(b"\n") + 1], True)[-3][1]
    )
    assert await _opens_as_a_prefix(image, seqs, states, h) == seqs[0]  # none of the run


async def test_a_lost_sector_before_the_last_runs_bytes_fails_open(tmp_path: Path, h) -> None:
    """Only the in-flight write may be torn: a line with a whole sector of zeros more than
    :data:`RUN_BYTES` before the end was acknowledged, and open fails naming it."""
    path = tmp_path / "s"
    storage = await opened(path)
    cid = await h.with_root(storage)
    log = storage._log  # pyright: ignore[reportPrivateUsage]
    assert log is not None
    start = log.end
    entry = Entry(id=storage.mint_id(), conversation_id=cid, kind="k", data={"p": "x" * 3000})
    await storage.commit([EntryWrite(entry)], ctx)
    stop = log.end
    while log.end - stop <= RUN_BYTES:
        big = Entry(id=storage.mint_id(), conversation_id=cid, kind="k", data={"p": "y" * 2000})
        await storage.commit([EntryWrite(big)], ctx)
    await storage.close(ctx)
    data = bytearray((path / MAIN_FILE).read_bytes())
    sector = -(-start // SECTOR) * SECTOR
    assert sector + SECTOR < stop
    data[sector : sector + SECTOR] = bytes(SECTOR)
    (path / MAIN_FILE).write_bytes(bytes(data))
    with pytest.raises(CorruptStorage, match=r"main\.jsonl:2: malformed record"):
        await opened(path, fsync=False)
