"""Service tokens: typed identities that facets provide and use, addressed only by id.

A :class:`Service` creates nothing. It names a contract (``"pi.approval-dialog"``) and says whether
it may cross a process boundary:

* ``local=False`` (the default) makes it *remotable*: every member is either a method taking strict
  JSON arguments plus a trailing :class:`~chord.context.Context` and returning JSON (or ``None``), or
  a replicated state whose value is JSON. Even in-process consumers reach it through a loopback
  binding, so they see exactly what a remote consumer sees.
* ``local=True`` keeps it in its process: it may carry any Python object and is never published.

A token is used in one *mode* within a graph: ``"singleton"`` (one provider, consumed with ``use``)
or ``"keyed"`` (an owner spawns instances by string key, consumed with ``observe``). A keyed
instance is addressed by :class:`InstanceAddress` ``(key, generation)``; the generation starts at 1
and grows each time a closed key is spawned again, so stale handles never reach a replacement.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, overload

__all__ = [
    "RESERVED_SERVICE_PREFIX",
    "InstanceAddress",
    "Service",
    "ServiceMode",
    "define_service",
]

T = TypeVar("T")

ServiceMode = Literal["singleton", "keyed"]
RESERVED_SERVICE_PREFIX = "$chord."


@dataclass(frozen=True, slots=True)
class Service(Generic[T]):
    """A typed service identity. Compare and hash by ``(id, local)``; ``contract`` is a hint."""

    id: str
    local: bool = False
    contract: Any = None
    lazy: frozenset[str] = frozenset()
    """State members a remote consumer receives only while it subscribes to them (per keyed
    instance): before and after, their value is ``None`` and no update of theirs crosses the
    wire (docs/wire.md#lazy-state). For a state that changes often and that most consumers of
    most instances never look at (a conversation's view)."""

    def __post_init__(self) -> None:
        if not isinstance(self.id, str):
            raise TypeError(f"Service ID must be a string, got {type(self.id).__name__}")
        if not self.id:
            raise TypeError("Service ID must not be empty")
        if self.id.startswith(RESERVED_SERVICE_PREFIX):
            raise TypeError(
                f"Service IDs beginning with {RESERVED_SERVICE_PREFIX} are reserved: {self.id!r}"
            )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Service):
            return NotImplemented
        return self.id == other.id and self.local == other.local

    def __hash__(self) -> int:
        return hash((self.id, self.local))

    def __repr__(self) -> str:
        return f"Service({self.id!r}{', local=True' if self.local else ''})"


@overload
def define_service(
    id: str, contract: type[T], *, local: bool = False, lazy: Iterable[str] = ()
) -> Service[T]: ...
@overload
def define_service(
    id: str, contract: None = None, *, local: bool = False, lazy: Iterable[str] = ()
) -> Service[Any]: ...
def define_service(
    id: str, contract: Any = None, *, local: bool = False, lazy: Iterable[str] = ()
) -> Service[Any]:
    """Define a service token.

    ``contract`` is an optional ``Protocol`` (or class) describing the members; it types the
    handles ``use`` returns. ``lazy`` names the keyed state members a remote consumer receives
    only while it subscribes to them (:attr:`Service.lazy`). Raises ``TypeError`` for an empty id
    or one starting with ``$chord.``.
    """
    return Service(id, local, contract, frozenset(lazy))


@dataclass(frozen=True, slots=True, order=True)
class InstanceAddress:
    """Where a keyed instance lives: its key and the generation of that key's incarnation."""

    key: str
    generation: int

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise TypeError("Instance key must be a non-empty string")
        if type(self.generation) is not int or self.generation < 1:
            raise TypeError(f"Instance generation must be an int >= 1, got {self.generation!r}")
