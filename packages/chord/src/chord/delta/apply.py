"""Running ops against a document: in place, or copy-on-write.

Two appliers, one set of rules (:mod:`chord.delta.ops` describes the verbs):

* :func:`apply` edits a mutable replica **in place** and *adopts* payloads: after
  ``apply(doc, [("s", ("row",), row)])`` the replica holds ``row`` itself, and later ops may edit
  it. Hand each mutable replica its own decoded copy of a batch.
* :func:`apply_immutable` and :func:`apply_immutable_batches` treat the document and the ops as
  read-only and return a new revision that *shares* every untouched subtree with the old one.
  Each container on a touched path is shallow-copied at most once per call (the call remembers
  which containers it owns), so a batch of k ops at depth d over a large document costs about
  O(k * d + payload + widths of the copied containers), never O(document). A payload that a later
  op edits is copied first; nothing the caller passed in is ever mutated.

Both are all-or-nothing. The whole batch is checked for shape and path safety first
(:func:`chord.delta.ops.assert_valid_op`), so a malformed op raises before anything is read.
Problems that depend on the document (a missing key, an index past the end) can only surface
while applying; then :func:`apply` restores every container it had changed to its state before
the call, and the copy-on-write appliers simply drop their private copies.

Payloads are trusted here: the appliers check op shapes and paths but do not walk payloads to
validate them as strict JSON. Input from a boundary goes through
:func:`chord.delta.ops.decode_ops` or :class:`chord.delta.codec.Decoder` first, which do.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from typing import Any

from chord.delta.ops import (
    InvalidOpError,
    Op,
    PathError,
    UnsafePathError,
    describe_op,
    validate_op,
)
from chord.delta.utf16 import units_to_index
from chord.json import format_path

__all__ = ["apply", "apply_immutable", "apply_immutable_batches"]

_MISSING: Any = object()


def _shallow_copy(container: Any) -> Any:
    """Copy one dict or list (its items are shared). A seam tests use to count copies."""
    return container.copy()


def _kind(value: object) -> str:
    if type(value) is dict:
        return "an object"
    if type(value) is list:
        return "an array"
    if type(value) is str:
        return "a string"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"


def _step(node: Any, seg: Any, path: Any, depth: int) -> Any:
    """Read ``node[seg]`` by the path rules: own keys only, int indices only into arrays."""
    kind = type(node)
    if kind is dict:
        if type(seg) is not str:
            raise PathError(
                f"integer segment {seg} cannot index the object at {format_path(path[:depth])}",
                path,
            )
        child = node.get(seg, _MISSING)
        if child is _MISSING:
            raise PathError(f"no key {seg!r} at {format_path(path[:depth])}", path)
        return child
    if kind is list:
        if type(seg) is not int:
            raise UnsafePathError(
                f"string segment {seg!r} cannot index the array at {format_path(path[:depth])}",
                seg,
            )
        if seg >= len(node):
            raise PathError(
                f"index {seg} is past the end (len {len(node)}) at {format_path(path[:depth])}",
                path,
            )
        return node[seg]
    raise PathError(f"cannot walk into {_kind(node)} at {format_path(path[:depth])}", path)


def _resolve(root: Any, path: Any, end: int) -> Any:
    """The container at ``path[:end]``, read-only."""
    node = root
    for depth in range(end):
        node = _step(node, path[depth], path, depth)
    kind = type(node)
    if kind is not dict and kind is not list:
        raise PathError(f"{format_path(path[:end])} is {_kind(node)}, not a container", path)
    return node


def _own(root: Any, path: Any, end: int, owned: dict[int, Any]) -> tuple[Any, Any]:
    """Make every container on ``path[:end]`` private to this call; return ``(root, last)``.

    ``owned`` maps ``id()`` to the copies this call made (holding them keeps the ids unique).
    A container already owned is edited in place; any other is copied once and relinked.
    """
    kind = type(root)
    if kind is not dict and kind is not list:
        raise PathError(f"the root is {_kind(root)}, not a container", path)
    if id(root) not in owned:
        root = _shallow_copy(root)
        owned[id(root)] = root
    node = root
    for depth in range(end):
        seg = path[depth]
        child = _step(node, seg, path, depth)
        kind = type(child)
        if kind is not dict and kind is not list:
            raise PathError(
                f"{format_path(path[: depth + 1])} is {_kind(child)}, not a container", path
            )
        if id(child) not in owned:
            child = _shallow_copy(child)
            owned[id(child)] = child
            node[seg] = child
        node = child
    return root, node


def _edit_leaf(parent: Any, op: Any) -> None:
    """Run an ``s``/``d``/``a``/``t`` op on its parent container. Checks before it writes."""
    verb = op[0]
    path = op[1]
    key: Any = path[-1]
    if type(parent) is list:
        if type(key) is not int:
            raise UnsafePathError(f"string segment {key!r} cannot index an array", key)
        size = len(parent)
        if verb == "s":
            if key < size:
                parent[key] = op[2]
            elif key == size:
                parent.append(op[2])
            else:
                raise UnsafePathError(
                    f"index {key} is past the end (len {size}); grow an array with a 'p' splice",
                    key,
                )
            return
        if key >= size:
            raise PathError(f"index {key} is past the end (len {size})", path)
        if verb == "d":
            del parent[key]
            return
        current = parent[key]
    else:
        if type(key) is not str:
            raise PathError(f"integer segment {key} cannot index an object", path)
        if verb == "s":
            parent[key] = op[2]
            return
        if verb == "d":
            parent.pop(key, None)
            return
        current = parent.get(key, _MISSING)
        if current is _MISSING:
            raise PathError(f"no key {key!r} to {'append to' if verb == 'a' else 'truncate'}", path)
    if type(current) is not str:
        raise PathError(f"{verb!r} needs a string, found {_kind(current)}", path)
    if verb == "a":
        text = current + op[2]
    else:
        try:
            start = units_to_index(current, op[2])
        except ValueError as exc:
            raise PathError(str(exc), path) from None
        text = current[start:]
    container: Any = parent
    container[key] = text


def _edit_array(target: Any, op: Any) -> None:
    """Run a ``p`` or ``m`` op on the array it addresses. Checks before it writes."""
    path = op[1]
    if type(target) is not list:
        raise PathError(f"{op[0]!r} needs an array, found {_kind(target)}", path)
    size = len(target)
    if op[0] == "p":
        index, remove = op[2], op[3]
        if index > size:
            raise UnsafePathError(f"splice index {index} is past the end (len {size})", index)
        if index + remove > size:
            raise PathError(
                f"splice removes {remove} from index {index}, past the end (len {size})", path
            )
        target[index : index + remove] = op[4]
        return
    perm = op[2]
    if len(perm) != size:
        raise PathError(f"permutation of {len(perm)} does not fit an array of {size}", path)
    target[:] = [target[i] for i in perm]


def _validate_all(ops: list[Any]) -> None:
    for index, op in enumerate(ops):
        validate_op(op, index)


def _materialise(ops: Iterable[Op]) -> list[Any]:
    if type(ops) is list:
        return ops  # type: ignore[return-value]
    if isinstance(ops, str | bytes | dict):
        raise InvalidOpError(f"a batch must be a list of ops, not {type(ops).__name__}")
    return list(ops)


def _run_immutable(root: Any, ops: list[Any], starts: list[int] | None) -> Any:
    """Apply checked ops copy-on-write. ``starts`` are batch offsets, for error messages."""
    owned: dict[int, Any] = {}
    index = 0
    try:
        for index, op in enumerate(ops):  # noqa: B007 - `index` names the op on failure
            verb = op[0]
            if verb == "r":
                root = op[1]
            elif verb == "p" or verb == "m":
                path = op[1]
                root, target = _own(root, path, len(path), owned)
                _edit_array(target, op)
            else:
                path = op[1]
                root, parent = _own(root, path, len(path) - 1, owned)
                _edit_leaf(parent, op)
    except (PathError, UnsafePathError) as exc:
        raise exc.at(describe_op(_label(index, starts), ops[index])) from None
    return root


def _label(index: int, starts: list[int] | None) -> str:
    if starts is None:
        return f"op {index}"
    number = bisect_right(starts, index) - 1
    return f"batch {number} op {index - starts[number]}"


def apply_immutable(target: Any, ops: Iterable[Op]) -> Any:
    """Apply one batch copy-on-write; return the new revision.

    ``target`` and the ops (paths, payloads) are never mutated; the result shares untouched
    subtrees and payloads with them, so treat all three as read-only. ``target`` may be ``None``
    when the batch starts with ``r``. Raises (see :mod:`chord.delta.ops`) with nothing changed.
    """
    batch = _materialise(ops)
    _validate_all(batch)
    return _run_immutable(target, batch, None)


def apply_immutable_batches(target: Any, batches: Iterable[Iterable[Op]]) -> Any:
    """Apply several batches in order as one copy-on-write scope; return the final revision.

    Equal to applying them one by one with :func:`apply_immutable`, but a container copied for
    an earlier batch is edited in place by later ones, so no intermediate revision exists.
    Every batch is checked before the first op runs.
    """
    flat: list[Any] = []
    starts: list[int] = []
    for number, batch in enumerate(batches):
        ops = _materialise(batch)
        try:
            _validate_all(ops)
        except (InvalidOpError, UnsafePathError) as exc:
            raise exc.at(f"batch {number} {exc.where}") from None
        starts.append(len(flat))
        flat.extend(ops)
    return _run_immutable(target, flat, starts)


def _restore(undo: dict[int, tuple[Any, Any]]) -> None:
    for container, snapshot in undo.values():
        if type(container) is dict:
            container.clear()
            container.update(snapshot)
        else:
            container[:] = snapshot


def apply(target: Any, ops: Iterable[Op]) -> Any:
    """Apply one batch to a mutable replica in place; return the (possibly replaced) root.

    Payload containers are *adopted*, not copied: the replica and the batch share them from then
    on, so give each replica a batch it owns (decode or deserialise once per replica). On any
    error the replica is left exactly as it was: every container the call changed is restored.
    """
    batch = _materialise(ops)
    _validate_all(batch)
    root = target
    # Before a container's first edit, remember its contents so a later failure can undo it.
    # The last op needs no record: each op checks everything before it writes.
    undo: dict[int, tuple[Any, Any]] = {}
    last = len(batch) - 1
    index = 0
    try:
        for index, op in enumerate(batch):
            verb = op[0]
            if verb == "r":
                root = op[1]
                continue
            path = op[1]
            if verb == "p" or verb == "m":
                container = _resolve(root, path, len(path))
            else:
                container = _resolve(root, path, len(path) - 1)
            if index != last and id(container) not in undo:
                undo[id(container)] = (container, _shallow_copy(container))
            if verb == "p" or verb == "m":
                _edit_array(container, op)
            else:
                _edit_leaf(container, op)
    except (PathError, UnsafePathError) as exc:
        _restore(undo)
        raise exc.at(describe_op(index, batch[index])) from None
    except BaseException:
        _restore(undo)
        raise
    return root
