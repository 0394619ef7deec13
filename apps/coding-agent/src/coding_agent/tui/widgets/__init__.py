"""Widgets of the coding agent's TUI, each rendering one part of the ``ConversationView``.

The Markdown widgets (:mod:`coding_agent.tui.widgets.markdown`) are not imported here: they load
Textual's Markdown widget, ``markdown_it`` and Pygments, which the first frame does not need.
"""

from coding_agent.tui.widgets.editor import PromptEditor
from coding_agent.tui.widgets.footer import StatusFooter
from coding_agent.tui.widgets.messages import AssistantView, ThinkingBlock
from coding_agent.tui.widgets.palette import CompletionPalette, Suggestion
from coding_agent.tui.widgets.queue import QueuePanel
from coding_agent.tui.widgets.tasks import TasksPanel
from coding_agent.tui.widgets.tools import ToolCard
from coding_agent.tui.widgets.transcript import TAIL, Transcript

__all__ = [
    "TAIL",
    "AssistantView",
    "CompletionPalette",
    "PromptEditor",
    "QueuePanel",
    "StatusFooter",
    "Suggestion",
    "TasksPanel",
    "ThinkingBlock",
    "ToolCard",
    "Transcript",
]
