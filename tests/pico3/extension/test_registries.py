"""Tool and section registration: unique live names, exact idempotent removal, revisions
(docs/design/reload.md#registrations, docs/design/harness.md#public-api)."""

from __future__ import annotations

from typing import Any

import pytest

from chord.context import Context
from pico3.registry import DuplicateRegistration, NamedRegistry
from pico3.tools import ToolApi, ToolDeclaration, ToolRegistry, ToolResult
from pico3.turn.sections import SectionRegistry, SystemSection, define_section

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


async def _echo(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
    return ToolResult.text(args["q"])


def tool(name: str = "echo", **changes: Any) -> ToolDeclaration:
    return ToolDeclaration(
        name=name,
        description=changes.pop("description", "Echo."),
        parameters=changes.pop("parameters", SCHEMA),
        execute=_echo,
        **changes,
    )


def test_register_returns_a_remover_and_bumps_the_revision() -> None:
    registry = ToolRegistry()
    assert registry.revision == 0
    remove = registry.register(tool())
    assert registry.revision == 1
    assert registry.get("echo") is not None and "echo" in registry
    remove()
    assert registry.revision == 2
    assert registry.get("echo") is None and not remove.alive


def test_duplicate_live_name_is_rejected_and_nothing_changes() -> None:
    registry = ToolRegistry()
    first = tool()
    registry.register(first)
    with pytest.raises(DuplicateRegistration, match="'echo' is already registered"):
        registry.register(tool())
    assert registry.get("echo") is first
    assert registry.revision == 1


def test_unregister_twice_is_harmless_and_never_removes_a_newer_registration() -> None:
    registry = ToolRegistry()
    old = registry.register(tool())
    old()
    replacement = tool()
    registry.register(replacement)
    revision = registry.revision
    old()  # the old generation's disposal runs again
    assert registry.get("echo") is replacement
    assert registry.revision == revision


def test_re_register_after_unregister_bumps_again() -> None:
    registry = ToolRegistry()
    registry.register(tool())()
    registry.register(tool())
    assert registry.revision == 3


def test_snapshot_keeps_the_declaration_it_captured() -> None:
    # An in-flight invocation keeps its captured declaration (docs/design/reload.md#registrations).
    registry = ToolRegistry()
    captured = tool()
    remove = registry.register(captured)
    snapshot = registry.snapshot()
    remove()
    registry.register(tool(description="v2"))
    assert snapshot.get("echo") is captured
    assert snapshot.revision == 1 and registry.revision == 3


def test_registry_rejects_something_that_is_not_a_declaration() -> None:
    registry = ToolRegistry()
    with pytest.raises(TypeError, match="expected a ToolDeclaration"):
        registry.register({"name": "echo"})  # type: ignore[arg-type]
    assert registry.revision == 0


@pytest.mark.parametrize("name", ["", "has space", "dots.not.allowed", "x" * 65, "é"])
def test_tool_names_must_be_provider_safe(name: str) -> None:
    with pytest.raises(ValueError, match="tool name"):
        tool(name)


def test_tool_replay_and_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="replay must be"):
        tool(replay="sometimes")
    from pico3.tools import OutputBounds

    with pytest.raises(ValueError, match="max_bytes must be a positive int"):
        OutputBounds(max_bytes=0)
    with pytest.raises(ValueError, match="retain must be"):
        OutputBounds(retain="middle")  # type: ignore[arg-type]


def test_sections_share_the_registry_rules() -> None:
    registry = SectionRegistry()
    section = define_section("identity", lambda value: str(value))
    remove = registry.register(section)
    with pytest.raises(DuplicateRegistration):
        registry.register(SystemSection("identity", str))
    remove()
    remove()
    assert registry.revision == 2 and registry.get("identity") is None


@pytest.mark.parametrize("key", ["pi.identity", "PI.x", "", "1abc", "has space"])
def test_section_keys_are_validated(key: str) -> None:
    with pytest.raises(ValueError, match="section key"):
        define_section(key, str)


def test_names_lists_live_items_in_registration_order() -> None:
    registry: NamedRegistry[str] = NamedRegistry("thing", lambda item: item)
    registry.register("b")
    remove_a = registry.register("a")
    registry.register("c")
    remove_a()
    assert registry.names() == ["b", "c"]
    assert list(registry) == ["b", "c"] and len(registry) == 2
