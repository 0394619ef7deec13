"""Which attributes of an implementation a remotable service exposes, and as what.

A remotable service is reached through facades that only know two kinds of member:

* a **method**, called with JSON arguments plus a trailing ``Context``, returning JSON (sync or
  async: an awaitable result is awaited);
* a **state**, a chord replicated state whose value streams to every subscriber.

:func:`classify_implementation` turns an implementation object into that description, once, when
it is provided or spawned, so a bad member fails loudly at the provider instead of surprising a
consumer later. The rules:

* The implementation is an object: a ``dict``/``Mapping`` of members, a ``SimpleNamespace``, or a
  class instance. ``None``, numbers, strings, lists, tuples and classes are rejected.
* Members are the *public* names (no leading ``_``), sorted.
* A callable is a method. A replicated state is recognised only through
  :func:`chord.state.is_replicated_state` (chord's own registry), never by duck typing, so an
  object that merely has ``value`` and ``subscribe`` is not mistaken for one. A consumer-side
  ``ReplicaState`` is refused: it may be cold, and a snapshot needs a value.
* Properties and other descriptors are rejected: looking a member up must not run code, and a
  value that changes behind a property could not be replicated. ``inspect.getattr_static`` finds
  them without invoking them. Methods defined on the class, ``staticmethod``/``classmethod`` and
  ``__slots__`` fields are plain and allowed.
* Anything else is "not remotely exposable", and an implementation with no members is refused.

The resulting :data:`MemberShape` (names and kinds) is what a singleton replacement must preserve.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import msgspec

from chord.state import ReplicaState, is_replicated_state

__all__ = [
    "ClassifiedImplementation",
    "MemberKind",
    "MemberShape",
    "MethodMember",
    "StateMember",
    "classify_implementation",
    "member_shape",
]

MemberKind = Literal["method", "state"]
MemberShape: TypeAlias = Mapping[str, MemberKind]
"""Member names and their kinds; two implementations have the same shape when these are equal."""


@dataclass(frozen=True, slots=True)
class MethodMember:
    """A callable member (already bound to its implementation).

    ``arity`` caches, per argument count, whether the function takes that many arguments before
    its ``Context`` (the provider asks ``inspect.signature`` once per count, not once per call).
    """

    function: Callable[..., Any]
    kind: Literal["method"] = "method"
    arity: dict[int, bool] = field(default_factory=dict, compare=False, hash=False, repr=False)


class StateMember(msgspec.Struct, frozen=True):
    """A replicated state member (a ``MutableReplicatedState``)."""

    state: Any
    kind: Literal["state"] = "state"


class ClassifiedImplementation(msgspec.Struct, frozen=True):
    """An implementation and its members, sorted by name."""

    implementation: object
    members: Mapping[str, MethodMember | StateMember]

    @property
    def shape(self) -> dict[str, MemberKind]:
        return member_shape(self.members)


def member_shape(members: Mapping[str, MethodMember | StateMember]) -> dict[str, MemberKind]:
    """The names and kinds of ``members``."""
    return {name: member.kind for name, member in members.items()}


_NOT_OBJECTS = (bool, int, float, complex, str, bytes, bytearray, list, tuple, set, frozenset)
_PLAIN_CLASS_ATTRIBUTES = (
    types.FunctionType,
    types.BuiltinFunctionType,
    staticmethod,
    classmethod,
    types.MemberDescriptorType,  # a __slots__ field: plain storage
)


def classify_implementation(service_id: str, implementation: object) -> ClassifiedImplementation:
    """Describe ``implementation``'s members, or raise ``TypeError`` naming the bad member."""
    if implementation is None or isinstance(implementation, (*_NOT_OBJECTS, type)):
        raise TypeError(
            f"Remote service {service_id} implementation must be an object, "
            f"got {type(implementation).__name__}"
        )
    if isinstance(implementation, Mapping):
        raw = _mapping_members(service_id, implementation)
    else:
        raw = _attribute_members(service_id, implementation)
    members: dict[str, MethodMember | StateMember] = {}
    for name in sorted(raw):
        value = raw[name]
        if isinstance(value, ReplicaState):
            raise TypeError(
                f"Remote service member {service_id}.{name} is a consumer replica; provide the "
                "authoritative replicated state instead (a replica may be cold)"
            )
        if is_replicated_state(value):
            members[name] = StateMember(value)
        elif callable(value):
            members[name] = MethodMember(value)
        else:
            raise TypeError(
                f"Remote service member {service_id}.{name} is not remotely exposable "
                f"({type(value).__name__} is neither a method nor a replicated state)"
            )
    if not members:
        raise TypeError(f"Remote service {service_id} has no members")
    return ClassifiedImplementation(implementation, members)


def _mapping_members(service_id: str, implementation: Mapping[Any, Any]) -> dict[str, Any]:
    members: dict[str, Any] = {}
    for name, value in implementation.items():
        if type(name) is not str or not name:
            raise TypeError(f"Remote service {service_id} member names must be non-empty strings")
        if name.startswith("_"):
            raise TypeError(
                f"Remote service member {service_id}.{name} is private; "
                "names starting with _ cannot be exposed"
            )
        members[name] = value
    return members


def _attribute_members(service_id: str, implementation: object) -> dict[str, Any]:
    members: dict[str, Any] = {}
    own = getattr(implementation, "__dict__", {})
    for name in dir(implementation):
        if name.startswith("_"):
            continue
        if isinstance(own, dict) and name in own:
            members[name] = own[name]
            continue
        static = inspect.getattr_static(implementation, name)
        if isinstance(static, _PLAIN_CLASS_ATTRIBUTES) or not _is_descriptor(static):
            members[name] = getattr(implementation, name)
            continue
        raise TypeError(
            f"Remote service member {service_id}.{name} must be a plain attribute or method, "
            f"not a {type(static).__name__} (accessors are not remotely exposable)"
        )
    return members


def _is_descriptor(value: object) -> bool:
    kind = type(value)
    return hasattr(kind, "__get__") or hasattr(kind, "__set__") or hasattr(kind, "__delete__")
