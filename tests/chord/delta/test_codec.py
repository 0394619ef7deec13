"""The wire path codec (docs/design/chord.md#path-codec)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chord.delta import (
    InvalidOpError,
    Op,
    PathError,
    UnsafePathError,
    apply_immutable,
    assert_valid_wire_op,
    decoder,
    encoder,
)
from chord.json import JsonError


def test_pinned_example_second_use_defines_an_id() -> None:
    enc = encoder()
    assert enc.encode([("s", ("revision",), 1)]) == [["s", ["revision"], 1]]
    assert enc.encode([("s", ("revision",), 2)]) == [["#", 0, ["revision"]], ["s", 0, 2]]
    assert enc.encode([("s", ("revision",), 3)]) == [["s", 0, 3]]
    # an independent stream has its own dictionary
    assert encoder().encode([("s", ("revision",), 2)]) == [["s", ["revision"], 2]]


def test_after_a_base_an_independent_encoder_can_reuse_id_zero() -> None:
    left, right = encoder(), encoder()
    for enc in (left, right):
        enc.encode([("s", ("x",), 1)])
        assert enc.encode([("s", ("x",), 2)])[0] == ["#", 0, ["x"]]
    assert left.encode([("r", {"x": 0})]) == [["r", {"x": 0}]]
    assert right.encode([("s", ("x",), 3)]) == [["s", 0, 3]]


# item 13
def test_interns_paths_omits_adjacent_paths_and_round_trips() -> None:
    path = ("nested", "text")
    enc, dec = encoder(), decoder()
    first: list[Op] = [("t", path, 1), ("a", path, "x")]
    wire = enc.encode(first)
    assert wire == [["t", ["nested", "text"], 1], ["a", "x"]]
    assert dec.decode(wire) == first
    second: list[Op] = [("a", path, "y")]
    wire = enc.encode(second)
    assert wire == [["#", 0, ["nested", "text"]], ["a", 0, "y"]]
    assert dec.decode(wire) == second


def test_every_verb_has_a_short_form() -> None:
    ops: list[Op] = [
        ("s", ("v",), [1, 2, 3]),
        ("s", ("v",), [1, 2, 3, 4]),
        ("p", ("v",), 0, 1, []),
        ("m", ("v",), [2, 1, 0]),
        ("s", ("t",), "abc"),
        ("a", ("t",), "d"),
        ("t", ("t",), 1),
        ("d", ("t",)),
    ]
    wire = encoder().encode(ops)
    assert wire == [
        ["s", ["v"], [1, 2, 3]],
        ["s", [1, 2, 3, 4]],
        ["p", 0, 1, []],
        ["m", [2, 1, 0]],
        ["s", ["t"], "abc"],
        ["a", "d"],
        ["t", 1],
        ["d"],
    ]
    assert decoder().decode(wire) == ops
    assert apply_immutable({}, decoder().decode(wire)) == {"v": [4, 3, 2]}


def test_short_forms_do_not_span_batches() -> None:
    enc = encoder()
    enc.encode([("s", ("v",), 1)])
    assert enc.encode([("s", ("v",), 2), ("s", ("v",), 3)]) == [
        ["#", 0, ["v"]],
        ["s", 0, 2],
        ["s", 3],
    ]


def test_permutations_encode_and_decode() -> None:
    ops: list[Op] = [("m", ("values",), [2, 0, 1]), ("m", ("values",), [1, 2, 0])]
    wire = encoder().encode(ops)
    assert wire == [["m", ["values"], [2, 0, 1]], ["m", [1, 2, 0]]]
    for op in wire:
        assert_valid_wire_op(op)
    assert decoder().decode(wire) == ops


def test_root_paths_for_splice_and_permutation() -> None:
    ops: list[Op] = [("p", (), 0, 0, [1, 2]), ("m", (), [1, 0]), ("p", (), 2, 0, [3])]
    enc, dec = encoder(), decoder()
    wire = enc.encode(ops)
    assert wire == [["p", [], 0, 0, [1, 2]], ["m", [1, 0]], ["p", 2, 0, [3]]]
    assert dec.decode(wire) == ops
    again = enc.encode([("p", (), 0, 1, [])])
    assert again == [["#", 0, []], ["p", 0, 0, 1, []]]
    assert dec.decode(again) == [("p", (), 0, 1, [])]


# item 13
def test_a_base_resets_the_encoder_and_later_batches_are_self_contained() -> None:
    enc = encoder()
    path = ("a", "deep")
    enc.encode([("a", path, "1")])
    enc.encode([("a", path, "2")])
    base = enc.encode([("r", {"a": {"deep": "x"}})])
    assert base == [["r", {"a": {"deep": "x"}}]]
    after = enc.encode([("a", path, "3")])
    assert after == [["a", ["a", "deep"], "3"]]
    fresh = decoder()
    assert fresh.decode(base) == [("r", {"a": {"deep": "x"}})]
    assert fresh.decode(after) == [("a", path, "3")]


def test_a_base_clears_the_decoder_ids() -> None:
    dec = decoder()
    dec.decode([["#", 0, ["a"]], ["a", 0, "1"]])
    dec.decode([["r", {"a": ""}]])
    with pytest.raises(PathError, match="undefined path id 0"):
        dec.decode([["a", 0, "2"]])


def test_ids_defined_after_a_base_in_the_same_batch_survive() -> None:
    dec = decoder()
    dec.decode([["#", 0, ["old"]], ["s", 0, 1]])
    assert dec.decode([["r", {}], ["#", 1, ["new"]], ["s", 1, 1]]) == [
        ("r", {}),
        ("s", ("new",), 1),
    ]
    assert dec.decode([["s", 1, 2]]) == [("s", ("new",), 2)]
    with pytest.raises(PathError):
        dec.decode([["s", 0, 2]])


# item 13
def test_decoder_rejects_unknown_ids_orphan_short_forms_and_unsafe_paths() -> None:
    with pytest.raises(PathError, match="undefined path id 7"):
        decoder().decode([["s", 7, 1]])
    with pytest.raises(PathError, match="no previous path"):
        decoder().decode([["a", "x"]])
    with pytest.raises(UnsafePathError):
        decoder().decode([["#", 0, ["__proto__"]], ["s", 0, True]])
    with pytest.raises(UnsafePathError):
        decoder().decode(json.loads('[["#", 0, ["__proto__", "w"]], ["s", 0, true]]'))
    with pytest.raises(UnsafePathError):
        decoder().decode([["s", ["a", "constructor"], 1]])
    with pytest.raises(PathError, match="root"):
        decoder().decode([["s", [], 1]])


def test_decoder_validates_grammar_and_payloads() -> None:
    bad: list[Any] = [
        "s",
        [],
        ["x", ["a"]],
        ["s"],
        ["s", ["a"], 1, 2],
        ["d", ["a"], 1],
        ["a", ["a"], 1],
        ["a", 1],
        ["t", ["a"], -1],
        ["t", ["a"], True],
        ["p", ["a"], 0, 0],
        ["p", ["a"], 0, 0, 1],
        ["p", ["a"], -1, 0, []],
        ["m", ["a"], [0, 0]],
        ["#", 0],
        ["#", -1, ["a"]],
        ["#", 0, "a"],
        ["s", "a", 1],
        ["s", -1, 1],
        ["s", 1.5, 1],
    ]
    for op in bad:
        with pytest.raises((InvalidOpError, UnsafePathError)):
            assert_valid_wire_op(op)
        with pytest.raises((InvalidOpError, UnsafePathError), match="wire op 0"):
            decoder().decode([op])
    for op in (["s", ["a"], float("nan")], ["r", {"a": 2**1024}], ["p", 0, 0, [float("inf")]]):
        with pytest.raises(JsonError):
            assert_valid_wire_op(op)
    with pytest.raises(JsonError):
        decoder().decode([["s", ["a"], float("nan")]])
    with pytest.raises(InvalidOpError, match="wire batch must be an array"):
        decoder().decode({"s": 1})
    for op in (["s", 1], ["d"], ["a", "x"], ["t", 0], ["p", 0, 0, []], ["m", [0]], ["#", 0, ["a"]]):
        assert_valid_wire_op(op)


def test_integers_written_with_a_fraction_decode_as_integers_like_chord() -> None:
    # JSON has one number type; Chord's Number.isInteger reads 1.0 as 1 wherever it needs one
    wire = [
        ["s", ["xs", 0.0], 2**60],
        ["#", 1.0, ["xs", 1e0]],
        ["t", 1.0, 2.0],
        ["p", ["xs"], 1.0, 0.0, []],
        ["m", ["ys"], [1.0, 0]],
    ]
    ops = decoder().decode(wire)
    assert ops == [
        ("s", ("xs", 0), 2**60),
        ("t", ("xs", 1), 2),
        ("p", ("xs",), 1, 0, []),
        ("m", ("ys",), [1, 0]),
    ]
    for op in ops:
        for part in op[1:]:
            items = part if isinstance(part, (tuple, list)) else [part]
            assert all(type(item) is not float for item in items)


def test_a_failed_batch_defines_nothing() -> None:
    dec = decoder()
    with pytest.raises(PathError):
        dec.decode([["#", 0, ["a"]], ["s", 0, 1], ["s", 9, 1]])
    with pytest.raises(PathError, match="undefined path id 0"):
        dec.decode([["s", 0, 1]])


def test_encoder_checks_the_batch_before_changing_its_dictionary() -> None:
    enc = encoder()
    enc.encode([("s", ("a",), 1)])
    with pytest.raises(UnsafePathError, match="op 1"):
        enc.encode([("s", ("a",), 2), ("s", ("__proto__",), 1)])
    assert enc.encode([("s", ("a",), 3)]) == [["#", 0, ["a"]], ["s", 0, 3]]


# item 14
def test_paths_containing_nul_do_not_collide() -> None:
    ops: list[Op] = [("s", ("a\x00b",), 1), ("s", ("a", "b"), 2), ("s", ("a\x00b",), 3)]
    enc, dec = encoder(), decoder()
    assert dec.decode(enc.encode(ops)) == ops
    assert dec.decode(enc.encode(ops)) == ops


def test_string_and_integer_segments_do_not_collide() -> None:
    ops: list[Op] = [
        ("s", ("rows", 1), "int"),
        ("s", ("rows", "1"), "str"),
        ("s", ("rows", 1), "x"),
    ]
    wire = encoder().encode(ops)
    assert wire[1] == ["s", ["rows", "1"], "str"]
    assert decoder().decode(wire) == ops


def test_list_paths_are_keyed_like_tuples() -> None:
    enc = encoder()
    enc.encode([["s", ["a"], 1]])  # type: ignore[list-item]
    assert enc.encode([("s", ("a",), 2)]) == [["#", 0, ["a"]], ["s", 0, 2]]


def test_round_trips_deterministic_mixed_streams_through_json_text() -> None:
    batches: list[list[Op]] = [
        [("s", ("rows", i, "value"), i), ("a", ("output",), str(i)), ("p", ("tail",), i, 0, [i])]
        for i in range(100)
    ]
    enc, dec = encoder(), decoder()
    decoded = [dec.decode(json.loads(json.dumps(enc.encode(batch)))) for batch in batches]
    assert decoded == batches


def test_payloads_checked_skips_the_payload_check_but_not_the_grammar_or_paths() -> None:
    # the wire's ServiceStateDecoder decodes what parse_wire_service_* checked already: a
    # payload is not walked again, but an op's shape and path still are
    bad_payload = [["r", {"x": float("nan")}], ["s", ["x"], float("inf")]]
    with pytest.raises(JsonError):
        decoder().decode(bad_payload)
    decoded = decoder().decode(bad_payload, payloads_checked=True)
    assert [op[0] for op in decoded] == ["r", "s"]
    assert decoded[1][1:] == (("x",), float("inf"))
    with pytest.raises(InvalidOpError):
        decoder().decode([["s", ["x"], 1, 2, 3]], payloads_checked=True)
    with pytest.raises(UnsafePathError):
        decoder().decode([["s", ["__proto__"], 1]], payloads_checked=True)
    with pytest.raises(PathError):
        decoder().decode([["s", 7, 1]], payloads_checked=True)
