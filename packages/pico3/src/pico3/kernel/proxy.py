"""Tracked proxies and the membrane.

Inside a commit, documents (and the namespace slices and slots inside them) are handed to
builders as *tracked proxies*: ``TrackedDict`` and ``TrackedList`` wrap the raw JSON containers
and record one delta op per mutation, on the smallest path that changed. Nothing is ever
rebuilt wholesale: ``d["a"]["b"] = 1`` records ``("s", ("a", "b"), 1)``, ``xs.append(v)``
records a splice ``("p", path, len, 0, [v])``, and growing a string by a suffix records an
append ``("a", path, suffix)``.

The membrane is what keeps a transaction's objects inside the transaction:

* every proxy of one transaction shares one :class:`Membrane`; after the commit (or a failure)
  the kernel revokes it and any later read or write through a retained handle raises
  :class:`RevokedProxy`, so a stale reference can never leak a mutation into a later commit;
* nested containers are wrapped lazily and identity-preservingly (``d["a"] is d["a"]``), and no
  raw inner container escapes through item access, iteration, ``values()`` or ``items()``;
* assigning stores a validated deep copy: the caller keeps its own object, and a proxy assigned
  somewhere else is copied, never aliased.

Paths are resolved at mutation time by walking up to the root, so a list element keeps a correct
path after earlier items were removed. A handle whose container was replaced or removed is
*detached*; mutating it raises :class:`DetachedValue` instead of recording a wrong path.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, MutableMapping, MutableSequence
from typing import Any, SupportsIndex, overload

from chord.delta.ops import RESERVED_SEGMENTS
from chord.json import JsonError, copy_json

__all__ = [
    "DetachedValue",
    "Membrane",
    "Op",
    "Path",
    "Recorder",
    "RevokedProxy",
    "TrackedDict",
    "TrackedList",
    "plain",
]

Path = tuple[str | int, ...]
Op = tuple[Any, ...]
_MISSING: Any = object()


class RevokedProxy(RuntimeError):
    """A proxy was used after its transaction finished (the membrane is revoked)."""


class DetachedValue(RuntimeError):
    """A handle's container is no longer part of its document (it was replaced or removed)."""


class Membrane:
    """The alive flag shared by every proxy of one transaction."""

    __slots__ = ("_reason", "alive")

    def __init__(self) -> None:
        self.alive = True
        self._reason = "the transaction has finished"

    def revoke(self, reason: str = "the transaction has finished") -> None:
        """Make every proxy of this transaction unusable."""
        self.alive = False
        self._reason = reason

    def check(self) -> None:
        """Raise :class:`RevokedProxy` once revoked."""
        if not self.alive:
            raise RevokedProxy(f"tracked value used after revocation: {self._reason}")


class Recorder:
    """Records the ops of one document and keeps its proxies identity-preserving."""

    __slots__ = ("_proxies", "membrane", "ops", "root_path")

    def __init__(self, membrane: Membrane, root_path: Path = ()) -> None:
        self.membrane = membrane
        self.ops: list[Op] = []
        self.root_path = root_path
        # id(raw) -> (raw, proxy); the raw reference keeps the id from being recycled.
        self._proxies: dict[int, tuple[Any, TrackedDict | TrackedList]] = {}

    def wrap(self, value: Any, parent: TrackedDict | TrackedList | None, key: str | int) -> Any:
        """The proxy for a raw container (created once), or the scalar itself."""
        kind = type(value)
        if kind is not dict and kind is not list:
            return value
        known = self._proxies.get(id(value))
        if known is not None and known[0] is value:
            proxy = known[1]
            proxy._parent = parent  # pyright: ignore[reportPrivateUsage]
            proxy._key = key  # pyright: ignore[reportPrivateUsage]
            return proxy
        proxy = (
            TrackedDict(value, self, parent, key)
            if kind is dict
            else TrackedList(value, self, parent, key)
        )
        self._proxies[id(value)] = (value, proxy)
        return proxy

    def root(self, raw: dict[str, Any]) -> TrackedDict:
        """The root proxy of a document."""
        return self.wrap(raw, None, "")

    def take(self) -> list[Op]:
        """Return the recorded ops and start a fresh list."""
        ops, self.ops = self.ops, []
        return ops


def plain(value: Any) -> Any:
    """A plain, validated deep copy of a JSON value that may contain tracked proxies."""
    return _plain(value, [])


def _plain(value: Any, path: list[str | int]) -> Any:
    if isinstance(value, TrackedDict | TrackedList):
        value._rec.membrane.check()  # pyright: ignore[reportPrivateUsage]
        return copy_json(value._raw)  # pyright: ignore[reportPrivateUsage]
    kind = type(value)
    if kind is dict:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise JsonError(f"non-string key {key!r}", _fmt(path))
            path.append(key)
            out[key] = _plain(item, path)
            path.pop()
        return out
    if kind is list or kind is tuple:
        items: list[Any] = []
        for index, item in enumerate(value):
            path.append(index)
            items.append(_plain(item, path))
            path.pop()
        return items
    return copy_json(value, tuple(path))


def _fmt(path: list[str | int]) -> str:
    from chord.json import format_path

    return format_path(path)


def _op_value(value: Any) -> Any:
    """An op carries its own copy: later in-place mutations must not change a recorded op."""
    kind = type(value)
    return copy_json(value) if kind is dict or kind is list else value


class _Tracked:
    __slots__ = ("_key", "_parent", "_raw", "_rec")

    _raw: Any

    def __init__(
        self, raw: Any, rec: Recorder, parent: TrackedDict | TrackedList | None, key: str | int
    ) -> None:
        self._raw = raw
        self._rec = rec
        self._parent = parent
        self._key = key

    def _check(self) -> None:
        self._rec.membrane.check()

    def _path(self) -> Path:
        parent = self._parent
        if parent is None:
            return self._rec.root_path
        base = parent._path()
        container: Any = parent._raw
        if type(container) is dict:
            key = self._key
            if container.get(key, _MISSING) is self._raw:
                return (*base, key)
        else:
            for index, item in enumerate(container):
                if item is self._raw:
                    self._key = index
                    return (*base, index)
        raise DetachedValue("this value was replaced or removed from its document")

    def _record(self, op: Op) -> None:
        self._rec.ops.append(op)

    def to_plain(self) -> Any:
        """A plain deep copy of the current value (safe to keep after the commit)."""
        self._check()
        return copy_json(self._raw)

    def __eq__(self, other: object) -> bool:
        self._check()
        if isinstance(other, _Tracked):
            return self._raw == other._raw
        return self._raw == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if not self._rec.membrane.alive:
            return f"<{type(self).__name__} revoked>"
        return f"{type(self).__name__}({self._raw!r})"


class TrackedDict(_Tracked, MutableMapping[str, Any]):
    """A tracked JSON object. Reads wrap nested containers; writes record ``s``/``a``/``d``."""

    __slots__ = ()

    _raw: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        self._check()
        return self._rec.wrap(self._raw[key], self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        self._check()
        if type(key) is not str:
            raise JsonError(f"non-string key {key!r}")
        if key in RESERVED_SEGMENTS:
            raise ValueError(f"key {key!r} is reserved (TypeScript peers refuse it)")
        path = (*self._path(), key)
        stored = _plain(value, list(path))
        old = self._raw.get(key, _MISSING)
        grows = type(old) is str and type(stored) is str and len(stored) > len(old)
        if grows and stored.startswith(old):
            self._record(("a", path, stored[len(old) :]))
            self._raw[key] = stored
            return
        self._record(("s", path, _op_value(stored)))
        self._raw[key] = stored

    def __delitem__(self, key: str) -> None:
        self._check()
        if key not in self._raw:
            raise KeyError(key)
        self._record(("d", (*self._path(), key)))
        del self._raw[key]

    def __iter__(self) -> Iterator[str]:
        self._check()
        return iter(list(self._raw))

    def __len__(self) -> int:
        self._check()
        return len(self._raw)

    def __contains__(self, key: object) -> bool:
        self._check()
        return key in self._raw

    def pop(self, key: str, default: Any = _MISSING) -> Any:  # type: ignore[override]
        """Remove ``key`` and return a plain copy of its value."""
        self._check()
        if key not in self._raw:
            if default is _MISSING:
                raise KeyError(key)
            return default
        value = copy_json(self._raw[key])
        del self[key]
        return value

    def setdefault(self, key: str, default: Any = None) -> Any:
        """Like ``dict.setdefault``; the default is stored as a copy and the stored value returned."""
        self._check()
        if key not in self._raw:
            self[key] = default
        return self[key]


class TrackedList(_Tracked, MutableSequence[Any]):
    """A tracked JSON array. Index writes record ``s``; inserts/removals record splices."""

    __slots__ = ()

    _raw: list[Any]

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        self._check()
        if isinstance(index, slice):
            return [self._rec.wrap(item, self, 0) for item in self._raw[index]]
        position = range(len(self._raw))[index]
        return self._rec.wrap(self._raw[position], self, position)

    @overload
    def __setitem__(self, index: int, value: Any) -> None: ...
    @overload
    def __setitem__(self, index: slice, value: Iterable[Any]) -> None: ...
    def __setitem__(self, index: int | slice, value: Any) -> None:
        self._check()
        path = self._path()
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self._raw))
            if step != 1:
                raise ValueError("extended slice assignment is not supported on tracked lists")
            stop = max(stop, start)
            items = [_plain(item, [*path, start + n]) for n, item in enumerate(value)]
            self._record(("p", path, start, stop - start, _op_value(items)))
            self._raw[start:stop] = items
            return
        position = range(len(self._raw))[index]
        stored = _plain(value, [*path, position])
        self._record(("s", (*path, position), _op_value(stored)))
        self._raw[position] = stored

    @overload
    def __delitem__(self, index: int) -> None: ...
    @overload
    def __delitem__(self, index: slice) -> None: ...
    def __delitem__(self, index: int | slice) -> None:
        self._check()
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self._raw))
            if step != 1:
                raise ValueError("extended slice deletion is not supported on tracked lists")
            if stop > start:
                self._record(("p", self._path(), start, stop - start, []))
                del self._raw[start:stop]
            return
        position = range(len(self._raw))[index]
        self._record(("p", self._path(), position, 1, []))
        del self._raw[position]

    def __len__(self) -> int:
        self._check()
        return len(self._raw)

    def __iter__(self) -> Iterator[Any]:
        self._check()
        for position, item in enumerate(list(self._raw)):
            yield self._rec.wrap(item, self, position)

    def __contains__(self, value: object) -> bool:
        self._check()
        if isinstance(value, _Tracked):
            value = value._raw
        return value in self._raw

    def insert(self, index: SupportsIndex, value: Any) -> None:
        self._check()
        at, size = index.__index__(), len(self._raw)
        position = max(0, size + at) if at < 0 else min(at, size)
        path = self._path()
        stored = _plain(value, [*path, position])
        self._record(("p", path, position, 0, [_op_value(stored)]))
        self._raw.insert(position, stored)

    def append(self, value: Any) -> None:
        self.insert(len(self._raw), value)

    def extend(self, values: Iterable[Any]) -> None:
        """Append several items as one splice."""
        self._check()
        self[len(self._raw) : len(self._raw)] = list(values)

    def pop(self, index: int = -1) -> Any:
        """Remove the item at ``index`` and return a plain copy of it."""
        self._check()
        position = range(len(self._raw))[index]
        value = copy_json(self._raw[position])
        del self[position]
        return value

    def clear(self) -> None:
        self._check()
        del self[:]
