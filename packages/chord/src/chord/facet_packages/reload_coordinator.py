"""Hot reload: watch facet packages' sources and swap new generations into a running host.

The coordinator sits *outside* the facet graph (docs/design/reload.md#coordinator). It holds the current
:class:`~chord.facet_packages.generation.FacetGeneration` of every loaded package and, when the sources
of one change:

1. loads a *candidate* generation of that package (fresh modules, compiled from source);
2. calls ``host.reload(candidate.facets)`` (docs/design/decisions.md#d4: set up, check shape, retire the old
   facets, activate the new ones; singleton handles keep their identity) — wrapped in the
   application's ``around_reload`` hook when given, so the app can make the moment safe (the
   session worker holds or suspends its harness, docs/design/reload.md#session-worker-reload);
3. on success disposes the *retired* generation, on failure the *candidate*.

Whatever goes wrong — a syntax error, an import error, a failing ``setup``, a failed activation —
the running generation keeps serving, and the outcome is delivered as a :class:`ReloadReport`: to
the log (logger ``chord.facet_packages.reload``) and to the ``on_report`` callback the app shows.
A change of *shape* (services or facets added or removed) cannot be reloaded in place; it is
refused with "restart required" and reported the same way. A package installed or uninstalled
while the app runs is added with :meth:`ReloadCoordinator.add` or retired with
:meth:`ReloadCoordinator.remove` (``host.add`` / ``host.retire``, inside ``around_reload``), with
the same rule: a failure leaves the running generations serving.

Watching uses :func:`watchfiles.awatch` over each reloadable package's source folder (``*.py``,
recursively) and its project folder (``pyproject.toml`` only, not recursively, so a project's
``.venv`` is never walked). Changes are coalesced twice: watchfiles closes a batch after
``step_ms`` of quiet, and changes arriving while a reload runs are merged into one follow-up
reload, so a burst of saves ends in one reload of the final code. Reloads never overlap.

``run()`` stops promptly when cancelled or on :meth:`ReloadCoordinator.stop`: it sets the
watcher's ``stop_event`` first, so the watcher thread returns within one step instead of at the
Rust timeout.

Why one module: ``ReloadCoordinator`` is one class: watching, coalescing, loading a candidate,
swapping it in and disposing the loser all act on its table of current generations and its one-
reload-at-a-time rule; the reporter, stop signal and source filter are small helpers only it uses.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
import msgspec

from chord.facet_packages.discovery import FacetDiscoveryError, FacetPackage
from chord.facet_packages.generation import FacetGeneration, FacetLoadError, load_generation
from chord.facets.facet import Facet

if TYPE_CHECKING:
    from watchfiles import Change

__all__ = [
    "AroundReload",
    "ReloadCoordinator",
    "ReloadOutcome",
    "ReloadReport",
    "ReloadableHost",
]

_logger = logging.getLogger("chord.facet_packages.reload")  # the documented log name

ReloadOutcome = Literal["reloaded", "added", "removed", "failed", "restart_required"]

AroundReload = Callable[[Callable[[], Awaitable[None]]], Awaitable[None]]
"""The app's hook around a swap: ``await around_reload(perform)`` must await ``perform()`` once.

For the session worker (docs/design/reload.md#session-worker-reload)::

    async def around_reload(perform):
        if harness.quiescent():
            release = harness.hold()
            try:
                await perform()
            finally:
                release()
        else:
            await harness.suspend(ctx)
            try:
                await perform()
            finally:
                await harness.reopen(ctx)
"""


class ReloadableHost(Protocol):
    """What the coordinator needs of a facet host: :meth:`chord.facets.FacetHost.reload`
    (and, for :meth:`ReloadCoordinator.add` and :meth:`ReloadCoordinator.remove`, ``add`` and
    ``retire``)."""

    async def reload(self, facets: Sequence[Facet]) -> None: ...


class ReloadReport(msgspec.Struct, frozen=True):
    """The outcome of one reload attempt of one facet package.

    ``generation`` is the generation serving the package afterwards (the candidate after a
    successful reload, the previous one otherwise). ``stage`` says where a failure happened:
    ``"load"`` (importing the candidate or collecting its facets) or ``"reload"`` (the host
    refused or failed the swap, or the ``around_reload`` hook failed). ``error`` keeps the
    exception (and through its traceback the failed candidate's objects, until the report is
    dropped). A reload that swapped but whose ``around_reload`` hook failed afterwards is
    ``"reloaded"`` *with* an ``error``.
    """

    package: str
    outcome: ReloadOutcome
    message: str
    generation: int
    candidate: int | None = None
    stage: Literal["load", "reload"] | None = None
    changes: tuple[Path, ...] = ()
    error: BaseException | None = None
    duration: float = 0.0
    """Seconds from starting the load to the end of the swap (or failure)."""

    @property
    def ok(self) -> bool:
        """The new code serves (or the package was added or removed) and nothing failed."""
        return self.outcome in ("reloaded", "added", "removed") and self.error is None


class _Reporter:
    """The reports of one attempt on one package: its name, its changes, and its clock.

    ``generation`` is read when a report is made (the generation serving afterwards), unless the
    call names it.
    """

    __slots__ = ("_generation", "_started", "changes", "package")

    def __init__(
        self, package: str, generation: Callable[[], int], changes: tuple[Path, ...] = ()
    ) -> None:
        self.package = package
        self.changes = changes
        self._generation = generation
        self._started = time.perf_counter()

    def __call__(
        self,
        outcome: ReloadOutcome,
        message: str,
        *,
        generation: int | None = None,
        candidate: int | None = None,
        stage: Literal["load", "reload"] | None = None,
        error: BaseException | None = None,
    ) -> ReloadReport:
        return ReloadReport(
            package=self.package,
            outcome=outcome,
            message=message,
            generation=self._generation() if generation is None else generation,
            candidate=candidate,
            stage=stage,
            changes=self.changes,
            error=error,
            duration=time.perf_counter() - self._started,
        )


class _StopSignal:
    """The ``stop_event`` handed to :func:`watchfiles.awatch`.

    The watcher thread polls :meth:`is_set` once per step, starting only once the file system
    watches are installed; the first poll therefore tells the event loop that watching has begun
    (no edit made after that can be missed). A :class:`threading.Event` keeps the flag safe to read
    from that thread.
    """

    def __init__(self, ready: anyio.Event, token: anyio.lowlevel.EventLoopToken) -> None:
        self._flag = threading.Event()
        self._ready: anyio.Event | None = ready
        self._token = token

    def set(self) -> None:
        self._flag.set()

    def is_set(self) -> bool:
        ready, self._ready = self._ready, None
        if ready is not None and not self._flag.is_set():
            anyio.from_thread.run_sync(ready.set, token=self._token)
        return self._flag.is_set()


class _SourceFilter:
    """Python sources (recursive package watch) or ``pyproject.toml`` (project watch), of what
    ``watchfiles``' default filter lets through. (``watchfiles`` is imported when a watch starts:
    with ``multiprocessing`` ~20 ms, which a process that never watches, ``coding-agent -p``,
    does not pay.)"""

    def __init__(self, *, python: bool) -> None:
        from watchfiles import DefaultFilter

        self._default = DefaultFilter()
        self._python = python

    def __call__(self, change: Change, path: str) -> bool:
        if not self._default(change, path):
            return False
        if self._python:
            return path.endswith(".py")
        return os.path.basename(path) == "pyproject.toml"


class ReloadCoordinator:
    """Keeps a host's facet packages current with their sources while the app runs.

    ``generations`` are the loaded generations whose facets the host was created with; from now
    on the coordinator owns them (and every later one): it disposes each retired generation, and
    :meth:`dispose` releases the current ones after the host is gone. Use it as::

        generations = load_facet_packages(discover_facet_packages(folders), "session")
        facets = [facet for generation in generations for facet in generation.facets]
        async with create_facet_host([*builtin_facets, *facets]) as host:
            coordinator = ReloadCoordinator(host, generations, on_report=show)
            del generations, facets      # the coordinator owns them: let retired ones go
            async with anyio.create_task_group() as tg:
                await tg.start(coordinator.run)
                ...                      # the app runs; edits reload
                tg.cancel_scope.cancel()
        await coordinator.dispose()

    Only :attr:`~chord.facet_packages.discovery.FacetPackage.reloadable` packages (editable installs
    and development folders) are watched; :meth:`reload` reloads any package on demand.
    """

    def __init__(
        self,
        host: ReloadableHost,
        generations: Iterable[FacetGeneration],
        *,
        on_report: Callable[[ReloadReport], None] | None = None,
        around_reload: AroundReload | None = None,
        step_ms: int = 50,
        debounce_ms: int = 1600,
        force_polling: bool | None = None,
    ) -> None:
        if step_ms <= 0 or debounce_ms < step_ms:
            raise ValueError(
                f"step_ms must be positive and debounce_ms at least step_ms "
                f"(got step_ms={step_ms}, debounce_ms={debounce_ms})"
            )
        current: dict[str, FacetGeneration] = {}
        for generation in generations:
            name = generation.package.name
            if name in current:
                raise ValueError(f"facet package {name!r} is given twice")
            if generation.disposed:
                raise ValueError(f"generation {generation.number} of {name!r} is already disposed")
            current[name] = generation
        self._host = host
        self._current = current
        self._on_report = on_report
        self._around_reload = around_reload
        self._step_ms = step_ms
        self._debounce_ms = debounce_ms
        self._force_polling = force_polling
        self._lock = anyio.Lock()
        self._dirty: dict[str, set[Path]] = {}
        self._wake = anyio.Event()
        self._stop_requested = anyio.Event()
        self._running = False
        self._disposed = False

    @property
    def generations(self) -> Mapping[str, FacetGeneration]:
        """The generation currently serving each package, by package name (a snapshot)."""
        return dict(self._current)

    def generation(self, package: str) -> FacetGeneration:
        """The generation currently serving ``package``."""
        try:
            return self._current[package]
        except KeyError:
            raise LookupError(f"no facet package named {package!r} is loaded") from None

    async def reload(self, package: str, changes: Iterable[str | Path] = ()) -> ReloadReport:
        """Reload ``package`` now (what a file change triggers); never raises for a bad reload.

        The report is also logged and passed to ``on_report``. Only cancellation propagates; a
        candidate that had not been swapped in is then disposed.
        """
        if self._disposed:
            raise RuntimeError("the reload coordinator is disposed")
        self.generation(package)  # unknown names fail before waiting for the lock
        async with self._lock:
            if self._disposed:
                raise RuntimeError("the reload coordinator is disposed")
            return self._deliver(await self._reload(package, tuple(Path(c) for c in changes)))

    async def _reload(self, name: str, changes: tuple[Path, ...]) -> ReloadReport:
        current = self._current[name]
        report = _Reporter(name, lambda: self._current[name].number, changes)

        try:
            package = current.package
            if any(path.name == "pyproject.toml" for path in changes):
                package = package.refreshed()
            candidate = load_generation(package, current.host)
        except (FacetLoadError, FacetDiscoveryError) as error:
            return report(
                "failed",
                f"{error}; generation {current.number} keeps serving",
                stage="load",
                error=error,
            )

        old_ids = [facet.id for facet in current.facets]
        new_ids = [facet.id for facet in candidate.facets]
        if sorted(old_ids) != sorted(new_ids):
            candidate.purge()
            added = sorted(set(new_ids) - set(old_ids)) or "-"
            removed = sorted(set(old_ids) - set(new_ids)) or "-"
            return report(
                "restart_required",
                f"facet package {name!r} changed its facets (added {added}, removed {removed}); "
                f"restart required. Generation {current.number} keeps serving",
                candidate=candidate.number,
                stage="reload",
            )

        swapped = False

        async def perform() -> None:
            nonlocal swapped
            if swapped:
                raise RuntimeError("around_reload called perform() twice")
            await self._host.reload(candidate.facets)
            swapped = True

        try:
            if self._around_reload is None:
                await perform()
            else:
                await self._around_reload(perform)
        except Exception as error:
            if swapped:
                await self._commit(name, current, candidate)
                return report(
                    "reloaded",
                    f"facet package {name!r} reloaded as generation {candidate.number}, "
                    f"but around_reload failed afterwards: {type(error).__name__}: {error}",
                    candidate=candidate.number,
                    stage="reload",
                    error=error,
                )
            candidate.purge()
            outcome: ReloadOutcome = "restart_required" if _restart_required(error) else "failed"
            return report(
                outcome,
                f"facet package {name!r} was not reloaded: {type(error).__name__}: {error}. "
                f"Generation {current.number} keeps serving",
                candidate=candidate.number,
                stage="reload",
                error=error,
            )
        except BaseException:
            if swapped:
                await self._commit(name, current, candidate)
            else:
                candidate.purge()
            raise
        if not swapped:
            candidate.purge()
            return report(
                "failed",
                f"facet package {name!r} was not reloaded: around_reload returned without "
                f"calling perform(). Generation {current.number} keeps serving",
                candidate=candidate.number,
                stage="reload",
            )
        await self._commit(name, current, candidate)
        return report(
            "reloaded",
            f"facet package {name!r} reloaded as generation {candidate.number}",
            candidate=candidate.number,
        )

    async def add(self, package: FacetPackage, kind: str) -> ReloadReport:
        """Load ``package`` for host kind ``kind`` and add its facets to the running host.

        A package already loaded is refused (reload it instead). On failure nothing is added
        and the running generations keep serving; the report says why. Never raises for a bad
        package (only cancellation propagates).
        """
        if self._disposed:
            raise RuntimeError("the reload coordinator is disposed")
        async with self._lock:
            return self._deliver(await self._add(package, kind))

    async def _add(self, package: FacetPackage, kind: str) -> ReloadReport:
        name = package.name
        report = _Reporter(name, lambda: 0)

        if name in self._current:
            return report("failed", f"facet package {name!r} is already loaded", stage="load")
        try:
            candidate = load_generation(package, kind)
        except (FacetLoadError, FacetDiscoveryError) as error:
            return report("failed", f"{error}; nothing was added", stage="load", error=error)
        add = getattr(self._host, "add", None)
        if add is None:
            candidate.purge()
            return report("restart_required", f"this host cannot add {name!r}; restart to load it")
        done = False

        async def perform() -> None:
            nonlocal done
            if done:
                raise RuntimeError("around_reload called perform() twice")
            await add(candidate.facets)
            done = True

        try:
            if candidate.facets:
                if self._around_reload is None:
                    await perform()
                else:
                    await self._around_reload(perform)
        except Exception as error:
            if not done:
                candidate.purge()
                return report(
                    "failed",
                    f"facet package {name!r} was not added: {type(error).__name__}: {error}. "
                    "The running facets keep serving",
                    generation=candidate.number,
                    candidate=candidate.number,
                    stage="reload",
                    error=error,
                )
        except BaseException:
            if done:
                self._current[name] = candidate
            else:
                candidate.purge()
            raise
        self._current[name] = candidate
        facets = ", ".join(facet.id for facet in candidate.facets) or "no facets for this host"
        return report(
            "added",
            f"facet package {name!r} added ({facets})",
            generation=candidate.number,
            candidate=candidate.number,
        )

    async def remove(self, package: str) -> ReloadReport:
        """Retire ``package``'s facets from the running host and dispose its generation."""
        if self._disposed:
            raise RuntimeError("the reload coordinator is disposed")
        current = self.generation(package)
        async with self._lock:
            started = time.perf_counter()
            retire = getattr(self._host, "retire", None)
            ids = [facet.id for facet in current.facets]
            try:
                if retire is None:
                    raise RuntimeError("this host cannot retire facets; restart required")
                if ids:

                    async def perform() -> None:
                        await retire(ids)

                    if self._around_reload is None:
                        await perform()
                    else:
                        await self._around_reload(perform)
            except Exception as error:
                return self._deliver(
                    ReloadReport(
                        package=package,
                        outcome="failed",
                        message=f"facet package {package!r} was not removed: {error}. "
                        f"Generation {current.number} keeps serving",
                        generation=current.number,
                        stage="reload",
                        error=error,
                        duration=time.perf_counter() - started,
                    )
                )
            del self._current[package]
            await current.dispose()
            return self._deliver(
                ReloadReport(
                    package=package,
                    outcome="removed",
                    message=f"facet package {package!r} removed",
                    generation=current.number,
                    duration=time.perf_counter() - started,
                )
            )

    async def _commit(self, name: str, old: FacetGeneration, new: FacetGeneration) -> None:
        self._current[name] = new
        await old.dispose()

    def _deliver(self, report: ReloadReport) -> ReloadReport:
        if report.ok:
            _logger.info("%s (%.0f ms)", report.message, report.duration * 1000)
        elif report.outcome == "restart_required":
            _logger.warning("%s", report.message)
        else:
            error = report.error
            exc_info = (type(error), error, error.__traceback__) if error is not None else None
            _logger.error("%s", report.message, exc_info=exc_info)
        if self._on_report is not None:
            try:
                self._on_report(report)
            except Exception:
                _logger.exception("the on_report callback of the reload coordinator failed")
        return report

    def stop(self) -> None:
        """Ask :meth:`run` to return (it stops the watchers first)."""
        self._stop_requested.set()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Watch the reloadable packages until cancelled or :meth:`stop` is called.

        With ``await task_group.start(coordinator.run)`` the start returns once the file system
        watches are in place: every edit from then on is seen.
        """
        if self._running:
            raise RuntimeError("the reload coordinator is already running")
        if self._disposed:
            raise RuntimeError("the reload coordinator is disposed")
        self._running = True
        sources: dict[Path, str] = {}
        projects: dict[Path, str] = {}
        for name, generation in self._current.items():
            package = generation.package
            if not package.reloadable:
                _logger.debug("facet package %r is installed, not editable: not watched", name)
                continue
            sources[package.package_dir] = name
            if package.pyproject is not None and package.project_dir is not None:
                projects[package.project_dir] = name
        signals: list[_StopSignal] = []
        try:
            async with anyio.create_task_group() as group:
                try:
                    token = anyio.lowlevel.current_token()
                    readiness: list[anyio.Event] = []
                    for folders, recursive in ((sources, True), (projects, False)):
                        if not folders:
                            continue
                        ready = anyio.Event()
                        signal = _StopSignal(ready, token)
                        readiness.append(ready)
                        signals.append(signal)
                        group.start_soon(self._watch, folders, recursive, signal)
                    group.start_soon(self._drain)
                    for ready in readiness:
                        await ready.wait()
                    task_status.started()
                    await self._stop_requested.wait()
                finally:
                    for signal in signals:
                        signal.set()
                    group.cancel_scope.cancel()
        finally:
            self._running = False
            if not self._disposed:
                self._stop_requested = anyio.Event()  # a later run() watches again

    async def _watch(
        self, folders: Mapping[Path, str], recursive: bool, signal: _StopSignal
    ) -> None:
        from watchfiles import awatch

        watch_filter = _SourceFilter(python=recursive)
        async for changes in awatch(
            *folders,
            watch_filter=watch_filter,
            step=self._step_ms,
            debounce=self._debounce_ms,
            stop_event=signal,  # pyright: ignore[reportArgumentType] - awatch needs is_set/set only
            recursive=recursive,
            force_polling=self._force_polling,
        ):
            touched = False
            for _change, raw in changes:
                path = Path(raw)
                name = _owner(path, folders, recursive)
                if name is not None:
                    self._dirty.setdefault(name, set()).add(path)
                    touched = True
            if touched:
                self._wake.set()

    async def _drain(self) -> None:
        """Reload what changed, one package at a time; changes made meanwhile coalesce."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            batch, self._dirty = self._dirty, {}
            for name, paths in sorted(batch.items()):
                if not self._disposed and name in self._current:
                    await self.reload(name, sorted(paths))

    async def dispose(self) -> None:
        """Dispose the current generations (after the host that ran their facets is gone)."""
        if self._disposed:
            return
        self._disposed = True
        self._stop_requested.set()
        async with self._lock:
            generations, self._current = list(self._current.values()), {}
            for generation in reversed(generations):
                await generation.dispose()


def _owner(path: Path, folders: Mapping[Path, str], recursive: bool) -> str | None:
    for folder, name in folders.items():
        if path.is_relative_to(folder) if recursive else path.parent == folder:
            return name
    return None


def _restart_required(error: BaseException) -> bool:
    if "restart required" in str(error).lower():
        return True
    if isinstance(error, BaseExceptionGroup):
        return any(_restart_required(inner) for inner in error.exceptions)  # pyright: ignore[reportUnknownVariableType,reportUnknownArgumentType]
    return False
