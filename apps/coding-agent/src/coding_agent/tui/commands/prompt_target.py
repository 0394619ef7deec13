"""What the prompt commands act on: :class:`PromptsTarget`, shared by the skill and template
commands (:mod:`.prompts`), ``/skills`` and ``/context`` (:mod:`.context_window`).

One object per TUI: the conversation client prompts are sent to, the TUI, the worker's
services a command needs, the project folder, and what the last scan found. It lives apart
from the commands so each command module imports it without importing the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chord.textual import TuiService
from coding_agent.context.skills import SkillSet
from coding_agent.tui.conversation_client import RemoteConversationClient

__all__ = ["PromptsTarget"]


@dataclass(slots=True)
class PromptsTarget:
    """What the prompt commands act on: the conversation client (prompts are sent to it), the
    TUI, the project folder, and what the last scan found (:func:`refresh`)."""

    client: RemoteConversationClient
    tui: TuiService
    shell: Any  # the worker's ShellService (a remote service handle): a template's !`cmd`
    folder: Path
    status: Any = None  # the worker's WorkerStatusService: /context's tool sizes
    skills: SkillSet = field(default_factory=SkillSet)
    registered: list[Callable[[], None]] = field(default_factory=lambda: [])
    warned: set[str] = field(default_factory=lambda: set())
    rules: list[Any] = field(default_factory=lambda: [])
    """The approval feature's ``approval.rules`` service once it is active (filled by
    :func:`approval_rules_facet`); empty without the feature."""
    forks: list[Any] = field(default_factory=lambda: [])
    """The subagents feature's ``subagents.fork`` service once it is active (filled by
    :func:`subagent_forks_facet`): a command with ``context: fork`` runs through it; empty
    without the feature."""

    def unregister_all(self) -> None:
        """Drop every ``/skill:`` and template command registered so far."""
        for unregister in self.registered:
            unregister()
        self.registered.clear()
