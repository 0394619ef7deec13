"""MessageMemo: a context converted incrementally equals the context converted whole; and
extend_prefix, the prefix test every memo of a long conversation asks each request."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pico3.models import extend_prefix
from pico3.models.provider import MessageMemo, estimate_tokens, messages_from_json


def _raw(n: int) -> dict[str, Any]:
    if n % 5 == 0:
        return {"role": "system", "content": f"note {n}" if n % 10 else ""}
    if n % 3 == 0:
        call = {"type": "toolCall", "id": f"c{n}", "name": "ls", "arguments": {"p": n}}
        return {"role": "assistant", "content": [{"type": "text", "text": "ok"}, call]}
    return {"role": "user", "content": f"message {n}"}


def _whole(raw: list[dict[str, Any]]) -> tuple[list[Any], list[str], int]:
    history = [m for m in raw if m["role"] != "system"]
    system = [m["content"] for m in raw if m["role"] == "system" and m["content"]]
    records = messages_from_json(history)
    return records, system, estimate_tokens(records)


def test_growing_rewound_and_copied_contexts_convert_as_a_whole() -> None:
    memo = MessageMemo()
    raw = [_raw(n) for n in range(1, 60)]
    for length in (1, 2, 10, 11, 40, 59, 30, 45):  # growing, then rewound, then grown again
        assert memo.convert(raw[:length]) == _whole(raw[:length])
    copied = [dict(m) for m in raw]  # equal copies extend the remembered prefix by value
    assert memo.convert(copied) == _whole(raw)
    changed = [*raw[:20], {"role": "user", "content": "changed"}]
    assert memo.convert(changed) == _whole(changed)


def test_bad_input_raises_and_keeps_nothing_of_it() -> None:
    memo = MessageMemo()
    good = [_raw(1), _raw(2)]
    memo.convert(good)
    with pytest.raises(ValueError, match="invalid model messages"):
        memo.convert([*good, {"role": "user", "content": 5}, {"role": "system", "content": "s"}])
    assert memo.convert([*good, _raw(4)]) == _whole([*good, _raw(4)])


_values = st.lists(st.one_of(st.integers(0, 3), st.text(max_size=2), st.none()), max_size=8)


@given(seen=_values, items=_values, as_tuple=st.booleans())
def test_extend_prefix_answers_whether_items_start_with_seen_and_only_then_extends_it(
    seen: list[Any], items: list[Any], as_tuple: bool
) -> None:
    starts = items[: len(seen)] == seen and len(items) >= len(seen)
    before = list(seen)
    held = seen
    answer = extend_prefix(seen, tuple(items) if as_tuple else items)
    assert answer is starts
    assert held is seen  # extended in place, never replaced
    assert seen == (items if starts else before)


def test_extend_prefix_keeps_its_own_objects_for_a_prefix_equal_by_value() -> None:
    first = {"role": "user", "content": "one"}
    seen = [first]
    equal = {"role": "user", "content": "one"}
    new = {"role": "user", "content": "two"}
    assert extend_prefix(seen, [equal, new])
    assert seen[0] is first and seen[1] is new
    assert not extend_prefix(seen, [{"role": "user", "content": "other"}, new, new])
    assert seen == [first, new]
