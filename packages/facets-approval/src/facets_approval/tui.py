"""The approval TUI facet: one modal per open dialog, nothing else.

The facet holds no authority and no state. It observes :data:`~.contract.ApprovalDialogs`
(possibly provided by another process): chord runs one observer task per live instance,
including instances that were already open when this presentation connected (they arrive
hydrated, so ``request.value`` is there). The task waits for chord's modal slot
(:meth:`~chord.textual.TuiService.acquire_modal`, one dialog on screen at a time), offers
*Allow*, *Always allow <tool>* and *Deny*, and calls ``decide``.

Closing the instance — the session recorded a decision, maybe from another presentation, or the
call was aborted — cancels the observer's ``ctx``; that unwinds the wait for the slot or for the
user, and ``modal.close()`` dismisses a dialog still on screen. Escape counts as *Deny*, like the
seed's confirm dialog.
"""

from __future__ import annotations

import json
from typing import Any

from chord.context import Context
from chord.facets import FacetEnvironment, define_facet
from chord.textual import Choice, Tui

from .contract import ApprovalDecision, ApprovalDialogs

__all__ = ["ALLOW", "ALWAYS", "DENY", "approval_choices", "decision_for", "tui_facet"]

ALLOW = "allow"
ALWAYS = "always"
DENY = "deny"


def approval_choices(tool: str) -> list[Choice]:
    """The options the modal offers for ``tool``, in order (the first is focused)."""
    return [
        Choice(ALLOW, "Allow"),
        Choice(ALWAYS, f"Always allow {tool} in this conversation"),
        Choice(DENY, "Deny"),
    ]


def decision_for(choice: str | None) -> ApprovalDecision:
    """The decision a modal answer stands for (``None``, i.e. Escape, denies)."""
    if choice == ALLOW:
        return {"decision": "allow", "by": "tui"}
    if choice == ALWAYS:
        return {"decision": "allow", "always": True, "by": "tui"}
    return {"decision": "deny", "by": "tui"}


def _pretty(args: Any) -> str:
    return json.dumps(args, indent=2, ensure_ascii=False, sort_keys=True)


@define_facet("@pi/approval")
def tui_facet(env: FacetEnvironment) -> None:
    """Show a modal for every open approval dialog and send the user's decision."""
    tui = env.use(Tui)

    async def show_dialog(dialog: Any, ctx: Context) -> None:
        request = dialog.request.value
        if request is None:  # the provider went away before the task started
            return
        modal = await tui.acquire_modal(ctx)
        try:
            choice = await modal.choose(
                f"Allow {request['name']}?",
                approval_choices(request["name"]),
                body=_pretty(request["args"]),
            )
            await dialog.decide(decision_for(choice), ctx)
        finally:
            modal.close()

    env.observe(ApprovalDialogs, show_dialog)
