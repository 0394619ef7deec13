"""What a hook's exit code and output mean for each event (Claude Code's rules).

* Exit 0: success. Stdout that is a JSON object is the hook's *output* (below); other stdout is
  shown to nobody, except for ``UserPromptSubmit`` and ``SessionStart``, where it is context
  added for the model.
* Exit 2: a blocking error; stderr is the reason. ``PreToolUse``: the call is blocked and the
  model reads it. ``PostToolUse``: the model reads it beside the result (the tool already ran).
  ``UserPromptSubmit``: the prompt is blocked. ``Stop``/``SubagentStop``: the model goes on with
  it as its next instruction. Other events: shown to the user only.
* Any other exit code, or a timeout: a non-blocking error, shown to the user; nothing changes.

The JSON output's fields, as Claude Code names them: ``continue`` (``false`` stops: for a tool
call it blocks with ``stopReason``), ``stopReason``, ``suppressOutput`` (accepted; the worker
shows no hook's stdout anyway), ``systemMessage`` (logged for the user), ``decision``
(``"block"``; ``"approve"`` adds nothing), ``reason``, and ``hookSpecificOutput`` with
``permissionDecision`` (``"allow"``, ``"deny"``, ``"ask"``), ``permissionDecisionReason`` and
``updatedInput`` (``PreToolUse``: a changed input blocks the call, see :func:`pre_verdict`),
``updatedToolOutput``/``updatedMCPToolOutput`` (``PostToolUse``: :func:`replaced_output`) or ``additionalContext`` (``UserPromptSubmit``, ``SessionStart``,
``PostToolUse``).
"""

from __future__ import annotations

import json
from typing import Any

from .protocol import HookRun

__all__ = [
    "post_notes",
    "pre_verdict",
    "prompt_verdict",
    "replaced_output",
    "start_context",
    "stop_continuation",
]


def _specific(output: dict[str, Any]) -> dict[str, Any]:
    value = output.get("hookSpecificOutput")
    return value if isinstance(value, dict) else {}  # pyright: ignore[reportUnknownVariableType]


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def pre_verdict(run: HookRun, tool_input: object = None) -> dict[str, str]:
    """A ``PreToolUse`` hook's verdict: ``{"block": reason}`` (``""``: the call may go on to
    the session's approval). Plain JSON: it is the memo.

    ``tool_input`` is the input the hook was shown (Claude Code's field names). A hook whose
    ``hookSpecificOutput.updatedInput`` differs from it meant the call to run *changed* (a
    command with ``--dry-run`` added, a path moved into a sandbox folder); this agent does not
    rewrite calls, and running the original would silently undo the hook's intent, so the
    call is blocked instead, telling the model what the hook wanted (it fails closed)."""
    if run.exit_code == 2:
        reason = _text(run.stderr) or "(the hook gave no reason on stderr)"
        return {"block": reason if run.failed else f"PreToolUse hook: {reason}"}  # names it
    output = run.output
    if output is None:
        return {"block": ""}
    if output.get("continue") is False:
        reason = _text(output.get("stopReason")) or "the hook asked to stop"
        return {"block": f"PreToolUse hook stopped it: {reason}"}
    specific = _specific(output)
    decision = specific.get("permissionDecision")
    reason = _text(specific.get("permissionDecisionReason")) or _text(output.get("reason"))
    if decision == "deny" or (decision is None and output.get("decision") == "block"):
        return {"block": f"PreToolUse hook denied it: {reason or 'no reason given'}"}
    if decision == "ask":
        return {
            "block": "A PreToolUse hook asks the user to confirm this call, which hooks cannot "
            "do here, so it was not run. Ask the user to confirm, or to run it themselves"
            + (f": {reason}" if reason else ".")
        }
    updated = specific.get("updatedInput")
    if updated is not None and updated != tool_input:
        return {
            "block": "A PreToolUse hook rewrote this call's input (updatedInput), which this "
            "agent does not apply, so the call was not run as written. Make the call again "
            f"with the hook's input instead: {json.dumps(updated)}"
            + (f" ({reason})" if reason else "")
        }
    return {"block": ""}


def post_notes(run: HookRun, event: str = "PostToolUse") -> list[str]:
    """What a ``PostToolUse`` (or ``PostToolUseFailure``: ``event``) hook adds to the result
    the model reads."""
    if run.exit_code == 2:
        reason = _text(run.stderr)
        return [f"{event} hook feedback: {reason}"] if reason else []
    output = run.output
    if output is None:
        return []
    notes: list[str] = []
    if output.get("decision") == "block":
        notes.append(f"{event} hook feedback: {_text(output.get('reason')) or 'blocked'}")
    context = _text(_specific(output).get("additionalContext"))
    if context:
        notes.append(f"{event} hook additional context: {context}")
    return notes


def replaced_output(run: HookRun) -> str | None:
    """The text a ``PostToolUse`` hook puts in place of the tool's result (``None``: it keeps
    it): ``hookSpecificOutput.updatedToolOutput``, else ``updatedMCPToolOutput`` (Claude Code
    applies that one to MCP tools only; here to any tool, since a hook that sets it means the
    model must not read the original, a secret it redacts say). A string is the text; MCP
    content (``[{"type": "text", "text": ...}]``) its texts; anything else its JSON."""
    output = run.output
    if output is None:
        return None
    specific = _specific(output)
    value = specific.get("updatedToolOutput", specific.get("updatedMCPToolOutput"))
    if value is None:
        return None
    if isinstance(value, str):
        return value
    blocks = value.get("content") if isinstance(value, dict) else value
    if isinstance(blocks, list) and all(
        isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        for b in blocks
    ):
        return "\n".join(b["text"] for b in blocks)
    return json.dumps(value)


def prompt_verdict(run: HookRun) -> dict[str, str]:
    """A ``UserPromptSubmit`` hook's verdict: ``{"context": ..., "blocked": reason}``."""
    if run.exit_code == 2:
        return {"context": "", "blocked": _text(run.stderr) or "blocked by a hook"}
    if run.exit_code != 0:
        return {"context": "", "blocked": ""}
    output = run.output
    if output is None:
        return {"context": _text(run.stdout), "blocked": ""}
    if output.get("continue") is False:
        return {"context": "", "blocked": _text(output.get("stopReason")) or "stopped by a hook"}
    if output.get("decision") == "block":
        return {"context": "", "blocked": _text(output.get("reason")) or "blocked by a hook"}
    return {"context": _text(_specific(output).get("additionalContext")), "blocked": ""}


def stop_continuation(run: HookRun) -> str:
    """What a ``Stop``/``SubagentStop`` hook tells the model to go on with (``""``: stop)."""
    if run.exit_code == 2:
        return _text(run.stderr)
    output = run.output
    if output is None or output.get("continue") is False:
        return ""
    if output.get("decision") == "block":
        return _text(output.get("reason"))
    return ""


def start_context(run: HookRun) -> str:
    """What a ``SessionStart`` hook adds to the context (``""``: nothing)."""
    if run.exit_code != 0:
        return ""
    output = run.output
    if output is None:
        return _text(run.stdout)
    return _text(_specific(output).get("additionalContext"))
