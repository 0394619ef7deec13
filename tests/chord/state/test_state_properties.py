"""Properties: recorded ops replay over the wire to the same value as plain mutation.

Random mutation sequences run twice: through a draft (``track`` or ``change``) and on a plain
deep copy. The results must be equal, and the recorded ops, sent through
``encoder → json.dumps → json.loads → decoder → apply_immutable``, must rebuild the same value.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chord import delta
from chord.context import BACKGROUND
from chord.delta.track import track
from chord.json import equal_json
from chord.state import replicated_state

KEYS = st.sampled_from(["a", "b", "c", "constructor", "ü", "😀"])
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-1000, 1000)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(max_size=6)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)
DOCS = st.dictionaries(KEYS, VALUES, max_size=4)


def containers(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    items = value.items() if type(value) is dict else enumerate(value)
    for key, item in items:
        if type(item) in (dict, list):
            found.extend(containers(item, (*path, key)))
    return found


def walk(root: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        root = root[key]
    return root


def mutate_both(data: st.DataObject, draft: Any, plain: Any, steps: int) -> None:
    """Apply the same random mutations to a draft and to a plain value."""
    for _ in range(steps):
        path = data.draw(st.sampled_from(containers(plain)))
        target, handle = walk(plain, path), walk(draft, path)
        if type(target) is dict:
            kind = data.draw(st.sampled_from(["set", "del", "string", "clear", "pop"]))
            key = data.draw(KEYS)
            if kind == "set":
                value = data.draw(VALUES)
                target[key] = copy.deepcopy(value)
                handle[key] = value
            elif kind == "del" and key in target:
                del target[key]
                del handle[key]
            elif kind == "pop" and key in target:
                assert equal_json(handle.pop(key), target.pop(key))
            elif kind == "string" and type(target.get(key)) is str:
                old = target[key]
                cut = data.draw(st.integers(0, len(old)))
                new = old[cut:] + data.draw(st.text(max_size=4))
                target[key] = new
                handle[key] = new
            elif kind == "clear":
                target.clear()
                handle.clear()
        else:
            kind = data.draw(
                st.sampled_from(
                    ["append", "insert", "pop", "set", "slice", "del", "reverse", "sort", "extend"]
                )
            )
            n = len(target)
            if kind == "append":
                value = data.draw(VALUES)
                target.append(copy.deepcopy(value))
                handle.append(value)
            elif kind == "extend":
                values = data.draw(st.lists(VALUES, max_size=3))
                target.extend(copy.deepcopy(values))
                handle += values
            elif kind == "insert":
                index = data.draw(st.integers(-n - 1, n + 1))
                value = data.draw(VALUES)
                target.insert(index, copy.deepcopy(value))
                handle.insert(index, value)
            elif kind == "pop" and n:
                index = data.draw(st.integers(-n, n - 1))
                assert equal_json(handle.pop(index), target.pop(index))
            elif kind == "set" and n:
                index = data.draw(st.integers(0, n - 1))
                value = data.draw(VALUES)
                target[index] = copy.deepcopy(value)
                handle[index] = value
            elif kind == "slice":
                start = data.draw(st.integers(0, n))
                stop = data.draw(st.integers(start, n))
                values = data.draw(st.lists(VALUES, max_size=3))
                target[start:stop] = copy.deepcopy(values)
                handle[start:stop] = values
            elif kind == "del" and n:
                start = data.draw(st.integers(0, n))
                step = data.draw(st.integers(1, 2))
                del target[start::step]
                del handle[start::step]
            elif kind == "reverse":
                target.reverse()
                handle.reverse()
            elif kind == "sort":
                order = [json.dumps(v, sort_keys=True) for v in target]
                target[:] = [
                    v for _, v in sorted(zip(order, target, strict=True), key=lambda p: p[0])
                ]
                handle.sort(
                    key=lambda v: json.dumps(
                        v.to_json() if hasattr(v, "to_json") else v, sort_keys=True
                    )
                )


def wire_replay(base: Any, batches: list[list[Any]]) -> Any:
    enc, dec = delta.encoder(), delta.decoder()
    value = base
    for ops in batches:
        value = delta.apply_immutable(value, dec.decode(json.loads(json.dumps(enc.encode(ops)))))
    return value


@settings(max_examples=200, deadline=None)
@given(st.data(), DOCS)
def test_tracked_ops_replay_to_the_same_value_as_plain_mutation(
    data: st.DataObject, doc: dict[str, Any]
) -> None:
    base = copy.deepcopy(doc)
    plain = copy.deepcopy(doc)
    tracker = track(doc)
    batches = [tracker.flush()]
    for _ in range(data.draw(st.integers(1, 3))):
        mutate_both(data, tracker.draft, plain, data.draw(st.integers(0, 6)))
        batches.append(tracker.flush())
        assert equal_json(tracker.value, plain)
    assert equal_json(doc, base), "a flushed revision was mutated"
    assert equal_json(wire_replay(None, batches), plain)


@settings(max_examples=200, deadline=None)
@given(st.data(), DOCS)
def test_change_ops_replay_to_the_same_value_as_plain_mutation(
    data: st.DataObject, doc: dict[str, Any]
) -> None:
    state = replicated_state(doc)
    revisions = [(state.value, copy.deepcopy(state.value))]
    plain = copy.deepcopy(doc)
    batches: list[list[Any]] = []
    state.add_source_listener(lambda ops, seq, ctx: batches.append(list(ops)))
    for _ in range(data.draw(st.integers(1, 3))):
        steps = data.draw(st.integers(0, 6))
        state.change(BACKGROUND, lambda d, steps=steps: mutate_both(data, d, plain, steps))
        assert equal_json(state.value, plain)
        assert state.sequence == len(batches)
        revisions.append((state.value, copy.deepcopy(state.value)))
    for revision, snapshot in revisions:
        assert equal_json(revision, snapshot), "a published revision was mutated"
    assert equal_json(wire_replay(doc, batches), plain)
    assert len(batches) == state.sequence
