"""The long-lived Tracker: flush, rebase, discard, close (docs/design/view.md#derivation, docs/design/chord.md#drafts)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chord import delta
from chord.delta.track import Tracker, track
from chord.json import JsonError


def replay(batches: list[list[Any]]) -> Any:
    """Send batches over a real wire stream (encoder → JSON text → decoder) and fold them."""
    enc, dec = delta.encoder(), delta.decoder()
    value: Any = None
    for ops in batches:
        decoded = dec.decode(json.loads(json.dumps(enc.encode(ops))))
        if decoded and decoded[0][0] == "r":
            value = decoded[0][1]
            decoded = decoded[1:]
        value = delta.apply_immutable(value, decoded)
    return value


def test_track_takes_the_root_without_copying_and_first_flush_is_a_base() -> None:
    root = {"entries": []}
    tracker = track(root)
    assert isinstance(tracker, Tracker)
    assert tracker.value is root
    assert tracker.flush() == [("r", root)]
    assert tracker.flush() == []


def test_flush_returns_the_ops_since_the_last_flush() -> None:
    tracker = track({"entries": [], "title": "a"})
    base = tracker.flush()
    tracker.draft["entries"].append({"id": 1})
    tracker.draft["title"] += "b"
    first = tracker.flush()
    assert first == [("p", ("entries",), 0, 0, [{"id": 1}]), ("a", ("title",), "b")]
    tracker.draft["entries"][0]["id"] = 2
    second = tracker.flush()
    assert second == [("s", ("entries", 0, "id"), 2)]
    assert replay([base, first, second]) == tracker.value == {"entries": [{"id": 2}], "title": "ab"}


def test_a_flushed_value_is_an_immutable_revision() -> None:
    tracker = track({"inner": {"n": 1}, "other": {"m": 1}})
    tracker.flush()
    revision = tracker.value
    inner = revision["inner"]
    tracker.draft["inner"]["n"] = 2
    assert revision == {"inner": {"n": 1}, "other": {"m": 1}}
    assert inner == {"n": 1}
    assert tracker.value["other"] is revision["other"]
    tracker.flush()
    assert tracker.value == {"inner": {"n": 2}, "other": {"m": 1}}


def test_a_handle_kept_across_flushes_keeps_working() -> None:
    tracker = track({"list": [{"n": 0}]})
    tracker.flush()
    item = tracker.draft["list"][0]
    for n in range(1, 4):
        item["n"] = n
        assert tracker.flush() == [("s", ("list", 0, "n"), n)]
    tracker.draft["list"].insert(0, "head")
    item["n"] = 9
    assert tracker.flush() == [("p", ("list",), 0, 0, ["head"]), ("s", ("list", 1, "n"), 9)]


def test_changes_that_cancel_out_flush_nothing() -> None:
    tracker = track({"n": 1})
    tracker.flush()
    tracker.draft["n"] = 2
    tracker.draft["n"] = 1
    assert tracker.flush() == []


def test_rebase_makes_the_next_flush_a_base() -> None:
    tracker = track({"n": 1})
    tracker.flush()
    tracker.draft["n"] = 2
    fresh = {"n": 10}
    tracker.rebase(fresh)
    assert tracker.value is fresh
    assert tracker.flush() == [("r", fresh)]
    tracker.draft["n"] = 11
    assert tracker.flush() == [("s", ("n",), 11)]
    with pytest.raises(JsonError):
        tracker.rebase([1])


def test_discard_drops_unflushed_mutations() -> None:
    tracker = track({"xs": [1]})
    tracker.flush()
    revision = tracker.value
    kept = tracker.draft["xs"]
    tracker.draft["xs"].append(2)
    tracker.discard()
    assert tracker.value is revision
    assert tracker.flush() == []
    kept.append(3)  # its copy was discarded with the mutations: the write is ignored
    assert tracker.flush() == []
    tracker.draft["xs"].append(4)
    assert tracker.flush() == [("p", ("xs",), 1, 0, [4])]


def test_close_revokes_the_draft() -> None:
    tracker = track([1])
    draft = tracker.draft
    tracker.close()
    with pytest.raises(TypeError):
        draft.append(2)
    with pytest.raises(TypeError):
        tracker.flush()


def test_a_list_root_uses_root_splices() -> None:
    tracker = track([])
    base = tracker.flush()
    tracker.draft.append({"a": 1})
    tracker.draft.extend([2, 3])
    ops = tracker.flush()
    assert ops == [("p", (), 0, 0, [{"a": 1}]), ("p", (), 1, 0, [2, 3])]
    assert replay([base, ops]) == [{"a": 1}, 2, 3]


def test_the_root_must_be_a_container() -> None:
    with pytest.raises(JsonError):
        track("text")
