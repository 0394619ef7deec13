"""Copy-on-write drafts that record ops as they are mutated.

A *draft* is a proxy over an immutable JSON revision. Reading through it returns plain scalars and
further draft handles for containers; writing through it copies only the containers on the path
to the write (each at most once per session) and appends one op to a log. Nothing is diffed: the
cost of a change is proportional to what changes, never to the size of the document.

Three rules keep the log exact and the revisions immutable:

* The base revision and every op payload are *shared*, never written. A write into a container
  that the session has not copied yet copies it first (and its ancestors, once). A value placed
  into the draft becomes an op payload *and* part of the working tree; a later write into it copies
  it, so the recorded payload keeps the value it had when the op was recorded.
* Every placement is deep-copied and validated with :func:`chord.json.copy_json` before the draft
  changes, so ``draft["xs"].extend([1, float("nan")])`` raises and inserts nothing.
* A handle finds its element again by identity. A handle whose element was removed (or replaced)
  is *detached*: writes through it are ignored, reads still show its last content.

Normalisation: a session that ends deep-equal to its base yields no ops and keeps the base; an
assignment deep-equal to the current value records nothing and keeps the old object; assigning a
string that extends the old one records ``("a", path, suffix)``, one that drops a prefix records
``("t", path, utf16_count)``; a mutation at or under a reserved key (``__proto__``...) is recorded
as an ``s`` of the nearest safe ancestor (``r`` at the root); more than :data:`MAX_TRACKED_OPS`
ops fold into one ``("r", value)``.

:func:`track` wraps a root in a long-lived :class:`Tracker` (``flush`` hands out the ops recorded
since the previous flush). ``MutableReplicatedState.change`` uses the same machinery for one
synchronous callback.

Why one module: the draft classes, the session that owns their copies and the op recorder are one
mechanism: ``DraftDict`` and ``DraftList`` write through the shared ``_Draft`` base into the
``_Session``'s copy-on-write bookkeeping, and the three rules above are upheld jointly by all of
them. Splitting them would expose that private bookkeeping across modules.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator, MutableMapping, MutableSequence
from typing import Any, SupportsIndex, overload

from chord.delta.ops import MAX_OPS, RESERVED_SEGMENTS
from chord.delta.utf16 import utf16_len
from chord.json import MAX_SAFE_INTEGER, JsonError, copy_json, equal_json, format_path

__all__ = [
    "MAX_TRACKED_OPS",
    "DraftDict",
    "DraftList",
    "Tracker",
    "open_draft",
    "track",
]

MAX_TRACKED_OPS = MAX_OPS
"""A session that records more ops than this publishes one ``("r", value)`` instead."""

_OVERLAP_PROBE = 64
_OVERLAP_WINDOW = 65_536
_OVERLAP_TRIES = 16
_MISSING: Any = object()


def _is_container(value: object) -> bool:
    kind = type(value)
    return kind is dict or kind is list


class _Session:
    """The shared state of every handle of one draft: base, working root, copies and the op log."""

    __slots__ = ("alive", "base", "handles", "ops", "overflow", "owned", "root", "version")

    def __init__(self, base: Any, *, long_lived: bool = False) -> None:
        self.alive = True
        self.base: Any = base
        self.root: Any = base
        self.owned: dict[int, Any] = {}
        self.ops: list[tuple[Any, ...]] = []
        self.overflow = False
        # Bumped by every mutation that can move or detach a container; handles cache the
        # version at which they last proved themselves attached.
        self.version = 0
        # One handle per container, so two reads of one element stay in step. A long-lived
        # tracker holds them weakly (handles come and go across flushes); one change session
        # is short, and a plain dict is cheaper.
        self.handles: MutableMapping[int, _Draft] = (
            weakref.WeakValueDictionary() if long_lived else {}
        )

    def record(self, op: tuple[Any, ...]) -> None:
        if self.overflow:
            return
        self.ops.append(op)
        if len(self.ops) > MAX_TRACKED_OPS:
            self.overflow = True
            self.ops.clear()

    def owns(self, container: Any) -> bool:
        return self.owned.get(id(container)) is container

    def handle(self, parent: _Draft | None, key: str | int, container: Any) -> _Draft:
        found = self.handles.get(id(container))
        if (
            found is not None
            and found._c is container
            and found._parent is parent
            and (type(key) is int or found._key == key)  # list indices move; dict keys do not
        ):
            found._key = key
            return found
        made: _Draft = (DraftDict if type(container) is dict else DraftList)(
            self, parent, key, container
        )
        self.handles[id(container)] = made
        return made

    def finish(self) -> tuple[Any, list[tuple[Any, ...]]]:
        """The candidate value and its ops; ``(base, [])`` when nothing changed."""
        root, base = self.root, self.base
        if root is base:
            return base, []
        if len(self.ops) == 1 and _certain_change(self.ops[0]):
            return root, list(self.ops)
        if _equal(root, base):
            return base, []
        if self.overflow:
            return root, [("r", root)]
        return root, list(self.ops)

    def settle(self, value: Any) -> None:
        """Make ``value`` the new base: everything copied so far becomes shared again."""
        self.base = value
        self.root = value
        self.owned.clear()
        self.ops = []
        self.overflow = False
        self.version += 1


class _Draft:
    """Shared machinery of :class:`DraftDict` and :class:`DraftList`."""

    __slots__ = ("__weakref__", "_c", "_key", "_parent", "_s", "_seen")

    def __init__(self, session: _Session, parent: _Draft | None, key: str | int, c: Any) -> None:
        self._s = session
        self._parent = parent
        self._key: Any = key
        self._c: Any = c
        self._seen = -1

    # -- liveness and location -------------------------------------------------------------

    def _live(self) -> _Session:
        session = self._s
        if not session.alive:
            raise TypeError("this draft has been revoked: its change is over")
        return session

    def _attached(self) -> bool:
        """Whether this handle's element is still in the working tree (fixes a list index hint)."""
        session = self._s
        if self._seen == session.version:
            return True
        parent = self._parent
        if parent is None:
            if self._c is not session.root:
                return False
        else:
            if not parent._attached():
                return False
            pc = parent._c
            if type(pc) is dict:
                if pc.get(self._key, _MISSING) is not self._c:
                    return False
            else:
                key = self._key
                if not (key < len(pc) and pc[key] is self._c):
                    for index, item in enumerate(pc):
                        if item is self._c:
                            self._key = index
                            break
                    else:
                        return False
        self._seen = session.version
        return True

    def _path(self) -> tuple[str | int, ...]:
        segments: list[str | int] = []
        node: _Draft | None = self
        while node is not None and node._parent is not None:
            segments.append(node._key)
            node = node._parent
        segments.reverse()
        return tuple(segments)

    def _own(self) -> Any:
        """This handle's container, copied first if the session does not own it yet."""
        session = self._s
        c = self._c
        if session.owns(c):
            return c
        copy = c.copy()
        parent = self._parent
        if parent is None:
            session.root = copy
        else:
            parent._own()[self._key] = copy
        session.owned[id(copy)] = copy
        session.handles[id(copy)] = self
        self._c = copy
        return copy

    def _wrap(self, key: str | int, value: Any) -> Any:
        if type(value) is dict or type(value) is list:
            return self._s.handle(self, key, value)
        return value

    def _emit(self, op: tuple[Any, ...]) -> None:
        """Record ``op``, folding it into a safe ancestor when its path crosses a reserved key."""
        session = self._s
        path: tuple[Any, ...] = op[1] if op[0] != "r" else ()
        if RESERVED_SEGMENTS.isdisjoint(path):
            session.record(op)
            return
        for depth, segment in enumerate(path):
            if type(segment) is str and segment in RESERVED_SEGMENTS:
                node: Any = session.root
                for part in path[:depth]:
                    node = node[part]
                snapshot = copy_json(node)
                session.record(("s", path[:depth], snapshot) if depth else ("r", snapshot))
                return
        session.record(op)

    def _place(self, value: Any, path: tuple[str | int, ...]) -> Any:
        """A validated, independent deep copy of ``value`` (drafts contribute their content)."""
        kind = type(value)
        if kind is str or kind is bool or value is None:
            return value
        if kind is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        if isinstance(value, _Draft):
            value._live()
            return copy_json(value._c, path)
        try:
            return copy_json(value, path)
        except JsonError:
            unwrapped = _unwrap(value)
            if unwrapped is value:
                raise
            return copy_json(unwrapped, path)

    def _assign(self, key: str | int, value: Any) -> None:
        """Set ``key`` (an existing list index, or any dict key) with normalisation."""
        attached = self._attached()
        if isinstance(value, _Draft) and attached:
            current = self._c.get(key, _MISSING) if type(self._c) is dict else self._c[key]
            if value._c is current:
                value._live()
                return  # `d[k] += [...]` stores the edited handle back: nothing to do
        path = (*self._path(), key)
        new = self._place(value, path)
        if not attached:
            return
        c = self._c
        old = c.get(key, _MISSING) if type(c) is dict else c[key]
        ops: list[tuple[Any, ...]]
        if old is _MISSING:
            ops = [("s", path, new)]
        elif type(old) is str and type(new) is str:
            ops = _string_ops(path, old, new)
            if not ops:
                return
        elif type(old) is type(new) and equal_json(old, new):
            return
        else:
            ops = [("s", path, new)]
        owned = self._own()
        owned[key] = new
        if _is_container(old):
            self._s.version += 1
        for op in ops:
            self._emit(op)

    # -- conveniences shared by both kinds -----------------------------------------------

    def to_json(self) -> Any:
        """A plain, independent deep copy of this draft's current content."""
        self._live()
        return copy_json(self._c)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        """``copy.deepcopy(handle)`` gives the same plain copy as :meth:`to_json`."""
        return self.to_json()

    @property
    def detached(self) -> bool:
        """True once this handle's element has been removed from the document."""
        self._live()
        return not self._attached()

    def __repr__(self) -> str:
        state = "revoked" if not self._s.alive else format_path(self._path())
        return f"<{type(self).__name__} {state} {self._c!r}>"


def _certain_change(op: tuple[Any, ...]) -> bool:
    """Whether a session whose only op is ``op`` surely differs from its base.

    Ops are recorded only when they change something (an equal assignment records nothing), so a
    lone ``s``/``d``/``a``/``t`` or a length-changing ``p`` cannot restore the base; a ``p``
    that swaps in equal items, an ``m`` of equal items or a folded ``r`` might.
    """
    verb = op[0]
    if verb == "p":
        return op[3] != len(op[4])
    return verb in ("s", "d", "a", "t")


def _equal(a: Any, b: Any) -> bool:
    """:func:`equal_json` that skips shared subtrees without a call (the common case here)."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return equal_json(a, b)
    if kind is dict:
        if len(a) != len(b):
            return False
        for key, item in a.items():
            other = b.get(key, _MISSING)
            if item is not other and (other is _MISSING or not _equal(item, other)):
                return False
        return True
    if kind is list:
        if len(a) != len(b):
            return False
        for item, other in zip(a, b, strict=True):
            if item is not other and not _equal(item, other):
                return False
        return True
    if kind is str:
        return a == b
    return equal_json(a, b)


def _unwrap(value: Any) -> Any:
    """Replace draft handles nested in plain containers by their content (rare slow path)."""
    if isinstance(value, _Draft):
        value._live()
        return value._c
    if type(value) is dict:
        items = {k: _unwrap(v) for k, v in value.items()}
        return value if all(items[k] is v for k, v in value.items()) else items
    if type(value) in (list, tuple):
        out = [_unwrap(v) for v in value]
        return value if all(a is b for a, b in zip(out, value, strict=True)) else out
    return value


def _string_ops(path: tuple[str | int, ...], old: str, new: str) -> list[tuple[Any, ...]]:
    """Ops turning ``old`` into ``new``: ``a`` for an extension, ``t`` for a dropped prefix."""
    lo, ln = len(old), len(new)
    if lo == ln and old == new:
        return []
    if lo == 0 and ln:
        return [("a", path, new)]
    if ln > lo and new.startswith(old):
        return [("a", path, new[lo:])]
    if ln < lo and old.endswith(new):
        return [("t", path, utf16_len(old[: lo - ln]))]
    # A sliding window: the tail of `old` starts `new` (drop a prefix, then append).
    if ln >= _OVERLAP_PROBE and lo > _OVERLAP_PROBE:
        probe = new[:_OVERLAP_PROBE]
        start = old.find(probe, max(1, lo - ln, lo - _OVERLAP_WINDOW))
        tries = 0
        while start > 0 and tries < _OVERLAP_TRIES:
            kept = lo - start
            if kept <= ln and new.startswith(old[start:]):
                ops: list[tuple[Any, ...]] = [("t", path, utf16_len(old[:start]))]
                if ln > kept:
                    ops.append(("a", path, new[kept:]))
                return ops
            start = old.find(probe, start + 1)
            tries += 1
    return [("s", path, new)]


class DraftDict(_Draft, MutableMapping[str, Any]):
    """A draft of a JSON object: a :class:`MutableMapping` whose writes record ops."""

    __slots__ = ()

    def __getitem__(self, key: str) -> Any:
        self._live()
        return self._wrap(key, self._c[key])

    def get(self, key: str, default: Any = None) -> Any:
        self._live()
        value = self._c.get(key, _MISSING)
        return default if value is _MISSING else self._wrap(key, value)

    def __contains__(self, key: object) -> bool:
        self._live()
        return key in self._c

    def __iter__(self) -> Iterator[str]:
        self._live()
        return iter(list(self._c))

    def __len__(self) -> int:
        self._live()
        return len(self._c)

    def __setitem__(self, key: str, value: Any) -> None:
        self._live()
        if type(key) is not str:
            raise JsonError(f"non-string key {key!r}", format_path(self._path()))
        self._assign(key, value)

    def __delitem__(self, key: str) -> None:
        session = self._live()
        if key not in self._c:
            raise KeyError(key)
        if not self._attached():
            return
        path = (*self._path(), key)
        old = self._own().pop(key)
        if _is_container(old):
            session.version += 1
        self._emit(("d", path))

    def clear(self) -> None:
        for key in list(self):
            del self[key]

    def pop(self, key: str, default: Any = _MISSING) -> Any:
        """Remove and return a value; a removed container comes back as a plain deep copy."""
        self._live()
        if key not in self._c:
            if default is _MISSING:
                raise KeyError(key)
            return default
        value = self._c[key]
        result = copy_json(value) if _is_container(value) else value
        del self[key]
        return result

    def popitem(self) -> tuple[str, Any]:
        self._live()
        if not self._c:
            raise KeyError("popitem(): draft dict is empty")
        key = next(reversed(self._c))
        return key, self.pop(key)

    def __eq__(self, other: object) -> bool:
        self._live()
        if isinstance(other, _Draft):
            other = other._c
        return equal_json(self._c, other)

    __hash__ = None  # type: ignore[assignment]


class DraftList(_Draft, MutableSequence[Any]):
    """A draft of a JSON array: a :class:`MutableSequence` whose writes record ops.

    Every list mutator works: item and slice assignment, ``del`` of items and slices,
    ``append``/``extend``/``+=``/``*=``, ``insert``, ``pop``, ``remove``, ``clear``, ``reverse``
    (an ``m`` op) and ``sort`` (an ``m`` op; a ``key`` function receives draft handles).
    """

    __slots__ = ()

    def __len__(self) -> int:
        self._live()
        return len(self._c)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        self._live()
        c = self._c
        if isinstance(index, slice):
            return [self._wrap(i, c[i]) for i in range(*index.indices(len(c)))]
        i = self._index(index)
        return self._wrap(i, c[i])

    def __iter__(self) -> Iterator[Any]:
        self._live()
        c = self._c
        for i in range(len(c)):
            if i >= len(self._c):
                return
            yield self._wrap(i, self._c[i])

    def _index(self, index: SupportsIndex) -> int:
        i = index.__index__()
        n = len(self._c)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("draft list index out of range")
        return i

    def _splice(self, index: int, remove: int, items: list[Any]) -> None:
        """Replace ``remove`` items at ``index`` by ``items`` (already placed) and record it."""
        if not remove and not items:
            return
        if not self._attached():
            return
        path = self._path()
        owned = self._own()
        owned[index : index + remove] = items
        self._s.version += 1
        self._emit(("p", path, index, remove, items))

    def _place_all(self, values: Iterable[Any], start: int) -> list[Any]:
        if isinstance(values, _Draft):
            values._live()
            values = list(values._c)
        path = self._path()
        return [self._place(v, (*path, start + j)) for j, v in enumerate(list(values))]

    @overload
    def __setitem__(self, index: int, value: Any) -> None: ...
    @overload
    def __setitem__(self, index: slice, value: Iterable[Any]) -> None: ...
    def __setitem__(self, index: int | slice, value: Any) -> None:
        self._live()
        if not isinstance(index, slice):
            self._assign(self._index(index), value)
            return
        start, stop, step = index.indices(len(self._c))
        if step == 1:
            stop = max(stop, start)
            self._splice(start, stop - start, self._place_all(value, start))
            return
        targets = list(range(start, stop, step))
        items = self._place_all(value, 0)
        if len(items) != len(targets):
            raise ValueError(
                f"attempt to assign sequence of size {len(items)} "
                f"to extended slice of size {len(targets)}"
            )
        for target, item in zip(targets, items, strict=True):
            self._assign(target, item)

    def __delitem__(self, index: int | slice) -> None:
        self._live()
        if not isinstance(index, slice):
            self._splice(self._index(index), 1, [])
            return
        start, stop, step = index.indices(len(self._c))
        if step == 1:
            self._splice(start, max(stop, start) - start, [])
            return
        for target in sorted(range(start, stop, step), reverse=True):
            self._splice(target, 1, [])

    def insert(self, index: int, value: Any) -> None:
        self._live()
        self._attached()
        n = len(self._c)
        i = index.__index__()
        i = max(0, i + n) if i < 0 else min(i, n)
        self._splice(i, 0, [self._place(value, (*self._path(), i))])

    def append(self, value: Any) -> None:
        self._live()
        self._attached()
        n = len(self._c)
        self._splice(n, 0, [self._place(value, (*self._path(), n))])

    def extend(self, values: Iterable[Any]) -> None:
        self._live()
        self._attached()
        n = len(self._c)
        self._splice(n, 0, self._place_all(values, n))

    def __iadd__(self, values: Iterable[Any]) -> DraftList:  # type: ignore[override,misc]
        self.extend(values)
        return self

    def __imul__(self, count: int) -> DraftList:
        self._live()
        if count <= 0:
            self.clear()
        else:
            content = list(self._c)
            for _ in range(count - 1):
                self.extend(content)
        return self

    def pop(self, index: int = -1) -> Any:
        """Remove and return an item; a removed container comes back as a plain deep copy."""
        self._live()
        i = self._index(index)
        value = self._c[i]
        result = copy_json(value) if _is_container(value) else value
        self._splice(i, 1, [])
        return result

    def index(self, value: Any, start: int = 0, stop: int | None = None) -> int:
        self._live()
        target = _unwrap(value)
        c = self._c
        for i in range(*slice(start, stop).indices(len(c))):
            if equal_json(c[i], target):
                return i
        raise ValueError(f"{value!r} is not in the draft list")

    def count(self, value: Any) -> int:
        self._live()
        target = _unwrap(value)
        return sum(1 for item in self._c if equal_json(item, target))

    def __contains__(self, value: object) -> bool:
        self._live()
        target = _unwrap(value)
        return any(equal_json(item, target) for item in self._c)

    def remove(self, value: Any) -> None:
        self._splice(self.index(value), 1, [])

    def clear(self) -> None:
        self._live()
        self._splice(0, len(self._c), [])

    def _permute(self, perm: list[int]) -> None:
        if perm == list(range(len(perm))):
            return
        if not self._attached():
            return
        path = self._path()
        owned = self._own()
        owned[:] = [owned[i] for i in perm]
        self._s.version += 1
        self._emit(("m", path, perm))

    def reverse(self) -> None:
        self._live()
        self._permute(list(range(len(self._c) - 1, -1, -1)))

    def sort(self, *, key: Callable[[Any], Any] | None = None, reverse: bool = False) -> None:
        """Sort in place (stable); ``key`` receives the items as :meth:`__getitem__` does."""
        self._live()
        c = self._c
        if key is None:
            keys = list(c)
        else:
            keys = [key(self._wrap(i, c[i])) for i in range(len(c))]
            c = self._c  # a key function may have edited (and so copied) this list
        perm = sorted(range(len(keys)), key=keys.__getitem__, reverse=reverse)
        self._permute(perm)

    def __eq__(self, other: object) -> bool:
        self._live()
        if isinstance(other, _Draft):
            other = other._c
        return equal_json(self._c, other)

    __hash__ = None  # type: ignore[assignment]


def _root_draft(session: _Session) -> DraftDict | DraftList:
    root = session.root
    if type(root) is dict:
        return DraftDict(session, None, "", root)
    if type(root) is list:
        return DraftList(session, None, "", root)
    raise JsonError(f"the root must be an object or an array, not {type(root).__name__}")


class Tracker:
    """A long-lived draft over a JSON root that hands out the ops recorded since the last flush.

    ``track(root)`` takes ownership of ``root`` in O(1): it neither walks nor validates it, and
    the caller must not mutate it afterwards. Mutate through :attr:`draft`; :meth:`flush` returns
    the ops since the previous flush and makes the current value an immutable revision
    (:attr:`value`), which later mutations copy instead of editing. The first flush (and the first
    after :meth:`rebase`) returns the base batch ``[("r", value)]``.
    """

    __slots__ = ("_base_pending", "_draft", "_session")

    def __init__(self, root: Any) -> None:
        self._session = _Session(root, long_lived=True)
        self._draft = _root_draft(self._session)
        self._base_pending = True

    @property
    def draft(self) -> DraftDict | DraftList:
        """The root draft (valid until :meth:`close`)."""
        self._draft._live()
        return self._draft

    @property
    def value(self) -> Any:
        """The current value, including unflushed mutations. Treat it as read-only."""
        return self._session.root

    def flush(self) -> list[tuple[Any, ...]]:
        """The ops recorded since the previous flush; the value becomes the new baseline."""
        session = self._session
        if not session.alive:
            raise TypeError("this tracker has been closed")
        if self._base_pending:
            self._base_pending = False
            value, ops = session.root, [("r", session.root)]
        else:
            value, ops = session.finish()
        session.settle(value)
        self._draft._c = value
        return ops

    def rebase(self, value: Any) -> None:
        """Start over from ``value`` (trusted, owned): the next flush is ``[("r", value)]``."""
        if type(value) is not type(self._session.root):
            raise JsonError("a rebase must keep the root kind (object or array)")
        session = self._session
        session.settle(value)
        self._draft._c = value
        self._base_pending = True

    def discard(self) -> None:
        """Drop the mutations since the last flush; the value returns to the last baseline."""
        session = self._session
        session.settle(session.base)
        self._draft._c = session.base

    def close(self) -> None:
        """Revoke every draft handle of this tracker."""
        self._session.alive = False


def track(root: Any) -> Tracker:
    """Track ``root`` (a dict or list, taken over without copying): see :class:`Tracker`."""
    return Tracker(root)


def open_draft(base: Any) -> tuple[DraftDict | DraftList, Callable[[], tuple[Any, list[Any]]]]:
    """One change session over ``base``: the root draft and a ``finish`` callable.

    ``finish()`` revokes every handle and returns ``(value, ops)``: the candidate revision (the
    ``base`` object itself when nothing changed) and its ops. Used by ``change``.
    """
    session = _Session(base)
    draft = _root_draft(session)

    def finish() -> tuple[Any, list[Any]]:
        session.alive = False
        return session.finish()

    return draft, finish


def revoke(draft: DraftDict | DraftList) -> None:
    """Revoke ``draft`` and every handle of its session (used on rollback)."""
    draft._s.alive = False
