"""Named, revisioned registries: how tools and system sections are registered.

A registration is process state, never durable (docs/design/harness.md#durable-primitives): code re-establishes it at startup or
reload. Three rules make that safe (docs/design/reload.md#registrations):

* **Unique while live.** A name can be registered once; a second registration of a live name is
  rejected with :class:`DuplicateRegistration`. After the first is removed, the name is free
  again.
* **Exact, idempotent removal.** ``register`` returns a :class:`Registration`; calling it removes
  exactly that object. Calling it again, or after a newer registration took the name, does
  nothing: an old generation's disposal can never remove its replacement.
* **Revisions.** Every effective change (add or remove) bumps :attr:`NamedRegistry.revision`.
  Work that prepared against a :meth:`~NamedRegistry.snapshot` compares revisions to notice that
  the registry moved underneath it (generation preparation retries); in-flight invocations keep
  the object they captured and are unaffected.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Generic, TypeVar

import msgspec

__all__ = ["DuplicateRegistration", "NamedRegistry", "Registration", "RegistrySnapshot"]

T = TypeVar("T")


class DuplicateRegistration(ValueError):
    """The name is already registered by a live registration."""


class RegistrySnapshot(msgspec.Struct, Generic[T], frozen=True):
    """An immutable view of a registry at one revision."""

    revision: int
    items: Mapping[str, T]

    def get(self, name: str) -> T | None:
        """The item registered under ``name`` at this revision, if any."""
        return self.items.get(name)


class Registration:
    """The remover returned by a registration: call it to unregister (idempotent).

    :attr:`alive` is true until it is called (or its owner removed it another way).
    """

    __slots__ = ("_alive", "_on_remove", "name")

    def __init__(self, name: str, on_remove: Callable[[Registration], None]) -> None:
        self.name = name
        self._alive = True
        self._on_remove = on_remove

    @property
    def alive(self) -> bool:
        """True while this registration is in effect."""
        return self._alive

    def __call__(self) -> None:
        if not self._alive:
            return
        self._alive = False
        self._on_remove(self)

    def __repr__(self) -> str:
        return f"<Registration {self.name!r} {'live' if self._alive else 'removed'}>"


class NamedRegistry(Generic[T]):
    """Items by unique name, with a revision counter.

    ``check`` validates an item before it is registered and returns its name; it raises a clear
    error for a bad item, and nothing is registered then.
    """

    __slots__ = ("_check", "_items", "_owners", "_revision", "_what")

    def __init__(self, what: str, check: Callable[[T], str]) -> None:
        self._what = what
        self._check = check
        self._items: dict[str, T] = {}
        self._owners: dict[str, Registration] = {}
        self._revision = 0

    @property
    def revision(self) -> int:
        """Bumped by every effective registration and removal."""
        return self._revision

    def register(self, item: T) -> Registration:
        """Register ``item`` under its name; duplicates of a live name are rejected."""
        name = self._check(item)
        if name in self._items:
            raise DuplicateRegistration(
                f"{self._what} {name!r} is already registered (unregister it first)"
            )
        registration = Registration(name, self._remove)
        self._items[name] = item
        self._owners[name] = registration
        self._revision += 1
        return registration

    def _remove(self, registration: Registration) -> None:
        if self._owners.get(registration.name) is registration:
            del self._owners[registration.name]
            del self._items[registration.name]
            self._revision += 1

    def get(self, name: str) -> T | None:
        """The live item named ``name``, if any."""
        return self._items.get(name)

    def snapshot(self) -> RegistrySnapshot[T]:
        """The current items and revision; later changes do not affect it."""
        return RegistrySnapshot(self._revision, MappingProxyType(dict(self._items)))

    def names(self) -> list[str]:
        """Live names in registration order."""
        return list(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._items.values()))

    def __len__(self) -> int:
        return len(self._items)
