"""A subagent's own hooks (``hooks`` in its definition): they run, with the session's hooks
runner, on that subagent's tool calls and its end (its ``Stop`` is its ``SubagentStop``), never
on the parent's; a plugin's agent and an untrusted project's agent file get none."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from facets_approval.session import install_approval
from facets_hooks.agent_hooks import untrusted_source
from facets_hooks.session import session_facet as hooks_facet
from facets_subagents.definitions import load_definitions, parse_definition
from facets_subagents.session import session_facet as subagents_facet
from pico3 import (
    TOOL_KIND,
    HarnessOptions,
    HarnessService,
    HarnessServiceApi,
    MemoryStorage,
    Models,
    ToolDeclaration,
    ToolResult,
    harness_session_facet,
)
from pico3.models.faux import FauxProvider, FauxResponse, FauxState, faux_response, faux_tool_call
from pico3.models.provider import Request

pytestmark = pytest.mark.anyio
MODEL = {"provider": "faux", "modelId": "faux-1"}


def recorder(log: Path, tag: str) -> str:
    """A hook command appending ``tag`` and the event's payload to ``log`` (one JSON line)."""
    code = (
        "import json,sys; p=json.load(sys.stdin); "
        f"open({str(log)!r},'a').write(json.dumps([{tag!r}, p['hook_event_name'], "
        "p.get('tool_name')])+'\\n')"
    )
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


def agent_text(log: Path) -> str:
    hooks = {
        "PreToolUse": [
            {"matcher": "Read", "hooks": [{"type": "command", "command": recorder(log, "agent")}]}
        ],
        "Stop": [{"hooks": [{"type": "command", "command": recorder(log, "agent")}]}],
    }
    return (
        "---\nname: hooked\ndescription: Has its own hooks.\n"
        f"hooks: {json.dumps(hooks)}\n---\nYou are the hooked agent.\n"
    )


class Script:
    """The parent reads a file, runs ``hooked``, reads again, then ends; the subagent reads
    once, then reports."""

    def __init__(self) -> None:
        self.parent = 0
        self.child = 0

    def __call__(self, request: Request, state: FauxState) -> FauxResponse:
        if any("hooked agent" in s for s in request.system):
            self.child += 1
            if self.child == 1:
                return faux_response(faux_tool_call("read", {"path": "x"}, id="c1"))
            return faux_response("report: read it")
        self.parent += 1
        if self.parent in (1, 3):
            return faux_response(faux_tool_call("read", {"path": "x"}, id=f"p{self.parent}"))
        if self.parent == 2:
            args = {"description": "hooked", "prompt": "go", "subagent_type": "hooked"}
            return faux_response(faux_tool_call("agent", args, id="a1"))
        return faux_response("parent done")


def read_tool() -> ToolDeclaration:
    async def execute(args: dict[str, Any], api: Any, ctx: Context) -> ToolResult:
        return ToolResult.text("contents")

    return ToolDeclaration("read", "Read a file.", {"type": "object"}, execute, replay="safe")


@asynccontextmanager
async def session(
    tmp: Path,
    script: Any,
    extra: Callable[[Any], list[Callable[[], None]]] | None = None,
    dialog: Callable[[Any, Context], Awaitable[Any]] | None = None,
) -> AsyncIterator[HarnessServiceApi]:
    """The harness, the approval feature (its dialog ``dialog``, else allow), the subagents and
    hooks features; ``extra(h)`` registers more on the harness."""
    project = tmp / "project"
    project.mkdir(exist_ok=True)
    services: dict[str, Any] = {
        "models": Models([FauxProvider([script] * 30)]),
        "workspace": str(project),
        "mcp_env": {"HOME": str(tmp / "home"), "XDG_CONFIG_HOME": str(tmp / "config")},
    }
    workers: list[HarnessServiceApi] = []

    async def allow(request: Any, ctx: Context) -> Any:
        return {"decision": "allow", "by": "headless"}

    def worker(env: FacetEnvironment) -> None:
        harness = env.use(HarnessService)
        workers.append(harness)

        def install(h: Any) -> Any:
            undo = [install_approval(h, dialog or allow), h.register_tool(read_tool())]
            undo.extend(extra(h) if extra is not None else [])
            return lambda: [fn() for fn in reversed(undo)]

        env.on_activate(lambda: env.own(harness.add_registration(install)))

    async with anyio.create_task_group() as group:
        facets = [
            harness_session_facet(
                MemoryStorage, HarnessOptions(services=services), task_group=group
            ),
            define_facet("test/worker", worker),
            subagents_facet,
            hooks_facet,
        ]
        async with create_facet_host(facets):
            (service,) = workers
            await service.resume(BACKGROUND)
            root = await service.harness.root(BACKGROUND)
            await root.set_config({"model": MODEL, "selectedTools": ["read", "agent"]}, BACKGROUND)
            yield service
        group.cancel_scope.cancel()


async def test_an_agents_own_hooks_run_only_while_it_runs(tmp_path: Path) -> None:
    log = tmp_path / "hooks.log"
    agents = tmp_path / "home" / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "hooked.md").write_text(agent_text(log))
    script = Script()
    async with session(tmp_path, script) as service:
        root = await service.harness.root(BACKGROUND)
        handle = await root.send("go", BACKGROUND)
        with anyio.fail_after(60):
            await handle.wait(BACKGROUND)
    assert script.parent == 4 and script.child == 2  # both of the parent's reads ran, too
    ran = [json.loads(line) for line in log.read_text().splitlines()]
    # the subagent's one read, then its end as SubagentStop; none for the parent's two reads
    # nor for the parent's own end (Stop)
    assert ran == [["agent", "PreToolUse", "Read"], ["agent", "SubagentStop", None]]


class Interrupted:
    """The parent runs ``hooked``, whose first call is a ``bash`` that a PermissionRequest
    answer refuses with ``interrupt``; any further model call of either is counted."""

    def __init__(self) -> None:
        self.parent = 0
        self.child = 0

    def __call__(self, request: Request, state: FauxState) -> FauxResponse:
        if any("hooked agent" in s for s in request.system):
            self.child += 1
            if self.child == 1:
                return faux_response(faux_tool_call("bash", {"command": "rm -rf x"}, id="c1"))
            return faux_response("report: went on")
        self.parent += 1
        if self.parent == 1:
            args = {"description": "hooked", "prompt": "go", "subagent_type": "hooked"}
            return faux_response(faux_tool_call("agent", args, id="a1"))
        return faux_response("parent went on")


async def test_a_permission_request_interrupt_in_a_subagent_stops_the_users_turn(
    tmp_path: Path,
) -> None:
    """A deny with ``interrupt`` for a subagent's call: the subagent reads the refusal as that
    call's result, then the whole turn stops (the user's conversation is aborted, as Esc
    aborts it): neither the subagent nor the parent calls the model again."""
    agents = tmp_path / "home" / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "hooked.md").write_text(agent_text(tmp_path / "hooks.log"))
    ran: list[str] = []

    async def bash(args: dict[str, Any], api: Any, ctx: Context) -> ToolResult:
        ran.append(args["command"])
        return ToolResult.text("ran")

    async def refuse(call: Any, api: Any, ctx: Context) -> Any:
        return {"behavior": "deny", "by": "test hook", "message": "no", "interrupt": True}

    def extra(h: Any) -> list[Callable[[], None]]:
        ns = h.namespace("test-permission")
        tool = ToolDeclaration("bash", "Run.", {"type": "object"}, bash)
        return [
            ns.unregister,
            h.hooks(ns, TOOL_KIND, {"permission_request": refuse}),
            h.register_tool(tool),
        ]

    script = Interrupted()
    async with session(tmp_path, script, extra) as service:
        root = await service.harness.root(BACKGROUND)
        await root.set_config({"selectedTools": ["read", "agent", "bash"]}, BACKGROUND)
        handle = await root.send("go", BACKGROUND)
        with anyio.fail_after(60):
            ended = await handle.wait(BACKGROUND)
            await root.wait_for_idle(BACKGROUND)
        results = await root.entries(BACKGROUND, kind="pi.tool_result")
        before = script.parent  # 1: no model call of the parent after the agent call
        # the session goes on: the next prompt is answered
        script.parent = 1  # its next model call answers "parent went on"
        with anyio.fail_after(60):
            after = await (await root.send("next", BACKGROUND)).wait(BACKGROUND)
    assert ran == []
    assert (before, script.child) == (1, 1)
    assert (ended.status, ended.reason) == ("unanswered", "aborted")
    assert after.status == "done"
    texts = [json.dumps(entry.model) for entry in results]
    assert any("Tool call aborted" in t for t in texts), texts  # the agent call, interrupted


def test_an_agent_file_keeps_only_the_events_a_subagent_has(tmp_path: Path) -> None:
    text = (
        "---\nname: a\ndescription: d\nhooks:\n  Stop:\n    - hooks:\n        - type: command\n"
        "          command: done.sh\n  UserPromptSubmit: []\n---\nbody\n"
    )
    definition, warnings = parse_definition(text, "a.md")
    assert definition.hooks == {
        "SubagentStop": [{"hooks": [{"type": "command", "command": "done.sh"}]}]
    }
    assert warnings == (
        "a.md:4: hooks.UserPromptSubmit is not run for a subagent's own hooks (only PreToolUse, "
        "PermissionRequest, PostToolUse, PostToolUseFailure, Notification, Stop, SubagentStop); "
        "put it in settings.json to run it for every conversation",
    )
    plugin, notes = parse_definition(text, "plugin/agents/a.md", plugin=True)
    assert plugin.hooks is None
    assert "hooks is not honoured in a plugin's agent" in notes[-1]


def test_an_untrusted_projects_agent_hooks_never_run(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".claude" / "agents").mkdir(parents=True)
    agent = project / ".claude" / "agents" / "hooked.md"
    agent.write_text(agent_text(tmp_path / "log"))
    env = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    # not even loaded while the project is not trusted
    loaded = load_definitions(project=project, project_trusted=False, env=env)
    assert "hooked" not in loaded.agents
    # and a task written while it was trusted does not run them once it is not
    assert untrusted_source(str(agent), str(project), False, env)
    assert not untrusted_source(str(agent), str(project), True, env)
    user_agent = tmp_path / "home" / ".claude" / "agents" / "hooked.md"
    assert not untrusted_source(str(user_agent), str(project), False, env)
    # a project at the home folder: ~/.claude/agents is the user's, not the project's
    home = tmp_path / "home"
    assert not untrusted_source(str(user_agent), str(home), False, {"HOME": str(home)})
    assert untrusted_source(
        str(home / ".coding-agent/agents/x.md"), str(home), False, {"HOME": str(home)}
    )


def hook_command(log: Path, printed: dict[str, Any] | None = None) -> str:
    """A hook command appending ``["agent", event, tool, message]`` to ``log`` and printing
    ``printed`` (JSON) as its answer."""
    code = (
        "import json,sys; p=json.load(sys.stdin); "
        f"open({str(log)!r},'a').write(json.dumps(['agent', p['hook_event_name'], "
        "p.get('tool_name'), p.get('message')])+'\\n'); "
        f"print({json.dumps(json.dumps(printed)) if printed else repr('')})"
    )
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


class Bashing:
    """The parent runs ``bash`` (``parent``), then ``hooked``, whose one call is ``bash``
    (``child``), then ends."""

    def __init__(self) -> None:
        self.parent = 0
        self.child = 0

    def __call__(self, request: Request, state: FauxState) -> FauxResponse:
        if any("hooked agent" in s for s in request.system):
            self.child += 1
            if self.child == 1:
                return faux_response(faux_tool_call("bash", {"command": "child"}, id="c1"))
            return faux_response("report: done")
        self.parent += 1
        if self.parent == 1:
            return faux_response(faux_tool_call("bash", {"command": "parent"}, id="p1"))
        if self.parent == 2:
            args = {"description": "hooked", "prompt": "go", "subagent_type": "hooked"}
            return faux_response(faux_tool_call("agent", args, id="a1"))
        return faux_response("parent done")


def bash_tool(ran: list[str]) -> Callable[[Any], list[Callable[[], None]]]:
    async def bash(args: dict[str, Any], api: Any, ctx: Context) -> ToolResult:
        ran.append(args["command"])
        return ToolResult.text("ran")

    def extra(h: Any) -> list[Callable[[], None]]:
        return [h.register_tool(ToolDeclaration("bash", "Run.", {"type": "object"}, bash))]

    return extra


def hooked_agent(tmp: Path, hooks: dict[str, Any]) -> None:
    agents = tmp / "home" / ".claude" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "hooked.md").write_text(
        "---\nname: hooked\ndescription: Has its own hooks.\n"
        f"hooks: {json.dumps(hooks)}\n---\nYou are the hooked agent.\n"
    )


async def run_bashing(
    tmp: Path, dialog: Callable[[Any, Context], Awaitable[Any]]
) -> tuple[list[str], Bashing]:
    ran: list[str] = []
    script = Bashing()
    async with session(tmp, script, bash_tool(ran), dialog) as service:
        root = await service.harness.root(BACKGROUND)
        await root.set_config({"selectedTools": ["agent", "bash"]}, BACKGROUND)
        with anyio.fail_after(60):
            await (await root.send("go", BACKGROUND)).wait(BACKGROUND)
    return ran, script


async def test_an_agents_own_permission_request_hook_answers_its_calls_alone(
    tmp_path: Path,
) -> None:
    """``PermissionRequest`` in an agent file answers the approval dialog for that subagent's
    calls (here: refuses its ``bash``), never for the parent's, which the dialog decides."""
    log = tmp_path / "hooks.log"
    deny = {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": "not in the subagent"},
        }
    }
    hooks = {
        "PermissionRequest": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": hook_command(log, deny)}]}
        ]
    }
    hooked_agent(tmp_path, hooks)
    asked: list[str] = []

    async def dialog(request: Any, ctx: Context) -> Any:
        asked.append(str(request["args"]["command"]))
        return {"decision": "allow", "by": "test"}

    ran, script = await run_bashing(tmp_path, dialog)
    assert ran == ["parent"] and asked == ["parent"]  # the subagent's call: refused by its hook
    assert [json.loads(line) for line in log.read_text().splitlines()] == [
        ["agent", "PermissionRequest", "Bash", None]
    ]
    assert script.child == 2  # it read the refusal and reported


async def test_an_agents_own_notification_hook_runs_when_its_call_waits_for_the_user(
    tmp_path: Path,
) -> None:
    """``Notification`` in an agent file runs when that subagent's call waits on the approval
    dialog (the dialog here waits until it has), never for the parent's waiting call."""
    import os

    log = tmp_path / "hooks.log"
    told = tmp_path / "told.fifo"
    os.mkfifo(told)
    notify = hook_command(log) + f" && echo told > {shlex.quote(str(told))}"
    hooked_agent(tmp_path, {"Notification": [{"hooks": [{"type": "command", "command": notify}]}]})
    asked: list[str] = []

    def wait_told() -> str:
        with told.open() as fifo:  # opens once the hook opens it to write
            return fifo.read()

    async def dialog(request: Any, ctx: Context) -> Any:
        asked.append(str(request["args"]["command"]))
        if request["args"]["command"] == "child":  # the subagent's: told before it is answered
            with anyio.fail_after(60):
                assert await anyio.to_thread.run_sync(wait_told, abandon_on_cancel=True) == "told\n"
        return {"decision": "allow", "by": "test"}

    try:
        ran, _script = await run_bashing(tmp_path, dialog)
    finally:  # a hook that never came: let the waiting thread go
        try:
            os.close(os.open(told, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    assert ran == ["parent", "child"] and asked == ["parent", "child"]
    assert [json.loads(line) for line in log.read_text().splitlines()] == [
        ["agent", "Notification", None, "Claude needs your permission to use Bash"]
    ]
