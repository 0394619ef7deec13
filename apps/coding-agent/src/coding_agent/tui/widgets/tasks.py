"""The background tasks panel: one row per live task of ``view.tasks``, and the model's todo list.

The view holds only live non-turn tasks (docs/design/view.md#shape): ``{kind, background?, marked?,
status}``, where ``status`` is what the kind's ``describe`` returned, or ``{phase}``. The panel
shows a short summary of it. Below, the ``todo`` tool's list (the view's
``plugins["coding-agent.todo"]["todos"]``) while any item of it is unfinished: ``✔`` done,
``▶`` in progress (its ``activeForm``), ``○`` pending. The panel hides itself when nothing runs
and no todo is open.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.text import Text
from textual.widgets import Static

from chord import inert
from coding_agent.tui.document import short_json
from pico3 import ViewTask

__all__ = ["TasksPanel", "task_summary"]

_TEXT_KEYS = ("message", "label", "progress", "phase", "stage", "state")
_OUTPUT_KEYS = ("stdout", "stderr")
"""A job's captured output (``pi.job``'s status): its last line is shown."""


def task_summary(status: Any) -> str:
    """A short human summary of a task's ``status`` value."""
    if isinstance(status, str):
        return status
    if isinstance(status, dict):
        parts = [status[key] for key in _TEXT_KEYS if isinstance(status.get(key), str)]
        done, total = status.get("done"), status.get("total")
        if type(done) is int and type(total) is int and total > 0:
            parts.append(f"{done}/{total} ({100 * done // total}%)")
        for key in _OUTPUT_KEYS:
            lines = str(status.get(key) or "").strip().splitlines()
            if lines:
                parts.append(lines[-1] if len(lines[-1]) <= 60 else lines[-1][:57] + "...")
                break
        if parts:
            return " · ".join(parts)
    return short_json(status, 60)


class TasksPanel(Static):
    """Live background tasks (hidden when there are none)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, markup=False)
        self._tasks: Any = None
        self._todos: Any = None
        self.summary = ""
        """The panel's plain text (empty when hidden)."""
        self.display = False

    def show(self, tasks: Mapping[str, ViewTask] | None, todos: Any = None) -> None:
        if tasks is self._tasks and todos is self._todos:
            return
        self._tasks, self._todos = tasks, todos
        rows = list((tasks or {}).items())
        items = [t for t in (todos or []) if isinstance(t, dict)] if isinstance(todos, list) else []
        if all(t.get("status") == "completed" for t in items):
            items = []  # a finished list is not shown
        self.display = bool(rows or items)
        if not rows and not items:
            self.summary = ""
            self.update("")
            return
        text = Text()
        if items:
            self._todo_rows(text, items)
        if rows:
            if items:
                text.append("\n")
            text.append("Tasks", style="bold")
        self._task_rows(text, rows)
        self.summary = text.plain
        self.update(text)

    @staticmethod
    def _todo_rows(text: Text, items: list[dict[str, Any]]) -> None:
        done = sum(t.get("status") == "completed" for t in items)
        text.append("Todo", style="bold")
        text.append(f" {done}/{len(items)}", style="dim")
        for item in items:
            status = item.get("status")
            text.append("\n")
            if status == "completed":
                text.append("✔ ", style="green")
                text.append(inert(str(item.get("content", ""))), style="dim strike")
            elif status == "in_progress":
                text.append("▶ ", style="yellow")
                text.append(
                    inert(str(item.get("activeForm") or item.get("content", ""))), style="bold"
                )
            else:
                text.append("○ ", style="dim")
                text.append(inert(str(item.get("content", ""))))

    @staticmethod
    def _task_rows(text: Text, rows: list[tuple[str, Any]]) -> None:
        for key, task in sorted(rows, key=lambda row: int(row[0]) if row[0].isdigit() else 0):
            text.append("\n")
            icon = "■" if task.marked else "◐"
            text.append(f"{icon} ", style="yellow" if task.marked else "cyan")
            text.append(inert(task.kind), style="bold")
            text.append(f" #{key}  ", style="dim")
            text.append(inert(task_summary(task.status)))  # a job's output, say
            if task.marked:
                text.append("  (stopping)", style="dim")
