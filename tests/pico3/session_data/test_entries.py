"""Entry kinds and the runtime write gate (docs/design/harness.md#entries)."""

from __future__ import annotations

from typing import Any

import pytest
from msgspec import UNSET

from pico3.session_data.entries import (
    EntryKind,
    EntryRejected,
    NewEntry,
    check_new_entry,
    define_entry,
)
from pico3.storage.records import Entry

USER = {"role": "user", "content": "hello", "timestamp": 0}


def test_define_entry_raises_on_pi_prefix() -> None:
    with pytest.raises(ValueError, match="reserved"):
        define_entry("pi.x")
    with pytest.raises(ValueError, match="reserved"):
        define_entry("PI.notice")


def test_define_entry_witness_recognises_its_kind() -> None:
    ci = define_entry("ci.result")
    assert isinstance(ci, EntryKind)
    assert ci.is_(Entry(id=1, conversation_id=1, kind="ci.result"))
    assert not ci.is_(Entry(id=1, conversation_id=1, kind="ci.other"))
    assert ci.is_({"kind": "ci.result"})
    assert not ci.is_(42)


@pytest.mark.parametrize("kind", ["", "has space", "9lives", 7])
def test_malformed_kind_names_are_rejected(kind: Any) -> None:
    with pytest.raises((EntryRejected, ValueError)):
        define_entry(kind)


@pytest.mark.parametrize("kind", ["pi.user", "pi.assistant", "pi.reset", "pi.summary", "pi.other"])
def test_non_core_write_of_reserved_kind_is_rejected(kind: str) -> None:
    with pytest.raises(EntryRejected, match="reserved for core"):
        check_new_entry(NewEntry(kind=kind, model=[USER]), core=False)


def test_pi_notice_is_the_one_allowed_reserved_kind() -> None:
    checked = check_new_entry(NewEntry(kind="pi.notice", model=[USER], data={"x": 1}), core=False)
    assert checked.kind == "pi.notice"
    assert checked.model == [USER]
    assert checked.model is not None and checked.model[0] is not USER  # a private copy


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (NewEntry(kind="pi.notice", model=[USER], head="self"), "head"),
        (
            NewEntry(kind="pi.notice", model=[USER], edits=[{"target": 1, "action": "omit"}]),
            "edits",
        ),
        (NewEntry(kind="pi.notice"), "exactly one user"),
        (NewEntry(kind="pi.notice", model=[USER, USER]), "exactly one user"),
        (
            NewEntry(kind="pi.notice", model=[{"role": "assistant", "content": []}]),
            "exactly one user",
        ),
    ],
)
def test_pi_notice_shape_is_enforced(entry: NewEntry, problem: str) -> None:
    with pytest.raises(EntryRejected, match=problem):
        check_new_entry(entry, core=False)


def test_head_and_edits_are_core_only() -> None:
    with pytest.raises(EntryRejected, match="head is core-only"):
        check_new_entry(NewEntry(kind="ci.x", head="self"), core=False)
    with pytest.raises(EntryRejected, match="edits is core-only"):
        check_new_entry(NewEntry(kind="ci.x", edits=[]), core=False)
    core = check_new_entry(
        NewEntry(kind="pi.reset", head="self", edits=[{"target": 3, "action": "omit"}]), core=True
    )
    assert core.head == "self"
    assert core.edits == [{"target": 3, "action": "omit"}]


def test_bad_payloads_name_the_field() -> None:
    with pytest.raises(EntryRejected, match=r"model\[0\]\.role"):
        check_new_entry(NewEntry(kind="ci.x", model=[{"role": "robot"}]), core=False)
    with pytest.raises(EntryRejected, match="data must be a JSON object"):
        check_new_entry(NewEntry(kind="ci.x", data=[1]), core=False)  # type: ignore[arg-type]
    with pytest.raises(EntryRejected, match="non-finite"):
        check_new_entry(NewEntry(kind="ci.x", data={"v": float("nan")}), core=False)
    with pytest.raises(EntryRejected, match=r"edits\[0\]\.action"):
        check_new_entry(NewEntry(kind="pi.reset", edits=[{"target": 1, "action": "x"}]), core=True)
    with pytest.raises(EntryRejected, match="unknown core entry kind"):
        check_new_entry(NewEntry(kind="pi.bogus"), core=True)


def test_a_cast_object_is_not_an_entry() -> None:
    with pytest.raises(EntryRejected, match="expected a NewEntry"):
        check_new_entry({"kind": "pi.user"}, core=False)
    assert Entry(id=1, conversation_id=1, kind="x").model is UNSET
