"""The provider: the server half of chord's remote layer.

A :class:`RemoteServiceProvider` holds the implementations of a fixed catalogue of remotable
services and serves two things:

* **calls**: :meth:`~RemoteServiceProvider.invoke` resolves a :class:`ServiceCall` to one
  instance's method and awaits ``method(*args, ctx)``. Arguments and results are passed by
  reference (validation belongs to the boundary that serialises them).
* **subscriptions**: :meth:`~RemoteServiceProvider.subscribe` captures an atomic snapshot (every
  state member as ``[["r", value]]`` at its sequence, keyed instances sorted by key) and then
  streams :data:`ServiceProviderUpdate` values: state deltas, replacements, spawns and closes.

Each subscription has its own op-level queue (docs/design/chord.md#provider-queue). Updates published before
:meth:`ProviderSubscription.activate` are buffered; activation and reentrant publication share one
FIFO, and the listener never runs concurrently with itself. When 100 updates are pending and one
more arrives, the whole queue is replaced by a single ``reset`` carrying a fresh snapshot, so a
slow consumer costs bounded memory and still converges. An update already covered by the
subscription's snapshot (or by a reset) is not delivered again.

A listener that raises does not stop delivery to the others: the errors are collected and raised
to whoever published (``state.change``, ``provider.replace``, a spawned instance's close, or
``activate``), a single error as itself and several as an ``ExceptionGroup``.

Singletons are provided, withdrawn and replaced without breaking their subscribers' facades; a
replacement must keep the member shape. Keyed instances are spawned under a key and closed through
the returned function; each spawn of a key gets the next generation, so a stale address never
reaches a newer incarnation.

Failures a caller can act on are :class:`~chord.remote.errors.RemoteServiceError` with a stable
code. The catalogue is the provider's allowlist: any id outside it, including the reserved
``$chord.service`` control id when it reaches ``invoke``, is ``service_not_allowed``, exactly as in
Chord 0.87. After :meth:`RemoteServiceProvider.dispose` every operation raises
``RuntimeError("Remote service provider is disposed")``.

Why one module: ``RemoteServiceProvider`` is one class whose calls, subscriptions, replacements and
keyed spawns all act on one registry of instances and subscribers under one sequence discipline (a
snapshot and the updates that follow it must agree). The helpers here exist only to keep that
class's methods short.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from chord.context import BACKGROUND, Context
from chord.json import JsonValue
from chord.remote.errors import CallRejected, RemoteServiceError
from chord.remote.grammar import (
    Op,
    ServiceCall,
    ServiceCatalogueEntry,
    ServiceClosedUpdate,
    ServiceInstanceSnapshot,
    ServiceMemberSnapshot,
    ServiceMethodSnapshot,
    ServiceProviderUpdate,
    ServiceReplacedUpdate,
    ServiceResetUpdate,
    ServiceSpawnedUpdate,
    ServiceStateSnapshot,
    ServiceStateUpdate,
    ServiceSubscriptionSnapshot,
    ServiceUnavailableUpdate,
)
from chord.remote.members import (
    ClassifiedImplementation,
    MemberKind,
    MethodMember,
    StateMember,
    classify_implementation,
)
from chord.remote.source import ServiceUpdateListener
from chord.services import InstanceAddress, Service, ServiceMode

__all__ = [
    "PROVIDER_QUEUE_LIMIT",
    "ProviderSubscription",
    "RemoteServiceProvider",
    "ServiceUpdateListener",
    "validate_remote_service_implementation",
]

T = TypeVar("T")

PROVIDER_QUEUE_LIMIT: Final = 100
"""Pending updates per subscription (not counting the one being delivered) before a reset."""

_MODES: tuple[ServiceMode, ...] = ("singleton", "keyed")
_StateKey = tuple[str | None, int | None, str]


def validate_remote_service_implementation(service_id: str, implementation: object) -> None:
    """Raise ``TypeError`` unless ``implementation`` is a valid remotable implementation."""
    classify_implementation(service_id, implementation)


# -- internal records -------------------------------------------------------------------------


class _Instance:
    __slots__ = ("active", "address", "classified", "removers")

    def __init__(
        self, classified: ClassifiedImplementation, address: InstanceAddress | None
    ) -> None:
        self.classified = classified
        self.address = address
        self.removers: list[Callable[[], None]] = []
        self.active = True

    def retire(self) -> None:
        self.active = False
        removers, self.removers = self.removers, []
        for remove in removers:
            remove()


class _Subscriber:
    __slots__ = ("active", "buffer", "closed", "draining", "listener", "sequences", "terminated")

    def __init__(self, listener: ServiceUpdateListener) -> None:
        self.listener = listener
        self.buffer: deque[tuple[ServiceProviderUpdate, Context]] = deque()
        self.sequences: dict[_StateKey, int] = {}
        self.active = False
        self.draining = False
        self.terminated = False
        self.closed = False


@dataclass(eq=False)
class _Registration:
    service_id: str
    mode: ServiceMode
    singleton: _Instance | None = None
    singleton_shape: dict[str, MemberKind] | None = None
    instances: dict[str, _Instance] = field(default_factory=dict)
    generations: dict[str, int] = field(default_factory=dict)
    subscribers: dict[_Subscriber, None] = field(default_factory=dict)  # an ordered set


# -- subscription -----------------------------------------------------------------------------


class ProviderSubscription:
    """One consumer's view of one service: a snapshot, then updates after :meth:`activate`."""

    __slots__ = ("_capture", "_registration", "_subscriber", "snapshot")

    def __init__(
        self,
        snapshot: ServiceSubscriptionSnapshot,
        subscriber: _Subscriber,
        registration: _Registration,
        capture: Callable[[], ServiceSubscriptionSnapshot],
    ) -> None:
        self.snapshot = snapshot
        self._subscriber = subscriber
        self._registration = registration
        self._capture = capture

    def reset(self) -> ServiceSubscriptionSnapshot:
        """Capture a fresh snapshot for a ``reset`` the caller sends in place of what it dropped.

        Updates still buffered for this subscription are discarded and its suppression baseline
        becomes the fresh snapshot, so later notifications it already covers are not delivered
        (docs/design/chord.md#provider-queue). A transport calls this when its own per-peer queue for the
        subscription overflows. Raises ``RuntimeError`` once the subscription is closed.
        """
        subscriber = self._subscriber
        if subscriber.closed:
            raise RuntimeError("Remote service subscription is closed")
        snapshot = self._capture()
        subscriber.buffer.clear()
        subscriber.sequences.clear()
        _record_sequences(subscriber.sequences, snapshot.instances)
        return snapshot

    def state_of(
        self, address: InstanceAddress | None, member: str
    ) -> tuple[int, JsonValue] | None:
        """The current ``(sequence, value)`` of state ``member`` of the live instance at
        ``address`` (``None``: the singleton), or ``None`` when there is no such instance or
        state member.

        A transport that stopped forwarding a member's updates to its peer (a muted member,
        docs/wire.md#lazy-state) answers a follow with it: the peer rebaselines on it, and the
        updates forwarded from then on continue from that sequence.
        """
        if self._subscriber.closed:
            raise RuntimeError("Remote service subscription is closed")
        registration = self._registration
        if address is None:
            instance = registration.singleton
        else:
            instance = registration.instances.get(address.key)
            if instance is not None and instance.address != address:
                instance = None
        if instance is None or not instance.active:
            return None
        state = instance.classified.members.get(member)
        if not isinstance(state, StateMember):
            return None
        return state.state.sequence, state.state.value

    def activate(self) -> None:
        """Deliver the buffered updates and every later one. A second call does nothing.

        Raises the listener's errors (several as ``"Failed to activate remote service
        subscription"``) after every buffered update was delivered.
        """
        subscriber = self._subscriber
        if subscriber.closed or subscriber.active:
            return
        subscriber.active = True
        _raise_collected(_drain(subscriber), "Failed to activate remote service subscription")

    def close(self, ctx: Context | None = None) -> None:
        """Stop delivery and drop the buffer (idempotent; safe inside the listener)."""
        del ctx
        subscriber = self._subscriber
        if subscriber.closed:
            return
        subscriber.closed = True
        subscriber.buffer.clear()
        self._registration.subscribers.pop(subscriber, None)


# -- provider ---------------------------------------------------------------------------------


class RemoteServiceProvider:
    """Serves the implementations of a fixed catalogue of remotable services.

    ``entries`` lists the services: a :class:`~chord.services.Service` is a singleton; a
    ``(service, mode)`` pair names the mode explicitly. Local services and duplicate ids are
    rejected.
    """

    def __init__(self, entries: Sequence[Service[Any] | tuple[Service[Any], ServiceMode]]) -> None:
        definitions: list[tuple[Service[Any], ServiceMode]] = []
        for entry in entries:
            if isinstance(entry, Service):
                service, mode = entry, "singleton"
            elif isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], Service):
                service, mode = entry
            else:
                raise TypeError(
                    f"Remote service catalogue entries are Service or (Service, mode), got {entry!r}"
                )
            if mode not in _MODES:
                raise TypeError(f"Remote service {service.id} mode must be 'singleton' or 'keyed'")
            if service.local:
                raise TypeError(f"Local service {service.id} cannot be published remotely")
            definitions.append((service, mode))
        ids = [service.id for service, _ in definitions]
        if len(set(ids)) != len(ids):
            raise TypeError("Remote service catalogue contains duplicate IDs")
        self._catalogue = tuple(
            ServiceCatalogueEntry(service.id, mode) for service, mode in definitions
        )
        self._registrations: dict[str, _Registration] = {
            service.id: _Registration(service.id, mode) for service, mode in definitions
        }
        self._disposed = False

    @property
    def catalogue(self) -> tuple[ServiceCatalogueEntry, ...]:
        """The offered services, in construction order."""
        return self._catalogue

    @property
    def disposed(self) -> bool:
        return self._disposed

    # -- singletons ---------------------------------------------------------------------------

    def provide(self, service: Service[T], implementation: T) -> None:
        """Install the singleton's implementation (it must have none yet)."""
        registration = self._checked(service, "singleton")
        if registration.singleton is not None:
            raise RemoteServiceError(
                "service_mode_mismatch", f"Remote service {service.id} already has a provider"
            )
        classified = classify_implementation(service.id, implementation)
        shape = classified.shape
        self._assert_shape(registration, shape)
        registration.singleton = self._create_instance(registration, classified, None)
        registration.singleton_shape = shape

    def withdraw(self, service: Service[Any]) -> None:
        """Remove the singleton's implementation; subscribers see ``unavailable``."""
        registration = self._checked(service, "singleton")
        previous = registration.singleton
        if previous is None:
            return
        previous.retire()
        registration.singleton = None
        self._emit(registration, ServiceUnavailableUpdate())

    def validate_replacement(self, service: Service[T], implementation: T) -> None:
        """Raise if :meth:`replace` with ``implementation`` would be refused; change nothing."""
        registration = self._checked(service, "singleton")
        classified = classify_implementation(service.id, implementation)
        self._assert_shape(registration, classified.shape)

    def replace(self, service: Service[T], implementation: T) -> None:
        """Swap the singleton's implementation in place; subscribers see ``replaced``."""
        registration = self._checked(service, "singleton")
        classified = classify_implementation(service.id, implementation)
        shape = classified.shape
        self._assert_shape(registration, shape)
        replacement = self._create_instance(registration, classified, None)
        previous = registration.singleton
        if previous is not None:
            previous.retire()
        registration.singleton = replacement
        registration.singleton_shape = shape
        self._emit(registration, ServiceReplacedUpdate(self._snapshot_instance(replacement)))

    def use(self, service: Service[T]) -> T:
        """The raw local implementation of a provided singleton."""
        self._assert_active()
        self._assert_remotable(service)
        self._assert_allowed(service.id)
        registration = self._registrations[service.id]
        if registration.mode != "singleton" or registration.singleton is None:
            raise RemoteServiceError(
                "service_not_found", f"Remote service {service.id} has no local provider"
            )
        return registration.singleton.classified.implementation  # type: ignore[return-value]

    # -- keyed instances ----------------------------------------------------------------------

    def spawn(self, service: Service[T], key: str, implementation: T) -> Callable[[], None]:
        """Start a keyed instance under ``key``; returns its idempotent close function."""
        self._assert_active()
        self._assert_remotable(service)
        self._assert_allowed(service.id)
        if type(key) is not str or not key:
            raise TypeError(f"Remote service {service.id} instance key must be a non-empty string")
        registration = self._registration(service.id, "keyed")
        if key in registration.instances:
            raise RemoteServiceError(
                "service_mode_mismatch",
                f"Remote service {service.id} already has a live instance with key {key}",
            )
        classified = classify_implementation(service.id, implementation)
        generation = registration.generations.get(key, 0) + 1
        registration.generations[key] = generation
        address = InstanceAddress(key, generation)
        instance = self._create_instance(registration, classified, address)
        registration.instances[key] = instance
        closed = False

        def close() -> None:
            nonlocal closed
            if closed:
                return
            closed = True
            if registration.instances.get(key) is not instance:
                return
            instance.retire()
            del registration.instances[key]
            self._emit(registration, ServiceClosedUpdate(address))

        self._emit(registration, ServiceSpawnedUpdate(self._snapshot_instance(instance)))
        return close

    # -- calls --------------------------------------------------------------------------------

    async def invoke(self, call: ServiceCall, ctx: Context) -> JsonValue | None:
        """Run ``call`` and return its result (``None`` for a void method); see :meth:`start`."""
        result = self.start(call, ctx)
        if inspect.isawaitable(result):
            result = await result
        return result

    def start(self, call: ServiceCall, ctx: Context) -> Any:
        """Check ``call`` and call its method; return what the method returned, which is an
        awaitable for an async method (the caller awaits it) and the result otherwise.

        A synchronous method thus runs to completion here, without a task or an event-loop pass
        (the wire server answers such calls inline).

        Checks, in order: the id is in the catalogue (``service_not_allowed``); a singleton
        called with an address or a keyed service without one (``service_mode_mismatch``); a
        singleton without provider (``service_not_found``); no live instance for the key
        (``service_instance_not_found``); another generation (``service_stale_instance``); an
        unknown member (``service_member_not_found``); a state member (``service_member_mismatch``).
        """
        self._assert_active()
        self._assert_allowed(call.service_id)
        registration = self._registrations[call.service_id]
        instance = self._resolve(registration, call.instance)
        member = instance.classified.members.get(call.member)
        if member is None:
            raise CallRejected(
                "service_member_not_found",
                f"Unknown remote service member {call.service_id}.{call.member}",
            )
        if not isinstance(member, MethodMember):
            raise RemoteServiceError(
                "service_member_mismatch",
                f"Remote service member {call.service_id}.{call.member} is not a method",
            )
        _check_arity(call, member)
        return member.function(*call.args, ctx)

    # -- subscriptions ------------------------------------------------------------------------

    def subscribe(
        self, service_id: str, mode: ServiceMode, listener: ServiceUpdateListener
    ) -> ProviderSubscription:
        """Open a subscription: an atomic snapshot now, updates after ``activate()``."""
        self._assert_active()
        self._assert_allowed(service_id)
        registration = self._registration(service_id, mode)
        if registration.mode == "singleton" and registration.singleton is None:
            raise RemoteServiceError(
                "service_not_found", f"Remote service {service_id} has no provider"
            )
        subscriber = _Subscriber(listener)
        registration.subscribers[subscriber] = None
        snapshot = self._snapshot(registration)
        _record_sequences(subscriber.sequences, snapshot.instances)
        return ProviderSubscription(
            snapshot, subscriber, registration, lambda: self._snapshot(registration)
        )

    # -- disposal -----------------------------------------------------------------------------

    def extend(self, entries: Sequence[Service[Any] | tuple[Service[Any], ServiceMode]]) -> None:
        """Add services to the catalogue of a running provider (facets added to a running host).

        The entries are checked as in the constructor; an id already offered is refused and
        nothing is added. Peers see them in the next ``catalogue`` call.
        """
        self._assert_active()
        added = RemoteServiceProvider(entries)
        clash = sorted(set(added._registrations) & set(self._registrations))
        if clash:
            raise TypeError(f"Remote services already in the catalogue: {', '.join(clash)}")
        self._catalogue = (*self._catalogue, *added._catalogue)
        self._registrations.update(added._registrations)

    def remove(self, service_ids: Sequence[str]) -> None:
        """Take services out of the catalogue (their facets were retired from a running host).

        Their subscribers get ``unavailable`` (singletons) and ``closed`` (each keyed instance),
        then their end, as in :meth:`dispose`. Unknown ids are ignored.
        """
        self._assert_active()
        errors: list[Exception] = []
        for service_id in service_ids:
            registration = self._registrations.get(service_id)
            if registration is None:
                continue
            self._withdraw(registration, errors)
            del self._registrations[service_id]
        gone = set(service_ids)
        self._catalogue = tuple(e for e in self._catalogue if e.service_id not in gone)
        _raise_collected(errors, "Failed to remove remote services")

    def dispose(self) -> None:
        """Withdraw everything: subscribers get ``unavailable``/``closed``, then their end.

        An idle active subscriber receives those updates now and is closed; one that is still
        draining, or not yet activated, keeps them and closes after delivering them. Idempotent.
        """
        if self._disposed:
            return
        self._disposed = True
        errors: list[Exception] = []
        for registration in self._registrations.values():
            self._withdraw(registration, errors)
        self._registrations.clear()
        _raise_collected(errors, "Failed to dispose remote service provider")

    # -- internals ----------------------------------------------------------------------------

    def _withdraw(self, registration: _Registration, errors: list[Exception]) -> None:
        """Retire ``registration``'s singleton and instances, emitting ``unavailable`` /
        ``closed`` to its subscribers (emit failures go to ``errors``), then end every
        subscriber: an idle active one now, a draining or not yet active one after it delivers."""
        singleton = registration.singleton
        if singleton is not None:
            singleton.retire()
            registration.singleton = None
            try:
                self._emit(registration, ServiceUnavailableUpdate())
            except Exception as error:
                errors.append(error)
        for key, instance in list(registration.instances.items()):
            instance.retire()
            del registration.instances[key]
            assert instance.address is not None
            try:
                self._emit(registration, ServiceClosedUpdate(instance.address))
            except Exception as error:
                errors.append(error)
        for subscriber in registration.subscribers:
            if subscriber.active and not subscriber.draining:
                subscriber.closed = True
                subscriber.buffer.clear()
            else:
                subscriber.terminated = True
        registration.subscribers.clear()

    def _checked(self, service: Service[Any], mode: ServiceMode) -> _Registration:
        self._assert_active()
        self._assert_remotable(service)
        self._assert_allowed(service.id)
        return self._registration(service.id, mode)

    def _registration(self, service_id: str, mode: ServiceMode) -> _Registration:
        registration = self._registrations.get(service_id)
        if registration is None:
            raise RemoteServiceError("service_not_found", f"Unknown remote service {service_id}")
        if registration.mode != mode:
            raise RemoteServiceError(
                "service_mode_mismatch",
                f"Remote service {service_id} is {registration.mode}, not {mode}",
            )
        return registration

    def _assert_active(self) -> None:
        if self._disposed:
            raise RuntimeError("Remote service provider is disposed")

    def _assert_remotable(self, service: Service[Any]) -> None:
        if service.local:
            raise RemoteServiceError(
                "service_not_allowed", f"Service {service.id} is process-local"
            )

    def _assert_allowed(self, service_id: str) -> None:
        if service_id not in self._registrations:
            raise CallRejected(
                "service_not_allowed",
                f"Remote service {service_id} is not in this provider's catalogue",
            )

    def _assert_shape(self, registration: _Registration, shape: Mapping[str, MemberKind]) -> None:
        current = registration.singleton_shape
        if current is None or current == dict(shape):
            return
        raise RemoteServiceError(
            "service_member_mismatch",
            f"Remote service {registration.service_id} replacement must preserve its member shape "
            f"(was {_describe_shape(current)}, got {_describe_shape(shape)})",
        )

    def _resolve(self, registration: _Registration, address: InstanceAddress | None) -> _Instance:
        service_id = registration.service_id
        if registration.mode == "singleton":
            if address is not None:
                raise RemoteServiceError(
                    "service_mode_mismatch",
                    f"Remote service {service_id} is singleton; calls carry no instance address",
                )
            if registration.singleton is None:
                raise RemoteServiceError(
                    "service_not_found", f"Remote service {service_id} has no provider"
                )
            return registration.singleton
        if address is None:
            raise RemoteServiceError(
                "service_mode_mismatch",
                f"Remote service {service_id} is keyed; calls need an instance address",
            )
        instance = registration.instances.get(address.key)
        if instance is None:
            raise RemoteServiceError(
                "service_instance_not_found",
                f"Remote service {service_id} has no instance {address.key}",
            )
        assert instance.address is not None
        if instance.address.generation != address.generation:
            raise RemoteServiceError(
                "service_stale_instance",
                f"Remote service {service_id} instance {address.key} generation "
                f"{address.generation} is stale (live: {instance.address.generation})",
            )
        return instance

    def _create_instance(
        self,
        registration: _Registration,
        classified: ClassifiedImplementation,
        address: InstanceAddress | None,
    ) -> _Instance:
        instance = _Instance(classified, address)
        for name, member in classified.members.items():
            if isinstance(member, StateMember):
                instance.removers.append(
                    member.state.add_source_listener(
                        self._state_listener(registration, instance, name, address)
                    )
                )
        return instance

    def _state_listener(
        self,
        registration: _Registration,
        instance: _Instance,
        name: str,
        address: InstanceAddress | None,
    ) -> Callable[[Sequence[Op], int, Context], None]:
        def on_publish(ops: Sequence[Op], sequence: int, ctx: Context) -> None:
            if not instance.active:
                return
            self._emit(registration, ServiceStateUpdate(name, sequence, tuple(ops), address), ctx)

        return on_publish

    def _snapshot(self, registration: _Registration) -> ServiceSubscriptionSnapshot:
        if registration.mode == "singleton":
            singletons = [registration.singleton] if registration.singleton is not None else []
            instances = tuple(self._snapshot_instance(instance) for instance in singletons)
        else:
            ordered = sorted(registration.instances.items())
            instances = tuple(self._snapshot_instance(instance) for _, instance in ordered)
        return ServiceSubscriptionSnapshot(registration.service_id, registration.mode, instances)

    def _snapshot_instance(self, instance: _Instance) -> ServiceInstanceSnapshot:
        members: list[ServiceMemberSnapshot] = []
        for name, member in instance.classified.members.items():
            if isinstance(member, MethodMember):
                members.append(ServiceMethodSnapshot(name))
            else:
                state = member.state
                members.append(ServiceStateSnapshot(name, state.sequence, (("r", state.value),)))
        return ServiceInstanceSnapshot(tuple(members), instance.address)

    def _emit(
        self,
        registration: _Registration,
        update: ServiceProviderUpdate,
        ctx: Context | None = None,
    ) -> None:
        if not registration.subscribers:
            return
        delivery_ctx = BACKGROUND if ctx is None else ctx
        subscribers = list(registration.subscribers)
        # Queue for everyone before running any listener, so reentrant publications stay ordered.
        for subscriber in subscribers:
            if subscriber.closed or _covered(subscriber.sequences, update):
                continue
            if len(subscriber.buffer) >= PROVIDER_QUEUE_LIMIT:
                snapshot = self._snapshot(registration)
                subscriber.buffer.clear()
                subscriber.sequences.clear()
                _record_sequences(subscriber.sequences, snapshot.instances)
                subscriber.buffer.append((ServiceResetUpdate(snapshot), delivery_ctx))
            else:
                subscriber.buffer.append((update, delivery_ctx))
        errors: list[Exception] = []
        for subscriber in subscribers:
            errors.extend(_drain(subscriber))
        _raise_collected(
            errors, f"Failed to publish remote service {registration.service_id} update"
        )


def _binds(function: Callable[..., Any], count: int) -> bool:
    signature = _signature(function)
    if signature is None:  # pragma: no cover - builtins without a signature
        return True
    try:
        signature.bind(*([None] * count), BACKGROUND)
    except TypeError:
        return False
    return True


def _signature(function: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(function)
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return None


def _check_arity(call: ServiceCall, member: MethodMember) -> None:
    """Refuse a call whose argument count the method cannot accept (``service_invalid_value``).

    Whether a count binds depends on the count alone (arguments are positional), so the answer
    is cached on the member (for a bounded number of counts: a peer cannot grow it at will).
    """
    count = len(call.args)
    accepted = member.arity.get(count)
    if accepted is None:
        accepted = _binds(member.function, count)
        if len(member.arity) < _ARITY_CACHE_SIZE:
            member.arity[count] = accepted
    if accepted:
        return
    signature = _signature(member.function)
    assert signature is not None  # a function without a signature binds every count
    expected = sum(
        1
        for parameter in signature.parameters.values()
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
    )
    raise CallRejected(
        "service_invalid_value",
        f"Remote service method {call.service_id}.{call.member} takes {expected - 1} "
        f"argument(s) before its Context, got {count}",
    )


_ARITY_CACHE_SIZE = 16


def _describe_shape(shape: Mapping[str, MemberKind]) -> str:
    return "{" + ", ".join(f"{name}: {kind}" for name, kind in sorted(shape.items())) + "}"


def _drain(subscriber: _Subscriber) -> list[Exception]:
    if not subscriber.active or subscriber.closed or subscriber.draining:
        return []
    errors: list[Exception] = []
    subscriber.draining = True
    try:
        while not subscriber.closed and subscriber.buffer:
            update, ctx = subscriber.buffer.popleft()
            try:
                subscriber.listener(update, ctx)
            except Exception as error:
                errors.append(error)
    finally:
        subscriber.draining = False
        if subscriber.terminated:
            subscriber.closed = True
    return errors


def _state_key(address: InstanceAddress | None, member: str) -> _StateKey:
    if address is None:
        return (None, None, member)
    return (address.key, address.generation, member)


def _record_sequences(
    sequences: dict[_StateKey, int], instances: Sequence[ServiceInstanceSnapshot]
) -> None:
    for instance in instances:
        for member in instance.members:
            if isinstance(member, ServiceStateSnapshot):
                sequences[_state_key(instance.instance, member.name)] = member.sequence


def _covered(sequences: dict[_StateKey, int], update: ServiceProviderUpdate) -> bool:
    """Whether ``update`` is already in the subscriber's baseline; keeps the baseline current."""
    if isinstance(update, ServiceStateUpdate):
        key = _state_key(update.instance, update.member)
        baseline = sequences.get(key)
        if baseline is None:
            return False
        if update.sequence <= baseline:
            return True
        del sequences[key]
        return False
    if isinstance(update, ServiceResetUpdate):
        sequences.clear()
        _record_sequences(sequences, update.snapshot.instances)
    elif isinstance(update, ServiceReplacedUpdate):
        sequences.clear()
        _record_sequences(sequences, (update.snapshot,))
    elif isinstance(update, ServiceSpawnedUpdate):
        _record_sequences(sequences, (update.instance,))
    elif isinstance(update, ServiceUnavailableUpdate):
        sequences.clear()
    else:
        closed = update.instance
        for key in [k for k in sequences if k[0] == closed.key and k[1] == closed.generation]:
            del sequences[key]
    return False


def _raise_collected(errors: list[Exception], message: str) -> None:
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ExceptionGroup(message, errors)
