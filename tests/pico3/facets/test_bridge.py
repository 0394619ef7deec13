"""The view bridge on its own: a real harness watch feeding a real replicated state (docs/design/decisions.md#d3).

One envelope is one ``apply`` is one sequence; overflow and a publish error fail the bridge once,
closing the watch and the instance; the commits that produced the envelopes are unaffected.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import pytest

from chord.context import BACKGROUND, Context
from chord.state import Delivery, MutableReplicatedState, replicated_state
from pico3.facets.bridge import BRIDGE_QUEUE_LIMIT, BridgeFailure, ViewBridge
from pico3.harness import ConversationHandle, Harness
from pico3.kernel.view import Watch
from pico3.storage.memory import MemoryStorage

TIMEOUT = 10


@dataclass(eq=False)
class Rig:
    harness: Harness
    conversation: ConversationHandle
    watch: Watch
    view: MutableReplicatedState
    bridge: ViewBridge
    failures: list[BridgeFailure] = field(default_factory=list[BridgeFailure])
    reports: list[BaseException] = field(default_factory=list[BaseException])
    instance_closes: int = 0
    deliveries: list[tuple[str, int, Any]] = field(default_factory=list[tuple[str, int, Any]])
    delivered: anyio.Event = field(default_factory=anyio.Event)

    async def write(self, n: int) -> int:
        return await self.conversation.write("note", BACKGROUND, data={"n": n})

    async def wait_sequence(self, sequence: int) -> None:
        with anyio.fail_after(TIMEOUT):
            while self.view.sequence < sequence:
                self.delivered = anyio.Event()
                await self.delivered.wait()


@asynccontextmanager
async def rig(limit: int = BRIDGE_QUEUE_LIMIT) -> AsyncIterator[Rig]:
    harness = await Harness.open(MemoryStorage(), None, BACKGROUND)
    conversation = await harness.root(BACKGROUND)
    watch = await conversation.watch(BACKGROUND)
    view = replicated_state({**watch.view, "commit": {"events": []}})
    holder: list[Rig] = []

    def on_failure(bridge: ViewBridge, failure: BridgeFailure) -> None:
        holder[0].failures.append(failure)

    bridge = ViewBridge(
        conversation.id,
        view,
        on_failure=on_failure,
        report=lambda error: holder[0].reports.append(error),
        limit=limit,
    )
    r = Rig(harness, conversation, watch, view, bridge)
    holder.append(r)

    def close_instance() -> None:
        r.instance_closes += 1

    def deliver(value: Any, ctx: Context, delivery: Delivery) -> None:
        r.deliveries.append((delivery.kind, delivery.sequence, value))
        r.delivered.set()

    view.subscribe(deliver)
    watch.start(bridge.push)
    bridge.attach(watch, close_instance)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(bridge.run)
            yield r
            bridge.close()
    finally:
        await harness.close(BACKGROUND)


@pytest.mark.anyio
async def test_each_envelope_is_one_revision_carrying_its_commit_events() -> None:
    async with rig() as r:
        for n in range(3):
            await r.write(n)
        await r.wait_sequence(3)
        updates = [(seq, value) for kind, seq, value in r.deliveries if kind == "update"]
        assert [seq for seq, _ in updates] == [1, 2, 3]
        for n, (_, value) in enumerate(updates):
            events = value["commit"]["events"]
            assert [event["type"] for event in events] == ["entry.added"]
            assert events[0]["entry"]["data"] == {"n": n}
            assert [entry["data"] for entry in value["entries"]] == [{"n": i} for i in range(n + 1)]
        assert r.bridge.published == 3 and r.failures == []


@pytest.mark.anyio
async def test_an_envelope_without_events_still_resets_commit_events() -> None:
    async with rig() as r:
        await r.write(0)
        await r.wait_sequence(1)
        plan = r.harness.namespace("plan", {"rewindable": {"on": False}}, view=lambda s: s)
        await r.conversation.commit(
            lambda tx, _ctx: tx.plugins(plan).__setitem__("on", True), BACKGROUND
        )
        await r.wait_sequence(2)
        assert r.view.value["plugins"] == {"plan": {"on": True}}
        assert r.view.value["commit"] == {"events": []}


@pytest.mark.anyio
async def test_held_envelopes_are_published_in_order_after_release() -> None:
    async with rig() as r:
        release = r.bridge.hold()
        for n in range(4):
            await r.write(n)
        assert r.bridge.pending == 4 and r.view.sequence == 0
        release()
        release()  # idempotent
        await r.wait_sequence(4)
        assert [e["data"]["n"] for e in r.view.value["entries"]] == [0, 1, 2, 3]


@pytest.mark.anyio
async def test_overflow_fails_the_bridge_once_and_closes_watch_and_instance() -> None:
    async with rig(limit=2) as r:
        r.bridge.hold()
        ids = [await r.write(n) for n in range(4)]
        assert len(set(ids)) == 4  # every commit stood
        assert len(r.failures) == 1
        assert "more than 2 envelopes" in r.failures[0].reason
        assert r.failures[0].conversation_id == r.conversation.id
        assert r.bridge.closed and r.bridge.failure is r.failures[0]
        assert r.watch.closed and r.instance_closes == 1
        assert r.view.sequence == 0  # nothing of the failed incarnation was published
        page = await r.conversation.entries(BACKGROUND)
        assert sorted(entry.data["n"] for entry in page) == [0, 1, 2, 3]  # type: ignore[index]


@pytest.mark.anyio
async def test_a_publish_error_fails_the_bridge_and_the_commit_stands() -> None:
    async with rig() as r:

        def broken(ops: Any, sequence: int, ctx: Context) -> None:
            raise RuntimeError("listener exploded")

        r.view.add_source_listener(broken)
        input_id = await r.write(0)
        with anyio.fail_after(TIMEOUT):
            while not r.failures:
                r.delivered = anyio.Event()
                await r.delivered.wait()
        assert type(input_id) is int
        assert "listener exploded" in r.failures[0].reason
        assert r.watch.closed and r.instance_closes == 1
        await r.write(1)  # later commits go on; the closed bridge ignores them
        assert len(r.failures) == 1


@pytest.mark.anyio
async def test_close_is_idempotent_and_a_failed_close_of_the_instance_is_reported() -> None:
    async with rig() as r:

        def exploding_close() -> None:
            raise RuntimeError("closed listener failed")

        r.bridge.attach(r.watch, exploding_close)
        r.bridge.close()
        r.bridge.close()
        assert [str(error) for error in r.reports] == ["closed listener failed"]
        r.bridge.push(None)  # type: ignore[arg-type]  # ignored once closed
        assert r.bridge.pending == 0


def test_the_bound_must_be_a_positive_int() -> None:
    state = replicated_state({"commit": {"events": []}})
    for limit in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="limit must be a positive int"):
            ViewBridge(1, state, on_failure=lambda b, f: None, report=print, limit=limit)  # type: ignore[arg-type]
