"""Strict JSON: the only values that cross a chord boundary.

A *strict JSON value* is ``None``, ``bool``, a finite ``float``, an ``int`` whose nearest double
is finite (``|n| <= MAX_JSON_INTEGER``, about 1.8e308), ``str``, a ``list`` of strict values, or a
``dict`` with ``str`` keys and strict values. No tuples, sets, bytes, class instances, NaN or
infinities, and no cycles.

Numbers follow Chord 0.87.1's ``isJsonValue`` (any finite JavaScript number): a TypeScript peer
sends ``2**53`` or ``1e20`` and must not be refused. Python keeps such integers exactly and writes
them back digit for digit; a JavaScript peer reads the nearest double (exact up to
``MAX_SAFE_INTEGER``). An integer too large for any double would be ``Infinity`` there, so it is
refused here as well.

Python makes two of these rules easy to get wrong, so they are spelled out:

* ``bool`` is a subclass of ``int``. Every check here tests for ``bool`` first, and
  :func:`equal_json` treats ``True`` and ``1`` as different values.
* ``1 == 1.0`` in Python and in JSON: :func:`equal_json` agrees, but copies keep the original type.

:func:`validate_json` raises :class:`JsonError` naming the path of the first offending value
(``$.entries[3].text``), so callers can report exactly what was wrong without losing anything.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeAlias

__all__ = [
    "MAX_JSON_INTEGER",
    "MAX_SAFE_INTEGER",
    "JsonError",
    "JsonValue",
    "copy_json",
    "equal_json",
    "format_path",
    "integral",
    "is_json_value",
    "lone_surrogate",
    "validate_json",
]

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"

MAX_SAFE_INTEGER = 2**53 - 1
"""The largest integer a JavaScript peer holds exactly (larger ones arrive there rounded)."""

MAX_JSON_INTEGER = 2**1024 - 2**970 - 1
"""The largest integer whose nearest double is finite; strict JSON rejects anything larger."""


class JsonError(TypeError):
    """A value is not strict JSON. ``path`` names where, in ``$.key[index]`` notation."""

    def __init__(self, message: str, path: str = "$") -> None:
        super().__init__(f"{message} at {path} (strict JSON)")
        self.path = path
        self.reason = message


def format_path(segments: tuple[str | int, ...] | list[str | int], root: str = "$") -> str:
    """Render path segments as ``$.a[0].b``; keys that are not identifiers are quoted."""
    out = [root]
    for seg in segments:
        if isinstance(seg, int):
            out.append(f"[{seg}]")
        elif seg.isidentifier():
            out.append(f".{seg}")
        else:
            out.append(f"[{seg!r}]")
    return "".join(out)


def _describe(value: object) -> str:
    return type(value).__name__


def _check_scalar(value: object, path: Callable[[], str]) -> None:
    """Raise for a non-container value that is not strict JSON."""
    if value is None or value is True or value is False:
        return
    kind = type(value)
    if kind is int or (isinstance(value, int) and not isinstance(value, bool)):
        if -MAX_JSON_INTEGER <= value <= MAX_JSON_INTEGER:  # type: ignore[operator]
            return
        raise JsonError(
            f"integer of {value.bit_length()} bits is beyond the range of a double",  # type: ignore[union-attr]
            path(),
        )
    if kind is float or isinstance(value, float):
        if math.isfinite(value):  # type: ignore[arg-type]
            return
        raise JsonError(f"non-finite number {value!r}", path())
    if isinstance(value, str):
        return
    raise JsonError(f"value of type {_describe(value)} is not allowed", path())


def validate_json(value: object, path: tuple[str | int, ...] = ()) -> None:
    """Raise :class:`JsonError` unless ``value`` is strict JSON (exact ``dict``/``list``).

    ``path`` prefixes the reported location, for callers validating a value that lives inside a
    larger document.
    """
    _validate(value, list(path), set())


def _validate(value: object, path: list[str | int], active: set[int]) -> None:
    # The hot path: a view of thousands of entries is validated on every hydrate, so leaves
    # are checked inline (no closure, no path push per scalar); the path is built only for a
    # container or a failure.
    kind = type(value)
    if kind is dict or kind is list:
        marker = id(value)
        if marker in active:
            raise JsonError("cycle", format_path(path))
        active.add(marker)
        if kind is dict:
            for key in value:  # type: ignore[attr-defined]
                if type(key) is not str:
                    raise JsonError(f"non-string key {key!r}", format_path(path))
            items = value.items()  # type: ignore[attr-defined]
        else:
            items = enumerate(value)  # type: ignore[arg-type]
        for segment, item in items:
            t = type(item)
            if t is str or t is bool or item is None:
                continue
            if (t is int and -MAX_JSON_INTEGER <= item <= MAX_JSON_INTEGER) or (
                t is float and math.isfinite(item)
            ):
                continue
            path.append(segment)
            if t is dict or t is list:
                _validate(item, path, active)
            else:
                _check_scalar(item, lambda: format_path(path))
            path.pop()
        active.discard(marker)
        return
    if kind is tuple:
        raise JsonError("tuple is not allowed (use a list)", format_path(path))
    _check_scalar(value, lambda: format_path(path))


def integral(value: object) -> int | None:
    """``value`` as an int where a peer's grammar needs an integer, else ``None``.

    JSON has one number type and Chord reads ``1.0`` or ``1e0`` as the integer 1
    (``Number.isInteger``), so an integral finite float counts; ``bool`` never does.
    """
    kind = type(value)
    if kind is int:
        return value  # type: ignore[return-value]
    if kind is float and value.is_integer():  # type: ignore[union-attr]  # False for nan/inf
        return int(value)  # type: ignore[arg-type]
    return None


def is_json_value(value: object) -> bool:
    """True when ``value`` is strict JSON (see the module docstring)."""
    try:
        validate_json(value)
    except JsonError:
        return False
    except RecursionError:
        return False
    return True


def copy_json(value: Any, path: tuple[str | int, ...] = ()) -> Any:
    """Deep-copy a strict JSON value, validating it on the way.

    The copy shares nothing with the input: a container that appears at two places becomes two
    independent copies. Placement conveniences: tuples become lists, and subclasses of ``str``,
    ``int`` and ``float`` become the plain types. Anything else that is not strict JSON raises
    :class:`JsonError` naming the path, and nothing is returned.
    """
    try:
        return _fast_copy(value, 0)
    except _Unusual:  # a problem, or just a subclass to convert: the careful walk decides
        return _copy(value, list(path), set())


class _Unusual(Exception):
    """Raised by :func:`_fast_copy` at anything it does not handle itself."""


_FAST_DEPTH = 64
"""Nesting depth the fast copy handles; deeper values (and cycles) take the careful walk."""


def _fast_copy(value: Any, depth: int) -> Any:
    """The common case of :func:`copy_json`: exact builtin types only, no paths kept.

    It raises :class:`_Unusual` rather than deciding anything hard (subclasses, numbers out of
    range, non-string keys, deep nesting or a cycle), so every error message and conversion
    still comes from :func:`_copy`.
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        if -MAX_JSON_INTEGER <= value <= MAX_JSON_INTEGER:
            return value
        raise _Unusual
    if kind is float:
        if value - value == 0.0:  # finite (inf - inf and nan - nan are nan)
            return value
        raise _Unusual
    if depth >= _FAST_DEPTH:
        raise _Unusual
    depth += 1
    if kind is dict:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _Unusual
            out[key] = _fast_copy(item, depth)
        return out
    if kind is list:
        return [_fast_copy(item, depth) for item in value]
    raise _Unusual


def _copy(value: Any, path: list[str | int], active: set[int]) -> Any:
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is dict:
        marker = id(value)
        if marker in active:
            raise JsonError("cycle", format_path(path))
        active.add(marker)
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise JsonError(f"non-string key {key!r}", format_path(path))
            path.append(key)
            out[str(key)] = _copy(item, path, active)
            path.pop()
        active.discard(marker)
        return out
    if kind is list or kind is tuple:
        marker = id(value)
        if marker in active:
            raise JsonError("cycle", format_path(path))
        active.add(marker)
        items: list[Any] = []
        for index, item in enumerate(value):
            path.append(index)
            items.append(_copy(item, path, active))
            path.pop()
        active.discard(marker)
        return items
    _check_scalar(value, lambda: format_path(path))
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return value  # pragma: no cover - _check_scalar accepted it, so it is one of the above


def equal_json(a: object, b: object) -> bool:
    """Deep equality of two JSON values with JSON's notion of type.

    ``True`` is not ``1`` and ``False`` is not ``0``; ``1`` equals ``1.0``; object key order does
    not matter; list order does. Identical objects are equal without a walk.
    """
    if a is b:
        return True
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        return False  # identical bools were caught by `is`
    if ta is dict:
        if tb is not dict or len(a) != len(b):  # type: ignore[arg-type]
            return False
        for key, item in a.items():  # type: ignore[attr-defined]
            if key not in b:  # type: ignore[operator]
                return False
            if not equal_json(item, b[key]):  # type: ignore[index]
                return False
        return True
    if ta is list:
        if tb is not list or len(a) != len(b):  # type: ignore[arg-type]
            return False
        return all(equal_json(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[call-overload]
    if tb is dict or tb is list:
        return False
    if ta is str or tb is str:
        return ta is tb and a == b
    return a == b


# -- text no UTF-8 encoder takes ------------------------------------------------------------
# A JSON escape such as "\ud800" (valid JSON) or surrogateescape decoding (a file name that is not
# UTF-8) gives a Python string holding a lone surrogate: strict JSON as a value, but no UTF-8
# encoder takes it, so it can be neither stored nor sent on.
def _describe_surrogate(text: str) -> str:
    for index, char in enumerate(text):
        if 0xD800 <= ord(char) <= 0xDFFF:
            return f"a lone surrogate (\\u{ord(char):04x}) at character {index}"
    return "text that is not valid Unicode"  # pragma: no cover - encode() said otherwise


def lone_surrogate(value: Any, path: str = "") -> str | None:
    """Where ``value`` (JSON-like: dicts, lists, strings, scalars) holds a string UTF-8 cannot
    encode, as ``"<path>: a lone surrogate (\\ud800) at character 3"``; ``None`` when it holds
    none. Keys are checked too."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        kind = type(item)
        if kind is str:
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return f"{where or 'the value'}: {_describe_surrogate(item)}"
        elif kind is dict or isinstance(item, dict):
            for key, member in item.items():
                if isinstance(key, str) and not key.isascii():
                    try:
                        key.encode("utf-8")
                    except UnicodeEncodeError:
                        return f"{where or 'the value'}: a key holding {_describe_surrogate(key)}"
                stack.append((member, f"{where}.{key}" if where else str(key)))
        elif kind is list or kind is tuple or isinstance(item, list | tuple):
            stack.extend((member, f"{where}[{index}]") for index, member in enumerate(item))
        elif isinstance(item, str):
            stack.append((str(item), where))
    return None
