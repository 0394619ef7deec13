"""The approval contract: decision validation (issue 7 "Bad input"), keys, and the entry point."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chord.facet_packages import installed_facet_packages, load_generation
from chord.remote import RemoteServiceError
from facets_approval.contract import (
    DEFAULT_MODE,
    PERMISSION_MODES,
    ApprovalDialogs,
    ApprovalMode,
    check_decision,
    check_mode,
    dialog_key,
    next_mode,
)


@pytest.mark.parametrize(
    "value",
    [
        {"decision": "allow"},
        {"decision": "deny"},
        {"decision": "deny", "by": "tui"},
        {"decision": "allow", "rule": "Bash(git diff:*)", "scope": "session", "by": "web"},
        {"decision": "allow", "rule": "Edit(./src/app.py)", "scope": "user"},
    ],
)
def test_well_formed_decisions_are_returned_as_fresh_copies(value: dict[str, Any]) -> None:
    checked = check_decision(value)
    assert checked == value and checked is not value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"decision": "maybe"}, "decision.decision must be 'allow' or 'deny', got 'maybe'"),
        ({"decision": None}, "decision.decision must be 'allow' or 'deny', got None"),
        ({}, "decision.decision is required"),
        ({"decision": "allow", "by": ""}, "decision.by must be a non-empty string"),
        ({"decision": "allow", "by": 7}, "decision.by must be a non-empty string, got 7"),
        (
            {"decision": "allow", "always": True},
            "unknown field(s) always (allowed: decision, by, rule, rules, scope, sandboxed, remember)",
        ),
        (
            {"decision": "deny", "rule": "Bash(ls:*)", "scope": "session"},
            "decision.rule and decision.scope apply only to 'allow'",
        ),
        (
            {"decision": "allow", "rule": "Bash(ls:*)"},
            "decision.scope must be one of session, project, user, got None",
        ),
        (
            {"decision": "allow", "scope": "user"},
            "decision.rule must be a non-empty string with a scope, got None",
        ),
        (
            {"decision": "allow", "rule": "Bash(ls:*)", "scope": "everywhere"},
            "decision.scope must be one of session, project, user, got 'everywhere'",
        ),
        ({"decision": "allow", "note": "x"}, "unknown field(s) note"),
        (["allow"], "expected an object, got list"),
        ("allow", "expected an object, got str"),
    ],
)
def test_malformed_decisions_are_invalid_values_naming_the_problem(
    value: object, message: str
) -> None:
    with pytest.raises(RemoteServiceError) as caught:
        check_decision(value)
    assert caught.value.code == "service_invalid_value"
    assert caught.value.message.startswith("Invalid approval decision: ")
    assert message in caught.value.message


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_only_allow_and_deny_are_decisions(word: str) -> None:
    if word in ("allow", "deny"):
        assert check_decision({"decision": word})["decision"] == word
    else:
        with pytest.raises(RemoteServiceError, match="must be 'allow' or 'deny'"):
            check_decision({"decision": word})


def test_dialog_keys_are_conversation_and_call() -> None:
    assert dialog_key(3, "toolu_01") == "3:toolu_01"
    assert ApprovalDialogs.id == "pi.approval-dialog" and not ApprovalDialogs.local
    with pytest.raises(ValueError, match="call id must be a non-empty str"):
        dialog_key(3, "")
    with pytest.raises(ValueError, match="conversation id must be a non-negative int"):
        dialog_key("3", "x")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("host", "ids"),
    [
        ("session", ["@pi/approval"]),
        ("tui", ["@pi/approval", "@pi/approval-mode", "@pi/approval-permissions"]),
        ("web", []),
    ],
)
def test_the_entry_point_serves_one_facet_per_host(host: str, ids: list[str]) -> None:
    # docs/design/decisions.md#d7: found through the chord.facets entry point, never imported by name
    (package,) = [p for p in installed_facet_packages() if p.distribution == "facets-approval"]
    assert package.plugin_module == "facets_approval.plugin"
    generation = load_generation(package, host)
    try:
        assert [facet.id for facet in generation.facets] == ids
    finally:
        generation.purge()


def test_modes_cycle_ask_accept_edits_plan_auto_and_around() -> None:
    assert PERMISSION_MODES == ("ask", "accept-edits", "sandbox", "plan", "auto")
    assert DEFAULT_MODE == "ask"
    assert [next_mode(m) for m in PERMISSION_MODES] == [
        "accept-edits",
        "sandbox",
        "plan",
        "auto",
        "ask",
    ]
    assert ApprovalMode.id == "approval.mode" and not ApprovalMode.local


@pytest.mark.parametrize("value", ["yolo", "", "ASK", " plan", None, 3, ["ask"], {"mode": "ask"}])
def test_a_value_that_is_not_a_mode_is_an_invalid_value_naming_it(value: object) -> None:
    with pytest.raises(RemoteServiceError) as caught:
        check_mode(value)
    assert caught.value.code == "service_invalid_value"
    assert caught.value.message == (
        f"Invalid permission mode {value!r} (expected one of ask, accept-edits, sandbox, plan, auto)"
    )
    with pytest.raises(RemoteServiceError):
        next_mode(value)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_only_the_four_names_are_modes(word: str) -> None:
    if word in PERMISSION_MODES:
        assert check_mode(word) == word
    else:
        with pytest.raises(RemoteServiceError, match="Invalid permission mode"):
            check_mode(word)


def test_the_cli_names_exactly_the_contracts_modes() -> None:
    """The app keeps a copy for argparse (it may not import a feature); the contract owns it."""
    from coding_agent.settings.permission_modes import PERMISSION_MODES as CLI_MODES
    from facets_approval.contract import PERMISSION_MODES

    assert CLI_MODES == PERMISSION_MODES


def test_a_sandboxed_decision_needs_an_allow_the_request_offered() -> None:
    offered = {"name": "bash", "sandbox": True}
    decision = {"decision": "allow", "by": "tui", "sandboxed": True}
    assert check_decision(decision, offered) == decision
    for bad, message in (
        ({"decision": "allow", "sandboxed": "yes"}, "decision.sandboxed must be a boolean"),
        ({"decision": "deny", "sandboxed": True}, "applies only to 'allow'"),
        (
            {"decision": "allow", "sandboxed": True, "rule": "Bash(x)", "scope": "session"},
            "cannot keep a rule",
        ),
    ):
        with pytest.raises(RemoteServiceError, match=re.escape(message)):
            check_decision(bad, {**offered, "rule": "Bash(x)", "scopes": ["session"]})
    with pytest.raises(RemoteServiceError, match="did not offer the sandbox"):
        check_decision(decision, {"name": "bash"})


def test_the_dialog_offers_the_sandbox_only_when_the_request_does() -> None:
    from facets_approval.tui import SANDBOXED, approval_choices, decision_for

    values = [choice.value for choice in approval_choices({"name": "bash", "sandbox": True})]
    assert values == ["allow", SANDBOXED, "deny"]
    assert SANDBOXED not in [c.value for c in approval_choices({"name": "bash"})]
    assert decision_for(SANDBOXED) == {"decision": "allow", "by": "tui", "sandboxed": True}
