"""The kept copies ``before_request`` hooks are given (pico3.turn.hook_copies): whatever the
hooks and the history do, the cached path gives what copying and comparing everything gives."""

from __future__ import annotations

import copy
import json
import pickle
from itertools import count
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from pico3.turn.hook_copies import HookCopies, TrackedDict, TrackedList, reshare

_serial = count()


def _message(role: str = "user") -> dict[str, Any]:
    n = next(_serial)
    return {"role": role, "content": [{"type": "text", "text": f"m{n}"}], "n": n}


def _containers(value: Any) -> list[Any]:
    """Every dict and list inside ``value`` (itself included)."""
    if isinstance(value, dict):
        return [value, *(c for item in value.values() for c in _containers(item))]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    if isinstance(value, list):
        return [value, *(c for item in value for c in _containers(item))]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return []


def _expected(result: list[Any], shared: list[dict[str, Any]]) -> list[Any]:
    """The recomputed answer: each result message equal to the shared one at its place is it."""
    out = list(result)
    for index, (message, original) in enumerate(zip(result, shared, strict=False)):
        if message == original:
            out[index] = original
    return out


# What happens between two requests to the shared history (the transcript cache's list).
_history_steps = st.one_of(
    st.tuples(st.just("grow"), st.integers(1, 3)),
    st.tuples(st.just("rewind"), st.integers(0, 6)),  # drop the newest n, then grow
    st.tuples(st.just("compact"), st.integers(0, 6)),  # a new object at an index (same value)
    st.tuples(st.just("hot_reload"), st.just(0)),  # a new memo (the hook module reloaded)
)
# What a hook does with what it is given.
_hook_steps = st.lists(
    st.one_of(
        st.tuples(st.just("set"), st.integers(0, 50)),
        st.tuples(st.just("append_block"), st.integers(0, 50)),
        st.tuples(st.just("revert"), st.integers(0, 50)),  # changed, then set back
        st.tuples(st.just("old_copy"), st.integers(0, 50)),  # a copy kept from an earlier call
        st.tuples(st.just("swap"), st.integers(0, 50)),
        st.tuples(st.just("insert"), st.integers(0, 50)),
        st.tuples(st.just("replace_list"), st.just(0)),  # returns a new list of the same copies
    ),
    max_size=4,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_history_steps, _hook_steps), min_size=1, max_size=12))
def test_kept_copies_and_resharing_equal_copying_and_comparing_everything(
    steps: list[tuple[tuple[str, int], list[tuple[str, int]]]],
) -> None:
    shared: list[dict[str, Any]] = [_message("system"), _message()]
    memo = HookCopies()
    held: list[Any] = []  # copies hooks kept from earlier calls
    for (step, n), hook in steps:
        if step == "grow":
            shared = shared + [_message("assistant" if i % 2 else "user") for i in range(n)]
        elif step == "rewind":
            shared = [*shared[: max(0, len(shared) - n)], _message()]
        elif step == "compact" and shared:
            index = n % len(shared)
            shared = list(shared)
            shared[index] = copy.deepcopy(shared[index])
        elif step == "hot_reload":
            memo = HookCopies()
        snapshot = copy.deepcopy(shared)
        given_copies = memo.copies(shared)
        assert given_copies == shared
        ours = {id(c) for c in given_copies for c in _containers(c)}
        assert not ours & {id(c) for m in shared for c in _containers(m)}
        result = given_copies
        for action, at in hook:
            if action == "old_copy" and held:
                target = held[at % len(held)]
                target["n"] = -1
                continue
            if not result:
                continue
            index = at % len(result)
            message = result[index]
            if action == "set" and isinstance(message, dict):
                message["extra"] = at
            elif action == "append_block" and isinstance(message, dict):
                message["content"].append({"type": "text", "text": "added"})
            elif action == "revert" and isinstance(message, dict):
                before = message["n"]
                message["n"] = "changed"
                message["n"] = before
            elif action == "swap":
                result[0], result[index] = result[index], result[0]
            elif action == "insert":
                result.insert(index, _message())  # made by the hook
            elif action == "replace_list":
                result = list(result)
        held.extend(given_copies[-2:])
        expected = _expected(result, shared)
        got = reshare(list(result), shared, memo)
        assert len(got) == len(expected)
        assert all(g is e for g, e in zip(got, expected, strict=True))
        assert shared == snapshot  # the shared messages are never changed


def test_a_changed_copy_is_given_fresh_and_the_others_again() -> None:
    shared = [_message(), _message("assistant")]
    memo = HookCopies()
    first = memo.copies(shared)
    first[0]["content"][0]["text"] = "changed by a hook"
    second = memo.copies(shared)
    assert second == shared
    assert second[0] is not first[0]
    assert second[1] is first[1]


def test_the_list_given_is_the_memos_own_and_a_change_to_it_even_later_is_noticed() -> None:
    """A late turn is not one more copy of the whole history: the hooks get the memo's list,
    extended by the next call. A hook that reorders it, then or after its call, only makes the
    next call copy everything afresh; nothing it did reaches the next hooks or the request."""
    shared = [_message(), _message("assistant")]
    memo = HookCopies()
    first = memo.copies(shared)
    shared = [*shared, _message()]
    second = memo.copies(shared)
    assert second is first and second == shared  # extended, not copied
    assert reshare(second, shared, memo) is shared
    kept_by_a_hook = second
    kept_by_a_hook.reverse()  # after its call: noticed all the same
    shared = [*shared, _message("assistant")]
    third = memo.copies(shared)
    assert third is not kept_by_a_hook and third == shared
    assert not {id(m) for m in third} & {id(m) for m in kept_by_a_hook}  # fresh copies
    assert reshare(third, shared, memo) is shared
    assert all(
        got is want for got, want in zip(reshare(list(third), shared, memo), shared, strict=True)
    )


def test_an_untouched_result_is_the_shared_messages() -> None:
    shared = [_message(), _message("assistant"), _message()]
    memo = HookCopies()
    given_copies = memo.copies(shared)
    got = reshare(given_copies, shared, memo)
    assert all(g is s for g, s in zip(got, shared, strict=True))
    grown = [*shared, _message("assistant")]
    again = memo.copies(grown)
    assert again[:3] == given_copies[:3]
    assert all(a is g for a, g in zip(again, given_copies, strict=False))


def test_reshare_gives_the_shared_list_itself_or_a_new_one_and_leaves_the_hooks_alone() -> None:
    shared = [_message(), _message("assistant"), _message()]
    memo = HookCopies()
    assert reshare(memo.copies(shared), shared, memo) is shared  # nothing changed: no copy
    given_copies = memo.copies([*shared, _message()])
    grown = [*shared, given_copies[3]]
    given_copies[1]["extra"] = 1  # a hook changed one copy, and returns the list it was given
    before = list(given_copies)
    got = reshare(given_copies, grown, memo)
    assert got is not given_copies and given_copies == before
    assert all(a is b for a, b in zip(given_copies, before, strict=True))
    assert got[0] is grown[0] and got[2] is grown[2] and got[1] is given_copies[1]


def test_a_grown_history_keeps_its_kept_copies_across_many_calls() -> None:
    memo = HookCopies()
    shared: list[dict[str, Any]] = []
    first: list[Any] = []
    for turn in range(30):
        shared = [*shared, _message(), _message("assistant")]
        copies = memo.copies(shared)
        assert copies == shared
        if turn == 0:
            first = copies
        assert copies[0] is first[0] and copies[1] is first[1]
        assert reshare(copies, shared, memo) is shared


def test_tracked_copies_encode_and_copy_as_plain_containers() -> None:
    memo = HookCopies()
    (message,) = memo.copies([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    assert isinstance(message, TrackedDict)
    assert isinstance(message["content"], TrackedList)
    plain = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    assert json.loads(json.dumps(message)) == plain
    assert msgspec.json.decode(msgspec.json.encode(message)) == plain
    for copied in (copy.deepcopy(message), pickle.loads(pickle.dumps(message))):
        assert type(copied) is dict
        assert type(copied["content"]) is list
        assert copied == plain
    assert type(copy.copy(message)) is dict


def test_every_mutating_method_marks_the_copy_changed() -> None:
    changes = [
        lambda m: m.__setitem__("k", 1),
        lambda m: m.__delitem__("role"),
        lambda m: m.__ior__({"k": 1}),
        lambda m: m.clear(),
        lambda m: m.pop("role"),
        lambda m: m.popitem(),
        lambda m: m.setdefault("k", 1),
        lambda m: m.update(k=1),
        lambda m: m["content"].__setitem__(0, "x"),
        lambda m: m["content"].__delitem__(0),
        lambda m: m["content"].__iadd__(["x"]),
        lambda m: m["content"].__imul__(2),
        lambda m: m["content"].append("x"),
        lambda m: m["content"].extend(["x"]),
        lambda m: m["content"].insert(0, "x"),
        lambda m: m["content"].pop(),
        lambda m: m["content"].remove(m["content"][0]),
        lambda m: m["content"].clear(),
        lambda m: m["content"].reverse(),
        lambda m: m["content"].sort(key=str),
        lambda m: m["content"][0].__setitem__("text", "x"),
    ]
    for change in changes:
        shared = [{"role": "user", "content": [{"type": "text", "text": "hi"}, "b"]}]
        memo = HookCopies()
        (given_copy,) = memo.copies(shared)
        change(given_copy)
        (again,) = memo.copies(shared)
        assert again is not given_copy, change
        assert again == shared[0]
