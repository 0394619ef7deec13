"""The wire path codec: ops with their repeated paths compressed, as Chord 0.87 sends them.

A stream of batches for one state tends to hit the same few paths over and over (an output
string, a counter). The encoder turns :data:`~chord.delta.ops.Op` tuples into *wire ops* (JSON
arrays) with two compressions, and the decoder undoes them:

* **Ids on second use.** The first time a path appears it is sent inline. The second time, the
  encoder first defines an id, ``["#", 0, ["revision"]]``, then refers to it: ``["s", 0, 2]``.
  Ids persist across batches, so later uses cost one number. (Interning on *first* use would
  lose on the many paths written exactly once.)
* **Short forms.** An op whose path equals the previous op's path *in the same batch* omits the
  path; its arity tells it apart: ``["s", v]``, ``["d"]``, ``["a", text]``, ``["t", n]``,
  ``["p", i, r, items]``, ``["m", perm]``.

An ``r`` passes through unchanged and clears every id on both sides: a base batch is a recovery
point, decodable by a fresh decoder. So keep **one encoder/decoder pair per ordered stream**
(per subscription and state member incarnation), and feed the decoder exactly the batches of its
encoder, from a base on.

The decoder treats its input as untrusted: it checks the grammar, path safety (also inside
``#``) and payload strictness, and raises :class:`~chord.delta.ops.PathError` for a short form
with no previous path or an undefined id. A batch that fails to decode changes nothing: ids it
defined before the error are discarded with it.

Wire ops are built as lists (JSON-ready for ``json.dumps`` or msgspec); payloads are shared with
the input ops, not copied.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from chord.delta.ops import (
    InvalidOpError,
    Op,
    Path,
    PathError,
    UnsafePathError,
    assert_safe_path,
    check_payload,
    describe_op,
    validate_op,
)
from chord.json import integral

__all__ = ["Decoder", "Encoder", "WireOp", "assert_valid_wire_op", "decoder", "encoder"]

WireOp = list[Any]
"""A wire op: a JSON array such as ``["s", ["a"], 1]``, ``["s", 0, 1]``, ``["s", 1]`` or ``["#", 0, ["a"]]``."""


class Encoder:
    """Compresses the paths of one ordered stream of batches. Make one with :func:`encoder`."""

    __slots__ = ("_ids", "_next_id", "_seen")

    def __init__(self) -> None:
        self._seen: set[Path] = set()
        self._ids: dict[Path, int] = {}
        self._next_id = 0

    def encode(self, ops: Iterable[Op]) -> list[WireOp]:
        """Encode one batch. Ops are checked first; a malformed batch raises and encodes nothing."""
        batch: list[Any] = list(ops)
        for index, op in enumerate(batch):
            validate_op(op, index)
        seen, ids = self._seen, self._ids
        out: list[WireOp] = []
        previous: Path | None = None  # the previous op's path, within this batch only
        for op in batch:
            verb = op[0]
            if verb == "r":
                out.append(["r", op[1]])
                seen.clear()
                ids.clear()
                self._next_id = 0
                previous = None
                continue
            path = op[1]
            key: Path = path if type(path) is tuple else tuple(path)
            if key == previous:
                out.append([verb, *op[2:]])
                continue
            ref: Any = ids.get(key)
            if ref is None:
                if key in seen:
                    ref = self._next_id
                    self._next_id += 1
                    ids[key] = ref
                    seen.discard(key)
                    out.append(["#", ref, list(key)])
                else:
                    seen.add(key)
                    ref = list(key)
            out.append([verb, ref, *op[2:]])
            previous = key
        return out


_SHORT: Any = object()  # the path slot of a short-form wire op


# JSON has one number type: like Chord (``Number.isInteger``), the decoder reads an integral
# float (``1.0``, ``1e0``) wherever the grammar needs an integer, and hands on a plain int.


def _wire_path(path: Any) -> Path:
    for seg in path:
        if type(seg) is float and seg.is_integer():
            path = [integral(s) if type(s) is float and s.is_integer() else s for s in path]
            break
    assert_safe_path(path)
    return tuple(path)


def _path_ref(ref: object) -> int | Path:
    kind = type(ref)
    if kind is int or kind is float:
        ident = integral(ref)
        if ident is None:
            raise InvalidOpError(f"path id {ref!r} is not an integer")
        if ident < 0:
            raise InvalidOpError(f"path id {ref} is negative")
        return ident
    if kind is list or kind is tuple:
        return _wire_path(ref)
    raise InvalidOpError(f"path must be an array or a path id, not {kind.__name__}")


def _count(value: object, what: str) -> int:
    count = integral(value)
    if count is None or count < 0:
        raise InvalidOpError(f"{what} must be an int >= 0, not {value!r}")
    return count


def _permutation(perm: object) -> list[int]:
    if type(perm) is not list and type(perm) is not tuple:
        raise InvalidOpError(f"'m' permutation must be an array, not {type(perm).__name__}")
    size = len(perm)  # type: ignore[arg-type]
    seen = bytearray(size)
    out: list[int] = []
    for item in perm:  # type: ignore[attr-defined]
        index = integral(item)
        if index is None or not 0 <= index < size or seen[index]:
            raise InvalidOpError(f"'m' permutation is not a bijection of range({size})")
        seen[index] = 1
        out.append(index)
    return out


def _parse(op: object) -> tuple[str, Any, tuple[Any, ...]]:
    """Check one wire op's grammar; return ``(verb, path ref or _SHORT, arguments)``.

    Payloads are not checked here (the caller does, so it can name the op).
    """
    kind = type(op)
    if (kind is not list and kind is not tuple) or not op:
        raise InvalidOpError(f"a wire op must be a non-empty array, not {kind.__name__}")
    verb: Any = op[0]  # type: ignore[index]
    size = len(op)  # type: ignore[arg-type]
    a: Any = op
    if verb == "r":
        if size != 2:
            raise InvalidOpError(f"'r' takes 2 elements, got {size}")
        return "r", None, (a[1],)
    if verb == "#":
        if size != 3:
            raise InvalidOpError(f"'#' takes 3 elements, got {size}")
        ident = _count(a[1], "'#' id")
        if type(a[2]) is not list and type(a[2]) is not tuple:
            raise InvalidOpError(f"'#' path must be an array, not {type(a[2]).__name__}")
        return "#", ident, (_wire_path(a[2]),)
    if verb == "s":
        if size == 3:
            return "s", _path_ref(a[1]), (a[2],)
        if size == 2:
            return "s", _SHORT, (a[1],)
        raise InvalidOpError(f"'s' takes 2 or 3 elements, got {size}")
    if verb == "d":
        if size == 2:
            return "d", _path_ref(a[1]), ()
        if size == 1:
            return "d", _SHORT, ()
        raise InvalidOpError(f"'d' takes 1 or 2 elements, got {size}")
    if verb == "a" or verb == "t":
        if size == 3:
            ref, value = _path_ref(a[1]), a[2]
        elif size == 2:
            ref, value = _SHORT, a[1]
        else:
            raise InvalidOpError(f"{verb!r} takes 2 or 3 elements, got {size}")
        if verb == "a":
            if type(value) is not str:
                raise InvalidOpError(f"'a' text must be a string, not {type(value).__name__}")
        else:
            value = _count(value, "'t' count")
        return verb, ref, (value,)
    if verb == "p":
        if size == 5:
            ref, rest = _path_ref(a[1]), a[2:]
        elif size == 4:
            ref, rest = _SHORT, a[1:]
        else:
            raise InvalidOpError(f"'p' takes 4 or 5 elements, got {size}")
        index = _count(rest[0], "'p' index")
        remove = _count(rest[1], "'p' remove")
        if type(rest[2]) is not list:
            raise InvalidOpError(f"'p' items must be an array, not {type(rest[2]).__name__}")
        return "p", ref, (index, remove, rest[2])
    if verb == "m":
        if size == 3:
            return "m", _path_ref(a[1]), (_permutation(a[2]),)
        if size == 2:
            return "m", _SHORT, (_permutation(a[1]),)
        raise InvalidOpError(f"'m' takes 2 or 3 elements, got {size}")
    raise InvalidOpError(f"unknown op verb {verb!r}")


def _check_args_payload(verb: str, args: tuple[Any, ...], where: int | str, op: object) -> None:
    if verb == "s" or verb == "r":
        check_payload(args[0], where, op)
    elif verb == "p":
        check_payload(args[2], where, op)


def assert_valid_wire_op(op: object) -> None:
    """Raise unless ``op`` is a well-formed wire op with safe paths and strict-JSON payloads."""
    verb, _, args = _parse(op)
    _check_args_payload(verb, args, "wire op", op)


class Decoder:
    """Restores the ops of one ordered stream of wire batches. Make one with :func:`decoder`."""

    __slots__ = ("_paths",)

    def __init__(self) -> None:
        self._paths: dict[int, Path] = {}

    def decode(self, wire: object, *, payloads_checked: bool = False) -> list[Op]:
        """Decode one batch into op tuples (paths as tuples); all or nothing.

        Every op's grammar and path are checked; its payload is checked as strict JSON too,
        unless ``payloads_checked`` says the caller did that already (a batch that went through
        :func:`~chord.remote.parse_wire_service_provider_update`, which checks each wire op):
        checking a large value again costs as much as the first time."""
        if type(wire) is not list and type(wire) is not tuple:
            raise InvalidOpError(f"a wire batch must be an array, not {type(wire).__name__}")
        table = self._paths
        staged: dict[int, Path] = {}  # ids defined by this batch, committed at the end
        cleared = False  # an `r` in this batch dropped the ids defined before it
        previous: Path | None = None
        out: list[Any] = []
        for index, op in enumerate(wire):  # type: ignore[arg-type]
            try:
                verb, ref, args = _parse(op)
                if verb == "#":
                    staged[ref] = args[0]
                    continue
                if verb == "r":
                    if not payloads_checked:
                        _check_args_payload(verb, args, f"wire op {index}", op)
                    out.append(("r", args[0]))
                    staged = {}
                    cleared = True
                    previous = None
                    continue
                if ref is _SHORT:
                    if previous is None:
                        raise PathError(f"short-form {verb!r} has no previous path in this batch")
                    path = previous
                elif type(ref) is int:
                    path = staged.get(ref)
                    if path is None and not cleared:
                        path = table.get(ref)
                    if path is None:
                        raise PathError(f"undefined path id {ref}", ref)
                else:
                    path = ref
                previous = path
                if not path and verb != "p" and verb != "m":
                    raise PathError(f"{verb!r} cannot target the root path", path)
                if not payloads_checked:
                    _check_args_payload(verb, args, f"wire op {index}", (verb, path))
                out.append((verb, path, *args))
            except (InvalidOpError, UnsafePathError, PathError) as exc:
                raise exc.at(describe_op(f"wire op {index}", op)) from None
        if cleared:
            self._paths = staged
        else:
            table.update(staged)
        return out


def encoder() -> Encoder:
    """A fresh encoder for one ordered stream (see the module docstring)."""
    return Encoder()


def decoder() -> Decoder:
    """A fresh decoder for one ordered stream (see the module docstring)."""
    return Decoder()
