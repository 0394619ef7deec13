"""The subagents session facet: the ``agent`` tool and the ``subagents.run`` kind.

``agent({description, prompt, subagent_type?})`` resolves the agent definition
(:mod:`.definitions`; default ``general-purpose``; ``subagent_type`` normalised as names are,
so ``api.designer`` finds ``api-designer``), the model (the definition's — an alias such as
``sonnet`` mapped to the caller's provider by :func:`.claude_code.resolve_model`, with the
session's environment, the ``mcp_env`` harness service, as its configuration — else the calling
conversation's) and the tools (the definition's list, less the names no tool of the session
answers to, each warned about once; else the caller's selected tools without ``agent``; for
a subagent's own subagent, never one its caller lacks: :meth:`Subagents.bounded`), the
thinking level (the definition's ``effort``, else the caller's) and the system prompt (the
definition's body, then the full text of each of its ``skills``, read through the ``skills``
harness service the host provides: Claude Code preloads them so), creates one
``subagents.run`` task (:mod:`.kind`) and waits for it. The task
id is memoized on the tool's slot in the commit that creates it, and the tool is
``replay="safe"``: after a
crash the call runs again, finds the memo and waits for the same task, whose own recovery goes
on with the same owned conversation. The ``subagents.fork`` service (:meth:`Subagents.fork`)
runs one the same way for a host (a command with ``context: fork``), outside any model turn.
Several calls in one assistant message run in parallel
(one ``pi.tool`` each). The caller sees only the final report (details: the conversation id).

A hook (harness-wide, cheap for conversations that are not subagents) feeds the
:class:`~.kind.StepBoard` each tool call of a subagent. Its final answer shows no step of its
own: the model's answer is whole when the generation's hooks see it, and the commit that
completes the task (and drops its step) follows with nothing to wait for in between, so a
"writing its report" step would be one durable commit per subagent that no reader keeps.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import replace
from typing import Any, cast

import anyio

from chord import Context, FacetEnvironment, define_facet
from pico3 import (
    MISSING,
    MODEL_CALL_KIND,
    TOOL_KIND,
    HarnessService,
    HarnessServiceApi,
    ToolApi,
    ToolDeclaration,
    ToolResult,
)

from .claude_code import resolve_model
from .contract import (
    AGENT_TOOL,
    ALLOW_KEY,
    HOOKS_KEY,
    MAX_TURNS_KEY,
    MCP_SERVERS_KEY,
    MEMORY_KEY,
    PERMISSION_MODE_KEY,
    PROJECT_AGENT_KEY,
    RUN_AGENTS_SERVICE,
    SKILLS_SERVICE,
    SUBAGENT_KIND,
    THINKING_KEY,
    AgentInfo,
    DefinitionsSummary,
    ForkRequest,
    ForkResult,
    SubagentDefinitions,
    SubagentForks,
)
from .definitions import (
    GENERAL_PURPOSE,
    AgentDefinition,
    Definitions,
    agent_id,
    load_definitions,
    plugin_agent_paths,
)
from .kind import StepBoard, subagent_kind
from .memory import prepare as prepare_memory

__all__ = [
    "AGENT_PARAMETERS",
    "MEMORY_TOOLS",
    "NAMESPACE",
    "NO_REPORT",
    "PLAN_NOTE",
    "SKILLS_NOTE",
    "Subagents",
    "session_facet",
]

_log = logging.getLogger("facets_subagents")
NAMESPACE = "subagents"

PLAN_NOTE = (
    "\n\nYou run in plan mode (read-only): only tools that change nothing run. Investigate, "
    "then report what should be done; do not try to change files or run commands."
)
"""Added to the system prompt of a subagent whose definition says ``permissionMode: plan`` (the
approval feature is what refuses its other calls; this tells the model why)."""

MEMORY_TOOLS = ("read", "write", "edit")
"""Given to a subagent with ``memory`` whose ``tools`` leave them out (when the session has
them), as Claude Code enables Read, Write and Edit for its memory."""

SKILLS_NOTE = (
    "\n\nThese skills are preloaded for you: follow their instructions where your task calls "
    "for them.\n\n"
)
"""Put before the preloaded skills (a definition's ``skills``) at the end of the system
prompt; each skill follows as the ``skills`` harness service gives its text."""

AGENT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "description": {
            "type": "string",
            "minLength": 1,
            "description": "A short (3-5 word) description of the task.",
        },
        "prompt": {
            "type": "string",
            "minLength": 1,
            "description": "The task for the agent to perform, with everything it needs to know.",
        },
        "subagent_type": {
            "type": "string",
            "description": "The agent definition to use (default: general-purpose).",
        },
    },
    "required": ["description", "prompt"],
    "additionalProperties": False,
}


def _server_name(entry: Any) -> str:
    """An ``mcpServers`` entry's server name (a configured server's name, or ``{name: entry}``)."""
    if isinstance(entry, dict):
        return ", ".join(str(name) for name in cast(dict[str, Any], entry))
    return str(entry)


class Subagents:
    """One activation's live pieces: definitions, the step board, the registration."""

    def __init__(self, harness: HarnessServiceApi) -> None:
        self._harness = harness
        self.board = StepBoard()
        self.kind = subagent_kind(self.board)
        self.definitions = Definitions({GENERAL_PURPOSE.name: GENERAL_PURPOSE}, ())
        self.env: Mapping[str, str] = os.environ
        self._warned: set[str] = set()
        self._limits: dict[int, int | None] = {}

    def load(self) -> None:
        # the handle's services: also readable while the harness is suspended (a reload with
        # invocations running activates this facet between suspend and reopen)
        services = self._harness.handle.services
        project = services.get("project_root") or services.get("workspace")
        env = services.get("mcp_env")
        self.env = os.environ if env is None else env
        self.definitions = load_definitions(
            project=project,
            project_trusted=bool(services.get("project_trusted", False)),
            env=self.env,
            plugin_agents=plugin_agent_paths(services.get("claude_plugins")),
            given=services.get(RUN_AGENTS_SERVICE),
        )
        missing = self.missing_skills()
        if missing:  # for /agents definitions too, before any subagent runs
            warnings = (*self.definitions.warnings, *missing)
            self.definitions = replace(self.definitions, warnings=warnings)
        for problem in (*self.definitions.errors, *self.definitions.warnings):
            self.warn(problem)
        for waiting in self.definitions.waiting:
            _log.info(
                "%s (%d agent file(s)) not loaded: the project is not trusted",
                waiting.folder,
                waiting.count,
            )

    def warn(self, message: str) -> None:
        """Log ``message`` once in this facet's life (activated again after a suspend, it does
        not repeat it)."""
        if message not in self._warned:
            self._warned.add(message)
            _log.warning("%s", message)

    async def summary(self, ctx: Context) -> DefinitionsSummary:
        """:class:`~.contract.SubagentDefinitionsApi`: what was loaded, skipped, left waiting."""
        found = self.definitions
        agents: list[AgentInfo] = []
        for d in found.agents.values():
            info: AgentInfo = {"name": d.name, "description": d.description, "source": d.source}
            if d.written_name:
                info["writtenName"] = d.written_name
            agents.append(info)
        return {
            "agents": agents,
            "skipped": list(found.errors),
            "warnings": list(found.warnings),
            "waiting": [{"folder": w.folder, "count": w.count} for w in found.waiting],
        }

    def tools_for(self, definition: AgentDefinition) -> list[str]:
        """The definition's tools the session has (each missing one warned about once)."""
        assert definition.tools is not None
        registry = self._harness.harness.tools
        lines = dict(definition.tool_lines)
        tools: list[str] = []
        for name in definition.tools:
            # an MCP server's tools appear when it has started: its names are kept regardless
            if name in registry or name.startswith("mcp__"):
                tools.append(name)
                continue
            self.warn(
                f"{definition.source}:{lines.get(name, 1)}: tool {name!r} is not available in "
                "this session; the subagent runs without it"
            )
        if definition.tools and not tools:
            self.warn(
                f"{definition.source}: none of the agent's tools is available in this session, "
                "so the subagent has no tools"
            )
        return tools

    def bounded(self, definition: AgentDefinition, tools: list[str], caller: object) -> list[str]:
        """``tools`` less those the calling subagent does not have (``caller``: its
        ``selectedTools``), each left out warned about once: a subagent's own subagent never
        gets more than the subagent that runs it (an ``outer`` with ``tools: Read, Agent`` ran
        an ``intruder`` with ``tools: Bash``). The narrowest wins all the way down; the user's
        conversation, which no task owns, is not bounded here (the run's ``--tools`` and rules
        apply to every conversation)."""
        listed = cast(list[Any], caller) if isinstance(caller, list) else []
        have = {t for t in listed if isinstance(t, str)}  # anything else: none (a doubt)
        beyond = [t for t in tools if t not in have]
        if beyond:
            self.warn(
                f"{definition.source}: {definition.name!r} runs as another subagent's subagent, "
                f"so it gets no tool that subagent lacks: {', '.join(beyond)} left out"
            )
        return [t for t in tools if t in have]

    def bounded_servers(
        self, definition: AgentDefinition, servers: list[Any], caller: object
    ) -> list[Any]:
        """``servers`` (a definition's ``mcpServers``) less those its calling subagent was not
        given (``caller``: that subagent's task input), each left out warned about once: the
        tools of a subagent's own servers are offered whatever its ``tools`` say, and an inline
        server is a program started for it, so a subagent's own subagent gets only the entries
        its caller had too (the same name, or the same inline entry)."""
        given = caller.get(MCP_SERVERS_KEY) if isinstance(caller, dict) else None
        had = cast(list[Any], given) if isinstance(given, list) else []
        beyond = [_server_name(s) for s in servers if s not in had]
        if beyond:
            self.warn(
                f"{definition.source}: {definition.name!r} runs as another subagent's subagent, "
                f"so it gets no MCP server that subagent lacks: {', '.join(beyond)} left out"
            )
        return [s for s in servers if s in had]

    def _no_service(self, definition: AgentDefinition) -> str:
        return (
            f"{definition.source}:{definition.skills_line}: skills: this host provides no skills "
            f"(no {SKILLS_SERVICE!r} harness service); the subagent runs without "
            f"{', '.join(definition.skills)}"
        )

    @staticmethod
    def _not_found(definition: AgentDefinition, name: str, known: list[str]) -> str:
        return (
            f"{definition.source}:{definition.skills_line}: no skill named {name!r} (this "
            f"session's skills: {', '.join(sorted(known)) or 'none'}); the subagent runs "
            "without it"
        )

    def missing_skills(self) -> list[str]:
        """A warning for each definition's skill the session does not have (as the run will
        say, so each is logged once), listed once at load: one look at the skills' names."""
        wanting = [d for d in self.definitions.agents.values() if d.skills]
        if not wanting:
            return []
        source = self._harness.handle.services.get(SKILLS_SERVICE)
        if source is None:
            return [self._no_service(d) for d in wanting]
        known: list[str] = list(source.names())
        problems: list[str] = []
        for definition in wanting:
            for name in definition.skills:
                # "plugin:skill": a skill of that name (the source decides which plugin's)
                if name not in known and name.partition(":")[2] not in known:
                    problems.append(self._not_found(definition, name, known))
        return problems

    def preloaded(self, definition: AgentDefinition) -> str:
        """The text the definition's ``skills`` add to its system prompt (``""``: none), read
        afresh through the ``skills`` harness service; a skill not found or unreadable is left
        out with a warning naming the file and line (once each)."""
        if not definition.skills:
            return ""
        where = f"{definition.source}:{definition.skills_line}"
        source = self._harness.handle.services.get(SKILLS_SERVICE)
        if source is None:
            self.warn(self._no_service(definition))
            return ""
        texts: list[str] = []
        for name in definition.skills:
            try:
                found = source.skill(name)
            except (OSError, ValueError) as exc:
                self.warn(
                    f"{where}: skill {name!r} cannot be read ({exc}); the subagent runs without it"
                )
                continue
            if found is None:
                self.warn(self._not_found(definition, name, list(source.names())))
                continue
            texts.append(str(found["text"]).strip())
        return SKILLS_NOTE + "\n\n".join(texts) if texts else ""

    async def memory(self, definition: AgentDefinition) -> tuple[dict[str, Any], str] | None:
        """The definition's memory folder, created if needed (:mod:`.memory`): the task input's
        entry and the system prompt's text; ``None`` without ``memory``, or with a warning
        when the folder cannot be used."""
        if definition.memory is None:
            return None
        services = self._harness.handle.services
        project = services.get("project_root") or services.get("workspace")
        notes: list[str] = []  # an unignored local memory folder (.memory.unignored_note)
        found = await anyio.to_thread.run_sync(
            prepare_memory, definition.memory, definition.name, project, self.env, notes
        )
        for note in notes:
            self.warn(f"{definition.source}: {note}")
        if isinstance(found, str):
            self.warn(f"{definition.source}: {found}")
            return None
        return found

    async def turns(self, conversation_id: int, ctx: Context) -> tuple[int, int] | None:
        """``(model turns so far, maxTurns)`` of a subagent with a turn limit; ``None`` for any
        other conversation. The limit is its task's input (read once, kept: it never changes),
        the turns its assistant entries (it is sent one prompt, so all are this task's)."""
        harness = self._harness.harness
        if conversation_id not in self._limits:
            limit: int | None = None
            handle = await harness.conversation(conversation_id, ctx)
            if handle is not None:
                record = await handle.commit(lambda tx, _ctx: tx.conversation(conversation_id), ctx)
                owner = getattr(record, "owner", None)
                task = await harness.get_task(owner, ctx) if isinstance(owner, int) else None
                given = task.input if task is not None and task.kind == SUBAGENT_KIND else None
                found = given.get(MAX_TURNS_KEY) if isinstance(given, dict) else None
                limit = found if type(found) is int and found > 0 else None
            self._limits[conversation_id] = limit
        limit = self._limits[conversation_id]
        if limit is None:
            return None
        handle = await harness.conversation(conversation_id, ctx)
        if handle is None:
            return None
        done = await handle.entries(ctx, limit=limit + 1, kind="pi.assistant")
        return len(done), limit

    def description(self) -> str:
        agents = "\n".join(f"- {d.name}: {d.description}" for d in self.definitions.agents.values())
        return (
            "Launch a subagent to handle a multi-step task on its own, with its own conversation. "
            "It sees only your prompt, so include everything it needs; it returns one final "
            "report, which only you see. Several calls in one message run in parallel.\n"
            f"Available agents (subagent_type):\n{agents}"
        )

    def definition(self, name: str) -> AgentDefinition | None:
        """The agent definition ``name`` names (normalised as ids are: ``api.designer`` finds
        ``api-designer``), or ``None``."""
        return self.definitions.agents.get(name) or self.definitions.agents.get(agent_id(name))

    def unknown(self, name: str) -> str:
        """The error for an agent type no definition has, naming the known ones."""
        known = ", ".join(sorted(self.definitions.agents))
        return f"Unknown subagent_type {name!r}; available: {known}"

    async def task_input(
        self, definition: AgentDefinition, description: str, prompt: str, conversation_id: int,
        ctx: Context,
    ) -> dict[str, Any]:  # fmt: skip
        """The ``subagents.run`` input of ``definition`` run with ``prompt`` from conversation
        ``conversation_id``: its tools (bounded by its caller's when a subagent calls), model,
        system prompt (skills and memory read now: recovery never re-reads) and the keys the
        other features read (permission mode, maxTurns, hooks, memory, MCP servers)."""
        parent = await self._harness.harness.conversation(conversation_id, ctx)
        config = await parent.config(ctx) if parent is not None else {}
        if definition.tools is not None:
            tools = self.tools_for(definition)
        else:
            tools = [t for t in config.get("selectedTools") or [] if t != AGENT_TOOL]
        if definition.memory is not None and definition.tools is not None:
            # its memory is read and written with these, as Claude Code enables them
            registry = self._harness.harness.tools
            tools += [t for t in MEMORY_TOOLS if t in registry and t not in tools]
        tools = [t for t in tools if t not in definition.disallowed]
        caller = await self._harness.harness.owner_task(conversation_id, ctx)
        servers = list(definition.mcp_servers)
        if caller is not None:  # another subagent's: never more than it has
            tools = self.bounded(definition, tools, config.get("selectedTools"))
            servers = self.bounded_servers(definition, servers, caller.input)
        model, note = resolve_model(definition.model, config.get("model"), self.env)
        if note is not None:
            self.warn(f"{definition.source}: {note}")
        system_prompt = definition.system_prompt
        if definition.permission_mode == "plan":
            system_prompt += PLAN_NOTE
        # read when the call is made and stored with the task (recovery never re-reads)
        system_prompt += await anyio.to_thread.run_sync(self.preloaded, definition)
        memory = await self.memory(definition)
        if memory is not None:
            system_prompt += memory[1]
        task_input: dict[str, Any] = {
            "description": description,
            "prompt": prompt,
            "agent": definition.name,
            "systemPrompt": system_prompt,
            "model": model,
            "tools": tools,
        }
        if definition.permission_mode is not None:
            # read by the approval feature up the owner chain: stricter, never looser
            task_input[PERMISSION_MODE_KEY] = definition.permission_mode
        if definition.max_turns is not None:
            task_input[MAX_TURNS_KEY] = definition.max_turns
        if definition.hooks:  # run for its conversation alone by the hooks feature
            task_input[HOOKS_KEY] = {"source": definition.source, "hooks": definition.hooks}
        if memory is not None:  # its own files, for the approval feature
            task_input[MEMORY_KEY] = memory[0]
        if servers:  # started for it alone by the MCP feature
            task_input[MCP_SERVERS_KEY] = servers
            if definition.from_project:  # not started once the project is not trusted
                task_input[PROJECT_AGENT_KEY] = True
        thinking = definition.thinking or config.get("thinkingLevel")
        if isinstance(thinking, str):  # effort, else the caller's level (Claude Code's too)
            task_input[THINKING_KEY] = thinking
        return task_input

    async def execute(self, args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        task_id = await api.memo("task", ctx)
        name = str(args.get("subagent_type") or GENERAL_PURPOSE.name)
        if task_id is MISSING:
            definition = self.definition(name)
            if definition is None:
                return ToolResult.text(self.unknown(name), is_error=True)
            task_input = await self.task_input(
                definition, str(args["description"]), str(args["prompt"]), api.conversation_id,
                ctx,
            )  # fmt: skip
            # created and memoized in one commit: a crash never leaves a task without its memo
            ref = await api.task(self.kind, task_input, {"memo": "task"}, ctx)
            task_id = ref if type(ref) is int else ref.id
        task = await api.wait_for_task(task_id, ctx)
        outcome = task.outcome if isinstance(task.outcome, dict) else {}
        if outcome.get("status") == "completed":
            result = outcome.get("result") or {}
            report = result.get("report") or NO_REPORT
            details = {"task": task_id, "agent": name, "conversation": result.get("conversation")}
            return ToolResult.text(report, details=details)
        return ToolResult.text(_did_not_finish(outcome), is_error=True)

    async def fork(self, request: ForkRequest, ctx: Context) -> ForkResult:
        """:class:`~.contract.SubagentForksApi`: run ``request``'s prompt in a subagent, as an
        ``agent`` call from its conversation would (the same input, tools and bounds), with the
        request's ``model`` and ``allow`` on top, and wait for it."""
        name = str(request.get("agent") or GENERAL_PURPOSE.name)
        definition = self.definition(name)
        if definition is None:
            known = ", ".join(sorted(self.definitions.agents))
            return {"agent": name, "error": f"unknown agent {name!r}; the known agents: {known}"}
        conversation_id = int(request["conversation"])
        harness = self._harness.harness
        parent = await harness.conversation(conversation_id, ctx)
        if parent is None:
            return {"agent": name, "error": f"conversation {conversation_id} does not exist"}
        task_input = await self.task_input(
            definition, str(request["description"]), str(request["prompt"]), conversation_id, ctx
        )
        model = request.get("model")
        if isinstance(model, dict) and model:  # the command's own model: for this run only
            task_input["model"] = dict(model)
        allow = [rule for rule in request.get("allow") or [] if isinstance(rule, str) and rule]
        if allow:  # the command's allowed-tools, on the subagent's turn (kind.py)
            task_input[ALLOW_KEY] = allow
        kind = self.kind
        task_id: int = await parent.commit(lambda tx, _ctx: tx.create_task(kind, task_input), ctx)
        task = await harness.wait_for_task(task_id, ctx)
        outcome = task.outcome if isinstance(task.outcome, dict) else {}
        if outcome.get("status") != "completed":
            return {"agent": definition.name, "task": task_id, "error": _did_not_finish(outcome)}
        result = outcome.get("result") or {}
        answer: ForkResult = {
            "agent": definition.name, "task": task_id, "report": result.get("report") or NO_REPORT,
        }  # fmt: skip
        if type(result.get("conversation")) is int:
            answer["conversation"] = result["conversation"]
        return answer

    def install(self, h: Any) -> Callable[[], None]:
        with ExitStack() as undo:  # on a failure, what was registered is undone
            undo.callback(h.register_task_kind(self.kind))
            ns = h.namespace(NAMESPACE, {"sticky": {}})
            undo.callback(ns.unregister)
            board = self.board

            async def before_tool(call: dict[str, Any], api: Any, ctx: Context) -> None:
                board.tool(api.conversation_id, str(call.get("name", "?")))

            async def after_tool(
                call: dict[str, Any], result: ToolResult, api: Any, ctx: Context
            ) -> ToolResult:
                # the last turn maxTurns allows: its tools ran, and the subagent stops there
                turns = await self.turns(api.conversation_id, ctx)
                if turns is None or turns[0] < turns[1]:
                    return result
                return replace(result, control={**(result.control or {}), "terminate": True})

            async def after_response(message: Any, api: Any, ctx: Context) -> None:
                # past the limit (the limit's turn had no tool that ran: all were blocked): the
                # subagent's task stops it
                turns = await self.turns(api.conversation_id, ctx)
                if turns is not None and turns[0] > turns[1]:
                    board.over_limit(api.conversation_id)

            undo.callback(
                h.hooks(ns, TOOL_KIND, {"before_tool": before_tool, "after_tool": after_tool})
            )
            undo.callback(h.hooks(ns, MODEL_CALL_KIND, {"after_response": after_response}))
            undo.callback(
                h.register_tool(
                    ToolDeclaration(
                        name=AGENT_TOOL,
                        description=self.description(),
                        parameters=AGENT_PARAMETERS,
                        execute=self.execute,
                        replay="safe",
                    )
                )
            )
            return undo.pop_all().close


NO_REPORT = "(the subagent ended without a report)"


def _did_not_finish(outcome: Mapping[str, Any]) -> str:
    """What a ``subagents.run`` task that did not complete reports."""
    failure = outcome.get("failure") or outcome.get("error") or outcome.get("status")
    return f"The subagent did not finish: {failure}"


class _ForksService:
    """:data:`~.contract.SubagentForks` (a remotable service exposes methods only)."""

    def __init__(self, subagents: Subagents) -> None:
        self._subagents = subagents

    async def run(self, request: ForkRequest, ctx: Context) -> ForkResult:
        return await self._subagents.fork(request, ctx)


class _DefinitionsService:
    """:data:`~.contract.SubagentDefinitions` (a remotable service exposes methods only)."""

    def __init__(self, subagents: Subagents) -> None:
        self._subagents = subagents

    async def summary(self, ctx: Context) -> DefinitionsSummary:
        return await self._subagents.summary(ctx)


@define_facet("@pi/subagents")
def session_facet(env: FacetEnvironment) -> None:
    """Register the ``agent`` tool, the ``subagents.run`` kind and the step hooks."""
    harness = env.use(HarnessService)
    subagents = Subagents(harness)
    env.provide(SubagentDefinitions, _DefinitionsService(subagents))
    env.provide(SubagentForks, _ForksService(subagents))

    def activate() -> None:
        subagents.load()
        env.own(harness.add_registration(subagents.install))

    env.on_activate(activate)
