"""Diffing revisions (docs/design/chord.md#diff)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from chord.delta import Op, apply_immutable, diff, diff_revisions, overlap


def expect_diff(before: Any, after: Any, expected: list[Any]) -> None:
    snapshot = copy.deepcopy(before)
    ops = diff(before, after)
    assert ops == expected
    assert apply_immutable(before, ops) == after
    assert before == snapshot


def row(name: str) -> dict[str, Any]:
    return {"id": name}


def test_diff_revisions_is_diff() -> None:
    assert diff_revisions is diff


def test_identical_revisions_give_nothing() -> None:
    doc = {"a": [1, {"b": 2}]}
    assert diff(doc, doc) == []
    assert diff(1, 1) == []
    assert diff("x" * 3, "".join(["x", "xx"])) == []


# pinned (docs/design/chord.md#diff)
def test_emits_sets_and_deletes() -> None:
    expect_diff(
        {"keep": 1, "change": 1, "remove": True},
        {"keep": 1, "change": 2, "add": 3},
        [("s", ("change",), 2), ("s", ("add",), 3), ("d", ("remove",))],
    )


# pinned (docs/design/chord.md#diff)
def test_emits_string_append_and_front_truncation() -> None:
    expect_diff({"text": "hello"}, {"text": "hello world"}, [("a", ("text",), " world")])
    expect_diff({"text": "hello world"}, {"text": "world"}, [("t", ("text",), 6)])
    expect_diff(
        {"text": "abcdefgh"}, {"text": "defghxyz"}, [("t", ("text",), 3), ("a", ("text",), "xyz")]
    )
    expect_diff({"text": "abc"}, {"text": "xyz"}, [("s", ("text",), "xyz")])


def test_root_values_are_replaced() -> None:
    expect_diff("abc", "abcd", [("r", "abcd")])
    expect_diff(1, 2, [("r", 2)])
    expect_diff({"a": 1}, [1], [("r", [1])])


def test_type_changes_and_scalars_are_set() -> None:
    expect_diff({"a": 1}, {"a": "1"}, [("s", ("a",), "1")])
    expect_diff({"a": 1}, {"a": True}, [("s", ("a",), True)])
    expect_diff({"a": [1]}, {"a": {"0": 1}}, [("s", ("a",), {"0": 1})])
    expect_diff({"a": None}, {"a": 0}, [("s", ("a",), 0)])


def test_insertion_removal_and_shift_are_splices() -> None:
    a, b, c = row("a"), row("b"), row("c")
    expect_diff({"values": [a, b]}, {"values": [a, c, b]}, [("p", ("values",), 1, 0, [c])])
    expect_diff({"values": [a, b, c]}, {"values": [b, c]}, [("p", ("values",), 0, 1, [])])


# pinned (docs/design/chord.md#diff)
def test_same_length_queue_update_is_two_splices() -> None:
    a, b, c, d = row("a"), row("b"), row("c"), row("d")
    expect_diff(
        {"values": [a, b, c]},
        {"values": [b, c, d]},
        [("p", ("values",), 0, 1, []), ("p", ("values",), 2, 0, [d])],
    )


# pinned (docs/design/chord.md#diff)
def test_pure_reorder_is_a_permutation() -> None:
    a, b, c = row("a"), row("b"), row("c")
    expect_diff({"values": [a, b, c]}, {"values": [c, a, b]}, [("m", ("values",), [2, 0, 1])])
    expect_diff([1, 2, 3], [3, 2, 1], [("m", (), [2, 1, 0])])


def test_permutation_keeps_bool_and_int_apart() -> None:
    ops = diff({"v": [True, 1, 0]}, {"v": [0, 1, True]})
    assert apply_immutable({"v": [True, 1, 0]}, ops) == {"v": [0, 1, True]}
    result = apply_immutable({"v": [1, True, 2]}, diff({"v": [1, True, 2]}, {"v": [2, True, 1]}))
    assert [type(x) for x in result["v"]] == [int, bool, int]


# pinned (docs/design/chord.md#diff)
def test_reordered_distinct_deep_equal_objects_give_nothing() -> None:
    first = {"nested": {"value": 1}}
    second = {"nested": {"value": 1}}
    assert diff({"values": [first, second]}, {"values": [second, first]}) == []


def test_deep_equal_reconstructed_values_give_nothing() -> None:
    assert diff({"value": {"nested": [1, 2]}}, {"value": {"nested": [1, 2]}}) == []
    assert diff({"values": [{"id": 1}, {"id": 2}]}, {"values": [{"id": 1}, {"id": 2}]}) == []
    assert diff({"values": [True, True, True]}, {"values": [True, True, True]}) == []


def test_leaf_edit_in_a_reconstructed_array_stays_narrow() -> None:
    expect_diff(
        {"values": [{"id": 1, "label": "one"}, {"id": 2, "label": "two"}]},
        {"values": [{"id": 1, "label": "one"}, {"id": 2, "label": "changed"}]},
        [("s", ("values", 1, "label"), "changed")],
    )


def test_scattered_removals_are_payload_free_splices() -> None:
    a, b, c, d, e = (row(x) for x in "abcde")
    expect_diff(
        {"values": [a, b, c, d, e]},
        {"values": [a, c, e]},
        [("p", ("values",), 1, 1, []), ("p", ("values",), 2, 1, [])],
    )


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        ([2, 3, 4], [("p", ("values",), 0, 1, [])]),
        ([1, 2, 3], [("p", ("values",), 3, 1, [])]),
        ([1, 3, 4], [("p", ("values",), 1, 1, [])]),
        ([], [("p", ("values",), 0, 4, [])]),
        ([1, 2, 3, 4], []),
    ],
)
def test_removals_are_canonical(after: list[int], expected: list[Any]) -> None:
    expect_diff({"values": [1, 2, 3, 4]}, {"values": after}, expected)


def test_unrelated_shifted_objects_are_not_field_diffed() -> None:
    before = [{"type": "row", "value": v} for v in (1, 2, 3)]
    after = [{"type": "row", "value": v} for v in (2, 3, 4)]
    expect_diff(
        {"values": before},
        {"values": after},
        [("p", ("values",), 0, 1, []), ("p", ("values",), 2, 0, [{"type": "row", "value": 4}])],
    )


def test_coincidental_id_fields_are_not_structural_identity() -> None:
    left, right = {"value": "left"}, {"value": "right"}
    before = [
        left,
        {"id": 1, "key": "a", "value": "first"},
        {"id": 2, "key": "b", "value": "second"},
        right,
    ]
    replacements = [
        {"id": 2, "key": "b", "value": "edited-second"},
        {"id": 1, "key": "a", "value": "edited-first"},
    ]
    expect_diff(
        {"values": before},
        {"values": [left, *replacements, right]},
        [("p", ("values",), 1, 2, replacements)],
    )


def test_removals_append_and_shared_subtree_survivor_edit_combine() -> None:
    def item(name: str) -> dict[str, Any]:
        return {"id": name, "stable": {}, "detail": {"text": name}}

    a, b, c, d = (item(x) for x in "abcd")
    changed_c = {"id": "c", "stable": c["stable"], "detail": {"text": "changed"}}
    appended = item("e")
    expect_diff(
        {"values": [a, b, c, d]},
        {"values": [a, changed_c, d, appended]},
        [
            ("p", ("values",), 1, 1, []),
            ("a", ("values", 1, "detail", "text"), "hanged"),
            ("p", ("values",), 3, 0, [appended]),
        ],
    )


def test_removed_neighbours_with_large_payloads_are_not_retained() -> None:
    payload = "x" * (256 * 1024)
    retained = [{"id": x, "payload": payload} for x in "abcde"]
    before = {"values": list(retained)}
    after = {"values": [retained[0], retained[2], retained[4]]}
    ops = diff(before, after)
    assert ops == [("p", ("values",), 1, 1, []), ("p", ("values",), 2, 1, [])]
    assert len(json.dumps(ops)) < 100
    assert apply_immutable(before, ops) == after


@pytest.mark.parametrize("size", [1_001, 10_000])
def test_push_pop_and_middle_removal_stay_narrow(size: int) -> None:
    values = [{"value": v} for v in range(size)]
    appended = {"value": size}
    expect_diff(
        {"values": values},
        {"values": [*values, appended]},
        [("p", ("values",), size, 0, [appended])],
    )
    expect_diff({"values": values}, {"values": values[:-1]}, [("p", ("values",), size - 1, 1, [])])
    middle = size // 2
    expect_diff(
        {"values": values},
        {"values": values[:middle] + values[middle + 1 :]},
        [("p", ("values",), middle, 1, [])],
    )


# pinned (docs/design/chord.md#diff)
def test_forty_thousand_row_sparse_edits_stay_per_leaf() -> None:
    values = [{"value": v, "stable": {"value": v}} for v in range(40_000)]
    after = list(values)
    changed = list(range(100, 40_000, 400))
    for index in changed:
        after[index] = {"value": -index, "stable": values[index]["stable"]}
    ops = diff({"values": values}, {"values": after})
    assert ops == [("s", ("values", index, "value"), -index) for index in changed]
    assert len(json.dumps(ops)) < 7_500
    assert apply_immutable({"values": values}, ops) == {"values": after}


def test_reconstructed_large_array_leaf_edit_stays_narrow() -> None:
    before = [{"value": v, "label": f"row-{v}"} for v in range(1_000)]
    after = copy.deepcopy(before)
    after[700]["label"] = "changed"
    ops = diff({"values": before}, {"values": after})
    assert ops == [("s", ("values", 700, "label"), "changed")]


def test_ambiguous_equal_count_moved_and_edited_gap_is_spliced() -> None:
    left, right = {"value": "left"}, {"value": "right"}
    before = [left, {"id": 1, "value": "a"}, {"id": 2, "value": "b"}, right]
    replacements = [{"id": 2, "value": "edited"}, {"id": 1, "value": "also-edited"}]
    expect_diff(
        {"values": before},
        {"values": [left, *replacements, right]},
        [("p", ("values",), 1, 2, replacements)],
    )


# item 17
def test_large_rotation_is_one_payload_free_permutation() -> None:
    values = [{"value": v} for v in range(10_000)]
    rotated = values[1_000:] + values[:1_000]
    ops = diff({"values": values}, {"values": rotated})
    assert len(ops) == 1 and ops[0][0] == "m"
    assert len(json.dumps(ops)) < 60_000
    assert apply_immutable({"values": values}, ops) == {"values": rotated}


def test_five_hundred_unshifts_do_not_snapshot_retained_rows() -> None:
    retained = [{"value": v, "payload": "x" * 100} for v in range(10_000)]
    inserted = [{"value": -v - 1} for v in range(500)]
    ops = diff({"values": retained}, {"values": inserted + retained})
    assert ops == [("p", ("values",), 0, 0, inserted)]
    assert len(json.dumps(ops)) < 20_000


# pinned (docs/design/chord.md#diff)
def test_twenty_thousand_changed_keys_fold_into_a_replacement() -> None:
    before = {f"field{i}": 0 for i in range(20_000)}
    after = {f"field{i}": 1 for i in range(20_000)}
    assert diff(before, after) == [("r", after)]


# item 16
def test_forty_thousand_changed_ints_fold_into_a_replacement() -> None:
    before = {"values": [0] * 40_000}
    after = {"values": [1] * 40_000}
    ops = diff(before, after)
    assert ops == [("r", after)]
    assert apply_immutable(before, ops) == after


def test_expensive_batches_fold_only_when_no_cheaper_than_the_snapshot() -> None:
    big = "y" * 70_000
    # one op carrying almost the whole document: as costly as the snapshot, so fold
    ops = diff({"a": "x"}, {"a": big})
    assert ops == [("r", {"a": big})]
    # a costly op inside a much larger document stays a delta
    doc = {"a": "x", "keep": "z" * 200_000}
    new = {"a": big, "keep": doc["keep"]}
    assert diff(doc, new) == [("s", ("a",), big)]


def test_at_most_max_ops_before_folding() -> None:
    pad = "z" * 200_000  # keeps the snapshot costlier than the batch
    before: dict[str, Any] = {f"k{i}": 0 for i in range(4_096)} | {"pad": pad}
    after: dict[str, Any] = {f"k{i}": 1 for i in range(4_096)} | {"pad": pad}
    assert len(diff(before, after)) == 4_096
    after["k4096"] = 1
    assert diff(before, after) == [("r", after)]


def test_objects_with_reserved_keys_are_set_whole() -> None:
    expect_diff(
        {"o": {"__proto__": 1, "a": 1}},
        {"o": {"__proto__": 1, "a": 2}},
        [("s", ("o",), {"__proto__": 1, "a": 2})],
    )
    expect_diff(
        {"o": {"a": 1}},
        {"o": {"a": 1, "constructor": 2}},
        [("s", ("o",), {"a": 1, "constructor": 2})],
    )
    assert diff({"o": {"prototype": [1]}}, {"o": {"prototype": [1]}}) == []
    expect_diff({"prototype": 1}, {"prototype": 2}, [("r", {"prototype": 2})])


def test_overlap_finds_bounded_suffix_prefix_matches() -> None:
    assert overlap("abcdefgh", "defghxyz", 65_536) == 5
    assert overlap("abcdef", "defghi", 0) == 0
    assert overlap("", "abc", 10) == 0
    assert overlap("abc", "", 10) == 0
    assert overlap("abc", "xyz", 10) == 0
    assert overlap("xxabc", "abc", 10) == 3
    assert overlap("abcab", "ab", 10) == 2
    # only the scan window is searched
    assert overlap("abc" + "z" * 10, "abcz", 5) == 0


def test_overlap_gives_up_on_repetitive_text() -> None:
    a = "ab" * 50 + "Q"
    b = "Q" + "c"
    assert overlap(a, b, 65_536) == 1
    # many candidate positions for every head: bounded search returns 0, which is allowed
    a = "x" * 1000 + "y"
    b = "x" * 100 + "z"
    assert overlap(a, b, 65_536) == 0


def test_ops_share_payloads_with_after_and_never_mutate_inputs() -> None:
    before: dict[str, Any] = {"rows": [{"a": 1}], "meta": {"x": 1}}
    after: dict[str, Any] = {"rows": [{"a": 1}, {"b": [2]}], "meta": {"x": 1, "y": {"z": 1}}}
    snapshot = (copy.deepcopy(before), copy.deepcopy(after))
    ops: list[Op] = diff(before, after)
    assert (before, after) == snapshot
    assert any(op[0] == "p" and op[4][0] is after["rows"][1] for op in ops)


def test_many_identity_candidates_fall_back_to_greedy_anchors_and_stay_exact() -> None:
    # 510 zeros after x 500 zeros before = 255k candidate pairs, above the 200k cap
    before = {"v": [1, *([0] * 500), 2]}
    after = {"v": [3, *([0] * 450), 7, *([0] * 60), 4]}
    ops = diff(before, after)
    assert ops and ops[0][0] != "r"
    assert apply_immutable(before, ops) == after
    assert len(json.dumps(ops)) < 200


def test_identity_anchor_chain_keeps_shared_rows() -> None:
    rows = [{"n": n} for n in range(6)]
    before = {"v": [rows[0], rows[1], rows[2], rows[3], rows[4], rows[5]]}
    after = {"v": [{"new": 1}, rows[1], rows[3], {"new": 2}, rows[4], {"new": 3}, {"new": 4}]}
    ops = diff(before, after)
    assert apply_immutable(before, ops) == after
    sent = json.dumps(ops)
    assert '"n"' not in sent.replace('["v", 0, "n"]', "")  # kept rows are never re-sent
