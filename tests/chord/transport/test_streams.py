"""Frame connections over real byte streams: Unix sockets, TCP, a child's stdio, memory pairs."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from chord.transport import (
    CancelFrame,
    ClosedFrame,
    FrameConnection,
    RequestFrame,
    ResultFrame,
    connect_tcp,
    connect_unix,
    encode_frame,
    memory_connection_pair,
    open_process_connection,
    serve_tcp,
    serve_unix,
)

pytestmark = pytest.mark.anyio


async def echo(conn: FrameConnection) -> None:
    """Answer every request with its call as the result, until the peer leaves."""
    async for frame in conn:
        if isinstance(frame, RequestFrame):
            await conn.send(ResultFrame(id=frame.id, ok=True, result=frame.call))
        elif isinstance(frame, ClosedFrame):
            return


async def test_memory_pair_carries_frames_both_ways() -> None:
    client, server = memory_connection_pair()
    async with server, anyio.create_task_group() as tg:
        tg.start_soon(echo, server)
        await client.send(RequestFrame(id=1, call={"member": "x"}))
        assert await client.receive() == ResultFrame(id=1, ok=True, result={"member": "x"})
        await client.close("done")
    assert client.bytes_sent > 0 and client.bytes_received > 0


async def test_unix_socket_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "chord.sock"
    async with anyio.create_task_group() as tg:
        await tg.start(serve_unix, path, echo)
        async with await connect_unix(path) as conn:
            for i in range(20):
                await conn.send(RequestFrame(id=i, call={"i": i}))
            results = [await conn.receive() for _ in range(20)]
            assert [r.id for r in results] == list(range(20))  # type: ignore[union-attr]
        tg.cancel_scope.cancel()
    assert not path.exists()


async def test_unix_server_refuses_to_replace_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "not-a-socket"
    path.write_text("precious")
    with pytest.raises(FileExistsError, match="not a socket"):
        await serve_unix(path, echo)
    assert path.read_text() == "precious"


async def test_tcp_loopback_round_trip() -> None:
    async with anyio.create_task_group() as tg:
        port = await tg.start(serve_tcp, echo)
        async with await connect_tcp("127.0.0.1", port) as conn:
            await conn.send(RequestFrame(id=9, call={"hello": "tcp"}))
            assert await conn.receive() == ResultFrame(id=9, ok=True, result={"hello": "tcp"})
        tg.cancel_scope.cancel()


async def test_concurrent_senders_never_interleave_frames() -> None:
    client, server = memory_connection_pair(buffer=1)
    big = "x" * 50_000
    received: list[int] = []
    async with client, server, anyio.create_task_group() as tg:

        async def reader() -> None:
            for _ in range(40):
                frame = await server.receive()
                assert isinstance(frame, RequestFrame) and frame.call["pad"] == big
                received.append(frame.id)

        tg.start_soon(reader)
        async with anyio.create_task_group() as senders:
            for i in range(40):
                senders.start_soon(client.send, RequestFrame(id=i, call={"pad": big}))
    assert sorted(received) == list(range(40))


async def test_peer_disconnect_is_end_of_stream() -> None:
    client, server = memory_connection_pair()
    await client.aclose()
    async with server:
        with pytest.raises(anyio.EndOfStream):
            await server.receive()


async def test_an_oversized_frame_travels_in_parts_and_arrives_whole() -> None:
    client, server = memory_connection_pair(max_frame_size=100)
    async with client, server:
        await _oversized(client, server)


async def _oversized(client: FrameConnection, server: FrameConnection) -> None:
    big = RequestFrame(id=1, call={"pad": 'y"\\é😀' * 60})
    async with anyio.create_task_group() as group:
        group.start_soon(client.send, big)
        assert await server.receive() == big
    await client.send(CancelFrame(id=1))
    assert await server.receive() == CancelFrame(id=1)


CHILD = textwrap.dedent(
    """
    import anyio
    from chord.transport import ResultFrame, RequestFrame, ClosedFrame, stdio_connection

    async def main():
        conn = stdio_connection()
        async for frame in conn:
            if isinstance(frame, RequestFrame):
                await conn.send(ResultFrame(id=frame.id, ok=True, result={"pong": frame.call}))
            elif isinstance(frame, ClosedFrame):
                break

    anyio.run(main)
    """
)


async def test_subprocess_stdio_round_trip(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    process, conn = await open_process_connection([sys.executable, str(script)])
    async with process:
        await conn.send(RequestFrame(id=5, call={"ping": 1}))
        assert await conn.receive() == ResultFrame(id=5, ok=True, result={"pong": {"ping": 1}})
        await conn.close("bye")
        assert await process.wait() == 0


async def test_send_nowait_writes_whole_frames_and_a_partial_one_holds_other_senders(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chord.sock"
    received: list[object] = []
    done = anyio.Event()

    async def collect(conn: FrameConnection) -> None:
        await first_sent.wait()  # let the client fill the socket buffer before reading
        async for frame in conn:
            received.append(frame)
            if len(received) == 3:
                done.set()

    first_sent = anyio.Event()
    async with anyio.create_task_group() as tg:
        await tg.start(serve_unix, path, collect)
        async with await connect_unix(path) as conn:
            small = encode_frame(CancelFrame(id=1))
            assert conn.send_nowait(small) == "sent"
            assert conn.bytes_sent == len(small)
            big = encode_frame(ResultFrame(id=2, ok=True, result="x" * 4_000_000))
            assert conn.send_nowait(big) == "partial"  # more than a socket buffer holds
            assert conn.flush_needed
            assert conn.send_nowait(small) == "busy"  # nothing may go between the halves
            behind = anyio.Event()

            async def send_behind() -> None:
                await conn.send(CancelFrame(id=3))
                behind.set()

            tg.start_soon(send_behind)
            first_sent.set()
            await conn.flush()
            assert not conn.flush_needed
            await behind.wait()
            await done.wait()
        tg.cancel_scope.cancel()
    assert [type(frame).__name__ for frame in received] == [
        "CancelFrame",
        "ResultFrame",
        "CancelFrame",
    ]
    assert received[1] == ResultFrame(id=2, ok=True, result="x" * 4_000_000)
    assert received[2] == CancelFrame(id=3)


async def test_a_partial_send_nowait_is_flushed_by_another_task(tmp_path: Path) -> None:
    """The wire server pushes a frame from the task that produced it and its writer task
    flushes the rest: the send lock must not belong to the first task (a session worker died
    of ``RuntimeError: The current task is not holding this lock`` on a 2 MB view)."""
    path = tmp_path / "chord.sock"
    received: list[object] = []
    done = anyio.Event()
    reading = anyio.Event()

    async def collect(conn: FrameConnection) -> None:
        await reading.wait()
        async for frame in conn:
            received.append(frame)
            if len(received) == 2:
                done.set()

    async with anyio.create_task_group() as tg:
        await tg.start(serve_unix, path, collect)
        async with await connect_unix(path) as conn:
            big = encode_frame(ResultFrame(id=2, ok=True, result="y" * 4_000_000))
            pushed = anyio.Event()

            async def push() -> None:  # another task: it ends holding nothing it must give back
                assert conn.send_nowait(big) == "partial"
                pushed.set()

            tg.start_soon(push)
            await pushed.wait()
            reading.set()
            await conn.flush()  # in this task
            await conn.send(CancelFrame(id=3))  # the lock is free again
            await done.wait()
        tg.cancel_scope.cancel()
    assert received == [ResultFrame(id=2, ok=True, result="y" * 4_000_000), CancelFrame(id=3)]


async def test_send_nowait_is_busy_on_a_stream_that_cannot_write_without_waiting() -> None:
    client, server = memory_connection_pair()
    async with client, server:
        assert client.send_nowait(encode_frame(CancelFrame(id=1))) == "busy"
        assert client.bytes_sent == 0
