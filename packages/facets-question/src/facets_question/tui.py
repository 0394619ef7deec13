"""The question TUI facet: one modal per open question, nothing else.

The facet observes :data:`~.contract.QuestionDialogs` (possibly provided by another process);
chord runs one observer task per live instance, including ones already open when this
presentation connected (they arrive hydrated). The task waits for chord's modal slot, shows the
question with its options and, when the request allows it, a free-text field, and submits the
answer; Escape submits a cancellation.

Closing the instance (answered elsewhere, or the call was aborted) cancels the observer's
``ctx``, which unwinds the wait and dismisses the dialog through ``modal.close()``.
"""

from __future__ import annotations

from typing import Any

from chord import Context, FacetEnvironment, define_facet
from chord.textual import Tui

from .contract import QuestionDialogs, QuestionResponse

__all__ = ["response_for", "tui_facet"]


def response_for(answer: str | None) -> QuestionResponse:
    """The response a modal answer stands for (``None``, i.e. Escape, cancels)."""
    if answer is None:
        return {"outcome": "cancelled", "by": "tui"}
    return {"outcome": "answered", "answer": answer, "by": "tui"}


@define_facet("@pi/question")
def tui_facet(env: FacetEnvironment) -> None:
    """Show a modal for every open question and submit the user's answer."""
    tui = env.use(Tui)

    async def show_question(dialog: Any, ctx: Context) -> None:
        request = dialog.request.value
        if request is None:  # the provider went away before the task started
            return
        options: list[str] = list(request["options"])
        modal = await tui.acquire_modal(ctx)
        try:
            answer = await modal.choose(
                request["question"],
                options,
                allow_text=bool(request["allowText"]) or not options,
            )
            await dialog.submit(response_for(answer), ctx)
        finally:
            modal.close()

    env.observe(QuestionDialogs, show_question)
