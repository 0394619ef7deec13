"""serve_provider and RemoteConnection over an in-memory pipe: calls, cancellation, subscriptions,
slow peers and bad input (docs/wire.md; docs/design/chord.md#provider-queue, #endpoint, #provider-checks, #cancellation, #connection-close)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context, with_cancel
from chord.delta import apply_immutable
from chord.remote import (
    RemoteServiceProvider,
    ServiceCall,
    ServiceClosedUpdate,
    ServiceProviderUpdate,
    ServiceReplacedUpdate,
    ServiceResetUpdate,
    ServiceSpawnedUpdate,
    ServiceStateUpdate,
    create_service_state_decoder,
    parse_wire_service_provider_update,
    parse_wire_service_subscription_snapshot,
)
from chord.services import define_service
from chord.state import replicated_state
from chord.transport import (
    CancelFrame,
    ClosedFrame,
    FrameConnection,
    RequestFrame,
    ResultFrame,
    UpdateFrame,
    connect_tcp,
    memory_connection_pair,
    serve_tcp,
)
from chord.wire import (
    RemoteCallError,
    RemoteConnection,
    open_remote_connection,
    provider_handler,
    serve_provider,
)

Counter = define_service("test.wire.counter")


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The wire only uses anyio primitives: run it on both backends."""
    return request.param


Sessions = define_service("test.wire.sessions")


class World:
    """A provider with a counter singleton (method + state) and a keyed service."""

    def __init__(self) -> None:
        self.provider = RemoteServiceProvider([Counter, (Sessions, "keyed")])
        self.state: Any = replicated_state({"count": 0, "log": []})
        self.started = anyio.Event()
        self.cancelled = anyio.Event()
        self.errors: list[BaseException] = []
        self.provider.provide(
            Counter,
            {
                "state": self.state,
                "bump": self.bump,
                "wait": self.wait,
                "fail": self.fail,
                "echo": self.echo,
                "bad": self.bad,
                "deny": self.deny,
            },
        )

    def bump(self, amount: int, ctx: Context) -> int:
        self.state.change(ctx, lambda draft: draft.__setitem__("count", draft["count"] + amount))
        return self.state.value["count"]

    async def wait(self, ctx: Context) -> str:
        self.started.set()
        try:
            await anyio.sleep_forever()
        finally:
            if ctx.cancelled:
                self.cancelled.set()
        return "never"  # pragma: no cover

    def fail(self, ctx: Context) -> None:
        raise ValueError("secret detail /etc/passwd")

    def echo(self, value: Any, ctx: Context) -> Any:
        return value

    def bad(self, ctx: Context) -> Any:
        return float("nan")

    def deny(self, ctx: Context) -> None:
        raise RemoteCallError("not_authorized", "Only the session owner may do that")


@asynccontextmanager
async def served(world: World, **options: Any) -> AsyncIterator[FrameConnection]:
    """A raw client connection to ``world`` served in the background."""
    client, server = memory_connection_pair()
    async with anyio.create_task_group() as group:
        group.start_soon(
            lambda: serve_provider(server, world.provider, on_error=world.errors.append, **options)
        )
        try:
            yield client
        finally:
            await client.aclose()


@asynccontextmanager
async def remote(world: World, **options: Any) -> AsyncIterator[RemoteConnection]:
    async with served(world, **options) as client:
        connection = RemoteConnection(client)
        async with anyio.create_task_group() as group:
            group.start_soon(connection.run)
            yield connection
            await connection.aclose()


@pytest.mark.anyio
async def test_calls_round_trip_and_errors_keep_their_codes() -> None:
    world = World()
    async with remote(world) as connection:
        assert await connection.invoke(ServiceCall(Counter.id, "bump", (2,)), BACKGROUND) == 2
        assert await connection.invoke(
            ServiceCall(Counter.id, "echo", ({"a": [1]},)), BACKGROUND
        ) == {"a": [1]}
        # an unexpected exception is internal_error without its text
        with pytest.raises(RemoteCallError) as internal:
            await connection.invoke(ServiceCall(Counter.id, "fail"), BACKGROUND)
        assert internal.value.code == "internal_error"
        assert "secret" not in internal.value.message
        assert any(isinstance(error, ValueError) for error in world.errors)
        with pytest.raises(RemoteCallError, match="session owner") as denied:
            await connection.invoke(ServiceCall(Counter.id, "deny"), BACKGROUND)
        assert denied.value.code == "not_authorized"  # application codes pass through
        with pytest.raises(RemoteCallError, match="not strict JSON"):
            await connection.invoke(ServiceCall(Counter.id, "bad"), BACKGROUND)
        # the connection survived every call-level error
        assert await connection.invoke(ServiceCall(Counter.id, "bump", (1,)), BACKGROUND) == 3
        catalogue = await connection.catalogue(BACKGROUND)
        assert [(entry.service_id, entry.mode) for entry in catalogue] == [
            (Counter.id, "singleton"),
            (Sessions.id, "keyed"),
        ]


@pytest.mark.anyio
async def test_cancelling_the_callers_context_cancels_the_provider_method() -> None:
    world = World()
    async with remote(world) as connection:
        ctx, cancel = with_cancel(BACKGROUND)
        outcome: list[BaseException] = []

        async def call() -> None:
            try:
                await connection.invoke(ServiceCall(Counter.id, "wait"), ctx)
            except Exception as error:
                outcome.append(error)

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            await world.started.wait()
            cancel("user pressed escape")
        with anyio.fail_after(5):
            await world.cancelled.wait()
        assert "user pressed escape" in str(outcome[0])
        # only that request: the connection and the provider carry on
        assert await connection.invoke(ServiceCall(Counter.id, "bump", (1,)), BACKGROUND) == 1


@pytest.mark.anyio
async def test_disconnect_cancels_in_flight_calls_and_fails_pending_ones_at_once() -> None:
    world = World()
    async with served(world) as client:
        connection = RemoteConnection(client)
        failures: list[BaseException] = []

        async def call() -> None:
            try:
                await connection.invoke(ServiceCall(Counter.id, "wait"), BACKGROUND)
            except RemoteCallError as error:
                failures.append(error)

        async with anyio.create_task_group() as group:
            group.start_soon(connection.run)
            group.start_soon(call)
            await world.started.wait()
            await client.aclose()  # the client's side of the pipe goes away
        assert [getattr(error, "code", None) for error in failures] == ["unavailable"]
        with anyio.fail_after(5):
            await world.cancelled.wait()
        with pytest.raises(RemoteCallError, match="unavailable"):
            await connection.invoke(ServiceCall(Counter.id, "bump", (1,)), BACKGROUND)
    # provider-owned work is untouched: the state still works for everyone else
    async with remote(world) as other:
        assert await other.invoke(ServiceCall(Counter.id, "bump", (1,)), BACKGROUND) == 1


@pytest.mark.anyio
async def test_updates_follow_the_snapshot_in_order_through_the_codecs() -> None:
    world = World()
    async with remote(world) as connection:
        received: list[ServiceProviderUpdate] = []
        done = anyio.Event()

        def listener(update: ServiceProviderUpdate, ctx: Context) -> None:
            received.append(update)
            if len(received) == 20:
                done.set()

        # published between subscribe and activate: held, then delivered after the snapshot
        subscription = await connection.subscribe(Counter.id, "singleton", listener, BACKGROUND)
        state_member = next(
            m for m in subscription.snapshot.instances[0].members if m.name == "state"
        )
        assert state_member.to_json()["ops"] == [["r", {"count": 0, "log": []}]]
        for index in range(20):
            world.state.change(BACKGROUND, lambda draft, i=index: draft["log"].append(i))
        subscription.activate()
        with anyio.fail_after(5):
            await done.wait()
        assert [u.sequence for u in received if isinstance(u, ServiceStateUpdate)] == list(
            range(1, 21)
        )
        await subscription.close()


@pytest.mark.anyio
async def test_a_slow_peer_gets_one_replaced_instead_of_an_unbounded_queue() -> None:
    # docs/design/chord.md#provider-queue applied per client, in Chord 0.87.1's grammar: no `reset` on the wire
    world = World()
    client, server = memory_connection_pair(buffer=1)
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: serve_provider(server, world.provider, queue_limit=5))
        await client.send(
            RequestFrame(
                id=1,
                call=ServiceCall(
                    "$chord.service", "subscribe", ("s1", Counter.id, "singleton")
                ).to_json(),
            )
        )
        first = await client.receive()
        assert isinstance(first, ResultFrame) and first.ok
        for index in range(200):  # nobody reads: the server's queue overflows repeatedly
            world.state.change(BACKGROUND, lambda draft, i=index: draft["log"].append(i))
        frames: list[Any] = []
        with anyio.fail_after(5):
            while True:
                frame = await client.receive()
                frames.append(frame)
                assert isinstance(frame, UpdateFrame)
                if frame.update.get("sequence") == 200 or (
                    frame.update["type"] == "replaced" and _replaced_sequence(frame.update) == 200
                ):
                    break
        kinds = [frame.update["type"] for frame in frames]
        assert "replaced" in kinds and "reset" not in kinds
        assert len(frames) < 60  # bounded: far fewer than 200 frames reached the peer
        # after the last replacement, sequences are contiguous from its baseline
        last = max(i for i, kind in enumerate(kinds) if kind == "replaced")
        baseline = _replaced_sequence(frames[last].update)
        tail = [frame.update["sequence"] for frame in frames[last + 1 :]]
        assert tail == list(range(baseline + 1, baseline + 1 + len(tail)))
        await client.aclose()
        group.cancel_scope.cancel()


def _replaced_sequence(update: dict[str, Any]) -> int:
    members = update["snapshot"]["members"]
    return next(member["sequence"] for member in members if member["kind"] == "state")


@pytest.mark.anyio
async def test_a_slow_keyed_peer_gets_closed_and_spawned_only_for_what_it_missed() -> None:
    world = World()
    states = {key: replicated_state({"n": 0}) for key in ("a", "b", "c")}
    closers = {
        key: world.provider.spawn(Sessions, key, {"state": state, "ping": _pong})
        for key, state in states.items()
    }
    client, server = memory_connection_pair(buffer=1)
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: serve_provider(server, world.provider, queue_limit=3))
        call = ServiceCall("$chord.service", "subscribe", ("s1", Sessions.id, "keyed"))
        await client.send(RequestFrame(id=1, call=call.to_json()))
        first = await client.receive()
        assert isinstance(first, ResultFrame) and first.ok
        decoder = create_service_state_decoder()
        snapshot = decoder.decode_snapshot(parse_wire_service_subscription_snapshot(first.result))
        model = {i.instance.key: _instance_model(i) for i in snapshot.instances if i.instance}

        def bump_a(times: int) -> None:
            for _ in range(times):
                states["a"].change(BACKGROUND, lambda d: d.__setitem__("n", d["n"] + 1))

        bump_a(29)  # only `a` changes, far beyond the queue
        closers["c"]()
        world.provider.spawn(Sessions, "d", {"state": replicated_state({"n": 7}), "ping": _pong})
        world.provider.spawn(Sessions, "c", {"state": replicated_state({"n": 1}), "ping": _pong})
        bump_a(10)  # overflow again after the lifecycle changes
        updates: list[ServiceProviderUpdate] = []
        expected = {"a": ((1, 39), {"n": 39}), "b": ((1, 0), {"n": 0}), "c": ((2, 0), {"n": 1})}
        expected["d"] = ((1, 0), {"n": 7})
        with anyio.fail_after(5):
            while model != expected:
                frame = await client.receive()
                assert isinstance(frame, UpdateFrame)
                assert frame.update["type"] != "reset"
                update = decoder.decode_update(parse_wire_service_provider_update(frame.update))
                updates.append(update)
                _apply_model(model, update)
        assert len(updates) < 25  # collapsed: far fewer than the 43 changes
        # `b` never fell behind, so its observers were never disturbed
        assert not any(
            isinstance(u, (ServiceClosedUpdate, ServiceSpawnedUpdate)) and _address(u)[0] == "b"
            for u in updates
        )
        await client.aclose()
        group.cancel_scope.cancel()


def _pong(ctx: Context) -> str:
    return "pong"


def _instance_model(instance: Any) -> tuple[tuple[int, int], Any]:
    state = next(m for m in instance.members if m.name == "state")
    return (instance.instance.generation, state.sequence), state.ops[0][1]


def _address(update: Any) -> tuple[str, int]:
    address = (
        update.instance.instance if isinstance(update, ServiceSpawnedUpdate) else update.instance
    )
    return address.key, address.generation


def _apply_model(model: dict[str, Any], update: ServiceProviderUpdate) -> None:
    if isinstance(update, ServiceSpawnedUpdate):
        assert update.instance.instance is not None
        model[update.instance.instance.key] = _instance_model(update.instance)
    elif isinstance(update, ServiceClosedUpdate):
        held = model.get(update.instance.key)
        if held is not None and held[0][0] == update.instance.generation:
            del model[update.instance.key]
    elif isinstance(update, ServiceStateUpdate):
        assert update.instance is not None
        (generation, sequence), value = model[update.instance.key]
        assert generation == update.instance.generation and update.sequence == sequence + 1
        model[update.instance.key] = (
            (generation, update.sequence),
            apply_immutable(value, list(update.ops)),
        )
    else:
        raise AssertionError(f"a keyed peer got {update!r}")


RAW_BAD_INPUT = [
    (b"{not json}\n", "invalid_json"),
    (
        b'{"type": "request", "id": 1, "call": {"serviceId": "a", "member": "b", "args": [NaN]}}\n',
        "invalid_json",
    ),
    (b'{"type": "cancel", "id": 1, "id": 2}\n', "invalid_json"),
    (b'{"type": "launch", "id": 1}\n', "invalid_frame"),
    (b'{"type": "request", "id": 1}\n', "invalid_frame"),
    (b"[1, 2]\n", "invalid_frame"),
    (
        b'{"type": "request", "id": 3, "call": {"serviceId": "", "member": "b", "args": []}}\n',
        "invalid_request",
    ),
    (b'{"type": "result", "id": 3, "ok": true}\n', "protocol_error"),
    (b"x" * 300 + b"\n", "frame_too_large"),
    (b'{"type": "closed", "reason": "bye"}\n{"type": "cancel", "id": 1}\n', "frame_after_close"),
    (
        b'{"type": "request", "id": 4, "call": {"serviceId": "test.nope", "member": "x", "args": []}}\n',
        "service_not_allowed",
    ),
    (
        b'{"type": "request", "id": 5, "call": {"serviceId": "test.wire.counter", "member": "nope", "args": []}}\n',
        "service_member_not_found",
    ),
    (
        b'{"type": "request", "id": 6, "call": {"serviceId": "test.wire.counter", "member": "bump", "args": [1, 2]}}\n',
        "service_invalid_value",
    ),
]

CONTRACT_CODES = {"service_not_allowed", "service_member_not_found", "service_invalid_value"}


@pytest.mark.anyio
@pytest.mark.parametrize(("data", "code"), RAW_BAD_INPUT)
async def test_bad_input_gets_a_clear_error_and_only_that_connection_closes(
    data: bytes, code: str
) -> None:
    world = World()
    bad_client, bad_server = memory_connection_pair(max_frame_size=256)
    async with remote(world) as good:
        subscription_updates: list[ServiceProviderUpdate] = []
        subscription = await good.subscribe(
            Counter.id,
            "singleton",
            lambda update, ctx: subscription_updates.append(update),
            BACKGROUND,
        )
        subscription.activate()
        frames: list[Any] = []
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: serve_provider(bad_server, world.provider))
            await bad_client.stream.send(data)
            with anyio.fail_after(5):
                try:
                    while True:
                        frames.append(await bad_client.receive())
                except anyio.EndOfStream:
                    pass
        closed = [frame for frame in frames if isinstance(frame, ClosedFrame)]
        assert len(closed) == 1 and closed[0].reason.startswith(code), frames
        if code == "invalid_request":
            assert isinstance(frames[0], ResultFrame) and frames[0].error is not None
            assert frames[0].error.code == "invalid_request"
            assert "serviceId" in frames[0].error.message
        if code in CONTRACT_CODES:  # the peer is told why before its connection closes
            assert isinstance(frames[0], ResultFrame) and frames[0].error is not None
            assert frames[0].error.code == code
        # the provider and the other peer are unaffected
        assert await good.invoke(ServiceCall(Counter.id, "bump", (1,)), BACKGROUND) == 1
        assert [u.sequence for u in subscription_updates if isinstance(u, ServiceStateUpdate)] == [
            1
        ]
    await bad_client.aclose()


@pytest.mark.anyio
async def test_a_duplicate_in_flight_request_id_closes_the_connection() -> None:
    world = World()
    async with served(world) as client:
        call = ServiceCall(Counter.id, "wait").to_json()
        await client.send(RequestFrame(id=7, call=call))
        await world.started.wait()
        await client.send(RequestFrame(id=7, call=call))
        frames: list[Any] = []
        with anyio.fail_after(5):
            try:
                while True:
                    frames.append(await client.receive())
            except anyio.EndOfStream:
                pass
        assert isinstance(frames[-1], ClosedFrame)
        assert "request id 7 is already in flight" in frames[-1].reason
        with anyio.fail_after(5):
            await world.cancelled.wait()


@pytest.mark.anyio
async def test_closing_one_connection_leaves_the_others_subscribed() -> None:
    world = World()
    async with remote(world) as first, remote(world) as second:
        seen: dict[str, list[int]] = {"first": [], "second": []}
        both = anyio.Event()

        def listener_for(name: str) -> Any:
            def listener(update: ServiceProviderUpdate, ctx: Context) -> None:
                if isinstance(update, ServiceStateUpdate):
                    seen[name].append(update.sequence)
                    if seen["second"] == [1, 2]:
                        both.set()

            return listener

        for name, connection in (("first", first), ("second", second)):
            subscription = await connection.subscribe(
                Counter.id, "singleton", listener_for(name), BACKGROUND
            )
            subscription.activate()
        assert await first.invoke(ServiceCall(Counter.id, "bump", (1,)), BACKGROUND) == 1
        await first.aclose()
        with pytest.raises(RemoteCallError):
            await first.invoke(ServiceCall(Counter.id, "bump", (1,)), BACKGROUND)
        assert await second.invoke(ServiceCall(Counter.id, "bump", (1,)), BACKGROUND) == 2
        with anyio.fail_after(5):
            await both.wait()
        assert seen["second"] == [1, 2]


@pytest.mark.anyio
async def test_an_overflow_reaches_a_real_client_as_a_replacement_it_converges_on() -> None:
    world = World()
    async with remote(world, queue_limit=2) as connection:
        received: list[ServiceProviderUpdate] = []
        caught_up = anyio.Event()

        def listener(update: ServiceProviderUpdate, ctx: Context) -> None:
            received.append(update)
            if _last_sequence(received) == 50:
                caught_up.set()

        subscription = await connection.subscribe(Counter.id, "singleton", listener, BACKGROUND)
        subscription.activate()
        for index in range(50):
            world.state.change(BACKGROUND, lambda draft, i=index: draft["log"].append(i))
        with anyio.fail_after(5):
            await caught_up.wait()
        assert any(isinstance(update, ServiceReplacedUpdate) for update in received)
        assert not any(isinstance(update, ServiceResetUpdate) for update in received)
        assert len(received) < 50


def _last_sequence(updates: list[ServiceProviderUpdate]) -> int:
    last = updates[-1]
    if isinstance(last, ServiceStateUpdate):
        return last.sequence
    if isinstance(last, ServiceReplacedUpdate):
        members = last.snapshot.members
        return next(getattr(m, "sequence", -1) for m in members if m.name == "state")
    return -1


@pytest.mark.anyio
async def test_a_provider_served_over_tcp_loopback() -> None:
    world = World()
    async with anyio.create_task_group() as group:
        port = await group.start(serve_tcp, provider_handler(world.provider))
        async with open_remote_connection(await connect_tcp("127.0.0.1", port)) as connection:
            assert await connection.invoke(ServiceCall(Counter.id, "bump", (5,)), BACKGROUND) == 5
        group.cancel_scope.cancel()


@pytest.mark.anyio
async def test_requests_beyond_the_concurrency_limit_are_refused_and_a_disconnect_still_cancels() -> (
    None
):
    world = World()
    async with served(world, max_concurrent_requests=1) as client:
        call = ServiceCall(Counter.id, "wait").to_json()
        await client.send(RequestFrame(id=1, call=call))
        await world.started.wait()
        await client.send(RequestFrame(id=2, call=ServiceCall(Counter.id, "bump", (1,)).to_json()))
        refused = await client.receive()
        assert isinstance(refused, ResultFrame) and refused.error is not None
        assert (refused.id, refused.error.code) == (2, "too_many_requests")
        await client.aclose()
        with anyio.fail_after(5):
            await world.cancelled.wait()  # the server kept reading and saw the disconnect


@pytest.mark.anyio
async def test_a_subscribe_abandoned_by_its_caller_is_cancelled_then_unsubscribed() -> None:
    # the test plays the server with raw frames to see exactly what the client sends
    client, server = memory_connection_pair()
    connection = RemoteConnection(client)
    async with anyio.create_task_group() as group:
        group.start_soon(connection.run)
        ctx, cancel = with_cancel(BACKGROUND)
        outcome: list[BaseException] = []

        async def subscribe() -> None:
            try:
                await connection.subscribe(Counter.id, "singleton", lambda u, c: None, ctx)
            except Exception as error:
                outcome.append(error)

        group.start_soon(subscribe)
        request = await server.receive()
        assert isinstance(request, RequestFrame)
        assert request.call["member"] == "subscribe"
        subscription_id = request.call["args"][0]
        cancel("gave up")
        assert await server.receive() == CancelFrame(id=request.id)
        unsubscribe = await server.receive()
        assert isinstance(unsubscribe, RequestFrame)
        assert unsubscribe.call == {
            "serviceId": "$chord.service",
            "member": "unsubscribe",
            "args": [subscription_id],
        }
        assert "gave up" in str(outcome[0])
        await connection.aclose()
        await server.aclose()


@pytest.mark.anyio
async def test_a_client_gone_before_its_answer_ends_only_its_own_peer(tmp_path: Any) -> None:
    """A request read after its client closed the socket: the answer, written at once, meets a
    broken pipe. The peer ends quietly; the server and its other clients carry on."""
    import socket

    from chord.transport import connect_unix, encode_frame, serve_unix

    world = World()
    path = str(tmp_path / "gone.sock")
    ended = anyio.Event()
    failures: list[BaseException] = []

    async def handle(conn: FrameConnection) -> None:
        try:
            await serve_provider(conn, world.provider)
        except BaseException as error:  # what used to escape and end the whole server
            failures.append(error)
            raise
        finally:
            ended.set()

    async with anyio.create_task_group() as group:
        await group.start(serve_unix, path, handle)
        raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        raw.connect(path)
        call = {"serviceId": Counter.id, "member": "echo", "args": ["x"]}
        raw.sendall(encode_frame(RequestFrame(id=1, call=call)))
        raw.close()  # before the server has read a byte: its answer meets a closed socket
        await ended.wait()
        assert failures == []
        async with await connect_unix(path) as conn, open_remote_connection(conn) as remote:
            assert (
                await remote.invoke(ServiceCall(Counter.id, "echo", ("still",)), BACKGROUND)
                == "still"
            )
        group.cancel_scope.cancel()
