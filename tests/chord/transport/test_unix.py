"""chord's own Unix socket streams: readiness-based, safe under cancelled reads."""

from __future__ import annotations

import socket
from functools import partial
from pathlib import Path

import anyio
import pytest

from chord.transport.unix import UnixSocketStream, open_unix_stream, serve_unix_streams

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param


async def test_round_trip_and_end_of_stream(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sock")

    async def echo(stream: UnixSocketStream) -> None:
        async with stream:
            try:
                while True:
                    await stream.send(await stream.receive())
            except anyio.EndOfStream:
                pass

    async with anyio.create_task_group() as group:
        await group.start(partial(serve_unix_streams, path, echo))
        async with await open_unix_stream(path) as client:
            await client.send(b"x" * 300_000)  # larger than the socket buffer
            received = b""
            while len(received) < 300_000:
                received += await client.receive()
            assert received == b"x" * 300_000
            await client.send_eof()
            with pytest.raises(anyio.EndOfStream):
                await client.receive()
        group.cancel_scope.cancel()


async def test_reads_cancelled_while_data_arrives_never_break_the_loop(tmp_path: Path) -> None:
    """The race that breaks anyio's asyncio Unix streams: a receive cancelled just as data
    arrives. The anyio test runner fails the test on any error the event loop reports."""
    path = str(tmp_path / "race.sock")
    done = anyio.Event()

    async def flood(stream: UnixSocketStream) -> None:
        async with stream:
            while not done.is_set():
                try:
                    await stream.send(b"y" * 512)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return

    async with anyio.create_task_group() as group:
        await group.start(partial(serve_unix_streams, path, flood))
        client = await open_unix_stream(path)
        got = 0
        for i in range(500):
            with anyio.move_on_after(0.0002 * (i % 3)):
                got += len(await client.receive())
            await anyio.lowlevel.checkpoint()
        got += len(await client.receive())  # the stream still works after all that
        done.set()
        await client.aclose()
        group.cancel_scope.cancel()
    assert got > 0


async def test_close_wakes_a_waiting_reader(tmp_path: Path) -> None:
    path = str(tmp_path / "close.sock")
    accepted = anyio.Event()

    async def hold(stream: UnixSocketStream) -> None:
        async with stream:
            accepted.set()
            await anyio.sleep_forever()

    async with anyio.create_task_group() as group:
        await group.start(partial(serve_unix_streams, path, hold))
        client = await open_unix_stream(path)
        await accepted.wait()
        outcome: list[type[BaseException]] = []

        async def reader() -> None:
            try:
                await client.receive()
            except (anyio.ClosedResourceError, anyio.EndOfStream) as exc:
                outcome.append(type(exc))

        async with anyio.create_task_group() as readers:
            readers.start_soon(reader)
            await anyio.wait_all_tasks_blocked()
            await client.aclose()
        assert outcome == [anyio.ClosedResourceError]
        group.cancel_scope.cancel()


async def test_connecting_to_a_missing_socket_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        await open_unix_stream(tmp_path / "nothing.sock")


async def test_a_slow_reader_gets_every_byte_in_order_in_pieces_of_at_most_max_bytes(
    tmp_path: Path,
) -> None:
    """More than the reader buffers (it stops reading the socket until a receive), read in
    small pieces: nothing is lost, reordered or returned beyond ``max_bytes``."""
    path = str(tmp_path / "slow.sock")
    payload = bytes(range(256)) * 4096  # 1 MiB

    async def send_all(stream: UnixSocketStream) -> None:
        async with stream:
            await stream.send(payload)
            await stream.send_eof()
            await anyio.sleep_forever()

    async with anyio.create_task_group() as group:
        await group.start(partial(serve_unix_streams, path, send_all))
        async with await open_unix_stream(path) as client:
            received = bytearray()
            while True:
                try:
                    piece = await client.receive(1000)
                except anyio.EndOfStream:
                    break
                assert len(piece) <= 1000
                received += piece
            assert received == payload
        group.cancel_scope.cancel()


async def test_connecting_to_a_full_backlog_waits_for_the_listener(tmp_path: Path) -> None:
    """A Unix listener's full backlog makes a non-blocking connect fail with EAGAIN, leaving the
    socket unconnected: the client connects again until it is let in (it used to read the
    unconnected socket's peer as uid -1 and refuse the server)."""
    path = str(tmp_path / "s.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    listener.setblocking(False)
    clients = 6
    connected: list[UnixSocketStream] = []
    accepted: list[socket.socket] = []

    async def client() -> None:
        connected.append(await open_unix_stream(path))

    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                for _ in range(clients):
                    group.start_soon(client)
                while len(accepted) < clients:
                    await anyio.wait_readable(listener)
                    try:
                        accepted.append(listener.accept()[0])
                    except BlockingIOError:
                        continue
        assert len(connected) == clients
    finally:
        for stream in connected:
            await stream.aclose()
        for conn in accepted:
            conn.close()
        listener.close()
