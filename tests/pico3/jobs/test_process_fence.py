"""Self-fencing of effects (issue 42): a worker whose session lease cannot be renewed kills its
commands' process groups *before* the lease can expire, and one that learns of ``LeaseLost``
kills them at once (``PostgresStorage.on_fence`` + ``LocalProcessHost.fence``), with real
subprocesses, a real PostgreSQL cluster and a real blocked renewal."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from chord.context import BACKGROUND
from pico3.process_host import LocalProcessHost, ProcessSpec
from pico3.storage import (
    Conversation,
    ConversationWrite,
    LeaseLost,
    PostgresStorage,
)

pytestmark = pytest.mark.anyio
ctx = BACKGROUND
TIMEOUT = 30.0
# a command whose process group holds two processes: the shell and a background sleep
GROUP = "sleep 300 & echo $! > bg.pid; wait"


def alive(pid: int) -> bool:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return raw[raw.rindex(b")") + 2 :].split()[0] not in (b"Z", b"X")


async def started(host: LocalProcessHost, key: str, folder: Path) -> int:
    """Start the two-process command; return the background sleep's pid once it runs."""
    await host.start(key, ProcessSpec("sh", ("-c", GROUP), str(folder)), ctx)
    pidfile = folder / "bg.pid"
    for _ in range(600):  # polled with a deadline (30 s): the shell writes it at once
        if pidfile.exists() and pidfile.read_text().strip():
            return int(pidfile.read_text())
        await anyio.sleep(0.05)
    raise AssertionError("the command never started")


async def test_a_lease_that_cannot_be_renewed_kills_the_commands_before_it_expires(
    postgres_cluster: Any, tmp_path: Path
) -> None:
    conninfo = postgres_cluster.conninfo
    session = f"fence-{uuid.uuid4().hex}"
    folder = tmp_path / "work"
    folder.mkdir()
    storage = PostgresStorage(conninfo, session, fsync=False, lease_seconds=4.0)
    await storage.open(ctx)
    with LocalProcessHost(tmp_path / "processes") as host:
        background = await started(host, "job:1", folder)
        seen: list[tuple[str, bool]] = []
        fenced = threading.Event()

        def fence(reason: str) -> None:  # on the storage's watchdog thread
            host.fence(reason)
            with psycopg.connect(conninfo, autocommit=True) as probe:
                ((valid,),) = probe.execute(
                    "SELECT lease_until > clock_timestamp() FROM pico3_sessions WHERE session = %s",
                    (session,),
                ).fetchall()
            seen.append((reason, bool(valid)))
            fenced.set()

        storage.on_fence(fence)
        try:
            await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
            # every renewal from now on waits for this row lock: none succeeds
            with psycopg.connect(conninfo) as blocker:
                blocker.execute(
                    "SELECT 1 FROM pico3_sessions WHERE session = %s FOR UPDATE", (session,)
                )
                with anyio.fail_after(TIMEOUT):
                    await anyio.to_thread.run_sync(fenced.wait)
                    status = await host.wait("job:1", ctx)
                blocker.rollback()
            [(reason, valid_at_kill)] = seen
            assert "no lease renewal succeeded for" in reason and "before it can expire" in reason
            assert valid_at_kill, "the commands were killed while the lease was still valid"
            assert status.state == "exited" and status.exit_code == -9
            for _ in range(600):  # the whole group: the background sleep too (reaped by init)
                if not alive(background):
                    break
                await anyio.sleep(0.05)
            assert not alive(background)
        finally:
            await storage.close(ctx)


async def test_a_worker_that_learns_of_lease_lost_kills_its_commands_at_once(
    postgres_cluster: Any, tmp_path: Path
) -> None:
    conninfo = postgres_cluster.conninfo
    session = f"lost-{uuid.uuid4().hex}"
    folder = tmp_path / "work"
    folder.mkdir()
    storage = PostgresStorage(conninfo, session, fsync=False, lease_seconds=30.0)
    await storage.open(ctx)
    with LocalProcessHost(tmp_path / "processes") as host:
        reasons: list[str] = []
        storage.on_fence(lambda reason: (reasons.append(reason), host.fence(reason)))
        background = await started(host, "job:1", folder)
        other = PostgresStorage(conninfo, session, fsync=False, take_over=True)
        try:
            await storage.commit([ConversationWrite(Conversation(id=storage.mint_id()))], ctx)
            await other.open(ctx)  # another server takes the session over
            with pytest.raises(LeaseLost):
                await storage.commit([], ctx)
            assert reasons and "another worker took the lease" in reasons[0]
            with anyio.fail_after(TIMEOUT):
                status = await host.wait("job:1", ctx)
            assert status.exit_code == -9
            for _ in range(600):
                if not alive(background):
                    break
                await anyio.sleep(0.05)
            assert not alive(background)
            assert (tmp_path / "processes" / "job%3A1" / "fenced.json").exists()
        finally:
            await other.close(ctx)
            await storage.close(ctx)
