"""The question session facet: the ``question`` tool, and a dialog per waiting call.

Two layers, as in docs/design/harness.md#tools, docs/design/chord.md#feature-layout.

:func:`question_tool` is the harness tool, usable without chord (a test wires ``ask`` to a
future). Its ``execute`` reads the ``answer`` memo on the tool's slot first (answered before a
crash?); only when there is none does it ask, and then it stores the answer with
``api.memo("answer", candidate)`` — first writer wins, every racer gets the winner. The tool is
``replay: "safe"``: after a crash in ``started`` it runs again and either finds the memo or asks
again, which is harmless for a question. A cancellation is an error result ("User cancelled");
an answer is ``"User answered: <answer>"`` with ``details`` = the arguments plus the answer.

:func:`session_facet` registers the tool with ``ask`` wired to chord's keyed dialogs
(:func:`chord.provide_dialogs`): each waiting call becomes a keyed instance of
:data:`~.contract.QuestionDialogs` under ``"<conversationId>:<callId>"``
(:func:`chord.dialog_key`), spawned before waiting and closed whatever ends the wait (answer,
abort or suspend), which dismisses the question in every presentation. ``submit`` validates
against the request (:func:`~.contract.check_response`) and resolves the local wait; it
records nothing itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from chord import Context, FacetEnvironment, define_facet, dialog_key, provide_dialogs
from pico3 import MISSING, Harness, HarnessService, ToolApi, ToolDeclaration, ToolResult

from .contract import QuestionDialogs, QuestionRequest, QuestionResponse, check_response

__all__ = [
    "QUESTION_PARAMETERS",
    "Ask",
    "install_question",
    "question_tool",
    "session_facet",
]

Ask = Callable[[QuestionRequest, ToolApi, Context], Awaitable[QuestionResponse]]
"""``ask(request, api, ctx) -> response``: how an answer is obtained (a dialog, a future)."""

QUESTION_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {
            "type": "string",
            "minLength": 1,
            "description": "The question to ask the user.",
        },
        "options": {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "uniqueItems": True,
            "description": "Answers to offer (optional).",
        },
        "allowText": {
            "type": "boolean",
            "description": "Whether the user may type an answer of their own (default true).",
        },
    },
    "required": ["question"],
    "additionalProperties": False,
}
"""The JSON Schema of the tool's arguments."""


def _request(args: dict[str, Any], api: ToolApi) -> QuestionRequest:
    options = [str(option) for option in args.get("options", [])]
    return {
        "conversationId": api.conversation_id,
        "callId": api.call_id,
        "taskId": api.task_id,
        "question": str(args["question"]),
        "options": options,
        # With nothing to choose from, typing is the only way to answer.
        "allowText": bool(args.get("allowText", True)) or not options,
    }


def question_tool(ask: Ask) -> ToolDeclaration:
    """The ``question`` tool, asking through ``ask`` (see the module docstring)."""

    async def execute(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        response = await api.memo("answer", ctx)  # answered before a crash?
        if response is MISSING:
            request = _request(args, api)
            candidate = check_response(await ask(request, api, ctx), request)
            response = await api.memo("answer", candidate, ctx)  # first writer wins
        if response["outcome"] == "cancelled":
            return ToolResult.text("User cancelled", is_error=True)
        answer = response["answer"]
        return ToolResult.text(f"User answered: {answer}", details={**args, "answer": answer})

    return ToolDeclaration(
        name="question",
        description="Ask the user a question and wait for the answer.",
        parameters=QUESTION_PARAMETERS,
        execute=execute,
        replay="safe",
    )


def install_question(harness: Harness, ask: Ask) -> Callable[[], None]:
    """Register :func:`question_tool` on ``harness``; returns the (idempotent) unregister."""
    return harness.register_tool(question_tool(ask))


@define_facet("@pi/question")
def session_facet(env: FacetEnvironment) -> None:
    """Register the ``question`` tool; answer it through keyed dialogs."""
    harness = env.use(HarnessService)
    dialogs = provide_dialogs(env, QuestionDialogs, check_response)

    async def ask(request: QuestionRequest, api: ToolApi, ctx: Context) -> QuestionResponse:
        return await dialogs.ask(dialog_key(api.conversation_id, api.call_id), request, ctx)

    def activate() -> None:
        env.own(harness.add_registration(lambda h: install_question(h, ask)))

    env.on_activate(activate)
