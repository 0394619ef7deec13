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

Textual is imported only inside the facet: a session worker loading this package imports every
module but ``tui`` (chord's generation loader), and a worker never imports Textual.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from chord import Context, Delivery, FacetEnvironment, RemoteServiceError, define_facet

from .contract import ApprovalRulesService, RuleEntry

if TYPE_CHECKING:
    from chord.textual import Choice

__all__ = ["describe_source", "permissions_tui_facet", "rule_choices"]

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


@define_facet("@pi/approval-permissions")
def permissions_tui_facet(env: FacetEnvironment) -> None:
    """``/permissions`` lists the rules and removes one; new problems show as a notice."""
    from chord.textual import Choice, Tui

    tui = env.use(Tui)
    rules_service = env.use(ApprovalRulesService)
    shown: set[str] = set()

    def notify_problems(value: Any, _ctx: Context, _delivery: Delivery) -> None:
        problems = value.get("problems") if isinstance(value, dict) else None
        for problem in problems if isinstance(problems, list) else []:
            if isinstance(problem, str) and problem not in shown:
                shown.add(problem)
                tui.notify(f"Permission rules: {problem}", severity="warning")

    async def command(args: str, ctx: Context) -> None:
        del args
        state: Any = await rules_service.refresh(ctx)
        rules: list[RuleEntry] = list(state.get("rules") or [])
        problems: list[str] = list(state.get("problems") or [])
        if not rules:
            message = (
                "No permission rules. Add allow/ask/deny lists under [permissions] in config.toml"
            )
            tui.notify("\n".join([message, _problems_text(problems)]).strip())
            return
        modal = await tui.acquire_modal(ctx)
        try:
            choice = await modal.choose(
                f"Permission rules ({len(rules)}): Enter removes the chosen one",
                rule_choices(rules),
                body=_problems_text(problems),
                hint="deny beats ask beats allow · esc closes",
            )
            if choice is None:
                return
            entry = rules[int(choice)]
            where = describe_source(entry["source"])
            confirm = await modal.choose(
                f"Remove the {entry['kind']} rule {entry['rule']}?",
                [Choice(REMOVE, f"Remove it from {where}"), Choice(KEEP, "Keep it")],
            )
        finally:
            modal.close()
        if confirm != REMOVE:
            return
        try:
            await rules_service.remove(entry, ctx)
        except RemoteServiceError as error:
            tui.notify(f"Not removed: {error.message}", severity="error")
            return
        tui.notify(f"Removed the {entry['kind']} rule {entry['rule']} from {where}")

    def activate() -> None:
        env.own(rules_service.state.subscribe(notify_problems))
        env.own(
            tui.register_command(
                "permissions", "List the permission rules with their sources; remove one", command
            )
        )

    env.on_activate(activate)
