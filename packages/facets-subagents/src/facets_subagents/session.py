"""The subagents session facet: the ``agent`` tool and the ``subagents.run`` kind.

``agent({description, prompt, subagent_type?})`` resolves the agent definition
(:mod:`.definitions`; default ``general-purpose``), the model (the definition's, else the
calling conversation's) and the tools (the definition's list, else the caller's selected tools
without ``agent``), creates one ``subagents.run`` task (:mod:`.kind`) and waits for it. The task
id is memoized on the tool's slot in the commit that creates it, and the tool is
``replay="safe"``: after a
crash the call runs again, finds the memo and waits for the same task, whose own recovery goes
on with the same owned conversation. Several calls in one assistant message run in parallel
(one ``pi.tool`` each). The caller sees only the final report (details: the conversation id).

A hook (harness-wide, cheap for conversations that are not subagents) feeds the
:class:`~.kind.StepBoard` each tool call of a subagent. Its final answer shows no step of its
own: the model's answer is whole when the generation's hooks see it, and the commit that
completes the task (and drops its step) follows with nothing to wait for in between, so a
"writing its report" step would be one durable commit per subagent that no reader keeps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from chord import Context, FacetEnvironment, define_facet
from pico3 import (
    MISSING,
    TOOL_KIND,
    HarnessService,
    HarnessServiceApi,
    ToolApi,
    ToolDeclaration,
    ToolResult,
)

from .contract import AGENT_TOOL
from .definitions import GENERAL_PURPOSE, Definitions, load_definitions
from .kind import StepBoard, subagent_kind

__all__ = ["AGENT_PARAMETERS", "NAMESPACE", "Subagents", "session_facet"]

_log = logging.getLogger("facets_subagents")
NAMESPACE = "subagents"

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


def _model(spec: str | None, fallback: Any) -> Any:
    if spec is None:
        return fallback
    provider, _, model_id = spec.partition("/")
    return {"provider": provider, "modelId": model_id}


class Subagents:
    """One activation's live pieces: definitions, the step board, the registration."""

    def __init__(self, harness: HarnessServiceApi) -> None:
        self._harness = harness
        self.board = StepBoard()
        self.kind = subagent_kind(self.board)
        self.definitions = Definitions({GENERAL_PURPOSE.name: GENERAL_PURPOSE}, ())

    def load(self) -> None:
        # the handle's services: also readable while the harness is suspended (a reload with
        # invocations running activates this facet between suspend and reopen)
        services = self._harness.handle.services
        project = services.get("project_root") or services.get("workspace")
        self.definitions = load_definitions(
            project=project,
            project_trusted=bool(services.get("project_trusted", False)),
            env=services.get("mcp_env"),
        )
        for error in self.definitions.errors:
            _log.warning("%s", error)

    def description(self) -> str:
        agents = "\n".join(f"- {d.name}: {d.description}" for d in self.definitions.agents.values())
        return (
            "Launch a subagent to handle a multi-step task on its own, with its own conversation. "
            "It sees only your prompt, so include everything it needs; it returns one final "
            "report, which only you see. Several calls in one message run in parallel.\n"
            f"Available agents (subagent_type):\n{agents}"
        )

    async def execute(self, args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        task_id = await api.memo("task", ctx)
        name = str(args.get("subagent_type") or GENERAL_PURPOSE.name)
        if task_id is MISSING:
            definition = self.definitions.agents.get(name)
            if definition is None:
                known = ", ".join(sorted(self.definitions.agents))
                return ToolResult.text(
                    f"Unknown subagent_type {name!r}; available: {known}", is_error=True
                )
            parent = await self._harness.harness.conversation(api.conversation_id, ctx)
            config = await parent.config(ctx) if parent is not None else {}
            if definition.tools is not None:
                tools = list(definition.tools)
            else:
                tools = [t for t in config.get("selectedTools") or [] if t != AGENT_TOOL]
            task_input = {
                "description": str(args["description"]),
                "prompt": str(args["prompt"]),
                "agent": definition.name,
                "systemPrompt": definition.system_prompt,
                "model": _model(definition.model, config.get("model")),
                "tools": tools,
            }
            # created and memoized in one commit: a crash never leaves a task without its memo
            ref = await api.task(self.kind, task_input, {"memo": "task"}, ctx)
            task_id = ref if type(ref) is int else ref.id
        task = await api.wait_for_task(task_id, ctx)
        outcome = task.outcome if isinstance(task.outcome, dict) else {}
        if outcome.get("status") == "completed":
            result = outcome.get("result") or {}
            report = result.get("report") or "(the subagent ended without a report)"
            details = {"task": task_id, "agent": name, "conversation": result.get("conversation")}
            return ToolResult.text(report, details=details)
        failure = outcome.get("failure") or outcome.get("error") or outcome.get("status")
        return ToolResult.text(f"The subagent did not finish: {failure}", is_error=True)

    def install(self, h: Any) -> Callable[[], None]:
        undo: list[Callable[[], None]] = []
        try:
            undo.append(h.register_task_kind(self.kind))
            ns = h.namespace(NAMESPACE, {"sticky": {}})
            undo.append(ns.unregister)
            board = self.board

            async def before_tool(call: dict[str, Any], api: Any, ctx: Context) -> None:
                board.tool(api.conversation_id, str(call.get("name", "?")))

            undo.append(h.hooks(ns, TOOL_KIND, {"before_tool": before_tool}))
            undo.append(
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
        except BaseException:
            for fn in reversed(undo):
                fn()
            raise

        def uninstall() -> None:
            for fn in reversed(undo):
                fn()

        return uninstall


@define_facet("@pi/subagents")
def session_facet(env: FacetEnvironment) -> None:
    """Register the ``agent`` tool, the ``subagents.run`` kind and the step hooks."""
    harness = env.use(HarnessService)
    subagents = Subagents(harness)

    def activate() -> None:
        subagents.load()
        env.own(harness.add_registration(subagents.install))

    env.on_activate(activate)
