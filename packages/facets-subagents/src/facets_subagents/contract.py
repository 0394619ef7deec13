"""What every side of the subagents feature agrees on (no host code).

The ``agent`` tool runs one task of kind :data:`SUBAGENT_KIND` per call; the task owns a durable
conversation (the subagent's transcript) and its ``describe`` is a :class:`SubagentStatus`,
which every conversation view shows under ``tasks[id].status`` (the TUI's tasks panel renders
it). Presentations find the subagent's own conversation through ``status.conversation`` and its
view through the ordinary ``pi.conversation`` service.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

__all__ = ["AGENT_TOOL", "SUBAGENT_KIND", "SubagentStatus"]

SUBAGENT_KIND = "subagents.run"
AGENT_TOOL = "agent"


class SubagentStatus(TypedDict):
    label: str
    """The call's ``description`` (three to five words)."""
    agent: str
    """The agent definition's name (``subagent_type``)."""
    progress: str
    """The current step: ``starting``, ``running grep (3 tool calls)`` (``resumed`` after a
    restart); the final answer has no step of its own (the task completes next). While the
    subagent runs one of its own, the step ends with that one's: ``running agent (1 tool call) ›
    running grep (2 tool calls)``."""
    conversation: NotRequired[int]
    """The subagent's conversation id, once it exists."""
