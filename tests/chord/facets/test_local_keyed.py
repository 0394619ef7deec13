"""Local keyed services (docs/design/chord.md#observe last bullet): the process-local registry."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from chord.context import Context
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.facets.registry import LocalKeyedRegistry
from chord.remote import RemoteServiceError
from chord.services import InstanceAddress, define_service

Sessions = define_service("test.local-sessions", local=True)


class _Session:
    """Carries things that are not JSON: a set, a callback, an open resource."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.tags = {"a", "b"}
        self.callbacks: list[Any] = [print]

    def read(self) -> str:
        return self.name


def _unexpected(error: BaseException) -> None:
    raise AssertionError(f"unexpected error report: {error!r}")


@pytest.mark.anyio
async def test_spawn_assigns_generations_per_key_and_close_is_idempotent() -> None:
    errors: list[BaseException] = []
    async with anyio.create_task_group() as group:
        registry = LocalKeyedRegistry([Sessions], task_group=group, on_error=errors.append)
        close_a = registry.spawn(Sessions, "a", _Session("a1"))
        registry.spawn(Sessions, "b", _Session("b1"))
        assert registry.live(Sessions) == [InstanceAddress("a", 1), InstanceAddress("b", 1)]
        close_a()
        close_a()
        assert registry.live(Sessions) == [InstanceAddress("b", 1)]
        registry.spawn(Sessions, "a", _Session("a2"))
        assert registry.live(Sessions) == [InstanceAddress("a", 2), InstanceAddress("b", 1)]
        registry.dispose()
    assert errors == []


@pytest.mark.anyio
async def test_spawn_rejects_bad_keys_implementations_and_duplicates() -> None:
    async with anyio.create_task_group() as group:
        registry = LocalKeyedRegistry([Sessions], task_group=group, on_error=lambda e: None)
        with pytest.raises(TypeError, match="key must be a non-empty string"):
            registry.spawn(Sessions, "", _Session("x"))
        with pytest.raises(TypeError, match="implementation must be an object"):
            registry.spawn(Sessions, "k", 42)
        with pytest.raises(TypeError, match="implementation must be an object"):
            registry.spawn(Sessions, "k", [1, 2])
        registry.spawn(Sessions, "k", _Session("x"))
        with pytest.raises(RuntimeError, match="already has a live instance with key k"):
            registry.spawn(Sessions, "k", _Session("y"))
        with pytest.raises(RuntimeError, match="not registered"):
            registry.spawn(define_service("other", local=True), "k", _Session("z"))
        registry.dispose()
        with pytest.raises(RuntimeError, match="registry is disposed"):
            registry.spawn(Sessions, "q", _Session("q"))


@pytest.mark.anyio
async def test_observer_runs_immediately_at_spawn_and_is_cancelled_at_close() -> None:
    seen: list[tuple[str, Context]] = []
    finished = anyio.Event()
    started = anyio.Event()

    async def handler(session: _Session, ctx: Context) -> None:
        seen.append((session.read(), ctx))
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            finished.set()

    calls: list[str] = []

    def sync_handler(session: _Session, ctx: Context) -> None:
        calls.append(session.read())

    async with anyio.create_task_group() as group:
        registry = LocalKeyedRegistry([Sessions], task_group=group, on_error=_unexpected)
        registry.observe(Sessions, handler)
        registry.observe(Sessions, sync_handler)
        close = registry.spawn(Sessions, "a", _Session("a"))
        assert calls == ["a"]  # a sync handler has run before spawn returns
        await started.wait()
        ((name, ctx),) = seen
        assert name == "a" and not ctx.cancelled
        close()
        assert ctx.cancelled
        with anyio.fail_after(5):
            await finished.wait()
        registry.dispose()


@pytest.mark.anyio
async def test_late_observer_gets_live_instances_and_stop_cancels_its_tasks() -> None:
    contexts: list[Context] = []

    def handler(session: _Session, ctx: Context) -> None:
        contexts.append(ctx)

    async with anyio.create_task_group() as group:
        registry = LocalKeyedRegistry([Sessions], task_group=group, on_error=_unexpected)
        registry.spawn(Sessions, "a", _Session("a"))
        registry.spawn(Sessions, "b", _Session("b"))
        stop = registry.observe(Sessions, handler)
        assert len(contexts) == 2
        stop()
        stop()
        assert all(ctx.cancelled for ctx in contexts)
        registry.spawn(Sessions, "c", _Session("c"))
        assert len(contexts) == 2  # a stopped observer sees nothing new
        registry.dispose()


@pytest.mark.anyio
async def test_handler_errors_are_reported_unless_the_instance_was_already_closed(
    recorder: Any,
) -> None:
    errors = recorder()
    release = anyio.Event()

    async def failing(session: _Session, ctx: Context) -> None:
        if session.name == "boom":
            raise ValueError("observer failed")
        await release.wait()
        raise ValueError("after close")  # never reported: the context is aborted

    def failing_sync(session: _Session, ctx: Context) -> None:
        if session.name == "sync-boom":
            raise KeyError("sync observer failed")

    async with anyio.create_task_group() as group:
        registry = LocalKeyedRegistry([Sessions], task_group=group, on_error=errors.append)
        registry.observe(Sessions, failing)
        registry.observe(Sessions, failing_sync)
        registry.spawn(Sessions, "x", _Session("boom"))
        registry.spawn(Sessions, "y", _Session("sync-boom"))
        await errors.wait_for_length(2)
        registry.dispose()
        release.set()
    assert sorted(type(error).__name__ for error in errors) == ["KeyError", "ValueError"]
    assert "observer failed" in str([str(error) for error in errors])


@pytest.mark.anyio
async def test_a_task_closed_before_it_started_never_runs() -> None:
    ran: list[str] = []

    async def handler(session: _Session, ctx: Context) -> None:
        ran.append(session.name)

    async with anyio.create_task_group() as group:
        registry = LocalKeyedRegistry([Sessions], task_group=group, on_error=_unexpected)
        registry.observe(Sessions, handler)
        close = registry.spawn(Sessions, "a", _Session("a"))
        close()  # before the task had a chance to start
        await anyio.lowlevel.checkpoint()
        registry.dispose()
    assert ran == []


# -- through the host --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_local_keyed_services_carry_non_json_members_and_stay_process_local() -> None:
    # item 76
    observed: list[tuple[Any, Context]] = []

    def consumer(env: FacetEnvironment) -> None:
        env.observe(Sessions, lambda session, ctx: observed.append((session, ctx)))

    def provider(value: str) -> Any:
        def setup(env: FacetEnvironment) -> None:
            sessions = env.provide_many(Sessions)
            env.on_activate(lambda: sessions.spawn("current", _Session(value)) and None)

        return define_facet("local-keyed-provider", setup)

    async with create_facet_host(
        [define_facet("local-keyed-consumer", consumer), provider("A")]
    ) as host:
        ((first, first_ctx),) = observed
        assert first.read() == "A"
        assert first.tags == {"a", "b"}  # a set: not JSON, passed through untouched
        assert first.callbacks[0] is print
        assert all(entry.service_id != Sessions.id for entry in host.services.catalogue)
        with pytest.raises(RemoteServiceError, match="process-local"):
            host.services.use(Sessions)

        await host.reload([provider("B")])
        assert first_ctx.cancelled
        with pytest.raises(
            RuntimeError, match=f"Keyed service {Sessions.id} observation is closed"
        ):
            first.read()
        (second, second_ctx) = observed[1]
        assert second.read() == "B"
        assert second is not first
    assert second_ctx.cancelled
