"""UTF-16 code units on the wire, code points in Python (docs/design/chord.md#delta-ops, docs/design/decisions.md#d2)."""

from __future__ import annotations

import json

import pytest

from chord.delta import PathError, apply, apply_immutable, decoder, diff, encoder, utf16_len
from chord.delta.utf16 import index_to_units, units_to_index

GRIN = "\U0001f600"  # 😀: one code point, two UTF-16 code units
FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # 👨‍👩‍👧: 5 code points, 8 units


def test_utf16_len_counts_code_units() -> None:
    assert utf16_len("") == 0
    assert utf16_len("abc") == 3
    assert utf16_len("é") == 1
    assert utf16_len(GRIN) == 2
    assert utf16_len("a" + GRIN + "b") == 4
    assert utf16_len(FAMILY) == 8
    assert utf16_len("\ud800") == 1  # a lone surrogate is one unit, as in JavaScript
    assert utf16_len(GRIN) == len(json.loads(json.dumps(GRIN)).encode("utf-16-le")) // 2


def test_units_and_indices_convert_both_ways() -> None:
    text = "a" + GRIN + "b" + FAMILY + "c"
    for index in range(len(text) + 1):
        units = index_to_units(text, index)
        assert units_to_index(text, units) == index


def test_a_count_inside_a_surrogate_pair_is_rejected() -> None:
    with pytest.raises(ValueError, match="split a surrogate pair"):
        units_to_index("a" + GRIN, 2)
    with pytest.raises(ValueError, match="split a surrogate pair"):
        units_to_index(GRIN * 3, 5)
    assert units_to_index(GRIN * 3, 4) == 2


def test_a_count_past_the_end_is_rejected() -> None:
    with pytest.raises(ValueError, match="past the end"):
        units_to_index("abc", 4)
    with pytest.raises(ValueError, match="past the end"):
        units_to_index(GRIN, 3)
    with pytest.raises(ValueError, match="negative"):
        units_to_index("abc", -1)
    assert units_to_index(GRIN, 2) == 1


def test_truncate_counts_units_across_astral_characters() -> None:
    doc = {"text": GRIN + "x" + GRIN + "yz"}
    assert apply_immutable(doc, [("t", ("text",), 2)]) == {"text": "x" + GRIN + "yz"}
    assert apply_immutable(doc, [("t", ("text",), 5)]) == {"text": "yz"}
    assert apply(dict(doc), [("t", ("text",), 7)]) == {"text": ""}


def test_truncate_that_splits_a_pair_raises_and_changes_nothing() -> None:
    doc = {"text": "a" + GRIN + "b"}
    with pytest.raises(PathError, match=r"op 1 \('t', \('text',\)\): 2 UTF-16 units would split"):
        apply_immutable(doc, [("a", ("text",), "!"), ("t", ("text",), 2)])
    target = dict(doc)
    with pytest.raises(PathError, match="split a surrogate pair"):
        apply(target, [("a", ("text",), "!"), ("t", ("text",), 2)])
    assert target == doc
    with pytest.raises(PathError, match="past the end"):
        apply_immutable(doc, [("t", ("text",), 5)])


def test_append_of_astral_text() -> None:
    assert apply_immutable({"t": GRIN}, [("a", ("t",), FAMILY)]) == {"t": GRIN + FAMILY}


def test_diff_emits_truncation_counts_in_units() -> None:
    before = {"text": GRIN + "ab" + GRIN + "cd"}
    after = {"text": GRIN + "cd" + FAMILY}
    ops = diff(before, after)
    assert ops == [("t", ("text",), 4), ("a", ("text",), FAMILY)]  # drops GRIN + "ab"
    assert apply_immutable(before, ops) == after


def test_rolling_window_over_emoji_round_trips_the_wire() -> None:
    enc, dec = encoder(), decoder()
    doc = {"log": ""}
    replica = doc
    for step in range(40):
        new_text = (doc["log"] + f"{step}{GRIN}")[-9:]
        if new_text and 0xDC00 <= ord(new_text[0]) <= 0xDFFF:  # never start mid-pair
            new_text = new_text[1:]
        new = {"log": new_text}
        wire = json.dumps(enc.encode(diff(doc, new)))
        replica = apply_immutable(replica, dec.decode(json.loads(wire)))
        assert replica == new
        doc = new
