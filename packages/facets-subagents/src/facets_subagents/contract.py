"""What every side of the subagents feature agrees on (no host code).

The ``agent`` tool runs one task of kind :data:`SUBAGENT_KIND` per call; the task owns a durable
conversation (the subagent's transcript) and its ``describe`` is a :class:`SubagentStatus`,
which every conversation view shows under ``tasks[id].status`` (the TUI's tasks panel renders
it). Presentations find the subagent's own conversation through ``status.conversation`` and its
view through the ordinary ``pi.conversation`` service.

:data:`SubagentDefinitions` (``subagents.definitions``) tells any host which agent definitions
the session loaded, which files it skipped or loaded with a note (each naming the file and
line), and which folders of an untrusted project wait for ``/trust`` (with their file count).
:data:`SubagentForks` (``subagents.fork``) runs one subagent for a host, outside any model
turn: a command or skill with ``context: fork`` that the user ran (:class:`ForkRequest`), bounded
as the ``agent`` tool's subagents are. The host hands the feature its skills through the harness service :data:`SKILLS_SERVICE` (a
:class:`SkillSource`), for the definitions' ``skills``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NotRequired, Protocol, TypedDict

from chord import Context, Service, define_service

__all__ = [
    "AGENT_TOOL",
    "ALLOW_KEY",
    "HOOKS_KEY",
    "MAX_TURNS_KEY",
    "MCP_SERVERS_KEY",
    "MEMORY_KEY",
    "PERMISSION_MODE_KEY",
    "PROJECT_AGENT_KEY",
    "RUN_AGENTS_SERVICE",
    "SKILLS_SERVICE",
    "SUBAGENT_KIND",
    "THINKING_KEY",
    "AgentInfo",
    "DefinitionsSummary",
    "ForkRequest",
    "ForkResult",
    "SkillSource",
    "SubagentDefinitions",
    "SubagentDefinitionsApi",
    "SubagentForks",
    "SubagentForksApi",
    "SubagentStatus",
    "WaitingFolder",
]

SUBAGENT_KIND = "subagents.run"
AGENT_TOOL = "agent"

PERMISSION_MODE_KEY = "permissionMode"
"""The key of a ``subagents.run`` task's input naming a mode its conversation runs in when it
is stricter than the session's (``plan``, ``ask``). The approval feature reads it, by this
name, from every task up a conversation's owner chain (its ``OWNER_MODE_KEY``) and never lets it
loosen the session's mode; without the approval feature no call that needs approval runs."""

MAX_TURNS_KEY = "maxTurns"
"""The key of a ``subagents.run`` task's input holding the definition's ``maxTurns``: the
subagent stops after that many model turns and reports what it has, saying so."""

MCP_SERVERS_KEY = "mcpServers"
"""The key of a ``subagents.run`` task's input holding the definition's ``mcpServers``: a list
whose items are a configured server's name or ``{name: entry}`` (``.mcp.json``'s shape). The
MCP feature reads it, by this name, from the task that owns a conversation: it starts the inline
servers when the subagent's first model call is prepared, offers their tools (and the named
servers') to that conversation alone, and stops them when the task ends."""
PROJECT_AGENT_KEY = "projectAgent"
"""The key of a ``subagents.run`` task's input that is ``true`` when its definition is one of
the project's own agent files (read while the project was trusted) and lists ``mcpServers``.
The task's input outlives the session that wrote it, so the MCP feature reads it, by this name,
when the subagent's servers would start (again, after a restart): while the project is not
trusted (``project_trusted``), the definition's inline servers are not started."""
HOOKS_KEY = "hooks"
"""The key of a ``subagents.run`` task's input holding the definition's own ``hooks``:
``{"source": <agent file>, "hooks": {event: [{matcher, hooks: [...]}]}}`` (settings.json's shape,
``Stop`` already renamed ``SubagentStop``). The hooks feature reads it, by this name, from the
task that owns a conversation and runs those hooks for that conversation alone, after the
session's. A project's agent files are read only when it is trusted, and a plugin's agent gets
none, so what reaches here is what the user trusts."""

MEMORY_KEY = "memory"
"""The key of a ``subagents.run`` task's input naming the subagent's memory folder (its
definition's ``memory``): ``{"folder", "base", "scope"}``, the folder created when the call
was made and ``base`` where it must stay. The approval feature reads it, by this name (its
``OWNER_MEMORY_KEY``), for the conversation the task owns: reads and edits inside the folder
are the agent's own and do not ask, while the folder is where it is written."""

ALLOW_KEY = "allow"
"""The key of a ``subagents.run`` task's input holding permission rules (``Bash(git log:*)``)
its subagent's turn may use without asking: a forked command's ``allowed-tools``
(:class:`ForkRequest`). They ride on the prompt the task sends, as a command's do on the
user's turn, so the approval feature applies them as it does any turn's: never past a deny
rule, plan mode or the run's tool list."""

THINKING_KEY = "thinkingLevel"
"""The key of a ``subagents.run`` task's input holding the thinking level the subagent's
conversation is created with: the definition's ``effort`` mapped to ours, else the caller's
level."""

SKILLS_SERVICE = "skills"
"""The harness service (``HarnessOptions.services``) through which the host hands the feature
the skills it loaded (a :class:`SkillSource`): the feature never imports the app, which owns
the skills' folders and format. Without it, a definition's ``skills`` are warned about."""


RUN_AGENTS_SERVICE = "claude_run_agents"
"""The harness service of the agents the user defined for this run (Claude Code's
``--agents``): ``{"source": "--agents", "agents": {name: {"description", "prompt", "tools",
"model", ...}}}``, read as agent files are and replacing a file's agent of the same name."""


class SkillSource(Protocol):
    """What the host provides as the harness service ``skills`` (duck-typed).

    ``skill(name)`` is the skill called ``name`` (a plugin's may be asked for as
    ``plugin:skill``), read afresh: ``{"name", "location", "text"}``, where ``text`` is its
    instructions as the subagent's context carries them (the whole ``SKILL.md`` body, with
    where its relative paths start); ``None`` when no skill has that name. It raises
    ``OSError`` or ``ValueError`` (with a message for the user) when the skill is there but
    cannot be read. ``names()``: every skill's name, for a warning about one not found."""

    def skill(self, name: str) -> Mapping[str, str] | None: ...

    def names(self) -> list[str]: ...


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


class AgentInfo(TypedDict):
    name: str
    """The id ``subagent_type`` takes."""
    description: str
    source: str
    """The file it came from (``built-in`` for ``general-purpose``)."""
    writtenName: NotRequired[str]
    """The ``name`` as the file writes it, when it is not an id as it stands (``api.designer``
    for ``api-designer``)."""


class WaitingFolder(TypedDict):
    folder: str
    """Relative to the project root: ``.claude/agents`` or ``.coding-agent/agents``."""
    count: int
    """Its agent files (``*.md``, searched recursively)."""


class DefinitionsSummary(TypedDict):
    agents: list[AgentInfo]
    skipped: list[str]
    """Files not loaded, each ``path:line: problem; the agent is skipped``."""
    warnings: list[str]
    """Files loaded with a note (a tool they do not get), each ``path:line: ...``."""
    waiting: list[WaitingFolder]
    """An untrusted project's agent folders (empty when trusted, or when it has none)."""


class SubagentDefinitionsApi(Protocol):
    async def summary(self, ctx: Context) -> DefinitionsSummary:
        """What the session's subagents feature loaded, skipped and leaves waiting."""
        ...


SubagentDefinitions: Service[SubagentDefinitionsApi] = define_service(
    "subagents.definitions", SubagentDefinitionsApi
)
"""``subagents.definitions``: provided by the session facet (a remotable singleton)."""


class ForkRequest(TypedDict):
    """``subagents.fork``'s ``run`` argument: run ``prompt`` in a subagent of type ``agent``
    owned by conversation ``conversation`` (its task is that conversation's, as an ``agent``
    call's would be: the tasks panel shows it and an abort of the conversation stops it).

    ``model`` (``{"provider", "modelId"}``) replaces the agent's model and ``allow`` lists
    permission rules its turn may use without asking (a command's ``model:`` and
    ``allowed-tools:``). Everything else (tools, system prompt, permission mode, thinking level)
    is the agent's, bounded as an ``agent`` call from that conversation is."""

    conversation: int
    agent: str
    description: str
    """Three to five words: what the tasks panel shows (``/review-pr 42``)."""
    prompt: str
    model: NotRequired[dict[str, str]]
    allow: NotRequired[list[str]]


class ForkResult(TypedDict):
    """``run``'s answer: ``report`` (the subagent's final text) with its ``conversation`` and
    ``task``, or ``error`` alone: an agent type no definition has (the message names the known
    ones), or a subagent that did not finish (why)."""

    agent: str
    report: NotRequired[str]
    conversation: NotRequired[int]
    task: NotRequired[int]
    error: NotRequired[str]


class SubagentForksApi(Protocol):
    async def run(self, request: ForkRequest, ctx: Context) -> ForkResult:
        """Run one subagent (:class:`ForkRequest`) and return when it ends."""
        ...


SubagentForks: Service[SubagentForksApi] = define_service("subagents.fork", SubagentForksApi)
"""``subagents.fork``: provided by the session facet (a remotable singleton); a host reaches it
by this id alone."""
