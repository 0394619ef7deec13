"""The op vocabulary: shape checks, path safety, untrusted decoding."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chord.delta import (
    RESERVED_SEGMENTS,
    InvalidOpError,
    UnsafePathError,
    assert_safe_path,
    assert_valid_op,
    decode_ops,
    is_base,
)
from chord.json import JsonError

VALID = [
    ("r", {"a": 1}),
    ("r", None),
    ("s", ("a", 0, "b"), [1]),
    ("d", ("a",)),
    ("a", ("text",), "x"),
    ("t", ("text",), 0),
    ("p", (), 0, 0, []),
    ("p", ("rows",), 2, 1, [None]),
    ("m", (), [1, 0]),
    ("m", ["rows"], (0,)),
    ["s", ["a"], 1],  # lists from decoded JSON are accepted too
]


@pytest.mark.parametrize("op", VALID)
def test_well_formed_ops_pass(op: object) -> None:
    assert_valid_op(op)


@pytest.mark.parametrize(
    ("op", "message"),
    [
        ("s", "non-empty tuple"),
        ((), "non-empty tuple"),
        (("x", ("a",)), "unknown op verb 'x'"),
        ((1, ("a",)), "unknown op verb 1"),
        (("r",), "'r' takes 2 elements, got 1"),
        (("s", ("a",)), "'s' takes 3 elements"),
        (("d", ("a",), 1), "'d' takes 2 elements"),
        (("s", "value", 1), "path must be a tuple or list, not str"),
        (("s", (), 1), "path is empty"),
        (("d", ()), "path is empty"),
        (("a", ("t",), 1), "'a' text must be a str"),
        (("t", ("t",), -1), "'t' count must be an int >= 0"),
        (("t", ("t",), True), "'t' count must be an int >= 0"),
        (("t", ("t",), 1.0), "'t' count must be an int >= 0"),
        (("p", (), -1, 0, []), "'p' index"),
        (("p", (), 0, False, []), "'p' remove"),
        (("p", (), 0, 0, (1,)), "'p' items must be a list"),
        (("m", (), [0, 0]), "not a bijection"),
        (("m", (), [1, 2]), "not a bijection"),
        (("m", (), [True, 0]), "not a bijection"),
        (("m", (), "01"), "permutation must be a list"),
    ],
)
def test_malformed_ops_raise_invalid_op_error(op: object, message: str) -> None:
    with pytest.raises(InvalidOpError, match=message):
        assert_valid_op(op)


def test_invalid_op_error_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        assert_valid_op(("s", "value", 1))


@pytest.mark.parametrize("segment", sorted(RESERVED_SEGMENTS))
def test_reserved_segments_are_unsafe_anywhere_in_a_path(segment: str) -> None:
    with pytest.raises(UnsafePathError, match="reserved") as info:
        assert_valid_op(("s", ("ok", segment, "x"), True))
    assert info.value.segment == segment
    with pytest.raises(UnsafePathError):
        assert_valid_op(("p", (segment,), 0, 0, []))


@pytest.mark.parametrize("segment", [-1, True, False, 1.0, None, b"a", ("a",)])
def test_segments_must_be_str_or_non_negative_int(segment: object) -> None:
    with pytest.raises(UnsafePathError):
        assert_safe_path(["a", segment])


def test_safe_paths_pass() -> None:
    assert_safe_path(())
    assert_safe_path(("a", 0, "", "0", "__proto", 10**20))


def test_is_base_looks_at_the_first_op_only() -> None:
    assert is_base([("r", 1)])
    assert is_base([["r", 1], ["s", ["a"], 1]])
    assert not is_base([])
    assert not is_base([("s", ("a",), 1), ("r", 1)])
    assert not is_base(None)


def test_decode_ops_normalises_json_arrays_to_tuples() -> None:
    raw = json.loads('[["s", ["a", 0], {"x": [1]}], ["d", ["b"]], ["m", [], [1, 0]], ["r", 2]]')
    ops = decode_ops(raw)
    assert ops == [("s", ("a", 0), {"x": [1]}), ("d", ("b",)), ("m", (), [1, 0]), ("r", 2)]
    assert all(type(op) is tuple for op in ops)
    assert all(type(op[1]) is tuple for op in ops[:3])
    first: Any = ops[0]
    assert first[2] is raw[0][2]  # payloads are not copied


@pytest.mark.parametrize(
    "raw",
    [
        [["s", ["a"], float("nan")]],
        [["r", {"x": 2**1024}]],
        [["p", ["a"], 0, 0, [float("inf")]]],
        [["s", ["a"], {1: "non-string key"}]],
    ],
)
def test_decode_ops_rejects_non_strict_payloads(raw: list[object]) -> None:
    with pytest.raises(JsonError, match="op 0"):
        decode_ops(raw)


def test_decode_ops_names_the_offending_op_and_path() -> None:
    raw = json.loads('[["s", ["ok"], 1], ["s", ["a", "__proto__"], 1]]')
    with pytest.raises(UnsafePathError, match=r"op 1 \('s', \('a', '__proto__'\)\): reserved"):
        decode_ops(raw)
    with pytest.raises(InvalidOpError, match="op 0"):
        decode_ops([["s", "path", 1]])
    with pytest.raises(InvalidOpError, match="a batch must be a list"):
        decode_ops({"s": 1})
