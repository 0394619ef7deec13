"""The facet host: one generation of facets, wired, activated, reloaded and disposed.

``create_facet_host(facets)`` returns a :class:`FacetHost`, an async context manager that owns an
anyio task group (observer tasks, async state listeners and binding work run there)::

    async with create_facet_host([harness_facet, approval_facet]) as host:
        ...                                  # every facet is active here
        await host.reload([new_approval])    # shape-preserving hot reload (docs/design/decisions.md#d4)
    # disposed: facets in reverse activation order, then providers and bindings

Startup (entering the context)
------------------------------
1. Facet ids must be non-empty and unique.
2. Each ``setup(env)`` runs synchronously, in input order; the environment records the facet's
   requirements and provisions. A setup that returns an awaitable is rejected.
3. Requirements no facet provides are resolved against the ``service_sources`` catalogues.
4. The graph is validated with errors that name the facets: a missing provider, two providers of
   one id, a singleton/keyed mismatch, a dependency cycle. Activation order is Kahn's algorithm
   over consumer→provider edges (input order breaks ties), so providers activate first.
5. Remotable provisions are installed into one :class:`~chord.remote.RemoteServiceProvider`
   (``host.services``); in-process consumers reach them through an internal *loopback binding*,
   exactly like remote consumers would. Local singletons are passed through; local keyed services
   live in a :class:`~chord.facets.registry.LocalKeyedRegistry`.
6. Bindings become ready (remotable singletons hydrate), then facets activate in order.
Any failure disposes what was built, in reverse, and re-raises.

Reload (docs/design/decisions.md#d4: retire first)
----------------------------------
``host.reload(candidates)`` replaces active facets by id, keeping every service handle:

1. Preconditions: the host is active, ids are unique and active; an empty list does nothing.
2. Each candidate's ``setup`` runs; its shape (provided and required service ids and modes) must
   equal the old facet's, and remotable singletons must keep their member shape. Otherwise the
   reload is refused ("restart required") and the old generation is untouched.
3. The old facets are deactivated in reverse activation order (their ``own``/``on_deactivate``
   disposals run, so harness registrations are released before anything re-registers).
4. The candidates activate in activation order. Just before each one activates, its provisions
   are routed: a local singleton's slot is rebound, a remotable one is ``provider.replace``-d (its
   facades re-hydrate in place), a keyed spawner is connected (instances respawn with new
   generations). Between 3 and 4 a call arriving through a handle *waits* for the new provider
   (bounded by ``reload_wait_seconds``) instead of failing.
5. If a candidate fails, the candidates are disposed in reverse, the *old* facets are set up and
   activated again from their :class:`~chord.facets.facet.Facet` objects (facets keep no durable
   state, so this is safe), and the error is reported to ``on_error`` and raised. A failed reload
   never leaves the process without its features. Only if that restoration fails too is the host
   terminated.

Errors from retiring old facets do not undo a reload that otherwise succeeded; they are reported
to ``on_error``.

Adding and retiring (a package installed or removed while the application runs)
--------------------------------------------------------------------------------
``host.add(facets)`` sets up *new* facets (ids not active), checks their graph against what the
host already serves (a provision may not collide with an active one; a requirement is met by an
active facet, a candidate, or a service source, whose catalogue is asked again), offers their
remotable provisions in the provider's catalogue, and activates them, providers first. If
anything fails, what was added is disposed and withdrawn: the running facets were never touched.
``host.retire(ids)`` deactivates facets (reverse activation order) and withdraws their
provisions; it is refused while a remaining facet uses one of them.

Why one module: the host is one lifecycle state machine (startup, reload, add, retire, dispose)
over one set of private records: the activation order, the routed provisions, the loopback bindings
and the kernel of slots. Every phase reads and rewrites that same state, and the rollback paths
undo each other's steps, so splitting the phases into modules would spread one invariant (a failed
step leaves the running generation serving) over files that each see only part of it.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AsyncExitStack
from functools import partial
from types import TracebackType
from typing import Any, Literal, NoReturn

import anyio
import anyio.abc
import msgspec

from chord.context import BACKGROUND, Context
from chord.facets.environment import (
    FacetEnvironment,
    FacetLifecycle,
    FacetRecord,
    KeyedProvision,
)
from chord.facets.facet import Facet
from chord.facets.graph import activation_order
from chord.facets.handles import RELOAD_WAIT_SECONDS, ServiceSlot, ServiceView
from chord.facets.registry import LocalKeyedRegistry
from chord.remote import (
    RemoteServiceProvider,
    RemoteServices,
    RemoteServiceSource,
    create_loopback_transport,
    create_remote_service_binding,
)
from chord.services import Service, ServiceMode
from chord.state import MutableReplicatedState, replicated_state

__all__ = ["FacetHost", "HostPhase", "create_facet_host"]

HostPhase = Literal[
    "created",
    "setup",
    "assembling",
    "connecting",
    "activating",
    "active",
    "reloading",
    "disposing",
    "dead",
]
_TARGET_PHASES = frozenset({"activating", "active", "reloading", "disposing"})
_log = logging.getLogger("chord.facets")


def _log_error(error: BaseException) -> None:
    _log.error("facet host error", exc_info=error)


def _raise_collected(message: str, errors: list[Exception]) -> None:
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ExceptionGroup(message, errors)


async def _dispose_records(records: Iterable[FacetRecord]) -> list[Exception]:
    errors: list[Exception] = []
    for record in records:
        try:
            await record.lifecycle.dispose()
        except Exception as error:
            errors.append(error)
    return errors


_Entry = Service[Any] | tuple[Service[Any], ServiceMode]
"""A catalogue entry: a singleton service, or a keyed one with its mode."""


def _provisions(
    records: Iterable[FacetRecord],
) -> tuple[list[_Entry], list[Service[Any]], list[Service[Any]]]:
    """What ``records`` provide, in declaration order: the catalogue entries, the remotable
    services (reached through a loopback binding) and the local keyed ones (a registry's)."""
    entries: list[_Entry] = []
    remotable: list[Service[Any]] = []
    local_keyed: list[Service[Any]] = []
    for record in records:
        for singleton in record.singletons:
            if not singleton.service.local:
                entries.append(singleton.service)
                remotable.append(singleton.service)
        for keyed in record.keyed:
            if keyed.service.local:
                local_keyed.append(keyed.service)
            else:
                entries.append((keyed.service, "keyed"))
                remotable.append(keyed.service)
    return entries, remotable, local_keyed


def _check_facets(facets: Iterable[Facet], what: str) -> tuple[Facet, ...]:
    result = tuple(facets)
    for index, facet in enumerate(result):
        if not isinstance(facet, Facet):
            raise TypeError(f"{what} item {index} is not a Facet: {type(facet).__name__}")
    return result


class _Added(msgspec.Struct):
    """The routes :meth:`FacetHost.add` built for one added facet (undone by ``retire``)."""

    binding: RemoteServices | None = None
    registry: LocalKeyedRegistry | None = None


class _External(msgspec.Struct, frozen=True):
    service: Service[Any]
    mode: ServiceMode
    source: RemoteServiceSource


class _Kernel:
    """The host-side services an environment calls (kept off the public :class:`FacetHost`)."""

    __slots__ = ("_host",)

    def __init__(self, host: FacetHost) -> None:
        self._host = host

    def singleton_handle(self, service: Service[Any], record: FacetRecord) -> Any:
        host = self._host
        slot = host._slots.get(service.id)
        if slot is None:
            slot = ServiceSlot(service, wait_seconds=host._wait_seconds)
            host._slots[service.id] = slot
        lifecycle = record.lifecycle

        def check() -> None:
            lifecycle.assert_service_access()
            host._assert_target_access()

        bound = slot
        return ServiceView(
            service,
            check=check,
            resolve=lambda: bound.target,
            slot=slot,
            label=f"of facet {record.id}",
        )

    def start_observation(
        self,
        service: Service[Any],
        record: FacetRecord,
        handler: Callable[[Any, Context], Awaitable[None] | None],
    ) -> Callable[[], None]:
        source = self._host._keyed_sources.get(service.id)
        if source is None and service.id in record.optional:
            return lambda: None  # nobody provides it: no instance, ever
        if source is None:
            raise RuntimeError(f"Service {service.id} is disconnected")
        lifecycle = record.lifecycle
        stopped = False

        def on_instance(target: object, ctx: Context) -> Awaitable[None] | None:
            def check() -> None:
                lifecycle.assert_service_access()
                if stopped or ctx.cancelled:
                    raise RuntimeError(f"Keyed service {service.id} observation is closed")

            view = ServiceView(
                service,
                check=check,
                resolve=lambda: target,
                label=f"instance observed by facet {record.id}",
            )
            return handler(view, ctx)

        stop_source: Callable[[], None] = source.observe(service, on_instance)

        def stop() -> None:
            nonlocal stopped
            if stopped:
                return
            stopped = True
            stop_source()

        return stop

    def create_state(self, initial: Any, *, trusted: bool = False) -> MutableReplicatedState:
        host = self._host
        return replicated_state(
            initial, task_group=host._task_group, on_error=host._report, trusted=trusted
        )


class FacetHost:
    """One generation of facets; an async context manager owning the host's task group."""

    def __init__(
        self,
        facets: Iterable[Facet],
        *,
        service_sources: Iterable[RemoteServiceSource] = (),
        on_error: Callable[[BaseException], None] | None = None,
        reload_wait_seconds: float = RELOAD_WAIT_SECONDS,
    ) -> None:
        initial = _check_facets(facets, "Facet list")
        ids = [facet.id for facet in initial]
        if any(not facet_id for facet_id in ids):
            raise RuntimeError("Facet ID must not be empty")
        if len(set(ids)) != len(ids):
            raise RuntimeError("Facet IDs must be unique within a generation")
        self._initial = initial
        self._sources = tuple(service_sources)
        self._on_error = on_error if on_error is not None else _log_error
        self._wait_seconds = reload_wait_seconds
        self._phase: HostPhase = "created"
        self._kernel = _Kernel(self)
        self._records: dict[str, FacetRecord] = {}
        self._order: list[str] = []
        self._slots: dict[str, ServiceSlot] = {}
        self._keyed_sources: dict[str, RemoteServices | LocalKeyedRegistry] = {}
        self._source_bindings: list[RemoteServices] = []
        self._opened_sources: dict[int, RemoteServices] = {}
        self._provider: RemoteServiceProvider | None = None
        self._binding: RemoteServices | None = None
        self._registry: LocalKeyedRegistry | None = None
        self._stack: AsyncExitStack | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._external_modes: dict[str, ServiceMode] = {}
        self._added: dict[str, _Added] = {}  # facet id -> what add() built for it

    # -- public surface -------------------------------------------------------------------------
    @property
    def phase(self) -> HostPhase:
        """Where the host is: ``active`` between startup and disposal (``reloading`` meanwhile)."""
        return self._phase

    @property
    def services(self) -> RemoteServiceProvider:
        """The provider of the host's remotable provisions (serve it to remote peers)."""
        if self._provider is None:
            raise RuntimeError(f"Facet host services are not assembled while {self._phase}")
        return self._provider

    @property
    def facet_ids(self) -> list[str]:
        """The active facets' ids in activation order (providers first)."""
        return list(self._order)

    async def __aenter__(self) -> FacetHost:
        if self._phase != "created":
            raise RuntimeError("A facet host can be started only once")
        stack = AsyncExitStack()
        self._group = await stack.enter_async_context(anyio.create_task_group())
        self._stack = stack
        try:
            await self._start()
        except BaseException:
            self._group.cancel_scope.cancel()
            await stack.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        failure: Exception | None = None
        try:
            with anyio.CancelScope(shield=True):
                if self._phase == "active":
                    await self.dispose()
                elif self._phase != "dead":
                    _raise_collected("Failed to dispose facet generation", await self._abort())
        except Exception as error:
            failure = error
        finally:
            assert self._group is not None and self._stack is not None
            self._group.cancel_scope.cancel()
            # The body's own exception propagates as it is (this method returns None); passing
            # it into the task group would wrap it in an ExceptionGroup.
            await self._stack.aclose()
        if failure is not None:
            if exc is None:
                raise failure
            self._report(failure)

    async def dispose(self) -> None:
        """Dispose every facet (reverse activation order), then bindings and the provider."""
        if self._phase == "dead":
            return
        if self._phase != "active":
            raise RuntimeError(f"Facet host cannot be disposed while {self._phase}")
        _raise_collected("Failed to dispose facet generation", await self._terminate())

    async def reload(self, facets: Sequence[Facet]) -> None:
        """Replace active facets by id, keeping their service shape (see the module docstring)."""
        candidates = self._candidates(facets, "reload", "Reloaded", active=True)
        if candidates:
            await self._while_reloading(self._reload(candidates))

    async def add(self, facets: Sequence[Facet]) -> None:
        """Set up and activate new facets in the running host (see the module docstring).

        On any failure the candidates are disposed and withdrawn and the error is raised; the
        facets that were running keep running, untouched.
        """
        candidates = self._candidates(facets, "add facets", "Added", active=False)
        if candidates:
            await self._while_reloading(self._add(candidates))

    def _candidates(
        self, facets: Sequence[Facet], action: str, label: str, *, active: bool
    ) -> tuple[Facet, ...]:
        """The checked facets of :meth:`reload` (each must be active) or :meth:`add` (none may
        be): ids non-empty and unique, and the host active."""
        if self._phase != "active":
            raise RuntimeError(f"Facet host cannot {action} while {self._phase}")
        candidates = _check_facets(facets, f"{label} facet list")
        ids = [facet.id for facet in candidates]
        if any(not facet_id for facet_id in ids):
            raise RuntimeError("Facet ID must not be empty")
        if len(set(ids)) != len(ids):
            raise RuntimeError(f"{label} facet IDs must be unique")
        for facet_id in ids:
            if (facet_id in self._records) != active:
                state = "not active" if active else "already active"
                raise RuntimeError(f"Facet {facet_id} is {state}")
        return candidates

    async def _while_reloading(self, change: Awaitable[None]) -> None:
        """Run ``change`` in the ``reloading`` phase, back to ``active`` unless it ended the host."""
        self._phase = "reloading"
        try:
            await change
        finally:
            if self._phase == "reloading":
                self._phase = "active"

    async def retire(self, facet_ids: Sequence[str]) -> None:
        """Deactivate active facets and withdraw their provisions (see the module docstring)."""
        if self._phase != "active":
            raise RuntimeError(f"Facet host cannot retire facets while {self._phase}")
        gone = set(facet_ids)
        for facet_id in gone:
            if facet_id not in self._records:
                raise RuntimeError(f"Facet {facet_id} is not active")
        provided = {
            ref.service.id: record.id
            for record in self._records.values()
            if record.id in gone
            for ref in record.provides
        }
        for record in self._records.values():
            if record.id in gone:
                continue
            for ref in record.requires:
                owner = provided.get(ref.service.id)
                if owner is not None:
                    raise RuntimeError(
                        f"Facet {owner} cannot be retired: facet {record.id} uses its service "
                        f"{ref.service.id} (retire both, or restart)"
                    )
        if not gone:
            return
        self._phase = "reloading"
        try:
            order = [facet_id for facet_id in self._order if facet_id in gone]
            errors = await self._withdraw([self._records[facet_id] for facet_id in order])
        finally:
            if self._phase == "reloading":
                self._phase = "active"
        for error in errors:
            self._report(error)

    async def _withdraw(self, records: Sequence[FacetRecord]) -> list[Exception]:
        """Dispose ``records`` (in reverse) and undo their routes; returns the errors."""
        errors = await _dispose_records(reversed(records))
        remotable: list[str] = []
        for record in records:
            self._records.pop(record.id, None)
            if record.id in self._order:
                self._order.remove(record.id)
            for singleton in record.singletons:
                slot = self._slots.pop(singleton.service.id, None)
                if slot is not None:
                    slot.unbind()
                if not singleton.service.local:
                    remotable.append(singleton.service.id)
            for keyed in record.keyed:
                self._keyed_sources.pop(keyed.service.id, None)
                if not keyed.service.local:
                    remotable.append(keyed.service.id)
        try:
            self.services.remove(remotable)
        except Exception as error:
            errors.append(error)
        for record in records:
            added = self._added.pop(record.id, None)
            if added is None:
                continue
            if added.registry is not None:
                try:
                    added.registry.dispose()
                except Exception as error:
                    errors.append(error)
            if added.binding is not None:
                try:
                    await added.binding.dispose(BACKGROUND)
                except Exception as error:
                    errors.append(error)
        return errors

    async def _add(self, facets: tuple[Facet, ...]) -> None:
        staged: list[FacetRecord] = []
        routed: list[FacetRecord] = []
        try:
            for facet in facets:
                record = FacetRecord(facet, FacetLifecycle(facet.id))
                staged.append(record)
                self._run_setup(record)
            served: dict[str, ServiceMode] = dict(self._external_modes)
            for record in self._records.values():
                for ref in record.provides:
                    served[ref.service.id] = ref.mode
            for record in staged:
                for ref in record.provides:
                    if ref.service.id in served:
                        raise RuntimeError(
                            f"Facet {record.id} provides {ref.service.id}, which this host "
                            "already serves; restart required"
                        )
            await self._open_external(staged, served)
            order = activation_order(staged, served)
            self._bind_running()
            for record in staged:
                self._route_added(record)
                routed.append(record)
            for facet_id in order:
                self._records[facet_id] = next(r for r in staged if r.id == facet_id)
                self._order.append(facet_id)
            connecting = [
                added.binding
                for facet_id in order
                if (added := self._added.get(facet_id)) is not None and added.binding is not None
            ]
            for binding in connecting:
                await binding.ready(BACKGROUND)
            for facet_id in order:
                await self._records[facet_id].lifecycle.activate()
        except BaseException as error:
            cleanup: list[Exception] = []
            with anyio.CancelScope(shield=True):
                cleanup = await self._withdraw(routed)  # only what this add offered
                cleanup += await _dispose_records(reversed([r for r in staged if r not in routed]))
            for record in staged:
                self._added.pop(record.id, None)
            if cleanup and isinstance(error, Exception):
                raise ExceptionGroup(
                    "Adding facets failed, and so did removing them again", [error, *cleanup]
                ) from None
            raise

    async def _open_external(
        self, records: Sequence[FacetRecord], served: dict[str, ServiceMode]
    ) -> None:
        """Bind the candidates' requirements that only a service source offers (asked again)."""
        provided = {ref.service.id for record in records for ref in record.provides}
        wanted = {
            ref.service.id: ref
            for record in records
            for ref in record.requires
            if ref.service.id not in served and ref.service.id not in provided
        }
        if not wanted or not self._sources:
            return
        for source in self._sources:
            catalogue: dict[str, ServiceMode] = {
                entry.service_id: entry.mode for entry in await source.catalogue(BACKGROUND)
            }
            found = [sid for sid in wanted if sid in catalogue]
            if not found and not source.accepts_unavailable_services:
                continue
            if source.accepts_unavailable_services:
                found = list(wanted)
            binding = source.open(
                services=found, assert_access=self._assert_target_access, on_error=self._report
            )
            self._source_bindings.append(binding)
            for service_id in found:
                ref = wanted.pop(service_id)
                mode: ServiceMode = catalogue.get(service_id, ref.mode)
                served[service_id] = mode
                self._external_modes[service_id] = mode
                if mode == "singleton":
                    slot = self._slots.get(service_id)
                    if slot is not None:
                        slot.bind(binding.use(ref.service))
                else:
                    self._keyed_sources[service_id] = binding
            await binding.ready(BACKGROUND)
            if not wanted:
                return

    def _bind_running(self) -> None:
        """Bind the slots the candidates created for singletons that running facets provide."""
        for running in self._records.values():
            added = self._added.get(running.id)
            binding = added.binding if added is not None else self._binding
            for singleton in running.singletons:
                slot = self._slots.get(singleton.service.id)
                if slot is None or slot.bound:
                    continue
                if singleton.service.local:
                    slot.bind(singleton.implementation)
                elif binding is not None:
                    slot.bind(binding.use(singleton.service))

    def _route_added(self, record: FacetRecord) -> None:
        """Offer ``record``'s provisions: catalogue entries, its own loopback binding/registry."""
        added = _Added()
        self._added[record.id] = added
        entries, remotable, local_keyed = _provisions([record])
        if entries:
            self.services.extend(entries)
            added.binding = create_remote_service_binding(
                services=remotable,
                transport=create_loopback_transport(self.services),
                assert_access=self._assert_target_access,
                on_error=self._report,
                task_group=self._task_group,
                trusted=True,
            )
        if local_keyed:
            added.registry = LocalKeyedRegistry(
                local_keyed, task_group=self._task_group, on_error=self._report
            )
        for singleton in record.singletons:
            slot = self._slots.get(singleton.service.id)
            if singleton.service.local:
                if slot is not None:
                    slot.bind(singleton.implementation)
                continue
            self.services.provide(singleton.service, singleton.implementation)
            if slot is not None:
                assert added.binding is not None
                slot.bind(added.binding.use(singleton.service))
        for keyed in record.keyed:
            if keyed.service.local:
                assert added.registry is not None
                keyed.spawner.connect(partial(added.registry.spawn, keyed.service))
                self._keyed_sources[keyed.service.id] = added.registry
            else:
                assert added.binding is not None
                keyed.spawner.connect(partial(self.services.spawn, keyed.service))
                self._keyed_sources[keyed.service.id] = added.binding

    # -- startup --------------------------------------------------------------------------------
    @property
    def _task_group(self) -> anyio.abc.TaskGroup:
        if self._group is None:
            raise RuntimeError("Facet host is not started; use `async with create_facet_host(...)`")
        return self._group

    async def _start(self) -> None:
        try:
            self._phase = "setup"
            for facet in self._initial:
                record = FacetRecord(facet, FacetLifecycle(facet.id))
                self._records[facet.id] = record
                self._run_setup(record)
            records = list(self._records.values())
            self._phase = "assembling"
            external = await self._resolve_external(records)
            self._external_modes = {sid: entry.mode for sid, entry in external.items()}
            self._order = activation_order(
                records, {service_id: entry.mode for service_id, entry in external.items()}
            )
            self._assemble(records)
            self._bind(records, external)
            self._phase = "connecting"
            await self._connect()
            self._phase = "activating"
            for facet_id in self._order:
                await self._records[facet_id].lifecycle.activate()
            self._phase = "active"
            self._initial = ()  # the records hold the facets now; let reloads retire them
        except Exception as error:
            cleanup: list[Exception] = []
            with anyio.CancelScope(shield=True):
                cleanup = await self._terminate()
            if cleanup:
                raise ExceptionGroup(
                    "Facet generation startup and cleanup failed", [error, *cleanup]
                ) from None
            raise
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._terminate()
            raise

    def _run_setup(self, record: FacetRecord) -> None:
        result = record.facet.setup(FacetEnvironment(record, self._kernel))
        if inspect.isawaitable(result):
            if inspect.iscoroutine(result):
                result.close()
            raise RuntimeError(f"Facet {record.id} setup must be synchronous")
        record.lifecycle.prepared()

    async def _resolve_external(self, records: Sequence[FacetRecord]) -> dict[str, _External]:
        if not self._sources:
            return {}
        catalogues: list[Any] = [None] * len(self._sources)
        failures: list[Exception] = []

        async def fetch(index: int, source: RemoteServiceSource) -> None:
            try:
                catalogues[index] = await source.catalogue(BACKGROUND)
            except Exception as error:
                failures.append(error)

        async with anyio.create_task_group() as group:
            for index, source in enumerate(self._sources):
                group.start_soon(fetch, index, source)
        if failures:
            raise failures[0]

        offered: dict[str, tuple[ServiceMode, RemoteServiceSource]] = {}
        for source, entries in zip(self._sources, catalogues, strict=True):
            for entry in entries:
                if entry.service_id in offered:
                    raise RuntimeError(
                        f"Facet host service {entry.service_id} is offered by more than one source"
                    )
                offered[entry.service_id] = (entry.mode, source)

        local = {ref.service.id for record in records for ref in record.provides}
        deferred = [source for source in self._sources if source.accepts_unavailable_services]
        external: dict[str, _External] = {}
        for record in records:
            for requirement in record.requires:
                service_id = requirement.service.id
                if service_id in local or service_id in external:
                    continue
                choice = offered.get(service_id)
                if choice is None and service_id not in record.optional:
                    if len(deferred) > 1:
                        raise RuntimeError(
                            f"Facet host service {service_id} has more than one deferred source"
                        )
                    if deferred:
                        choice = (requirement.mode, deferred[0])
                if choice is not None:
                    external[service_id] = _External(requirement.service, choice[0], choice[1])

        by_source: dict[int, list[str]] = {}
        for entry in external.values():
            by_source.setdefault(id(entry.source), []).append(entry.service.id)
        opened: dict[int, Any] = {}
        for source in self._sources:
            services = by_source.get(id(source))
            if services is None:
                continue
            binding = source.open(
                services=services, assert_access=self._assert_target_access, on_error=self._report
            )
            opened[id(source)] = binding
            self._source_bindings.append(binding)
        self._opened_sources = opened
        return external

    def _assemble(self, records: Sequence[FacetRecord]) -> None:
        entries, remotable, local_keyed = _provisions(records)
        provider = RemoteServiceProvider(entries)
        self._provider = provider
        self._binding = create_remote_service_binding(
            services=remotable,
            transport=create_loopback_transport(provider),
            assert_access=self._assert_target_access,
            on_error=self._report,
            task_group=self._task_group,
            trusted=True,
        )
        self._registry = LocalKeyedRegistry(
            local_keyed, task_group=self._task_group, on_error=self._report
        )
        for record in records:
            for singleton in record.singletons:
                if not singleton.service.local:
                    provider.provide(singleton.service, singleton.implementation)
            for keyed in record.keyed:
                self._connect_keyed(keyed)

    def _connect_keyed(self, keyed: KeyedProvision) -> None:
        if keyed.service.local:
            assert self._registry is not None
            keyed.spawner.connect(partial(self._registry.spawn, keyed.service))
        else:
            keyed.spawner.connect(partial(self.services.spawn, keyed.service))

    def _bind(self, records: Sequence[FacetRecord], external: dict[str, _External]) -> None:
        internal, registry = self._binding, self._registry
        assert internal is not None and registry is not None
        for record in records:
            for singleton in record.singletons:
                slot = self._slots.get(singleton.service.id)
                if slot is None:
                    continue
                if singleton.service.local:
                    slot.bind(singleton.implementation)
                else:
                    slot.bind(internal.use(singleton.service))
            for keyed in record.keyed:
                self._keyed_sources[keyed.service.id] = (
                    registry if keyed.service.local else internal
                )
        for service_id, entry in external.items():
            binding = self._opened_sources[id(entry.source)]
            if entry.mode == "singleton":
                slot = self._slots.get(service_id)
                if slot is not None:
                    slot.bind(binding.use(entry.service))
            else:
                self._keyed_sources[service_id] = binding

    async def _connect(self) -> None:
        assert self._binding is not None
        bindings = [*self._source_bindings, self._binding]
        failures: list[Exception] = []

        async def ready(binding: RemoteServices) -> None:
            try:
                await binding.ready(BACKGROUND)
            except Exception as error:
                failures.append(error)

        async with anyio.create_task_group() as group:
            for binding in bindings:
                group.start_soon(ready, binding)
        if failures:
            raise failures[0]

    # -- reload (docs/design/decisions.md#d4) ----------------------------------------------------------------------------
    async def _reload(self, facets: tuple[Facet, ...]) -> None:
        staged: list[FacetRecord] = []
        try:
            for facet in facets:
                record = FacetRecord(facet, FacetLifecycle(facet.id))
                staged.append(record)
                self._run_setup(record)
                self._check_shape(self._records[facet.id], record)
                for singleton in record.singletons:
                    if not singleton.service.local:
                        self.services.validate_replacement(
                            singleton.service, singleton.implementation
                        )
        except Exception as error:
            cleanup = await _dispose_records(reversed(staged))
            if cleanup:
                aborted = await self._abort()
                raise ExceptionGroup(
                    "Facet reload setup and cleanup failed", [error, *cleanup, *aborted]
                ) from None
            raise

        candidates = {record.id: record for record in staged}
        order = [facet_id for facet_id in self._order if facet_id in candidates]
        old = [self._records[facet_id] for facet_id in order]
        try:
            retire_errors = await self._retire(old)
            try:
                for facet_id in order:
                    record = candidates[facet_id]
                    self._records[facet_id] = record
                    self._route(record)
                    await record.lifecycle.activate()
            except Exception as error:
                await self._restore(error, [candidates[facet_id] for facet_id in order], old)
        except Exception:
            raise
        except BaseException:
            # Cancelled half-way through the swap: no generation is whole, so terminate.
            if self._phase != "dead":
                with anyio.CancelScope(shield=True):
                    await self._abort(staged)
            raise
        for error in retire_errors:
            self._report(error)

    @staticmethod
    def _check_shape(previous: FacetRecord, candidate: FacetRecord) -> None:
        before_requires, before_provides = previous.shape()
        after_requires, after_provides = candidate.shape()
        if before_requires == after_requires and before_provides == after_provides:
            return

        def describe(before: frozenset[tuple[str, str]], after: frozenset[tuple[str, str]]) -> str:
            added = ", ".join(f"{sid}/{mode}" for sid, mode in sorted(after - before)) or "-"
            removed = ", ".join(f"{sid}/{mode}" for sid, mode in sorted(before - after)) or "-"
            return f"added {added}; removed {removed}"

        changes: list[str] = []
        if before_requires != after_requires:
            changes.append(f"requirements {describe(before_requires, after_requires)}")
        if before_provides != after_provides:
            changes.append(f"provisions {describe(before_provides, after_provides)}")
        raise RuntimeError(
            f"Reloaded facet {candidate.id} must preserve its service requirements and provisions "
            f"({'; '.join(changes)}); restart required"
        )

    async def _retire(self, old: Sequence[FacetRecord]) -> list[Exception]:
        """Deactivate ``old`` in reverse activation order; gate each provision as it goes."""
        errors: list[Exception] = []
        for record in reversed(old):
            try:
                await record.lifecycle.dispose()
            except Exception as error:
                errors.append(error)
            for singleton in record.singletons:
                slot = self._slots.get(singleton.service.id)
                if slot is not None:
                    slot.close_gate()
        return errors

    def _route(self, record: FacetRecord) -> None:
        """Point the host's routes at ``record``'s provisions (done right before it activates)."""
        for singleton in record.singletons:
            slot = self._slots.get(singleton.service.id)
            if singleton.service.local:
                if slot is not None:
                    slot.bind(singleton.implementation)
                continue
            try:
                self.services.replace(singleton.service, singleton.implementation)
            finally:
                if slot is not None:
                    slot.open_gate()
        for keyed in record.keyed:
            self._connect_keyed(keyed)

    async def _restore(
        self, error: Exception, candidates: Sequence[FacetRecord], old: Sequence[FacetRecord]
    ) -> NoReturn:
        """A candidate failed: dispose the candidates, re-run the old facets, report and raise."""
        cleanup = await _dispose_records(reversed(candidates))
        try:
            for previous in old:
                record = FacetRecord(previous.facet, FacetLifecycle(previous.id))
                self._records[previous.id] = record
                self._run_setup(record)
                self._route(record)
                await record.lifecycle.activate()
        except Exception as restore_error:
            aborted = await self._abort()
            group = ExceptionGroup(
                "Facet reload failed and the previous facets could not be restored",
                [error, *cleanup, restore_error, *aborted],
            )
            self._report(group)
            raise group from None
        self._report(error)
        for cleanup_error in cleanup:
            self._report(cleanup_error)
        raise error

    # -- teardown -------------------------------------------------------------------------------
    def _assert_target_access(self) -> None:
        if self._phase not in _TARGET_PHASES:
            raise RuntimeError(f"Facet service targets cannot be used during {self._phase}")

    def _report(self, error: BaseException) -> None:
        try:
            self._on_error(error)
        except Exception:
            _log.exception("facet host on_error callback failed")

    async def _abort(self, extra: Sequence[FacetRecord] = ()) -> list[Exception]:
        for record in self._records.values():
            record.lifecycle.revoke()
        for record in extra:
            record.lifecycle.revoke()
        return await self._terminate(extra)

    async def _terminate(self, extra: Sequence[FacetRecord] = ()) -> list[Exception]:
        self._phase = "disposing"
        errors: list[Exception] = []
        order = list(reversed(self._order)) if self._order else list(reversed(self._records))
        for facet_id in order:
            record = self._records.pop(facet_id, None)
            if record is not None:
                errors.extend(await _dispose_records([record]))
        errors.extend(await _dispose_records(reversed(extra)))
        if self._registry is not None:
            try:
                self._registry.dispose()
            except Exception as error:
                errors.append(error)
        bindings = [*self._source_bindings]
        if self._binding is not None:
            bindings.append(self._binding)
        self._source_bindings.clear()
        self._binding = None
        for binding in bindings:
            try:
                await binding.dispose(BACKGROUND)
            except Exception as error:
                errors.append(error)
        for slot in self._slots.values():
            slot.unbind()
        self._keyed_sources.clear()
        if self._provider is not None:
            try:
                self._provider.dispose()
            except Exception as error:
                errors.append(error)
        self._order = []
        self._phase = "dead"
        return errors

    def __repr__(self) -> str:
        return f"<FacetHost {self._phase} facets={list(self._records)!r}>"


def create_facet_host(
    facets: Iterable[Facet],
    *,
    service_sources: Iterable[RemoteServiceSource] = (),
    on_error: Callable[[BaseException], None] | None = None,
    reload_wait_seconds: float = RELOAD_WAIT_SECONDS,
) -> FacetHost:
    """A host for ``facets``; enter it with ``async with`` to set up and activate them.

    ``service_sources`` supply requirements no facet provides; ``on_error`` receives errors that
    have no caller (observer tasks, listeners, a failed reload's details); the default logs them.
    """
    return FacetHost(
        facets,
        service_sources=service_sources,
        on_error=on_error,
        reload_wait_seconds=reload_wait_seconds,
    )
