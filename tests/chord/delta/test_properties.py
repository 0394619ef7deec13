"""Properties of the delta engine over random JSON documents.

Documents are generated with structural sharing in mind: a derived revision is built from the
old one by a few random edits that copy only the containers they touch, the way a copy-on-write
draft does. That exercises the identity paths of the diff as well as the deep-equality ones.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chord.delta import (
    InvalidOpError,
    Op,
    PathError,
    UnsafePathError,
    apply,
    apply_immutable,
    apply_immutable_batches,
    decoder,
    diff,
    encoder,
)
from chord.json import equal_json

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

GRIN = "\U0001f600"
text = st.text(st.sampled_from(["a", "b", "c", "é", GRIN, "\u200d", " "]), max_size=8)
keys = st.one_of(
    st.sampled_from(["a", "b", "c", "id", "0", GRIN]),
    st.sampled_from(["__proto__", "constructor"]),  # reserved keys live in values, never in paths
    st.text(st.sampled_from("xyz"), max_size=3),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53) + 1, 2**53 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=6), st.dictionaries(keys, children, max_size=5)
    ),
    max_leaves=25,
)
containers = st.one_of(
    st.lists(json_values, max_size=6), st.dictionaries(keys, json_values, max_size=5)
)


def mutate(data: st.DataObject, value: Any, depth: int = 0) -> Any:
    """A new revision of ``value`` with a random edit; untouched subtrees stay shared."""
    kind = type(value)
    if depth > 4 or data.draw(st.integers(0, 7)) == 0:
        return data.draw(json_values)
    if kind is dict and value:
        new = dict(value)
        key = data.draw(st.sampled_from(sorted(value)))
        action = data.draw(st.sampled_from(["edit", "edit", "add", "delete"]))
        if action == "edit":
            new[key] = mutate(data, value[key], depth + 1)
        elif action == "add":
            new[data.draw(keys)] = data.draw(json_values)
        else:
            del new[key]
        return new
    if kind is list and value:
        new = list(value)
        index = data.draw(st.integers(0, len(value) - 1))
        action = data.draw(
            st.sampled_from(["edit", "edit", "insert", "delete", "shuffle", "rotate"])
        )
        if action == "edit":
            new[index] = mutate(data, value[index], depth + 1)
        elif action == "insert":
            new.insert(index, data.draw(json_values))
        elif action == "delete":
            del new[index]
        elif action == "shuffle":
            new = data.draw(st.permutations(value))
        else:
            new = new[index:] + new[:index]
        return new
    if kind is list:
        return [data.draw(json_values)]
    if kind is str:
        action = data.draw(st.sampled_from(["append", "window", "replace"]))
        if action == "append":
            return value + data.draw(text)
        if action == "window":
            return value[data.draw(st.integers(0, len(value))) :] + data.draw(text)
        return data.draw(text)
    return data.draw(json_values)


def derive(data: st.DataObject, value: Any) -> Any:
    for _ in range(data.draw(st.integers(1, 4))):
        value = mutate(data, value)
    return value


def check_diff(before: Any, after: Any) -> list[Op]:
    before_text, after_text = json.dumps(before), json.dumps(after)
    ops = diff(before, after)
    assert equal_json(apply_immutable(before, ops), after)
    assert equal_json(apply(copy.deepcopy(before), copy.deepcopy(ops)), after)
    assert json.dumps(before) == before_text
    assert json.dumps(after) == after_text
    return ops


@SETTINGS
@given(json_values, json_values)
def test_diff_of_unrelated_values_reproduces_after(before: Any, after: Any) -> None:
    check_diff(before, after)


@SETTINGS
@given(containers, st.data())
def test_diff_of_derived_revisions_reproduces_after(before: Any, data: st.DataObject) -> None:
    after = derive(data, before)
    check_diff(before, after)
    assert diff(before, before) == []
    assert diff(before, copy.deepcopy(before)) == []


@SETTINGS
@given(containers, st.data())
def test_wire_round_trip_reproduces_every_revision(base: Any, data: st.DataObject) -> None:
    enc, dec = encoder(), decoder()
    replica = apply_immutable(None, dec.decode(json.loads(json.dumps(enc.encode([("r", base)])))))
    current = base
    history: list[list[Op]] = []
    for _ in range(data.draw(st.integers(1, 6))):
        new = derive(data, current)
        ops = diff(current, new)
        history.append(ops)
        wire_text = json.dumps(enc.encode(ops), allow_nan=False)
        replica = apply_immutable(replica, dec.decode(json.loads(wire_text)))
        assert equal_json(replica, new)
        current = new
    assert equal_json(apply_immutable_batches(base, history), current)


bad_ops = st.sampled_from(
    [
        ("s", ("no\x00such", "x"), 1),  # missing intermediate, or a string index into a list
        ("s", (10**12,), 1),  # integer into an object, or a hole in an array
        ("p", (), 10**9, 0, []),  # splice past the end, or of a non-array
        ("d", (10**12, "x")),
        ("m", (), [0, 0]),  # malformed: not a bijection
        ("s", ("__proto__",), 1),  # malformed: reserved segment
        ("x", ()),  # malformed: unknown verb
    ]
)


@SETTINGS
@given(containers, bad_ops, st.data())
def test_invalid_ops_never_partially_apply(base: Any, bad: Any, data: st.DataObject) -> None:
    ops: list[Any] = list(diff(base, derive(data, base)))
    ops.insert(data.draw(st.integers(0, len(ops))), bad)
    base_copy = copy.deepcopy(base)
    ops_text = repr(ops)
    with pytest.raises((PathError, UnsafePathError, InvalidOpError)):
        apply_immutable(base, ops)
    assert base == base_copy and json.dumps(base) == json.dumps(base_copy)
    assert repr(ops) == ops_text  # payloads untouched

    target = copy.deepcopy(base)
    owned_ops = copy.deepcopy(ops)
    with pytest.raises((PathError, UnsafePathError, InvalidOpError)):
        apply(target, owned_ops)
    assert json.dumps(target) == json.dumps(base_copy)  # same content, same key order
