"""Core configuration keys: validation and default resolution by presence (docs/design/harness.md#configuration)."""

from __future__ import annotations

from typing import Any

import pytest

from pico3.session_data.config import CORE_CONFIG, ConfigRejected, check_value, resolve_config


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("model", {"provider": "", "modelId": "m"}, "provider"),
        ("model", {"provider": "p"}, "modelId"),
        ("model", {"provider": "p", "modelId": "m", "x": 1}, "unknown fields"),
        ("thinkingLevel", "extreme", "must be one of"),
        ("selectedTools", ["ok", 3], "list of tool names"),
        ("threshold", -1, "non-negative"),
        ("keepRecent", 1.5, "non-negative integer"),
        ("retry", {"enabled": True, "maxRetries": -1, "baseDelayMs": 1}, "maxRetries"),
        ("retry", {"enabled": True, "maxRetries": 1, "baseDelayMs": float("inf")}, "strict JSON"),
        ("retry", {"enabled": True, "maxRetries": 1, "baseDelayMs": -3}, "baseDelayMs"),
        ("retry", {"enabled": 1, "maxRetries": 1, "baseDelayMs": 1}, "enabled"),
        ("steeringMode", "some", "must be one of"),
        ("followUpMode", None, "must be one of"),
    ],
)
def test_invalid_core_values_are_rejected_naming_the_key(
    key: str, value: Any, problem: str
) -> None:
    with pytest.raises(ConfigRejected, match=problem) as info:
        check_value(CORE_CONFIG[key], value)
    assert key in str(info.value)


def test_valid_values_are_stored_as_private_copies() -> None:
    tools = ["read", "bash"]
    stored = check_value(CORE_CONFIG["selectedTools"], tools)
    assert stored == tools and stored is not tools


def test_defaults_resolve_by_presence_and_model_stays_absent() -> None:
    resolved = resolve_config(CORE_CONFIG, {}, {})
    assert "model" not in resolved
    assert resolved["followUpMode"] == "one-at-a-time"
    assert resolved["keepRecent"] == 20000
    stored = resolve_config(
        CORE_CONFIG, {"threshold": 0, "model": {"provider": "p", "modelId": "m"}}, {}
    )
    assert stored["threshold"] == 0
    assert stored["model"] == {"provider": "p", "modelId": "m"}
    resolved["selectedTools"].append("x")  # defaults are fresh copies
    assert resolve_config(CORE_CONFIG, {}, {})["selectedTools"] == []
