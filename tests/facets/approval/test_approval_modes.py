"""Permission modes (docs/design/agent.md#features; issue 8 (e)2) over a real harness.

A session host composes pico3's harness session facet (faux model), the approval session facet
and tools ``read``, ``write``, ``edit`` and ``bash`` that append one line per run to an effects
file, so "nothing was executed" is a fact on disk. Presentation hosts reach the session's
services through chord's loopback source, as a TUI process reaches the worker: the dialog facet
over a scripted ``Tui``, and a small client facet that uses ``approval.mode``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, FacetHost, create_facet_host, define_facet
from chord.remote import RemoteServiceError
from facets_approval.contract import PERMISSION_MODES, ApprovalMode, PermissionMode
from facets_approval.session import (
    DEFAULT_RULES,
    ApprovalRules,
    install_approval,
    plan_mode_reason,
    session_facet,
)
from facets_approval.tui import MODE_PANEL_ID, ModeLabel, mode_tui_facet, tui_facet
from pico3 import HarnessService, HarnessServiceApi, harness_session_facet
from pico3.harness import ConversationHandle, Harness, HarnessOptions
from pico3.models.faux import FauxProvider, FauxStep, faux_response, faux_tool_call
from pico3.storage import JsonlStorage, MemoryStorage, Storage
from pico3.tools import ToolDeclaration, ToolResult
from pico3.turn.models import Models

pytestmark = pytest.mark.anyio

MODEL = {"provider": "faux", "modelId": "faux-1"}
CODING = ("read", "write", "edit", "bash")
TOOLS = (*CODING, "deploy")
SAFE = frozenset({"read"})
"""The tools declared ``replay="safe"`` here (``deploy`` is named by no rule and declared unsafe)."""


def effects(path: Path) -> list[str]:
    """The tools that ran, in order (one line each in the effects file)."""
    return path.read_text().split() if path.exists() else []


def tool(name: str, path: Path) -> ToolDeclaration:
    async def execute(args: dict[str, Any], api: Any, ctx: Context) -> ToolResult:
        with path.open("a") as file:
            file.write(f"{name}\n")
        return ToolResult.text(f"{name} ran")

    replay = "safe" if name in SAFE else "unsafe"
    return ToolDeclaration(name, f"The {name} tool.", {"type": "object"}, execute, replay=replay)


@dataclass
class Session:
    worker: HarnessServiceApi
    host: FacetHost
    group: TaskGroup
    effects: Path

    async def root(self) -> ConversationHandle:
        return await self.worker.harness.root(BACKGROUND)

    async def run(self, text: str) -> None:
        handle = await (await self.root()).send(text, BACKGROUND)
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)

    async def results(self) -> dict[str, dict[str, Any]]:
        """The root conversation's tool results by tool name (the newest wins)."""
        entries = await (await self.root()).entries(BACKGROUND, limit=100)
        out: dict[str, dict[str, Any]] = {}
        for entry in reversed(entries):
            if entry.kind == "pi.tool_result":
                message: Any = entry.model
                out[message[0]["toolName"]] = message[0]
        return out

    async def stored_mode(self) -> Any:
        session = (await self.root()).commit(
            lambda tx, _ctx: tx.snapshot("session").get("plugins", {}), BACKGROUND
        )
        return (await session).get("approval", {}).get("mode")


@asynccontextmanager
async def session(
    script: Sequence[FauxStep],
    effects_path: Path,
    *,
    storage: Callable[[], Storage] = MemoryStorage,
    facets: Sequence[Any] = (session_facet,),
    protected: Sequence[str] = (),
    rules: Any = None,
) -> AsyncIterator[Session]:
    services = {
        "models": Models([FauxProvider(script)]),
        "workspace": str(effects_path.parent),  # the project: where the calls' paths point
        "guarded_paths": list(protected),
    }
    if rules is not None:  # the permission source (the app's config files, here in memory)
        services["permission_rules"] = rules
    options = HarnessOptions(services=services)
    workers: list[HarnessServiceApi] = []

    def worker(env: FacetEnvironment) -> None:
        harness = env.use(HarnessService)
        workers.append(harness)

        def activate() -> None:
            for name in TOOLS:
                declaration = tool(name, effects_path)
                env.own(harness.add_registration(lambda h, d=declaration: h.register_tool(d)))

        env.on_activate(activate)

    async with anyio.create_task_group() as group:
        harness_facet = harness_session_facet(storage, options, task_group=group)
        async with create_facet_host(
            [harness_facet, *facets, define_facet("test/worker", worker)]
        ) as host:
            (service,) = workers
            await service.resume(BACKGROUND)
            root = await service.harness.root(BACKGROUND)
            await root.set_config({"model": MODEL, "selectedTools": list(TOOLS)}, BACKGROUND)
            yield Session(service, host, group, effects_path)
        group.cancel_scope.cancel()


@asynccontextmanager
async def client(s: Session, kit: Any) -> AsyncIterator[tuple[Any, Any]]:
    """A presentation host: the dialog facet over a scripted ``Tui``, plus a facet that uses
    ``approval.mode``. Yields ``(scripted tui, mode handle)``."""
    handles: list[Any] = []

    def modes(env: FacetEnvironment) -> None:
        handles.append(env.use(ApprovalMode))

    tui = kit.ScriptedTui()
    async with kit.presentation(s.host, [tui_facet, define_facet("modes", modes)], tui, s.group):
        yield tui, handles[0]


async def until_state(state: Any, value: Any) -> None:
    """Wait (on deliveries, never a timer) until ``state.value == value``."""
    changed = anyio.Event()

    def listener(_value: Any, _ctx: Context, _delivery: Any) -> None:
        changed.set()

    unsubscribe = state.subscribe(listener)
    try:
        with anyio.fail_after(5):
            while state.value != value:
                await changed.wait()
                changed = anyio.Event()
    finally:
        unsubscribe()


def calls(*names: str) -> FauxStep:
    """One model response calling each of ``names`` once (ids ``call-<i>``)."""
    return faux_response(
        *(faux_tool_call(name, {"path": f"f{i}"}, id=f"call-{i}") for i, name in enumerate(names))
    )


@pytest.mark.parametrize(
    ("mode", "read", "write", "edit", "bash"),
    [
        ("ask", "run", "ask", "ask", "ask"),
        ("accept-edits", "run", "run", "run", "ask"),
        ("plan", "run", "block", "block", "block"),
        ("auto", "run", "run", "run", "run"),
    ],
)
def test_the_rules_decide_each_tool_by_mode(
    mode: PermissionMode, read: str, write: str, edit: str, bash: str
) -> None:
    rules = DEFAULT_RULES
    assert [rules.action(t, mode) for t in CODING] == [read, write, edit, bash]
    assert rules.action("grep", mode) == "run"  # neither asks nor edits: read-only
    # a tool no rule names but that is not declared replay-safe runs, except in plan mode
    expected = "block" if mode == "plan" else "run"
    assert rules.action("deploy", mode, replay_safe=False) == expected
    # the web tools reach the network: they ask like bash (plan mode blocks them)
    for web in ("web_fetch", "web_search"):
        assert rules.action(web, mode, replay_safe=False) == bash


def test_rules_know_edits_and_read_only_tools() -> None:
    rules = ApprovalRules(frozenset({"bash", "deploy"}), frozenset({"write", "patch"}))
    assert rules.is_edit("patch") and not rules.is_edit("bash")
    assert rules.is_read_only("read") and not rules.is_read_only("deploy")
    assert rules.action("patch", "ask") == "run"  # an edit the ask rules do not name
    assert rules.action("patch", "plan") == "block"
    assert rules.action("deploy", "accept-edits") == "ask"
    assert ApprovalRules(frozenset({"*"})).action("read", "plan") == "block"
    with pytest.raises(TypeError, match=r"ApprovalRules\.edits must be a set of non-empty"):
        ApprovalRules(edits="write")  # type: ignore[arg-type]


async def test_ask_mode_asks_for_write_edit_and_bash_and_runs_read(
    kit: Any, tmp_path: Path
) -> None:
    script = [calls("read", "write", "edit", "bash"), faux_response("done")]
    async with session(script, tmp_path / "effects") as s, client(s, kit) as (tui, modes):
        assert modes.state.value == {"mode": "ask"}  # the default
        handle = await (await s.root()).send("go", BACKGROUND)
        asked = []
        for _ in range(3):
            prompt = await tui.next_prompt()
            asked.append(prompt.title)
            prompt.answer("allow")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        assert sorted(asked) == ["Allow bash?", "Allow edit?", "Allow write?"]
        assert sorted(effects(s.effects)) == sorted(CODING)


async def test_accept_edits_runs_edits_without_asking_and_bash_still_asks(
    kit: Any, tmp_path: Path
) -> None:
    script = [calls("write", "edit", "bash", "read"), faux_response("done")]
    async with session(script, tmp_path / "effects") as s, client(s, kit) as (tui, modes):
        await modes.set_mode("accept-edits", BACKGROUND)
        handle = await (await s.root()).send("go", BACKGROUND)
        prompt = await tui.next_prompt()
        assert prompt.title == "Allow bash?"
        assert sorted(effects(s.effects)) == ["edit", "read", "write"]  # ran while bash waits
        prompt.answer("deny")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        assert len(tui.prompts) == 1
        assert sorted(effects(s.effects)) == ["edit", "read", "write"]
        assert "the user denied this call" in (await s.results())["bash"]["content"][0]["text"]


async def test_plan_mode_blocks_every_tool_that_is_not_read_only_without_asking(
    kit: Any, tmp_path: Path
) -> None:
    script = [calls("write", "edit", "bash", "read"), faux_response("here is the plan")]
    async with session(script, tmp_path / "effects") as s, client(s, kit) as (tui, modes):
        await modes.set_mode("plan", BACKGROUND)
        await s.run("refactor it")
        assert tui.prompts == []  # nothing asked
        assert effects(s.effects) == ["read"]  # nothing else executed
        results = await s.results()
        for name in ("write", "edit", "bash"):
            assert results[name]["isError"] is True
            text = results[name]["content"][0]["text"]
            assert plan_mode_reason(name) in text
            assert "plan mode" in text and "propose a plan" in text
        assert results["read"]["isError"] is False


async def test_plan_mode_wins_over_an_allow_rule(kit: Any, tmp_path: Path) -> None:
    script = [calls("bash"), faux_response("one"), calls("bash"), faux_response("two")]
    source = kit.RuleSource({"user/config.toml": [("allow", "Bash")]})
    async with (
        session(script, tmp_path / "effects", rules=source) as s,
        client(s, kit) as (tui, modes),
    ):
        await s.run("first")  # the allow rule runs it without asking
        assert tui.prompts == []
        await modes.set_mode("plan", BACKGROUND)
        await s.run("second")
        assert effects(s.effects) == ["bash"]  # the second call was blocked
        assert "plan mode" in (await s.results())["bash"]["content"][0]["text"]


async def test_auto_mode_runs_everything_without_asking(kit: Any, tmp_path: Path) -> None:
    script = [calls("write", "edit", "bash", "read"), faux_response("done")]
    async with session(script, tmp_path / "effects") as s, client(s, kit) as (tui, modes):
        await modes.set_mode("auto", BACKGROUND)
        await s.run("go")
        assert tui.prompts == []
        assert sorted(effects(s.effects)) == sorted(CODING)


async def test_the_mode_is_read_when_the_call_is_decided(kit: Any, tmp_path: Path) -> None:
    # Two turns, the mode changed between them by another presentation: the second turn's
    # calls follow the new mode (the hook reads storage, not a cached value).
    script = [calls("bash"), faux_response("one"), calls("bash"), faux_response("two")]
    async with (
        session(script, tmp_path / "effects") as s,
        client(s, kit) as (tui, _modes),
        client(s, kit) as (_other_tui, other_modes),
    ):
        await other_modes.set_mode("auto", BACKGROUND)
        await s.run("first")
        await other_modes.set_mode("ask", BACKGROUND)
        handle = await (await s.root()).send("second", BACKGROUND)
        prompt = await tui.next_prompt()
        assert prompt.title == "Allow bash?"
        prompt.answer("allow")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        assert effects(s.effects) == ["bash", "bash"]


async def test_a_bad_mode_is_rejected_with_a_clear_error_and_changes_nothing(
    kit: Any, tmp_path: Path
) -> None:
    async with session([], tmp_path / "effects") as s, client(s, kit) as (_tui, modes):
        await modes.set_mode("plan", BACKGROUND)
        for bad in ("yolo", "", "PLAN", None, 7, {"mode": "auto"}):
            with pytest.raises(RemoteServiceError) as caught:
                await modes.set_mode(bad, BACKGROUND)
            assert caught.value.code == "service_invalid_value"
            assert f"Invalid permission mode {bad!r}" in caught.value.message
            assert "expected one of ask, accept-edits, sandbox, plan, auto" in caught.value.message
        assert modes.state.value == {"mode": "plan"}
        assert await s.stored_mode() == "plan"


async def test_the_mode_survives_a_restart_and_a_late_joiner_sees_it(
    kit: Any, tmp_path: Path
) -> None:
    storage = lambda: JsonlStorage(tmp_path / "session", fsync=False)  # noqa: E731
    async with (
        session([], tmp_path / "effects", storage=storage) as s,
        client(s, kit) as (_tui, modes),
    ):
        await modes.set_mode("plan", BACKGROUND)
        assert await s.stored_mode() == "plan"
    # A new worker over the same storage: the mode is read back when the facet activates,
    # a presentation that joins now hydrates with it, and the hook enforces it.
    script = [calls("bash", "read"), faux_response("a plan")]
    async with (
        session(script, tmp_path / "effects", storage=storage) as s,
        client(s, kit) as (tui, modes),
    ):
        assert modes.state.value == {"mode": "plan"}
        await s.run("go")
        assert tui.prompts == [] and effects(s.effects) == ["read"]


async def test_the_mode_survives_suspend_and_reopen(kit: Any, tmp_path: Path) -> None:
    storage = lambda: JsonlStorage(tmp_path / "session", fsync=False)  # noqa: E731
    script = [calls("write"), faux_response("done")]
    async with (
        session(script, tmp_path / "effects", storage=storage) as s,
        client(s, kit) as (tui, modes),
    ):
        await modes.set_mode("accept-edits", BACKGROUND)
        await s.worker.suspend(BACKGROUND)
        with pytest.raises(Exception, match="not open"):
            await modes.set_mode("auto", BACKGROUND)  # refused while suspended: nothing changes
        await s.worker.reopen(BACKGROUND)
        assert await s.stored_mode() == "accept-edits"
        assert modes.state.value == {"mode": "accept-edits"}
        await s.run("go")
        assert tui.prompts == [] and effects(s.effects) == ["write"]


async def test_every_mode_round_trips_through_the_service(kit: Any, tmp_path: Path) -> None:
    async with session([], tmp_path / "effects") as s, client(s, kit) as (_tui, modes):
        for mode in (*PERMISSION_MODES, "ask"):
            await modes.set_mode(mode, BACKGROUND)
            assert await s.stored_mode() == mode
            await until_state(modes.state, {"mode": mode})  # the replica follows


async def test_install_approval_reads_and_writes_the_mode_without_chord(tmp_path: Path) -> None:
    async def never(request: Any, ctx: Context) -> Any:
        raise AssertionError("auto mode never asks")

    h = await Harness.open(MemoryStorage(), None, BACKGROUND)
    installation = install_approval(h, never)
    try:
        assert await installation.mode(BACKGROUND) == "ask"
        await installation.set_mode("auto", BACKGROUND)
        assert await installation.mode(BACKGROUND) == "auto"
        with pytest.raises(RemoteServiceError, match="Invalid permission mode 'sometimes'"):
            await installation.set_mode("sometimes", BACKGROUND)  # type: ignore[arg-type]
        assert await installation.mode(BACKGROUND) == "auto"
    finally:
        installation()
        installation()  # idempotent
        await h.close(BACKGROUND)


# -- the TUI facet, in a real Textual app (Pilot) ----------------------------------------------
def label(app: Any) -> ModeLabel:
    return app.query_one(f"#{MODE_PANEL_ID}", ModeLabel)


async def label_shows(app: Any, pilot: Any, mode: str) -> None:
    """Wait until the mode label is mounted and shows ``mode`` (Pilot drains the app's queue)."""
    with anyio.fail_after(10):
        while not app.query(f"#{MODE_PANEL_ID}") or label(app).permission_mode != mode:
            await pilot.pause()
    assert f"mode: {mode}  (shift+tab to cycle)" in str(label(app).content)
    assert label(app).has_class(f"-{mode}")


@asynccontextmanager
async def mode_app(s: Session, kit: Any) -> AsyncIterator[tuple[Any, Any]]:
    """A Textual app with the approval TUI facets (dialogs and mode), joined to ``s``."""
    app = kit.DialogApp()
    async with (
        app.run_test() as pilot,
        kit.presentation(s.host, [tui_facet, mode_tui_facet], app.tui, s.group),
    ):
        yield app, pilot


async def test_shift_tab_cycles_the_mode_and_the_label_follows(kit: Any, tmp_path: Path) -> None:
    async with (
        session([], tmp_path / "effects") as s,
        client(s, kit) as (_tui, modes),
        mode_app(s, kit) as (app, pilot),
    ):
        seen: list[Any] = []
        modes.state.subscribe(lambda value, _ctx, _delivery: seen.append(value["mode"]))
        await label_shows(app, pilot, "ask")
        await pilot.press("shift+tab")
        await label_shows(app, pilot, "accept-edits")
        assert await s.stored_mode() == "accept-edits"
        await pilot.press("shift+tab", "shift+tab", "shift+tab", "shift+tab")  # presses queue up
        await label_shows(app, pilot, "ask")
        await until_state(modes.state, {"mode": "ask"})
        assert await s.stored_mode() == "ask"
        assert [m for i, m in enumerate(seen) if i == 0 or seen[i - 1] != m] == [
            "ask",
            "accept-edits",
            "sandbox",
            "plan",
            "auto",
            "ask",
        ]


async def test_the_mode_command_sets_picks_and_rejects(kit: Any, tmp_path: Path) -> None:
    async with (
        session([], tmp_path / "effects") as s,
        mode_app(s, kit) as (app, pilot),
        anyio.create_task_group() as group,
    ):
        await label_shows(app, pilot, "ask")
        assert "mode" in app.tui.commands and "shift+tab" in app.tui.keys
        assert await app.tui.run_command("/mode plan", BACKGROUND)
        await label_shows(app, pilot, "plan")
        assert not await app.tui.run_command("/mode bogus", BACKGROUND)  # refused: not done
        await pilot.pause()
        messages = [str(n.message) for n in app._notifications]
        assert any("/mode failed" in m and "Invalid permission mode 'bogus'" in m for m in messages)
        assert await s.stored_mode() == "plan"  # nothing changed
        assert label(app).permission_mode == "plan"
        group.start_soon(app.tui.run_command, "/mode", BACKGROUND)
        screen = await app.shown_dialog(pilot)
        assert kit.title(screen) == "Permission mode (now: plan)"
        options = [o.split(". ", 1)[1] for o in kit.options(screen)]  # numbered 1. 2. …
        assert [o.replace("●", "").split()[0] for o in options] == list(PERMISSION_MODES)
        assert options[3].startswith("●") and not options[0].startswith("●")
        await pilot.press("down", "down", "down", "down", "enter")  # auto
        await label_shows(app, pilot, "auto")
        assert await s.stored_mode() == "auto"


async def test_a_late_joiner_shows_the_current_mode(kit: Any, tmp_path: Path) -> None:
    async with session([], tmp_path / "effects") as s:
        async with client(s, kit) as (_tui, modes):
            await modes.set_mode("accept-edits", BACKGROUND)
        async with mode_app(s, kit) as (app, pilot):
            await label_shows(app, pilot, "accept-edits")


async def test_plan_mode_blocks_a_tool_no_rule_names_unless_it_is_declared_replay_safe(
    kit: Any, tmp_path: Path
) -> None:
    script = [
        calls("deploy", "read"),
        faux_response("the plan"),
        calls("deploy"),
        faux_response("ok"),
    ]
    async with session(script, tmp_path / "effects") as s, client(s, kit) as (tui, modes):
        await modes.set_mode("plan", BACKGROUND)
        await s.run("ship it")
        assert effects(s.effects) == ["read"]  # deploy is declared unsafe: blocked, not run
        assert plan_mode_reason("deploy") in (await s.results())["deploy"]["content"][0]["text"]
        await modes.set_mode("ask", BACKGROUND)
        await s.run("now ship it")  # in ask mode no rule asks for deploy: it runs
        assert tui.prompts == []
        assert effects(s.effects) == ["read", "deploy"]


# -- confinement (issue 24 deliver 3) ------------------------------------------------------------
def edit_calls(*paths: str) -> FauxStep:
    """One response writing each of ``paths`` (ids ``call-<i>``)."""
    return faux_response(
        *(faux_tool_call("write", {"path": p}, id=f"call-{i}") for i, p in enumerate(paths))
    )


async def test_accept_edits_asks_for_every_write_that_leaves_the_project(
    kit: Any, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    outside = tmp_path / "outside"
    home = tmp_path / "home"
    for folder in (project, outside, home):
        folder.mkdir()
    (outside / "target.txt").write_text("x")
    (project / "link.txt").symlink_to(outside / "target.txt")  # a symlinked file pointing out
    (project / "linked").symlink_to(outside)  # a symlinked folder pointing out
    trust = home / ".config" / "coding-agent" / "trust.json"
    leaving = [
        str(home / ".bashrc"),  # a dotfile outside the project
        "../x",
        "link.txt",
        "linked/new.txt",
        str(trust),
    ]
    script = [edit_calls("inside.txt", "sub/../also-inside.txt", *leaving), faux_response("done")]
    protected = [str(home / ".config" / "coding-agent"), str(trust)]
    async with (
        session(script, project / "effects", protected=protected) as s,
        client(s, kit) as (tui, modes),
    ):
        await modes.set_mode("accept-edits", BACKGROUND)
        handle = await (await s.root()).send("go", BACKGROUND)
        asked: list[str] = []
        for _ in leaving:
            prompt = await tui.next_prompt()
            assert prompt.title == "Allow write?"
            asked.append(prompt.body.split("\n\n", 1)[0])
            prompt.answer("deny")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        assert effects(s.effects) == ["write", "write"]  # only the two inside the project ran
    reasons = sorted(asked)
    assert sum("outside the project" in r for r in reasons) == 4
    assert sum("the agent's own configuration, trust or state" in r for r in reasons) == 1
    assert all(r.startswith("This asks in every mode but auto: ") for r in reasons)
    assert any(str(outside / "target.txt") in r for r in reasons)  # the symlink was followed


async def test_the_agents_own_files_ask_even_when_always_allowed_and_run_only_in_auto(
    kit: Any, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    facets = project / ".coding-agent" / "facets"
    guarded = str(facets / "evil" / "__init__.py")
    script = [edit_calls("ok.txt"), edit_calls(guarded), edit_calls(guarded), faux_response("x")]
    async with (
        session(script, project / "effects", protected=[str(project / ".coding-agent")]) as s,
        client(s, kit) as (tui, modes),
    ):
        handle = await (await s.root()).send("go", BACKGROUND)
        first = await tui.next_prompt()  # ask mode: ok.txt asks; a session rule allows it
        assert not first.body.startswith("This asks")
        first.answer("rule:session")
        second = await tui.next_prompt()  # the facet folder asks although write is allowed
        assert second.body.startswith("This asks in every mode but auto: it changes the agent's")
        await modes.set_mode("auto", BACKGROUND)  # an explicit auto lets the next one run
        second.answer("deny")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        assert len(tui.prompts) == 2
        assert effects(s.effects) == ["write", "write"]  # ok.txt, then the one in auto mode
