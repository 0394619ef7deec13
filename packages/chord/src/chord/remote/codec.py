"""Per-subscription path compression for the ops inside snapshots and updates.

On the wire, a state member's op batches are compressed by a :mod:`chord.delta` encoder: the
second use of a path defines a numeric id, later uses refer to it, and a repeated path within a
batch is omitted. That dictionary lives on both ends, so each *(subscription x state member
incarnation)* needs its own encoder on the provider side and its own decoder on the consumer
side, created and dropped in lockstep.

:func:`create_service_state_encoder` and :func:`create_service_state_decoder` keep that registry,
keyed by ``(instance key, generation, member)`` (``None`` key and generation for a singleton):

* a snapshot, ``reset``, ``replaced`` or ``unavailable`` starts over with a fresh registry;
* ``spawned`` adds the new instance's state members (a duplicate is an error);
* ``closed`` drops that instance's entries;
* a ``state`` update for a member with no entry raises ``"Unknown service state ..."``.

Both sides apply the same rules to the same update stream, so their dictionaries stay in step.
Method members carry no ops and pass through untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from msgspec.structs import replace

from chord.delta import decoder, encoder
from chord.remote.grammar import (
    Op,
    ServiceClosedUpdate,
    ServiceInstanceSnapshot,
    ServiceMemberSnapshot,
    ServiceProviderUpdate,
    ServiceReplacedUpdate,
    ServiceResetUpdate,
    ServiceSpawnedUpdate,
    ServiceStateSnapshot,
    ServiceStateUpdate,
    ServiceSubscriptionSnapshot,
    ServiceUnavailableUpdate,
)
from chord.services import InstanceAddress

__all__ = [
    "ServiceStateDecoder",
    "ServiceStateEncoder",
    "create_service_state_decoder",
    "create_service_state_encoder",
]


C = TypeVar("C")
_Key = tuple[str | None, int | None, str]


class _Registry(Generic[C]):
    """One codec per state member incarnation."""

    __slots__ = ("_create", "_entries")

    def __init__(self, create: Callable[[], C]) -> None:
        self._create = create
        self._entries: dict[_Key, C] = {}

    def reset(self) -> None:
        self._entries.clear()

    def add(self, instance: InstanceAddress | None, member: str) -> C:
        key = _key(instance, member)
        if key in self._entries:
            raise ValueError(f"Duplicate service state {_describe(instance, member)}")
        codec = self._entries[key] = self._create()
        return codec

    def get(self, instance: InstanceAddress | None, member: str) -> C:
        codec = self._entries.get(_key(instance, member))
        if codec is None:
            raise ValueError(f"Unknown service state {_describe(instance, member)}")
        return codec

    def remove_instance(self, instance: InstanceAddress) -> None:
        for key in [
            k for k in self._entries if k[0] == instance.key and k[1] == instance.generation
        ]:
            del self._entries[key]


def _key(instance: InstanceAddress | None, member: str) -> _Key:
    if instance is None:
        return (None, None, member)
    return (instance.key, instance.generation, member)


def _describe(instance: InstanceAddress | None, member: str) -> str:
    return member if instance is None else f"{instance.key}@{instance.generation}.{member}"


def _instance(
    instance: ServiceInstanceSnapshot,
    registry: _Registry[C],
    transform: Callable[[C, tuple[Op, ...]], tuple[Op, ...]],
) -> ServiceInstanceSnapshot:
    members: list[ServiceMemberSnapshot] = []
    for member in instance.members:
        if isinstance(member, ServiceStateSnapshot):
            codec = registry.add(instance.instance, member.name)
            members.append(replace(member, ops=transform(codec, member.ops)))
        else:
            members.append(member)
    return ServiceInstanceSnapshot(tuple(members), instance.instance)


def _snapshot(
    snapshot: ServiceSubscriptionSnapshot,
    registry: _Registry[C],
    transform: Callable[[C, tuple[Op, ...]], tuple[Op, ...]],
) -> ServiceSubscriptionSnapshot:
    registry.reset()
    instances = tuple(_instance(instance, registry, transform) for instance in snapshot.instances)
    return ServiceSubscriptionSnapshot(snapshot.service_id, snapshot.mode, instances)


def _update(
    update: ServiceProviderUpdate,
    registry: _Registry[C],
    transform: Callable[[C, tuple[Op, ...]], tuple[Op, ...]],
) -> ServiceProviderUpdate:
    if isinstance(update, ServiceStateUpdate):
        codec = registry.get(update.instance, update.member)
        return replace(update, ops=transform(codec, update.ops))
    if isinstance(update, ServiceResetUpdate):
        return ServiceResetUpdate(_snapshot(update.snapshot, registry, transform))
    if isinstance(update, ServiceReplacedUpdate):
        registry.reset()
        return ServiceReplacedUpdate(_instance(update.snapshot, registry, transform))
    if isinstance(update, ServiceSpawnedUpdate):
        return ServiceSpawnedUpdate(_instance(update.instance, registry, transform))
    if isinstance(update, ServiceUnavailableUpdate):
        registry.reset()
        return update
    if isinstance(update, ServiceClosedUpdate):
        registry.remove_instance(update.instance)
        return update
    raise TypeError(f"Unknown service provider update {update!r}")


def _encode(encoder: Any, ops: tuple[Op, ...]) -> tuple[Op, ...]:
    return tuple(encoder.encode(list(ops)))


def _decode(decoder: Any, ops: tuple[Op, ...]) -> tuple[Op, ...]:
    # The ops came through parse_wire_service_* (see ServiceStateDecoder): payloads checked.
    return tuple(decoder.decode(list(ops), payloads_checked=True))


class ServiceStateEncoder:
    """Provider side: turns decoded snapshots and updates into their wire form, in order."""

    __slots__ = ("_registry",)

    def __init__(self) -> None:
        self._registry: _Registry[Any] = _Registry(encoder)

    def encode_snapshot(self, snapshot: ServiceSubscriptionSnapshot) -> ServiceSubscriptionSnapshot:
        """Encode the subscription's snapshot (starts a fresh dictionary)."""
        return _snapshot(snapshot, self._registry, _encode)

    def encode_update(self, update: ServiceProviderUpdate) -> ServiceProviderUpdate:
        """Encode the next update of the same subscription."""
        return _update(update, self._registry, _encode)


class ServiceStateDecoder:
    """Consumer side: the inverse of :class:`ServiceStateEncoder`, fed the same stream.

    It takes what :func:`~chord.remote.parse_wire_service_subscription_snapshot` and
    :func:`~chord.remote.parse_wire_service_provider_update` return, which checked every wire
    op's payload as strict JSON: decoding checks the ops' grammar and paths, not the payloads
    again (a hydrate's snapshot holds the whole value)."""

    __slots__ = ("_registry",)

    def __init__(self) -> None:
        self._registry: _Registry[Any] = _Registry(decoder)

    def decode_snapshot(self, snapshot: ServiceSubscriptionSnapshot) -> ServiceSubscriptionSnapshot:
        """Decode a wire snapshot (starts a fresh dictionary)."""
        return _snapshot(snapshot, self._registry, _decode)

    def decode_update(self, update: ServiceProviderUpdate) -> ServiceProviderUpdate:
        """Decode the next wire update of the same subscription."""
        return _update(update, self._registry, _decode)


def create_service_state_encoder() -> ServiceStateEncoder:
    """A fresh encoder for one subscription."""
    return ServiceStateEncoder()


def create_service_state_decoder() -> ServiceStateDecoder:
    """A fresh decoder for one subscription."""
    return ServiceStateDecoder()
