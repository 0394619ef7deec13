"""Benchmark: chord services between two processes over a Unix socket.

The parent starts a child process (this file with ``--serve``) that serves a provider over a Unix
socket with :func:`chord.wire.serve_provider`, plus a raw NDJSON echo server on a second socket.
The parent then measures, in the same run:

* **baseline**: raw NDJSON echo round trips per second (one JSON line out, the same line back,
  no chord at all) over the same kind of socket;
* **method round trips per second**: sequential ``RemoteConnection.invoke`` calls of a method
  that returns its argument (request frame, dispatch, result frame, error mapping). The echo
  and the chord calls run in alternating blocks (the load of a shared machine drifts); the
  ratio printed is the median of the blocks' ratios (target >= 0.7x, issue 15), and next to
  each rate the CPU per round trip of this process and of the child serving both sockets;
* **state updates per second delivered to a remote subscriber**, on the stream-append workload of
  the core issue: N changes (default 20,000), each appending 32 characters to
  ``turn.message.content[0].text``. The provider yields to the event loop after each change, as
  a real token stream would. The subscriber decodes every update with its subscription's state
  decoder and applies it to a replica; the clock stops when the replica reaches sequence N, and
  the replica's final text length is checked. We print wire bytes per update (bytes received on
  the socket divided by updates) and how many overflow resets the slow-peer rule produced. When
  the subscriber is slower than the producer, the per-client queue (100 frames) collapses into
  resets, each carrying the whole document; a second line runs the same workload with that
  queue unbounded, so every delta is delivered and the bytes per update are the delta cost.

Run: ``uv run python benchmarks/chord_wire.py [--quick]`` (``--quick`` divides N by 10).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
from anyio.streams.buffered import BufferedByteReceiveStream

from chord.context import BACKGROUND, Context
from chord.remote import (
    RemoteServiceProvider,
    ServiceCall,
    ServiceProviderUpdate,
    ServiceReplacedUpdate,
    ServiceResetUpdate,
    ServiceStateSnapshot,
    ServiceStateUpdate,
)
from chord.services import define_service
from chord.state import ReplicaState, replicated_state
from chord.transport import connect_unix, serve_unix
from chord.wire import RemoteConnection, provider_handler

Bench = define_service("bench.wire")
CHUNK = "x" * 31 + "\n"
SELF = str(Path(__file__).resolve())


def _document() -> dict[str, Any]:
    return {"turn": {"message": {"role": "assistant", "content": [{"type": "text", "text": ""}]}}}


# -- child ----------------------------------------------------------------------------------------


async def _echo_lines(stream: anyio.abc.SocketStream) -> None:
    buffered = BufferedByteReceiveStream(stream)
    async with stream:
        try:
            while True:
                line = await buffered.receive_until(b"\n", 1 << 20)
                await stream.send(line + b"\n")
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
            pass


async def serve(directory: str) -> None:
    provider = RemoteServiceProvider([Bench])
    state = replicated_state(_document())

    def echo(value: Any, ctx: Context) -> Any:
        return value

    async def stream(count: int, ctx: Context) -> int:
        def append(draft: Any) -> None:
            draft["turn"]["message"]["content"][0]["text"] += CHUNK

        for _ in range(count):
            state.change(ctx, append)
            await anyio.lowlevel.checkpoint()
        return state.sequence

    def cpu(ctx: Context) -> float:
        return time.process_time()

    def reset(ctx: Context) -> int:
        state.replace(ctx, _document())
        return state.sequence

    provider.provide(
        Bench, {"state": state, "echo": echo, "stream": stream, "reset": reset, "cpu": cpu}
    )
    async with anyio.create_task_group() as group:
        await group.start(serve_unix, f"{directory}/chord.sock", provider_handler(provider))
        unbounded = provider_handler(provider, queue_limit=1_000_000)
        await group.start(serve_unix, f"{directory}/unbounded.sock", unbounded)
        listener = await anyio.create_unix_listener(f"{directory}/echo.sock")
        group.start_soon(listener.serve, _echo_lines)
        print("READY", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)  # exits when the parent goes away
        group.cancel_scope.cancel()


# -- parent ---------------------------------------------------------------------------------------


class _Echo:
    """A raw NDJSON echo client: one JSON line out, the same line back."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.buffered = BufferedByteReceiveStream(stream)

    async def calls(self, first: int, count: int) -> None:
        for index in range(first, first + count):
            line = json.dumps({"type": "request", "id": index, "call": [index]}).encode()
            await self.stream.send(line + b"\n")
            await self.buffered.receive_until(b"\n", 1 << 20)


async def chord_calls(remote: RemoteConnection, first: int, count: int) -> None:
    for index in range(first, first + count):
        result = await remote.invoke(ServiceCall(Bench.id, "echo", (index,)), BACKGROUND)
        assert result == index


async def bench_round_trips(
    echo: _Echo, remote: RemoteConnection, calls: int, blocks: int = 10
) -> dict[str, float]:
    """Raw echo and chord calls in alternating blocks (the load of a shared machine drifts);
    per side: round trips/s over all its blocks, and the CPU µs per round trip of this process
    (client) and of the child serving both sockets (server)."""
    per_block = max(1, calls // blocks)
    wall = {"echo": 0.0, "chord": 0.0}
    client = {"echo": 0.0, "chord": 0.0}
    server = {"echo": 0.0, "chord": 0.0}
    ratios: list[float] = []
    for block in range(blocks):
        first = block * per_block
        timed: dict[str, float] = {}
        for side in ("echo", "chord") if block % 2 == 0 else ("chord", "echo"):
            child = await remote.invoke(ServiceCall(Bench.id, "cpu", ()), BACKGROUND)
            start, cpu = time.perf_counter(), time.process_time()
            if side == "echo":
                await echo.calls(first, per_block)
            else:
                await chord_calls(remote, first, per_block)
            timed[side] = time.perf_counter() - start
            wall[side] += timed[side]
            client[side] += time.process_time() - cpu
            after = await remote.invoke(ServiceCall(Bench.id, "cpu", ()), BACKGROUND)
            assert isinstance(child, float) and isinstance(after, float)
            server[side] += after - child
        ratios.append(timed["echo"] / timed["chord"])
    count = per_block * blocks
    out = {"ratio": statistics.median(ratios)}
    for side in ("echo", "chord"):
        out[f"{side}_rate"] = count / wall[side]
        out[f"{side}_client"] = client[side] / count * 1e6
        out[f"{side}_server"] = server[side] / count * 1e6
    return out


async def bench_updates(remote: RemoteConnection, count: int) -> tuple[float, float, int, int]:
    """Updates/s, wire bytes per update, updates delivered, resets."""
    await remote.invoke(ServiceCall(Bench.id, "reset", ()), BACKGROUND)
    replica = ReplicaState()
    done = anyio.Event()
    target = 0
    delivered = 0
    resets = 0

    def hydrate(member: Any) -> None:
        assert isinstance(member, ServiceStateSnapshot)
        replica.hydrate(member.sequence, member.ops, BACKGROUND)

    def listener(update: ServiceProviderUpdate, ctx: Context) -> None:
        nonlocal delivered, resets
        if isinstance(update, ServiceStateUpdate):
            replica.update(update.sequence, update.ops, ctx)
            delivered += 1
        elif isinstance(update, ServiceReplacedUpdate):  # a collapse of the peer's queue
            resets += 1
            hydrate(next(m for m in update.snapshot.members if m.name == "state"))
        elif isinstance(update, ServiceResetUpdate):
            resets += 1
            hydrate(next(m for m in update.snapshot.instances[0].members if m.name == "state"))
        if target and replica.sequence == target:
            done.set()

    subscription = await remote.subscribe(Bench.id, "singleton", listener, BACKGROUND)
    hydrate(next(m for m in subscription.snapshot.instances[0].members if m.name == "state"))
    base = replica.sequence or 0
    subscription.activate()
    received_before = remote.connection.bytes_received
    start = time.perf_counter()
    target = base + count
    final = await remote.invoke(ServiceCall(Bench.id, "stream", (count,)), BACKGROUND)
    assert final == target
    await done.wait()
    elapsed = time.perf_counter() - start
    wire = remote.connection.bytes_received - received_before
    text = replica.value["turn"]["message"]["content"][0]["text"]
    assert len(text) == count * len(CHUNK), "the replica did not converge"
    await subscription.close()
    return count / elapsed, wire / count, delivered, resets


async def run(quick: bool) -> None:
    updates = 2_000 if quick else 20_000
    calls = 2_000 if quick else 10_000
    with tempfile.TemporaryDirectory(prefix="chord-wire-") as directory:
        process = await anyio.open_process(
            [sys.executable, SELF, "--serve", directory],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
        )
        async with process:
            assert process.stdout is not None and process.stdin is not None
            ready = await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 64)
            assert ready == b"READY"
            echo_stream = await anyio.connect_unix(f"{directory}/echo.sock")
            conn = await connect_unix(f"{directory}/chord.sock")
            remote = RemoteConnection(conn)
            trips: dict[str, float] = {}
            measured = (0.0, 0.0, 0, 0)
            async with anyio.create_task_group() as group:
                group.start_soon(remote.run)
                echo = _Echo(echo_stream)
                await echo.calls(0, 200)  # warm up both
                await chord_calls(remote, 0, 200)
                trips = await bench_round_trips(echo, remote, calls)
                await echo_stream.aclose()
                measured = await bench_updates(remote, updates)
                await remote.aclose()
            rate, per_update, delivered, resets = measured
            conn = await connect_unix(f"{directory}/unbounded.sock")
            remote = RemoteConnection(conn)
            unbounded = (0.0, 0.0, 0, 0)
            async with anyio.create_task_group() as group:
                group.start_soon(remote.run)
                unbounded = await bench_updates(remote, updates)
                await remote.aclose()
            await process.stdin.aclose()
            await process.wait()
    print(
        f"baseline raw NDJSON echo round trips/s (unix socket) : {trips['echo_rate']:>10,.0f}"
        f"  (CPU per round trip: client {trips['echo_client']:.0f} µs, "
        f"server {trips['echo_server']:.0f} µs)"
    )
    print(
        f"chord method round trips/s (unix socket)            : {trips['chord_rate']:>10,.0f}"
        f"  (CPU per round trip: client {trips['chord_client']:.0f} µs, "
        f"server {trips['chord_server']:.0f} µs)"
    )
    print(
        f"chord method round trip vs raw echo (median of 10 alternating blocks): "
        f"{trips['ratio']:.2f}x [target >= 0.7x]"
    )
    print(
        f"chord stream-append updates/s to a remote subscriber : {rate:>10,.0f}"
        f"  ({updates:,} changes, {delivered:,} deltas + {resets} resets delivered, "
        f"{per_update:.1f} wire bytes/update)"
    )
    u_rate, u_per_update, u_delivered, u_resets = unbounded
    print(
        f"  same, per-client queue unbounded (no collapse)      : {u_rate:>10,.0f}"
        f"  ({u_delivered:,} deltas + {u_resets} resets delivered, "
        f"{u_per_update:.1f} wire bytes/update)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="chord wire benchmark (two processes)")
    parser.add_argument("--quick", action="store_true", help="divide the workload by 10")
    parser.add_argument("--serve", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        anyio.run(serve, args.serve)
    else:
        anyio.run(run, args.quick)


if __name__ == "__main__":
    main()
