"""``/permissions``: every permission rule with its source; adding one, removing one.

:data:`permissions_tui_facet` (``@pi/approval-permissions``) uses
:data:`~.contract.ApprovalRulesService`. ``/permissions`` asks the session to read every source
again (``refresh``), then shows a picker: first *Add a rule…* (key 1), then one line per rule —
its kind, the rule, where it lives (``~/.config/coding-agent/config.toml``, a Claude Code
settings file, "this session") — and below them the problems found (an invalid rule with its
file and why). Choosing a rule asks to confirm, then ``remove`` deletes it where it lives (the
session's storage, or the file, comments kept); Escape closes without a change. After the rules
come the repositories whose git configuration was allowed "while it stays as it is"
(:mod:`.git_approvals`, :func:`repository_choices`): choosing one shows what it runs and, once
confirmed, ``forget_repository`` forgets it (its git commands ask again).

*Add a rule…* asks for the kind (allow, ask, deny), the rule (typed; the session parses it with
``check_rule``, and a rule that does not parse is asked for again with the parser's message,
nothing saved) and where to keep it (:func:`scope_choices`: this project's ``config.toml``
first, as Claude Code's add dialog offers the project's settings first, only in a trusted
project; this session; your ``config.toml``). An allow rule for a whole tool that asks — all of
bash (``Bash``), every edit (``Edit``, ``Write``), a whole MCP server (``mcp__github``), any
fetch (``WebFetch`` without a domain) — is added only after a second question that names what
it allows, "No" first (:data:`~.contract.RuleCheck` ``widens``).
``/permissions allow|ask|deny RULE [--session|--project|--user]`` does the same in one line
(:func:`parse_addition`; no flag: the project when it is trusted, else the session) and says
where the rule went: ``Added allow rule Bash(npm run test:*) to
~/.config/coding-agent/config.toml``. The session refuses a rule already at that scope.

Problems are also shown once as a notice when this presentation first sees them (the session's
log has each once too): a rule that does not parse is never silently ignored. The notes about
Claude Code settings this agent does not read (``statusLine``, ``env``, ``model``…) that arrive
together are folded into one notice (:func:`problem_notices`): ``4 settings from
~/.claude/settings.json are not used here: statusLine, env, model, alwaysThinkingEnabled —
/permissions or `coding-agent config` lists why``; each full line stays in ``/permissions``,
``coding-agent config`` and the session's log. A note that concerns safety (``sandbox``: bash is
not sandboxed; ``permissions.*``: a mode or restriction not taken) and every other problem (a
rule that does not apply) keep a notice of their own; a single note is shown whole, as before.

Textual is imported only inside the facet and the handler: a session worker loading this package imports every
module but ``tui`` (chord's generation loader), and a worker never imports Textual.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chord import Context, Delivery, FacetEnvironment, RemoteServiceError, define_facet

from .contract import ApprovalRulesService, RuleAddition, RuleCheck, RuleEntry, RuleScope

if TYPE_CHECKING:
    from chord.textual import Arguments, Choice, CommandOutcome, Modal, TuiService

__all__ = [
    "ADD",
    "SCOPE_FLAGS",
    "PermissionsTarget",
    "describe_source",
    "parse_addition",
    "permissions",
    "permissions_tui_facet",
    "problem_notices",
    "repository_choices",
    "rule_choices",
    "scope_choices",
]

REMOVE = "remove"
KEEP = "keep"
ADD = "add"
"""The value of the listing's first entry, *Add a rule…*."""
GIT = "git:"
"""The value prefix of an approved repository's entry (:func:`repository_choices`)."""
KINDS = ("allow", "ask", "deny")
KIND_LABELS = {
    "allow": "allow — runs without asking (deny and ask rules still win)",
    "ask": "ask — always asks first, even in auto mode",
    "deny": "deny — blocked, whatever else would allow it",
}
SCOPE_FLAGS: dict[str, RuleScope] = {
    "--session": "session",
    "--project": "project",
    "--user": "user",
}
"""The text form's flags and the scope each names."""
USAGE = "/permissions allow|ask|deny RULE [--session|--project|--user]"
RULE_HELP = (
    "Type the rule, e.g. Bash(npm run test:*), Read(./secrets/**), "
    "WebFetch(domain:example.com) or mcp__github__get_issue, then Enter."
)


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


def repository_choices(repositories: list[Any]) -> list[Choice]:
    """One option per repository whose git configuration a person allowed as it is (value:
    ``git:<index>``)."""
    from chord.textual import Choice

    return [
        Choice(
            f"{GIT}{i}",
            f"git    {r.get('gitDir')}  — its git configuration as allowed on "
            f"{str(r.get('at', ''))[:10]} ({len(r.get('programs') or [])} program(s))",
        )
        for i, r in enumerate(repositories)
        if isinstance(r, dict)
    ]


def _problems_text(problems: list[str]) -> str:
    """``/permissions``' text above the rules: the problems of rules (an invalid one, a file
    that cannot be read, a safety setting not honoured), then, apart, the Claude Code settings
    this agent does not read (``model``, ``statusLine``…: no rule, so not a rule's problem)."""
    unread = [p for p in problems if _foldable(p) is not None]
    other = [p for p in problems if p not in unread]
    parts: list[str] = []
    if other:
        parts.append("Problems (these rules do not apply):\n" + "\n".join(f"• {p}" for p in other))
    if unread:
        parts.append(
            "Settings not used here (no permission rule; what to do instead):\n"
            + "\n".join(f"• {p}" for p in unread)
        )
    return "\n\n".join(parts)


def scope_choices(scopes: list[RuleScope]) -> list[Choice]:
    """Where an added rule can be kept, the project first (Claude Code's add dialog offers the
    project's settings first); only the scopes the session offers now (``project`` only in a
    trusted project)."""
    from chord.textual import Choice

    labels: dict[RuleScope, str] = {
        "project": "This project (.coding-agent/config.toml)",
        "session": "This session only (kept with the conversation, rewound with it)",
        "user": "Everywhere (your config.toml)",
    }
    return [Choice(s, labels[s]) for s in ("project", "session", "user") if s in scopes]


def parse_addition(text: str) -> tuple[str, str, RuleScope | None]:
    """``allow|ask|deny RULE [--session|--project|--user]`` → (kind, rule, scope or ``None``
    for the default). The flag is the last word; the rule is everything between (it may hold
    spaces: ``Bash(npm run test:*)``). Raises ``CommandError`` with the usage."""
    from chord.textual import CommandError

    kind, _, rest = text.strip().partition(" ")
    words = rest.split()
    scope: RuleScope | None = None
    if words and words[-1].startswith("--"):
        if words[-1] not in SCOPE_FLAGS:
            raise CommandError(f"/permissions: unknown option {words[-1]}: {USAGE}")
        scope = SCOPE_FLAGS[words[-1]]
        rest = rest.rstrip()[: -len(words[-1])]
    if kind not in KINDS or not rest.strip():
        raise CommandError(f"/permissions: to add a rule, {USAGE}")
    return kind, rest.strip(), scope


@dataclass(frozen=True, slots=True)
class PermissionsTarget:
    """What ``/permissions`` acts on: the TUI and the session's rules service."""

    tui: TuiService
    rules: Any  # ApprovalRulesService: a remote service handle


def _added(entry: RuleEntry) -> str:
    return f"Added {entry['kind']} rule {entry['rule']} to {describe_source(entry['source'])}"


async def _confirm_wide(modal: Modal, found: RuleCheck) -> bool:
    """Ask before adding an allow rule for a whole tool that asks (all of bash, every edit, a
    whole MCP server...), naming what it allows; the safe answer is first."""
    from chord.textual import Choice

    allows = found.get("allows") or "a whole tool"
    runs = found.get("runs") or "every call of it runs"
    answer = await modal.choose(
        f"Allow {allows} with {found['rule']}?",
        [
            Choice(KEEP, "No, do not add it"),
            Choice(ADD, f"Yes, add {found['rule']}: {runs} without asking"),
        ],
        body=found["widens"] + ".",
        hint="esc does not add it",
    )
    return answer == ADD


async def _save(target: PermissionsTarget, addition: RuleAddition, ctx: Context) -> str:
    from chord.textual import CommandError

    try:
        entry: RuleEntry = await target.rules.add(addition, ctx)
    except RemoteServiceError as error:
        raise CommandError(error.message) from error
    return _added(entry)


async def _add_from_text(target: PermissionsTarget, text: str, ctx: Context) -> CommandOutcome:
    """``/permissions allow|ask|deny RULE [--session|--project|--user]``."""
    from chord.textual import CommandError

    kind, rule, scope = parse_addition(text)
    try:
        found: RuleCheck = await target.rules.check_rule(rule, kind, ctx)
    except RemoteServiceError as error:
        raise CommandError(f"Not added: {error.message}") from error
    if scope is None:
        scope = "project" if "project" in found["scopes"] else "session"
    addition: RuleAddition = {"rule": found["rule"], "kind": found["kind"], "scope": scope}
    if found["widens"]:
        modal = await target.tui.acquire_modal(ctx)
        try:
            confirmed = await _confirm_wide(modal, found)
        finally:
            modal.close()
        if not confirmed:
            return f"Not added: {found['rule']} (not confirmed)"
        addition["confirmed"] = True
    return await _save(target, addition, ctx)


async def _add_dialog(target: PermissionsTarget, modal: Modal, ctx: Context) -> RuleAddition | None:
    """Ask for the kind, the rule (again, with the parser's message, until it parses) and the
    scope; ``None`` when the person gives up (Escape)."""
    from chord.textual import Choice

    kind = await modal.choose(
        "Add a rule: which kind?",
        [Choice(k, KIND_LABELS[k]) for k in KINDS],
        hint="deny beats ask beats allow · esc cancels",
    )
    if kind is None:
        return None
    problem = ""
    while True:
        typed = await modal.choose(
            f"New {kind} rule",
            [],
            body="\n\n".join(filter(None, [RULE_HELP, problem])),
            allow_text=True,
            hint="esc cancels (nothing is saved)",
        )
        if typed is None:
            return None
        try:
            found: RuleCheck = await target.rules.check_rule(typed, kind, ctx)
            break
        except RemoteServiceError as error:
            problem = f"✗ {error.message}; nothing was saved. Try again."
    scope = await modal.choose(
        f"Where should the {kind} rule {found['rule']} be kept?",
        scope_choices(found["scopes"]),
        hint="esc cancels (nothing is saved)",
    )
    if scope is None:
        return None
    addition: RuleAddition = {"rule": found["rule"], "kind": found["kind"], "scope": scope}  # type: ignore[typeddict-item]  # one of the offered scopes
    if found["widens"]:
        if not await _confirm_wide(modal, found):
            return None
        addition["confirmed"] = True
    return addition


async def permissions(target: PermissionsTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/permissions``: list the rules (read afresh) with their sources; add one (the first
    entry), or remove the one chosen after a confirmation. ``/permissions KIND RULE [--SCOPE]``
    adds one without the list."""
    from chord.textual import Choice, CommandError

    if args.text:
        return await _add_from_text(target, args.text, ctx)
    state: Any = await target.rules.refresh(ctx)
    rules: list[RuleEntry] = list(state.get("rules") or [])
    problems: list[str] = list(state.get("problems") or [])
    repositories: list[Any] = list(state.get("repositories") or [])
    title = (
        f"Permission rules ({len(rules)}): Enter on a rule removes it"
        if rules or repositories
        else "No permission rules yet"
    )
    modal = await target.tui.acquire_modal(ctx)
    try:
        choice = await modal.choose(
            title,
            [
                Choice(ADD, "+ Add a rule… (allow, ask or deny)"),
                *rule_choices(rules),
                *repository_choices(repositories),
            ],
            body=_problems_text(problems),
            hint="deny beats ask beats allow · esc closes",
        )
        if choice is None:
            return None
        if choice.startswith(GIT):
            return await _forget_repository(
                target, modal, repositories[int(choice.removeprefix(GIT))], ctx
            )
        if choice == ADD:
            addition = await _add_dialog(target, modal, ctx)
            entry, confirm = None, None
        else:
            addition, entry = None, rules[int(choice)]
            confirm = await modal.choose(
                f"Remove the {entry['kind']} rule {entry['rule']}?",
                [
                    Choice(REMOVE, f"Remove it from {describe_source(entry['source'])}"),
                    Choice(KEEP, "Keep it"),
                ],
            )
    finally:
        modal.close()
    if addition is not None:
        return await _save(target, addition, ctx)
    if entry is None or confirm != REMOVE:
        return None
    try:
        await target.rules.remove(entry, ctx)
    except RemoteServiceError as error:
        raise CommandError(f"Not removed: {error.message}") from error
    return (
        f"Removed the {entry['kind']} rule {entry['rule']} from {describe_source(entry['source'])}"
    )


async def _forget_repository(
    target: PermissionsTarget, modal: Modal, repository: dict[str, Any], ctx: Context
) -> CommandOutcome:
    """Confirm, then forget the approval of ``repository``'s git configuration."""
    from chord.textual import Choice, CommandError

    git_dir = str(repository.get("gitDir"))
    shown = "\n".join(f"• {p}" for p in repository.get("programs") or [])
    confirm = await modal.choose(
        f"Forget the approval of {git_dir}'s git configuration?",
        [
            Choice(REMOVE, "Forget it (its git commands that run unasked ask again)"),
            Choice(KEEP, "Keep it"),
        ],
        body=f"It runs:\n{shown}" if shown else "",
    )
    if confirm != REMOVE:
        return None
    try:
        await target.rules.forget_repository(git_dir, ctx)
    except RemoteServiceError as error:
        raise CommandError(error.message) from error
    return f"Forgot the approval of {git_dir}'s git configuration"


_UNREAD = re.compile(r"^(?P<file>.+?): `(?P<key>[^`]+)`: ")
"""A note about one Claude Code setting not read here: ``<file>: `<key>`: <advice>``."""
SHOWN_KEYS = 6
"""How many keys a folded notice names before ``and N more``."""


def _foldable(problem: str) -> re.Match[str] | None:
    """The note's file and key when ``problem`` is a foldable note (a setting not read that
    does not concern safety: not ``sandbox``, nor a ``permissions.*`` mode or switch)."""
    found = _UNREAD.match(problem)
    if found is None or found["key"].startswith(("sandbox", "permissions.")):
        return None
    return found


def _home_short(path: str) -> str:
    home = os.path.expanduser("~")
    return "~" + path[len(home) :] if home != "~" and path.startswith(home + os.sep) else path


def problem_notices(problems: list[str]) -> list[str]:
    """The notices for ``problems`` that arrived together: the notes about Claude Code settings
    not read folded into one (a count, the files, the keys) when there are two or more; every
    other problem is a notice of its own (``Permission rules: …``), and a lone note is one
    that says what it is (``Not used here: ~/.claude/settings.json: `model`: …``): a setting
    that is no permission rule is not called one."""
    folded = [(p, m) for p in problems if (m := _foldable(p)) is not None]
    if len(folded) == 1:  # not a permission rule: the setting, where it is, what to do instead
        [(lone, found)] = folded
        note = f"Not used here: {_home_short(found['file'])}{lone[len(found['file']) :]}"
        return [note if p == lone else f"Permission rules: {p}" for p in problems]
    if not folded:
        return [f"Permission rules: {p}" for p in problems]
    files = list(dict.fromkeys(_home_short(m["file"]) for _p, m in folded))
    keys = [m["key"] for _p, m in folded]
    named = ", ".join(keys[:SHOWN_KEYS]) + (
        f" and {len(keys) - SHOWN_KEYS} more" if len(keys) > SHOWN_KEYS else ""
    )
    summary = (
        f"{len(keys)} settings from {', '.join(files)} are not used here: {named} — "
        "/permissions or `coding-agent config` lists why"
    )
    skipped = {p for p, _m in folded}
    return [summary] + [f"Permission rules: {p}" for p in problems if p not in skipped]


@define_facet("@pi/approval-permissions")
def permissions_tui_facet(env: FacetEnvironment) -> None:
    """``/permissions`` lists the rules, adds one and removes one; new problems show as a
    notice."""
    from chord.textual import Arg, Command, Tui, register_commands

    tui = env.use(Tui)
    rules_service = env.use(ApprovalRulesService)
    shown: set[str] = set()
    commands = (
        Command(
            "permissions",
            "List the permission rules with their sources; add one, remove one",
            permissions,
            args=(
                Arg("kind", optional=True, choices=KINDS),
                Arg("rule", optional=True, rest=True, hint="[RULE [--session|--project|--user]]"),
            ),
        ),
    )

    def notify_problems(value: Any, _ctx: Context, _delivery: Delivery) -> None:
        problems = value.get("problems") if isinstance(value, dict) else None
        new = [
            p
            for p in dict.fromkeys(problems if isinstance(problems, list) else [])
            if isinstance(p, str) and p not in shown
        ]
        shown.update(new)
        for notice in problem_notices(new):
            tui.notify(notice, severity="warning")

    def activate() -> None:
        env.own(rules_service.state.subscribe(notify_problems))
        env.own(register_commands(tui, commands, PermissionsTarget(tui, rules_service)))

    env.on_activate(activate)
