"""Benchmark: pico3 commits per second, against a raw append on the same disk.

Two levels are measured, each next to its raw baseline from the same run:

* **kernel** (what a pico3 caller gets): ``ConversationHandle.write`` of one entry through
  :class:`pico3.Harness` on ``JsonlStorage`` — the line, the transaction, validation, the input
  record, persistence, the in-memory apply and the view envelope — with and without a watch
  attached (a watch makes every commit fold into the tracked view and deliver one envelope; the
  listener counts envelopes and drops them, as a client folding them into its replica does);
* **storage** (the floor under it): ``JsonlStorage.commit`` of one entry write.

At the storage level a commit appends one entry-shaped record (a ``pi.user`` entry with one
short message) through ``JsonlStorage.commit`` — validation, staging, encoding, the append,
the durable write when fsync is on, and the in-memory apply. The raw baseline, measured in the
same run in the same directory, is ``os.write`` of a line of the same size (the kernel's line:
entry + input record) on an ``O_APPEND`` file followed by ``os.fsync`` (or no fsync, for the
``fsync=False`` rows). The rounds (five for the kernel fsync rows, three elsewhere) alternate
ours/raw and keep each side's best, so a busy machine hurts both sides alike. The kernel
``fsync=False`` rows also print the rate per second of this process's CPU time, which is what
the code costs when other work shares the machine.

With ``fsync=True`` the storage does not write main.jsonl the way the baseline does: it
preallocates the file with zeros and rewrites the tail block with one ``O_DIRECT | O_DSYNC``
write per commit (:mod:`pico3.storage._log`; ``"prealloc"`` + ``fdatasync`` where ``O_DIRECT``
is refused), which is cheaper than append + fsync because the file's size and blocks never
change under a commit. The fsync rows therefore also print that durable write alone (the same
``MainLog`` in a bare loop, mode named), the floor the kernel's Python work sits on, and a
*control*: the raw loop with as much pure CPU work before each write as a kernel commit costs
(its CPU time per commit, from the ``fsync=False`` rows). On the two-core development VM any
blocking wait between commits makes the code after it run slower (about 3x the CPU for the
kernel's commit path, 1.3x for the control's tiny loop); the "CPU per commit with fsync on" line
shows what that costs here.

Then a session of 100,000 entries is opened from disk (replay of every line: decode, checksum,
stage, apply) and the time and the memory it holds (tracemalloc, in a separate open) are printed,
for ``JsonlStorage.open`` and for ``Harness.open`` (storage open + kernel indexes + the harness
with its core kinds).

Targets (issue 5; they are about the kernel rows, which is what a caller gets): fsync=True
>= 0.8x the raw fsync rate; fsync=False >= 20,000 commits/s; opening 100,000 entries <= 1 s.

Run: ``uv run python benchmarks/pico3_commit.py [--quick] [--dir PATH]`` (``--dir`` picks the
disk; default: a temporary directory under the current directory).
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import tempfile
import time
import tracemalloc
from pathlib import Path

import anyio

from chord.context import BACKGROUND
from pico3.harness import Harness
from pico3.kernel.view import Envelope
from pico3.storage import Conversation, ConversationWrite, Entry, EntryWrite, JsonlStorage
from pico3.storage._log import MainLog

ctx = BACKGROUND


def entry(storage: JsonlStorage, n: int) -> Entry:
    message = {
        "role": "user",
        "content": [{"type": "text", "text": f"message number {n}: please look at the tests"}],
        "timestamp": 1_764_000_000_000 + n,
    }
    return Entry(id=storage.mint_id(), conversation_id=1, kind="pi.user", model=[message])


async def fresh(directory: Path, fsync: bool) -> JsonlStorage:
    shutil.rmtree(directory, ignore_errors=True)
    storage = JsonlStorage(directory, fsync=fsync)
    await storage.open(ctx)
    await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
    return storage


async def ours(directory: Path, fsync: bool, count: int) -> tuple[float, int]:
    """Commits per second, and the size of one main line."""
    storage = await fresh(directory, fsync)
    entries = [entry(storage, n) for n in range(count)]
    start = time.perf_counter()
    for item in entries:
        await storage.commit([EntryWrite(item)], ctx)
    elapsed = time.perf_counter() - start
    await storage.close(ctx)
    lines = (directory / "main.jsonl").read_bytes().splitlines(keepends=True)
    return count / elapsed, len(lines[-1])


def _spin(iterations: int) -> int:
    """Pure CPU work (a counting loop): the control's stand-in for a commit's Python work."""
    total = 0
    for n in range(iterations):
        total += n
    return total


def spin_iterations(cpu_seconds: float) -> int:
    """How many :func:`_spin` iterations take ``cpu_seconds`` of CPU time on this machine."""
    probe = 200_000
    start = time.process_time()
    _spin(probe)
    per_iteration = (time.process_time() - start) / probe
    return max(1, round(cpu_seconds / max(per_iteration, 1e-12)))


def raw(directory: Path, fsync: bool, count: int, size: int, spin: int = 0) -> float:
    """os.write (+ os.fsync) of a ``size``-byte line, per second.

    ``spin`` > 0 is the *control*: that many :func:`_spin` iterations run before each write,
    so the loop does a commit's worth of CPU work between fsyncs and nothing else.
    """
    path = directory.parent / "raw.jsonl"
    line = b"x" * (size - 1) + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    try:
        start = time.perf_counter()
        for _ in range(count):
            if spin:
                _spin(spin)
            os.write(fd, line)
            if fsync:
                os.fsync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)
    return count / elapsed


def durable_log(directory: Path, count: int, size: int) -> tuple[str, float]:
    """The durable write JsonlStorage uses for main.jsonl, alone: its mode and lines/s."""
    path = directory.parent / "log.jsonl"
    path.write_bytes(b"")
    line = b"x" * (size - 1) + b"\n"
    log = MainLog(os.fspath(path), durable=True)
    try:
        start = time.perf_counter()
        for _ in range(count):
            log.append(line)
        elapsed = time.perf_counter() - start
        return log.mode, count / elapsed
    finally:
        log.close()
        path.unlink()


def raw_cpu(directory: Path, count: int, size: int) -> float:
    """Process CPU seconds (user + system) one raw ``os.write`` + ``os.fsync`` costs."""
    path = directory.parent / "raw-cpu.jsonl"
    line = b"x" * (size - 1) + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    try:
        start = time.process_time()
        for _ in range(count):
            os.write(fd, line)
            os.fsync(fd)
        return (time.process_time() - start) / count
    finally:
        os.close(fd)
        os.unlink(path)


def message(n: int) -> dict[str, object]:
    return {
        "role": "user",
        "content": [{"type": "text", "text": f"message number {n}: please look at the tests"}],
        "timestamp": 1_764_000_000_000 + n,
    }


async def kernel(directory: Path, fsync: bool, count: int, watch: bool) -> tuple[float, float, int]:
    """``ConversationHandle.write`` of one entry per commit through the harness: commits per
    wall-clock second, per second of this process's CPU time, and the size of one main line."""
    shutil.rmtree(directory, ignore_errors=True)
    h = await Harness.open(JsonlStorage(directory, fsync=fsync), None, ctx)
    c = await h.root(ctx)
    seen = 0

    def fold(envelope: Envelope) -> None:  # a client folds each envelope and drops it
        nonlocal seen
        seen += 1

    if watch:
        (await c.watch(ctx)).start(fold)
    models = [[message(n)] for n in range(count)]
    start, cpu = time.perf_counter(), time.process_time()
    for model in models:
        await c.write("bench.note", ctx, model=model)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    await h.close(ctx)
    if watch:
        assert seen == count, "one envelope per commit"
    lines = (directory / "main.jsonl").read_bytes().splitlines(keepends=True)
    return count / elapsed, count / max(cpu, 1e-9), len(lines[-1])


async def compare_kernel(
    directory: Path, fsync: bool, count: int, rounds: int, cpu_per_commit: float = 0.0
) -> float:
    """Print the kernel rows; return the CPU seconds per commit (best, no watch)."""
    best = {False: 0.0, True: 0.0}
    best_cpu = {False: 0.0, True: 0.0}
    best_raw = best_control = 0.0
    size = spin = 0
    for _ in range(rounds):
        for watch in (False, True):
            rate, cpu, size = await kernel(directory, fsync, count, watch)
            best[watch] = max(best[watch], rate)
            best_cpu[watch] = max(best_cpu[watch], cpu)
        best_raw = max(best_raw, raw(directory, fsync, count, size))
        if fsync and cpu_per_commit:
            spin = spin_iterations(cpu_per_commit)
            best_control = max(best_control, raw(directory, fsync, count, size, spin))
    label = "os.write+os.fsync" if fsync else "os.write"
    print(f"raw {label} ({size} B line): {best_raw:,.0f} lines/s")
    if best_control:
        print(
            f"control: the same raw loop with {cpu_per_commit * 1e6:.0f} us of pure CPU work "
            f"before each write (the kernel's CPU per commit, measured with fsync=False): "
            f"{best_control:,.0f} lines/s ({best_control / best_raw:.2f}x raw)"
        )
        mode, floor = max(
            (durable_log(directory, count, size) for _ in range(rounds)), key=lambda r: r[1]
        )
        print(
            f"the storage's durable write alone (MainLog {mode!r}, {size} B line): "
            f"{floor:,.0f} lines/s ({floor / best_raw:.2f}x raw)"
        )
    for watch in (False, True):
        name = f"kernel write fsync={fsync}{' +watch' if watch else ''}"
        rate = best[watch]
        if fsync:
            target = f"target >= 0.8x raw = {0.8 * best_raw:,.0f}"
            print(f"{name}: {rate:,.0f} commits/s ({rate / best_raw:.2f}x raw; {target})")
            if not watch:  # where the time goes: the CPU a commit costs between fsyncs
                print(
                    f"  CPU per commit with fsync on: {1e6 / best_cpu[False]:.0f} us "
                    f"(a raw write+fsync alone: {raw_cpu(directory, count, size) * 1e6:.0f} us; "
                    f"the kernel's code with fsync off: {cpu_per_commit * 1e6:.0f} us)"
                )
        else:  # on a shared machine, the CPU-time rate shows what the code itself costs
            print(
                f"{name}: {rate:,.0f} commits/s (target >= 20,000; {rate / best_raw:.2f}x raw; "
                f"{best_cpu[watch]:,.0f}/s of process CPU time)"
            )
    return 1 / best_cpu[False] if best_cpu[False] else 0.0


async def compare(directory: Path, fsync: bool, count: int, rounds: int) -> None:
    best_ours = best_raw = 0.0
    size = 0
    for _ in range(rounds):
        rate, size = await ours(directory, fsync, count)
        best_ours = max(best_ours, rate)
        best_raw = max(best_raw, raw(directory, fsync, count, size))
    label = "os.write+os.fsync" if fsync else "os.write"
    print(f"raw {label} ({size} B line): {best_raw:,.0f} lines/s")
    if fsync:
        target = f"target >= 0.8x raw = {0.8 * best_raw:,.0f}"
        print(
            f"commit fsync=True: {best_ours:,.0f} commits/s ({best_ours / best_raw:.2f}x raw; {target})"
        )
    else:
        print(
            f"commit fsync=False: {best_ours:,.0f} commits/s (target >= 20,000; {best_ours / best_raw:.2f}x raw)"
        )


async def open_large(directory: Path, count: int) -> None:
    storage = await fresh(directory, fsync=False)
    for n in range(count):
        await storage.commit([EntryWrite(entry(storage, n))], ctx)
    await storage.close(ctx)
    size = (directory / "main.jsonl").stat().st_size
    best = float("inf")
    for _ in range(3):
        gc.collect()
        storage = JsonlStorage(directory, fsync=False)
        start = time.perf_counter()
        await storage.open(ctx)
        best = min(best, time.perf_counter() - start)
        await storage.close(ctx)
        del storage
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    storage = JsonlStorage(directory, fsync=False)
    await storage.open(ctx)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    await storage.close(ctx)
    print(
        f"storage open session of {count:,} entries ({size / 1e6:.1f} MB main.jsonl): {best:.2f} s (target <= 1 s)"
    )
    print(
        f"memory held by that open storage: {held / 1e6:.1f} MB ({held / count:,.0f} B/entry, tracemalloc)"
    )
    best = float("inf")
    for _ in range(3):
        gc.collect()
        start = time.perf_counter()
        h = await Harness.open(JsonlStorage(directory, fsync=False), None, ctx)
        best = min(best, time.perf_counter() - start)
        await h.close(ctx)
        del h
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    h = await Harness.open(JsonlStorage(directory, fsync=False), None, ctx)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    await h.close(ctx)
    print(f"Harness.open on that session: {best:.2f} s (target <= 1 s)")
    print(
        f"memory held by that open harness: {held / 1e6:.1f} MB ({held / count:,.0f} B/entry, tracemalloc)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description="pico3 JSONL commit and open benchmark")
    parser.add_argument("--quick", action="store_true", help="fewer commits (smoke run)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (picks the disk)")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    root = Path(tempfile.mkdtemp(prefix="pico3-bench-", dir=args.dir or Path.cwd()))
    try:
        directory = root / "session"
        print("-- kernel: ConversationHandle.write through Harness, one entry per commit")
        # fsync=False first: its CPU time per commit sizes the fsync=True control row
        cpu = await compare_kernel(directory, fsync=False, count=20_000 // scale, rounds=3)
        await compare_kernel(
            directory, fsync=True, count=2_000 // scale, rounds=5, cpu_per_commit=cpu
        )
        print("-- storage: JsonlStorage.commit of one entry write")
        await compare(directory, fsync=True, count=2_000 // scale, rounds=3)
        await compare(directory, fsync=False, count=50_000 // scale, rounds=3)
        print("-- open")
        await open_large(directory, 100_000 // scale)
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    anyio.run(main)
