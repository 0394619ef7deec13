"""Per-client bounds (issue 24 deliver 7): a client that stops reading is back-pressured, then
disconnected, and its memory returned; the provider and other clients carry on.

The client here writes requests over a real Unix socket and never reads a byte. Without bounds
the server used to read every request and queue every result (~0.5 KB each: 300k requests grew
a worker from 75 to 229 MB). Now it stops reading once ``max_pending_bytes`` of results wait, so
the client's own writes block, and a write that makes no progress for ``send_timeout`` seconds
ends the connection.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from chord.remote import RemoteServiceProvider, ServiceCall
from chord.services import define_service
from chord.transport import (
    FrameConnection,
    RequestFrame,
    connect_unix,
    encode_frame,
    open_unix_stream,
    serve_unix,
)
from chord.wire import open_remote_connection, serve_provider

Echo = define_service("test.wire.echo")
ATTEMPTS = 20_000  # ~11 MB of requests, ~10 MB of results if all were served


@pytest.mark.anyio
async def test_a_client_that_never_reads_is_back_pressured_then_disconnected(
    tmp_path: Path,
) -> None:
    served = {"calls": 0}

    async def echo(value: Any, ctx: Context) -> Any:
        served["calls"] += 1
        return value

    provider = RemoteServiceProvider([Echo])
    provider.provide(Echo, {"echo": echo})
    connections: list[weakref.ref[FrameConnection]] = []
    finished: list[anyio.Event] = []

    async def handle(conn: FrameConnection) -> None:
        connections.append(weakref.ref(conn))
        done = anyio.Event()
        finished.append(done)
        try:
            await serve_provider(conn, provider, max_pending_bytes=64 * 1024, send_timeout=3)
        finally:
            done.set()

    socket = tmp_path / "echo.sock"
    async with anyio.create_task_group() as group:
        await group.start(serve_unix, socket, handle)
        stream = await open_unix_stream(socket)
        call = ServiceCall(Echo.id, "echo", ("x" * 500,)).to_json()
        sent = 0
        with anyio.fail_after(60):
            try:
                for request_id in range(ATTEMPTS):
                    await stream.send(encode_frame(RequestFrame(id=request_id, call=call)))
                    sent += 1
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the server gave up on us
            await finished[0].wait()
        await stream.aclose()
        # back-pressured: the server stopped reading after about 64 KiB of waiting results
        # (plus what the socket buffers hold), so the client could never write them all
        assert sent < ATTEMPTS // 4
        assert served["calls"] < 1000  # 64 KiB / ~0.5 KB per result, plus what was in flight
        # disconnected and released: nothing of that client is left in the server
        gc.collect()
        assert connections[0]() is None
        # the provider still serves a well-behaved client
        async with open_remote_connection(await connect_unix(socket)) as client:
            assert await client.invoke(ServiceCall(Echo.id, "echo", (7,)), BACKGROUND) == 7
        group.cancel_scope.cancel()
