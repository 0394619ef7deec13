"""Context derivation as a pure function of stored entries (docs/design/harness.md#context-derivation)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pico3.session_data.context import MISSING_RESULT_TEXT, derive_context, repair_tool_results
from pico3.storage.records import UNSET, Entry


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 0}


def entry(id: int, text: str | None = None, **fields: Any) -> Entry:
    model = [user(text)] if text is not None else UNSET
    return Entry(
        id=id, conversation_id=1, kind=fields.pop("kind", "pi.user"), model=model, **fields
    )


def call(id: str) -> dict[str, Any]:
    return {"type": "toolCall", "id": id, "name": "t", "arguments": {}}


def result(id: str) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": id,
        "toolName": "t",
        "content": [],
        "isError": False,
    }


def test_no_head_means_the_whole_transcript() -> None:
    derived = derive_context([entry(1, "a"), entry(2), entry(3, "c")])
    assert [e.id for e in derived.entries] == [1, 2, 3]
    assert derived.messages == [user("a"), user("c")]  # entry 2 has no model: invisible
    assert derived.head is None


def test_newest_head_starts_context_and_goes_first() -> None:
    summary = Entry(id=5, conversation_id=1, kind="pi.summary", model=[user("S")], head=3)
    derived = derive_context([entry(1, "a"), entry(2, "b"), entry(3, "c"), entry(4, "d"), summary])
    assert [e.id for e in derived.entries] == [5, 3, 4]
    assert derived.messages == [user("S"), user("c"), user("d")]


def test_older_heads_inside_the_range_are_dropped_from_context() -> None:
    reset = Entry(id=2, conversation_id=1, kind="pi.reset", head=2)
    handoff = Entry(id=4, conversation_id=1, kind="pi.handoff", model=[user("H")], head=2)
    derived = derive_context([entry(1, "a"), reset, entry(3, "c"), handoff, entry(5, "e")])
    assert [e.id for e in derived.entries] == [4, 3, 5]


def test_edits_fold_with_the_newest_edit_per_target_winning() -> None:
    e3 = entry(3, "c", kind="pi.system", edits=[{"target": 1, "action": "omit"}])
    e4 = entry(
        4,
        "d",
        kind="pi.system",
        edits=[
            {"target": 1, "action": "replace", "messages": [user("A")]},
            {"target": 2, "action": "omit"},
        ],
    )
    derived = derive_context([entry(1, "a"), entry(2, "b"), e3, e4])
    assert derived.messages == [user("A"), user("c"), user("d")]


def test_edits_before_the_head_are_ignored() -> None:
    early = entry(2, "b", kind="pi.system", edits=[{"target": 3, "action": "omit"}])
    head = Entry(id=3, conversation_id=1, kind="pi.handoff", model=[user("H")], head=3)
    derived = derive_context([entry(1, "a"), early, head])
    assert derived.messages == [user("H")]


def test_tool_results_are_reordered_into_call_order() -> None:
    assistant = {"role": "assistant", "content": [call("x"), call("y")], "timestamp": 7}
    fixed = repair_tool_results([assistant, result("y"), result("x"), user("next")])
    assert fixed == [assistant, result("x"), result("y"), user("next")]


def test_missing_tool_result_is_synthesized_and_never_stored() -> None:
    assistant = {"role": "assistant", "content": [call("x"), call("y")], "timestamp": 7}
    stored = [assistant, result("y")]
    fixed = repair_tool_results(stored)
    assert fixed[1]["toolCallId"] == "x"
    assert fixed[1]["isError"] is True
    assert fixed[1]["content"] == [{"type": "text", "text": MISSING_RESULT_TEXT}]
    assert fixed[1]["details"] == {"reason": "missing_after_fork"}
    assert fixed[2] == result("y")
    assert stored == [assistant, result("y")]  # input untouched


def _assistant(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [call(i) for i in ids], "timestamp": 0}


def _growing_transcript(seed: int, length: int) -> Iterator[list[Entry]]:
    """One transcript grown an entry at a time (yielded after each, the same list): tool groups
    opened and completed out of order, a missing result, edits, heads, invisible entries."""
    import random

    rng = random.Random(seed)
    transcript: list[Entry] = []
    pending: list[str] = []
    for id in range(1, length):
        roll = rng.random()
        if roll < 0.25:
            ids = [f"c{id}.{n}" for n in range(rng.randint(1, 3))]
            pending = ids[:]
            rng.shuffle(pending)
            made = Entry(id=id, conversation_id=1, kind="pi.assistant", model=[_assistant(*ids)])
        elif roll < 0.55 and pending:
            made = Entry(id=id, conversation_id=1, kind="pi.tool", model=[result(pending.pop())])
        elif roll < 0.6 and id > 1:
            target = rng.randint(1, id - 1)
            edit = {"target": target, "action": rng.choice(["omit", "replace"])}
            edit["messages"] = [user(f"r{id}")]
            made = entry(id, f"e{id}", kind="pi.system", edits=[edit])
        elif roll < 0.63:
            made = Entry(id=id, conversation_id=1, kind="pi.summary", model=[user("S")], head=id)
        elif roll < 0.65:
            made = entry(id)  # no model: invisible
        else:
            made = entry(id, f"u{id}")
            pending = pending if rng.random() < 0.5 else []
        transcript.append(made)
        yield transcript


def test_incremental_builder_matches_a_fresh_derivation_at_every_length() -> None:
    """The builder extended one entry at a time (a shared, growing transcript) derives what a
    fresh derivation of the same prefix does: open tool groups, results out of order, a
    missing result, edits and heads (which derive from scratch)."""
    from pico3.session_data.context import ContextBuilder

    builder = ContextBuilder()
    transcript: list[Entry] = []
    for transcript in _growing_transcript(15, 400):
        got = builder.derive(transcript)
        want = ContextBuilder().derive(list(transcript))
        assert [e.id for e in got.entries] == [e.id for e in want.entries]
        assert got.messages == want.messages
        assert got.head is want.head
    other = builder.derive(transcript[:50])  # another (shorter) transcript: from scratch
    assert other.messages == derive_context(transcript[:50]).messages


def test_a_shared_derivations_lists_are_only_ever_appended_to() -> None:
    """What a shared derivation hands out is read later (after a hook's await): whatever the
    derivations after it do (tool results completing a group, out of order, edits and heads
    deriving from scratch), the first ``len()`` items of every list handed out stay the very
    objects they were; a plain conversation's list is the same list, extended."""
    from pico3.session_data.context import ContextBuilder

    builder = ContextBuilder()
    handed: list[tuple[list[Any], list[Any], list[Any], list[Any]]] = []
    for transcript in _growing_transcript(45, 300):
        got = builder.derive(transcript, shared=True)
        assert got.messages == derive_context(transcript).messages
        handed.append((got.messages, list(got.messages), got.entries, list(got.entries)))
        for messages, then, entries, then_entries in handed:
            assert all(a is b for a, b in zip(messages, then, strict=False))
            assert len(messages) >= len(then)
            assert all(a is b for a, b in zip(entries, then_entries, strict=False))
    plain, lists, plain_transcript = ContextBuilder(), [], []
    for id in range(1, 30):
        plain_transcript.append(entry(id, f"u{id}"))
        lists.append(plain.derive(plain_transcript, shared=True).messages)
    assert all(one is lists[0] for one in lists)  # extended, never copied


def test_a_shared_derivation_hands_out_its_own_entries_list_and_equals_a_copied_one() -> None:
    from pico3.session_data.context import ContextBuilder

    transcript: list[Entry] = []
    shared, copied = ContextBuilder(), ContextBuilder()
    lists: list[list[Entry]] = []
    for id in range(1, 30):
        transcript.append(entry(id, f"u{id}"))
        got = shared.derive(transcript, shared=True)
        want = copied.derive(transcript)
        assert got.entries == want.entries and got.messages == want.messages
        assert got.entries is not want.entries and got.messages is not want.messages
        lists.append(got.entries)
    assert all(one is lists[0] for one in lists)  # extended, never copied
    once, again = copied.derive(transcript), copied.derive(transcript)
    assert once.entries is not again.entries  # without ``shared``: a new list every time
