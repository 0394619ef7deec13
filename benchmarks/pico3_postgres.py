"""Benchmark: pico3 on PostgreSQL (issue 23), every figure next to a baseline from the same run.

A throwaway cluster (:class:`pico3.storage.pg_cluster.TempCluster`: ``initdb`` in a temporary
folder, loopback TCP, ``fsync=on``, ``synchronous_commit=on``) serves every row.

* **one session**: ``PostgresStorage.commit`` of one entry-shaped write (a ``pi.user`` entry
  with one short message) with ``fsync=True`` (``synchronous_commit=on``: each commit waits for
  its WAL flush), next to the bare baseline on the same server: a loop of single-row
  ``INSERT`` (a ``bytea`` of the same size) + ``COMMIT`` in autocommit mode over one psycopg
  async connection. Five rounds alternate ours/bare and keep each side's best. Target >= 0.7x.
* **50 sessions** committing concurrently, spread over one worker process per core (a session
  server runs one worker per session; the sessions of one process interleave on its event
  loop, each committing sequentially on its own connection): the aggregate commits/s from the
  first start to the last finish, next to the one-session figure. The server groups the WAL
  flushes of concurrent commits, so the aggregate should be far above one session's. Target
  >= 5x.
* **open**: a session of 100,000 entries (one entry per commit, rows bulk-loaded with COPY in
  the exact encoding a commit writes) opened by ``PostgresStorage.open`` (migration check, the
  lease, reading every row, replay), next to a bare ``SELECT`` of the same rows and to
  ``JsonlStorage.open`` of a session of the same entries (the replay both backends share).
  Target <= 1.5 s.
* **lease take-over**: a worker process holding a session is SIGKILLed; the time until a second
  opener (``wait=``) holds the lease: the failover time at the storage level, bounded by the
  lease expiry (``--lease``, default 2 s).

Run: ``uv run python benchmarks/pico3_postgres.py [--quick]``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

import anyio
import msgspec
import psycopg

from chord.context import BACKGROUND
from pico3.storage import (
    Conversation,
    ConversationWrite,
    Entry,
    EntryWrite,
    JsonlStorage,
    PostgresStorage,
)
from pico3.storage.pg_cluster import TempCluster

ctx = BACKGROUND
MESSAGE = [{"role": "user", "content": "please look at the failing test in tests/test_app.py"}]


def entry(storage: PostgresStorage | JsonlStorage, n: int) -> EntryWrite:
    return EntryWrite(
        Entry(id=storage.mint_id(), conversation_id=1, kind="pi.user", model=MESSAGE, data={"n": n})
    )


async def session_rate(conninfo: str, name: str, commits: int, fsync: bool = True) -> float:
    storage = PostgresStorage(conninfo, name, fsync=fsync)
    await storage.open(ctx)
    try:
        if storage.seq == 0:
            await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
        for n in range(20):  # warm: prepared statements, the plpgsql plan
            await storage.commit([entry(storage, n)], ctx)
        started = time.perf_counter()
        for n in range(commits):
            await storage.commit([entry(storage, n)], ctx)
        return commits / (time.perf_counter() - started)
    finally:
        await storage.close(ctx)


async def bare_rate(conninfo: str, commits: int, size: int) -> float:
    payload = b"x" * size
    conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS bare (id bigserial PRIMARY KEY, payload bytea NOT NULL)"
        )
        for _ in range(20):
            await conn.execute("INSERT INTO bare (payload) VALUES (%s)", (payload,))
        started = time.perf_counter()
        for _ in range(commits):
            await conn.execute("INSERT INTO bare (payload) VALUES (%s)", (payload,))
        return commits / (time.perf_counter() - started)
    finally:
        await conn.close()


async def sessions_in_process(
    conninfo: str, names: list[str], commits: int, ready: Any, go: Any
) -> tuple[float, float]:
    storages = [PostgresStorage(conninfo, name, fsync=True) for name in names]
    for storage in storages:
        await storage.open(ctx)
        await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
        for n in range(5):
            await storage.commit([entry(storage, n)], ctx)

    async def run(storage: PostgresStorage) -> None:
        for n in range(commits):
            await storage.commit([entry(storage, n)], ctx)

    ready.set()
    await anyio.to_thread.run_sync(go.wait)
    started = time.perf_counter()
    try:
        async with anyio.create_task_group() as group:
            for storage in storages:
                group.start_soon(run, storage)
        return started, time.perf_counter()
    finally:
        for storage in storages:
            await storage.close(ctx)


def _child(conninfo: str, names: list[str], commits: int, ready: Any, go: Any, out: Any) -> None:
    out.put(anyio.run(sessions_in_process, conninfo, names, commits, ready, go))


def concurrent_rate(conninfo: str, sessions: int, commits: int, processes: int) -> float:
    """``sessions`` sessions over ``processes`` worker processes (each session's commits are
    sequential, the sessions of a process interleave on its event loop), all started together;
    the aggregate rate from the first start to the last finish."""
    context = multiprocessing.get_context("fork")
    go = context.Event()
    out = context.Queue()
    workers = []
    readies = []
    for p in range(processes):
        names = [f"many-{n}" for n in range(p, sessions, processes)]
        ready = context.Event()
        worker = context.Process(target=_child, args=(conninfo, names, commits, ready, go, out))
        worker.start()
        workers.append(worker)
        readies.append(ready)
    for ready in readies:
        ready.wait(120)
    go.set()
    spans = [out.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join(60)
    started = min(span[0] for span in spans)
    ended = max(span[1] for span in spans)
    return sessions * commits / (ended - started)


async def build_big(conninfo: str, name: str, entries: int) -> None:
    """A session of ``entries`` one-entry commits, rows written with COPY in commit encoding."""
    storage = PostgresStorage(conninfo, name, fsync=False)
    await storage.open(ctx)
    await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
    await storage.close(ctx)
    encoder = msgspec.json.Encoder()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        with (
            conn.cursor() as cursor,
            cursor.copy(
                "COPY pico3_commits (session, seq, writes) FROM STDIN (FORMAT BINARY)"
            ) as copy,
        ):
            copy.set_types(["text", "int8", "bytea"])
            for n in range(entries):
                write = EntryWrite(
                    Entry(id=n + 2, conversation_id=1, kind="pi.user", model=MESSAGE)
                )
                copy.write_row((name, n + 2, encoder.encode([write])))
        conn.execute(
            "UPDATE pico3_sessions SET seq = %s, max_id = %s WHERE session = %s",
            (entries + 1, entries + 1, name),
        )
        conn.execute("VACUUM ANALYZE pico3_commits")


async def open_time(conninfo: str, name: str, entries: int) -> tuple[float, float]:
    best = float("inf")
    baseline = float("inf")
    for _ in range(3):
        storage = PostgresStorage(conninfo, name, fsync=False)
        started = time.perf_counter()
        await storage.open(ctx)
        best = min(best, time.perf_counter() - started)
        assert storage.seq == entries + 1
        await storage.close(ctx)
        # the bare read of the same rows (one query, every row to the client)
        conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
        started = time.perf_counter()
        cursor = conn.cursor(binary=True)
        await cursor.execute(
            "SELECT seq, writes FROM pico3_commits WHERE session = %s ORDER BY seq", (name,)
        )
        rows = await cursor.fetchall()
        baseline = min(baseline, time.perf_counter() - started)
        assert len(rows) == entries + 1
        await conn.close()
    return best, baseline


async def jsonl_open_time(entries: int) -> float:
    """The embedded default's open of the same session shape, for comparison (same replay)."""
    with tempfile.TemporaryDirectory(dir=".") as folder:
        storage = JsonlStorage(folder, fsync=False)
        await storage.open(ctx)
        await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
        for n in range(entries):
            await storage.commit([entry(storage, n)], ctx)
        await storage.close(ctx)
        best = float("inf")
        for _ in range(3):
            storage = JsonlStorage(folder, fsync=False)
            started = time.perf_counter()
            await storage.open(ctx)
            best = min(best, time.perf_counter() - started)
            await storage.close(ctx)
        return best


HOLDER = """
import sys, anyio
from chord.context import BACKGROUND
from pico3.storage import PostgresStorage
async def main():
    storage = PostgresStorage(sys.argv[1], sys.argv[2], fsync=True, lease_seconds=float(sys.argv[3]))
    await storage.open(BACKGROUND)
    await storage.commit([], BACKGROUND)
    print("open", flush=True)
    await anyio.sleep(3600)
anyio.run(main)
"""


def takeover_time(conninfo: str, lease: float) -> float:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, conninfo, "failover", str(lease)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    try:
        line = holder.stdout.readline()
        assert line.strip() == "open", line
        os.kill(holder.pid, signal.SIGKILL)  # mid-lease: it was renewing
        killed = time.perf_counter()
        anyio.run(take_over, conninfo, lease)
        return time.perf_counter() - killed
    finally:
        holder.wait()
        holder.stdout.close()


async def take_over(conninfo: str, lease: float) -> None:
    storage = PostgresStorage(conninfo, "failover", fsync=True, wait=lease * 5)
    await storage.open(ctx)  # returns once the dead holder's lease expired
    await storage.close(ctx)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer commits, 20k-entry open")
    parser.add_argument("--lease", type=float, default=2.0, help="lease expiry (s)")
    args = parser.parse_args()
    commits = 300 if args.quick else 1500
    entries = 20_000 if args.quick else 100_000
    sessions = 50
    with TempCluster() as cluster:
        conninfo = cluster.conninfo
        size = len(
            msgspec.json.encode(
                [EntryWrite(Entry(id=10**6, conversation_id=1, kind="pi.user", model=MESSAGE))]
            )
        )
        ours = bare = 0.0
        for round in range(5):
            ours = max(ours, anyio.run(session_rate, conninfo, f"one-{round}", commits))
            bare = max(bare, anyio.run(bare_rate, conninfo, commits, size))
        print(
            f"one session, synchronous_commit=on: {ours:,.0f} commits/s; bare INSERT+COMMIT "
            f"({size} B row) {bare:,.0f}/s; ratio {ours / bare:.2f}x (target >= 0.7x)"
        )
        processes = os.cpu_count() or 1
        many = concurrent_rate(conninfo, sessions, max(20, commits // 10), processes)
        print(
            f"{sessions} sessions concurrently ({processes} worker processes): {many:,.0f} "
            f"commits/s aggregate; {many / ours:.1f}x one session (target >= 5x)"
        )
        anyio.run(build_big, conninfo, "big", entries)
        took, read = anyio.run(open_time, conninfo, "big", entries)
        jsonl = anyio.run(jsonl_open_time, entries)
        print(
            f"open a {entries:,}-entry session: {took:.2f} s (bare SELECT of its rows "
            f"{read:.2f} s; JsonlStorage.open of the same entries {jsonl:.2f} s; "
            "target <= 1.5 s for 100,000)"
        )
        failover = takeover_time(conninfo, args.lease)
        print(
            f"lease take-over after SIGKILL of the holder: {failover:.2f} s "
            f"(lease expiry {args.lease:g} s)"
        )


if __name__ == "__main__":
    main()
