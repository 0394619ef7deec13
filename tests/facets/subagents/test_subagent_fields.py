"""Claude Code's other agent-file fields: what a subagent does with them.

The probe that found it: a published ``frontend-reviewer`` (``tools: Read, Glob, Grep, Bash``,
``permissionMode: plan``, ``maxTurns: 8``, ``skills:``, ``effort: medium``) loaded without a
word, and its subagent ran ``touch planmode-violated.txt`` with every call approved. Here:

* ``permissionMode: plan`` makes the subagent read-only with the session's own enforcement (the
  approval feature's ``before_tool``, reading the subagent's task up the owner chain): its
  ``bash`` and ``write`` are refused without asking, whatever the session's mode (``auto``
  too), and the project is unchanged; a looser value (``bypassPermissions``) is warned about
  and changes nothing: in an ``ask`` session its command still asks, in ``plan`` it is refused;
* ``maxTurns`` stops a subagent whose model would go on calling tools, after that many model
  turns, and its report says so — also when its calls are refused (plan), so no tool ends the
  turn;
* ``skills`` are preloaded into the subagent's system prompt (the app's ``skills`` service, real
  skill folders) and ``effort`` is its thinking level (else the caller's);
* each field not honoured gets a warning naming the file and line and what happens instead
  (``isolation`` makes the subagent ask before each change); two files of one folder with one
  name get a warning naming both and the one used.

Sessions compose pico3's harness session facet (a scripted faux model), the approval extension
(its ``ask`` answering as ``--approve allow`` or ``deny`` would) and the subagents session facet.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from facets_approval.contract import ApprovalDecision, ApprovalRequest, stricter
from facets_approval.session import ApprovalInstallation, install_approval, plan_mode_reason
from facets_subagents.contract import SubagentDefinitions
from facets_subagents.definitions import load_definitions
from facets_subagents.kind import STOPPED_AT_LIMIT
from facets_subagents.session import SKILLS_NOTE, session_facet
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
from pico3.models.faux import FauxProvider, FauxResponse, FauxState, faux_response, faux_tool_call
from pico3.models.provider import Request, UserMessage

pytestmark = pytest.mark.anyio

MODEL = {"provider": "faux", "modelId": "faux-1"}

FRONTEND_REVIEWER = """---
name: frontend-reviewer
description: Reviews frontend changes for accessibility and performance problems.
tools: Read, Glob, Grep, Bash
permissionMode: plan
maxTurns: 8
skills:
  - accessibility
  - web-performance
effort: medium
color: cyan
---
You are the frontend reviewer. Review the change; never modify the project.
"""

BYPASS = """---
name: fixer
description: Fixes things without asking.
tools: Bash, Write
permissionMode: bypassPermissions
---
You are the fixer.
"""

LOOPER = """---
name: looper
description: Keeps going.
tools: note
maxTurns: 3
---
You are the looper.
"""

PLAN_LOOPER = """---
name: plan-looper
description: Keeps trying to run a command.
tools: Bash
permissionMode: plan
maxTurns: 2
---
You are the plan looper.
"""


def env_for(tmp: Path) -> dict[str, str]:
    return {"HOME": str(tmp / "home"), "XDG_CONFIG_HOME": str(tmp / "config")}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def claude_dir(tmp: Path) -> Path:
    return tmp / "home" / ".claude" / "agents"


# -- loading: what each field gives, and the warnings' exact words ----------------------------------
def test_the_frontend_reviewer_loads_read_only_with_its_turn_limit_and_one_warning(
    tmp_path: Path,
) -> None:
    path = write(claude_dir(tmp_path) / "frontend-reviewer.md", FRONTEND_REVIEWER)
    loaded = load_definitions(env=env_for(tmp_path))
    reviewer = loaded.agents["frontend-reviewer"]
    assert reviewer.permission_mode == "plan"
    assert reviewer.max_turns == 8
    assert reviewer.tools == ("read", "find", "grep", "bash")
    assert reviewer.skills == ("accessibility", "web-performance")
    assert reviewer.skills_line == 7
    assert reviewer.thinking == "medium"
    assert list(loaded.warnings) == []  # skills and effort are honoured; color is cosmetic
    assert loaded.errors == ()
    assert path.exists()


def test_a_looser_permission_mode_and_the_other_fields_are_named_with_file_and_line(
    tmp_path: Path,
) -> None:
    agents = claude_dir(tmp_path)
    fixer = write(agents / "fixer.md", BYPASS)
    edits = write(
        agents / "editor.md",
        "---\nname: editor\ndescription: Edits.\npermissionMode: acceptEdits\nhooks:\n"
        "  PreToolUse: []\nmaxTurns: many\n---\nEdit.\n",
    )
    quiet = write(
        agents / "quiet.md",
        "---\nname: quiet\ndescription: Never asks.\npermissionMode: dontAsk\nbackground: true\n"
        "---\nWork.\n",
    )
    plain = write(
        agents / "plain.md", "---\nname: plain\ndescription: Plain.\npermissionMode: default\n---\n"
    )
    loaded = load_definitions(env=env_for(tmp_path))
    assert list(loaded.warnings) == [
        f"{edits}:4: permissionMode: acceptEdits is not honoured: a subagent never gets more "
        "authority than the session; it runs in the session's mode",
        f"{edits}:7: maxTurns must be a whole number of turns (1 or more), got 'many'; the "
        "subagent runs without a limit",
        f"{fixer}:5: permissionMode: bypassPermissions is not honoured: a subagent never gets "
        "more authority than the session; it runs in the session's mode",
        f"{quiet}:4: permissionMode: dontAsk is not honoured yet: the subagent runs in the "
        "session's mode (a call that needs approval asks rather than being refused)",
        f"{quiet}:5: background is not honoured: the subagent does not run in the background; "
        "the caller waits for its report (several agent calls in one message run in parallel)",
    ]
    assert plain.exists()
    for name in ("fixer", "editor", "quiet", "plain"):  # each runs in the session's mode
        assert loaded.agents[name].permission_mode is None
    assert loaded.agents["editor"].max_turns is None


def test_skills_and_effort_as_published_agents_write_them(tmp_path: Path) -> None:
    agents = claude_dir(tmp_path)
    write(
        agents / "designer.md",
        "---\nname: designer\ndescription: Designs.\nmodel: opus\neffort: max\nskills:\n"
        "  - dev:gen-design-doc\n  - dev:gen-design-doc\n---\nDesign.\n",
    )
    write(
        agents / "nextjs.md",
        "---\nname: nextjs\ndescription: Next.js.\nskills: solid-nextjs, nextjs-16\n"
        "effort: High\n---\nBuild.\n",
    )
    odd = write(
        agents / "odd.md",
        "---\nname: odd\ndescription: Odd.\nskills:\n  a: 1\neffort: ultra\n---\nOdd.\n",
    )
    loaded = load_definitions(env=env_for(tmp_path))
    designer, nextjs, other = (loaded.agents[n] for n in ("designer", "nextjs", "odd"))
    assert designer.skills == ("dev:gen-design-doc",) and designer.thinking == "xhigh"
    assert nextjs.skills == ("solid-nextjs", "nextjs-16") and nextjs.thinking == "high"
    assert other.skills == () and other.thinking is None
    assert list(loaded.warnings) == [
        f"{odd}:4: skills must be a list of skill names, got {{'a': 1}}; the subagent runs "
        "without preloaded skills",
        f"{odd}:6: effort: 'ultra' is not an effort level (low, medium, high, xhigh, max); the "
        "subagent runs at the caller's thinking level",
    ]


def test_each_field_not_honoured_says_what_happens_instead(tmp_path: Path) -> None:
    path = write(
        claude_dir(tmp_path) / "isolated.md",
        "---\nname: isolated\ndescription: Isolated.\nisolation: worktree\nmemory: project\n"
        "mcpServers:\n  - github\nbackground: false\n---\nWork.\n",
    )
    loaded = load_definitions(env=env_for(tmp_path))
    assert list(loaded.warnings) == [  # background: false is what happens anyway: no word
        f"{path}:4: isolation is not honoured: the subagent gets no worktree of its own and "
        "works in the session's project folder; so that its changes do not land there unseen, "
        "it runs in ask mode: each call that needs approval asks (unless the session's mode is "
        "stricter)",
    ]
    assert loaded.agents["isolated"].permission_mode == "ask"


def test_initial_prompt_is_named_and_never_glued_into_the_description(tmp_path: Path) -> None:
    """An agent written for ``claude --agent`` (an ``initialPrompt``), whose description has an
    unquoted ``: `` (YAML refuses the block, so it is read field by field, as Claude Code
    reads it): the prompt is a field of its own, not text the model reads as the description,
    and one warning says it is not sent."""
    path = write(
        claude_dir(tmp_path) / "triager.md",
        "---\nname: triager\ndescription: Triage new issues. Use when: a label is missing\n"
        "initialPrompt: Triage every issue opened since yesterday\nmodel: sonnet\n---\nTriage.\n",
    )
    loaded = load_definitions(env=env_for(tmp_path))
    agent = loaded.agents["triager"]
    assert agent.description == "Triage new issues. Use when: a label is missing"
    assert agent.model == "sonnet"
    assert list(loaded.warnings) == [
        f"{path}:4: initialPrompt is not honoured: it is sent only when the agent runs as the "
        "main session (Claude Code's --agent), which this agent has no mode for; as a subagent "
        "it starts from the caller's prompt, as in Claude Code"
    ]


def test_an_isolated_plan_agent_stays_read_only(tmp_path: Path) -> None:
    path = write(
        claude_dir(tmp_path) / "planner.md",
        "---\nname: planner\ndescription: Plans.\npermissionMode: plan\nisolation: worktree\n"
        "---\nPlan.\n",
    )
    loaded = load_definitions(env=env_for(tmp_path))
    assert loaded.agents["planner"].permission_mode == "plan"
    assert list(loaded.warnings) == [
        f"{path}:5: isolation is not honoured: the subagent gets no worktree of its own and "
        "works in the session's project folder (read-only there: permissionMode: plan)"
    ]


def test_two_files_of_one_folder_with_one_name_are_both_named(tmp_path: Path) -> None:
    agents = claude_dir(tmp_path)
    first = write(agents / "a-reviewer.md", "---\nname: reviewer\ndescription: First.\n---\nA.\n")
    second = write(
        agents / "review" / "b.md", "---\ndescription: Second.\nname: reviewer\n---\nB.\n"
    )
    other = tmp_path / "config" / "coding-agent" / "agents"
    write(other / "reviewer.md", "---\nname: reviewer\ndescription: Ours.\n---\nOurs.\n")
    loaded = load_definitions(env=env_for(tmp_path))
    assert list(loaded.warnings) == [
        f"{second}:3: {first} has the name 'reviewer' too; this file is the one used (a "
        "folder's files are read in name order, and the later one wins)"
    ]  # another folder's file replacing it is the documented precedence: no warning
    assert loaded.agents["reviewer"].description == "Ours."


def test_stricter_never_loosens() -> None:
    assert stricter("auto", "plan") == "plan"
    assert stricter("plan", "auto") == "plan"
    assert stricter("sandbox", "ask") == "ask"
    assert stricter("ask", "accept-edits") == "ask"
    assert stricter("auto", "bypassPermissions") == "plan"  # not a mode: a doubt is no grant


# -- running: a scripted parent hands one task to a subagent ------------------------------------
@dataclass
class Child:
    """What the subagent's model does each turn: ``calls(turn)`` (``turn`` from 1) gives the
    tool calls of that turn, none meaning the final report."""

    calls: Callable[[int], list[Any]]
    turns: int = 0


class Script:
    def __init__(self, agent: str, child: Child) -> None:
        self.agent = agent
        self.child = child
        self.child_requests: list[Request] = []
        self.parent_requests: list[Request] = []

    def __call__(self, request: Request, state: FauxState) -> FauxResponse:
        is_child = any("subagent" in s or "You are the" in s for s in request.system)
        last = request.messages[-1]
        if not is_child:
            self.parent_requests.append(request)
            if isinstance(last, UserMessage):
                args = {"description": "review", "prompt": "do it", "subagent_type": self.agent}
                return faux_response(faux_tool_call("agent", args, id="a1"))
            return faux_response("parent done")
        self.child_requests.append(request)
        self.child.turns += 1
        calls = self.child.calls(self.child.turns)
        if not calls:
            return faux_response(f"report after {self.child.turns} turns")
        return faux_response(f"turn {self.child.turns}", *calls)


@dataclass
class Session:
    service: HarnessServiceApi
    approval: ApprovalInstallation
    asked: list[ApprovalRequest] = field(default_factory=list[ApprovalRequest])
    runs: list[tuple[str, dict[str, Any]]] = field(default_factory=list[tuple[str, dict[str, Any]]])
    definitions: Any = None
    """The ``subagents.definitions`` service (what ``/agents definitions`` shows)."""

    async def go(self) -> Any:
        root = await self.service.harness.root(BACKGROUND)
        handle = await root.send("go", BACKGROUND)
        with anyio.fail_after(30):
            await handle.wait(BACKGROUND)
        entries = await root.entries(BACKGROUND, limit=50, kind="pi.tool_result")
        (result,) = entries
        return result

    async def child_results(self, result: Any) -> dict[str, str]:
        child = await self.service.harness.conversation(
            result.data["details"]["conversation"], BACKGROUND
        )
        assert child is not None
        found: dict[str, str] = {}
        for entry in reversed(await child.entries(BACKGROUND, limit=200, kind="pi.tool_result")):
            message: Any = entry.model
            found[message[0]["toolCallId"]] = message[0]["content"][0]["text"]
        return found

    async def child_turns(self, result: Any) -> int:
        child = await self.service.harness.conversation(
            result.data["details"]["conversation"], BACKGROUND
        )
        assert child is not None
        return len(await child.entries(BACKGROUND, limit=200, kind="pi.assistant"))


def tools(tmp: Path, runs: list[tuple[str, dict[str, Any]]]) -> list[ToolDeclaration]:
    """``bash`` that really touches a file (``touch NAME``), ``write`` that really writes one,
    and a read-only ``note``."""

    async def bash(args: dict[str, Any], api: Any, ctx: Context) -> ToolResult:
        runs.append(("bash", args))
        command = str(args.get("command", ""))
        if command.startswith("touch "):
            (tmp / command.split()[1]).touch()
        return ToolResult.text("bash ran")

    async def write_file(args: dict[str, Any], api: Any, ctx: Context) -> ToolResult:
        runs.append(("write", args))
        (tmp / str(args["path"])).write_text(str(args.get("content", "")))
        return ToolResult.text("written")

    async def note(args: dict[str, Any], api: Any, ctx: Context) -> ToolResult:
        runs.append(("note", args))
        return ToolResult.text("noted")

    schema = {"type": "object"}
    return [
        ToolDeclaration("bash", "Run a command.", schema, bash),
        ToolDeclaration("write", "Write a file.", schema, write_file),
        ToolDeclaration("note", "Take a note.", schema, note, replay="safe"),
    ]


@asynccontextmanager
async def session(
    tmp: Path,
    script: Script,
    *,
    answer: str = "allow",
    restrictions: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
    thinking: str = "off",
) -> AsyncIterator[Session]:
    project = tmp / "project"
    project.mkdir()
    services: dict[str, Any] = {
        "models": Models([FauxProvider([script] * 40)]),
        "workspace": str(project),
        "mcp_env": env_for(tmp),
    }
    if restrictions is not None:  # Claude Code's switches, as the app's permission source says
        services["permission_rules"] = Restricting(restrictions)
    services.update(extra or {})
    found: list[Session] = []
    workers: list[HarnessServiceApi] = []
    installations: list[ApprovalInstallation] = []
    asked: list[ApprovalRequest] = []
    runs: list[tuple[str, dict[str, Any]]] = []

    async def ask(request: ApprovalRequest, ctx: Context) -> ApprovalDecision:
        asked.append(request)  # as --approve allow (or deny) answers
        return {"decision": "allow" if answer == "allow" else "deny", "by": "headless"}

    definitions: list[Any] = []

    def worker(env: FacetEnvironment) -> None:
        harness = env.use(HarnessService)
        workers.append(harness)
        definitions.append(env.use(SubagentDefinitions))

        def install(h: Any) -> Callable[[], None]:
            installation = install_approval(h, ask)
            installations.append(installation)
            undo = [h.register_tool(d) for d in tools(project, runs)]

            def uninstall() -> None:
                for fn in undo:
                    fn()
                installation()

            return uninstall

        env.on_activate(lambda: env.own(harness.add_registration(install)))

    async with anyio.create_task_group() as group:
        harness_facet = harness_session_facet(
            lambda: JsonlStorage(str(tmp / "store"), fsync=False),
            HarnessOptions(services=services),
            task_group=group,
        )
        async with create_facet_host(
            [harness_facet, define_facet("test/worker", worker), session_facet]
        ):
            (service,) = workers
            await service.resume(BACKGROUND)
            root = await service.harness.root(BACKGROUND)
            await root.set_config(
                {
                    "model": MODEL,
                    "selectedTools": ["note", "bash", "write", "agent"],
                    "thinkingLevel": thinking,
                },
                BACKGROUND,
            )
            s = Session(service, installations[-1], asked, runs, definitions[-1])
            found.append(s)
            yield s
        group.cancel_scope.cancel()


class Restricting:
    """A permission source with no rules and Claude Code's restrictive switches."""

    def __init__(self, restrictions: dict[str, str]) -> None:
        self.restrictions = restrictions

    def load(self) -> dict[str, Any]:
        return {"rules": [], "scopes": ["user"], "problems": [], "restrictions": self.restrictions}

    def add(self, rule: str, kind: str, scope: str) -> str:
        raise ValueError("no rule is kept here")

    def remove(self, rule: str, kind: str, source: str) -> None:
        raise ValueError("no rule is kept here")


def changes(turn: int) -> list[Any]:
    """The probe's subagent: it tries to change the project on its first turn."""
    if turn > 1:
        return []
    return [
        faux_tool_call("bash", {"command": "touch planmode-violated.txt"}, id="b1"),
        faux_tool_call("write", {"path": "written.txt", "content": "x"}, id="w1"),
    ]


@pytest.mark.parametrize("mode", ["ask", "auto"])
async def test_a_plan_subagent_changes_nothing_whatever_the_sessions_mode(
    tmp_path: Path, mode: str
) -> None:
    agents = claude_dir(tmp_path)
    write(agents / "frontend-reviewer.md", FRONTEND_REVIEWER.replace("Bash", "Bash, Write"))
    async with session(tmp_path, Script("frontend-reviewer", Child(changes))) as s:
        await s.approval.set_mode(mode, BACKGROUND)  # type: ignore[arg-type]
        result = await s.go()
        results = await s.child_results(result)
    project = tmp_path / "project"
    assert not (project / "planmode-violated.txt").exists()
    assert not (project / "written.txt").exists()
    assert results["b1"].endswith(plan_mode_reason("bash", subagent=True))
    assert results["w1"].endswith(plan_mode_reason("write", subagent=True))
    assert s.runs == [] and s.asked == []  # refused, never asked (nor allowed by the answer)
    assert result.model[0]["content"][0]["text"] == "report after 2 turns"


async def test_a_bypass_subagent_asks_in_an_ask_session_and_is_refused_in_plan(
    tmp_path: Path,
) -> None:
    write(claude_dir(tmp_path / "ask") / "fixer.md", BYPASS)
    async with session(tmp_path / "ask", Script("fixer", Child(changes)), answer="deny") as s:
        result = await s.go()
        results = await s.child_results(result)
    assert [request["name"] for request in s.asked] == ["bash", "write"]  # each asked
    assert "denied by headless" in results["b1"] and "denied by headless" in results["w1"]
    assert s.runs == []
    assert not (tmp_path / "ask" / "project" / "planmode-violated.txt").exists()

    write(claude_dir(tmp_path / "plan") / "fixer.md", BYPASS)
    async with session(tmp_path / "plan", Script("fixer", Child(changes))) as s:
        await s.approval.set_mode("plan", BACKGROUND)
        result = await s.go()
        results = await s.child_results(result)
    assert results["b1"].endswith(plan_mode_reason("bash"))  # the session's plan mode
    assert s.runs == [] and s.asked == []


async def test_deny_instead_of_prompting_refuses_a_subagents_calls_without_asking(
    tmp_path: Path,
) -> None:
    """Claude Code's ``permissions.denyInsteadOfPrompting``: a subagent's call that would ask
    is refused at once (nobody is asked, the ``--approve allow`` answer is never consulted)
    and the subagent's turn goes on to its report."""
    settings = "/home/me/.claude/settings.json"
    write(claude_dir(tmp_path) / "fixer.md", BYPASS)
    restrictions = {"denyInsteadOfPrompting": settings}
    async with session(tmp_path, Script("fixer", Child(changes)), restrictions=restrictions) as s:
        result = await s.go()
        results = await s.child_results(result)
    assert s.asked == [] and s.runs == []
    for cid, tool in (("b1", "bash"), ("w1", "write")):
        assert f"{tool} was not run: it needs approval, and permissions.denyInsteadOfPrompting " \
            f"in {settings} refuses such calls instead of asking anyone." in results[cid]  # fmt: skip
    assert not (tmp_path / "project" / "planmode-violated.txt").exists()
    assert result.model[0]["content"][0]["text"] == "report after 2 turns"


async def test_max_turns_stops_a_subagent_that_would_go_on(tmp_path: Path) -> None:
    write(claude_dir(tmp_path) / "looper.md", LOOPER)
    forever = Child(lambda turn: [faux_tool_call("note", {"text": str(turn)}, id=f"n{turn}")])
    async with session(tmp_path, Script("looper", forever)) as s:
        result = await s.go()
        turns = await s.child_turns(result)
    assert turns == 3 and forever.turns == 3
    assert [args["text"] for _, args in s.runs] == ["1", "2", "3"]  # the third turn's tools ran
    assert result.model[0]["content"][0]["text"] == (
        f"turn 3\n\n{STOPPED_AT_LIMIT.format(limit=3)}"
    )
    assert not result.model[0].get("isError")


async def test_max_turns_stops_a_plan_subagent_whose_calls_are_all_refused(
    tmp_path: Path,
) -> None:
    write(claude_dir(tmp_path) / "plan-looper.md", PLAN_LOOPER)
    forever = Child(lambda turn: [faux_tool_call("bash", {"command": "make"}, id=f"b{turn}")])
    async with session(tmp_path, Script("plan-looper", forever)) as s:
        await s.approval.set_mode("auto", BACKGROUND)
        result = await s.go()
    # no tool ran to end the second turn: the call past the limit has its task abort the
    # subagent's turn (a model call already under way when the abort lands is the last)
    assert 3 <= forever.turns <= 4 and s.runs == []
    text = result.model[0]["content"][0]["text"]
    assert text.endswith(STOPPED_AT_LIMIT.format(limit=2)) and text.startswith("turn ")


# -- skills and effort: what reaches the subagent's model ---------------------------------------
ACCESSIBILITY = """---
name: accessibility
description: Checks a page for accessibility problems.
---
# Accessibility checklist
Every img needs an alt text; ACCESSIBILITY-SKILL-MARKER.
"""


async def test_preloaded_skills_reach_the_subagents_context_and_effort_its_thinking(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The frontend reviewer's ``skills: [accessibility, web-performance]`` with the app's own
    ``skills`` service (real skill folders): the first skill's whole instructions are in every
    request of the subagent's model, the parent's requests do not carry them, the missing one is
    warned about by name and line; ``effort: medium`` is the subagent's thinking level while the
    parent runs at ``high``."""
    from coding_agent.context.skills import SubagentSkills

    reviewer = write(claude_dir(tmp_path) / "frontend-reviewer.md", FRONTEND_REVIEWER)
    skill = write(
        tmp_path / "home" / ".claude" / "skills" / "accessibility" / "SKILL.md", ACCESSIBILITY
    )
    script = Script("frontend-reviewer", Child(lambda turn: []))
    skills = SubagentSkills(tmp_path / "project", env_for(tmp_path))
    with caplog.at_level("WARNING", logger="facets_subagents"):
        async with session(tmp_path, script, extra={"skills": skills}, thinking="high") as s:
            listed = await s.definitions.summary(BACKGROUND)
            result = await s.go()
    missing = (
        f"{reviewer}:7: no skill named 'web-performance' (this session's skills: accessibility); "
        "the subagent runs without it"
    )
    assert listed["warnings"] == [missing]  # /agents definitions says so before any run
    assert caplog.messages.count(missing) == 1  # logged once: at load, not again at the run
    assert result.model[0]["content"][0]["text"] == "report after 1 turns"
    (request,) = script.child_requests
    system = "\n".join(request.system)
    assert "ACCESSIBILITY-SKILL-MARKER" in system
    assert f'<skill name="accessibility" location="{skill.resolve()}">' in system
    assert system.index("You are the frontend reviewer") < system.index("# Accessibility")
    assert request.thinking_level == "medium"
    assert len(script.parent_requests) == 2
    for asked in script.parent_requests:
        assert "ACCESSIBILITY-SKILL-MARKER" not in "\n".join(asked.system)
        assert asked.thinking_level == "high"


async def test_without_effort_the_subagent_thinks_as_the_caller_and_without_a_skills_service_it_is_warned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(
        claude_dir(tmp_path) / "helper.md",
        "---\nname: helper\ndescription: Helps.\nskills: accessibility\n---\nYou are the helper.\n",
    )
    script = Script("helper", Child(lambda turn: []))
    with caplog.at_level("WARNING", logger="facets_subagents"):
        async with session(tmp_path, script, thinking="low") as s:
            await s.go()
    (request,) = script.child_requests
    assert request.thinking_level == "low"
    assert "These skills are preloaded" not in "\n".join(request.system)
    assert f"{path}:4: skills: this host provides no skills (no 'skills' harness service); the " \
        "subagent runs without accessibility" in caplog.messages  # fmt: skip


class Unreadable:
    """A host's skills service whose one skill breaks between listing and reading."""

    def skill(self, name: str) -> dict[str, str] | None:
        if name == "broken":
            raise ValueError("/skills/broken/SKILL.md: the frontmatter is not a YAML mapping")
        return {"name": name, "location": f"/skills/{name}/SKILL.md", "text": f"SKILL {name}"}

    def names(self) -> list[str]:
        return ["broken", "fine"]


async def test_a_skill_that_cannot_be_read_is_left_out_and_the_others_preloaded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(
        claude_dir(tmp_path) / "helper.md",
        "---\nname: helper\ndescription: Helps.\nskills: [broken, fine]\n---\nYou are the helper.\n",
    )
    script = Script("helper", Child(lambda turn: []))
    with caplog.at_level("WARNING", logger="facets_subagents"):
        async with session(tmp_path, script, extra={"skills": Unreadable()}) as s:
            await s.go()
    (request,) = script.child_requests
    system = "\n".join(request.system)
    assert system.endswith(f"{SKILLS_NOTE}SKILL fine")
    assert f"{path}:4: skill 'broken' cannot be read (/skills/broken/SKILL.md: the frontmatter " \
        "is not a YAML mapping); the subagent runs without it" in caplog.messages  # fmt: skip


async def test_an_isolated_subagent_asks_before_it_changes_the_project_even_in_auto(
    tmp_path: Path,
) -> None:
    """``isolation: worktree`` is not honoured (no worktree): the subagent works in the project
    itself, so each call that needs approval asks, even in a session in ``auto``."""
    write(
        claude_dir(tmp_path) / "experimenter.md",
        "---\nname: experimenter\ndescription: Tries a refactor.\ntools: Bash, Write\n"
        "isolation: worktree\n---\nYou are the experimenter.\n",
    )
    async with session(tmp_path, Script("experimenter", Child(changes)), answer="deny") as s:
        await s.approval.set_mode("auto", BACKGROUND)
        result = await s.go()
        results = await s.child_results(result)
    assert [request["name"] for request in s.asked] == ["bash", "write"]
    assert "denied by headless" in results["b1"] and "denied by headless" in results["w1"]
    assert s.runs == [] and not (tmp_path / "project" / "planmode-violated.txt").exists()
