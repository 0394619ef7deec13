"""The facet environment: the capability object a facet's ``setup`` receives.

Calls on the environment *are* the facet's declarations. ``provide``/``provide_many`` record what
it provides, ``use``/``observe`` what it needs; the host reads this per-facet ledger to validate
the graph and to order activation, so no manifest is written anywhere else.

A facet goes through ``setting_up → prepared → active → disposing → dead``
(:class:`FacetLifecycle`). Each environment method is allowed only in some of those states, and a
call in the wrong one raises a :class:`RuntimeError` naming the facet and the operation:

========================  =====================  ==============================================
method                    allowed                wrong-phase error
========================  =====================  ==============================================
``use``, ``observe``,     setup only             ``Facet <id> can <operation> only during setup``
``provide``,
``provide_many``,
``on_activate``
``own``,                  setup or active        ``Facet <id> cannot <operation> while <state>``
``on_deactivate``,
``replicated_state``
``ServiceSpawner.spawn``  active only            ``Facet <id> can spawn service instances only
                                                 while active``
========================  =====================  ==============================================

``own`` and ``on_deactivate`` feed one LIFO list. Activation appends each observation's stop
function and whatever ``own`` registers while active, so disposal unwinds in exact reverse:
spawned instances close before observations stop, observations stop before setup-time cleanups.
The idiom is *acquire in setup, register in* ``on_activate``, *and own the unregister function*.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

import msgspec

from chord.context import Context
from chord.facets.registry import check_implementation
from chord.services import Service, ServiceMode
from chord.state import MutableReplicatedState

__all__ = [
    "Disposal",
    "FacetEnvironment",
    "FacetLifecycle",
    "FacetRecord",
    "LifecycleState",
    "ServiceSpawner",
]

T = TypeVar("T")
LifecycleState = Literal["setting_up", "prepared", "active", "disposing", "dead"]
Disposal = Callable[[], "Awaitable[None] | None"]
ActivationCallback = Callable[[], "Awaitable[None] | None"]
KeyedHandler = Callable[[Any, Context], "Awaitable[None] | None"]


async def _settle(result: object) -> None:
    if inspect.isawaitable(result):
        await result


def _aggregate(message: str, errors: list[Exception]) -> Exception:
    return errors[0] if len(errors) == 1 else ExceptionGroup(message, errors)


class FacetLifecycle:
    """One facet incarnation's state, service access switch and LIFO disposal list."""

    __slots__ = ("_access", "_activations", "_effects", "_observations", "id", "state")

    def __init__(self, facet_id: str) -> None:
        self.id = facet_id
        self.state: LifecycleState = "setting_up"
        self._access = False
        self._effects: list[Disposal] = []
        self._observations: list[Callable[[], Callable[[], None]]] = []
        self._activations: list[ActivationCallback] = []

    # -- phase checks ---------------------------------------------------------------------------
    def assert_setting_up(self, operation: str) -> None:
        if self.state != "setting_up":
            raise RuntimeError(f"Facet {self.id} can {operation} only during setup")

    def assert_running(self, operation: str) -> None:
        if self.state not in ("setting_up", "active"):
            raise RuntimeError(f"Facet {self.id} cannot {operation} while {self.state}")

    def assert_active(self, operation: str) -> None:
        if self.state != "active":
            raise RuntimeError(f"Facet {self.id} can {operation} only while active")

    def assert_service_access(self) -> None:
        """Raise unless this facet's handles may be used now."""
        if not self._access:
            raise RuntimeError(f"Facet {self.id} service handles cannot be used while {self.state}")

    def revoke(self) -> None:
        """Switch service access off at once (the host is aborting)."""
        self._access = False

    # -- registration ---------------------------------------------------------------------------
    def own(self, disposal: Disposal) -> None:
        self.assert_running("own resources")
        self._effects.append(disposal)

    def add_observation(self, start: Callable[[], Callable[[], None]]) -> None:
        self.assert_setting_up("observe services")
        self._observations.append(start)

    def add_activation(self, callback: ActivationCallback) -> None:
        self.assert_setting_up("register activation callbacks")
        self._activations.append(callback)

    def prepared(self) -> None:
        self.assert_setting_up("finish setup")
        self.state = "prepared"

    # -- transitions ----------------------------------------------------------------------------
    async def activate(self) -> None:
        """Enable access, start observations, then await each ``on_activate`` in order."""
        if self.state != "prepared":
            raise RuntimeError(f"Facet {self.id} is not prepared")
        self.state = "active"
        self._access = True
        for start in self._observations:
            self._effects.append(start())
        for callback in self._activations:
            await _settle(callback())

    async def dispose(self) -> None:
        """Run the disposal list LIFO, collecting errors; the facet is dead afterwards."""
        if self.state == "dead":
            return
        self.state = "disposing"
        errors: list[Exception] = []
        try:
            while self._effects:
                effect = self._effects.pop()
                try:
                    await _settle(effect())
                except Exception as error:
                    errors.append(error)
        finally:
            self._observations.clear()
            self._activations.clear()
            self._effects.clear()
            self._access = False
            self.state = "dead"
        if errors:
            raise _aggregate(f"Failed to dispose facet {self.id}", errors)


class ServiceSpawner(Generic[T]):
    """The owner's side of a keyed service: spawn instances by key while the facet is active.

    ``spawn`` returns an idempotent close function, which is also owned by the facet, so facet
    disposal closes every instance still live.
    """

    __slots__ = ("_installer", "_instances", "_lifecycle", "service")

    def __init__(self, service: Service[T], lifecycle: FacetLifecycle) -> None:
        self.service = service
        self._lifecycle = lifecycle
        self._installer: Callable[[str, object], Callable[[], None]] | None = None
        self._instances: dict[str, object] = {}

    def connect(self, installer: Callable[[str, object], Callable[[], None]]) -> None:
        """Attach the host's registry or provider (done by the host before activation)."""
        if self._installer is not None:
            raise RuntimeError(
                f"Facet {self._lifecycle.id} spawner for {self.service.id} is already connected"
            )
        self._installer = installer

    @property
    def keys(self) -> list[str]:
        """The keys of the instances this spawner holds live, in spawn order."""
        return list(self._instances)

    def spawn(self, key: str, implementation: T) -> Callable[[], None]:
        """Make ``implementation`` the live instance under ``key``; returns its close function."""
        self._lifecycle.assert_active("spawn service instances")
        if not isinstance(key, str) or not key:
            raise TypeError(
                f"Facet service {self.service.id} instance key must be a non-empty string"
            )
        check_implementation(implementation, f"Facet service {self.service.id}")
        if key in self._instances:
            raise RuntimeError(f"Facet service already has a live instance with key {key}")
        installer = self._installer
        if installer is None:
            raise RuntimeError(
                f"Facet {self._lifecycle.id} spawner for {self.service.id} is not connected"
            )
        release = installer(key, implementation)
        marker = object()
        self._instances[key] = marker
        closed = False

        def close() -> None:
            nonlocal closed
            if closed:
                return
            closed = True
            if self._instances.get(key) is marker:
                del self._instances[key]
            release()

        self._lifecycle.own(close)
        return close


class ServiceReference(msgspec.Struct, frozen=True):
    """One declared requirement or provision: a service in a mode."""

    service: Service[Any]
    mode: ServiceMode

    @property
    def key(self) -> tuple[str, ServiceMode]:
        return (self.service.id, self.mode)


class SingletonProvision(msgspec.Struct):
    service: Service[Any]
    implementation: object


class KeyedProvision(msgspec.Struct):
    service: Service[Any]
    spawner: ServiceSpawner[Any]


class FacetKernel(Protocol):
    """What an environment needs from its host (implemented privately by the host)."""

    def singleton_handle(self, service: Service[Any], record: FacetRecord) -> Any: ...
    def start_observation(
        self, service: Service[Any], record: FacetRecord, handler: KeyedHandler
    ) -> Callable[[], None]: ...
    def create_state(self, initial: Any, *, trusted: bool = False) -> MutableReplicatedState: ...


class FacetDefinition(Protocol):
    """What a record needs of its :class:`~chord.facets.facet.Facet` (a protocol here, so this
    module does not import the facet module, which names :class:`FacetEnvironment`)."""

    @property
    def id(self) -> str: ...

    @property
    def setup(self) -> Callable[[FacetEnvironment], Any]: ...


@dataclass(slots=True, eq=False)
class FacetRecord:
    """The host's ledger for one facet incarnation: declarations, provisions and handles."""

    facet: FacetDefinition
    lifecycle: FacetLifecycle
    requires: list[ServiceReference] = field(default_factory=list)
    provides: list[ServiceReference] = field(default_factory=list)
    singletons: list[SingletonProvision] = field(default_factory=list)
    keyed: list[KeyedProvision] = field(default_factory=list)
    handles: dict[str, Any] = field(default_factory=dict)
    optional: set[str] = field(default_factory=set)
    """Ids of keyed services observed with ``optional=True``: no provider is not an error."""

    @property
    def id(self) -> str:
        return self.facet.id

    def shape(
        self,
    ) -> tuple[frozenset[tuple[str, ServiceMode]], frozenset[tuple[str, ServiceMode]]]:
        """``(requirements, provisions)`` as sets of ``(service_id, mode)``; order is irrelevant."""
        return (
            frozenset(reference.key for reference in self.requires),
            frozenset(reference.key for reference in self.provides),
        )

    def require(self, service: Service[Any], mode: ServiceMode) -> None:
        reference = ServiceReference(service, mode)
        if all(existing.key != reference.key for existing in self.requires):
            self.requires.append(reference)


def _check_service(service: object) -> Service[Any]:
    if not isinstance(service, Service):
        raise TypeError(f"Expected a Service token (define_service), got {type(service).__name__}")
    return service  # pyright: ignore[reportUnknownVariableType]


class FacetEnvironment:
    """The environment handed to one facet's ``setup`` (see the module docstring for phases)."""

    __slots__ = ("_kernel", "_record")

    def __init__(self, record: FacetRecord, kernel: FacetKernel) -> None:
        self._record = record
        self._kernel = kernel

    @property
    def facet_id(self) -> str:
        """The id of the facet this environment belongs to."""
        return self._record.id

    def use(self, service: Service[T]) -> T:
        """Require singleton ``service``; returns this facet's stable handle to it."""
        lifecycle = self._record.lifecycle
        lifecycle.assert_setting_up("acquire services")
        _check_service(service)
        self._record.require(service, "singleton")
        handle = self._record.handles.get(service.id)
        if handle is None:
            handle = self._kernel.singleton_handle(service, self._record)
            self._record.handles[service.id] = handle
        return handle

    def observe(
        self,
        service: Service[T],
        handler: Callable[[T, Context], Awaitable[None] | None],
        *,
        optional: bool = False,
    ) -> None:
        """Require keyed ``service``; once active, run ``handler(instance, ctx)`` per live instance.

        ``optional=True``: the one optional dependency chord has. When no facet (and no service
        source) provides ``service``, the host starts anyway and the handler never runs (zero
        instances); when one does, it is an ordinary requirement (its provider activates
        first). A feature uses it to work with another feature when that one is loaded and
        without it when it is not, joined only by the service id."""
        lifecycle = self._record.lifecycle
        lifecycle.assert_setting_up("observe services")
        _check_service(service)
        if not callable(handler):
            raise TypeError(
                f"Facet {lifecycle.id} observe handler for {service.id} must be callable"
            )
        self._record.require(service, "keyed")
        if optional:
            self._record.optional.add(service.id)
        record = self._record
        kernel = self._kernel
        lifecycle.add_observation(lambda: kernel.start_observation(service, record, handler))

    def provide(self, service: Service[T], implementation: T) -> None:
        """Provide singleton ``service`` with ``implementation`` (an object)."""
        self._record.lifecycle.assert_setting_up("provide services")
        _check_service(service)
        check_implementation(implementation, f"Service {service.id}")
        self._assert_new_provision(service)
        self._record.provides.append(ServiceReference(service, "singleton"))
        self._record.singletons.append(SingletonProvision(service, implementation))

    def provide_many(self, service: Service[T]) -> ServiceSpawner[T]:
        """Own keyed ``service``; returns the spawner used (while active) to add instances."""
        lifecycle = self._record.lifecycle
        lifecycle.assert_setting_up("provide service instances")
        _check_service(service)
        self._assert_new_provision(service)
        spawner = ServiceSpawner(service, lifecycle)
        self._record.provides.append(ServiceReference(service, "keyed"))
        self._record.keyed.append(KeyedProvision(service, spawner))
        return spawner

    def replicated_state(self, initial: Any, *, trusted: bool = False) -> MutableReplicatedState:
        """A new authoritative replicated state owning ``initial`` (a JSON object or array).

        ``initial`` is checked as strict JSON unless ``trusted=True``, for a value the caller
        built from values it has already checked (pico3's view: a checked copy of the kernel's)."""
        self._record.lifecycle.assert_running("create replicated state")
        return self._kernel.create_state(initial, trusted=trusted)

    def own(self, disposal: Disposal) -> None:
        """Run ``disposal`` when the facet is disposed (LIFO with ``on_deactivate``)."""
        if not callable(disposal):
            raise TypeError(f"Facet {self._record.id} disposal must be callable")
        self._record.lifecycle.own(disposal)

    def on_activate(self, callback: ActivationCallback) -> None:
        """Run ``callback`` (awaited if async) once dependencies are bound and hydrated."""
        if not callable(callback):
            raise TypeError(f"Facet {self._record.id} activation callback must be callable")
        self._record.lifecycle.add_activation(callback)

    def on_deactivate(self, callback: Disposal) -> None:
        """Run ``callback`` at disposal; the same LIFO list as :meth:`own`."""
        if not callable(callback):
            raise TypeError(f"Facet {self._record.id} deactivation callback must be callable")
        self._record.lifecycle.own(callback)

    def _assert_new_provision(self, service: Service[Any]) -> None:
        if any(reference.service.id == service.id for reference in self._record.provides):
            raise RuntimeError(f"Facet {self._record.id} already provides {service.id}")

    def __repr__(self) -> str:
        return f"<FacetEnvironment {self._record.id} {self._record.lifecycle.state}>"
