"""Lazy state members across the wire (docs/wire.md#lazy-state): a keyed instance's lazy state is
sent to a client only while that client subscribes to it.

Each test serves a real provider with :func:`serve_provider` over an in-memory pipe and reaches
it through a real :class:`RemoteConnection` and binding; a tap on the client's side of the pipe
counts the ``update`` frames that carry each member.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from chord.remote import RemoteServiceProvider, create_remote_service_binding
from chord.services import define_service
from chord.state import Delivery, replicated_state
from chord.transport import FrameConnection, UpdateFrame, memory_connection_pair
from chord.wire import RemoteConnection, serve_provider

# `view` is lazy, `info` is not: as pi.conversation's view and identity.
Chats = define_service("test.lazy.chats", lazy=("view",))
EagerChats = define_service("test.lazy.eager-chats")

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Tap:
    """Counts, per (instance key, member), the state update frames the client received."""

    def __init__(self, conn: FrameConnection) -> None:
        self._conn = conn
        self.updates: dict[tuple[str, str], int] = {}
        self.lifecycle: list[dict[str, Any]] = []  # the other updates (spawned, closed, ...)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    async def receive(self) -> Any:
        frame = await self._conn.receive()
        if isinstance(frame, UpdateFrame):
            update = json.loads(json.dumps(frame.update))
            if update.get("type") == "state":
                key = (update["instance"]["key"], update["member"])
                self.updates[key] = self.updates.get(key, 0) + 1
            else:
                self.lifecycle.append(update)
        return frame


class World:
    def __init__(self) -> None:
        self.provider = RemoteServiceProvider([(Chats, "keyed"), (EagerChats, "keyed")])
        self.views: dict[str, Any] = {}
        self.infos: dict[str, Any] = {}

    def spawn(self, key: str, service: Any = Chats) -> None:
        view = self.views[key] = replicated_state({"n": 0})
        info = self.infos[key] = replicated_state({"id": key})
        self.provider.spawn(service, key, {"view": view, "info": info, "ping": _ping})

    def bump(self, key: str, times: int = 1) -> None:
        for _ in range(times):
            self.views[key].change(BACKGROUND, lambda d: d.__setitem__("n", d["n"] + 1))

    def rename(self, key: str, times: int = 1) -> None:
        """Change the eager ``info`` member of instance ``key``."""
        for i in range(times):
            self.infos[key].change(BACKGROUND, lambda d, i=i: d.__setitem__("name", f"n{i}"))


def _ping(ctx: Context) -> str:
    return "pong"


@asynccontextmanager
async def connected(
    world: World, queue_limit: int = 256
) -> AsyncIterator[tuple[Any, Tap, anyio.abc.TaskGroup]]:
    client, server = memory_connection_pair()
    tap = Tap(client)
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: serve_provider(server, world.provider, queue_limit=queue_limit))
        remote = RemoteConnection(tap)  # type: ignore[arg-type]
        group.start_soon(remote.run)
        binding = create_remote_service_binding(
            services=[Chats, EagerChats], transport=remote, task_group=group
        )
        try:
            yield binding, tap, group
        finally:
            await binding.dispose(BACKGROUND)
            await remote.aclose()
            group.cancel_scope.cancel()


async def _roundtrip(instance: Any) -> None:
    """A call answered after every update the provider published before it."""
    assert await instance.ping(BACKGROUND) == "pong"


class Instances:
    """The observed instances by id; :meth:`get` waits for one to appear."""

    def __init__(self) -> None:
        self._live: dict[str, Any] = {}
        self._events: dict[str, anyio.Event] = {}

    async def observe(self, instance: Any, ctx: Context) -> None:
        key = instance.info.value["id"]
        self._live[key] = instance
        self._events.setdefault(key, anyio.Event()).set()
        await ctx.wait_cancelled()

    async def get(self, key: str) -> Any:
        with anyio.fail_after(5):
            await self._events.setdefault(key, anyio.Event()).wait()
        return self._live[key]


async def _observed(binding: Any, service: Any = Chats) -> tuple[Instances, Any]:
    """Observe ``service`` through ``binding``: the instances, and instance ``"1"`` once seen."""
    instances = Instances()
    binding.observe(service, instances.observe)
    return instances, await instances.get("1")


async def _until(state: Any, predicate: Any) -> list[tuple[str, Any]]:
    """Subscribe to ``state`` and wait until ``predicate(value)``; returns the deliveries."""
    seen: list[tuple[str, Any]] = []
    done = anyio.Event()

    def listener(value: Any, ctx: Context, delivery: Delivery) -> None:
        seen.append((delivery.kind, value))
        if predicate(value):
            done.set()

    stop = state.subscribe(listener)
    with anyio.fail_after(5):
        await done.wait()
    stop()
    return seen


async def test_a_lazy_view_is_not_sent_to_a_client_that_does_not_follow_it() -> None:
    world = World()
    world.spawn("1")
    async with connected(world) as (binding, tap, _):
        instances, first = await _observed(binding)
        world.spawn("2")  # spawned after the subscription: muted from the start too
        second = await instances.get("2")
        world.bump("1", 5)
        world.bump("2", 5)
        await _roundtrip(first)
        assert tap.updates.get(("1", "view"), 0) == 0
        assert tap.updates.get(("2", "view"), 0) == 0
        assert first.view.value is None  # not followed: no value
        assert second.info.value == {"id": "2"}  # eager members as ever


async def test_following_a_lazy_view_later_hydrates_it_and_streams_its_updates() -> None:
    world = World()
    world.spawn("1")
    async with connected(world) as (binding, tap, _):
        _, chat = await _observed(binding)
        world.bump("1", 3)
        seen = await _until(chat.view, lambda v: v is not None and v["n"] == 3)
        assert seen == [("hydrate", {"n": 3})]  # the current value, not the stale snapshot
        deliveries: list[tuple[str, Any]] = []
        stop = chat.view.subscribe(lambda v, c, d: deliveries.append((d.kind, v)))
        await _until(chat.view, lambda v: v is not None)  # followed again: hydrated
        world.bump("1", 2)
        await _until(chat.view, lambda v: v["n"] == 5)
        assert deliveries == [("hydrate", {"n": 3}), ("update", {"n": 4}), ("update", {"n": 5})]
        assert tap.updates[("1", "view")] == 2  # the two updates; the rebaselines are results
        stop()


async def test_the_last_subscriber_leaving_stops_the_updates() -> None:
    world = World()
    world.spawn("1")
    async with connected(world) as (binding, tap, _):
        _, chat = await _observed(binding)
        await _until(chat.view, lambda v: v is not None)  # follows, then leaves
        await _roundtrip(chat)  # the unfollow goes out meanwhile (a task of the binding's)...
        await _roundtrip(chat)  # ...so the provider read it before this call
        world.bump("1", 4)
        await _roundtrip(chat)
        assert tap.updates.get(("1", "view"), 0) == 0
        assert chat.view.value is None
        # and following once more rebaselines at the current value
        seen = await _until(chat.view, lambda v: v is not None)
        assert seen == [("hydrate", {"n": 4})]


async def test_a_service_without_lazy_members_is_sent_whole() -> None:
    world = World()
    world.spawn("1", EagerChats)
    async with connected(world) as (binding, tap, _):
        _, chat = await _observed(binding, EagerChats)
        world.bump("1", 2)
        await _roundtrip(chat)
        assert tap.updates[("1", "view")] == 2
        assert chat.view.value == {"n": 2}


async def test_a_collapse_respawns_only_instances_whose_received_members_changed() -> None:
    # A slow client's queue overflows: the waiting frames are dropped and each instance the
    # client holds is compared with a fresh snapshot. Instance 1 changed only in its muted view,
    # which the client does not receive, so it stays; instance 2's eager info changed, so it is
    # closed and spawned again at its current value.
    world = World()
    world.spawn("1")
    world.spawn("2")
    async with connected(world, queue_limit=2) as (binding, tap, _):
        instances, first = await _observed(binding)
        second = await instances.get("2")
        await _roundtrip(first)
        tap.lifecycle.clear()
        world.bump("1", 6)
        world.rename("2", 6)  # more updates than the queue holds, published at once: a collapse
        await _roundtrip(first)
        assert (await instances.get("2")) is not second  # respawned: a new instance
        assert (await instances.get("2")).info.value == {"id": "2", "name": "n5"}
        touched = sorted(
            (u["type"], (u.get("instance") or {}).get("key") or u["instance"]["instance"]["key"])
            for u in tap.lifecycle
        )
        assert touched == [("closed", "2"), ("spawned", "2")]
        assert tap.updates.get(("1", "view"), 0) == 0
        # and the view that stayed still hydrates at its current value when followed
        seen = await _until(first.view, lambda v: v is not None)
        assert seen == [("hydrate", {"n": 6})]
