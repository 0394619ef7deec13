"""The service grammar: calls, catalogues, snapshots and updates, and their exact JSON shapes.

Chord does not define framing, routing or transports, but it does define *what* crosses them:

* a :class:`ServiceCall` ``{serviceId, instance?, member, args}`` (the trailing ``Context`` is
  never sent; the receiving side builds its own);
* the catalogue ``[{serviceId, mode}]`` a provider offers;
* a :class:`ServiceSubscriptionSnapshot` ``{serviceId, mode, instances}`` taken atomically when a
  consumer subscribes, where every state member is a one-op base batch ``[["r", value]]``;
* the :data:`ServiceProviderUpdate` stream that follows it: ``state``, ``reset``, ``unavailable``,
  ``replaced``, ``spawned`` and ``closed``.

Records are frozen :class:`msgspec.Struct` types with snake_case fields (defining one costs a
fiftieth of a frozen slotted dataclass, and every process start defines them all);
:meth:`to_json` produces the camelCase JSON of @earendil-works/chord 0.87, so a TypeScript peer
reads what Python writes. The ``parse_*``
functions accept only that exact JSON: unknown keys, missing keys, empty ids, out-of-range numbers,
unknown ``type`` or ``kind`` values and invalid ops raise :class:`ServiceGrammarError`, whose
message names the record (``"Invalid service call"``) and the field (``$.instance.generation``).

Ops come in two forms. *Decoded* ops are tuples (``("s", ("a", 0), 1)``), as
:mod:`chord.delta` applies them; :func:`parse_service_provider_update` accepts their JSON arrays
and returns tuples. *Wire* ops are the compressed arrays a :func:`chord.delta.encoder` emits (path
ids, short forms); the ``parse_wire_*`` variants validate that grammar and keep them as lists, for
the stateful decoders in :mod:`chord.remote.codec`.

Control calls (``$chord.service``) let a peer list the catalogue and open or close subscriptions
over the same call channel as ordinary methods. Three more (``mute``, ``follow``, ``unfollow``)
are this implementation's extension for lazily replicated state members (docs/wire.md#lazy-state):
Chord 0.87.1 neither sends nor recognises them, so a Chord peer never meets them, and a Chord
provider refuses them (the Python binding then replicates eagerly, as Chord does).

Why one module: it is one protocol's grammar: every record's ``to_json`` and its ``parse_*``
counterpart share the field checks (``_keys``, ``_id``, ``_integer``, ops) and the error paths, so
writer and parser of each shape stay side by side and cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal, NoReturn, TypeAlias

import msgspec

from chord.delta import assert_valid_wire_op, decode_ops
from chord.json import format_path, integral
from chord.remote.errors import ServiceGrammarError
from chord.services import InstanceAddress, ServiceMode

__all__ = [
    "SERVICE_CONTROL_ID",
    "Address",
    "CatalogueControlCall",
    "FollowControlCall",
    "MuteControlCall",
    "Op",
    "ServiceCall",
    "ServiceCatalogueEntry",
    "ServiceClosedUpdate",
    "ServiceControlCall",
    "ServiceInstanceSnapshot",
    "ServiceMemberSnapshot",
    "ServiceMethodSnapshot",
    "ServiceProviderUpdate",
    "ServiceReplacedUpdate",
    "ServiceResetUpdate",
    "ServiceSpawnedUpdate",
    "ServiceStateSnapshot",
    "ServiceStateUpdate",
    "ServiceSubscriptionSnapshot",
    "ServiceUnavailableUpdate",
    "SubscribeControlCall",
    "UnsubscribeControlCall",
    "address_to_json",
    "decode_service_control_call",
    "ops_to_json",
    "parse_address",
    "parse_service_call",
    "parse_service_catalogue",
    "parse_service_provider_update",
    "parse_service_subscription_snapshot",
    "parse_wire_service_provider_update",
    "parse_wire_service_subscription_snapshot",
    "service_catalogue_call",
    "service_follow_call",
    "service_mute_call",
    "service_subscribe_call",
    "service_unsubscribe_call",
]

Op: TypeAlias = tuple[Any, ...]
"""A decoded op (``("r", v)``, ``("s", path, v)``, ...) or, in ``Wire`` records, a wire op list."""

Address = InstanceAddress
"""Where a keyed instance lives: ``{key, generation}`` on the wire."""

SERVICE_CONTROL_ID = "$chord.service"
"""The reserved service id of the catalogue/subscribe/unsubscribe control calls."""

_MODES: tuple[ServiceMode, ...] = ("singleton", "keyed")


# -- JSON helpers -----------------------------------------------------------------------------


def address_to_json(address: InstanceAddress) -> dict[str, Any]:
    """``{"key": ..., "generation": ...}``."""
    return {"key": address.key, "generation": address.generation}


def _op_to_json(op: Sequence[Any]) -> list[Any]:
    # Paths, permutations and spliced items may be tuples in decoded ops; JSON wants arrays.
    # Values are strict JSON already (never tuples), so one level is enough.
    return [list(part) if type(part) is tuple else part for part in op]


def ops_to_json(ops: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """Decoded (tuple) or wire (list) ops as JSON arrays. Values are shared, not copied."""
    return [_op_to_json(op) for op in ops]


# -- calls ------------------------------------------------------------------------------------


class ServiceCall(msgspec.Struct, frozen=True):
    """One method invocation: ``{serviceId, instance?, member, args}``.

    ``args`` excludes the trailing ``Context``. Keyed instances carry their ``instance``
    address; singletons have none. Construction trusts its input; use
    ``parse_service_call`` for JSON from a peer.
    """

    service_id: str
    member: str
    args: tuple[Any, ...] = ()
    instance: InstanceAddress | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"serviceId": self.service_id}
        if self.instance is not None:
            out["instance"] = address_to_json(self.instance)
        out["member"] = self.member
        out["args"] = list(self.args)
        return out


class ServiceCatalogueEntry(msgspec.Struct, frozen=True):
    """One offered service: ``{serviceId, mode}``."""

    service_id: str
    mode: ServiceMode

    def to_json(self) -> dict[str, Any]:
        return {"serviceId": self.service_id, "mode": self.mode}


class CatalogueControlCall(msgspec.Struct, frozen=True):
    """``$chord.service.catalogue()``: list the provider's catalogue."""

    type: ClassVar[Literal["catalogue"]] = "catalogue"


class SubscribeControlCall(msgspec.Struct, frozen=True):
    """``$chord.service.subscribe(subscriptionId, serviceId, mode)``: open a subscription."""

    subscription_id: str
    service_id: str
    mode: ServiceMode
    type: ClassVar[Literal["subscribe"]] = "subscribe"


class UnsubscribeControlCall(msgspec.Struct, frozen=True):
    """``$chord.service.unsubscribe(subscriptionId)``: close a subscription."""

    subscription_id: str
    type: ClassVar[Literal["unsubscribe"]] = "unsubscribe"


class MuteControlCall(msgspec.Struct, frozen=True):
    """``$chord.service.mute(subscriptionId, member)``: stop sending the state updates of
    ``member`` on that subscription, except for the instances the peer follows (an extension,
    docs/wire.md#lazy-state)."""

    subscription_id: str
    member: str
    type: ClassVar[Literal["mute"]] = "mute"


class FollowControlCall(msgspec.Struct, frozen=True):
    """``$chord.service.follow(subscriptionId, instance, member)`` (``follow=True``) or
    ``unfollow(...)``: send, or stop sending, the updates of one muted member of one instance
    (``instance`` is ``None`` for a singleton). An extension, docs/wire.md#lazy-state."""

    subscription_id: str
    instance: InstanceAddress | None
    member: str
    follow: bool

    @property
    def type(self) -> Literal["follow", "unfollow"]:
        return "follow" if self.follow else "unfollow"


ServiceControlCall: TypeAlias = (
    CatalogueControlCall
    | SubscribeControlCall
    | UnsubscribeControlCall
    | MuteControlCall
    | FollowControlCall
)


def service_catalogue_call() -> ServiceCall:
    """The control call that asks a provider for its catalogue."""
    return ServiceCall(SERVICE_CONTROL_ID, "catalogue", ())


def service_subscribe_call(subscription_id: str, service_id: str, mode: ServiceMode) -> ServiceCall:
    """The control call that opens subscription ``subscription_id`` on ``service_id``."""
    return ServiceCall(SERVICE_CONTROL_ID, "subscribe", (subscription_id, service_id, mode))


def service_unsubscribe_call(subscription_id: str) -> ServiceCall:
    """The control call that closes subscription ``subscription_id``."""
    return ServiceCall(SERVICE_CONTROL_ID, "unsubscribe", (subscription_id,))


def service_mute_call(subscription_id: str, member: str) -> ServiceCall:
    """The control call that mutes state member ``member`` of subscription ``subscription_id``."""
    return ServiceCall(SERVICE_CONTROL_ID, "mute", (subscription_id, member))


def service_follow_call(
    subscription_id: str, instance: InstanceAddress | None, member: str, follow: bool = True
) -> ServiceCall:
    """The control call that follows (or, with ``follow=False``, unfollows) one muted member."""
    address = None if instance is None else address_to_json(instance)
    return ServiceCall(
        SERVICE_CONTROL_ID, "follow" if follow else "unfollow", (subscription_id, address, member)
    )


def _is_id(value: object) -> bool:
    return type(value) is str and len(value) > 0


def decode_service_control_call(call: ServiceCall) -> ServiceControlCall | None:
    """Recognise a well-formed control call, or return ``None``.

    A malformed control call is *not* recognised: it falls through to the provider's ordinary
    ``invoke``, which rejects the reserved id as ``service_not_allowed``.
    """
    if call.service_id != SERVICE_CONTROL_ID or call.instance is not None:
        return None
    args = call.args
    if call.member == "catalogue" and len(args) == 0:
        return CatalogueControlCall()
    if (
        call.member == "subscribe"
        and len(args) == 3
        and _is_id(args[0])
        and _is_id(args[1])
        and args[2] in _MODES
        and type(args[2]) is str
    ):
        return SubscribeControlCall(args[0], args[1], args[2])
    if call.member == "unsubscribe" and len(args) == 1 and _is_id(args[0]):
        return UnsubscribeControlCall(args[0])
    if call.member == "mute" and len(args) == 2 and _is_id(args[0]) and _is_id(args[1]):
        return MuteControlCall(args[0], args[1])
    if (
        call.member in ("follow", "unfollow")
        and len(args) == 3
        and _is_id(args[0])
        and _is_id(args[2])
    ):
        try:
            address = None if args[1] is None else parse_address(args[1])
        except ServiceGrammarError:
            return None
        return FollowControlCall(args[0], address, args[2], call.member == "follow")
    return None


# -- snapshots --------------------------------------------------------------------------------


class ServiceMethodSnapshot(msgspec.Struct, frozen=True):
    """A method member: ``{name, kind: "method"}``."""

    name: str
    kind: ClassVar[Literal["method"]] = "method"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": "method"}


class ServiceStateSnapshot(msgspec.Struct, frozen=True):
    """A state member at ``sequence``: ``{name, kind: "state", sequence, ops}``.

    In a subscription snapshot ``ops`` is the base batch ``(("r", value),)``.
    """

    name: str
    sequence: int
    ops: tuple[Op, ...]
    kind: ClassVar[Literal["state"]] = "state"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": "state",
            "sequence": self.sequence,
            "ops": ops_to_json(self.ops),
        }


ServiceMemberSnapshot: TypeAlias = ServiceMethodSnapshot | ServiceStateSnapshot


class ServiceInstanceSnapshot(msgspec.Struct, frozen=True):
    """One live instance: its members (sorted by name) and, when keyed, its address."""

    members: tuple[ServiceMemberSnapshot, ...]
    instance: InstanceAddress | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.instance is not None:
            out["instance"] = address_to_json(self.instance)
        out["members"] = [member.to_json() for member in self.members]
        return out


class ServiceSubscriptionSnapshot(msgspec.Struct, frozen=True):
    """Everything a new subscriber starts from. Keyed instances are sorted by key."""

    service_id: str
    mode: ServiceMode
    instances: tuple[ServiceInstanceSnapshot, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "serviceId": self.service_id,
            "mode": self.mode,
            "instances": [instance.to_json() for instance in self.instances],
        }


# -- updates ----------------------------------------------------------------------------------


class ServiceStateUpdate(msgspec.Struct, frozen=True):
    """One published revision of a state member; ``sequence`` is the member's new sequence."""

    member: str
    sequence: int
    ops: tuple[Op, ...]
    instance: InstanceAddress | None = None
    type: ClassVar[Literal["state"]] = "state"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "state"}
        if self.instance is not None:
            out["instance"] = address_to_json(self.instance)
        out["member"] = self.member
        out["sequence"] = self.sequence
        out["ops"] = ops_to_json(self.ops)
        return out


class ServiceResetUpdate(msgspec.Struct, frozen=True):
    """Start over from ``snapshot``: sent when a subscriber's queue overflowed."""

    snapshot: ServiceSubscriptionSnapshot
    type: ClassVar[Literal["reset"]] = "reset"

    def to_json(self) -> dict[str, Any]:
        return {"type": "reset", "snapshot": self.snapshot.to_json()}


class ServiceUnavailableUpdate(msgspec.Struct, frozen=True):
    """The singleton was withdrawn or the provider disposed; values become ``None``."""

    type: ClassVar[Literal["unavailable"]] = "unavailable"

    def to_json(self) -> dict[str, Any]:
        return {"type": "unavailable"}


class ServiceReplacedUpdate(msgspec.Struct, frozen=True):
    """The singleton has a new implementation (same member shape); rehydrate from ``snapshot``."""

    snapshot: ServiceInstanceSnapshot
    type: ClassVar[Literal["replaced"]] = "replaced"

    def to_json(self) -> dict[str, Any]:
        return {"type": "replaced", "snapshot": self.snapshot.to_json()}


class ServiceSpawnedUpdate(msgspec.Struct, frozen=True):
    """A keyed instance went live."""

    instance: ServiceInstanceSnapshot
    type: ClassVar[Literal["spawned"]] = "spawned"

    def to_json(self) -> dict[str, Any]:
        return {"type": "spawned", "instance": self.instance.to_json()}


class ServiceClosedUpdate(msgspec.Struct, frozen=True):
    """A keyed instance closed."""

    instance: InstanceAddress
    type: ClassVar[Literal["closed"]] = "closed"

    def to_json(self) -> dict[str, Any]:
        return {"type": "closed", "instance": address_to_json(self.instance)}


ServiceProviderUpdate: TypeAlias = (
    ServiceStateUpdate
    | ServiceResetUpdate
    | ServiceUnavailableUpdate
    | ServiceReplacedUpdate
    | ServiceSpawnedUpdate
    | ServiceClosedUpdate
)


# -- parsing ----------------------------------------------------------------------------------

_Path = tuple[str | int, ...]
_OpsParser = Callable[[list[Any], str, _Path], tuple[Op, ...]]


def _fail(what: str, path: _Path, problem: str) -> NoReturn:
    raise ServiceGrammarError(f"Invalid {what} at {format_path(path)}: {problem}")


def _record(value: object, what: str, path: _Path) -> Mapping[str, Any]:
    if type(value) is not dict:
        _fail(what, path, f"expected an object, got {type(value).__name__}")
    return value  # type: ignore[return-value]


def _keys(
    record: Mapping[str, Any],
    required: tuple[str, ...],
    optional: tuple[str, ...],
    what: str,
    path: _Path,
) -> None:
    for key in required:
        if key not in record:
            _fail(what, path, f"missing key {key!r}")
    for key in record:
        if key not in required and key not in optional:
            _fail(what, path, f"unexpected key {key!r}")


def _id(record: Mapping[str, Any], key: str, what: str, path: _Path) -> str:
    value = record[key]
    if not _is_id(value):
        _fail(what, (*path, key), f"expected a non-empty string, got {value!r}")
    return value


def _integer(record: Mapping[str, Any], key: str, minimum: int, what: str, path: _Path) -> int:
    # Any JSON number with an integral value, as Chord's ``Number.isInteger`` (``1.0`` is 1).
    value = integral(record[key])
    if value is None or value < minimum:
        _fail(what, (*path, key), f"expected an integer >= {minimum}, got {record[key]!r}")
    return value


def _mode(record: Mapping[str, Any], what: str, path: _Path) -> ServiceMode:
    value = record["mode"]
    if type(value) is not str or value not in _MODES:
        _fail(what, (*path, "mode"), f"expected 'singleton' or 'keyed', got {value!r}")
    return value  # type: ignore[return-value]


def _array(value: object, what: str, path: _Path) -> list[Any]:
    if type(value) is not list:
        _fail(what, path, f"expected an array, got {type(value).__name__}")
    return value  # type: ignore[return-value]


def parse_address(value: object, path: _Path = ()) -> InstanceAddress:
    """Parse ``{key, generation}`` (non-empty key, generation >= 1)."""
    what = "service instance address"
    record = _record(value, what, path)
    _keys(record, ("key", "generation"), (), what, path)
    return InstanceAddress(
        _id(record, "key", what, path), _integer(record, "generation", 1, what, path)
    )


def _decoded_ops(items: list[Any], what: str, path: _Path) -> tuple[Op, ...]:
    try:
        return tuple(decode_ops(items))
    except (TypeError, ValueError) as error:  # InvalidOpError, UnsafePathError, JsonError
        _fail(what, path, f"bad op: {error}")


def _wire_ops(items: list[Any], what: str, path: _Path) -> tuple[Op, ...]:
    for index, item in enumerate(items):
        try:
            assert_valid_wire_op(item)
        except (TypeError, ValueError) as error:  # InvalidOpError, UnsafePathError, JsonError
            _fail(what, (*path, index), f"bad wire op: {error}")
    return tuple(items)


def _ops(value: object, parse_ops: _OpsParser, what: str, path: _Path) -> tuple[Op, ...]:
    return parse_ops(_array(value, what, path), what, path)


def parse_service_call(value: object) -> ServiceCall:
    """Parse ``{serviceId, instance?, member, args}``; ``args`` must be an array."""
    what = "service call"
    record = _record(value, what, ())
    _keys(record, ("serviceId", "member", "args"), ("instance",), what, ())
    service_id = _id(record, "serviceId", what, ())
    member = _id(record, "member", what, ())
    args = _array(record["args"], what, ("args",))
    instance = parse_address(record["instance"], ("instance",)) if "instance" in record else None
    return ServiceCall(service_id, member, tuple(args), instance)


def parse_service_catalogue(value: object) -> tuple[ServiceCatalogueEntry, ...]:
    """Parse ``[{serviceId, mode}]`` with unique ids."""
    what = "service catalogue"
    entries: list[ServiceCatalogueEntry] = []
    seen: set[str] = set()
    for index, item in enumerate(_array(value, what, ())):
        path = (index,)
        record = _record(item, what, path)
        _keys(record, ("serviceId", "mode"), (), what, path)
        service_id = _id(record, "serviceId", what, path)
        if service_id in seen:
            _fail(what, (*path, "serviceId"), f"duplicate service id {service_id!r}")
        seen.add(service_id)
        entries.append(ServiceCatalogueEntry(service_id, _mode(record, what, path)))
    return tuple(entries)


def _member(value: object, parse_ops: _OpsParser, path: _Path) -> ServiceMemberSnapshot:
    what = "service member snapshot"
    record = _record(value, what, path)
    kind = record.get("kind")
    if kind == "method" and type(kind) is str:
        what = "service method snapshot"
        _keys(record, ("name", "kind"), (), what, path)
        return ServiceMethodSnapshot(_id(record, "name", what, path))
    if kind == "state" and type(kind) is str:
        what = "service state snapshot"
        _keys(record, ("name", "kind", "sequence", "ops"), (), what, path)
        return ServiceStateSnapshot(
            _id(record, "name", what, path),
            _integer(record, "sequence", 0, what, path),
            _ops(record["ops"], parse_ops, what, (*path, "ops")),
        )
    _fail(what, (*path, "kind"), f"expected 'method' or 'state', got {kind!r}")


def _instance(value: object, parse_ops: _OpsParser, path: _Path) -> ServiceInstanceSnapshot:
    what = "service instance snapshot"
    record = _record(value, what, path)
    _keys(record, ("members",), ("instance",), what, path)
    address = (
        parse_address(record["instance"], (*path, "instance")) if "instance" in record else None
    )
    members = _array(record["members"], what, (*path, "members"))
    return ServiceInstanceSnapshot(
        tuple(_member(item, parse_ops, (*path, "members", i)) for i, item in enumerate(members)),
        address,
    )


def _subscription(value: object, parse_ops: _OpsParser, path: _Path) -> ServiceSubscriptionSnapshot:
    what = "service subscription snapshot"
    record = _record(value, what, path)
    _keys(record, ("serviceId", "mode", "instances"), (), what, path)
    service_id = _id(record, "serviceId", what, path)
    mode = _mode(record, what, path)
    instances = _array(record["instances"], what, (*path, "instances"))
    return ServiceSubscriptionSnapshot(
        service_id,
        mode,
        tuple(
            _instance(item, parse_ops, (*path, "instances", i)) for i, item in enumerate(instances)
        ),
    )


def _update(value: object, parse_ops: _OpsParser) -> ServiceProviderUpdate:
    record = _record(value, "service provider update", ())
    kind = record.get("type")
    if type(kind) is not str:
        _fail("service provider update", ("type",), f"expected an update type, got {kind!r}")
    if kind == "state":
        what = "service state update"
        _keys(record, ("type", "member", "sequence", "ops"), ("instance",), what, ())
        member = _id(record, "member", what, ())
        sequence = _integer(record, "sequence", 1, what, ())
        address = parse_address(record["instance"], ("instance",)) if "instance" in record else None
        return ServiceStateUpdate(
            member, sequence, _ops(record["ops"], parse_ops, what, ("ops",)), address
        )
    if kind == "reset":
        _keys(record, ("type", "snapshot"), (), "service reset update", ())
        snapshot = _subscription(record["snapshot"], parse_ops, ("snapshot",))
        for i, instance in enumerate(snapshot.instances):
            for j, member in enumerate(instance.members):
                if isinstance(member, ServiceStateSnapshot) and not _is_root_batch(member.ops):
                    _fail(
                        "service reset update",
                        ("snapshot", "instances", i, "members", j, "ops"),
                        "Service reset must contain full root replacements",
                    )
        return ServiceResetUpdate(snapshot)
    if kind == "unavailable":
        _keys(record, ("type",), (), "service unavailable update", ())
        return ServiceUnavailableUpdate()
    if kind == "replaced":
        _keys(record, ("type", "snapshot"), (), "service replacement update", ())
        return ServiceReplacedUpdate(_instance(record["snapshot"], parse_ops, ("snapshot",)))
    if kind == "spawned":
        _keys(record, ("type", "instance"), (), "service spawn update", ())
        return ServiceSpawnedUpdate(_instance(record["instance"], parse_ops, ("instance",)))
    if kind == "closed":
        _keys(record, ("type", "instance"), (), "service close update", ())
        return ServiceClosedUpdate(parse_address(record["instance"], ("instance",)))
    _fail("service provider update", ("type",), f"unknown update type {kind!r}")


def _is_root_batch(ops: Sequence[Sequence[Any]]) -> bool:
    return len(ops) == 1 and len(ops[0]) > 0 and ops[0][0] == "r"


def parse_service_subscription_snapshot(value: object) -> ServiceSubscriptionSnapshot:
    """Parse a snapshot whose ops are decoded-op arrays; returns tuple ops."""
    return _subscription(value, _decoded_ops, ())


def parse_wire_service_subscription_snapshot(value: object) -> ServiceSubscriptionSnapshot:
    """Parse a snapshot whose ops are wire ops (see :mod:`chord.remote.codec`); keeps them."""
    return _subscription(value, _wire_ops, ())


def parse_service_provider_update(value: object) -> ServiceProviderUpdate:
    """Parse an update whose ops are decoded-op arrays; returns tuple ops."""
    return _update(value, _decoded_ops)


def parse_wire_service_provider_update(value: object) -> ServiceProviderUpdate:
    """Parse an update whose ops are wire ops (see :mod:`chord.remote.codec`); keeps them."""
    return _update(value, _wire_ops)
