"""Applying ops: in place and copy-on-write, all or nothing (docs/design/chord.md#delta-ops)."""

from __future__ import annotations

import copy
import importlib
import json
from typing import Any

import pytest

from chord.delta import (
    InvalidOpError,
    Op,
    PathError,
    UnsafePathError,
    apply,
    apply_immutable,
    apply_immutable_batches,
)

# The package re-exports the function `apply`, which shadows the submodule's attribute name.
apply_module = importlib.import_module("chord.delta.apply")


def both(target: Any, ops: list[Op]) -> Any:
    """Apply with both appliers; they must agree. Returns the result."""
    immutable = apply_immutable(target, ops)
    mutable = apply(copy.deepcopy(target), copy.deepcopy(ops))
    assert mutable == immutable
    return immutable


def test_applies_mutable_and_immutable_operations_alike() -> None:
    ops: list[Op] = [
        ("a", ("text",), "b"),
        ("p", ("values",), 1, 1, [3, 4]),
        ("s", ("nested", "value"), 2),
    ]
    base = {"text": "a", "values": [1, 2], "nested": {"value": 1}, "stable": {"value": 9}}
    before = copy.deepcopy(base)
    result = apply_immutable(base, ops)
    assert result == {
        "text": "ab",
        "values": [1, 3, 4],
        "nested": {"value": 2},
        "stable": {"value": 9},
    }
    assert base == before
    assert result["stable"] is base["stable"]
    assert apply(copy.deepcopy(base), ops) == result


def test_root_replacement_root_splice_and_permutation() -> None:
    value = apply(None, [("r", [1, 2, 3])])
    value = apply(value, [("p", (), 1, 1, [4])])
    value = apply(value, [("m", (), [2, 0, 1])])
    assert value == [3, 1, 4]
    assert apply_immutable(
        None, [("r", [1, 2, 3]), ("p", (), 1, 1, [4]), ("m", (), [2, 0, 1])]
    ) == [3, 1, 4]


# item 8
def test_apply_immutable_never_mutates_base_or_payloads_and_shares_untouched() -> None:
    payload = {"deep": {"x": 1}}
    base = {"a": {"b": {"c": 1}}, "side": {"big": list(range(100))}, "rows": [{"n": 1}, {"n": 2}]}
    snapshot = copy.deepcopy(base)
    ops: list[Op] = [
        ("s", ("a", "b", "c"), 2),
        ("s", ("a", "new"), payload),
        ("s", ("a", "new", "deep", "x"), 5),  # edits the payload: must copy it first
        ("s", ("rows", 1, "n"), 3),
    ]
    result = apply_immutable(base, ops)
    assert base == snapshot
    assert payload == {"deep": {"x": 1}}
    assert result["a"]["new"] == {"deep": {"x": 5}}
    assert result["side"] is base["side"]
    assert result["rows"][0] is base["rows"][0]
    assert result["rows"] is not base["rows"]
    assert result is not base


# item 8
def test_apply_immutable_copies_each_touched_container_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    copies: list[int] = []
    real = apply_module._shallow_copy

    def counting(container: Any) -> Any:
        copies.append(id(container))
        return real(container)

    monkeypatch.setattr(apply_module, "_shallow_copy", counting)
    base = {"rows": [{"n": i} for i in range(50)], "other": {}}
    ops: list[Op] = [("s", ("rows", i, "n"), -i) for i in range(50)]
    ops += [("s", ("rows", 0, "extra"), True), ("p", ("rows",), 50, 0, [{"n": 50}])]
    result = apply_immutable(base, ops)
    # root + rows + 50 row objects, each exactly once
    assert len(copies) == 52
    assert len(set(copies)) == 52
    assert result["rows"][0] == {"n": 0, "extra": True}
    copies.clear()
    apply_immutable_batches(base, [ops[:10], ops[10:]])
    assert len(copies) == 52


def test_payload_replaced_by_r_is_not_mutated_by_a_later_op() -> None:
    replacement = {"nested": {"value": 1}}
    result = apply_immutable(None, [("r", replacement), ("s", ("nested", "value"), 2)])
    assert replacement == {"nested": {"value": 1}}
    assert result == {"nested": {"value": 2}}


def test_apply_adopts_payload_containers() -> None:
    batch: list[Op] = [("r", {"value": 0})]
    first = apply(None, batch)
    second = apply(None, batch)
    first["value"] = 1
    assert second["value"] == 1  # documented aliasing: one batch, two mutable replicas


def test_apply_mutates_in_place_and_keeps_container_identity() -> None:
    target = {"rows": [1, 2], "meta": {"n": 1}}
    rows, meta = target["rows"], target["meta"]
    result = apply(target, [("p", ("rows",), 2, 0, [3]), ("s", ("meta", "n"), 2)])
    assert result is target
    assert rows == [1, 2, 3] and meta == {"n": 2}


# item 9
def test_batches_equal_sequential_and_flattened_application() -> None:
    base = {"log": "", "rows": [], "n": 0}
    batches: list[list[Op]] = [
        [("a", ("log",), "x"), ("p", ("rows",), 0, 0, [{"id": 1}])],
        [("s", ("rows", 0, "id"), 2), ("s", ("n",), 1)],
        [("a", ("log",), "y"), ("t", ("log",), 1), ("p", ("rows",), 1, 0, [{"id": 3}])],
    ]
    snapshot = copy.deepcopy(base)
    sequential = base
    for batch in batches:
        sequential = apply_immutable(sequential, batch)
    flattened = apply_immutable(base, [op for batch in batches for op in batch])
    together = apply_immutable_batches(base, batches)
    assert (
        together == sequential == flattened == {"log": "y", "rows": [{"id": 2}, {"id": 3}], "n": 1}
    )
    assert base == snapshot
    inserted: Any = batches[0][1]
    assert inserted[4] == [{"id": 1}]  # the inserted payload was copied, not edited


def test_batch_errors_name_the_batch_and_the_op() -> None:
    with pytest.raises(PathError, match=r"^batch 2 op 1 \('s', \('x', 'y'\)\): no key 'x'"):
        apply_immutable_batches(
            {}, [[("s", ("a",), 1)], [], [("s", ("b",), 1), ("s", ("x", "y"), 1)]]
        )


def test_batches_are_all_checked_before_any_op_runs() -> None:
    with pytest.raises(InvalidOpError, match=r"batch 1 op 0 \('s', 'x'\)"):
        apply_immutable_batches(None, [[("r", {})], [("s", "x", 1)]])  # type: ignore[list-item]


# item 10
@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (("s", "path", 1), InvalidOpError),
        (("s", ("__proto__", "x"), 1), UnsafePathError),
        (("s", ("constructor", "prototype", "x"), 1), UnsafePathError),
        (("m", ("rows",), [0, 0]), InvalidOpError),
        (("q", ("rows",)), InvalidOpError),
        (("s", ("rows", True), 1), UnsafePathError),
    ],
)
def test_invalid_ops_raise_before_any_traversal(
    bad: tuple[Any, ...], error: type[Exception]
) -> None:
    # The target is not even a container: reaching it would raise PathError instead.
    with pytest.raises(error, match="op 1"):
        apply_immutable(None, [("s", ("a",), 1), bad])  # type: ignore[list-item]
    target = {"a": 0, "rows": [1]}
    with pytest.raises(error):
        apply(target, [("s", ("a",), 1), bad])  # type: ignore[list-item]
    assert target == {"a": 0, "rows": [1]}


def test_string_segment_into_an_array_is_unsafe() -> None:
    for op in [
        ("s", ("values", "0"), 9),
        ("a", ("values", "0"), "b"),
        ("s", ("values", "0", "x"), 1),
    ]:
        with pytest.raises(UnsafePathError):
            apply({"values": [{"x": "a"}]}, [op])  # type: ignore[list-item]
        with pytest.raises(UnsafePathError):
            apply_immutable({"values": [{"x": "a"}]}, [op])  # type: ignore[list-item]


# item 11
def test_set_at_length_appends_and_past_length_raises() -> None:
    assert both({"values": [1, 2, 3]}, [("s", ("values", 1), 9)]) == {"values": [1, 9, 3]}
    assert both({"values": [1, 2, 3]}, [("s", ("values", 3), 9)]) == {"values": [1, 2, 3, 9]}
    with pytest.raises(
        UnsafePathError, match=r"op 0 \('s', \('values', 5\)\): index 5 is past the end \(len 3\)"
    ):
        apply_immutable({"values": [1, 2, 3]}, [("s", ("values", 5), 9)])
    with pytest.raises(UnsafePathError):
        apply({"values": []}, [("s", ("values", 4_294_967_290), 1)])
    with pytest.raises(UnsafePathError):
        apply_immutable({"values": []}, [("s", ("values", 10**30), 1)])


# item 12
def test_delete_past_the_end_raises_and_growth_uses_explicit_nulls() -> None:
    with pytest.raises(PathError, match="past the end"):
        apply({"values": [1]}, [("d", ("values", 1))])
    with pytest.raises(PathError, match="past the end"):
        apply_immutable({"values": [1]}, [("d", ("values", 1))])
    grown = both({"values": [1]}, [("p", ("values",), 1, 0, [None, None, 9])])
    assert grown == {"values": [1, None, None, 9]}
    assert both({"values": [1, 2]}, [("d", ("values", 0))]) == {"values": [2]}


def test_delete_of_a_missing_object_key_is_a_no_op() -> None:
    assert both({"a": 1}, [("d", ("b",))]) == {"a": 1}


# item 12
def test_splice_with_300k_items() -> None:
    items: list[Any] = [None] * 300_000
    result = apply({"values": []}, [("p", ("values",), 0, 0, items)])
    assert len(result["values"]) == 300_000
    base = {"values": [1, 2]}
    result = apply_immutable(base, [("p", ("values",), 1, 0, items)])
    assert len(result["values"]) == 300_002 and result["values"][-1] == 2
    assert base == {"values": [1, 2]} and len(items) == 300_000


def test_splice_and_permutation_must_fit_the_array() -> None:
    with pytest.raises(UnsafePathError, match="splice index 3 is past the end"):
        apply({"v": [1, 2]}, [("p", ("v",), 3, 0, [])])
    with pytest.raises(PathError, match="past the end"):
        apply_immutable({"v": [1, 2]}, [("p", ("v",), 1, 2, [])])
    with pytest.raises(PathError, match="does not fit"):
        apply({"v": [1, 2]}, [("m", ("v",), [0])])
    with pytest.raises(PathError, match="needs an array"):
        apply_immutable({"v": {"k": 1}}, [("p", ("v",), 0, 0, [])])


def test_unresolvable_paths_raise_path_error() -> None:
    doc = {"a": {"b": 1}, "s": "x", "rows": [1]}
    cases: list[Op] = [
        ("s", ("missing", "x"), 1),  # missing intermediate
        ("s", ("a", "b", "c"), 1),  # walks into a number
        ("a", ("a", "b"), "x"),  # append to a non-string
        ("t", ("a", "missing"), 1),
        ("a", ("rows", 1), "x"),  # index past the end
        ("s", ("a", 0), 1),  # integer segment into an object
        ("s", ("s", "x"), 1),  # walks into a string
    ]
    for op in cases:
        with pytest.raises(PathError):
            apply_immutable(doc, [op])
        target = copy.deepcopy(doc)
        with pytest.raises(PathError):
            apply(target, [op])
        assert target == doc


def test_apply_on_a_scalar_root_raises_path_error() -> None:
    with pytest.raises(PathError, match="the root is null"):
        apply_immutable(None, [("s", ("a",), 1)])
    with pytest.raises(PathError):
        apply(3, [("p", (), 0, 0, [])])


def test_error_messages_name_the_op_and_its_path() -> None:
    with pytest.raises(PathError) as info:
        apply_immutable({"a": {}}, [("s", ("a", "x"), 1), ("s", ("a", "y", "z"), 1)])
    assert str(info.value).startswith("op 1 ('s', ('a', 'y', 'z')): no key 'y' at $.a")
    assert info.value.path == ("a", "y", "z")


def test_failed_apply_restores_the_mutable_target_exactly() -> None:
    target = {"b": {"x": 1, "y": 2}, "a": [1, 2, 3], "s": "hello"}
    inner_b, inner_a = target["b"], target["a"]
    text_before = json.dumps(target)
    ops: list[Op] = [
        ("d", ("b", "x")),
        ("s", ("b", "x"), 5),  # re-inserted at the end: key order changed
        ("p", ("a",), 0, 1, [9, 9]),
        ("m", ("a",), [3, 2, 1, 0]),
        ("a", ("s",), " world"),
        ("s", ("new",), {"k": 1}),
        ("s", ("a", 10), 1),  # fails
    ]
    with pytest.raises(UnsafePathError, match="op 6"):
        apply(target, ops)
    assert json.dumps(target) == text_before  # same content and key order
    assert target["b"] is inner_b and target["a"] is inner_a


def test_failed_apply_restores_an_adopted_replacement_payload() -> None:
    payload = {"rows": [1]}
    with pytest.raises(PathError):
        apply({}, [("r", payload), ("p", ("rows",), 1, 0, [2]), ("d", ("missing", "x"))])
    assert payload == {"rows": [1]}


def test_apply_accepts_any_iterable_of_ops() -> None:
    assert apply_immutable({"a": 1}, (op for op in [("s", ("a",), 2)])) == {"a": 2}  # type: ignore[misc]
    with pytest.raises(InvalidOpError):
        apply({}, "sa")  # type: ignore[arg-type]
