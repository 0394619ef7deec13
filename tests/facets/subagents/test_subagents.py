"""The ``agent`` tool end to end in one session host: parallel subagents from one assistant
message, each a durable owned conversation with its own system prompt, tools and model from its
definition; the parent sees only the reports; the tasks view shows each running subagent's step."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from chord.context import BACKGROUND, Context
from chord.facet_packages import facet_package_from_folder, load_generation
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.remote import LoopbackServiceSource
from chord.state import replicated_state
from chord.textual import Choice, tui_facet
from chord.transport import memory_connection_pair
from chord.wire import connect_service_source, serve_provider
from coding_agent.tui.widgets.tasks import task_summary
from facets_subagents.kind import StepBoard
from facets_subagents.session import session_facet
from facets_subagents.tui import definitions_text, subagents_in, transcript_text
from facets_subagents.tui import tui_facet as agents_tui_facet
from pico3 import (
    HarnessOptions,
    HarnessService,
    HarnessServiceApi,
    JsonlStorage,
    Models,
    ToolDeclaration,
    ToolResult,
    harness_session_facet,
)
from pico3.facets.around_reload import reload_session_facets
from pico3.models.faux import FauxProvider, FauxResponse, FauxState, faux_response, faux_tool_call
from pico3.models.provider import Request, ToolResultMessage, UserMessage

pytestmark = pytest.mark.anyio

MODEL = {"provider": "faux", "modelId": "faux-1"}
PACKAGE = Path(__file__).parents[3] / "packages" / "facets-subagents"
REVIEWER = """---
name: reviewer
description: Reviews things.
tools: note
---
You are the reviewer subagent.
"""


def _text(message: Any) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(getattr(b, "text", "") for b in content)


class Script:
    """The faux model: the parent asks for subagents, each subagent calls ``note`` once and
    reports; ``gate`` (when set) holds every subagent's report."""

    def __init__(self, calls: list[dict[str, Any]], gate: anyio.Event | None = None) -> None:
        self.calls = calls
        self.gate = gate
        self.requests: list[Request] = []

    def __call__(self, request: Request, state: FauxState) -> FauxResponse:
        self.requests.append(request)
        first = request.messages[0]
        last = request.messages[-1]
        is_child = any("subagent" in s for s in request.system)
        if not is_child:
            if isinstance(last, UserMessage):
                return faux_response(
                    *[faux_tool_call("agent", c, id=f"a{i}") for i, c in enumerate(self.calls)]
                )
            return faux_response("all reports read")
        task = _text(first)
        if isinstance(last, ToolResultMessage):
            return faux_response(f"report: {task} done")
        return faux_response(faux_tool_call("note", {"text": task}, id="n1"))


def note_tool(gate: anyio.Event | None) -> ToolDeclaration:
    async def execute(args: dict[str, Any], api: Any, ctx: Any) -> ToolResult:
        if gate is not None:
            await gate.wait()
        return ToolResult.text(f"noted {args['text']}")

    return ToolDeclaration(
        name="note",
        description="Take a note.",
        parameters={"type": "object", "properties": {"text": {"type": "string"}}},
        execute=execute,
        replay="safe",
    )


class Session:
    def __init__(self, service: HarnessServiceApi, host: Any) -> None:
        self.service = service
        self.harness = service.harness
        self.host = host


@asynccontextmanager
async def session(
    tmp: Path, script: Script, gate: anyio.Event | None = None
) -> AsyncIterator[Session]:
    services = {
        "models": Models([FauxProvider([script] * 50)]),
        "workspace": str(tmp),
        "mcp_env": {"XDG_CONFIG_HOME": str(tmp / "config"), "HOME": str(tmp / "home")},
    }
    workers: list[HarnessServiceApi] = []

    def worker(env: FacetEnvironment) -> None:
        harness = env.use(HarnessService)
        workers.append(harness)
        env.on_activate(
            lambda: env.own(harness.add_registration(lambda h: h.register_tool(note_tool(gate))))
        )

    async with anyio.create_task_group() as group:
        harness_facet = harness_session_facet(
            lambda: JsonlStorage(str(tmp / "store"), fsync=False),
            HarnessOptions(services=services),
            task_group=group,
        )
        async with create_facet_host(
            [harness_facet, define_facet("test/worker", worker), session_facet]
        ) as host:
            (service,) = workers
            await service.resume(BACKGROUND)
            root = await service.harness.root(BACKGROUND)
            await root.set_config({"model": MODEL, "selectedTools": ["note", "agent"]}, BACKGROUND)
            yield Session(service, host)
        group.cancel_scope.cancel()


async def tool_results(service: Session, conversation: Any = None) -> list[Any]:
    c = conversation or await service.harness.root(BACKGROUND)
    entries = await c.entries(BACKGROUND, limit=100, kind="pi.tool_result")
    return list(reversed(entries))


async def test_parallel_subagents_report_to_the_parent_only(tmp_path: Path) -> None:
    agents = tmp_path / "config" / "coding-agent" / "agents"
    agents.mkdir(parents=True)
    (agents / "reviewer.md").write_text(REVIEWER)
    script = Script(
        [
            {"description": "first task", "prompt": "task A"},
            {"description": "second task", "prompt": "task B"},
            {"description": "review", "prompt": "task C", "subagent_type": "reviewer"},
        ]
    )
    async with session(tmp_path, script) as s:
        root = await s.harness.root(BACKGROUND)
        declaration = s.harness.tools.get("agent")
        assert declaration is not None and declaration.replay == "safe"
        assert "reviewer: Reviews things." in declaration.description
        handle = await root.send("go", BACKGROUND)
        with anyio.fail_after(30):
            await handle.wait(BACKGROUND)
        results = await tool_results(s)
        texts = sorted(r.model[0]["content"][0]["text"] for r in results)  # pyright: ignore[reportIndexIssue]
        assert texts == ["report: task A done", "report: task B done", "report: task C done"]
        children = sorted(r.data["details"]["conversation"] for r in results)
        assert len(set(children)) == 3 and root.id not in children
        for child_id in children:
            child = await s.harness.conversation(child_id, BACKGROUND)
            assert child is not None
            config = await child.config(BACKGROUND)
            assert config["model"] == MODEL
            prompt = (await child.entries(BACKGROUND, limit=100))[-1]
            task = prompt.model[0]["content"]  # pyright: ignore[reportIndexIssue]
            if "task C" in str(task):
                assert config["selectedTools"] == ["note"]  # the reviewer's definition
            else:
                assert config["selectedTools"] == ["note"]  # the parent's, without agent
            assert [r.model[0]["content"][0]["text"] for r in await tool_results(s, child)] == [  # pyright: ignore[reportIndexIssue]
                f"noted {task!s}" if isinstance(task, str) else f"noted {task[0]['text']}"
            ]
        child_requests = [r for r in script.requests if any("subagent" in x for x in r.system)]
        assert any("You are the reviewer subagent." in x for r in child_requests for x in r.system)
        assert any(
            "You are a subagent working on one task" in x for r in child_requests for x in r.system
        )
        # the parent's context holds the reports, never a subagent's own messages
        parent_requests = [r for r in script.requests if r not in child_requests]
        assert all("noted" not in str(m) for r in parent_requests for m in r.messages)


async def test_running_subagents_show_their_step_and_a_bad_type_is_an_error(tmp_path: Path) -> None:
    gate = anyio.Event()
    script = Script(
        [
            {"description": "slow one", "prompt": "task A"},
            {"description": "nope", "prompt": "x", "subagent_type": "missing"},
        ]
    )
    async with session(tmp_path, script, gate) as s:
        root = await s.harness.root(BACKGROUND)
        watch = await root.watch(BACKGROUND)
        changed = anyio.Event()
        views: list[Any] = [watch.view]
        mirror = replicated_state(watch.view)

        def listener(envelope: Any) -> None:
            nonlocal changed
            mirror.apply(BACKGROUND, envelope.ops)
            views.append(mirror.value)
            changed.set()

        watch.start(listener)
        handle = await root.send("go", BACKGROUND)
        with anyio.fail_after(30):
            while not any(
                st.get("progress") == "running note (1 tool call)"
                for _t, st in subagents_in(views[-1])
            ):
                await changed.wait()
                changed = anyio.Event()
        ((_task, status),) = subagents_in(views[-1])
        assert status["label"] == "slow one" and status["agent"] == "general-purpose"
        # the app's tasks panel row for it: its label and current step
        assert task_summary(status) == "slow one · running note (1 tool call)"
        child = await s.harness.conversation(status["conversation"], BACKGROUND)
        assert child is not None
        child_watch = await child.watch(BACKGROUND)
        assert "[prompt] task A" in transcript_text(child_watch.view)
        assert "→ note" in transcript_text(child_watch.view)
        child_watch.stop()
        gate.set()
        with anyio.fail_after(30):
            await handle.wait(BACKGROUND)
        watch.stop()
        texts = sorted(r.model[0]["content"][0]["text"] for r in await tool_results(s))  # pyright: ignore[reportIndexIssue]
        assert texts[0].startswith("Unknown subagent_type 'missing'; available: general-purpose")
        assert texts[1] == "report: task A done"
        assert subagents_in(mirror.value) == []


class Modal:
    def __init__(self, tui: ScriptedTui) -> None:
        self.tui = tui

    async def choose(
        self,
        title: str,
        choices: Sequence[Choice | str],
        *,
        body: Any = "",
        allow_text: bool = False,
        hint: str = "",
    ) -> str | None:
        del hint
        shown = [c if isinstance(c, Choice) else Choice(c) for c in choices]
        self.tui.shown.append((title, shown, body))
        return self.tui.picks.pop(0) if self.tui.picks else shown[0].value

    def close(self) -> None:
        pass


class ScriptedTui:
    def __init__(self) -> None:
        self.commands: dict[str, Callable[[str, Context], Any]] = {}
        self.toasts: list[str] = []
        self.shown: list[tuple[str, list[Choice], str]] = []
        self.picks: list[str] = []  # the values chosen, in order (then the first choice)

    async def acquire_modal(self, ctx: Context) -> Modal:
        return Modal(self)

    def notify(self, message: str, *, severity: str = "information") -> None:
        self.toasts.append(message)

    def register_command(self, name: str, description: str, handler: Any) -> Callable[[], None]:
        self.commands[name] = handler

        def unregister() -> None:
            self.commands.pop(name, None)

        return unregister

    def mount_panel(self, panel_id: str, factory: Any) -> Callable[[], None]:
        raise AssertionError("no panel")

    def register_key(self, key: str, description: str, handler: Any) -> Callable[[], None]:
        raise AssertionError("no key")


def _source(transport: str, provider: Any, group: Any) -> Any:
    """The TUI's service source: in process, or over the wire to the session's provider (where a
    conversation's view is lazy: sent only while the TUI subscribes to it)."""
    if transport == "loopback":
        return LoopbackServiceSource(provider, task_group=group)

    async def connect() -> Any:
        client, server = memory_connection_pair()
        group.start_soon(serve_provider, server, provider)
        return client

    return connect_service_source(connect, task_group=group)


@pytest.mark.parametrize("transport", ["loopback", "wire"])
async def test_slash_agents_lists_subagents_and_shows_a_transcript(
    tmp_path: Path, transport: str
) -> None:
    script = Script([{"description": "look around", "prompt": "task A"}])
    tui = ScriptedTui()
    async with session(tmp_path, script) as s, anyio.create_task_group() as group:
        source = _source(transport, s.host.services, group)
        async with create_facet_host(
            [tui_facet(cast(Any, tui)), agents_tui_facet], service_sources=[source]
        ):
            # Before any subagent ran, /agents answers what Claude Code's does: the agents
            # there are, and where to add one (it used to toast a pointer to another command).
            await tui.commands["agents"]("", BACKGROUND)
            assert tui.toasts == []
            (title, _choices, body) = tui.shown.pop()
            assert title == "Agent definitions"
            assert body.startswith("No subagent has run in this session yet")
            assert "Loaded (1): general-purpose" in body
            assert "~/.claude/agents/" in body and ".coding-agent/agents/" in body
            root = await s.harness.root(BACKGROUND)
            handle = await root.send("go", BACKGROUND)
            with anyio.fail_after(30):
                await handle.wait(BACKGROUND)
                await root.wait_for_idle(BACKGROUND)
            await tui.commands["agents"]("", BACKGROUND)
            (title, choices, _body), (t2, _c2, transcript) = tui.shown
            assert title == "Subagents"
            assert [c.label for c in choices] == ["● look around (general-purpose)"]
            assert t2 == "Subagent: look around"
            assert "[prompt] task A" in transcript
            assert "→ note" in transcript and "[result] noted task A" in transcript
            assert "[agent] report: task A done" in transcript
        group.cancel_scope.cancel()


CLAUDE_REVIEWER = """---
name: code.reviewer
description: Use this agent when: a change is ready for review.
tools: Read, Grep, NotebookEdit
model: sonnet
---
You review code.
"""


@pytest.mark.parametrize("transport", ["loopback", "wire"])
async def test_slash_agents_definitions_names_what_loaded_what_did_not_and_what_waits(
    tmp_path: Path, transport: str
) -> None:
    claude = tmp_path / "home" / ".claude" / "agents"
    (claude / "review").mkdir(parents=True)
    reviewer = claude / "review" / "code-reviewer.md"
    reviewer.write_text(CLAUDE_REVIEWER)
    broken = claude / "notes.md"
    broken.write_text("# Just notes\n")
    waiting = tmp_path / ".claude" / "agents"  # the workspace's: an untrusted project
    waiting.mkdir(parents=True)
    (waiting / "a.md").write_text(REVIEWER)
    (waiting / "b.md").write_text(REVIEWER)
    tui = ScriptedTui()
    async with session(tmp_path, Script([])) as s, anyio.create_task_group() as group:
        source = _source(transport, s.host.services, group)
        async with create_facet_host(
            [tui_facet(cast(Any, tui)), agents_tui_facet], service_sources=[source]
        ):
            await tui.commands["agents"]("definitions", BACKGROUND)
        # the model is offered it under its id, with its description as written
        declaration = s.harness.tools.get("agent")
        assert declaration is not None
        assert "- code-reviewer: Use this agent when: a change is ready for review." in (
            declaration.description
        )
        group.cancel_scope.cancel()
    ((title, choices, body),) = tui.shown
    assert title == "Agent definitions" and [c.value for c in choices] == ["close"]
    assert body == "\n".join(
        [
            "Waiting: .claude/agents (2) — /trust, then restart, to load them",
            "",
            "Skipped (1):",
            f"  {broken}:1: no frontmatter: start the file with a --- line, name: and "
            "description: lines, and a closing --- line; the agent is skipped",
            "",
            "Loaded with a note (1):",
            f"  {reviewer}:4: NotebookEdit: Claude Code tool this agent does not have yet; the "
            "subagent runs without it",
            "",
            "Loaded (2): general-purpose, code-reviewer (code.reviewer)",
        ]
    )
    # a section only when it has something
    assert definitions_text({"agents": [], "skipped": [], "warnings": [], "waiting": []}) == (
        "Loaded (0)"
    )


PLANNER = """---
name: planner
description: Plans by delegating.
tools: agent, note
---
You are the planner.
"""


class NestedScript(Script):
    """The parent asks the planner; the planner asks a general-purpose subagent (which notes
    and reports, as in :class:`Script`) and reports what it heard."""

    def __call__(self, request: Request, state: FauxState) -> FauxResponse:
        last = request.messages[-1]
        if any("planner" in s for s in request.system):
            self.requests.append(request)
            if isinstance(last, UserMessage):
                call = {"description": "dig in", "prompt": "task B"}
                return faux_response(faux_tool_call("agent", call, id="p1"))
            return faux_response("plan: " + _text(last))
        return super().__call__(request, state)


@pytest.mark.parametrize("transport", ["loopback", "wire"])
async def test_slash_agents_shows_a_subagents_own_subagents_under_it(
    tmp_path: Path, transport: str
) -> None:
    agents = tmp_path / "config" / "coding-agent" / "agents"
    agents.mkdir(parents=True)
    (agents / "planner.md").write_text(PLANNER)
    call = {"description": "make a plan", "prompt": "task A", "subagent_type": "planner"}
    script = NestedScript([call])
    tui = ScriptedTui()
    async with session(tmp_path, script) as s, anyio.create_task_group() as group:
        source = _source(transport, s.host.services, group)
        async with create_facet_host(
            [tui_facet(cast(Any, tui)), agents_tui_facet], service_sources=[source]
        ):
            root = await s.harness.root(BACKGROUND)
            handle = await root.send("go", BACKGROUND)
            with anyio.fail_after(30):
                await handle.wait(BACKGROUND)
                await root.wait_for_idle(BACKGROUND)
            (report,) = await tool_results(s)
            assert report.model[0]["content"][0]["text"] == "plan: report: task B done"
            await tui.commands["agents"]("", BACKGROUND)
            (title, choices, _body), _transcript = tui.shown
            assert title == "Subagents"
            assert [c.label for c in choices] == [
                "● make a plan (planner)",
                "  ↳ ● dig in (general-purpose)",
            ]
            assert [c.description for c in choices] == ["finished", "finished"]
            tui.picks = [choices[1].value]
            await tui.commands["agents"]("", BACKGROUND)
            *_, (_t, again, _b), (t2, _c2, transcript) = tui.shown
            assert [c.label for c in again] == [c.label for c in choices]  # still nested
            assert t2 == "Subagent: dig in"
            assert "[prompt] task B" in transcript
            assert "[agent] report: task B done" in transcript
        group.cancel_scope.cancel()


async def test_a_nested_subagents_step_shows_in_its_parents_row(tmp_path: Path) -> None:
    # The root's tasks hold the first-level subagents only: the planner's row ends with what
    # the subagent it runs is doing.
    agents = tmp_path / "config" / "coding-agent" / "agents"
    agents.mkdir(parents=True)
    (agents / "planner.md").write_text(PLANNER)
    gate = anyio.Event()
    call = {"description": "make a plan", "prompt": "task A", "subagent_type": "planner"}
    async with session(tmp_path, NestedScript([call]), gate) as s:
        root = await s.harness.root(BACKGROUND)
        watch = await root.watch(BACKGROUND)
        changed = anyio.Event()
        mirror = replicated_state(watch.view)

        def listener(envelope: Any) -> None:
            mirror.apply(BACKGROUND, envelope.ops)
            changed.set()

        watch.start(listener)
        handle = await root.send("go", BACKGROUND)
        wanted = "running agent (1 tool call) › running note (1 tool call)"
        with anyio.fail_after(30):
            while not any(st.get("progress") == wanted for _t, st in subagents_in(mirror.value)):
                await changed.wait()
                changed = anyio.Event()
        ((_task, status),) = subagents_in(mirror.value)
        assert task_summary(status) == f"make a plan · {wanted}"
        gate.set()
        with anyio.fail_after(30):
            await handle.wait(BACKGROUND)
        watch.stop()
        assert subagents_in(mirror.value) == []


async def test_a_reload_mid_subagent_keeps_it_running_and_the_parent_gets_its_report(
    tmp_path: Path,
) -> None:
    # A hot reload of facets-subagents while a subagent runs: a new generation of the package's
    # code replaces the running one (docs/design/reload.md#session-worker-reload: with invocations running, suspend and reopen); the subagent resumes in the same
    # owned conversation under the new generation's kind, and the parent gets its report once.
    gate = anyio.Event()
    script = Script([{"description": "slow one", "prompt": "task A"}], gate)
    async with session(tmp_path, script, gate) as s:
        root = await s.harness.root(BACKGROUND)
        watch = await root.watch(BACKGROUND)
        mirror = replicated_state(watch.view)
        changed = anyio.Event()

        def listener(envelope: Any) -> None:
            nonlocal changed
            mirror.apply(BACKGROUND, envelope.ops)
            changed.set()

        watch.start(listener)
        await root.send("go", BACKGROUND)
        with anyio.fail_after(30):  # the subagent's note call waits on the gate
            while not any(
                st.get("progress", "").startswith("running note")
                for _t, st in subagents_in(mirror.value)
            ):
                await changed.wait()
                changed = anyio.Event()
        ((_task, before),) = subagents_in(mirror.value)
        old_tool = s.harness.tools.get("agent")
        watch.stop()

        (package,) = facet_package_from_folder(PACKAGE)
        generation = load_generation(package, "session")
        try:
            path = await reload_session_facets(
                s.service, s.host, list(generation.facets), BACKGROUND
            )
            assert path == "reopened"  # invocations were running: suspended, then recovered
            harness = s.service.harness  # the reopened harness
            new_tool = harness.tools.get("agent")
            assert new_tool is not None and new_tool is not old_tool  # the new generation's
            gate.set()
            root = await harness.root(BACKGROUND)
            with anyio.fail_after(30):
                while not await root.entries(BACKGROUND, limit=1, kind="pi.tool_result"):
                    await root.wait_for_idle(BACKGROUND)
                await root.wait_for_idle(BACKGROUND)
            results = list(
                reversed(await root.entries(BACKGROUND, limit=100, kind="pi.tool_result"))
            )
            assert [r.model[0]["content"][0]["text"] for r in results] == [  # pyright: ignore[reportIndexIssue]
                "report: task A done"
            ]
            # the same subagent conversation carried on: no second child was made
            details = results[0].data["details"]  # pyright: ignore[reportIndexIssue]
            assert details["conversation"] == before["conversation"]
            final = await root.entries(BACKGROUND, limit=1, kind="pi.assistant")
            assert final[0].model[0]["content"][0]["text"] == "all reports read"  # pyright: ignore[reportIndexIssue]
            watch = await root.watch(BACKGROUND)
            assert subagents_in(watch.view) == []
            watch.stop()
            # the subagent's model was asked twice (its note call, its report): the reopened
            # harness re-ran the interrupted note call (replay safe), not the whole subagent
            child_requests = [r for r in script.requests if any("subagent" in x for x in r.system)]
            assert len(child_requests) == 2
        finally:
            await generation.dispose()


def test_the_step_board_shows_a_running_childs_step_after_its_parents_until_it_stops() -> None:
    board = StepBoard()
    board.start(1, "starting")
    board.tool(1, "agent")
    board.start(2, "starting", parent=1)
    assert board.step(1) == "running agent (1 tool call) › starting"
    board.start(3, "starting", parent=2)
    board.tool(3, "grep")
    assert board.step(2) == "starting › running grep (1 tool call)"
    assert board.step(1) == "running agent (1 tool call) › starting › running grep (1 tool call)"
    board.tool(1, "read")  # the parent's own step replaces the chain until the child's next
    assert board.step(1) == "running read (2 tool calls)"
    board.stop(3)
    assert board.step(2) == "starting"
    board.stop(2)
    assert board.step(1) == "running read (2 tool calls)"
    board.start(4, "starting", parent=99)  # a parent the board does not follow: none
    assert board.step(4) == "starting" and board.step(1) == "running read (2 tool calls)"
    board.start(99, "resumed")  # after a restart a parent may resume after its child
    board.tool(4, "ls")
    assert board.step(99) == "resumed › running ls (1 tool call)"
