"""WireServiceSource.retry_now: a source waiting out a backoff delay connects at once when told
the provider is back (a supervisor read a restarted worker's ready line)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from chord.backoff import Backoff
from chord.facets import create_facet_host
from chord.transport import FrameConnection, connect_unix, serve_unix
from chord.wire import connect_service_source, provider_handler

_FOREVER = Backoff(initial=3600.0, maximum=3600.0)
"""A backoff whose waits outlast any test: only ``retry_now`` can end one."""


@pytest.mark.anyio
async def test_retry_now_ends_the_backoff_wait_and_the_backoff_starts_over(
    tmp_path: Path,
) -> None:
    socket = tmp_path / "provider.sock"
    attempts: list[bool] = []
    tried = anyio.Event()

    async def connect() -> FrameConnection:
        try:
            connection = await connect_unix(socket)
        except OSError:
            attempts.append(False)
            tried.set()
            raise
        attempts.append(True)
        return connection

    async with anyio.create_task_group() as group, create_facet_host([]) as host:
        source = connect_service_source(
            connect, task_group=group, on_error=lambda _error: None, retry=_FOREVER
        )
        source.start()
        await tried.wait()  # the first attempt failed: the source now waits an hour
        assert attempts == [False] and not source.connected
        await group.start(serve_unix, socket, provider_handler(host.services))
        source.retry_now()
        with anyio.fail_after(30):
            await source.wait_connected()
        assert attempts == [False, True]
        source.retry_now()  # while connected: nothing happens
        assert source.connected and source.connections == 1
        await source.aclose()
        group.cancel_scope.cancel()
