"""Tracked proxies record minimal ops; the membrane keeps them inside their transaction."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chord.delta.apply import apply_immutable
from chord.json import JsonError
from pico3.kernel.proxy import (
    DetachedValue,
    Membrane,
    Recorder,
    RevokedProxy,
    TrackedDict,
    TrackedList,
    plain,
)


def tracked(value: dict[str, Any]) -> tuple[TrackedDict, Recorder]:
    recorder = Recorder(Membrane())
    return recorder.root(value), recorder


def test_nested_set_records_one_minimal_op() -> None:
    root, rec = tracked({"a": {"b": 1, "c": [1, 2]}})
    root["a"]["b"] = 2
    assert rec.take() == [("s", ("a", "b"), 2)]


def test_list_mutations_record_splices_and_keep_paths_current() -> None:
    raw: dict[str, Any] = {"xs": [{"n": 0}, {"n": 1}, {"n": 2}]}
    root, rec = tracked(raw)
    xs = root["xs"]
    last = xs[2]
    del xs[0]
    last["n"] = 9  # its index moved from 2 to 1
    xs.append({"n": 3})
    xs.extend([4, 5])
    assert xs.pop() == 5
    assert rec.take() == [
        ("p", ("xs",), 0, 1, []),
        ("s", ("xs", 1, "n"), 9),
        ("p", ("xs",), 2, 0, [{"n": 3}]),
        ("p", ("xs",), 3, 0, [4, 5]),
        ("p", ("xs",), 4, 1, []),
    ]
    assert raw == {"xs": [{"n": 1}, {"n": 9}, {"n": 3}, 4]}


def test_string_growth_records_an_append() -> None:
    root, rec = tracked({"s": "hel"})
    root["s"] = "hello"
    root["s"] = "bye"
    assert rec.take() == [("a", ("s",), "lo"), ("s", ("s",), "bye")]


def test_assignment_stores_a_validated_deep_copy() -> None:
    root, rec = tracked({})
    mine = {"k": [1]}
    root["v"] = mine
    mine["k"].append(2)
    assert root["v"].to_plain() == {"k": [1]}
    ops = rec.take()
    root["v"]["k"].append(3)
    assert ops == [("s", ("v",), {"k": [1]})]  # recorded ops are independent of later changes
    with pytest.raises(JsonError):
        root["bad"] = {"x": float("nan")}
    with pytest.raises(JsonError):
        root["bad"] = {1: 2}
    assert "bad" not in root


def test_assigning_a_proxy_copies_instead_of_aliasing() -> None:
    root, _ = tracked({"a": {"x": 1}})
    root["b"] = root["a"]
    root["b"]["x"] = 2
    assert plain(root) == {"a": {"x": 1}, "b": {"x": 2}}


def test_nested_wrappers_are_identity_preserving_and_never_raw() -> None:
    root, _ = tracked({"a": {"b": [{"c": 1}]}})
    assert root["a"] is root["a"]
    assert isinstance(root["a"], TrackedDict)
    assert all(isinstance(v, TrackedDict) for v in root.values())
    assert isinstance(root["a"]["b"], TrackedList)
    assert all(isinstance(item, TrackedDict) for item in root["a"]["b"])
    assert isinstance(root["a"]["b"][0:1][0], TrackedDict)


def test_revoked_membrane_blocks_reads_and_writes_of_roots_and_nested_handles() -> None:
    membrane = Membrane()
    root = Recorder(membrane).root({"a": {"b": 1}})
    nested = root["a"]
    membrane.revoke()
    for action in (
        lambda: root["a"],
        lambda: nested["b"],
        lambda: nested.__setitem__("b", 2),
        lambda: list(nested),
        lambda: len(root),
    ):
        with pytest.raises(RevokedProxy):
            action()


def test_a_detached_handle_refuses_to_record_a_wrong_path() -> None:
    root, rec = tracked({"a": {"b": 1}})
    old = root["a"]
    root["a"] = {"b": 5}
    rec.take()
    with pytest.raises(DetachedValue):
        old["b"] = 2
    assert rec.take() == []


def test_reserved_segments_are_refused_at_assignment() -> None:
    root, _ = tracked({})
    with pytest.raises(ValueError, match="reserved"):
        root["__proto__"] = 1


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text("abc", max_size=2), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["set", "del", "append", "insert", "pop"]),
            st.text("abc", min_size=1, max_size=2),
            _json,
        ),
        max_size=12,
    )
)
def test_recorded_ops_replay_to_the_mutated_document(steps: list[tuple[str, str, Any]]) -> None:
    start: dict[str, Any] = {"xs": [], "m": {}}
    root, rec = tracked(plain(start))
    for verb, key, value in steps:
        xs, m = root["xs"], root["m"]
        if verb == "set":
            m[key] = value
        elif verb == "del" and key in m:
            del m[key]
        elif verb == "append":
            xs.append(value)
        elif verb == "insert":
            xs.insert(len(key), value)
        elif verb == "pop" and len(xs):
            xs.pop(0)
    assert apply_immutable(start, rec.take()) == plain(root)
