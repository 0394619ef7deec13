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
  ``message``, which the model reads;
* anything else — no output, plain text, a JSON object without a decision, a ``behavior`` that
  is neither, a non-zero exit other than 2, a timeout, a hook that cannot start — is *no
  answer*: the dialog asks as it would have (fail closed: an error never allows);
* an ``allow`` whose ``updatedInput`` differs from the input the hook read is no answer either
  (this agent does not rewrite calls, and running the original would not be what the hook
  allowed), and the log says so; ``updatedPermissions`` (rules to keep) are not kept (the call
  is allowed, the log says the rules were not kept); a deny's ``interrupt`` does not stop the
  turn (the model reads the refusal and goes on), and the log says so.

The matching hooks (matcher on the tool name, as ``PreToolUse``) run one after another in file
order: the first ``deny`` ends the chain and wins; an ``allow`` stands only when no later hook
denies. The answer is the approval feature's decision memo once given, so a restarted worker
does not run the hooks of a call already decided.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from chord import Context

from .protocol import HookRun, claude_tool, tool_names
from .settings import HookSpec, LoadedHooks

__all__ = ["HookRunner", "answer_permission", "permission_verdict"]

_log = logging.getLogger("facets_hooks")

EVENT = "PermissionRequest"


class HookRunner(Protocol):
    """What :func:`answer_permission` needs of the session facet's ``Hooks``: the loaded hooks,
    the project folder, the event payload and running one hook."""

    @property
    def loaded(self) -> LoadedHooks: ...

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
    if behavior == "allow" and decision.get("updatedPermissions") is not None:  # pyright: ignore[reportUnknownMemberType]
        return "allowed the call; its updatedPermissions (rules to keep) are not kept here"
    if behavior == "deny" and decision.get("interrupt") is True:  # pyright: ignore[reportUnknownMemberType]
        return "denied with interrupt, which is not honoured here: the call is refused, the turn goes on"
    return None


async def answer_permission(hooks: HookRunner, call: dict[str, Any], ctx: Context) -> Any:
    """The ``permission_request`` handler: run the ``PermissionRequest`` hooks whose matcher
    takes the call's tool; ``{"behavior": "allow" | "deny", "by": "PermissionRequest hook
    `<command>`", "message"?: str}`` or ``None`` (no hook, or none answered)."""
    name, arguments = str(call.get("name", "")), call.get("arguments", {})
    names = tool_names(name, arguments)
    matching = [h for h in hooks.loaded.for_event(EVENT) if h.matches(names)]
    if not matching:
        return None
    tool_name, tool_input = claude_tool(name, arguments, hooks.cwd)
    payload = hooks.payload(EVENT, tool_name=tool_name, tool_input=tool_input)
    allowed: dict[str, Any] | None = None
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
        if behavior == "deny":  # the approval feature logs the decision it makes of it
            return {"behavior": "deny", "by": by, "message": message}
        if allowed is None:
            allowed = {"behavior": "allow", "by": by}
    return allowed
