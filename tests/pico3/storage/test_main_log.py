"""The durable write path of ``main.jsonl`` (``pico3.storage._log.MainLog``).

Every test runs in each mode the machine offers: ``direct`` (O_DIRECT|O_DSYNC block writes into a
preallocated file), ``prealloc`` (the fallback: pwrite + fdatasync, forced through
``MainLog.use_direct``) and, where it applies, ``append`` (fsync off). The file is checked byte by
byte: committed lines, then zeros up to the preallocated size while open; clean JSONL after close.
Real crashes with ``fsync=True`` are in ``test_crash_kill.py``.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chord.context import BACKGROUND
from pico3.storage import (
    Conversation,
    ConversationWrite,
    CorruptStorage,
    DocRef,
    DocWrite,
    Entry,
    EntryWrite,
    JsonlStorage,
    StorageFailed,
    Task,
    TaskPatch,
    TaskPatchWrite,
    TaskWrite,
)
from pico3.storage._lines import read_lines
from pico3.storage._log import BLOCK, MIN_CHUNK, MainLog

ctx = BACKGROUND


def plain(writes: list[Any]) -> Any:
    """Writes as plain JSON data (a replayed entry's payloads are its stored text)."""
    return msgspec.json.decode(msgspec.json.encode(writes))


DURABLE = ["direct", "prealloc"]


@pytest.fixture(params=DURABLE)
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The durable mode under test; ``direct`` is skipped where the filesystem refuses it."""
    monkeypatch.setattr(MainLog, "use_direct", request.param == "direct")
    return request.param


def new_log(path: Path, mode: str) -> MainLog:
    if not path.exists():
        path.write_bytes(b"")
    log = MainLog(str(path), durable=mode != "append")
    if log.mode != mode:
        log.close()
        pytest.skip(f"{path.parent} refuses O_DIRECT (the log fell back to {log.mode})")
    return log


def line(n: int, size: int) -> bytes:
    """A JSON line of exactly ``size`` bytes (newline included) that names ``n``."""
    head = b'{"n":%d,"pad":"' % n
    return head + b"x" * (size - len(head) - 3) + b'"}\n'


def check_open_file(path: Path, log: MainLog, expected: bytes) -> None:
    """While open: the committed bytes, then zeros up to the preallocated size."""
    data = path.read_bytes()
    assert log.end == len(expected)
    assert data[: log.end] == expected
    if log.mode == "append":
        assert len(data) == log.end
    else:
        assert len(data) == log.allocated > log.end
        assert log.allocated % BLOCK == 0
        assert data[log.end :] == bytes(len(data) - log.end)


@pytest.mark.parametrize("log_mode", ["direct", "prealloc", "append"])
def test_lines_of_every_size_round_trip_across_block_boundaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, log_mode: str
) -> None:
    monkeypatch.setattr(MainLog, "use_direct", log_mode == "direct")
    path = tmp_path / "main.jsonl"
    log = new_log(path, log_mode)
    rng = random.Random(5)
    sizes = [rng.randrange(20, 700) for _ in range(40)]
    sizes += [BLOCK, BLOCK - 1, BLOCK + 1, 3 * BLOCK + 17, 200_000, 64 * 1024, 30]
    expected = b""
    for n, size in enumerate(sizes):
        log.append(line(n, size))
        expected += line(n, size)
        check_open_file(path, log, expected)
    log.close()
    assert path.read_bytes() == expected  # truncated to the logical end
    assert [json.loads(raw)["n"] for raw in expected.splitlines()] == list(range(len(sizes)))
    log.close()  # a second close is harmless
    assert path.read_bytes() == expected


def test_preallocation_grows_in_aligned_steps_as_the_log_grows(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "main.jsonl"
    log = new_log(path, mode)
    sizes = [log.allocated]
    assert sizes[0] == MIN_CHUNK  # an empty log starts with one step of zeros
    expected = b""
    n = 0
    while len(sizes) < 5:
        data = line(n, 50_000)
        log.append(data)
        expected += data
        n += 1
        if log.allocated != sizes[-1]:
            sizes.append(log.allocated)
    check_open_file(path, log, expected)
    steps = [b - a for a, b in itertools.pairwise(sizes)]
    assert all(size % BLOCK == 0 for size in sizes)
    assert all(step >= MIN_CHUNK for step in steps)
    log.close()
    assert path.read_bytes() == expected


def test_a_huge_line_extends_past_a_whole_step_at_once(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "main.jsonl"
    log = new_log(path, mode)
    big = line(1, 3 * MIN_CHUNK + 5)
    log.append(big)
    assert log.allocated >= len(big)
    check_open_file(path, log, big)
    log.append(line(2, 100))
    log.close()
    assert path.read_bytes() == big + line(2, 100)


@pytest.mark.parametrize("log_mode", ["direct", "prealloc", "append"])
def test_reopening_an_unaligned_file_appends_after_its_existing_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, log_mode: str
) -> None:
    monkeypatch.setattr(MainLog, "use_direct", log_mode == "direct")
    path = tmp_path / "main.jsonl"
    expected = line(0, 1000) + line(1, BLOCK + 333)
    path.write_bytes(expected)
    for round in range(3):
        log = new_log(path, log_mode)
        assert log.end == len(expected)
        for n in range(5):
            data = line(10 * round + n, 700 + 900 * n)
            log.append(data)
            expected += data
        check_open_file(path, log, expected)
        log.close()
        assert path.read_bytes() == expected


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(st.integers(1, 3 * BLOCK), st.booleans()),  # (line size, reopen after it)
        min_size=1,
        max_size=25,
    )
)
def test_any_sequence_of_appends_and_reopens_matches_the_concatenation(
    tmp_path: Path, mode: str, steps: list[tuple[int, bool]]
) -> None:
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / "main.jsonl"
    log = new_log(path, mode)
    expected = b""
    for n, (size, reopen) in enumerate(steps):
        data = b"x" * (size - 1) + b"\n"
        log.append(data)
        expected += data
        if reopen:
            log.close()
            assert path.read_bytes() == expected
            log = new_log(path, mode)
        check_open_file(path, log, expected)
        assert log.end == len(expected), n
    log.close()
    assert path.read_bytes() == expected


def test_a_failed_write_leaves_the_logical_end_where_it_was(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "main.jsonl"
    log = new_log(path, mode)
    log.append(line(1, 300))
    # make every write of the log fail for real: its descriptors now point at a read-only file
    reader = os.open(path, os.O_RDONLY)
    try:
        for fd in (log._fd, log._direct_fd):
            if fd >= 0:
                os.dup2(reader, fd)
    finally:
        os.close(reader)
    with pytest.raises(OSError):
        log.append(line(2, 300))
    assert log.end == 300
    with pytest.raises(OSError):
        log.close()  # cannot truncate through a read-only descriptor either
    assert path.read_bytes()[:300] == line(1, 300)
    with pytest.raises(ValueError, match="closed"):
        log.append(line(3, 300))


# through JsonlStorage ----------------------------------------------------------------------


async def opened(path: Path, *, fsync: bool = True) -> JsonlStorage:
    storage = JsonlStorage(path, fsync=fsync)
    await storage.open(ctx)
    return storage


def main_log(storage: JsonlStorage) -> MainLog:
    log = storage._log
    assert log is not None
    return log


async def commit_entries(storage: JsonlStorage, cid: int, sizes: list[int]) -> None:
    for size in sizes:
        n = storage.seq + 1
        entry = Entry(
            id=storage.mint_id(), conversation_id=cid, kind="k", data={"n": n, "pad": "y" * size}
        )
        await storage.commit(
            [EntryWrite(entry), DocWrite(DocRef.sticky(cid), [["s", ["n"], n]])], ctx
        )


async def closed_session(path: Path, h, sizes: list[int]) -> tuple[JsonlStorage, Path]:
    """A closed session whose root holds one entry per size; returns it and its main.jsonl."""
    storage = await opened(path)
    cid = await h.with_root(storage)
    await commit_entries(storage, cid, sizes)
    await storage.close(ctx)
    return storage, path / "main.jsonl"


def committed_lines(data: bytes) -> list[dict[str, object]]:
    """main.jsonl's complete lines, decoded whatever their format, in the v1 object shape."""
    lines = read_lines("main.jsonl", data[: data.rfind(b"\n") + 1], True)
    return [{"seq": line.seq, "writes": plain(line.writes)} for _, _, line in lines]


@pytest.mark.anyio
async def test_durable_commits_reopen_with_every_record(tmp_path: Path, h, mode: str) -> None:
    storage = await opened(tmp_path)
    if main_log(storage).mode != mode:
        await storage.close(ctx)
        pytest.skip(f"{tmp_path} refuses O_DIRECT")
    cid = await h.with_root(storage)
    tid = storage.mint_id()
    await storage.commit([TaskWrite(Task(id=tid, conversation_id=cid, kind="t"))], ctx)
    await commit_entries(storage, cid, [10, 5000, 200_000, 3, 4096, 70_000, 1])
    await storage.commit([TaskPatchWrite(TaskPatch(id=tid, checkpoint={"at": 1}))], ctx)
    live = await h.dump(storage)
    main = tmp_path / "main.jsonl"
    log = main_log(storage)
    data = main.read_bytes()
    assert len(data) > log.end and data[log.end :] == bytes(len(data) - log.end)
    await storage.close(ctx)
    await storage.close(ctx)  # idempotent
    data = main.read_bytes()
    assert data.endswith(b"\n") and b"\0" not in data  # at rest: clean JSONL
    # every commit but the last, which wrote only the task sidecar and is published there
    assert [r["seq"] for r in committed_lines(data)] == list(range(1, storage.seq))
    again = await opened(tmp_path)
    assert await h.dump(again) == live
    await commit_entries(again, cid, [20, 20])
    seq = again.seq
    await again.close(ctx)
    again = await opened(tmp_path, fsync=False)  # the fsync-off path reads the same files
    assert again.seq == seq
    await again.close(ctx)


@pytest.mark.anyio
async def test_a_reader_sees_every_committed_line_while_the_storage_is_open(
    tmp_path: Path, h, mode: str
) -> None:
    storage = await opened(tmp_path)
    cid = await h.with_root(storage)
    main = tmp_path / "main.jsonl"
    for size in [10, 4000, 9000, 50]:
        await commit_entries(storage, cid, [size])
        data = main.read_bytes()  # a plain buffered read, through the page cache
        assert [r["seq"] for r in committed_lines(data)] == list(range(1, storage.seq + 1))
        assert len(committed_lines(data)[-1]["writes"][0]["entry"]["data"]["pad"]) == size  # type: ignore[index]
    await storage.close(ctx)


@pytest.mark.anyio
async def test_a_crash_mid_line_inside_the_zero_tail_opens_cleanly(
    tmp_path: Path, h, mode: str
) -> None:
    # docs/design/storage.md#recovery: what a durable writer leaves when it dies mid-append
    storage = await opened(tmp_path)
    cid = await h.with_root(storage)
    await commit_entries(storage, cid, [100, 5000])
    live = await h.dump(storage)
    await storage.close(ctx)
    main = tmp_path / "main.jsonl"
    clean = main.read_bytes()
    main.write_bytes(clean + b'{"seq":4,"maxId":9,"writes":[{"ki' + bytes(300_000))
    storage = await opened(tmp_path)
    assert await h.dump(storage) == live
    await commit_entries(storage, cid, [7])
    await storage.close(ctx)
    data = main.read_bytes()
    assert data.startswith(clean) and b"\0" not in data
    assert [r["seq"] for r in committed_lines(data)] == [1, 2, 3, 4]


@pytest.mark.anyio
async def test_a_nul_byte_inside_an_earlier_line_fails_open(tmp_path: Path, h) -> None:
    _, main = await closed_session(tmp_path, h, [100, 100])
    lines = main.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1][:20] + b"\0" + lines[1][21:]
    main.write_bytes(b"".join(lines))
    with pytest.raises(CorruptStorage) as caught:
        await opened(tmp_path)
    assert caught.value.line == 2


@pytest.mark.anyio
async def test_a_last_line_torn_by_power_loss_is_cut(tmp_path: Path, h) -> None:
    # power loss during the in-flight direct write: its last sector (newline included) landed,
    # an earlier one still reads as the preallocated zeros; that commit was never acknowledged
    storage, main = await closed_session(tmp_path, h, [100, 100])
    clean = main.read_bytes()
    lines = clean.splitlines(keepends=True)
    torn = lines[-1][:10] + b"\0" * (len(lines[-1]) - 40) + lines[-1][-30:]
    main.write_bytes(clean + torn + b"\0" * 5000)
    reopened = await opened(tmp_path)
    assert reopened.seq == storage.seq  # every acknowledged commit, nothing of the torn one
    await reopened.close(ctx)
    assert main.read_bytes() == clean


@pytest.mark.anyio
async def test_a_stray_nul_in_a_complete_last_line_fails_open_and_cuts_nothing(
    tmp_path: Path, h
) -> None:
    # issue 36 item 8: one NUL between written bytes is damage, not a torn write; the
    # acknowledged commit (a permission mode, say) must not vanish without a word
    _, main = await closed_session(tmp_path, h, [100, 100])
    clean = main.read_bytes()
    start = clean.rfind(b"\n", 0, len(clean) - 1) + 1
    at = next(i for i in range(start + 20, len(clean) - 5) if i % 512 != 0 and (i + 1) % 512 != 0)
    damaged = clean[:at] + b"\0" + clean[at + 1 :]
    main.write_bytes(damaged)
    with pytest.raises(CorruptStorage) as caught:
        await opened(tmp_path)
    number = clean.count(b"\n")
    assert str(caught.value) == (
        f"{main}:{number}: a NUL byte at column {at - start + 1} of this complete "
        "line, between bytes that were written: not a torn write (a power loss leaves whole "
        "sectors of zeros) but damage to an acknowledged commit; nothing was cut. Restore the "
        "file from a backup"
    )
    assert main.read_bytes() == damaged  # left as it is


@pytest.mark.anyio
async def test_a_nul_for_the_first_byte_of_a_line_away_from_a_sector_edge_is_damage(
    tmp_path: Path, h
) -> None:
    _, main = await closed_session(tmp_path, h, [100, 100])
    clean = main.read_bytes()
    start = clean.rfind(b"\n", 0, len(clean) - 1) + 1
    assert (start + 1) % 512 != 0  # a lost sector would end here: not this layout
    main.write_bytes(clean[:start] + b"\0" + clean[start + 1 :])
    with pytest.raises(CorruptStorage) as caught:
        await opened(tmp_path)
    assert caught.value.line == clean.count(b"\n")
    assert caught.value.reason.startswith("a NUL byte at column 1 of this complete line")


@pytest.mark.anyio
async def test_a_torn_sector_holding_one_byte_of_the_line_is_still_a_torn_write(
    tmp_path: Path, h
) -> None:
    # the in-flight line began on the last byte of a sector that did not land: one NUL, at
    # the line's start, is a torn write all the same (cut, never acknowledged)
    pad = 100
    for attempt in range(8):  # a checksum's digits may shift the length by one or two
        folder = tmp_path / str(attempt)
        folder.mkdir()
        storage, main = await closed_session(folder, h, [100, pad])
        size = main.stat().st_size
        if size % 512 == 511:
            break
        pad += (511 - size) % 512
    else:
        pytest.fail("could not place a line at the last byte of a sector")
    clean = main.read_bytes()
    reopened = await opened(folder)
    await commit_entries(reopened, 1, [50])
    await reopened.close(ctx)
    torn = main.read_bytes()[len(clean) :]
    main.write_bytes(clean + b"\0" + torn[1:] + b"\0" * 5000)
    again = await opened(folder)
    assert again.seq == storage.seq
    await again.close(ctx)
    assert main.read_bytes() == clean


@pytest.mark.anyio
async def test_fsync_off_keeps_the_plain_append(tmp_path: Path, h) -> None:
    storage = await opened(tmp_path, fsync=False)
    assert main_log(storage).mode == "append"
    cid = await h.with_root(storage)
    await commit_entries(storage, cid, [10, 20])
    data = (tmp_path / "main.jsonl").read_bytes()
    assert len(data) == main_log(storage).end and b"\0" not in data  # no preallocation
    await storage.close(ctx)


@pytest.mark.anyio
async def test_a_failed_main_write_fails_the_storage_and_publishes_nothing(
    tmp_path: Path, h, mode: str
) -> None:
    storage = await opened(tmp_path)
    cid = await h.with_root(storage)
    log = main_log(storage)
    end = log.end
    reader = os.open(tmp_path / "main.jsonl", os.O_RDONLY)
    try:
        for fd in (log._fd, log._direct_fd):
            if fd >= 0:
                os.dup2(reader, fd)  # every write through the log now fails with EBADF
    finally:
        os.close(reader)
    with pytest.raises(StorageFailed):
        await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
    assert log.end == end and storage.seq == 1
    with pytest.raises(StorageFailed, match="an earlier commit failed"):
        await commit_entries(storage, cid, [1])
    with pytest.raises(OSError):
        await storage.close(ctx)  # the log cannot cut its zero tail through a read-only fd
    again = await opened(tmp_path)  # the lock was released all the same; open cuts the zeros
    assert again.seq == 1
    await again.close(ctx)


_NEAR_FULL = """
import os, resource, signal, sys
from pico3.storage._log import MainLog
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
MainLog.use_direct = sys.argv[3] == "direct"
log = MainLog(sys.argv[1], durable=True)
line = b"x" * 299 + b"\\n"
written = 0
try:
    while True:
        log.append(line)
        written += len(line)
except OSError as exc:
    print(log.mode, written, exc.errno, flush=True)
"""


def test_a_nearly_full_disk_fails_where_a_plain_append_would(tmp_path: Path, mode: str) -> None:
    # the file size limit stands in for a full disk: the preallocation step does not fit, so
    # the log writes only what each line needs and fails at the limit, not a step before it
    import errno
    import subprocess
    import sys

    path = tmp_path / "main.jsonl"
    path.write_bytes(b"")
    limit = 40 * BLOCK + 100
    done = subprocess.run(
        [sys.executable, "-c", _NEAR_FULL, str(path), str(limit), mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    log_mode, written, error = done.stdout.split()
    if log_mode != mode:
        pytest.skip(f"{tmp_path} refuses O_DIRECT")
    assert int(error) == errno.EFBIG
    assert limit - BLOCK - 300 <= int(written) <= limit  # direct pads to its block end
    data = path.read_bytes()
    assert data[: int(written)] == (b"x" * 299 + b"\n") * (int(written) // 300)


def test_a_log_adopts_a_file_its_writer_preallocated(tmp_path: Path, mode: str) -> None:
    """``end=``: the lines end there and the rest is written zeros; the log appends at ``end``
    without preallocating again, and close cuts the zeros as for any durable log."""
    path = tmp_path / "sticky-1.jsonl"
    lines = line(1, 100) + line(2, 5000)
    size = -(-len(lines) // BLOCK) * BLOCK + 3 * BLOCK
    path.write_bytes(lines + bytes(size - len(lines)))
    log = MainLog(str(path), durable=True, end=len(lines), probe=False)
    if log.mode != mode:
        log.close()
        pytest.skip(f"{tmp_path} refuses O_DIRECT (the log fell back to {log.mode})")
    assert log.allocated == size  # adopted as it is: no new step
    log.append(line(3, 300))
    check_open_file(path, log, lines + line(3, 300))
    log.append(line(4, 4 * BLOCK))  # past the adopted zeros: the log grows as usual
    check_open_file(path, log, lines + line(3, 300) + line(4, 4 * BLOCK))
    log.close()
    assert path.read_bytes() == lines + line(3, 300) + line(4, 4 * BLOCK)
    with pytest.raises(ValueError, match="cannot adopt a logical end"):
        MainLog(str(path), durable=True, end=path.stat().st_size + 1)
    with pytest.raises(ValueError, match="only a durable log adopts"):
        MainLog(str(path), durable=False, end=0)


@pytest.mark.anyio
async def test_a_sticky_rewrite_adopts_its_new_file_and_later_commits_land_in_it(
    tmp_path: Path, h, mode: str
) -> None:
    """With fsync the rewritten sticky file is written preallocated and synced once; the next
    commits are written into its zeros (the open log adopted it, with no cut, preallocation or
    probe of its own), and the session reopens with every commit."""
    storage = await opened(tmp_path)
    if main_log(storage).mode != mode:
        await storage.close(ctx)
        pytest.skip(f"{tmp_path} refuses O_DIRECT")
    cid = await h.with_root(storage)
    sticky = DocRef.sticky(cid)
    await commit_entries(storage, cid, [10, 20, 30])
    await storage.commit([DocWrite(sticky, [["r", {"n": "base"}]])], ctx)
    await commit_entries(storage, cid, [40])
    path = tmp_path / f"sticky-{cid}.jsonl"
    calls: list[str] = []
    real_fsync, real_pwrite = os.fsync, os.pwrite

    def fsync(fd: int) -> None:
        calls.append("fsync")
        real_fsync(fd)

    def pwrite(fd: int, data: Any, offset: int) -> int:
        calls.append("pwrite")
        return real_pwrite(fd, data, offset)

    os.fsync, os.pwrite = fsync, pwrite  # type: ignore[assignment]
    try:
        await storage.truncate(sticky, ctx)
        rewrite = list(calls)
        await commit_entries(storage, cid, [50])
    finally:
        os.fsync, os.pwrite = real_fsync, real_pwrite  # type: ignore[assignment]
    assert rewrite == ["fsync", "fsync"]  # the new file's sync and the folder's: nothing else
    log = storage._sidecars[path.name]
    assert log.mode == mode
    data = path.read_bytes()
    assert (
        len(read_lines(str(path), data[: log.end], False)) == 3
    )  # the base, then the two commits after it
    assert data[log.end :] == bytes(len(data) - log.end)
    live = await h.dump(storage)
    await storage.close(ctx)
    assert b"\0" not in path.read_bytes()  # at rest: clean JSONL
    again = await opened(tmp_path)
    assert await h.dump(again) == live
    assert h.fold(await again.doc(sticky, ctx)) == {"n": again.seq}  # the last commit's
    await again.close(ctx)
