"""``PermissionRequest``: hooks that answer the approval dialog before it opens.

Claude Code runs a ``PermissionRequest`` hook when a permission dialog is about to be shown; the
hook may answer it. Here the approval feature, right before it would ask (after its deny rules,
its modes and ``denyInsteadOfPrompting`` had their say), runs pico3's ``permission_request``
point of ``pi.tool``; this module is this feature's handler there (:func:`answer_permission`).

The hook reads the event's JSON (``tool_name``, ``tool_input`` as for ``PreToolUse``) and
answers on stdout::

    {"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                            "decision": {"behavior": "allow"}}}

* ``"behavior": "allow"``: the call runs without the dialog;
* ``"behavior": "deny"`` (or exit 2, stderr the reason): the call is refused with the hook's
  ``message``, which the model reads; with ``"interrupt": true`` the turn stops too, as
  Esc stops it: the refusal is the call's result, then the turn ends interrupted (the next
  prompt starts a new one; the approval feature does it, :mod:`facets_approval.hook_answers`);
* anything else — no output, plain text, a JSON object without a decision, a ``behavior`` that
  is neither, a non-zero exit other than 2, a timeout, a hook that cannot start — is *no
  answer*: the dialog asks as it would have (fail closed: an error never allows);
* an ``allow`` whose ``updatedInput`` differs from the input the hook read is no answer either
  (this agent does not rewrite calls, and running the original would not be what the hook
  allowed), and the log says so;
* an ``allow``'s ``updatedPermissions`` entries of type ``addRules`` (:func:`hook_rules`:
  ``{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test"}],
  "behavior": "allow", "destination": "session"}``) are kept as session rules, as
  ``/permissions allow|ask|deny RULE --session`` keeps them, by the approval feature, which
  never keeps from a hook an allow rule for a whole tool that asks (``Bash``, ``Edit``,
  ``mcp__server``...: a person is asked twice for those) and whose allow rules never cover what
  asks in every mode (an edit of ``.git/`` or outside the project, leaving the sandbox). A
  ``destination`` other than ``session`` (``localSettings``, ``projectSettings``,
  ``userSettings``) is kept for this session too, never written into a settings file, and the
  log says so; other entry types (``replaceRules``, ``removeRules``, ``setMode``,
  ``addDirectories``...) are not applied, and the log names them.

The matching hooks (matcher on the tool name, as ``PreToolUse``) run one after another in file
order: the first ``deny`` ends the chain and wins; an ``allow`` stands only when no later hook
denies (the rules of every hook that allowed are kept). The answer is the approval feature's
decision memo once given, so a restarted worker does not run the hooks of a call already
decided.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Protocol

from chord import Context

from .agent_hooks import AgentHooks
from .protocol import HookRun, claude_tool, tool_names
from .settings import HookSpec, LoadedHooks

__all__ = ["HookRunner", "answer_permission", "hook_rules", "permission_verdict"]

_log = logging.getLogger("facets_hooks")

EVENT = "PermissionRequest"


class HookRunner(Protocol):
    """What :func:`answer_permission` needs of the session facet's ``Hooks``: the loaded hooks,
    each subagent's own, the project folder, the event payload and running one hook."""

    @property
    def loaded(self) -> LoadedHooks: ...

    @property
    def agents(self) -> AgentHooks: ...

    @property
    def cwd(self) -> str: ...

    def payload(self, event: str, **fields: Any) -> dict[str, Any]: ...

    async def run(self, hook: HookSpec, payload: dict[str, Any], ctx: Context) -> HookRun: ...


def permission_verdict(run: HookRun, tool_input: object) -> tuple[str, str] | None:
    """One hook's answer: ``("allow", "")``, ``("deny", message)``, or ``None`` (no answer:
    the dialog asks). ``tool_input`` is the input the hook read (Claude Code's field names)."""
    if run.exit_code == 2:
        return "deny", run.stderr.strip() or "(the hook gave no reason on stderr)"
    output = run.output
    if output is None:
        return None
    specific: Any = output.get("hookSpecificOutput")
    decision: Any = specific.get("decision") if isinstance(specific, dict) else None
    if not isinstance(decision, dict):
        return None
    behavior: Any = decision.get("behavior")  # pyright: ignore[reportUnknownMemberType]
    message: Any = decision.get("message")  # pyright: ignore[reportUnknownMemberType]
    text = message.strip() if isinstance(message, str) else ""
    if behavior == "deny":
        return "deny", text or "no reason given"
    if behavior != "allow":
        return None
    updated: Any = decision.get("updatedInput")  # pyright: ignore[reportUnknownMemberType]
    if updated is not None and updated != tool_input:
        return None
    return "allow", ""


def _said(run: HookRun, answer: tuple[str, str] | None) -> str | None:
    """What the log tells the user about a hook that did not answer the way it seems to mean
    (``None``: nothing to say)."""
    output = run.output
    specific: Any = (output or {}).get("hookSpecificOutput")
    decision: Any = specific.get("decision") if isinstance(specific, dict) else None
    if run.exit_code == 0 and run.stdout.strip() and output is None:
        return (
            "printed something that is not a JSON object, so it gave no decision: the dialog asks"
        )
    if not isinstance(decision, dict):
        return None
    behavior: Any = decision.get("behavior")  # pyright: ignore[reportUnknownMemberType]
    if behavior not in ("allow", "deny"):
        return f'has a decision.behavior {behavior!r}, neither "allow" nor "deny": the dialog asks'
    if behavior == "allow" and answer is None:
        return (
            "allowed with an updatedInput that differs from the call's input; this agent does "
            "not rewrite calls, so it is no answer: the dialog asks"
        )
    return None


KINDS = ("allow", "ask", "deny")
"""The rule kinds an ``addRules`` entry's ``behavior`` may name."""


def hook_rules(updated: object) -> tuple[list[dict[str, str]], list[str]]:
    """The session rules an allow's ``updatedPermissions`` asks to add — ``[{"rule":
    "Bash(npm test)", "kind": "allow"}, ...]``, in the agent's grammar (``toolName`` and
    ``ruleContent`` as ``Tool(content)``, ``Tool`` without content) — and one sentence per
    entry or rule that is not applied or is applied otherwise than asked (for the log)."""
    if updated is None:
        return [], []
    if not isinstance(updated, list):
        return [], [f"its updatedPermissions is not a list ({type(updated).__name__}): ignored"]
    rules: list[dict[str, str]] = []
    said: list[str] = []
    for entry in updated:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(entry, dict):
            said.append(f"an updatedPermissions entry is not an object ({entry!r}): ignored")
            continue
        kind: Any = entry.get("type")  # pyright: ignore[reportUnknownMemberType]
        if kind != "addRules":
            said.append(
                f"its updatedPermissions entry of type {kind!r} is not applied here (only "
                "addRules is: rules kept for this session)"
            )
            continue
        behavior: Any = entry.get("behavior")  # pyright: ignore[reportUnknownMemberType]
        listed: Any = entry.get("rules")  # pyright: ignore[reportUnknownMemberType]
        if behavior not in KINDS or not isinstance(listed, list):
            said.append(
                "an addRules entry needs a behavior (allow, ask or deny) and a list of rules: "
                f"{json.dumps(entry)[:200]} is ignored"
            )
            continue
        destination: Any = entry.get("destination", "session")  # pyright: ignore[reportUnknownMemberType]
        texts: list[str] = []
        for item in listed:  # pyright: ignore[reportUnknownVariableType]
            tool: Any = item.get("toolName") if isinstance(item, dict) else None  # pyright: ignore[reportUnknownMemberType]
            content: Any = item.get("ruleContent") if isinstance(item, dict) else None  # pyright: ignore[reportUnknownMemberType]
            if (
                not isinstance(tool, str)
                or not tool.strip()
                or not (content is None or isinstance(content, str))
            ):
                said.append(f"an addRules rule needs a toolName: {item!r} is ignored")
                continue
            text = f"{tool.strip()}({content})" if content else tool.strip()
            texts.append(text)
            rules.append({"rule": text, "kind": behavior})
        if destination != "session" and texts:
            said.append(
                f"its {behavior} rules {', '.join(texts)} are for {destination!r}; they are kept "
                "for this session only (a hook's rules are never written into a settings file)"
            )
    return rules, said


async def answer_permission(
    hooks: HookRunner, call: dict[str, Any], conversation_id: int, ctx: Context
) -> Any:
    """The ``permission_request`` handler: run the ``PermissionRequest`` hooks whose matcher
    takes the call's tool (the session's, then those of the subagent whose conversation
    ``conversation_id`` is, :mod:`.agent_hooks`); ``{"behavior": "allow" | "deny", "by": "PermissionRequest hook
    `<command>`", "message"?: str, "interrupt"?: true, "rules"?: [{"rule", "kind"}]}`` (a
    deny's ``interrupt``, the ``rules`` of every hook that allowed: :func:`hook_rules`) or
    ``None`` (no hook, or none answered)."""
    name, arguments = str(call.get("name", "")), call.get("arguments", {})
    names = tool_names(name, arguments)
    found = await hooks.agents.add(hooks.loaded, EVENT, conversation_id, ctx)
    matching = [h for h in found if h.matches(names)]
    if not matching:
        return None
    tool_name, tool_input = claude_tool(name, arguments, hooks.cwd)
    payload = hooks.payload(EVENT, tool_name=tool_name, tool_input=tool_input)
    allowed: dict[str, Any] | None = None
    rules: list[dict[str, str]] = []
    for hook in matching:
        run = await hooks.run(hook, payload, ctx)
        answer = permission_verdict(run, tool_input)
        said = _said(run, answer)
        where = f"{EVENT} hook `{hook.label}` ({hook.source})"
        if said is not None:
            _log.warning("%s %s", where, said)
        if run.timed_out or run.exit_code not in (0, 2):
            _log.warning("%s gave no decision; the approval dialog asks", where)
        if answer is None:
            continue
        by = f"{EVENT} hook `{hook.label}`"
        behavior, message = answer
        decision = _decision(run)
        if behavior == "deny":  # the approval feature logs the decision it makes of it
            denied: dict[str, Any] = {"behavior": "deny", "by": by, "message": message}
            if decision.get("interrupt") is True:
                denied["interrupt"] = True
            return denied
        kept, problems = hook_rules(decision.get("updatedPermissions"))
        for problem in problems:
            _log.warning("%s %s", where, problem)
        rules.extend(r for r in kept if r not in rules)
        if allowed is None:
            allowed = {"behavior": "allow", "by": by}
    if allowed is not None and rules:
        allowed["rules"] = rules
    return allowed


def _decision(run: HookRun) -> dict[str, Any]:
    """The hook's ``decision`` object (``{}`` when it printed none)."""
    specific: Any = (run.output or {}).get("hookSpecificOutput")
    decision: Any = specific.get("decision") if isinstance(specific, dict) else None
    return decision if isinstance(decision, dict) else {}  # pyright: ignore[reportUnknownVariableType]
