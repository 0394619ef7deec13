"""Draft semantics: copy-on-write proxies that record ops (docs/design/chord.md#drafts)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from chord.delta.apply import apply_immutable
from chord.delta.track import MAX_TRACKED_OPS, DraftDict, DraftList, open_draft
from chord.json import JsonError


def run(base: Any, mutate: Any) -> tuple[Any, list[Any]]:
    """Run one draft session; check the ops replay to the result and the base is untouched."""
    before = copy.deepcopy(base)
    draft, finish = open_draft(base)
    mutate(draft)
    value, ops = finish()
    assert base == before, "the base revision was mutated"
    assert apply_immutable(base, ops) == value
    return value, ops


def test_reads_return_scalars_and_handles_for_containers() -> None:
    draft, _ = open_draft({"a": {"b": [1, "x"]}, "n": None})
    assert isinstance(draft, DraftDict)
    assert isinstance(draft["a"], DraftDict)
    assert isinstance(draft["a"]["b"], DraftList)
    assert draft["a"]["b"][1] == "x"
    assert draft["n"] is None
    assert draft.get("missing", 7) == 7
    assert list(draft) == ["a", "n"]
    assert draft["a"] == {"b": [1, "x"]}
    assert draft["a"]["b"].to_json() == [1, "x"]
    assert copy.deepcopy(draft) == {"a": {"b": [1, "x"]}, "n": None}
    assert type(copy.deepcopy(draft["a"])) is dict


def test_set_and_delete_record_s_and_d() -> None:
    value, ops = run({"a": 1, "b": 2}, lambda d: (d.__setitem__("c", 3), d.__delitem__("a")))
    assert value == {"b": 2, "c": 3}
    assert ops == [("s", ("c",), 3), ("d", ("a",))]


def test_untouched_subtrees_are_shared_and_touched_paths_copied() -> None:
    base = {"left": {"deep": [1, 2]}, "right": {"x": {"y": 1}}}
    value, _ = run(base, lambda d: d["right"]["x"].__setitem__("y", 2))
    assert value["left"] is base["left"]
    assert value["right"] is not base["right"]
    assert base["right"]["x"]["y"] == 1


def test_restoring_the_original_value_gives_no_ops_and_keeps_the_base() -> None:
    base = {"a": {"b": 1}, "xs": [1, 2]}

    def mutate(d: Any) -> None:
        d["a"]["b"] = 5
        d["xs"].append(3)
        d["a"]["b"] = 1
        d["xs"].pop()

    draft, finish = open_draft(base)
    mutate(draft)
    value, ops = finish()
    assert ops == []
    assert value is base


def test_deep_equal_container_assignment_records_nothing_and_keeps_identity() -> None:
    base = {"a": {"b": [1, {"c": 2}]}}
    draft, finish = open_draft(base)
    draft["a"] = {"b": [1, {"c": 2}]}
    value, ops = finish()
    assert ops == []
    assert value is base
    assert value["a"] is base["a"]


def test_equal_scalar_assignment_records_nothing() -> None:
    _, ops = run({"a": 1, "s": "x"}, lambda d: (d.__setitem__("a", 1), d.__setitem__("s", "x")))
    assert ops == []


def test_true_is_not_one() -> None:
    value, ops = run({"a": 1}, lambda d: d.__setitem__("a", True))
    assert value == {"a": True} and value["a"] is True
    assert ops == [("s", ("a",), True)]


def test_placing_one_object_twice_gives_independent_copies() -> None:
    shared = {"k": [1]}
    draft, finish = open_draft({})
    draft["a"] = shared
    draft["b"] = shared
    draft["a"]["k"].append(2)
    value, ops = finish()
    assert value == {"a": {"k": [1, 2]}, "b": {"k": [1]}}
    assert value["a"] is not value["b"]
    assert shared == {"k": [1]}, "the caller's object is never adopted"
    assert apply_immutable({}, ops) == value


def test_a_recorded_payload_keeps_its_value_when_edited_later() -> None:
    def mutate(d: Any) -> None:
        d["xs"] = []
        d["xs"].append(1)
        d["xs"].append({"n": 1})
        d["xs"][1]["n"] = 2

    value, ops = run({}, mutate)
    assert value == {"xs": [1, {"n": 2}]}
    assert ops[0] == ("s", ("xs",), [])


def test_invalid_placement_raises_naming_the_path_and_changes_nothing() -> None:
    base = {"xs": [0]}
    draft, finish = open_draft(base)
    with pytest.raises(JsonError, match=r"\$\.xs\[2\]"):
        draft["xs"].extend([1, float("nan")])
    with pytest.raises(JsonError):
        draft["xs"].append({1, 2})
    with pytest.raises(JsonError, match="non-string key"):
        draft["bad"] = {1: "x"}
    with pytest.raises(JsonError):
        draft[3] = "x"  # type: ignore[index]
    with pytest.raises(JsonError):
        draft["b"] = b"bytes"
    with pytest.raises(JsonError):
        draft["o"] = object()
    with pytest.raises(JsonError):
        draft["i"] = float("inf")
    with pytest.raises(JsonError, match=r"\$\.big"):
        draft["big"] = 2**1024
    assert draft == {"xs": [0]}
    value, ops = finish()
    assert ops == [] and value is base


def test_inserting_a_draft_handle_copies_its_current_content() -> None:
    def mutate(d: Any) -> None:
        d["copy"] = d["src"]
        d["src"]["v"] = 2
        d["nested"] = [d["src"]]

    value, _ = run({"src": {"v": 1}}, mutate)
    assert value == {"src": {"v": 2}, "copy": {"v": 1}, "nested": [{"v": 2}]}


def test_writes_through_a_removed_element_handle_are_ignored() -> None:
    def mutate(d: Any) -> None:
        gone = d["items"][0]
        replaced = d["obj"]
        d["items"].pop(0)
        d["obj"] = {"fresh": True}
        gone["v"] = 99
        replaced["v"] = 99
        assert gone.detached and replaced.detached

    value, ops = run({"items": [{"v": 1}, {"v": 2}], "obj": {"v": 0}}, mutate)
    assert value == {"items": [{"v": 2}], "obj": {"fresh": True}}
    assert len(ops) == 2


def test_a_handle_follows_its_element_when_the_list_moves() -> None:
    def mutate(d: Any) -> None:
        second = d["items"][1]
        d["items"].insert(0, {"v": 0})
        second["v"] = 20
        d["items"].reverse()
        second["v"] = 21

    value, _ = run({"items": [{"v": 1}, {"v": 2}]}, mutate)
    assert value == {"items": [{"v": 21}, {"v": 1}, {"v": 0}]}


def test_two_reads_of_one_element_stay_in_step() -> None:
    def mutate(d: Any) -> None:
        first = d["a"]
        second = d["a"]
        first["x"] = 1
        second["y"] = 2

    value, _ = run({"a": {}}, mutate)
    assert value == {"a": {"x": 1, "y": 2}}


def test_the_draft_is_revoked_after_the_session() -> None:
    draft, finish = open_draft({"a": {"b": 1}})
    nested = draft["a"]
    finish()
    with pytest.raises(TypeError, match="revoked"):
        draft["a"]
    with pytest.raises(TypeError, match="revoked"):
        nested["b"] = 2
    with pytest.raises(TypeError, match="revoked"):
        len(nested)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda xs: xs.append(4), [1, 2, 3, 4]),
        (lambda xs: xs.insert(0, 0), [0, 1, 2, 3]),
        (lambda xs: xs.insert(-1, 9), [1, 2, 9, 3]),
        (lambda xs: xs.insert(100, 9), [1, 2, 3, 9]),
        (lambda xs: xs.extend([4, 5]), [1, 2, 3, 4, 5]),
        (lambda xs: xs.__iadd__([4]), [1, 2, 3, 4]),
        (lambda xs: xs.__imul__(2), [1, 2, 3, 1, 2, 3]),
        (lambda xs: xs.__imul__(0), []),
        (lambda xs: xs.pop(), [1, 2]),
        (lambda xs: xs.pop(0), [2, 3]),
        (lambda xs: xs.remove(2), [1, 3]),
        (lambda xs: xs.clear(), []),
        (lambda xs: xs.reverse(), [3, 2, 1]),
        (lambda xs: xs.sort(reverse=True), [3, 2, 1]),
        (lambda xs: xs.sort(key=lambda v: -v), [3, 2, 1]),
        (lambda xs: xs.__setitem__(1, 20), [1, 20, 3]),
        (lambda xs: xs.__setitem__(-1, 30), [1, 2, 30]),
        (lambda xs: xs.__setitem__(slice(0, 2), [7, 8, 9]), [7, 8, 9, 3]),
        (lambda xs: xs.__setitem__(slice(1, 1), [5]), [1, 5, 2, 3]),
        (lambda xs: xs.__setitem__(slice(None, None, 2), [0, 0]), [0, 2, 0]),
        (lambda xs: xs.__delitem__(0), [2, 3]),
        (lambda xs: xs.__delitem__(slice(1, None)), [1]),
        (lambda xs: xs.__delitem__(slice(None, None, 2)), [2]),
    ],
)
def test_every_list_mutator_matches_a_plain_list(mutate: Any, expected: list[int]) -> None:
    plain = [1, 2, 3]
    mutate(plain)
    assert plain == expected
    value, _ = run({"xs": [1, 2, 3]}, lambda d: mutate(d["xs"]))
    assert value == {"xs": expected}


def test_list_reads_and_errors_match_a_plain_list() -> None:
    draft, _ = open_draft([1, 2, 3])
    assert isinstance(draft, DraftList)
    assert draft[-1] == 3 and draft[0:2] == [1, 2]
    assert 2 in draft and draft.index(3) == 2 and draft.count(1) == 1
    with pytest.raises(IndexError):
        draft[3]
    with pytest.raises(IndexError):
        draft[5] = 1
    with pytest.raises(ValueError):
        draft.remove(9)
    with pytest.raises(ValueError, match="extended slice"):
        draft[::2] = [1]


def test_dict_mutators_match_a_plain_dict() -> None:
    def mutate(d: Any) -> None:
        assert d.pop("a") == {"n": 1}
        assert d.pop("missing", None) is None
        d.setdefault("b", 2)
        d.update({"c": 3}, e=5)
        assert d.popitem() == ("e", 5)

    value, _ = run({"a": {"n": 1}, "b": 1}, mutate)
    assert value == {"b": 1, "c": 3}
    with pytest.raises(KeyError):
        open_draft({})[0].pop("x")


def test_string_ops_append_truncate_and_slide() -> None:
    # string t + a.
    _, ops = run({"s": "hello"}, lambda d: d.__setitem__("s", d["s"] + " world"))
    assert ops == [("a", ("s",), " world")]
    _, ops = run({"s": "hello world"}, lambda d: d.__setitem__("s", "world"))
    assert ops == [("t", ("s",), 6)]
    old = "".join(chr(97 + i % 26) for i in range(300))
    new = old[100:] + "TAIL"
    _, ops = run({"s": old}, lambda d: d.__setitem__("s", new))
    assert ops == [("t", ("s",), 100), ("a", ("s",), "TAIL")]
    _, ops = run({"s": "abc"}, lambda d: d.__setitem__("s", "xyz"))
    assert ops == [("s", ("s",), "xyz")]


def test_truncation_counts_utf16_units() -> None:
    _, ops = run({"s": "😀ab"}, lambda d: d.__setitem__("s", "ab"))
    assert ops == [("t", ("s",), 2)]


def test_list_shift_is_a_splice_and_reverse_a_permutation() -> None:
    _, ops = run({"xs": [1, 2, 3]}, lambda d: d["xs"].pop(0))
    assert ops == [("p", ("xs",), 0, 1, [])]
    _, ops = run({"xs": [1, 2, 3]}, lambda d: d["xs"].reverse())
    assert ops == [("m", ("xs",), [2, 1, 0])]


def test_sort_key_may_edit_elements() -> None:
    def key(item: Any) -> int:
        item["seen"] = True
        return -item["v"]

    value, _ = run({"xs": [{"v": 1}, {"v": 3}, {"v": 2}]}, lambda d: d["xs"].sort(key=key))
    assert value == {"xs": [{"v": v, "seen": True} for v in (3, 2, 1)]}


def test_mutation_under_a_reserved_key_folds_into_the_safe_ancestor() -> None:
    base = {"safe": {"constructor": {"n": 1}}}
    value, ops = run(base, lambda d: d["safe"]["constructor"].__setitem__("n", 2))
    assert ops == [("s", ("safe",), {"constructor": {"n": 2}})]
    value, ops = run({}, lambda d: d.__setitem__("__proto__", 1))
    assert ops == [("r", {"__proto__": 1})]
    assert value == {"__proto__": 1}


def test_more_than_max_ops_fold_into_one_replace() -> None:
    def mutate(d: Any) -> None:
        for i in range(MAX_TRACKED_OPS + 1):
            d["xs"].append(i)

    value, ops = run({"xs": []}, mutate)
    assert ops == [("r", value)]
    assert len(value["xs"]) == MAX_TRACKED_OPS + 1


def test_augmented_assignment_through_a_parent_records_one_splice() -> None:
    def mutate(d: Any) -> None:
        d["xs"] += [3]
        d["nested"][0] += [2]
        d["s"] += "!"

    value, ops = run({"xs": [1, 2], "nested": [[1]], "s": "hi"}, mutate)
    assert value == {"xs": [1, 2, 3], "nested": [[1, 2]], "s": "hi!"}
    assert ops == [
        ("p", ("xs",), 2, 0, [3]),
        ("p", ("nested", 0), 1, 0, [2]),
        ("a", ("s",), "!"),
    ]


def test_a_list_root_change_records_root_ops() -> None:
    value, ops = run([1, 2, 3], lambda d: (d.pop(0), d.append(4), d.sort(reverse=True)))
    assert value == [4, 3, 2]
    assert ops == [("p", (), 0, 1, []), ("p", (), 2, 0, [4]), ("m", (), [2, 1, 0])]


def test_an_aliased_base_container_is_copied_per_path() -> None:
    shared = {"n": 1}
    base = {"a": shared, "b": shared, "xs": [shared, shared]}
    draft, finish = open_draft(base)
    draft["b"]["n"] = 2
    draft["xs"][1]["n"] = 3
    value, ops = finish()
    assert value == {"a": {"n": 1}, "b": {"n": 2}, "xs": [{"n": 1}, {"n": 3}]}
    assert shared == {"n": 1}
    assert apply_immutable(base, ops) == value
