"""The op vocabulary: what a change to a JSON document looks like, and how to check one.

An *op* is a tuple whose first element is a one-letter verb. Paths are tuples of segments: a
``str`` object key or an ``int`` array index (``bool`` is not an index)::

    ("r", value)                       replace the whole document
    ("s", path, value)                 set an object key, or an array index (existing, or == len)
    ("d", path)                        delete an object key (missing: no-op) or an array element
    ("a", path, text)                  append text to a string
    ("t", path, count)                 drop ``count`` UTF-16 code units from a string's front
    ("p", path, index, remove, items)  splice an array (``path`` may be the root ``()``)
    ("m", path, perm)                  reorder an array: ``new[i] = old[perm[i]]``

This module only *checks* ops; :mod:`chord.delta.apply` runs them and :mod:`chord.delta.codec`
compresses their paths for the wire. Checking is split by trust:

* :func:`assert_valid_op` checks verb, arity, argument types and path safety of an in-memory op.
  It never looks at payloads, so it costs O(path length). The appliers run it on every op of a
  batch before touching the target.
* :func:`decode_ops` and :func:`assert_valid_wire_op` are for input that crossed a boundary. They
  also validate payloads as strict JSON (:func:`chord.json.validate_json`), which costs
  O(payload).

Three error classes say what went wrong, and every message names the op (``op 3 ('s', ('a',
5)): ...``) when the op's position is known:

* :class:`InvalidOpError` (a ``TypeError``): the op itself is malformed.
* :class:`UnsafePathError` (a ``ValueError``): a path segment is reserved or not a key/index, or
  an index would leave a hole in an array (``("s", ("xs", 10**9), 1)`` on a short list).
* :class:`PathError` (a ``ValueError``): the op does not fit the document: a missing or
  non-container intermediate, a wrong-typed leaf, an index or count past the end.

``__proto__``, ``constructor`` and ``prototype`` are harmless in Python, but TypeScript peers
reject them, so they are rejected here too and ops stay portable (:data:`RESERVED_SEGMENTS`).
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from chord.json import JsonError, validate_json

__all__ = [
    "MAX_IDENTITY_CANDIDATES",
    "MAX_OPS",
    "MAX_SEMANTIC_CELLS",
    "OVERLAP_SCAN",
    "RESERVED_SEGMENTS",
    "SNAPSHOT_COST",
    "AppendOp",
    "DeleteOp",
    "InvalidOpError",
    "MoveOp",
    "Op",
    "Path",
    "PathError",
    "ReplaceOp",
    "Seg",
    "SetOp",
    "SpliceOp",
    "TruncateOp",
    "UnsafePathError",
    "assert_safe_path",
    "assert_valid_op",
    "decode_ops",
    "describe_op",
    "is_base",
]

Seg: TypeAlias = str | int
"""One path segment: an object key or an array index."""

Path: TypeAlias = tuple[Seg, ...]
"""A path from the document root; ``()`` is the root itself."""

# Payloads are strict JSON by contract. They are typed ``Any`` because ``dict``/``list`` are
# invariant: a caller's ``list[dict[str, int]]`` would not be accepted as ``list[JsonValue]``.
ReplaceOp: TypeAlias = tuple[Literal["r"], Any]
SetOp: TypeAlias = tuple[Literal["s"], Path, Any]
DeleteOp: TypeAlias = tuple[Literal["d"], Path]
AppendOp: TypeAlias = tuple[Literal["a"], Path, str]
TruncateOp: TypeAlias = tuple[Literal["t"], Path, int]
SpliceOp: TypeAlias = tuple[Literal["p"], Path, int, int, list[Any]]
MoveOp: TypeAlias = tuple[Literal["m"], Path, list[int]]
Op: TypeAlias = ReplaceOp | SetOp | DeleteOp | AppendOp | TruncateOp | SpliceOp | MoveOp
"""A decoded op. Paths and permutations given as lists are accepted too (see :func:`decode_ops`)."""

RESERVED_SEGMENTS: frozenset[str] = frozenset({"__proto__", "constructor", "prototype"})
"""Object keys that never appear in a path (they reach the prototype chain in JavaScript)."""

MAX_OPS = 4096
"""A diff or tracker batch longer than this folds into a single ``("r", value)``."""

SNAPSHOT_COST = 65_536
"""A diff whose estimated JSON size reaches this, and is no cheaper than the snapshot, folds to ``r``."""

OVERLAP_SCAN = 65_536
"""How many trailing characters of the old string the diff scans for a rolling-window overlap."""

MAX_IDENTITY_CANDIDATES = 200_000
"""Above this many identity pairs, the array diff picks anchors greedily instead of optimally."""

MAX_SEMANTIC_CELLS = 65_536
"""Largest region (rows x columns) the array diff aligns with a semantic LCS."""


class InvalidOpError(TypeError):
    """An op is malformed: unknown verb, wrong arity, or an argument of the wrong type."""

    def __init__(self, reason: str, *, where: str | None = None) -> None:
        super().__init__(f"{where}: {reason}" if where else reason)
        self.reason = reason
        self.where = where

    def at(self, where: str) -> InvalidOpError:
        """The same error, with the op's position and shape in front of the message."""
        return InvalidOpError(self.reason, where=where)


class UnsafePathError(ValueError):
    """A path segment is reserved or of the wrong kind, or an index would leave an array hole."""

    def __init__(self, reason: str, segment: object = None, *, where: str | None = None) -> None:
        super().__init__(f"{where}: {reason}" if where else reason)
        self.reason = reason
        self.segment = segment
        self.where = where

    def at(self, where: str) -> UnsafePathError:
        """The same error, with the op's position and shape in front of the message."""
        return UnsafePathError(self.reason, self.segment, where=where)


class PathError(ValueError):
    """An op does not fit the document (missing container, wrong type, index past the end)."""

    def __init__(self, reason: str, path: object = (), *, where: str | None = None) -> None:
        super().__init__(f"{where}: {reason}" if where else reason)
        self.reason = reason
        self.path = path
        self.where = where

    def at(self, where: str) -> PathError:
        """The same error, with the op's position and shape in front of the message."""
        return PathError(self.reason, self.path, where=where)


def describe_op(index: int | str, op: object) -> str:
    """Render ``op 3 ('s', ('a', 5))``: the position and shape of an op, without its payload."""
    label = f"op {index}" if isinstance(index, int) else str(index)
    if type(op) is tuple or type(op) is list:
        if not op:
            return f"{label} ()"
        verb = op[0]  # type: ignore[index]
        if verb == "r" or len(op) < 2:  # type: ignore[arg-type]
            return f"{label} ({verb!r},)"
        path = op[1]  # type: ignore[index]
        if type(path) is list:
            path = tuple(path)  # type: ignore[arg-type]
        return f"{label} ({verb!r}, {path!r})"
    text = repr(op)
    return f"{label} {text if len(text) <= 60 else text[:57] + '...'}"


def assert_safe_path(path: object) -> None:
    """Raise :class:`UnsafePathError` unless every segment is a safe key or a non-negative index."""
    for seg in path:  # type: ignore[attr-defined]
        kind = type(seg)
        if kind is str:
            if seg in RESERVED_SEGMENTS:
                raise UnsafePathError(f"reserved path segment {seg!r}", seg)
        elif kind is int:
            if seg < 0:
                raise UnsafePathError(f"negative index {seg} in path", seg)
        else:
            raise UnsafePathError(
                f"path segment {seg!r} ({kind.__name__}) is neither a str key nor an int index",
                seg,
            )


def _check_path(path: object, *, root_allowed: bool) -> None:
    kind = type(path)
    if kind is not tuple and kind is not list:
        raise InvalidOpError(f"path must be a tuple or list, not {kind.__name__}")
    if not path and not root_allowed:
        raise InvalidOpError("path is empty: only 'p' and 'm' may target the root (use 'r')")
    assert_safe_path(path)


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0  # type: ignore[operator]


def _check_permutation(perm: object) -> None:
    kind = type(perm)
    if kind is not list and kind is not tuple:
        raise InvalidOpError(f"'m' permutation must be a list, not {kind.__name__}")
    size = len(perm)  # type: ignore[arg-type]
    seen = bytearray(size)
    for index in perm:  # type: ignore[attr-defined]
        if type(index) is not int or not 0 <= index < size or seen[index]:
            raise InvalidOpError(f"'m' permutation is not a bijection of range({size})")
        seen[index] = 1


_ARITY = {"r": 2, "s": 3, "d": 2, "a": 3, "t": 3, "p": 5, "m": 3}


def _check_op(op: object) -> None:
    """Check one decoded op's shape and path safety; errors carry no position yet."""
    kind = type(op)
    if (kind is not tuple and kind is not list) or not op:
        raise InvalidOpError(f"an op must be a non-empty tuple, not {kind.__name__}")
    verb = op[0]  # type: ignore[index]
    arity = _ARITY.get(verb) if type(verb) is str else None
    if arity is None:
        raise InvalidOpError(f"unknown op verb {verb!r}")
    if len(op) != arity:  # type: ignore[arg-type]
        raise InvalidOpError(f"{verb!r} takes {arity} elements, got {len(op)}")  # type: ignore[arg-type]
    if verb == "r":
        return
    _check_path(op[1], root_allowed=verb == "p" or verb == "m")  # type: ignore[index]
    if verb == "a":
        if type(op[2]) is not str:  # type: ignore[index]
            raise InvalidOpError(f"'a' text must be a str, not {type(op[2]).__name__}")  # type: ignore[index]
    elif verb == "t":
        if not _is_count(op[2]):  # type: ignore[index]
            raise InvalidOpError(f"'t' count must be an int >= 0, not {op[2]!r}")  # type: ignore[index]
    elif verb == "p":
        if not _is_count(op[2]):  # type: ignore[index]
            raise InvalidOpError(f"'p' index must be an int >= 0, not {op[2]!r}")  # type: ignore[index]
        if not _is_count(op[3]):  # type: ignore[index]
            raise InvalidOpError(f"'p' remove must be an int >= 0, not {op[3]!r}")  # type: ignore[index]
        if type(op[4]) is not list:  # type: ignore[index]
            raise InvalidOpError(f"'p' items must be a list, not {type(op[4]).__name__}")  # type: ignore[index]
    elif verb == "m":
        _check_permutation(op[2])  # type: ignore[index]


def validate_op(op: object, where: int | str) -> None:
    """:func:`assert_valid_op`, naming the op (``op 3 ('s', ('a',))``) in any error message.

    ``where`` is the op's index in its batch, or a label; it is only formatted on failure.
    """
    try:
        _check_op(op)
    except (InvalidOpError, UnsafePathError) as exc:
        raise exc.at(describe_op(where, op)) from None


def assert_valid_op(op: object) -> None:
    """Raise unless ``op`` is a well-formed decoded op with a safe path (payloads unchecked).

    Raises :class:`InvalidOpError` for a bad verb, arity or argument, and
    :class:`UnsafePathError` for a reserved or mistyped path segment.
    """
    _check_op(op)


def check_payload(value: object, where: int | str, op: object) -> None:
    """Validate an op payload as strict JSON; on failure name the op (formatted lazily)."""
    try:
        validate_json(value)
    except JsonError as exc:
        raise JsonError(f"{describe_op(where, op)}: payload {exc.reason}", exc.path) from None


def _check_op_payload(op: Any, index: int) -> None:
    verb = op[0]
    if verb == "r":
        check_payload(op[1], index, op)
    elif verb == "s":
        check_payload(op[2], index, op)
    elif verb == "p":
        check_payload(op[4], index, op)


def decode_ops(raw: object) -> list[Op]:
    """Check untrusted decoded ops (e.g. from ``json.loads``) and return them as tuples.

    Every op is checked like :func:`assert_valid_op`, and its payload is validated as strict
    JSON. Ops and paths become tuples; payloads are not copied. Nothing is returned unless the
    whole batch is valid.
    """
    if type(raw) is not list and type(raw) is not tuple:
        raise InvalidOpError(f"a batch must be a list of ops, not {type(raw).__name__}")
    out: list[Op] = []
    for index, op in enumerate(raw):  # type: ignore[arg-type]
        validate_op(op, index)
        _check_op_payload(op, index)
        if op[0] == "r":
            out.append(("r", op[1]))
        else:
            out.append((op[0], tuple(op[1]), *op[2:]))  # type: ignore[arg-type]
    return out


def is_base(ops: object) -> bool:
    """True when a batch (decoded or wire) starts with a whole-value replacement ``r``."""
    try:
        first = ops[0]  # type: ignore[index]
    except (IndexError, TypeError, KeyError):
        return False
    return (type(first) is tuple or type(first) is list) and len(first) > 0 and first[0] == "r"
