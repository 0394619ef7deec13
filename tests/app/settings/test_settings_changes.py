"""The shared vocabulary of model and thinking-level switches: levels, refs, marker lines."""

from __future__ import annotations

from coding_agent.settings.changes import (
    MODEL_CHANGE,
    THINKING_CHANGE,
    THINKING_LEVELS,
    change_text,
    model_ref,
    next_thinking_level,
)


def test_the_next_level_cycles_from_xhigh_back_to_off() -> None:
    level = "off"
    seen = [level]
    for _ in THINKING_LEVELS:
        level = next_thinking_level(level)
        seen.append(level)
    assert seen == ["off", "minimal", "low", "medium", "high", "xhigh", "off"]


def test_a_level_outside_the_cycle_steps_to_off() -> None:
    assert next_thinking_level("max") == "off"  # the harness accepts it; the cycle does not
    assert next_thinking_level(None) == "off"


def test_model_ref_is_provider_slash_id_or_none() -> None:
    assert model_ref({"provider": "openai", "modelId": "qwen3:8b"}) == "openai/qwen3:8b"
    assert model_ref({"provider": "openai"}) is None
    assert model_ref("openai/x") is None


def test_change_entries_render_as_one_line_and_other_kinds_do_not() -> None:
    model = {"kind": MODEL_CHANGE, "data": {"from": "faux/a", "to": "faux/b"}}
    assert change_text(model) == "Model: faux/a → faux/b"
    thinking = {"kind": THINKING_CHANGE, "data": {"from": "off", "to": "high"}}
    assert change_text(thinking) == "Thinking: off → high"
    assert change_text({"kind": MODEL_CHANGE, "data": "junk"}) == "Model: ? → ?"
    assert change_text({"kind": "pi.user", "data": {"from": "a", "to": "b"}}) is None
