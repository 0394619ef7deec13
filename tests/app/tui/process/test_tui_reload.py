"""``/reload`` and ``--dev`` in the TUI process (issue 8 §4, §6).

A small feature package in a ``--facets-dir`` folder has both halves: a session facet in the
worker serving ``test.greeter`` (its ``version``), and a TUI facet registering the command
``/greet-<VERSION>``, which toasts its own version and the worker's. Editing ``VERSION`` shows
which code each process runs:

* ``/reload`` reloads the package in both processes: the new command appears and reports the
  new version from both sides, and the summary toast names the package for each;
* with ``--dev`` the TUI watches the folder: an edit swaps in the new command without a restart,
  and a syntax error shows an error toast while the old command keeps working;
* a re-scan reports what a running host cannot take in (a new package, a vanished one, an
  unreadable folder) as needing a restart, and still reloads the rest.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.facet_packages import ReloadCoordinator, facet_package_from_folder, load_generation
from chord.facets import create_facet_host
from coding_agent.session_files.folders import Session
from coding_agent.settings.package_reload import PackageReloader, scan_packages
from coding_agent.supervisor import WorkerSupervisor
from coding_agent.tui import ClientRun, run_client

pytestmark = pytest.mark.anyio

PLUGIN = '''
"""A test feature package: one service in the worker, one command in the TUI."""

from chord.context import Context
from chord.facets import define_facet
from chord import hookimpl
from chord.services import define_service
from chord.textual import Tui

VERSION = "v1"
Greeter = define_service("test.greeter")


class _Greeter:
    async def version(self, ctx: Context) -> str:
        return VERSION


@define_facet("test/greeter-session")
def session_facet(env):
    env.provide(Greeter, _Greeter())


@define_facet("test/greeter-tui")
def tui_facet(env):
    tui = env.use(Tui)
    greeter = env.use(Greeter)

    async def greet(args, ctx):
        tui.notify(f"greet: tui {VERSION} / worker {await greeter.version(ctx)}")

    env.on_activate(lambda: env.own(tui.register_command(f"greet-{VERSION}", "Greet", greet)))


@hookimpl
def chord_facets(host):
    return {"session": [session_facet], "tui": [tui_facet]}.get(host, [])
'''


def _package(tmp_path: Path) -> Path:
    package = tmp_path / "greeter"
    package.mkdir()
    (package / "__init__.py").write_text('"""The greeter test package."""\n')
    (package / "plugin.py").write_text(PLUGIN)
    return package


def _set_version(package: Path, version: str) -> None:
    plugin = package / "plugin.py"
    plugin.write_text(plugin.read_text().replace('VERSION = "v1"', f'VERSION = "{version}"'))


async def _drive(
    session: Session,
    keeper: WorkerSupervisor,
    package: Path,
    test: Callable[[Any], Awaitable[None]],
    *,
    kit: Any,
    dev: bool = False,
) -> ClientRun:
    async def pilot_then_exit(pilot: Any) -> None:
        await test(pilot)
        pilot.app.exit()

    with anyio.fail_after(kit.TIMEOUT * 4):
        return await run_client(
            session,
            supervisor=keeper,
            facets_dirs=[package],
            dev=dev,
            headless=True,
            size=(110, 45),
            auto_pilot=pilot_then_exit,
        )


async def _greet(kit: Any, pilot: Any, version: str) -> str:
    """Run ``/greet-<version>`` and return the toast it shows."""
    app = kit.app_of(pilot)
    # Every toast shown from here on (a slow machine may expire a toast before it is read).
    shown: list[str] = []
    original = app.notify

    def notify(message: Any, *args: Any, **kwargs: Any) -> Any:
        shown.append(str(message))
        return original(message, *args, **kwargs)

    app.notify = notify
    try:
        await pilot.press(*f"/greet-{version}", "enter")

        def greeting() -> str | None:
            return next((m for m in shown if m.startswith("greet:")), None)

        await kit.wait_for(pilot, greeting, f"the /greet-{version} toast")
    finally:
        del app.notify  # the class's own again
    found = greeting()
    assert found is not None
    return found


async def test_reload_reloads_the_package_in_the_worker_and_the_tui(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    package = _package(tmp_path)
    keeper = WorkerSupervisor(session, facets_dirs=[package], exit_with_parent=True, env=agent_env)
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the view")
        seen["v1"] = await _greet(kit, pilot, "v1")
        _set_version(package, "v2")
        await pilot.press(*"/reload", "enter")
        await kit.wait_for(
            pilot, lambda: any(m.startswith("Reloaded") for _, m in kit.toasts(app)), "the summary"
        )
        seen["summary"] = next((s, m) for s, m in kit.toasts(app) if m.startswith("Reloaded"))
        seen["commands"] = sorted(c for c in app.tui.commands if c.startswith("greet"))
        seen["v2"] = await _greet(kit, pilot, "v2")

    await _drive(session, keeper, package, test, kit=kit)
    assert seen["v1"] == "greet: tui v1 / worker v1"
    assert seen["commands"] == ["greet-v2"]
    assert seen["v2"] == "greet: tui v2 / worker v2"
    severity, summary = seen["summary"]
    worker_part, tui_part = summary.splitlines()[0].removeprefix("Reloaded — ").split("; ")
    assert worker_part.startswith("worker: ") and "greeter" in worker_part
    assert tui_part.startswith("TUI: ") and "greeter" in tui_part
    assert severity == "information"


async def test_reload_names_a_broken_package_and_keeps_the_old_code_serving(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    package = _package(tmp_path)
    keeper = WorkerSupervisor(session, facets_dirs=[package], exit_with_parent=True, env=agent_env)
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the view")
        (package / "plugin.py").write_text("def broken(:\n")
        await pilot.press(*"/reload", "enter")
        await kit.wait_for(
            pilot, lambda: any(m.startswith("Reloaded") for _, m in kit.toasts(app)), "the summary"
        )
        seen["toasts"] = kit.toasts(app)
        seen["v1"] = await _greet(kit, pilot, "v1")

    await _drive(session, keeper, package, test, kit=kit)
    severity, summary = next((s, m) for s, m in seen["toasts"] if m.startswith("Reloaded"))
    assert severity == "error"
    problems = summary.splitlines()[1:]
    assert [line.split(":", 1)[0] for line in problems] == ["greeter (worker)", "greeter (TUI)"]
    assert all("SyntaxError" in line for line in problems)
    # The worker's own failure toast is not repeated beside the summary.
    assert not any(m.startswith("Reload of greeter") for _, m in seen["toasts"])
    assert seen["v1"] == "greet: tui v1 / worker v1"


async def test_dev_mode_reloads_tui_facets_when_their_source_changes(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    package = _package(tmp_path)
    keeper = WorkerSupervisor(session, facets_dirs=[package], exit_with_parent=True, env=agent_env)
    seen: dict[str, Any] = {}

    def tui_failures(app: Any) -> list[str]:
        return [
            m
            for s, m in kit.toasts(app)
            if s == "error" and m.startswith("Reload of greeter (TUI)")
        ]

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        await kit.wait_for(pilot, lambda: kit.idle(app), "the view")
        _set_version(package, "v2")
        await kit.wait_for(
            pilot, lambda: "greet-v2" in app.tui.commands, "the edited command to appear"
        )
        seen["commands"] = sorted(c for c in app.tui.commands if c.startswith("greet"))
        await kit.wait_for(
            pilot,
            lambda: any(m == "Reloaded greeter (TUI)" for _, m in kit.toasts(app)),
            "the short notice of a successful hot reload",
        )
        # The worker does not watch (no --dev there): it still serves v1.
        seen["v2"] = await _greet(kit, pilot, "v2")
        (package / "plugin.py").write_text("def broken(:\n")
        await kit.wait_for(pilot, lambda: tui_failures(app), "the reload error toast")
        seen["failure"] = tui_failures(app)[0]
        seen["still"] = await _greet(kit, pilot, "v2")

    await _drive(session, keeper, package, test, kit=kit, dev=True)
    assert seen["commands"] == ["greet-v2"]
    assert seen["v2"] == "greet: tui v2 / worker v1"
    assert "SyntaxError" in seen["failure"]
    assert seen["still"] == "greet: tui v2 / worker v1"


EMPTY_PLUGIN = """
from chord import hookimpl


@hookimpl
def chord_facets(host):
    return []
"""


ONE_FACET_PLUGIN = """
from chord.facets import define_facet
from chord import hookimpl


@hookimpl
def chord_facets(host):
    return [define_facet("test/beta", lambda env: None)]
"""


def _empty_package(folder: Path) -> Path:
    folder.mkdir()
    (folder / "__init__.py").write_text('"""A facet package with no facets."""\n')
    (folder / "plugin.py").write_text(EMPTY_PLUGIN)
    return folder


async def test_a_rescan_adds_new_packages_retires_gone_ones_and_reports_unreadable_folders(
    tmp_path: Path,
) -> None:
    alpha = _empty_package(tmp_path / "alpha")
    folders: list[Path] = [alpha]
    reloader = PackageReloader(lambda: scan_packages(folders, installed=False), "tui")
    with pytest.raises(RuntimeError, match="cannot be reloaded yet"):
        await reloader.reload_all()
    generation = load_generation(facet_package_from_folder(alpha)[0], "tui")
    async with create_facet_host([]) as host:
        coordinator = ReloadCoordinator(host, [generation])
        reloader.coordinator = coordinator
        try:
            first = await reloader.reload_all()
            folders[:] = [_empty_package(tmp_path / "beta"), tmp_path / "missing"]
            second = await reloader.reload_all()
            broken = _empty_package(tmp_path / "gamma")
            (broken / "plugin.py").write_text("def broken(:\n")
            folders.append(broken)
            third = await reloader.reload_all()
            serving = sorted(coordinator.generations)
            (tmp_path / "beta" / "plugin.py").write_text(ONE_FACET_PLUGIN)  # a shape change
            fourth = await reloader.reload_all()
            facet_ids = host.facet_ids
        finally:
            await coordinator.dispose()
    assert [(o["package"], o["outcome"], o["ok"]) for o in first] == [("alpha", "reloaded", True)]
    assert [(o["package"], o["outcome"], o["ok"]) for o in second] == [
        ("(scan)", "failed", False),
        ("alpha", "removed", True),
        ("beta", "added", True),
    ]
    assert "missing" in second[0]["message"] and "does not exist" in second[0]["message"]
    # A new package that fails to load is reported; nothing else changes.
    gamma = next(o for o in third if o["package"] == "gamma")
    assert (gamma["outcome"], gamma["ok"]) == ("failed", False)
    assert "SyntaxError" in gamma["message"] and "nothing was added" in gamma["message"]
    assert serving == ["beta"]
    beta = next(o for o in fourth if o["package"] == "beta")
    assert (beta["outcome"], beta["ok"]) == ("reloaded", True)
    assert "changed its shape: retired and added again" in beta["message"]
    assert facet_ids == ["test/beta"]
