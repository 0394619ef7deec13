"""A subagent's own hooks: the ``hooks`` of its agent definition, for its conversation alone.

The subagents feature stores a definition's ``hooks`` in its task's input under
:data:`AGENT_HOOKS_KEY` (``{"source": <agent file>, "hooks": {event: [...]}}``, settings.json's
shape, ``Stop`` already renamed ``SubagentStop`` as Claude Code does for a subagent's
frontmatter). This module reads it, by that name — features never import each other — from the
``subagents.run`` task that owns a conversation, and parses it as a settings file is parsed
(:func:`~.settings.parse_settings`: the same events, matchers, ``command``/``http`` entries, and
one problem line for what is not honoured). The session facet runs those hooks after the
session's, with the same runner, only on that conversation's events: its tool calls and its
``SubagentStop``, and its ``PermissionRequest`` (the approval dialog its calls would open) and
``Notification`` (its calls waiting for the user) events; the root and other subagents never
see them.

**An agent hook's own subagent** (a ``"type": "agent"`` hook's, :mod:`.hook_agents`: its
conversation is owned by a task of kind :data:`~.hook_agents.HOOK_AGENT_KIND`) runs no hooks
at all: neither the session's nor any of its own (:meth:`AgentHooks.add` gives none), so a hook
never judges the calls of the agent that judges for it, and an agent hook on ``Read`` cannot
call itself.

**Trust.** A project's agent files are read only when it is trusted and a plugin's agent gets no
hooks (the subagents feature sees to both); and since a task's input outlives the session that
wrote it, a definition of the project's own agent folders is checked again here when its hooks
would run: while the project is not trusted (:func:`untrusted_source`), they do not run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from chord import Context

from .settings import HookSpec, LoadedHooks, parse_settings

__all__ = ["AGENT_HOOKS_KEY", "HOOK_AGENT_KIND", "SUBAGENT_KIND", "AgentHooks", "untrusted_source"]

AGENT_HOOKS_KEY = "hooks"
"""The key of a ``subagents.run`` task's input holding its definition's own hooks."""
SUBAGENT_KIND = "subagents.run"
"""The only task kind whose input's hooks are run (the subagents feature's)."""
HOOK_AGENT_KIND = "hooks.agent"
"""The task kind of an agent hook's subagent (:mod:`.hook_agents`): its conversation runs no
hooks."""
PROJECT_AGENT_FOLDERS = (".claude", ".coding-agent")


def untrusted_source(
    source: str, project: str | None, trusted: bool, env: Mapping[str, str]
) -> bool:
    """Whether ``source`` (an agent file) is one of the project's own (under its ``.claude/``
    or ``.coding-agent/``, not the user's ``~/.claude/`` when the project is the home folder)
    while the project is not trusted."""
    if trusted or not project:
        return False
    try:
        path = Path(source).resolve()
        home = Path(env.get("HOME") or Path.home()).resolve()
        root = Path(project).resolve()
    except (OSError, RuntimeError):
        return True  # a doubt is no grant
    for folder in PROJECT_AGENT_FOLDERS:
        base = root / folder
        if path.is_relative_to(base) and not (root == home and folder == ".claude"):
            return True
    return False


class AgentHooks:
    """Each conversation's own hooks (those of the subagent definition its task ran), read once
    per conversation: a task's input never changes."""

    def __init__(self, harness: Any, warn: Callable[[str], None]) -> None:
        self._harness = harness
        self._warn = warn
        self._found: dict[int, LoadedHooks] = {}
        self._quiet: set[int] = set()  # the conversations of agent hooks' subagents
        self._project: str | None = None
        self._trusted = False
        self._env: Mapping[str, str] = os.environ

    def load(self, services: Mapping[str, Any]) -> None:
        """Take the project, its trust and the environment from the harness ``services`` (as
        the settings' hooks are loaded), and forget what was read."""
        project = services.get("project_root") or services.get("workspace")
        self._project = str(project) if project else None
        self._trusted = bool(services.get("project_trusted", False))
        env = services.get("mcp_env")
        self._env = os.environ if env is None else env
        self._found.clear()
        self._quiet.clear()

    async def add(
        self, loaded: LoadedHooks, event: str, conversation_id: int, ctx: Context
    ) -> list[HookSpec]:
        """``loaded``'s hooks of ``event`` (the session's), then the conversation's own; none
        for an agent hook's subagent."""
        own = await self.of(conversation_id, ctx)
        if conversation_id in self._quiet:
            return []
        return [*loaded.for_event(event), *own.for_event(event)]

    async def of(self, conversation_id: int, ctx: Context) -> LoadedHooks:
        """The hooks of the definition whose task owns the conversation (none for another
        conversation); each problem is warned about (once)."""
        found = self._found.get(conversation_id)
        if found is not None:
            return found
        found = LoadedHooks()
        task = await self._harness.harness.owner_task(conversation_id, ctx)
        if task is not None and task.kind == HOOK_AGENT_KIND:
            self._quiet.add(conversation_id)
        given: Any = task.input if task is not None and task.kind == SUBAGENT_KIND else None
        entry = given.get(AGENT_HOOKS_KEY) if isinstance(given, dict) else None
        if isinstance(entry, dict) and isinstance(entry.get("hooks"), dict):  # pyright: ignore[reportUnknownMemberType]
            source = str(entry.get("source") or "an agent definition")  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
            if untrusted_source(source, self._project, self._trusted, self._env):
                self._warn(
                    f"{source}: hooks not run: the project is not trusted (/trust), and "
                    "this agent file is the project's"
                )
            else:
                hooks, problems = parse_settings({"hooks": entry["hooks"]}, source)
                for problem in problems:
                    self._warn(problem)
                found = LoadedHooks(tuple(hooks), tuple(problems))
        self._found[conversation_id] = found
        return found
