"""The question TUI facet: one modal per open question, nothing else.

The facet shows :data:`~.contract.QuestionDialogs` (possibly provided by another process) with
chord's keyed dialogs (:func:`chord.textual.show_dialogs`): one task per live instance,
including ones already open when this presentation connected (they arrive hydrated). The task
waits for chord's modal slot, shows the question with its options and, when the request allows
it, a free-text field (:func:`ask_question`), and submits the answer; Escape submits a
cancellation.

Closing the instance (answered elsewhere, or the call was aborted) cancels the observer's
``ctx``, which unwinds the wait and dismisses the dialog through ``modal.close()``.
"""

from __future__ import annotations

from typing import Any

from chord import FacetEnvironment, define_facet
from chord.textual import Modal, show_dialogs

from .contract import QuestionDialogs, QuestionResponse

__all__ = ["ask_question", "response_for", "tui_facet"]


def response_for(answer: str | None) -> QuestionResponse:
    """The response a modal answer stands for (``None``, i.e. Escape, cancels)."""
    if answer is None:
        return {"outcome": "cancelled", "by": "tui"}
    return {"outcome": "answered", "answer": answer, "by": "tui"}


async def ask_question(modal: Modal, request: Any) -> QuestionResponse:
    """Ask one question on ``modal``: its options and, when the request allows it (or offers
    no option), a free-text field; the response the answer stands for (:func:`response_for`)."""
    options: list[str] = list(request["options"])
    answer = await modal.choose(
        request["question"],
        options,
        allow_text=bool(request["allowText"]) or not options,
    )
    return response_for(answer)


@define_facet("@pi/question")
def tui_facet(env: FacetEnvironment) -> None:
    """Show a modal for every open question and submit the user's answer."""
    show_dialogs(env, QuestionDialogs, ask_question)
