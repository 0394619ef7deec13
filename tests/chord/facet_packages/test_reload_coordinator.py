"""The hot reload coordinator against a real facet host (issue 4; docs/design/reload.md#coordinator, docs/design/decisions.md#d4)."""

from __future__ import annotations

import gc
import sys
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream

from chord.facet_packages import (
    FacetGeneration,
    ReloadCoordinator,
    ReloadReport,
    facet_package_from_folder,
    load_generation,
)
from chord.facet_packages.generation import GENERATION_PREFIX
from chord.facets import FacetEnvironment, FacetHost, create_facet_host, define_facet
from chord.services import define_service

Echo = define_service("test.echo", local=True)  # the same id the package provides
Other = define_service("test.other", local=True)
WAIT = 10  # seconds: a bound on waiting for the watcher, never a sleep


@dataclass
class Running:
    host: FacetHost
    coordinator: ReloadCoordinator
    echo: Any  # the consumer facet's singleton handle
    reports: MemoryObjectReceiveStream[ReloadReport]

    async def next_report(self) -> ReloadReport:
        with anyio.fail_after(WAIT):
            return await self.reports.receive()


def consumer(holder: dict[str, Any]) -> Any:
    def setup(env: FacetEnvironment) -> None:
        holder["echo"] = env.use(Echo)

    return define_facet("test/consumer", setup)


@asynccontextmanager
async def running(
    echo_package: Any,
    *,
    watch: bool = True,
    around_reload: Callable[[Callable[[], Awaitable[None]]], Awaitable[None]] | None = None,
    extra_facets: tuple[Any, ...] = (),
) -> AsyncIterator[Running]:
    (package,) = facet_package_from_folder(echo_package.project)
    # Only the coordinator may keep the generation: a stray reference would defeat the leak test.
    initial = [load_generation(package, "session")]
    holder: dict[str, Any] = {}
    send, receive = anyio.create_memory_object_stream[ReloadReport](1000)
    with send, receive:
        coordinator: ReloadCoordinator | None = None
        try:
            async with create_facet_host(
                [*initial[0].facets, consumer(holder), *extra_facets]
            ) as host:
                coordinator = ReloadCoordinator(
                    host, initial, on_report=send.send_nowait, around_reload=around_reload
                )
                initial.clear()
                state = Running(host, coordinator, holder["echo"], receive)
                if not watch:
                    yield state
                else:
                    async with anyio.create_task_group() as group:
                        await group.start(coordinator.run)
                        yield state
                        coordinator.stop()
        finally:
            if coordinator is not None:
                await coordinator.dispose()
            for generation in initial:
                generation.purge()


@pytest.mark.anyio
async def test_an_edited_submodule_is_reloaded_and_the_same_handle_shows_it(echo_package):
    async with running(echo_package) as app:
        handle = app.echo
        assert handle.answer("a") == "v1:a"
        before = app.coordinator.generation("echo")
        path = echo_package.set_behaviour("v2")
        report = await app.next_report()
        assert report.ok, report.message
        assert report.outcome == "reloaded"
        assert path in report.changes
        assert report.candidate == report.generation != before.number
        assert app.echo is handle
        assert handle.answer("a") == "v2:a"
        assert before.disposed
        assert app.coordinator.generation("echo").number == report.generation


@pytest.mark.anyio
async def test_a_syntax_error_keeps_the_old_code_and_is_reported_then_a_fix_reloads(echo_package):
    async with running(echo_package) as app:
        serving = app.coordinator.generation("echo")
        echo_package.write("behaviour.py", "def answer(text:\n")
        failed = await app.next_report()
        assert failed.outcome == "failed"
        assert failed.stage == "load"
        assert isinstance(failed.error, Exception)
        assert isinstance(failed.error.__cause__, SyntaxError)
        assert "SyntaxError" in failed.message and "keeps serving" in failed.message
        assert failed.generation == serving.number
        assert app.echo.answer("a") == "v1:a"
        assert not serving.disposed
        echo_package.set_behaviour("v3")
        fixed = await app.next_report()
        assert fixed.ok, fixed.message
        assert app.echo.answer("a") == "v3:a"


@pytest.mark.anyio
async def test_fifty_rapid_edits_coalesce_and_the_final_code_is_active(echo_package):
    async with running(echo_package) as app:
        for version in range(50):
            echo_package.set_behaviour(f"edit{version}")
        reports = [await app.next_report()]
        while app.echo.answer("a") != "edit49:a":
            reports.append(await app.next_report())
        assert all(report.ok for report in reports), [r.message for r in reports]
        assert len(reports) < 10  # coalesced: far fewer reloads than edits


@pytest.mark.anyio
async def test_a_shape_change_is_refused_with_restart_required(echo_package):
    async with running(echo_package, extra_facets=(other_provider(),)) as app:
        serving = app.coordinator.generation("echo")
        echo_package.write(
            "session.py",
            """\
            from chord.facets import define_facet

            from . import behaviour
            from .contract import Echo
            from chord.services import define_service

            Other = define_service("test.other", local=True)


            class _Echo:
                def answer(self, text):
                    return "shape:" + text


            def setup(env):
                env.use(Other)
                env.provide(Echo, _Echo())


            session_facet = define_facet("test/echo", setup)
            """,
        )
        report = await app.next_report()
        assert report.outcome == "restart_required"
        assert report.stage == "reload"
        assert "restart required" in report.message
        assert app.echo.answer("a") == "v1:a"
        assert app.coordinator.generation("echo") is serving
        assert not serving.disposed


def other_provider() -> Any:
    return define_facet("test/other", lambda env: env.provide(Other, object()))


@pytest.mark.anyio
async def test_adding_a_facet_to_the_package_is_refused_with_restart_required(echo_package):
    async with running(echo_package, watch=False) as app:
        echo_package.write(
            "plugin.py",
            """\
            from chord.facets import define_facet
            from chord import hookimpl

            from .session import session_facet

            extra = define_facet("test/extra", lambda env: None)


            @hookimpl
            def chord_facets(host):
                return [session_facet, extra]
            """,
        )
        report = await app.coordinator.reload("echo")
        assert report.outcome == "restart_required"
        assert "added ['test/extra']" in report.message
        assert app.echo.answer("a") == "v1:a"
        assert [n for n in sys.modules if n.startswith(GENERATION_PREFIX)] == [
            n for n in sys.modules if n.startswith(app.coordinator.generation("echo").root)
        ]


@pytest.mark.anyio
async def test_a_failed_activation_keeps_the_old_generation_serving(echo_package):
    async with running(echo_package, watch=False) as app:
        echo_package.write(
            "session.py",
            """\
            from chord.facets import define_facet

            from .contract import Echo


            class _Echo:
                def answer(self, text):
                    return "never:" + text


            def setup(env):
                env.provide(Echo, _Echo())

                def activate():
                    raise RuntimeError("cannot start")

                env.on_activate(activate)


            session_facet = define_facet("test/echo", setup)
            """,
        )
        serving = app.coordinator.generation("echo")
        report = await app.coordinator.reload("echo")
        assert report.outcome == "failed"
        assert report.stage == "reload"
        assert "cannot start" in report.message
        assert app.echo.answer("a") == "v1:a"
        assert app.coordinator.generation("echo") is serving
        echo_package.set_behaviour("v2")  # and repair the facet: the next reload succeeds
        echo_package.write("session.py", SESSION_OK)
        assert (await app.coordinator.reload("echo")).ok
        assert app.echo.answer("a") == "v2:a"


SESSION_OK = """\
from chord.facets import define_facet

from . import behaviour
from .contract import Echo


class _Echo:
    def answer(self, text):
        return behaviour.answer(text)


session_facet = define_facet("test/echo", lambda env: env.provide(Echo, _Echo()))
"""


@pytest.mark.anyio
async def test_the_around_reload_hook_wraps_the_swap(echo_package):
    events: list[str] = []

    async def around(perform: Callable[[], Awaitable[None]]) -> None:
        events.append(f"hold {app.echo.answer('a')}")
        await perform()
        events.append(f"release {app.echo.answer('a')}")

    async with running(echo_package, watch=False, around_reload=around) as app:
        echo_package.set_behaviour("v2")
        report = await app.coordinator.reload("echo")
        assert report.ok
        assert events == ["hold v1:a", "release v2:a"]


@pytest.mark.anyio
async def test_a_hook_that_fails_before_the_swap_disposes_the_candidate(echo_package):
    async def around(perform: Callable[[], Awaitable[None]]) -> None:
        raise RuntimeError("harness busy")

    async with running(echo_package, watch=False, around_reload=around) as app:
        echo_package.set_behaviour("v2")
        report = await app.coordinator.reload("echo")
        assert report.outcome == "failed"
        assert "harness busy" in report.message
        assert app.echo.answer("a") == "v1:a"
        assert report.candidate is not None
        assert f"{GENERATION_PREFIX}{report.candidate}__" not in sys.modules


@pytest.mark.anyio
async def test_a_hook_that_never_performs_the_swap_is_reported(echo_package):
    async def around(perform: Callable[[], Awaitable[None]]) -> None:
        return None

    async with running(echo_package, watch=False, around_reload=around) as app:
        report = await app.coordinator.reload("echo")
        assert report.outcome == "failed"
        assert "without calling perform()" in report.message


@pytest.mark.anyio
async def test_retired_generations_are_collected_after_200_reload_cycles(echo_package):
    # The reload path called directly (not through the watcher), so this stays fast.
    async with running(echo_package, watch=False) as app:
        retired: list[weakref.ref[Any]] = []
        for cycle in range(200):
            serving: FacetGeneration = app.coordinator.generation("echo")
            retired.append(weakref.ref(serving.module("echo_pkg.behaviour")))
            retired.append(weakref.ref(serving.facets[0].setup))
            del serving
            echo_package.set_behaviour(f"c{cycle}")
            report = await app.coordinator.reload("echo")
            assert report.ok, report.message
            del report
        assert app.echo.answer("a") == "c199:a"
        gc.collect()
        alive = [ref for ref in retired if ref() is not None]
        assert alive == []
        current = app.coordinator.generation("echo").root
        assert {n.partition(".")[0] for n in sys.modules if n.startswith(GENERATION_PREFIX)} == {
            current
        }


@pytest.mark.anyio
async def test_unknown_package_names_fail_clearly(echo_package):
    async with running(echo_package, watch=False) as app:
        with pytest.raises(LookupError, match="no facet package named 'nope'"):
            await app.coordinator.reload("nope")


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_the_watcher_stops_promptly_when_cancelled(echo_package):
    async with running(echo_package, watch=False) as app:
        async with anyio.create_task_group() as group:
            await group.start(app.coordinator.run)
            started = time.perf_counter()
            group.cancel_scope.cancel()
        assert time.perf_counter() - started < 1.0  # the Rust timeout would be 5 s


@pytest.mark.anyio
async def test_a_report_callback_that_raises_is_logged_not_propagated(echo_package, caplog):
    (package,) = facet_package_from_folder(echo_package.project)
    generation = load_generation(package, "session")

    def bad(report: ReloadReport) -> None:
        raise RuntimeError("display failed")

    async with create_facet_host([*generation.facets]) as host:
        coordinator = ReloadCoordinator(host, [generation], on_report=bad)
        report = await coordinator.reload("echo")
        assert report.ok
    await coordinator.dispose()
    assert "on_report callback" in caplog.text
    assert generation.disposed


@pytest.mark.anyio
async def test_an_edited_pyproject_is_read_again_and_reloads(echo_package):
    async with running(echo_package) as app:
        echo_package.write(
            "alt_plugin.py",
            """\
            from chord import hookimpl

            from .session import session_facet


            @hookimpl
            def chord_facets(host):
                return [session_facet]
            """,
        )
        first = await app.next_report()  # the new module is a source change of its own
        assert first.ok, first.message
        pyproject = echo_package.project / "pyproject.toml"
        pyproject.write_text(
            pyproject.read_text().replace("echo_pkg.plugin", "echo_pkg.alt_plugin")
        )
        report = await app.next_report()
        assert report.ok, report.message
        assert pyproject in report.changes
        assert app.coordinator.generation("echo").package.plugin_module == "echo_pkg.alt_plugin"


@pytest.mark.anyio
async def test_a_disposed_coordinator_refuses_to_reload(echo_package):
    async with running(echo_package, watch=False) as app:
        serving = app.coordinator.generation("echo")
        await app.coordinator.dispose()
        assert serving.disposed
        with pytest.raises(RuntimeError, match="disposed"):
            await app.coordinator.reload("echo")
