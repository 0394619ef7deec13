"""One writer per JSONL session (issue 23): an exclusive flock on the session folder, and a
second worker, in another process or this one, refused with an error naming the holder's pid."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

from chord.context import BACKGROUND
from pico3.storage import JsonlStorage, StorageInUse

pytestmark = pytest.mark.anyio
TIMEOUT = 30.0
HOLDER = """
import sys, anyio
from chord.context import BACKGROUND
from pico3.storage import JsonlStorage, StorageInUse

async def main(path):
    storage = JsonlStorage(path, fsync=False)
    try:
        await storage.open(BACKGROUND)
    except StorageInUse as exc:
        print("inuse", exc, flush=True)
        return
    await storage.commit([], BACKGROUND)
    print("open", flush=True)
    await anyio.to_thread.run_sync(sys.stdin.readline)
    await storage.close(BACKGROUND)
    print("closed", flush=True)

anyio.run(main, sys.argv[1])
"""


def start(path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], TIMEOUT)
    assert ready, "the worker stopped talking"
    return process.stdout.readline().strip()


async def test_a_second_worker_is_refused_naming_the_holders_pid(tmp_path: Path) -> None:
    path = tmp_path / "session"
    holder = start(path)
    try:
        assert line(holder) == "open"
        refused, _ = start(path).communicate("", timeout=TIMEOUT)
        assert refused.startswith(f"inuse {path} is open in another session: pid {holder.pid} ")
        storage = JsonlStorage(path, fsync=False)
        with pytest.raises(StorageInUse, match=f"pid {holder.pid} holds its lock"):
            await storage.open(BACKGROUND)
        assert sorted(os.listdir(path)) == ["main.jsonl"]  # the refused openers touched nothing
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert line(holder) == "closed"
        await storage.open(BACKGROUND)  # released: the next worker gets it
        assert storage.seq == 1
        await storage.close(BACKGROUND)
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait(timeout=TIMEOUT)
        for stream in (holder.stdin, holder.stdout):
            if stream is not None:
                stream.close()


async def test_the_lock_dies_with_its_holder(tmp_path: Path) -> None:
    path = tmp_path / "session"
    holder = start(path)
    try:
        assert line(holder) == "open"
    finally:
        holder.kill()  # SIGKILL: no close, no cleanup
        holder.wait(timeout=TIMEOUT)
        for stream in (holder.stdin, holder.stdout):
            if stream is not None:
                stream.close()
    storage = JsonlStorage(path, fsync=False)
    await storage.open(BACKGROUND)
    assert storage.seq == 1


async def test_a_second_object_in_the_same_process_is_refused(tmp_path: Path) -> None:
    first = JsonlStorage(tmp_path / "s", fsync=False)
    await first.open(BACKGROUND)
    with pytest.raises(StorageInUse, match=rf"this process \(pid {os.getpid()}\)"):
        await JsonlStorage(tmp_path / "s", fsync=False).open(BACKGROUND)
    await first.close(BACKGROUND)
