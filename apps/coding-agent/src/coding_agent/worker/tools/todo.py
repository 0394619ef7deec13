"""The ``todo`` tool: the model's task list for the work at hand (Claude Code's ``TodoWrite``).

One argument, ``todos``: the whole list, each item ``{content, status, activeForm}`` where
``status`` is ``pending``, ``in_progress`` or ``completed``, ``content`` says what to do
("Run the tests") and ``activeForm`` the same while it is being done ("Running the tests").
Each call replaces the list; ``todos: []`` clears it. The result echoes the list with a mark per
item, so the model sees what it keeps.

Where it is kept: the :class:`TodoStore` of the call's :class:`~.spec.ToolContext`. In a
session (:mod:`coding_agent.worker.tools_facet`) that is the ``todos`` slot of the *rewindable*
namespace :data:`TODO_NAMESPACE`, written in the same commit as the call's result: the list
survives a crash of the worker (it is in the journal, or the call never finished and runs again),
follows ``/rewind`` and ``/fork`` (a rewound conversation has the list as of that point), and is
projected into the conversation's view (``plugins["coding-agent.todo"]["todos"]``), where the
TUI's tasks panel shows it. The tool has no effect outside the conversation, so it is declared
``replay="safe"`` (a call interrupted by a crash simply runs again: it writes the same list) and
runs in every permission mode without asking.
"""

from __future__ import annotations

from typing import Any

from coding_agent.contracts import TODO_NAMESPACE

from .host import TodoStore
from .spec import OnUpdate, ToolContext, ToolError, ToolResult, ToolSpec, text_result

__all__ = ["TODO_NAMESPACE", "TODO_STATUSES", "TODO_TOOL", "TodoStore", "todo_text"]

TODO_STATUSES = ("pending", "in_progress", "completed")
_MARKS = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "todos": {
            "type": "array",
            "description": "The whole updated todo list (it replaces the previous one)",
            "items": {
                "type": "object",
                "properties": {
                    "content": {
                        "type": "string",
                        "minLength": 1,
                        "description": "What to do, imperative: 'Run the tests'",
                    },
                    "status": {"type": "string", "enum": list(TODO_STATUSES)},
                    "activeForm": {
                        "type": "string",
                        "minLength": 1,
                        "description": "The same while doing it: 'Running the tests'",
                    },
                },
                "required": ["content", "status", "activeForm"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["todos"],
    "additionalProperties": False,
}


def todo_text(todos: list[dict[str, str]]) -> str:
    """The list as the model and a plain transcript read it: one ``[x] content`` line each."""
    if not todos:
        return "The todo list is empty."
    return "\n".join(f"{_MARKS.get(t['status'], '[ ]')} {t['content']}" for t in todos)


async def _todo(
    args: dict[str, Any], tools: ToolContext, _on_update: OnUpdate | None
) -> ToolResult:
    todos = [
        {"content": t["content"], "status": t["status"], "activeForm": t["activeForm"]}
        for t in args["todos"]
    ]
    if tools.todos is None:
        raise ToolError("The todo list is not available in this session")
    await tools.todos.put(todos)
    working = [t for t in todos if t["status"] == "in_progress"]
    done = sum(t["status"] == "completed" for t in todos)
    text = (
        f"Todo list updated ({done}/{len(todos)} done):\n{todo_text(todos)}"
        if todos
        else ("The todo list is cleared.")
    )
    if len(working) > 1:
        text += "\n\nNote: keep one item in_progress at a time; finish it before the next."
    return text_result(text, {"todos": todos})


TODO_TOOL = ToolSpec(
    name="todo",
    description=(
        "Keep a todo list for the current task and show the user your progress. Use it for "
        "work of three or more steps: write the whole list with every call, mark one item "
        "in_progress before starting it and completed as soon as it is done (not in batches), "
        "and add items you discover. Skip it for a single simple step."
    ),
    parameters=PARAMETERS,
    handler=_todo,
)
