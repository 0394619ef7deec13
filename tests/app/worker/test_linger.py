"""An unattended worker stops by itself (coding_agent.worker.linger).

The worker outlives its TUI (docs/design/decisions.md#d9), so something must stop a worker nobody comes back to: once
no client has been connected and nothing has been live for ``--linger`` seconds, it stops as on
SIGTERM. A connection, or live work, holds it up for as long as it lasts.

The waiter's tests run on trio's virtual clock (``MockClock`` with autojump): time advances only
when every task is blocked, so "0.3 s later" is exact and no sleep races the linger.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from trio.testing import MockClock
from worker_support import TIMEOUT, Client, connected, worker_process

from coding_agent.session_files.folders import Session
from coding_agent.worker.linger import ClientCount, wait_unattended

pytestmark = pytest.mark.anyio

virtual_clock = pytest.mark.parametrize(
    "anyio_backend",
    [pytest.param(("trio", {"clock": MockClock(autojump_threshold=0)}), id="trio-virtual-clock")],
)
"""Run a test on trio with a virtual clock that jumps to the next deadline at once."""


async def _hold(count: ClientCount, entered: anyio.Event, released: anyio.Event) -> None:
    async def inner(_connection: object) -> None:
        entered.set()  # the handler counted this connection before calling us
        await released.wait()

    await count.handler(inner)(object())


@virtual_clock
async def test_a_connected_client_or_live_work_holds_the_worker_up() -> None:
    count = ClientCount()
    busy = {"now": False}
    returned = anyio.Event()
    entered = anyio.Event()
    released = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(_hold, count, entered, released)
        await entered.wait()  # a task started is not yet a task run: wait until it connected
        assert count.count == 1

        async def watch() -> None:
            await wait_unattended(count, lambda: busy["now"], 0.05, poll=0.01)
            returned.set()

        group.start_soon(watch)
        # A correct wait never returns while a client is connected, however long that is.
        await anyio.sleep(0.3)
        assert not returned.is_set()
        busy["now"] = True  # live work takes over from the client
        released.set()
        await anyio.sleep(0.3)
        assert count.count == 0
        assert not returned.is_set()
        busy["now"] = False
        with anyio.fail_after(TIMEOUT):
            await returned.wait()


@virtual_clock
async def test_a_connection_restarts_the_wait() -> None:
    count = ClientCount()
    returned = anyio.Event()
    entered = anyio.Event()
    released = anyio.Event()
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            await wait_unattended(count, lambda: False, 0.4, poll=1.0)
            returned.set()

        group.start_soon(watch)
        await anyio.sleep(0.3)  # most of the linger has passed
        group.start_soon(_hold, count, entered, released)
        await entered.wait()
        await anyio.sleep(0.3)  # past the first deadline: the connection reset it
        assert not returned.is_set()
        released.set()
        with anyio.fail_after(TIMEOUT):
            await returned.wait()


async def test_linger_zero_is_refused_by_the_waiter() -> None:
    with pytest.raises(ValueError, match="linger must be positive"):
        await wait_unattended(ClientCount(), lambda: False, 0)


async def test_the_worker_stops_after_its_last_client_leaves(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    lines: list[str] = []
    # a linger long enough for the client to attach first, even on a loaded machine
    async with worker_process(session, agent_env, "--linger", "2", on_stderr=lines.append) as w:
        async with connected(Client(), w.socket) as client:
            assert client.root is not None  # attached: the worker is serving this client
            assert w.process.returncode is None
        with anyio.fail_after(TIMEOUT):
            code = await w.process.wait()
    assert code == 0
    assert any("no client and nothing running for 2 s: stopping" in line for line in lines)
    # a clean stop: the session's lock is free, so the next worker serves it at once
    async with (
        worker_process(session, agent_env, "--linger", "0") as again,
        connected(Client(), again.socket) as client,
    ):
        assert client.root is not None
