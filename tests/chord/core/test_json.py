"""chord.json: strict JSON validation, copying and equality."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chord.json import (
    MAX_SAFE_INTEGER,
    JsonError,
    _copy,  # pyright: ignore[reportPrivateUsage]
    copy_json,
    equal_json,
    is_json_value,
    validate_json,
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5)
    ),
    max_leaves=30,
)


@pytest.mark.parametrize(
    ("value", "where", "what"),
    [
        ({"x": math.nan}, "$.x", "non-finite"),
        ([1, math.inf], "$[1]", "non-finite"),
        ({"a": {"b": -math.inf}}, "$.a.b", "non-finite"),
        ({1: "x"}, "$", "non-string key"),
        ({"a": b"bytes"}, "$.a", "bytes"),
        ({"a": {1, 2}}, "$.a", "set"),
        ({"a": (1, 2)}, "$.a", "tuple"),
        ({"a": object()}, "$.a", "object"),
        ({"a": [0, 2**1024]}, "$.a[1]", "beyond the range of a double"),
        ({"a": -(2**1024)}, "$.a", "beyond the range of a double"),
        ({"weird key": [None, {"x": math.nan}]}, "$['weird key'][1].x", "non-finite"),
    ],
)
def test_validate_names_the_path_of_the_violation(value: Any, where: str, what: str) -> None:
    with pytest.raises(JsonError) as info:
        validate_json(value)
    assert info.value.path == where
    assert what in str(info.value)
    assert not is_json_value(value)


def test_validate_accepts_strict_values() -> None:
    value = {"a": [1, 2.5, "s", None, True, {"b": []}], "c": MAX_SAFE_INTEGER}
    validate_json(value)
    assert is_json_value(value)


def test_cycles_are_rejected() -> None:
    a: list[Any] = []
    a.append(a)
    d: dict[str, Any] = {}
    d["self"] = d
    assert not is_json_value(a)
    with pytest.raises(JsonError, match=r"cycle at \$\.self"):
        validate_json(d)
    with pytest.raises(JsonError, match="cycle"):
        copy_json(d)


def test_shared_child_is_not_a_cycle_and_copy_breaks_aliasing() -> None:
    shared = {"n": 1}
    value = {"a": shared, "b": shared}
    validate_json(value)
    copied = copy_json(value)
    assert copied == value
    assert copied["a"] is not copied["b"]
    assert copied["a"] is not shared


def test_copy_json_converts_placement_conveniences() -> None:
    class Name(str):
        pass

    copied = copy_json({"t": (1, 2), "s": Name("x")})
    assert copied == {"t": [1, 2], "s": "x"}
    assert type(copied["t"]) is list and type(copied["s"]) is str


def test_copy_json_raises_on_non_strict_input() -> None:
    with pytest.raises(JsonError, match=r"\$\.a\[0\]"):
        copy_json({"a": [math.nan]})


def test_prefix_path_is_reported() -> None:
    with pytest.raises(JsonError) as info:
        validate_json({"x": math.nan}, ("entries", 3))
    assert info.value.path == "$.entries[3].x"


def test_equal_json_keeps_bool_and_int_apart() -> None:
    assert not equal_json(True, 1)
    assert not equal_json(0, False)
    assert not equal_json([True], [1])
    assert not equal_json({"a": 1}, {"a": True})
    assert equal_json(1, 1.0)
    assert equal_json({"a": 1, "b": [1, "x"]}, {"b": [1, "x"], "a": 1})
    assert not equal_json([1, 2], [2, 1])
    assert not equal_json({"a": None}, {})
    assert not equal_json("1", 1)
    assert not equal_json([], {})


@given(json_values)
@settings(max_examples=200, deadline=None)
def test_copy_is_equal_and_validates(value: Any) -> None:
    assert is_json_value(value)
    copied = copy_json(value)
    assert equal_json(copied, value)
    assert copied == value


@given(json_values, json_values)
@settings(max_examples=200, deadline=None)
def test_equal_json_agrees_with_python_equality_outside_bool_int(a: Any, b: Any) -> None:
    import json

    same_text = json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    if same_text:
        assert equal_json(a, b)
    if equal_json(a, b):
        assert a == b


class _Text(str):
    pass


class _Number(int):
    pass


_awkward_scalars = st.one_of(
    st.integers(min_value=-(2**60), max_value=2**60),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
    st.booleans(),
    st.none(),
    st.builds(_Text, st.text(max_size=3)),
    st.builds(_Number, st.integers(min_value=-5, max_value=5)),
)
_awkward = st.recursive(
    _awkward_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 3)), children, max_size=3),
    ),
    max_leaves=12,
)


def _careful(value: Any) -> tuple[str, Any]:
    try:
        return "ok", _copy(value, [], set())
    except JsonError as error:
        return "error", str(error)


@settings(max_examples=300, deadline=None)
@given(_awkward)
def test_copy_json_fast_path_agrees_with_the_careful_walk(value: Any) -> None:
    # copy_json takes a fast path for plain values; whatever the input, the outcome (the copy,
    # or the error and its message) is the careful walk's
    try:
        outcome: tuple[str, Any] = ("ok", copy_json(value))
    except JsonError as error:
        outcome = ("error", str(error))
    expected = _careful(value)
    assert outcome[0] == expected[0]
    if outcome[0] == "ok":
        assert equal_json(outcome[1], expected[1])
        assert all(
            type(x) in (str, int, float, bool, type(None), list, dict) for x in _walk(outcome[1])
        )
    else:
        assert outcome[1] == expected[1]


def _walk(value: Any) -> list[Any]:
    found = [value]
    if isinstance(value, dict):
        for item in value.values():  # type: ignore[union-attr]
            found += _walk(item)
    elif isinstance(value, list):
        for item in value:  # type: ignore[union-attr]
            found += _walk(item)
    return found


def test_deep_nesting_and_cycles_take_the_careful_walk() -> None:
    deep: Any = "leaf"
    for _ in range(200):
        deep = [deep]
    assert copy_json(deep) == deep
    loop: list[Any] = []
    loop.append({"again": loop})
    with pytest.raises(JsonError, match=r"cycle at \$\[0\]\.again"):
        copy_json(loop)
