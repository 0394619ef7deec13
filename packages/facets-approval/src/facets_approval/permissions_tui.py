"""``/permissions``: every permission rule with its source, and removing one.

:data:`permissions_tui_facet` (``@pi/approval-permissions``) uses
:data:`~.contract.ApprovalRulesService`. ``/permissions`` asks the session to read every source
again (``refresh``), then shows a picker: one line per rule — its kind, the rule, where it
lives (``~/.config/coding-agent/config.toml``, a Claude Code settings file, "this session") —
and below them the problems found (an invalid rule with its file and why). Choosing a rule asks
to confirm, then ``remove`` deletes it where it lives (the session's storage, or the file,
comments kept); Escape closes without a change.

Problems are also shown once as a notice when this presentation first sees them (the session's
log has each once too): a rule that does not parse is never silently ignored.

Textual is imported only inside the facet and the handler: a session worker loading this package imports every
module but ``tui`` (chord's generation loader), and a worker never imports Textual.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chord import Context, Delivery, FacetEnvironment, RemoteServiceError, define_facet

from .contract import ApprovalRulesService, RuleEntry

if TYPE_CHECKING:
    from chord.textual import Arguments, Choice, CommandOutcome, TuiService

__all__ = [
    "PermissionsTarget",
    "describe_source",
    "permissions",
    "permissions_tui_facet",
    "rule_choices",
]

REMOVE = "remove"
KEEP = "keep"


def describe_source(source: str) -> str:
    """Where a rule lives, for a person: ``this session``, or the file with ``~`` for home."""
    if source == "session":
        return "this session"
    if source == "autoAllow":
        return "this conversation (an older 'always allow')"
    home = os.path.expanduser("~")
    if home not in ("", "/") and source.startswith(home.rstrip("/") + "/"):
        return "~" + source[len(home.rstrip("/")) :]
    return source


def rule_choices(rules: list[RuleEntry]) -> list[Choice]:
    """One option per rule (value: its index), deny first, then ask, then allow."""
    from chord.textual import Choice

    order = {"deny": 0, "ask": 1, "allow": 2}
    ranked = sorted(range(len(rules)), key=lambda i: (order.get(rules[i]["kind"], 3), i))
    return [
        Choice(
            str(i),
            f"{rules[i]['kind']:<5}  {rules[i]['rule']}  — {describe_source(rules[i]['source'])}",
        )
        for i in ranked
    ]


def _problems_text(problems: list[str]) -> str:
    if not problems:
        return ""
    return "Problems (these rules do not apply):\n" + "\n".join(f"• {p}" for p in problems)


@dataclass(frozen=True, slots=True)
class PermissionsTarget:
    """What ``/permissions`` acts on: the TUI and the session's rules service."""

    tui: TuiService
    rules: Any  # ApprovalRulesService: a remote service handle


async def permissions(target: PermissionsTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/permissions``: list the rules (read afresh) with their sources; remove the one
    chosen, after a confirmation."""
    from chord.textual import Choice, CommandError

    state: Any = await target.rules.refresh(ctx)
    rules: list[RuleEntry] = list(state.get("rules") or [])
    problems: list[str] = list(state.get("problems") or [])
    if not rules:
        message = "No permission rules. Add allow/ask/deny lists under [permissions] in config.toml"
        return "\n".join([message, _problems_text(problems)]).strip()
    modal = await target.tui.acquire_modal(ctx)
    try:
        choice = await modal.choose(
            f"Permission rules ({len(rules)}): Enter removes the chosen one",
            rule_choices(rules),
            body=_problems_text(problems),
            hint="deny beats ask beats allow · esc closes",
        )
        if choice is None:
            return None
        entry = rules[int(choice)]
        where = describe_source(entry["source"])
        confirm = await modal.choose(
            f"Remove the {entry['kind']} rule {entry['rule']}?",
            [Choice(REMOVE, f"Remove it from {where}"), Choice(KEEP, "Keep it")],
        )
    finally:
        modal.close()
    if confirm != REMOVE:
        return None
    try:
        await target.rules.remove(entry, ctx)
    except RemoteServiceError as error:
        raise CommandError(f"Not removed: {error.message}") from error
    return f"Removed the {entry['kind']} rule {entry['rule']} from {where}"


@define_facet("@pi/approval-permissions")
def permissions_tui_facet(env: FacetEnvironment) -> None:
    """``/permissions`` lists the rules and removes one; new problems show as a notice."""
    from chord.textual import Command, Tui, register_commands

    tui = env.use(Tui)
    rules_service = env.use(ApprovalRulesService)
    shown: set[str] = set()
    commands = (
        Command(
            "permissions", "List the permission rules with their sources; remove one", permissions
        ),
    )

    def notify_problems(value: Any, _ctx: Context, _delivery: Delivery) -> None:
        problems = value.get("problems") if isinstance(value, dict) else None
        for problem in problems if isinstance(problems, list) else []:
            if isinstance(problem, str) and problem not in shown:
                shown.add(problem)
                tui.notify(f"Permission rules: {problem}", severity="warning")

    def activate() -> None:
        env.own(rules_service.state.subscribe(notify_problems))
        env.own(register_commands(tui, commands, PermissionsTarget(tui, rules_service)))

    env.on_activate(activate)
