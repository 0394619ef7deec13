"""``pi.conversation`` across two real processes over the chord wire (issue 7 item 1).

``session_host.py`` runs the harness session facet in a child process on a JSONL store and
serves it on a Unix socket; the presentation facets here reach it through
:func:`chord.wire.connect_service_source`. Nothing sleeps to synchronise: tests wait on the
child's ``READY`` line, on view deliveries and on observed instances.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.state import Delivery
from chord.transport import connect_unix
from chord.wire import connect_service_source
from pico3 import ConversationService

SCRIPT = Path(__file__).with_name("session_host.py")
TIMEOUT = 20


class Worker:
    """The session worker process: gone when its stdin closes."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process

    async def stop(self) -> None:
        if self.process.returncode is None:
            assert self.process.stdin is not None
            await self.process.stdin.aclose()
            with anyio.fail_after(TIMEOUT):
                await self.process.wait()

    async def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        with anyio.fail_after(TIMEOUT):
            await self.process.wait()
        assert self.process.stdin is not None
        await self.process.stdin.aclose()


@asynccontextmanager
async def worker_process(socket: Path, store: Path) -> AsyncIterator[Worker]:
    process = await anyio.open_process(
        [sys.executable, str(SCRIPT), str(socket), str(store)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=None,
    )
    worker = Worker(process)
    try:
        assert process.stdout is not None
        lines = BufferedByteReceiveStream(process.stdout)
        with anyio.fail_after(TIMEOUT):
            assert await lines.receive_until(b"\n", 1024) == b"READY"
        yield worker
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                await worker.stop()
            await process.aclose()


class Changes:
    def __init__(self) -> None:
        self._event = anyio.Event()

    def notify(self) -> None:
        event, self._event = self._event, anyio.Event()
        event.set()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        with anyio.fail_after(TIMEOUT):
            while not predicate():
                await self._event.wait()


@dataclass(eq=False)
class Observed:
    facade: Any
    deliveries: list[tuple[str, int, Any]] = field(default_factory=list[tuple[str, int, Any]])
    closed: bool = False

    @property
    def value(self) -> Any:
        return self.deliveries[-1][2]

    @property
    def conversation_id(self) -> int:
        return self.deliveries[0][2]["conversation"]["id"]

    def updates(self) -> list[tuple[int, Any]]:
        return [(seq, value) for kind, seq, value in self.deliveries if kind == "update"]


class Presentation:
    def __init__(self, facet_id: str) -> None:
        self.changes = Changes()
        self.seen: list[Observed] = []
        self.facet = define_facet(facet_id, self._setup)

    def _setup(self, env: FacetEnvironment) -> None:
        async def on_instance(instance: Any, ctx: Context) -> None:
            observed = Observed(instance)

            def deliver(value: Any, _ctx: Context, delivery: Delivery) -> None:
                observed.deliveries.append((delivery.kind, delivery.sequence, value))
                self.changes.notify()

            stop = instance.view.subscribe(deliver)
            self.seen.append(observed)
            self.changes.notify()
            try:
                await ctx.wait_cancelled()
            finally:
                stop()
                observed.closed = True
                self.changes.notify()

        env.observe(ConversationService, on_instance)

    def live(self) -> list[Observed]:
        return [o for o in self.seen if not o.closed and o.deliveries]

    async def wait_live(self, predicate: Callable[[Observed], bool]) -> Observed:
        def find() -> Observed | None:
            return next((o for o in self.live() if predicate(o)), None)

        await self.changes.wait_for(lambda: find() is not None)
        found = find()
        assert found is not None
        return found


def _is_root(observed: Observed) -> bool:
    return "parent" not in observed.value["conversation"]


@pytest.mark.anyio
async def test_a_remote_presentation_sees_one_revision_per_commit_and_forks(
    tmp_path: Path,
) -> None:
    socket, store = tmp_path / "worker.sock", tmp_path / "session"
    async with worker_process(socket, store), anyio.create_task_group() as group:
        source = connect_service_source(lambda: connect_unix(socket), task_group=group)
        tui = Presentation("tui")
        async with create_facet_host([tui.facet], service_sources=[source]):
            root = await tui.wait_live(_is_root)
            assert root.deliveries[0][0] == "hydrate"
            baseline = root.deliveries[0][1]

            for n in range(5):
                await root.facade.write({"kind": "note", "data": {"n": n}}, BACKGROUND)
            await tui.changes.wait_for(lambda: len(root.updates()) == 5)
            updates = root.updates()
            assert [sequence for sequence, _ in updates] == list(range(baseline + 1, baseline + 6))
            for n, (_, value) in enumerate(updates):
                events = value["commit"]["events"]
                assert [event["type"] for event in events] == ["entry.added"]
                assert events[0]["entry"]["data"] == {"n": n}
            assert [e["data"] for e in root.value["entries"]] == [{"n": n} for n in range(5)]

            at = root.value["entries"][2]["id"]
            child_id = await root.facade.fork(at, {}, BACKGROUND)
            child = await tui.wait_live(lambda o: o.conversation_id == child_id)
            assert child.value["conversation"]["parent"] == {
                "conversationId": root.conversation_id,
                "at": at,
            }
            assert [e["data"] for e in child.value["entries"]] == [{"n": n} for n in range(3)]
            page = await child.facade.entries({"limit": 2}, BACKGROUND)
            assert [entry["data"] for entry in page] == [{"n": 2}, {"n": 1}]
        await source.aclose()


@pytest.mark.anyio
async def test_a_late_remote_joiner_hydrates_at_the_current_sequence(tmp_path: Path) -> None:
    socket, store = tmp_path / "worker.sock", tmp_path / "session"
    async with worker_process(socket, store), anyio.create_task_group() as group:
        first = connect_service_source(lambda: connect_unix(socket), task_group=group)
        second = connect_service_source(lambda: connect_unix(socket), task_group=group)
        early, late = Presentation("early"), Presentation("late")
        async with create_facet_host([early.facet], service_sources=[first]):
            root = await early.wait_live(_is_root)
            for n in range(3):
                await root.facade.write({"kind": "note", "data": {"n": n}}, BACKGROUND)
            await early.changes.wait_for(lambda: len(root.updates()) == 3)
            async with create_facet_host([late.facet], service_sources=[second]):
                joined = await late.wait_live(_is_root)
                kind, sequence, value = joined.deliveries[0]
                assert (kind, sequence) == ("hydrate", root.deliveries[-1][1])
                assert value == root.value
                await joined.facade.write({"kind": "note", "data": {"n": 3}}, BACKGROUND)
                await late.changes.wait_for(lambda: len(joined.updates()) == 1)
                await early.changes.wait_for(lambda: len(root.updates()) == 4)
                assert joined.updates()[0] == root.updates()[-1]
                assert joined.updates()[0][0] == sequence + 1
        await first.aclose()
        await second.aclose()


@pytest.mark.anyio
async def test_a_restarted_worker_serves_fresh_instances_of_the_persisted_conversations(
    tmp_path: Path,
) -> None:
    socket, store = tmp_path / "worker.sock", tmp_path / "session"
    async with anyio.create_task_group() as group:
        source = connect_service_source(
            lambda: connect_unix(socket), task_group=group, on_error=lambda _error: None
        )
        tui = Presentation("tui")
        async with worker_process(socket, store) as worker:
            async with create_facet_host([tui.facet], service_sources=[source]):
                root = await tui.wait_live(_is_root)
                await root.facade.write({"kind": "note", "data": {"n": 1}}, BACKGROUND)
                await tui.changes.wait_for(lambda: len(root.updates()) == 1)
                await worker.kill()
                await tui.changes.wait_for(lambda: root.closed)
                async with worker_process(socket, store):
                    again = await tui.wait_live(_is_root)
                    assert again is not root
                    assert again.deliveries[0][0] == "hydrate"
                    assert [e["data"] for e in again.value["entries"]] == [{"n": 1}]
            await source.aclose()
        group.cancel_scope.cancel()


class Observer:
    """Observes every ``pi.conversation`` instance without subscribing to any view."""

    def __init__(self) -> None:
        self.changes = Changes()
        self.instances: dict[int, Any] = {}
        self.facet = define_facet("observer", self._setup)

    def _setup(self, env: FacetEnvironment) -> None:
        async def on_instance(instance: Any, ctx: Context) -> None:
            cid = instance.conversation.value["id"]
            self.instances[cid] = instance
            self.changes.notify()
            await ctx.wait_cancelled()

        env.observe(ConversationService, on_instance)


@pytest.mark.anyio
async def test_a_view_is_not_sent_to_a_client_that_does_not_follow_it(tmp_path: Path) -> None:
    # pi.conversation's view is lazy across the wire (docs/wire.md#lazy-state): an observer
    # learns which conversation an instance is from its small `conversation` identity, and a
    # view reaches it only while it subscribes to that view.
    socket, store = tmp_path / "worker.sock", tmp_path / "session"
    async with worker_process(socket, store), anyio.create_task_group() as group:
        source = connect_service_source(lambda: connect_unix(socket), task_group=group)
        client = Observer()
        async with create_facet_host([client.facet], service_sources=[source]):
            await client.changes.wait_for(lambda: len(client.instances) == 1)
            ((root_id, root),) = client.instances.items()
            assert root.conversation.value == {"id": root_id}  # a root: no parent, no owner
            for n in range(3):
                await root.write({"kind": "note", "data": {"n": n}}, BACKGROUND)
            assert root.view.value is None  # not followed: nothing of it was sent

            # following it later hydrates it at its current revision, then streams it
            deliveries: list[tuple[str, int, Any]] = []
            changed = Changes()

            def deliver(value: Any, _ctx: Context, delivery: Delivery) -> None:
                deliveries.append((delivery.kind, delivery.sequence, value))
                changed.notify()

            stop = root.view.subscribe(deliver)
            await changed.wait_for(lambda: len(deliveries) == 1)
            kind, sequence, value = deliveries[0]
            assert kind == "hydrate"
            assert [e["data"] for e in value["entries"]] == [{"n": n} for n in range(3)]
            await root.write({"kind": "note", "data": {"n": 3}}, BACKGROUND)
            await changed.wait_for(lambda: len(deliveries) == 2)
            assert deliveries[1][:2] == ("update", sequence + 1)

            # a fork's identity names its parent; its view stays unsent until followed
            at = deliveries[1][2]["entries"][-1]["id"]
            child_id = await root.fork(at, {}, BACKGROUND)
            await client.changes.wait_for(lambda: child_id in client.instances)
            child = client.instances[child_id]
            assert child.conversation.value["parent"] == {"conversationId": root_id, "at": at}
            assert child.view.value is None

            stop()  # the last subscriber leaving: the view goes cold again
            assert root.view.value is None
        await source.aclose()
