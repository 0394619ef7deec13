"""Diff two immutable revisions into a batch of ops.

``diff(before, after)`` returns ops such that ``apply_immutable(before, ops) == after``. It is
built for revisions that *share structure* (a new revision made copy-on-write from the old one):
identical objects are skipped without a walk, so the cost follows the changed region, not the
document.

* **Strings** (below the root): an append becomes ``a``; a rolling window (drop the front, add
  at the back) becomes ``t`` + ``a`` through :func:`overlap`; anything else is an ``s``.
  ``t`` counts UTF-16 code units, as on the wire.
* **Objects**: recurse into common keys, ``s`` new keys, ``d`` removed ones. An object with a
  reserved key (``__proto__``...) on either side is set whole, since no path may name that key.
* **Arrays**: deep-equal arrays give nothing. A pure reorder (same elements by identity, first
  and last both moved) is one ``m``. Otherwise the region diff trims the common prefix and
  suffix, pairs elements (positionally, as an identity subsequence, along the longest chain of
  identical elements, or by a bounded semantic LCS), recurses into changed pairs and splices
  (``p``) the rest.
* Anything else (a type change, a scalar) is an ``s``, or an ``r`` at the root.

Two guards keep a batch sane: more than :data:`~chord.delta.ops.MAX_OPS` ops, or an estimated
JSON size of at least :data:`~chord.delta.ops.SNAPSHOT_COST` that is no smaller than sending
the whole value, fold into ``[("r", after)]``.

Batches are exact, not canonical: never infer meaning from the shape of an op.
"""

from __future__ import annotations

from bisect import bisect_left
from operator import is_
from typing import Any

from chord.delta.ops import (
    MAX_IDENTITY_CANDIDATES,
    MAX_OPS,
    MAX_SEMANTIC_CELLS,
    OVERLAP_SCAN,
    RESERVED_SEGMENTS,
    SNAPSHOT_COST,
    Op,
)
from chord.delta.utf16 import index_to_units
from chord.json import equal_json

__all__ = ["diff", "diff_revisions", "overlap"]


def overlap(a: str, b: str, scan: int, probe: int = 64, max_candidates: int = 8) -> int:
    """The length of the longest suffix of ``a`` that is a prefix of ``b`` (0 if none is found).

    Only the last ``scan`` characters of ``a`` are searched. A head of ``b`` of length
    ``min(probe, len(b))`` is looked up first (few hits, and it finds the long overlaps a
    rolling window produces), then a one-character head; each tries at most ``max_candidates``
    positions, so repetitive text gives up (returns 0) instead of going quadratic. Lengths are in
    code points. Any non-zero answer is exact: ``a.endswith(b[:n])``.
    """
    if not a or not b or scan <= 0:
        return 0
    tail = a[-scan:] if len(a) > scan else a
    size = len(tail)
    for head_len in (min(probe, len(b)), 1):
        head = b[:head_len]
        tried = 0
        at = tail.find(head)
        while at != -1:
            tried += 1
            if tried > max_candidates:
                break
            n = size - at
            if n <= len(b) and tail[at:] == b[:n]:
                return n
            at = tail.find(head, at + 1)
        if head_len == 1:
            break
    return 0


class _Overflow(Exception):
    """More than MAX_OPS ops: the caller folds the batch into a replacement."""


def _emit(ops: list[Op], op: Any) -> None:
    if len(ops) >= MAX_OPS:
        raise _Overflow
    ops.append(op)


def _emit_set(ops: list[Op], path: tuple[Any, ...], value: Any) -> None:
    _emit(ops, ("s", path, value) if path else ("r", value))


def _is_container(value: object) -> bool:
    kind = type(value)
    return kind is dict or kind is list


def _same(a: Any, b: Any) -> bool:
    return a is b or equal_json(a, b)


def _identical(a: Any, b: Any) -> bool:
    """Identity for containers, value for scalars (``True`` is not ``1``)."""
    if a is b:
        return True
    ta, tb = type(a), type(b)
    if ta is dict or ta is list or tb is dict or tb is list:
        return False
    if (ta is bool) != (tb is bool):
        return False
    return bool(a == b)


def _identity_key(value: Any) -> Any:
    """A dict key matching :func:`_identical`: containers by ``id``, scalars by value."""
    kind = type(value)
    if kind is dict or kind is list:
        return ("id", id(value))
    if kind is bool:
        return ("bool", value)
    return value  # str, int, float, None: never equal to the tuples above, nor bool keys


def _diff_value(before: Any, after: Any, path: tuple[Any, ...], ops: list[Op]) -> None:
    if before is after:
        return
    tb, ta = type(before), type(after)
    if tb is str and ta is str and path:
        _diff_string(before, after, path, ops)
    elif tb is list and ta is list:
        _diff_array(before, after, path, ops)
    elif tb is dict and ta is dict:
        _diff_object(before, after, path, ops)
    elif tb in (dict, list) or ta in (dict, list) or not equal_json(before, after):
        _emit_set(ops, path, after)


def _diff_string(before: str, after: str, path: tuple[Any, ...], ops: list[Op]) -> None:
    if before == after:
        return
    if len(after) > len(before) and after.startswith(before):
        _emit(ops, ("a", path, after[len(before) :]))
        return
    shared = overlap(before, after, OVERLAP_SCAN)
    if shared == 0:
        _emit(ops, ("s", path, after))
        return
    _emit(ops, ("t", path, index_to_units(before, len(before) - shared)))
    if len(after) > shared:
        _emit(ops, ("a", path, after[shared:]))


def _diff_object(
    before: dict[str, Any], after: dict[str, Any], path: tuple[Any, ...], ops: list[Op]
) -> None:
    for key in RESERVED_SEGMENTS:
        if key in before or key in after:
            if not equal_json(before, after):
                _emit_set(ops, path, after)
            return
    for key, value in after.items():
        old = before.get(key, _ABSENT)
        if old is _ABSENT:
            _emit(ops, ("s", (*path, key), value))
        elif old is not value:
            _diff_value(old, value, (*path, key), ops)
    for key in before:
        if key not in after:
            _emit(ops, ("d", (*path, key)))


_ABSENT: Any = object()


def _permutation(before: list[Any], after: list[Any]) -> list[int] | None:
    """``perm`` with ``after[i] is before[perm[i]]`` (scalars by value), or None."""
    positions: dict[Any, list[int]] = {}
    for index in range(len(before) - 1, -1, -1):
        positions.setdefault(_identity_key(before[index]), []).append(index)
    perm: list[int] = []
    for value in after:
        stack = positions.get(_identity_key(value))
        if not stack:
            return None
        perm.append(stack.pop())
    return perm


def _diff_array(before: list[Any], after: list[Any], path: tuple[Any, ...], ops: list[Op]) -> None:
    # Deep-equal arrays need no separate check: the region diff trims them away entirely.
    size = len(before)
    if (
        size == len(after)
        and size > 1
        and not _same(before[0], after[0])
        and not _same(before[-1], after[-1])
    ):
        perm = _permutation(before, after)
        if perm is not None:
            _emit(ops, ("m", path, perm))
            return
    _diff_region(before, after, path, ops, 0, size, 0, len(after), 0)


_Matches = list[tuple[int, int]]

_FAST_TRIM = 16  # regions longer than this trim identical runs at C speed first


def _identity_run(left: list[Any], right: list[Any]) -> int:
    """How many leading elements of two equally long lists are the same objects."""
    flags = list(map(is_, left, right))
    try:
        return flags.index(False)
    except ValueError:
        return len(flags)


def _diff_region(
    before: list[Any],
    after: list[Any],
    path: tuple[Any, ...],
    ops: list[Op],
    b_start: int,
    b_end: int,
    a_start: int,
    a_end: int,
    out: int,
) -> None:
    """Turn ``before[b_start:b_end]`` into ``after[a_start:a_end]``, living at output ``out``."""
    shorter = min(b_end - b_start, a_end - a_start)
    if shorter > _FAST_TRIM:
        k = _identity_run(before[b_start : b_start + shorter], after[a_start : a_start + shorter])
        b_start += k
        a_start += k
        out += k
        shorter -= k
    while b_start < b_end and a_start < a_end and _same(before[b_start], after[a_start]):
        b_start += 1
        a_start += 1
        out += 1
    shorter = min(b_end - b_start, a_end - a_start)
    if shorter > _FAST_TRIM:
        k = _identity_run(
            before[b_end - shorter : b_end][::-1], after[a_end - shorter : a_end][::-1]
        )
        b_end -= k
        a_end -= k
    while b_start < b_end and a_start < a_end and _same(before[b_end - 1], after[a_end - 1]):
        b_end -= 1
        a_end -= 1
    b_count = b_end - b_start
    a_count = a_end - a_start
    if b_count == 0 and a_count == 0:
        return
    if b_count == 0 or a_count == 0:
        _emit(ops, ("p", path, out, b_count, after[a_start:a_end]))
        return
    bounds = (b_start, b_end, a_start, a_end, out)
    if b_count == a_count:
        positional = [
            (b_start + k, a_start + k)
            for k in range(b_count)
            if _same(before[b_start + k], after[a_start + k])
        ]
        if positional:
            _follow(before, after, path, ops, bounds, positional)
            return
    matches = _identity_subsequence(before, after, b_start, b_end, a_start, a_end)
    if not matches:
        matches = _identity_anchors(before, after, b_start, b_end, a_start, a_end)
    if not matches:
        matches = _semantic_matches(before, after, b_start, b_end, a_start, a_end)
    if matches:
        _follow(before, after, path, ops, bounds, matches)
        return
    if b_count == 1 and a_count == 1:
        _diff_value(before[b_start], after[a_start], (*path, out), ops)
        return
    _emit(ops, ("p", path, out, b_count, after[a_start:a_end]))


def _follow(
    before: list[Any],
    after: list[Any],
    path: tuple[Any, ...],
    ops: list[Op],
    bounds: tuple[int, int, int, int, int],
    matches: _Matches,
) -> None:
    """Diff the gaps between matched pairs, and each changed pair at its output index."""
    b_at, b_end, a_at, a_end, out = bounds
    for b_match, a_match in matches:
        _diff_region(before, after, path, ops, b_at, b_match, a_at, a_match, out)
        out += a_match - a_at
        old, new = before[b_match], after[a_match]
        if not _same(old, new):
            _diff_value(old, new, (*path, out), ops)
        out += 1
        b_at = b_match + 1
        a_at = a_match + 1
    _diff_region(before, after, path, ops, b_at, b_end, a_at, a_end, out)


def _identity_subsequence(
    before: list[Any], after: list[Any], b_start: int, b_end: int, a_start: int, a_end: int
) -> _Matches:
    """All of the shorter side, found in order (by identity) in the longer side; else []."""
    matches: _Matches = []
    if a_end - a_start < b_end - b_start:
        b = b_start
        for a in range(a_start, a_end):
            while b < b_end and not _identical(before[b], after[a]):
                b += 1
            if b == b_end:
                return []
            matches.append((b, a))
            b += 1
        return matches
    if b_end - b_start < a_end - a_start:
        a = a_start
        for b in range(b_start, b_end):
            while a < a_end and not _identical(before[b], after[a]):
                a += 1
            if a == a_end:
                return []
            matches.append((b, a))
            a += 1
        return matches
    return []


def _identity_anchors(
    before: list[Any], after: list[Any], b_start: int, b_end: int, a_start: int, a_end: int
) -> _Matches:
    """The longest chain of identical elements in the same order on both sides."""
    positions: dict[Any, list[int]] = {}
    for b in range(b_start, b_end):
        positions.setdefault(_identity_key(before[b]), []).append(b)
    keys = [_identity_key(after[a]) for a in range(a_start, a_end)]
    candidates = 0
    for key in keys:
        found = positions.get(key)
        if found is not None:
            candidates += len(found)
            if candidates > MAX_IDENTITY_CANDIDATES:
                return _greedy_anchors(positions, keys, a_start)
    if candidates == 0:
        return []
    # Longest strictly increasing run of `before` indices, patience style. Within one `after`
    # element the candidates go in descending order so at most one of them joins a chain.
    nodes: list[tuple[int, int, int]] = []  # (before, after, previous node or -1)
    tails: list[int] = []  # node index ending the best chain of each length
    tail_values: list[int] = []  # its before index
    for offset, key in enumerate(keys):
        found = positions.get(key)
        if found is None:
            continue
        for b in reversed(found):
            at = bisect_left(tail_values, b)
            nodes.append((b, a_start + offset, tails[at - 1] if at else -1))
            if at == len(tails):
                tails.append(len(nodes) - 1)
                tail_values.append(b)
            else:
                tails[at] = len(nodes) - 1
                tail_values[at] = b
    matches: _Matches = []
    node = tails[-1] if tails else -1
    while node >= 0:
        b, a, node = nodes[node]
        matches.append((b, a))
    matches.reverse()
    return matches


def _greedy_anchors(positions: dict[Any, list[int]], keys: list[Any], a_start: int) -> _Matches:
    matches: _Matches = []
    previous = -1
    for offset, key in enumerate(keys):
        found = positions.get(key)
        if found is None:
            continue
        at = bisect_left(found, previous + 1)
        if at == len(found):
            continue
        previous = found[at]
        matches.append((previous, a_start + offset))
    return matches


def _aligned(left: Any, right: Any) -> bool:
    """Deep-equal, or the same kind of container sharing an identical child container."""
    if _same(left, right):
        return True
    tl, tr = type(left), type(right)
    if tl is list and tr is list:
        if len(left) != len(right):
            return False
        return any(_is_container(v) and v is w for v, w in zip(left, right, strict=True))
    if tl is dict and tr is dict:
        for key, value in left.items():
            if _is_container(value) and right.get(key, _ABSENT) is value:
                return True
    return False


def _semantic_matches(
    before: list[Any], after: list[Any], b_start: int, b_end: int, a_start: int, a_end: int
) -> _Matches:
    """A longest common subsequence under :func:`_aligned`, if the region is small enough."""
    rows, cols = b_end - b_start, a_end - a_start
    if rows * cols > MAX_SEMANTIC_CELLS:
        return []
    width = cols + 1
    lengths = [0] * ((rows + 1) * width)
    equal = bytearray(rows * cols)
    for i in range(rows - 1, -1, -1):
        left = before[b_start + i]
        for j in range(cols - 1, -1, -1):
            at = i * width + j
            if _aligned(left, after[a_start + j]):
                equal[i * cols + j] = 1
                lengths[at] = lengths[at + width + 1] + 1
            else:
                down, right = lengths[at + width], lengths[at + 1]
                lengths[at] = down if down >= right else right
    matches: _Matches = []
    i = j = 0
    while i < rows and j < cols:
        at = i * width + j
        if equal[i * cols + j] and lengths[at] == lengths[at + width + 1] + 1:
            matches.append((b_start + i, a_start + j))
            i += 1
            j += 1
        elif lengths[at + width] >= lengths[at + 1]:
            i += 1
        else:
            j += 1
    return matches


# ─── Cost estimate (approximate JSON text length) ────────────────────────────


def _json_cost(value: Any, limit: float = float("inf")) -> int:
    """Approximate ``len(json.dumps(value))``; stops counting once past ``limit``."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            total += len(item) + 2
        elif kind is dict:
            total += 2 + max(len(item) - 1, 0)
            for key, child in item.items():
                total += len(key) + 3
                stack.append(child)
        elif kind is list:
            total += 2 + max(len(item) - 1, 0)
            stack.extend(item)
        elif item is None or item is True:
            total += 4
        elif item is False:
            total += 5
        else:
            total += len(repr(item))
        if total > limit:
            break
    return total


def _path_cost(path: tuple[Any, ...]) -> int:
    cost = 2 + max(len(path) - 1, 0)
    for seg in path:
        cost += len(seg) + 2 if type(seg) is str else len(str(seg))
    return cost


def _op_cost(op: Any) -> int:
    verb = op[0]
    if verb == "r":
        return 6 + _json_cost(op[1])
    path_cost = _path_cost(op[1])
    if verb == "s":
        return 7 + path_cost + _json_cost(op[2])
    if verb == "d":
        return 6 + path_cost
    if verb == "a":
        return 9 + path_cost + len(op[2])
    if verb == "t":
        return 7 + path_cost + len(str(op[2]))
    if verb == "p":
        return 10 + path_cost + len(str(op[2])) + len(str(op[3])) + _json_cost(op[4])
    return 7 + path_cost + _json_cost(op[2])


def diff(before: Any, after: Any) -> list[Op]:
    """Ops that turn revision ``before`` into ``after`` (see the module docstring).

    Both revisions are read, never mutated; payloads in the result share containers with
    ``after``, so treat the batch as read-only too.
    """
    if before is after:
        return []
    ops: list[Op] = []
    try:
        _diff_value(before, after, (), ops)
    except _Overflow:
        return [("r", after)]
    if not ops or ops[0][0] == "r":
        return ops
    cost = 2
    for op in ops:
        cost += _op_cost(op) + 1
    if cost < SNAPSHOT_COST:
        return ops
    snapshot = _json_cost(after, cost) + 6
    return [("r", after)] if cost >= snapshot else ops


diff_revisions = diff
