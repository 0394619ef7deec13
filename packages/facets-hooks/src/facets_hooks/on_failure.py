"""Claude Code's ``"onFailure"``: what a hook that *fails* means, and failing closed.

By default (``"onFailure": "continue"``) a hook that cannot start, times out or exits with a
code other than 0 and 2 is a non-blocking error: logged for the user, and the action goes on.
A guard hook that crashes or hangs then lets through what it was there to stop. Claude Code
2.1.295 added ``"onFailure": "block"`` on a hook entry (``command``, ``http`` and ``mcp_tool``
hooks): such a failure then *blocks the action as exit code 2 does*, with a reason naming the
hook and the failure. This module owns that rule:

* :func:`failure_of` says whether a finished :class:`~.protocol.HookRun` failed, and how: it
  could not start, it timed out, it exited with an unexpected code (127: its program was not
  found, 126: not executable; an HTTP hook's program exits 1 when the server cannot be reached
  or answers a non-2xx status), or it exited 0 with stdout that opens a JSON object and is not
  one (a guard that meant to print a decision and printed broken JSON; plain text is not a
  failure, as in Claude Code, where it is only context or nothing), or a JSON object whose
  ``hookSpecificOutput.permissionDecision`` is none of ``allow``, ``deny``, ``ask`` (``"Deny"``:
  a guard's verdict misspelled, which would otherwise read as no verdict and let the call on);
* :func:`apply_on_failure` turns a failed run of a ``block`` hook into the run of a hook that
  exited 2 with the reason on stderr, so every event's own rule for exit 2 applies unchanged
  (:mod:`.verdicts`, :mod:`.permission`): ``PreToolUse`` blocks the call (the model reads the
  reason), ``PermissionRequest`` refuses it, ``UserPromptSubmit`` blocks the prompt,
  ``Stop``/``SubagentStop`` make the model go on (once: see the session facet),
  ``PostToolUse``/``PostToolUseFailure`` add the reason beside the result, and the events that
  cannot block (``SessionStart``, ``SessionEnd``, ``PreCompact``, ``Notification``) log it.

An ``onFailure`` that is neither ``"continue"`` nor ``"block"`` (a typo such as ``"deny"``, a
non-string) is read as ``"block"``, with a settings problem saying so: whoever wrote the field
meant to change the default, and the only change there is is failing closed, so guessing
``continue`` would silently reopen the hole the field closes.
"""

from __future__ import annotations

import json
from dataclasses import replace

from .protocol import HookRun

__all__ = ["BLOCK", "CONTINUE", "ON_FAILURE_TYPES", "apply_on_failure", "failure_of"]

CONTINUE = "continue"
"""The default: a failed hook is a non-blocking error (the action goes on)."""
BLOCK = "block"
"""A failed hook blocks the action as exit code 2 does."""

ON_FAILURE_TYPES = frozenset({"command", "http", "mcp_tool"})
"""The hook types ``onFailure`` applies to, as in Claude Code (a ``prompt`` or ``agent`` hook's
error gives no verdict, never a pass: see :mod:`.prompt_hooks`)."""

_DECISIONS = ("allow", "deny", "ask")
"""The values of a ``PreToolUse`` hook's ``hookSpecificOutput.permissionDecision``."""

_EXIT_MEANINGS = {126: "its program is not executable", 127: "its program was not found"}


def failure_of(run: HookRun, timeout: float) -> str:
    """How ``run`` failed, for the user and the model (``""``: it did not fail). ``timeout`` is
    the hook's, in seconds."""
    if run.timed_out:
        return f"it timed out after {timeout:g} s and was stopped"
    detail = run.stderr.strip()
    if run.exit_code is None:
        return detail or "it could not start"
    if run.exit_code not in (0, 2):
        meaning = _EXIT_MEANINGS.get(run.exit_code)
        said = f"it exited with code {run.exit_code}" + (f" ({meaning})" if meaning else "")
        return f"{said}: {detail}" if detail else f"{said}, with no output on stderr"
    if run.exit_code == 0 and run.stdout.strip().startswith("{") and run.output is None:
        return "it printed invalid JSON on stdout (a JSON object was expected)"
    specific = (run.output or {}).get("hookSpecificOutput")
    if isinstance(specific, dict) and "permissionDecision" in specific:
        decision: object = specific["permissionDecision"]  # pyright: ignore[reportUnknownVariableType]
        if decision not in _DECISIONS:  # `"Deny"`, `"block"`: a verdict misspelled is no pass
            return (
                f"it printed the permissionDecision {json.dumps(decision)}, which is none of "
                f"{', '.join(_DECISIONS)}"
            )
    return ""


def apply_on_failure(run: HookRun, *, name: str, timeout: float) -> HookRun:
    """``run`` of a hook with ``"onFailure": "block"``: unchanged when it did not fail, else
    the run of a hook that exited 2 with the reason on stderr (``name`` names the hook, as
    ``PreToolUse hook `guard.sh` (~/.claude/settings.json)``) and :attr:`HookRun.failed` set."""
    failure = failure_of(run, timeout)
    if not failure:
        return run
    reason = (
        f'{name} failed and its onFailure is "block", so this was blocked: {failure}. '
        "Fix the hook (or remove it) for this to go on."
    )
    return replace(run, exit_code=2, stderr=reason, timed_out=False, failed=failure)
