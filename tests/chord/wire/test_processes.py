"""A provider host in another process, consumed over a Unix socket (issue 3; docs/design/chord.md#connection-close).

``provider_host.py`` runs in a child process (``sys.executable``); the facet hosts here use and
observe its services through :func:`chord.wire.connect_service_source`. Nothing sleeps to
synchronise: tests wait on lines the child prints, on state deliveries and on source events.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from chord.context import BACKGROUND, Context, with_cancel
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.remote import RemoteServiceError, ServiceCall, ServiceStateUpdate
from chord.services import define_service
from chord.state import Delivery
from chord.transport import connect_unix, open_process_connection
from chord.wire import (
    RemoteCallError,
    RemoteConnection,
    connect_service_source,
    open_remote_connection,
)

SCRIPT = Path(__file__).with_name("provider_host.py")
Counter = define_service("test.wire.proc.counter")
Sessions = define_service("test.wire.proc.sessions")
TIMEOUT = 20


class Child:
    """The provider process: started with ``sys.executable``, gone when stdin closes."""

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
async def provider_process(path: Path, label: str) -> AsyncIterator[Child]:
    process = await anyio.open_process(
        [sys.executable, str(SCRIPT), str(path), label],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=None,
    )
    child = Child(process)
    try:
        assert process.stdout is not None
        lines = BufferedByteReceiveStream(process.stdout)
        with anyio.fail_after(TIMEOUT):
            assert await lines.receive_until(b"\n", 1024) == b"READY"
        yield child
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                await child.stop()
            await process.aclose()


class Values:
    """Deliveries of one state handle, waitable."""

    def __init__(self) -> None:
        self.items: list[tuple[str, int, Any]] = []
        self._changed = anyio.Event()

    def __call__(self, value: Any, ctx: Context, delivery: Delivery) -> None:
        self.items.append((delivery.kind, delivery.sequence, value))
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def wait_for(self, predicate: Callable[[list[tuple[str, int, Any]]], bool]) -> None:
        with anyio.fail_after(TIMEOUT):
            while not predicate(self.items):
                await self._changed.wait()


class Views(list[Any]):
    """Observed keyed views, waitable."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = anyio.Event()

    def append(self, item: Any) -> None:
        super().append(item)
        self.changed.set()


def _consumer(handles: dict[str, Any], views: list[Any]) -> Any:
    def setup(env: FacetEnvironment) -> None:
        handles["counter"] = env.use(Counter)

        async def observe(view: Any, ctx: Context) -> None:
            views.append(view)

        env.observe(Sessions, observe)

    return define_facet("consumer", setup)


@pytest.mark.anyio
async def test_a_consumer_host_uses_and_observes_services_of_another_process(
    tmp_path: Path,
) -> None:
    path = tmp_path / "provider.sock"
    async with provider_process(path, "first"), anyio.create_task_group() as group:
        source = connect_service_source(lambda: connect_unix(path), task_group=group)
        handles: dict[str, Any] = {}
        views = Views()
        async with create_facet_host([_consumer(handles, views)], service_sources=[source]):
            counter = handles["counter"]
            values = Values()
            counter.state.subscribe(values)
            await values.wait_for(lambda items: len(items) >= 1)
            assert values.items[0][0] == "hydrate"
            assert values.items[0][2]["label"] == "first"
            assert await counter.bump(2, BACKGROUND) == 2
            await values.wait_for(lambda items: items[-1][2]["count"] == 2)
            assert values.items[-1][:2] == ("update", 1)
            # keyed: an instance opened remotely is observed here, hydrated first
            await counter.open_session("alpha", BACKGROUND)
            with anyio.fail_after(TIMEOUT):
                await views.changed.wait()
            view = views[0]
            assert view.state.value == {"key": "alpha", "lines": []}
            assert await view.say("hello", BACKGROUND) == 1
            lines = Values()
            view.state.subscribe(lines)
            await lines.wait_for(lambda items: bool(items) and items[-1][2]["lines"] == ["hello"])
        await source.aclose()


@pytest.mark.anyio
async def test_a_late_joiner_sees_the_current_snapshot_then_every_update_in_order(
    tmp_path: Path,
) -> None:
    path = tmp_path / "provider.sock"
    async with provider_process(path, "late"), anyio.create_task_group() as group:
        first = connect_service_source(lambda: connect_unix(path), task_group=group)
        second = connect_service_source(lambda: connect_unix(path), task_group=group)
        early: dict[str, Any] = {}
        late: dict[str, Any] = {}
        async with create_facet_host([_consumer(early, [])], service_sources=[first]):
            for amount in range(1, 6):
                await early["counter"].bump(amount, BACKGROUND)  # count 15 at sequence 5
            async with create_facet_host([_consumer(late, [])], service_sources=[second]):
                values = Values()
                late["counter"].state.subscribe(values)
                await values.wait_for(lambda items: len(items) >= 1)
                assert values.items[0][:2] == ("hydrate", 5)
                assert values.items[0][2]["count"] == 15
                for _ in range(10):
                    await early["counter"].bump(1, BACKGROUND)
                await values.wait_for(lambda items: items[-1][1] == 15)
                assert [sequence for _, sequence, _ in values.items] == list(range(5, 16))
                assert values.items[-1][2]["count"] == 25
        await first.aclose()
        await second.aclose()


@pytest.mark.anyio
async def test_killing_the_provider_makes_facades_unavailable_and_a_restart_rehydrates(
    tmp_path: Path,
) -> None:
    path = tmp_path / "provider.sock"
    async with anyio.create_task_group() as group:
        errors: list[BaseException] = []
        async with provider_process(path, "before") as child:
            source = connect_service_source(
                lambda: connect_unix(path), task_group=group, on_error=errors.append
            )
            handles: dict[str, Any] = {}
            async with create_facet_host([_consumer(handles, [])], service_sources=[source]):
                counter = handles["counter"]
                values = Values()
                counter.state.subscribe(values)
                assert await counter.bump(3, BACKGROUND) == 3
                await values.wait_for(lambda items: bool(items) and items[-1][2]["count"] == 3)
                # a call in flight when the provider dies fails at once with `unavailable`
                in_flight: list[BaseException] = []

                async def waiting_call() -> None:
                    try:
                        await counter.wait("doomed", BACKGROUND)
                    except RemoteCallError as error:
                        in_flight.append(error)

                async with anyio.create_task_group() as calls:
                    calls.start_soon(waiting_call)
                    await values.wait_for(lambda items: "started doomed" in items[-1][2]["events"])
                    await child.kill()
                assert [getattr(error, "code", None) for error in in_flight] == ["unavailable"]
                assert "unavailable" in str(in_flight[0])
                await source.wait_disconnected()
                assert counter.state.value is None
                # new calls fail at once; nothing is queued for later
                with (
                    anyio.fail_after(1),
                    pytest.raises(RemoteServiceError, match="unavailable: its binding is closed"),
                ):
                    await counter.bump(1, BACKGROUND)
                seen = len(values.items)
                async with provider_process(path, "after"):
                    await source.wait_connected()
                    await values.wait_for(lambda items: len(items) > seen)
                    kind, sequence, value = values.items[-1]
                    assert (kind, sequence) == ("hydrate", 0)
                    assert value["label"] == "after" and value["count"] == 0
                    assert await counter.bump(1, BACKGROUND) == 1  # not 4: nothing replayed
                    await source.aclose()
        # at least one reconnect (a connect racing the dying child's listener may add one more)
        assert source.connections >= 2
        group.cancel_scope.cancel()


@pytest.mark.anyio
async def test_cancelling_a_call_cancels_the_provider_methods_context(tmp_path: Path) -> None:
    path = tmp_path / "provider.sock"
    async with provider_process(path, "cancel"), anyio.create_task_group() as group:
        source = connect_service_source(lambda: connect_unix(path), task_group=group)
        handles: dict[str, Any] = {}
        async with create_facet_host([_consumer(handles, [])], service_sources=[source]):
            counter = handles["counter"]
            values = Values()
            counter.state.subscribe(values)
            ctx, cancel = with_cancel(BACKGROUND)
            outcome: list[BaseException] = []

            async def call() -> None:
                try:
                    await counter.wait("job", ctx)
                except Exception as error:
                    outcome.append(error)

            async with anyio.create_task_group() as calls:
                calls.start_soon(call)
                await values.wait_for(
                    lambda items: bool(items) and "started job" in items[-1][2]["events"]
                )
                cancel("no longer needed")
            assert "no longer needed" in str(outcome[0])
            # the provider saw its context cancelled and said so through the state
            await values.wait_for(lambda items: "cancelled job" in items[-1][2]["events"])
        await source.aclose()


@pytest.mark.anyio
async def test_closing_one_connection_does_not_disturb_another(tmp_path: Path) -> None:
    path = tmp_path / "provider.sock"
    async with provider_process(path, "two"), anyio.create_task_group() as group:
        first = RemoteConnection(await connect_unix(path))
        second = RemoteConnection(await connect_unix(path))
        group.start_soon(first.run)
        group.start_soon(second.run)
        updates: list[int] = []
        arrived = anyio.Event()

        def listener(update: Any, ctx: Context) -> None:
            if isinstance(update, ServiceStateUpdate):
                updates.append(update.sequence)
                arrived.set()

        subscription = await second.subscribe(Counter.id, "singleton", listener, BACKGROUND)
        subscription.activate()
        await first.aclose()
        with pytest.raises(RemoteCallError, match="unavailable"):
            await first.invoke(ServiceCall(Counter.id, "bump", (1,)), BACKGROUND)
        assert await second.invoke(ServiceCall(Counter.id, "bump", (1,)), BACKGROUND) == 1
        with anyio.fail_after(TIMEOUT):
            await arrived.wait()
        assert updates == [1]
        await second.aclose()


@pytest.mark.anyio
async def test_a_provider_served_over_a_child_processes_stdio() -> None:
    process, conn = await open_process_connection([sys.executable, str(SCRIPT), "--stdio", "pipe"])
    async with process, open_remote_connection(conn) as remote:
        catalogue = await remote.catalogue(BACKGROUND)
        assert [entry.service_id for entry in catalogue] == [Counter.id, Sessions.id]
        assert await remote.invoke(ServiceCall(Counter.id, "bump", (4,)), BACKGROUND) == 4
        await remote.aclose()
        with anyio.fail_after(TIMEOUT):
            assert await process.wait() == 0  # end of stdin ends the child


@pytest.mark.anyio
async def test_a_keyed_instance_closed_in_the_provider_aborts_its_remote_observer(
    tmp_path: Path,
) -> None:
    path = tmp_path / "provider.sock"
    async with provider_process(path, "keyed"), anyio.create_task_group() as group:
        source = connect_service_source(lambda: connect_unix(path), task_group=group)
        handles: dict[str, Any] = {}
        aborted = anyio.Event()
        started = anyio.Event()

        def setup(env: FacetEnvironment) -> None:
            handles["counter"] = env.use(Counter)

            async def observe(view: Any, ctx: Context) -> None:
                handles["key"] = view.state.value["key"]
                started.set()
                try:
                    await anyio.sleep_forever()
                finally:
                    if ctx.cancelled:
                        aborted.set()

            env.observe(Sessions, observe)

        async with create_facet_host([define_facet("keyed", setup)], service_sources=[source]):
            await handles["counter"].open_session("beta", BACKGROUND)
            with anyio.fail_after(TIMEOUT):
                await started.wait()
            assert handles["key"] == "beta"
            await handles["counter"].close_session("beta", BACKGROUND)
            with anyio.fail_after(TIMEOUT):
                await aborted.wait()
        await source.aclose()


@pytest.mark.anyio
async def test_keyed_observers_abort_on_provider_loss_and_new_instances_appear_after_restart(
    tmp_path: Path,
) -> None:
    path = tmp_path / "provider.sock"
    async with anyio.create_task_group() as group:
        handles: dict[str, Any] = {}
        observed = Values()
        aborted = Values()

        def setup(env: FacetEnvironment) -> None:
            handles["counter"] = env.use(Counter)

            async def observe(view: Any, ctx: Context) -> None:
                key = view.state.value["key"]
                observed(key, ctx, Delivery("hydrate", 0))
                try:
                    await anyio.sleep_forever()
                finally:
                    if ctx.cancelled:
                        aborted(key, ctx, Delivery("update", 0))

            env.observe(Sessions, observe)

        async with provider_process(path, "before") as child:
            source = connect_service_source(lambda: connect_unix(path), task_group=group)
            async with create_facet_host([define_facet("keyed", setup)], service_sources=[source]):
                counter = handles["counter"]
                await counter.open_session("alpha", BACKGROUND)
                await observed.wait_for(lambda items: len(items) == 1)
                await child.kill()
                await source.wait_disconnected()
                # the observation ended with the connection
                await aborted.wait_for(lambda items: [key for _, _, key in items] == ["alpha"])
                async with provider_process(path, "after"):
                    await source.wait_connected()
                    await counter.open_session("gamma", BACKGROUND)
                    await observed.wait_for(lambda items: len(items) == 2)
                    assert [key for _, _, key in observed.items] == ["alpha", "gamma"]
                    await source.aclose()
        group.cancel_scope.cancel()
