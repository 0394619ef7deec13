"""``/reload`` on demand: re-scan the feature packages and reload every loaded one, in any host.

``--dev`` reloads a facet package when its sources change (a
:class:`~chord.facet_packages.ReloadCoordinator` watching the files). ``/reload`` is the same swap asked
for by a person, for every package at once, in both processes: the session worker reloads its
``"session"`` facets, the TUI process its ``"tui"`` facets. :class:`PackageReloader` is the part
both share. Given the host's coordinator and a way to scan for packages, :meth:`reload_all`:

1. scans again (installed entry points and the ``--facets-dir`` folders; a folder that cannot be
   read is reported, and the other packages still reload);
2. reloads every loaded package whose declaration is unchanged, through the coordinator (so a
   broken edit keeps the old generation serving, exactly as with ``--dev``);
3. adds a package found now that was not loaded (installed with ``coding-agent facets add``,
   say) and retires one that is gone (``facets remove``), in the running host
   (:meth:`~chord.facet_packages.ReloadCoordinator.add` / ``remove``); a package whose declaration
   changed, or whose facets or services changed (reloading it in place would need a restart),
   is retired and added again. A package that fails to load or activate is reported
   ``failed`` and the running facets keep serving.

Each outcome is one JSON object (the same shape the worker's status uses for reload reports)::

    {"package": "greeter", "outcome": "reloaded", "ok": true,
     "message": "facet package 'greeter' reloaded as generation 7"}

The worker serves its reloader to every TUI as the remotable singleton :data:`ReloadService`
(``coding-agent.reload``): ``await handle.reload(ctx)`` returns the outcome list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import anyio

from chord import Context
from coding_agent.contracts import ReloadOutcome, ReloadService

if TYPE_CHECKING:  # start-up time: the TUI makes its reloader before the first frame, and
    # chord.facets and chord.facet_packages (the host, discovery, generations, the
    # coordinator) load after it
    from chord import (
        Facet,
        FacetEnvironment,
        FacetPackage,
        ReloadCoordinator,
        ReloadReport,
    )

__all__ = [
    "RELOAD_FACET_ID",
    "PackageReloader",
    "PackageScan",
    "reload_service_facet",
    "scan_packages",
]

RELOAD_FACET_ID = "coding-agent/reload"


class PackageScan:
    """The packages one scan found, and the folders (or entry points) that could not be read."""

    def __init__(self, packages: Sequence[FacetPackage], problems: Sequence[str]) -> None:
        self.packages = {package.name: package for package in packages}
        self.problems = list(problems)


def scan_packages(folders: Sequence[str | Path] = (), *, installed: bool = True) -> PackageScan:
    """Find the facet packages again: installed entry points (unless ``installed`` is off) and
    ``folders``, a folder's package replacing an installed one of the same name.

    Unlike :func:`chord.facet_packages.discover_facet_packages`, nothing raises: a broken entry point
    or folder becomes a problem (its message names it) and the rest is still found.
    """
    # lazy: start-up time (see the TYPE_CHECKING imports above)
    from chord import FacetDiscoveryError, facet_package_from_folder, installed_facet_packages

    problems: list[str] = []
    found: dict[str, FacetPackage] = {}
    if installed:
        from coding_agent.settings.facets_site import activate

        activate()  # made by a `facets add` after this process started: /reload finds it
        for package in installed_facet_packages(on_error=lambda error: problems.append(str(error))):
            found[package.name] = package
    for folder in folders:
        try:
            packages = facet_package_from_folder(folder)
        except FacetDiscoveryError as error:
            problems.append(str(error))
            continue
        for package in packages:
            found[package.name] = package
    return PackageScan([found[name] for name in sorted(found)], problems)


def _outcome(
    package: str,
    outcome: Literal["reloaded", "added", "removed", "failed", "restart_required"],
    message: str,
) -> ReloadOutcome:
    ok = outcome in ("reloaded", "added", "removed")
    return {"package": package, "outcome": outcome, "ok": ok, "message": message}


def _from_report(report: ReloadReport) -> ReloadOutcome:
    entry = _outcome(report.package, report.outcome, report.message)
    entry["ok"] = report.ok
    return entry


class PackageReloader:
    """Re-scan and reload every facet package of one host (see the module docstring).

    ``scan`` finds the packages now (typically :func:`scan_packages` over the host's folders).
    :attr:`coordinator` is set once the host runs (it owns the loaded generations);
    :meth:`reload_all` before that fails with a clear message. ``kind`` is the host kind new
    packages are loaded for (``"session"`` or ``"tui"``). :attr:`busy` is true while a
    :meth:`reload_all` runs, so a report callback can leave the toasting to its caller.
    """

    def __init__(self, scan: Callable[[], PackageScan], kind: str = "session") -> None:
        self._scan = scan
        self._kind = kind
        self.coordinator: ReloadCoordinator | None = None
        self.busy = False

    async def reload_all(self) -> list[ReloadOutcome]:
        """Reload every package; one :class:`ReloadOutcome` each, sorted by package name."""
        coordinator = self.coordinator
        if coordinator is None:
            raise RuntimeError("facet packages cannot be reloaded yet (the host is starting)")
        self.busy = True
        try:
            return await self._reload_all(coordinator)
        finally:
            self.busy = False

    async def _reload_all(self, coordinator: ReloadCoordinator) -> list[ReloadOutcome]:
        scan = self._scan()
        loaded = coordinator.generations
        outcomes: list[ReloadOutcome] = [
            _outcome("(scan)", "failed", problem) for problem in scan.problems
        ]
        for name in sorted(set(loaded) | set(scan.packages)):
            found = scan.packages.get(name)
            generation = loaded.get(name)
            if generation is None:
                assert found is not None
                outcomes.append(_from_report(await coordinator.add(found, self._kind)))
            elif found is None:
                outcomes.append(_from_report(await coordinator.remove(name)))
            elif found != generation.package:
                outcomes.append(await self._replace(coordinator, found, "was declared anew"))
            else:
                report = await coordinator.reload(name)
                if report.outcome == "restart_required":  # its facets or services changed
                    outcomes.append(await self._replace(coordinator, found, "changed its shape"))
                else:
                    outcomes.append(_from_report(report))
        return outcomes

    async def _replace(
        self, coordinator: ReloadCoordinator, package: FacetPackage, why: str
    ) -> ReloadOutcome:
        """Retire ``package``'s running generation and add its new one (a shape change)."""
        removed = await coordinator.remove(package.name)
        if not removed.ok:
            return _from_report(removed)
        added = _from_report(await coordinator.add(package, self._kind))
        if added["ok"]:
            added["outcome"] = "reloaded"
            added["message"] = f"facet package {package.name!r} {why}: retired and added again"
        return added


class _Requests:
    """The served :class:`ReloadRequests`: every reload runs to its end, even when the TUI
    that asked goes away meanwhile (a swap is short, and must not be cut half-way)."""

    def __init__(self, reloader: PackageReloader) -> None:
        self._reloader = reloader

    async def reload(self, ctx: Context) -> list[ReloadOutcome]:
        del ctx
        outcomes: list[ReloadOutcome] | None = None
        with anyio.CancelScope(shield=True):  # nobody cancels a shielded scope: it runs through
            outcomes = await self._reloader.reload_all()
        assert outcomes is not None
        return outcomes


def reload_service_facet(reloader: PackageReloader) -> Facet:
    """The facet providing :data:`ReloadService` from ``reloader`` (in the session worker)."""
    from chord import define_facet  # lazy: see the TYPE_CHECKING import above

    def setup(env: FacetEnvironment) -> None:
        env.provide(ReloadService, _Requests(reloader))

    return define_facet(RELOAD_FACET_ID, setup)
