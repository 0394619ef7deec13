"""Session-worker reload (docs/design/reload.md#session-worker-reload): hold → reload → release when quiescent, suspend →
reload → reopen otherwise, wired to chord's ``ReloadCoordinator`` as its ``around_reload`` hook.

The feature under reload is a real facet package written to a temporary folder and loaded as a
generation (fresh modules per generation), exactly as ``--dev`` mode loads one. Its session facet
registers a task kind ``test.steps`` through ``pi.harness``'s ``add_registration`` in
``on_activate`` (owned by ``env.own``) and logs every register and unregister with the code
version (``version.py``) into a list handed over through ``HarnessOptions.services``, so the
test sees which generation did what, in which order.
"""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from chord.facet_packages import (
    FacetPackage,
    ReloadCoordinator,
    ReloadReport,
    facet_package_from_folder,
    load_generation,
)
from chord.facets import FacetEnvironment, FacetHost, create_facet_host, define_facet
from pico3 import HarnessService, HarnessServiceApi, harness_session_facet
from pico3.facets.around_reload import ReloadPath, reload_session_facets, session_around_reload
from pico3.harness import Harness, HarnessOptions
from pico3.storage import MemoryStorage

pytestmark = pytest.mark.anyio

TIMEOUT = 20

PYPROJECT = """\
[project]
name = "steps-facets"
version = "0.1.0"

[project.entry-points."chord.facets"]
steps = "steps_pkg.plugin"
"""

SESSION = """\
from __future__ import annotations

from chord.facets import define_facet
from pico3.facets.contract import HarnessService
from pico3.tasks import Completion, Done, Next, define_task

from . import version


def make_kind(services):
    log, changed, gate = services["log"], services["changed"], services["gate"]

    def note(line):
        log.append(line)
        changed()

    async def initial(task, rt, ctx):
        note(f"{version.VERSION} initial")
        return Next({"phase": "work"})

    async def work(task, rt, ctx):
        note(f"{version.VERSION} work")
        await gate.wait()
        done = {"version": version.VERSION}
        return Done(lambda tx, current, c: Completion.completed(done))

    async def abort(task, rt, ctx):
        return lambda tx, current, c: None

    return define_task("test.steps", initial=initial, phases={"work": work}, abort=abort)


def setup(env):
    harness = env.use(HarnessService)

    def install(h):
        services = h.scheduler.services
        unregister = h.register_task_kind(make_kind(services))
        services["log"].append(f"register {version.VERSION}")

        def undo():
            unregister()
            services["log"].append(f"unregister {version.VERSION}")

        return undo

    async def activate():
        env.own(harness.add_registration(install))
        probe = harness.harness.scheduler.services.get("probe") if harness.is_open else None
        if probe is not None:
            await probe(harness.harness)

    env.on_activate(activate)


session_facet = define_facet("test/steps", setup)
"""

PLUGIN = """\
from __future__ import annotations

from chord import hookimpl

from .session import session_facet


@hookimpl
def chord_facets(host):
    return [session_facet] if host == "session" else []
"""


def write_package(root: Path) -> Path:
    project = root / "steps-facets"
    source = project / "src" / "steps_pkg"
    source.mkdir(parents=True)
    (project / "pyproject.toml").write_text(PYPROJECT)
    for name, text in {
        "__init__.py": "",
        "session.py": SESSION,
        "plugin.py": PLUGIN,
        "version.py": 'VERSION = "v1"\n',
    }.items():
        (source / name).write_text(textwrap.dedent(text))
    return project


def set_version(project: Path, version: str) -> None:
    (project / "src" / "steps_pkg" / "version.py").write_text(f"VERSION = {version!r}\n")


class Changes:
    """A waitable 'the log changed' signal."""

    def __init__(self) -> None:
        self._event = anyio.Event()

    def notify(self) -> None:
        event, self._event = self._event, anyio.Event()
        event.set()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        with anyio.fail_after(TIMEOUT):
            while not predicate():
                await self._event.wait()


@dataclass
class Worker:
    host: FacetHost
    harness: HarnessServiceApi
    package: FacetPackage
    project: Path
    log: list[str]
    changes: Changes
    gate: anyio.Event
    probes: list[Callable[[Harness], Awaitable[None]]]
    paths: list[ReloadPath] = field(default_factory=list[ReloadPath])

    @property
    def pico(self) -> Harness:
        return self.harness.harness

    async def create_task(self) -> int:
        kind = self.pico.scheduler.kinds.get("test.steps")
        root = await self.pico.root(BACKGROUND)
        return await root.commit(lambda tx, _c: tx.create_task(kind, None), BACKGROUND)

    async def outcome(self, task_id: int) -> Any:
        with anyio.fail_after(TIMEOUT):
            return (await self.pico.wait_for_task(task_id, BACKGROUND)).outcome


@asynccontextmanager
async def worker(tmp_path: Path) -> AsyncIterator[tuple[Worker, ReloadCoordinator]]:
    """A session worker in ``--dev`` mode: the harness facet, the loaded package's facets, and a
    coordinator whose ``around_reload`` is :func:`session_around_reload`."""
    project = write_package(tmp_path)
    (package,) = facet_package_from_folder(project)
    initial = [load_generation(package, "session")]
    log: list[str] = []
    changes = Changes()
    gate = anyio.Event()
    probes: list[Callable[[Harness], Awaitable[None]]] = []

    async def probe(h: Harness) -> None:
        for check in probes:
            await check(h)

    services: dict[str, Any] = {
        "log": log,
        "changed": changes.notify,
        "gate": gate,
        "probe": probe,  # run by the package's on_activate; the test adds checks to `probes`
    }
    options = HarnessOptions(services=services)
    handles: list[HarnessServiceApi] = []

    def own(env: FacetEnvironment) -> None:
        handles.append(env.use(HarnessService))

    storage = MemoryStorage()
    coordinator: ReloadCoordinator | None = None
    try:
        async with anyio.create_task_group() as group:
            harness_facet = harness_session_facet(lambda: storage, options, task_group=group)
            async with create_facet_host(
                [harness_facet, *initial[0].facets, define_facet("test/worker", own)]
            ) as host:
                (harness,) = handles
                await harness.resume(BACKGROUND)
                w = Worker(host, harness, package, project, log, changes, gate, probes)
                coordinator = ReloadCoordinator(
                    host,
                    initial,
                    around_reload=session_around_reload(harness, on_path=w.paths.append),
                )
                initial.clear()
                yield w, coordinator
            group.cancel_scope.cancel()
    finally:
        if coordinator is not None:
            await coordinator.dispose()
        for generation in initial:
            generation.purge()


async def reload(coordinator: ReloadCoordinator, w: Worker, version: str) -> ReloadReport:
    set_version(w.project, version)
    report = await coordinator.reload(w.package.name)
    assert report.ok, report.message
    return report


async def test_a_quiescent_harness_is_held_not_suspended_and_old_unregisters_first(
    tmp_path: Path,
) -> None:
    # the old unregister runs before the new register
    async with worker(tmp_path) as (w, coordinator):
        opening = w.pico
        assert w.log == ["register v1"]
        assert w.harness.quiescent()
        await reload(coordinator, w, "v2")
        assert w.paths == ["quiescent"]
        assert w.pico is opening  # never suspended: the same opening serves on
        assert w.log == ["register v1", "unregister v1", "register v2"]
        # Released: new work dispatches, with the new code.
        task_id = await w.create_task()
        await w.changes.wait_for(lambda: "v2 work" in w.log)
        w.gate.set()
        assert await w.outcome(task_id) == {"status": "completed", "result": {"version": "v2"}}


async def test_dispatch_is_held_during_the_quiescent_swap_and_released_after(
    tmp_path: Path,
) -> None:
    seen: list[str] = []
    created: list[int] = []

    async def probe(h: Harness) -> None:
        # Runs in the new facet's on_activate, inside the swap: commits go on, dispatch waits.
        kind = h.scheduler.kinds.get("test.steps")
        root = await h.root(BACKGROUND)
        task_id = await root.commit(lambda tx, _c: tx.create_task(kind, None), BACKGROUND)
        created.append(task_id)
        await anyio.wait_all_tasks_blocked()  # everything else idles: nothing dispatched it
        task = await h.get_task(task_id, BACKGROUND)
        assert task is not None
        seen.append(task.status)

    async with worker(tmp_path) as (w, coordinator):
        w.probes.append(probe)
        await reload(coordinator, w, "v2")
        assert w.paths == ["quiescent"]
        assert seen == ["pending"]
        (task_id,) = created
        await w.changes.wait_for(lambda: "v2 work" in w.log)  # released: it runs now
        w.gate.set()
        assert await w.outcome(task_id) == {"status": "completed", "result": {"version": "v2"}}


async def test_a_busy_harness_is_suspended_reloaded_and_reopened_and_the_task_resumes(
    tmp_path: Path,
) -> None:
    async with worker(tmp_path) as (w, coordinator):
        opening = w.pico
        task_id = await w.create_task()
        await w.changes.wait_for(lambda: "v1 work" in w.log)  # an invocation is running
        assert not w.harness.quiescent()
        await reload(coordinator, w, "v2")
        assert w.paths == ["reopened"]
        assert w.pico is not opening  # suspended and reopened
        # The running task was not terminalized: recovery re-entered its phase with v2's kind.
        await w.changes.wait_for(lambda: "v2 work" in w.log)
        assert w.log == ["register v1", "v1 initial", "v1 work", "register v2", "v2 work"]
        w.gate.set()
        assert await w.outcome(task_id) == {"status": "completed", "result": {"version": "v2"}}


async def test_reload_session_facets_guards_a_direct_host_reload(tmp_path: Path) -> None:
    async with worker(tmp_path) as (w, coordinator):
        # The coordinator owns generation 1; reload a second, independent one directly.
        set_version(w.project, "v2")
        candidate = load_generation(w.package, "session")
        try:
            path = await reload_session_facets(w.harness, w.host, candidate.facets, BACKGROUND)
            assert path == "quiescent"
            assert w.log == ["register v1", "unregister v1", "register v2"]
            task_id = await w.create_task()
            await w.changes.wait_for(lambda: "v2 work" in w.log)
            set_version(w.project, "v3")
            third = load_generation(w.package, "session")
            try:
                path = await reload_session_facets(w.harness, w.host, third.facets, BACKGROUND)
                assert path == "reopened"
                await w.changes.wait_for(lambda: "v3 work" in w.log)
                w.gate.set()
                assert await w.outcome(task_id) == {
                    "status": "completed",
                    "result": {"version": "v3"},
                }
            finally:
                await w.host.reload(coordinator.generation(w.package.name).facets)
                third.purge()
        finally:
            candidate.purge()


async def test_a_failed_swap_still_reopens_the_harness(tmp_path: Path) -> None:
    async with worker(tmp_path) as (w, coordinator):
        task_id = await w.create_task()
        await w.changes.wait_for(lambda: "v1 work" in w.log)
        (w.project / "src" / "steps_pkg" / "session.py").write_text(
            SESSION.replace("def setup(env):", "def setup(env):\n    raise RuntimeError('boom')")
        )
        report = await coordinator.reload(w.package.name, [])
        assert report.outcome == "failed" and "boom" in report.message
        assert w.paths == []  # the hook reports a path only when the swap returned
        assert w.harness.is_open  # reopened despite the failure, with generation 1's code
        await w.changes.wait_for(lambda: w.log.count("v1 work") == 2)
        w.gate.set()
        assert await w.outcome(task_id) == {"status": "completed", "result": {"version": "v1"}}


async def test_a_reload_while_the_harness_is_suspended_swaps_for_the_next_opening(
    tmp_path: Path,
) -> None:
    async with worker(tmp_path) as (w, coordinator):
        await w.harness.suspend(BACKGROUND)
        await reload(coordinator, w, "v2")
        assert w.paths == ["closed"]
        assert w.log == ["register v1"]  # nothing was open to unregister from or register on
        await w.harness.reopen(BACKGROUND)
        assert w.log == ["register v1", "register v2"]
        task_id = await w.create_task()
        await w.changes.wait_for(lambda: "v2 work" in w.log)
        w.gate.set()
        assert await w.outcome(task_id) == {"status": "completed", "result": {"version": "v2"}}
