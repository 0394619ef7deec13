"""What every side of the approval feature agrees on: JSON shapes and two service ids.

The approval feature has three parts (docs/design/harness.md#before-tool, docs/design/chord.md#feature-layout). The session worker's
``before_tool`` hook asks before a tool runs; the question is a keyed instance of
:data:`ApprovalDialogs`, one per pending call, addressed ``f"{conversationId}:{callId}"``
(:func:`dialog_key`); every presentation that observes the service shows a dialog and calls
:meth:`ApprovalDialog.decide`. The processes share nothing but this module, so it imports no
host code (no Textual, no harness): only chord's service and state types.

The shapes are plain JSON (``TypedDict`` for the type checker). A decision comes from another
process, so the session side never trusts it: :func:`check_decision` turns anything that is not
exactly an :class:`ApprovalDecision` into a :class:`~chord.remote.RemoteServiceError` with code
``service_invalid_value`` and a message naming the field, *before* anything is resolved or
recorded::

    check_decision({"decision": "allow", "by": "tui"})     # -> the same dict, checked
    check_decision({"decision": "maybe"})                  # RemoteServiceError: decision.decision ...

**Standing choices.** A dialog may offer a narrow permission rule (the request's ``rule``, e.g.
``Bash(npm run test:*)``, ``Edit(./src/app.py)``, ``mcp__github__get_issue``; never all of
bash) at the scopes in ``scopes`` (``session``: this session's storage, rewound with the
conversation; ``project``: the trusted project's ``.coding-agent/config.toml``; ``user``: the
user's ``config.toml``). A decision ``{"decision": "allow", "rule": …, "scope": …}`` allows the
call and adds that allow rule; :func:`check_decision` given the request refuses a rule or a scope
the dialog did not offer. (This replaces the older ``always`` flag, which allowed a whole tool.)
A compound command (``cd src && npm test``) may need one rule per command: the request then
offers ``rules`` (``["Bash(cd:*)", "Bash(npm test:*)"]``) instead of ``rule``, and the decision
``{"decision": "allow", "rules": [...], "scope": …}`` keeps all of them — exactly the offered
list, never a part of it (:func:`offered_rules` reads either shape, :func:`standing_choice`
answers it).

**Rules.** :data:`ApprovalRulesService` (``approval.rules``) publishes every rule in force with
its source and the problems found reading them (:class:`RulesState`); ``remove`` deletes one
from where it came from (:class:`RuleEntry`); ``check_rule`` parses a rule a person typed
(:class:`RuleCheck`) and ``add`` keeps it at a scope (:class:`RuleAddition`; an allow rule for
a whole tool that asks — all of bash, every edit, a whole MCP server — only when ``confirmed``); ``check_command`` says what a ``bash`` call of a
command would get without asking anyone (:class:`CommandVerdict`: a prompt command's ``!`` lines
in ``-p``, checked before they run).

**Permission modes.** The session also has one *permission mode* (docs/design/agent.md#features), the singleton :data:`ApprovalMode` (``approval.mode``): its replicated ``state`` is
``{"mode": <mode>}`` and ``set_mode`` changes it. The modes, in the order a presentation cycles
through them (:data:`PERMISSION_MODES`, :func:`next_mode`):

* ``ask`` (the default) — a tool the rules mark as needing approval asks;
* ``accept-edits`` — file edits (``write``, ``edit``) inside the project run without asking; an
  edit outside it (symlinks followed), of a file that makes the machine run code (``.git/``,
  ``.mcp.json``, ...) or of the agent's own configuration asks; ``bash`` and the other tools
  that need approval still ask;
* ``sandbox`` — as ``accept-edits``, and commands (``bash``, its background jobs) run without
  asking inside the OS sandbox (:class:`pico3.Sandbox`: writes only in the project, no
  network, credentials hidden). A command the model asks to run outside (``outside_sandbox:
  true`` with a ``reason``) asks, and the dialog says so; no allow rule covers it. Where the
  sandbox cannot start (no harness service ``sandbox``: no bubblewrap, user namespaces off, not
  Linux) the mode behaves as ``ask``, never as ``auto``, and each dialog says why. It sits
  after ``accept-edits`` and before ``plan`` and ``auto``: one more step of autonomy that stays
  confined, so Shift+Tab from ``ask`` reaches it before it reaches unconfined ``auto``. Not the
  default: a session that never chose a mode asks (the sandbox changes what commands can do,
  so it is a choice);
* ``plan`` — read-only: every tool that is not read-only is blocked without asking, and the
  model is told the session is in plan mode (read, then propose a plan);
* ``auto`` — nothing asks; every call runs.

Claude Code's ``permissions.disableBypassPermissionsMode`` disables ``auto``: ``set_mode``
refuses it and the state lists it under ``disabled`` (:class:`ModeState`), so presentations
skip it (:mod:`.restrictions`).

A subagent runs in the session's mode, or a stricter one: the task that owns its conversation
may name one (:data:`OWNER_MODE_KEY`; an agent file's ``permissionMode: plan``), and then its
calls are decided in the stricter of the two (:func:`stricter`), never a looser one.

:func:`check_mode` validates a mode from another process the same way :func:`check_decision`
validates a decision::

    check_mode("plan")      # -> "plan"
    check_mode("yolo")      # RemoteServiceError: Invalid permission mode 'yolo' (expected ...)

Why one module: it is the wire contract between processes that share nothing else (the
session worker, the TUI, the editor and SDK paths): each shape, the checks a receiver applies
to it and the helpers that build and read it (:func:`offer_rules`, :func:`offered_rules`,
:func:`standing_choice`) must change together, and a reader of one side finds all of it here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, NotRequired, Protocol, TypedDict

from chord import (
    Context,
    JsonValue,
    RemoteServiceError,
    ReplicatedState,
    define_service,
    dialog_key,
)

__all__ = [
    "DECISIONS",
    "DEFAULT_MODE",
    "MODE_DESCRIPTIONS",
    "OWNER_MEMORY_KEY",
    "OWNER_MODE_KEY",
    "PERMISSION_MODES",
    "RULE_SCOPES",
    "STRICTEST_FIRST",
    "ApprovalDecision",
    "ApprovalDialog",
    "ApprovalDialogs",
    "ApprovalMode",
    "ApprovalModeApi",
    "ApprovalRequest",
    "ApprovalRulesApi",
    "ApprovalRulesService",
    "CommandVerdict",
    "Decision",
    "HookRule",
    "ModeState",
    "PermissionMode",
    "RuleAddition",
    "RuleCheck",
    "RuleEntry",
    "RuleScope",
    "RulesState",
    "check_decision",
    "check_mode",
    "check_rule_addition",
    "check_rule_entry",
    "dialog_key",
    "next_mode",
    "offer_rules",
    "offered_rules",
    "standing_choice",
    "stricter",
]

Decision = Literal["allow", "deny"]
DECISIONS: tuple[Decision, ...] = ("allow", "deny")
"""The decisions a dialog accepts."""

RuleScope = Literal["session", "project", "user"]
RULE_SCOPES: tuple[RuleScope, ...] = ("session", "project", "user")
"""Where a standing choice's rule is kept: the session's storage, the trusted project's
``config.toml``, the user's ``config.toml``."""


class ApprovalRequest(TypedDict):
    """The replicated ``request`` of one dialog: which call waits for approval.

    ``conversationId`` and ``taskId`` are the harness ids of the conversation and of the
    ``pi.tool`` task; ``callId`` is the model's id for the call; ``args`` its arguments.
    ``reason``, when present, says why this call asks although the mode or an allow rule
    would let it run (an edit outside the project, of a file that makes the machine run code, or
    of the agent's own configuration; an ask rule). ``rule`` is the narrow allow rule the dialog
    may offer as a standing choice and ``scopes`` where it may be kept (both absent: no standing
    choice); ``rules`` replaces ``rule`` when the choice keeps several (a compound command:
    one per command not allowed yet), all or none. Set both through :func:`offer_rules`.
    """

    conversationId: int
    callId: str
    taskId: int
    name: str
    args: JsonValue
    reason: NotRequired[str]
    overwrites: NotRequired[int]
    """For ``write``: the size in bytes of the existing file the call would replace."""
    rule: NotRequired[str]
    rules: NotRequired[list[str]]
    scopes: NotRequired[list[RuleScope]]
    sandbox: NotRequired[bool]
    """``True``: the call can run inside the OS sandbox instead (a command, where a sandbox can
    start); a dialog offers "Allow inside the sandbox" (a decision with ``sandboxed``)."""
    repositories: NotRequired[list[dict[str, JsonValue]]]
    """The repositories (``{"gitDir", "fingerprint", "programs"}``) whose git configuration
    made the call ask and can be approved as it is now: a dialog offers "Allow always while
    this repository's git configuration stays as it is" (a decision with ``remember``)."""


class HookRule(TypedDict):
    """A session rule a ``PermissionRequest`` hook's allow asked to add (its
    ``updatedPermissions``): the rule's text and kind."""

    rule: str
    kind: Literal["allow", "ask", "deny"]


class ApprovalDecision(TypedDict):
    """A presentation's answer. ``rule`` and ``scope`` (together, only with ``allow``) also
    keep the request's offered allow rule at that scope, so matching calls do not ask again
    (``rules`` instead of ``rule``: the several rules a compound command's request offered);
    ``by`` names who decided (``"tui"``: a person in a dialog, whose denial reads "the user
    denied this call"; any other name shows in the block reason: ``"denied by headless"``)."""

    decision: Decision
    by: NotRequired[str]
    rule: NotRequired[str]
    rules: NotRequired[list[str]]
    scope: NotRequired[RuleScope]
    sandboxed: NotRequired[bool]
    """With ``allow``, when the request offered ``sandbox``: run the call inside the OS sandbox
    (never with a standing ``rule``: a rule would let later calls run unconfined)."""
    message: NotRequired[str]
    """A ``PermissionRequest`` hook's deny: its reason, which the model reads."""
    interrupt: NotRequired[bool]
    """A ``PermissionRequest`` hook's deny: the turn stops after the refusal."""
    remember: NotRequired[bool]
    """With ``allow``, when the request offered ``repositories``: remember the approval of
    their git configuration as it is now (:mod:`.git_approvals`)."""
    repositories: NotRequired[list[dict[str, JsonValue]]]
    """Set by the session, not a dialog: the request's ``repositories`` a ``remember`` answer
    approved (kept with the decision, so what is remembered is what the dialog showed)."""
    hookRules: NotRequired[list[HookRule]]
    """A ``PermissionRequest`` hook's allow: the session rules it asked to add. (``message``,
    ``interrupt`` and ``hookRules`` are a hook's only: :func:`check_decision` refuses them in a
    dialog's answer.)"""


class ApprovalDialog(Protocol):
    """One pending approval (a keyed instance of :data:`ApprovalDialogs`)."""

    @property
    def request(self) -> ReplicatedState:
        """Follows :class:`ApprovalRequest`; set once when the dialog opens."""
        ...

    async def decide(self, decision: ApprovalDecision, ctx: Context) -> None:
        """Answer the dialog. The first *recorded* decision wins (a memo in the session worker);
        a later ``decide`` is harmless. Raises ``service_invalid_value`` for a malformed
        decision, which is then not recorded."""
        ...


ApprovalDialogs = define_service("pi.approval-dialog", ApprovalDialog)
"""Keyed by :func:`dialog_key` (chord's :func:`chord.dialog_key`, re-exported here); provided
by the session facet (:func:`chord.provide_dialogs`, answer method ``decide``) and shown by the
TUI facet (:func:`chord.textual.show_dialogs`)."""


def _invalid(message: str) -> RemoteServiceError:
    return RemoteServiceError("service_invalid_value", f"Invalid approval decision: {message}")


def offer_rules(request: ApprovalRequest, rules: Sequence[str], scopes: list[RuleScope]) -> None:
    """Make ``request`` offer ``rules`` as its standing choice at ``scopes``: one rule as
    ``rule``, several (a compound command's) as ``rules``; none leaves it without one."""
    if len(rules) == 1:
        request["rule"] = rules[0]
    elif rules:
        request["rules"] = list(rules)
    else:
        return
    request["scopes"] = scopes


def offered_rules(request: object) -> list[str]:
    """The rules ``request``'s standing choice keeps (``[]``: it offers none): its ``rule``, or
    its ``rules`` (a compound command's, kept together). Anything malformed offers nothing."""
    if not isinstance(request, dict):
        return []
    rule: object = request.get("rule")  # pyright: ignore[reportUnknownMemberType]
    if isinstance(rule, str) and rule:
        return [rule]
    rules: object = request.get("rules")  # pyright: ignore[reportUnknownMemberType]
    if isinstance(rules, list) and rules and all(isinstance(r, str) and r for r in rules):  # pyright: ignore[reportUnknownVariableType]
        return [str(r) for r in rules]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return []


def standing_choice(request: object, scope: RuleScope, by: str) -> ApprovalDecision:
    """The decision that allows ``request``'s call and keeps every rule it offers at
    ``scope``, decided by ``by`` (``"tui"``, ``"editor"``…). Raises ``ValueError`` when the
    request offers no rule (a presentation shows the choice only when it does)."""
    offered = offered_rules(request)
    if not offered:
        raise ValueError("this approval request offers no standing rule to keep")
    if len(offered) == 1:
        return {"decision": "allow", "by": by, "rule": offered[0], "scope": scope}
    return {"decision": "allow", "by": by, "rules": offered, "scope": scope}


def _checked_rules(value: dict[str, object], request: object) -> list[str]:
    """A decision's ``rule`` or ``rules`` as a list; given the ``request``, exactly what it
    offered (a part of a compound command's rules is refused: the dialog showed them all)."""
    if "rule" in value and "rules" in value:
        raise _invalid("decision.rule and decision.rules cannot both be given")
    if "rules" in value:
        rules = value["rules"]
        if (
            not isinstance(rules, list)
            or len(rules) < 2  # pyright: ignore[reportUnknownArgumentType]
            or not all(isinstance(r, str) and r for r in rules)  # pyright: ignore[reportUnknownVariableType]
        ):
            raise _invalid(
                f"decision.rules must be a list of two or more rules with a scope, got {rules!r}"
            )
        chosen = [str(r) for r in rules]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        field = "rules"
    else:
        rule = value.get("rule")
        if not isinstance(rule, str) or not rule:
            raise _invalid(f"decision.rule must be a non-empty string with a scope, got {rule!r}")
        chosen, field = [rule], "rule"
    if isinstance(request, dict):
        offered = offered_rules(request)
        if chosen != offered:
            shown = value[field]
            raise _invalid(
                f"decision.{field} {shown!r} is not what the dialog offered ({offered or None!r})"
            )
    return chosen


def check_decision(value: object, request: object = None) -> ApprovalDecision:
    """Return ``value`` as a checked :class:`ApprovalDecision` (a fresh dict).

    Raises :class:`~chord.remote.RemoteServiceError` (``service_invalid_value``) naming the
    problem: not an object, an unknown key, a ``decision`` other than ``"allow"``/``"deny"``,
    a ``by`` that is not a non-empty string, a ``rule`` (or ``rules``) without a ``scope`` (or
    the reverse), a ``rule``/``scope`` with ``deny``, and — given the ``request`` it answers —
    rules other than those the request offered (all of them) or a scope not among its
    ``scopes``.
    """
    if not isinstance(value, dict):
        raise _invalid(f"expected an object, got {type(value).__name__}")
    fields = ("decision", "by", "rule", "rules", "scope", "sandboxed", "remember")
    unknown = sorted(str(key) for key in value if key not in fields)  # pyright: ignore[reportUnknownVariableType]
    if unknown:
        raise _invalid(f"unknown field(s) {', '.join(unknown)} (allowed: {', '.join(fields)})")
    if "decision" not in value:
        raise _invalid("decision.decision is required ('allow' or 'deny')")
    decision = value["decision"]
    if decision not in DECISIONS or not isinstance(decision, str):
        raise _invalid(f"decision.decision must be 'allow' or 'deny', got {decision!r}")
    checked: ApprovalDecision = {"decision": decision}
    if "by" in value:
        by = value["by"]
        if not isinstance(by, str) or not by:
            raise _invalid(f"decision.by must be a non-empty string, got {by!r}")
        checked["by"] = by
    if "rule" in value or "rules" in value or "scope" in value:
        scope = value.get("scope")
        if decision != "allow":
            raise _invalid("decision.rule and decision.scope apply only to 'allow'")
        chosen = _checked_rules(value, request)  # pyright: ignore[reportUnknownArgumentType]
        if scope not in RULE_SCOPES or not isinstance(scope, str):
            raise _invalid(f"decision.scope must be one of {', '.join(RULE_SCOPES)}, got {scope!r}")
        if isinstance(request, dict):
            scopes = request.get("scopes") or []  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            if scope not in scopes:
                raise _invalid(
                    f"decision.scope {scope!r} is not offered here (offered: {scopes!r})"
                )
        if "rules" in value:
            checked["rules"] = chosen
        else:
            checked["rule"] = chosen[0]
        checked["scope"] = scope  # type: ignore[typeddict-item] - one of RULE_SCOPES
    if "sandboxed" in value:
        _check_sandboxed(value["sandboxed"], checked, request)
        checked["sandboxed"] = value["sandboxed"]
    if "remember" in value:
        remember = value["remember"]
        if not isinstance(remember, bool):
            raise _invalid(f"decision.remember must be a boolean, got {remember!r}")
        keeps = "rule" in checked or "rules" in checked
        if remember and (decision != "allow" or keeps or checked.get("sandboxed")):
            raise _invalid("decision.remember applies only to a plain 'allow'")
        if remember and isinstance(request, dict) and not request.get("repositories"):  # pyright: ignore[reportUnknownMemberType]
            raise _invalid("decision.remember: this dialog did not offer to remember")
        checked["remember"] = remember
    return checked


def _check_sandboxed(sandboxed: object, checked: ApprovalDecision, request: object) -> None:
    """``decision.sandboxed``: a boolean, only with a plain ``allow`` the request offered."""
    if not isinstance(sandboxed, bool):
        raise _invalid(f"decision.sandboxed must be a boolean, got {sandboxed!r}")
    if sandboxed and checked["decision"] != "allow":
        raise _invalid("decision.sandboxed applies only to 'allow'")
    if sandboxed and ("rule" in checked or "rules" in checked):
        raise _invalid("decision.sandboxed cannot keep a rule (it would run later calls outside)")
    if sandboxed and isinstance(request, dict) and request.get("sandbox") is not True:  # pyright: ignore[reportUnknownMemberType]
        raise _invalid("decision.sandboxed: this dialog did not offer the sandbox")


# -- permission rules --------------------------------------------------------------------------
class RuleEntry(TypedDict):
    """One rule in force: its ``rule`` text, ``kind`` (allow, ask, deny), ``source`` (a file's
    path, ``"session"`` for this session's storage, ``"autoAllow"`` for a conversation's
    "always allow" list of an older version) and ``scope`` (``user``, ``project``,
    ``claude-user``, ``claude-project``, ``claude-local``, ``session``)."""

    rule: str
    kind: Literal["allow", "ask", "deny"]
    source: str
    scope: str


class RulesState(TypedDict):
    """The replicated ``state`` of :data:`ApprovalRulesService`: every rule in force (invalid
    ones left out) and one line per problem (an invalid rule: its file, the rule and why)."""

    rules: list[RuleEntry]
    problems: list[str]
    repositories: NotRequired[list[dict[str, JsonValue]]]
    """The repositories whose git configuration a person allowed as it is (``{"gitDir",
    "programs", "at"}``, :mod:`.git_approvals`); absent without the app's store."""


class RuleCheck(TypedDict):
    """What ``check_rule`` says of a rule a person typed (it parsed): the ``rule`` as it will be
    kept (stripped), its ``kind``, ``widens`` — a sentence naming what it allows when it is an
    allow rule for a whole tool that asks (``Bash``, ``Bash(*)``, ``Edit``, ``Write``,
    ``WebFetch`` without a domain, ``WebSearch``, ``mcp__server``, ``mcp__server__tool``), which
    ``add`` keeps only when ``confirmed``; ``""`` otherwise — and the ``scopes`` it can be kept
    at now (``session``, ``project`` in a trusted project, ``user`` where a config file exists).
    With ``widens``, ``allows`` names what for the question's title ("all of bash", "every
    edit and write", "every tool of the MCP server github") and ``runs`` for its "Yes" answer
    ("every bash command runs")."""

    rule: str
    kind: Literal["allow", "ask", "deny"]
    widens: str
    scopes: list[RuleScope]
    allows: NotRequired[str]
    runs: NotRequired[str]


class RuleAddition(TypedDict):
    """A rule to add: its text, ``kind`` and ``scope``; ``confirmed`` says the person was shown
    :attr:`RuleCheck.widens` and agreed (required for an allow rule for a whole tool that
    asks: all of bash, every edit, a whole MCP server...)."""

    rule: str
    kind: Literal["allow", "ask", "deny"]
    scope: RuleScope
    confirmed: NotRequired[bool]


class CommandVerdict(TypedDict):
    """What a ``bash`` call of a command would get, asking nobody: ``run`` (``auto`` mode or an
    allow rule), ``ask`` (an ask rule, or a mode that asks and no allow rule) or ``block`` (a
    deny rule, plan mode); ``why`` says it in a sentence."""

    verdict: Literal["run", "ask", "block"]
    by: Literal["rule", "mode", "repository"]
    """What decided: a rule (an ask rule is not overridden by an allow rule or ``auto``), the
    mode, or the repository (a ``git`` the command runs would run a program its git
    configuration names: :mod:`.gitconfig`; as an ask rule, only a person overrides it)."""
    why: str


class ApprovalRulesApi(Protocol):
    """The session's permission rules (the singleton :data:`ApprovalRulesService`)."""

    @property
    def state(self) -> ReplicatedState:
        """Follows :class:`RulesState`."""
        ...

    async def refresh(self, ctx: Context) -> RulesState:
        """Read every source again (files may have changed, a rewind may have dropped a
        session rule), publish and return the new state."""
        ...

    async def check_command(self, command: str, ctx: Context) -> CommandVerdict:
        """What a ``bash`` call of ``command`` in the user's conversation would get now (the
        session's mode and every rule in force), without asking anyone or running anything.
        Raises ``service_invalid_value`` for a ``command`` that is not a non-empty string."""
        ...

    async def remove(self, entry: RuleEntry, ctx: Context) -> RulesState:
        """Remove ``entry`` from its source (the session's storage or the file it came from),
        then publish and return the new state. Raises ``service_invalid_value`` for a malformed
        entry, one that is no longer there, or a file that cannot be changed."""
        ...

    async def check_rule(self, rule: str, kind: str, ctx: Context) -> RuleCheck:
        """Parse ``rule`` as a ``kind`` rule without keeping it. Raises
        ``service_invalid_value`` with the parser's message (the one ``/permissions`` shows for
        a bad rule in a file: ``allow rule 'Bash(git * x)' is invalid (…)``)."""
        ...

    async def forget_repository(self, git_dir: str, ctx: Context) -> RulesState:
        """Forget the approval of ``git_dir``'s git configuration (its git commands ask again),
        then publish and return the new state. Raises ``service_invalid_value`` when there is
        none or the store cannot be changed (its message names the file)."""
        ...

    async def add(self, addition: RuleAddition, ctx: Context) -> RuleEntry:
        """Keep the rule at its scope (the session's storage, or appended to the project's or
        the user's ``config.toml``, comments kept), publish the new state and return the entry
        as listed (its ``source``: the file's path or ``"session"``). It applies from the next
        call on. Raises ``service_invalid_value`` — nothing saved — for a rule that does not
        parse (the parser's message), a scope not offered (an untrusted project), the same
        rule already there, or an allow rule for all of bash without ``confirmed``."""
        ...


ApprovalRulesService = define_service("approval.rules", ApprovalRulesApi)
"""``approval.rules``: remotable singleton, provided by the approval session facet."""


def _bad_addition(message: str) -> RemoteServiceError:
    return RemoteServiceError("service_invalid_value", f"Invalid rule addition: {message}")


def check_rule_addition(value: object) -> RuleAddition:
    """Return ``value`` as a checked :class:`RuleAddition` (the shape only; the rule's grammar
    is the session's to check); raises ``service_invalid_value``."""
    if not isinstance(value, dict):
        raise _bad_addition(f"expected an object, got {type(value).__name__}")
    rule, kind, scope = value.get("rule"), value.get("kind"), value.get("scope")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not isinstance(rule, str):
        raise _bad_addition(f"rule must be a string, got {rule!r}")
    if kind not in ("allow", "ask", "deny"):
        raise _bad_addition(f"kind must be allow, ask or deny, got {kind!r}")
    if scope not in RULE_SCOPES:
        raise _bad_addition(f"scope must be session, project or user, got {scope!r}")
    confirmed = value.get("confirmed", False)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not isinstance(confirmed, bool):
        raise _bad_addition(f"confirmed must be true or false, got {confirmed!r}")
    return {"rule": rule, "kind": kind, "scope": scope, "confirmed": confirmed}


def check_rule_entry(value: object) -> RuleEntry:
    """Return ``value`` as a checked :class:`RuleEntry`; raises ``service_invalid_value``."""
    if not isinstance(value, dict):
        raise RemoteServiceError(
            "service_invalid_value",
            f"Invalid rule entry: expected an object, got {type(value).__name__}",
        )
    for key in ("rule", "kind", "source", "scope"):
        field = value.get(key)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if not isinstance(field, str) or not field:
            raise RemoteServiceError(
                "service_invalid_value",
                f"Invalid rule entry: {key} must be a non-empty string, got {field!r}",
            )
    if value["kind"] not in ("allow", "ask", "deny"):
        raise RemoteServiceError(
            "service_invalid_value",
            f"Invalid rule entry: kind must be allow, ask or deny, got {value['kind']!r}",
        )
    return {
        "rule": value["rule"],
        "kind": value["kind"],
        "source": value["source"],
        "scope": value["scope"],
    }


# -- permission modes --------------------------------------------------------------------------
PermissionMode = Literal["ask", "accept-edits", "sandbox", "plan", "auto"]
PERMISSION_MODES: tuple[PermissionMode, ...] = ("ask", "accept-edits", "sandbox", "plan", "auto")
"""Every mode, in cycling order (Shift+Tab goes one step to the right, wrapping around)."""

DEFAULT_MODE: PermissionMode = "ask"
"""The mode of a session that never chose one: today's behaviour, tools that need approval ask."""

MODE_DESCRIPTIONS: dict[PermissionMode, str] = {
    "ask": "ask before tools that need approval",
    "accept-edits": "file edits in the project run without asking; bash still asks",
    "sandbox": "edits in the project and commands in the OS sandbox run without asking",
    "plan": "read-only: only read and propose a plan",
    "auto": "nothing asks; every tool runs",
}
"""One line per mode, for pickers and help texts."""


class ModeState(TypedDict):
    """The replicated ``state`` of :data:`ApprovalMode`."""

    mode: PermissionMode
    disabled: NotRequired[dict[str, str]]
    """The modes that cannot be entered here, each with why (absent: none). Claude Code's
    ``permissions.disableBypassPermissionsMode: "disable"`` disables ``auto``: ``set_mode``
    refuses it and a presentation skips it (:func:`next_mode`'s ``skip``)."""


class ApprovalModeApi(Protocol):
    """The session's permission mode (the singleton :data:`ApprovalMode`)."""

    @property
    def state(self) -> ReplicatedState:
        """Follows :class:`ModeState`; a late joiner hydrates with the current mode."""
        ...

    async def set_mode(self, mode: PermissionMode, ctx: Context) -> None:
        """Make ``mode`` the session's mode, durably (it survives a worker restart), then
        publish it. Raises ``service_invalid_value`` naming a value that is not a mode, or a
        mode the state lists as ``disabled`` (with why); nothing changes then. Calls that
        already asked keep their dialog; every later decision reads the new mode."""
        ...


ApprovalMode = define_service("approval.mode", ApprovalModeApi)
"""``approval.mode``: remotable singleton, provided by the approval session facet."""


def check_mode(value: object) -> PermissionMode:
    """Return ``value`` if it is one of :data:`PERMISSION_MODES`.

    Raises :class:`~chord.remote.RemoteServiceError` (``service_invalid_value``) naming the bad
    value and listing the modes.
    """
    for mode in PERMISSION_MODES:
        if isinstance(value, str) and value == mode:
            return mode
    expected = ", ".join(PERMISSION_MODES)
    raise RemoteServiceError(
        "service_invalid_value", f"Invalid permission mode {value!r} (expected one of {expected})"
    )


OWNER_MODE_KEY = "permissionMode"
"""The key of a task's input that makes the conversations it owns stricter: a task that owns a
conversation (a subagent's ``subagents.run``) may name a mode there, and every tool call of that
conversation, and of those it owns in turn, is decided in the stricter of the session's mode and
each owner's (:func:`stricter`). A subagent is never looser than the session: a looser mode
named there changes nothing. A value that is not a mode counts as ``plan`` (a doubt is no
grant)."""

OWNER_MEMORY_KEY = "memory"
"""The key of a ``subagents.run`` task's input naming the subagent's memory folder,
``{"folder": <abs path>, "base": <abs path it must stay in>}``: for the conversation that task
owns (only it), reads and edits inside the folder are the agent's own (``facets_approval.memory``),
as long as the folder really is where it is written (no symlink on the way)."""

STRICTEST_FIRST: tuple[PermissionMode, ...] = ("plan", "ask", "accept-edits", "sandbox", "auto")
"""The modes from the one that lets the least run to the one that lets the most run."""


def stricter(mode: PermissionMode, other: object) -> PermissionMode:
    """The stricter of ``mode`` and ``other`` (:data:`STRICTEST_FIRST`); ``other`` that is not
    a mode counts as ``plan``."""
    found: PermissionMode = "plan"
    for candidate in PERMISSION_MODES:
        if other == candidate:
            found = candidate
    return mode if STRICTEST_FIRST.index(mode) <= STRICTEST_FIRST.index(found) else found


def next_mode(mode: PermissionMode, skip: Iterable[str] = ()) -> PermissionMode:
    """The mode after ``mode`` in cycling order: ask → accept-edits → sandbox → plan → auto →
    ask, passing over the modes in ``skip`` (a :class:`ModeState`'s ``disabled``)."""
    index = PERMISSION_MODES.index(check_mode(mode))
    skipped = set(skip)
    for step in range(1, len(PERMISSION_MODES)):
        found = PERMISSION_MODES[(index + step) % len(PERMISSION_MODES)]
        if found not in skipped:
            return found
    return mode
