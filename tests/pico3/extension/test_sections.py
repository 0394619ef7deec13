"""System sections and the draft ``system_instructions`` hooks edit (docs/design/turn.md#model-call
"System preparation details"; docs/design/harness.md#hook-points row system_instructions)."""

from __future__ import annotations

import pytest

from pico3.turn.sections import SectionDraft, SectionRegistry, SectionState, define_section, freeze

IDENTITY = define_section("identity", lambda value: f"You are {value}.")
ENV = define_section("environment", lambda value: f"Working directory: {value['cwd']}")
CANONICAL = {
    "identity": SectionState("pico", "You are pico."),
    "environment": SectionState({"cwd": "/w"}, "Working directory: /w"),
}


def test_the_draft_starts_from_the_canonical_values_and_get_returns_copies() -> None:
    draft = SectionDraft(CANONICAL)
    assert list(draft) == ["identity", "environment"]
    value = draft.get(ENV)
    value["cwd"] = "/elsewhere"
    assert draft.get("environment") == {"cwd": "/w"}
    assert draft.get("missing") is None and "identity" in draft and "missing" not in draft
    assert draft.touched == frozenset()


def test_untouched_sections_keep_their_stored_text() -> None:
    # A renderer that changed since the text was stored does not re-render an untouched key.
    registry = {
        "identity": define_section("identity", lambda v: "NEW RENDERER"),
        "environment": ENV,
    }
    assert freeze(SectionDraft(CANONICAL), CANONICAL, registry) == CANONICAL


def test_set_keeps_position_and_new_keys_append() -> None:
    draft = SectionDraft(CANONICAL)
    rules = define_section("rules", lambda v: "\n".join(v))
    draft.set(rules, ["be brief"])
    draft.set(IDENTITY, "a helper")
    desired = freeze(draft, CANONICAL, {"identity": IDENTITY, "environment": ENV, "rules": rules})
    assert list(desired) == ["identity", "environment", "rules"]
    assert desired["identity"] == SectionState("a helper", "You are a helper.")
    assert desired["rules"] == SectionState(["be brief"], "be brief")


def test_delete_removes_a_section_and_its_wrappers() -> None:
    draft = SectionDraft(CANONICAL)
    draft.wrap(IDENTITY, str.upper)
    draft.delete(IDENTITY)
    assert freeze(draft, CANONICAL, {"identity": IDENTITY, "environment": ENV}) == {
        "environment": CANONICAL["environment"]
    }


def test_wrappers_apply_in_order_after_rendering() -> None:
    draft = SectionDraft(CANONICAL)
    draft.wrap(IDENTITY, lambda text: f"[{text}]")
    draft.wrap("identity", str.upper)
    desired = freeze(draft, CANONICAL, {"identity": IDENTITY, "environment": ENV})
    assert desired["identity"] == SectionState("pico", "[YOU ARE PICO.]")


def test_a_touched_section_that_is_not_registered_drops_out() -> None:
    draft = SectionDraft(CANONICAL)
    draft.set("identity", "someone")
    assert freeze(draft, CANONICAL, {"environment": ENV}) == {
        "environment": CANONICAL["environment"]
    }


def test_freeze_accepts_a_registry_snapshot() -> None:
    registry = SectionRegistry()
    registry.register(IDENTITY)
    draft = SectionDraft()
    draft.set(IDENTITY, "pico")
    assert freeze(draft, {}, registry.snapshot()) == {"identity": CANONICAL["identity"]}


def test_snapshot_and_restore_undo_every_kind_of_edit() -> None:
    draft = SectionDraft(CANONICAL)
    saved = draft.snapshot()
    draft.set(IDENTITY, "x")
    draft.delete(ENV)
    draft.wrap(IDENTITY, str.upper)
    draft.restore(saved)
    assert draft.values() == {"identity": "pico", "environment": {"cwd": "/w"}}
    assert draft.touched == frozenset()
    assert freeze(draft, CANONICAL, {"identity": IDENTITY, "environment": ENV}) == CANONICAL
    with pytest.raises(TypeError, match="restore takes a value returned by snapshot"):
        draft.restore({"identity": "forged"})


def test_values_must_be_strict_json_and_renderers_must_return_text() -> None:
    draft = SectionDraft()
    with pytest.raises(ValueError, match="sections"):
        draft.set(IDENTITY, float("inf"))
    assert draft.values() == {}
    draft.set("identity", 3)
    with pytest.raises(TypeError, match="render returned int"):
        freeze(draft, {}, {"identity": define_section("identity", lambda v: v)})
