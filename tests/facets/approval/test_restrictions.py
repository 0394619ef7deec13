"""Claude Code's restrictive switches (``disableBypassPermissionsMode``,
``denyInsteadOfPrompting``, ``blockWritesOutsideWorkingDirectories``) over a real harness.

Before, the app only noted them (or not even that): a migrant's safety settings did nothing.
The permission source (here ``kit.RuleSource``, the app's interface; the real files are tested
in ``tests/app/settings/test_claude_settings.py``) hands them over as ``"restrictions"``; the
session's ``before_tool`` hook and ``approval.mode`` apply them. Presentations reach the
session through chord's loopback source, as a TUI process reaches the worker; the Pilot cases
run the mode facet in a Textual app.
"""

from __future__ import annotations

import os
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
from facets_approval.contract import PERMISSION_MODES, ApprovalMode, ApprovalRulesService, next_mode
from facets_approval.restrictions import (
    Restrictions,
    auto_refusal,
    deny_instead_reason,
    effective_mode,
    outside_write_reason,
    working_directories,
)
from facets_approval.session import rule_block_reason, session_facet
from facets_approval.tui import MODE_PANEL_ID, mode_choices, mode_tui_facet, tui_facet
from pico3 import HarnessService, HarnessServiceApi, harness_session_facet
from pico3.harness import ConversationHandle, HarnessOptions
from pico3.models.faux import FauxProvider, FauxStep, faux_response, faux_tool_call
from pico3.storage import JsonlStorage, MemoryStorage, Storage
from pico3.tools import ToolDeclaration, ToolResult
from pico3.turn.models import Models

pytestmark = pytest.mark.anyio

MODEL = {"provider": "faux", "modelId": "faux-1"}
TOOLS = ("read", "write", "edit", "bash")
USER = "/home/me/.claude/settings.json"
PROJECT = "/work/repo/.claude/settings.json"
NO_AUTO = {"disableBypassPermissionsMode": USER}
DENY_ASKS = {"denyInsteadOfPrompting": PROJECT}
BLOCK_WRITES = {"blockWritesOutsideWorkingDirectories": USER}


# -- the rule tables ---------------------------------------------------------------------------
def test_the_switches_come_from_the_sources_restrictions_and_anything_else_is_off() -> None:
    assert Restrictions.of({}) == Restrictions()
    assert Restrictions.of({"restrictions": "yes"}) == Restrictions()
    assert Restrictions.of({"restrictions": {"denyInsteadOfPrompting": True}}) == Restrictions()
    found = Restrictions.of({"restrictions": {**NO_AUTO, **DENY_ASKS, **BLOCK_WRITES}})
    assert found == Restrictions(no_auto=USER, deny_asks=PROJECT, block_outside_writes=USER)
    assert found.disabled() == {"auto": auto_refusal(USER)}
    assert Restrictions().disabled() == {}


@pytest.mark.parametrize(
    ("stored", "restrictions", "decided"),
    [
        ("auto", NO_AUTO, "ask"),  # a session stored in auto before the switch: ask
        ("auto", DENY_ASKS, "auto"),
        ("plan", NO_AUTO, "plan"),
        ("accept-edits", NO_AUTO, "accept-edits"),
        ("sandbox", NO_AUTO, "sandbox"),
        ("ask", NO_AUTO, "ask"),
    ],
)
def test_a_disabled_auto_is_decided_as_ask(
    stored: Any, restrictions: dict[str, str], decided: str
) -> None:
    assert effective_mode(stored, Restrictions.of({"restrictions": restrictions})) == decided


def test_cycling_passes_over_a_disabled_mode() -> None:
    assert next_mode("plan") == "auto"
    assert next_mode("plan", skip={"auto"}) == "ask"
    assert next_mode("sandbox", skip={"auto"}) == "plan"
    assert next_mode("auto", skip={"auto"}) == "ask"  # leaving a stale auto
    assert next_mode("ask", skip=set(PERMISSION_MODES) - {"ask"}) == "ask"  # nothing else left
    choices = mode_choices("plan", {"auto": auto_refusal(USER)})
    assert [choice.value for choice in choices] == ["ask", "accept-edits", "sandbox", "plan"]


def test_a_write_outside_the_working_directories_is_refused_with_what_to_ask(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "out").symlink_to(tmp_path)  # a folder inside that leads outside
    real = os.path.realpath
    assert working_directories(str(project)) == [real(project)]
    assert working_directories(None) == []
    inside = real(project / "src" / "a.py")
    assert outside_write_reason("write", inside, str(project), USER) is None
    assert outside_write_reason("write", real(project), str(project), USER) is None
    outside = real(project / "out" / "b.py")  # the resolved target is what counts
    reason = outside_write_reason("edit", outside, str(project), USER)
    assert reason is not None
    assert reason.startswith(f"edit was not run: its target ({outside}) is outside the working ")
    assert f"permissions.blockWritesOutsideWorkingDirectories in {USER}" in reason
    assert "Ask the user to add that folder as a working directory" in reason
    sibling = real(tmp_path / "project-other" / "c.py")  # a prefix is not a folder
    assert outside_write_reason("write", sibling, str(project), USER) is not None
    assert outside_write_reason("write", None, str(project), USER) is not None  # no target
    assert outside_write_reason("write", inside, None, USER) is not None  # no project known


# -- over a real harness -----------------------------------------------------------------------
@dataclass
class Session:
    worker: HarnessServiceApi
    host: FacetHost
    group: TaskGroup
    runs: list[tuple[str, dict[str, Any]]]
    targets: dict[str, str]
    """The host's ``checked_targets``: where the hook pinned each edit's real target."""
    pinned: list[dict[str, str]]
    """A copy of ``targets`` as each tool started (what the file tool would write to)."""

    async def root(self) -> ConversationHandle:
        return await self.worker.harness.root(BACKGROUND)

    async def results(self) -> dict[str, str]:
        """The tool results' texts by call id (the newest wins)."""
        out: dict[str, str] = {}
        for entry in reversed(await (await self.root()).entries(BACKGROUND, limit=200)):
            if entry.kind == "pi.tool_result":
                message: Any = entry.model
                out[message[0]["toolCallId"]] = message[0]["content"][0]["text"]
        return out

    async def stored_mode(self) -> Any:
        plugins = await (await self.root()).commit(
            lambda tx, _ctx: tx.snapshot("session").get("plugins", {}), BACKGROUND
        )
        return plugins.get("approval", {}).get("mode")


@asynccontextmanager
async def session(
    script: Sequence[FauxStep],
    workspace: Path,
    source: Any,
    storage: Callable[[], Storage] = MemoryStorage,
) -> AsyncIterator[Session]:
    services: dict[str, Any] = {
        "models": Models([FauxProvider(script)]),
        "workspace": str(workspace),
        "guarded_paths": [],
        "permission_rules": source,
        "checked_targets": {},
    }
    runs: list[tuple[str, dict[str, Any]]] = []
    pinned: list[dict[str, str]] = []
    workers: list[HarnessServiceApi] = []

    def declaration(name: str) -> ToolDeclaration:
        async def execute(args: dict[str, Any], api: Any, ctx: Context) -> ToolResult:
            runs.append((name, args))
            pinned.append(dict(services["checked_targets"]))
            return ToolResult.text(f"{name} ran")

        replay = "safe" if name == "read" else "unsafe"
        return ToolDeclaration(
            name, f"The {name} tool.", {"type": "object"}, execute, replay=replay
        )

    def worker(env: FacetEnvironment) -> None:
        harness = env.use(HarnessService)
        workers.append(harness)

        def activate() -> None:
            for name in TOOLS:
                tool = declaration(name)
                env.own(harness.add_registration(lambda h, d=tool: h.register_tool(d)))

        env.on_activate(activate)

    async with anyio.create_task_group() as group:
        harness = harness_session_facet(
            storage, HarnessOptions(services=services), task_group=group
        )
        async with create_facet_host(
            [harness, session_facet, define_facet("test/worker", worker)]
        ) as host:
            (service,) = workers
            await service.resume(BACKGROUND)
            root = await service.harness.root(BACKGROUND)
            await root.set_config({"model": MODEL, "selectedTools": list(TOOLS)}, BACKGROUND)
            yield Session(service, host, group, runs, services["checked_targets"], pinned)
        group.cancel_scope.cancel()


@asynccontextmanager
async def client(s: Session, kit: Any) -> AsyncIterator[tuple[Any, Any, Any]]:
    """The dialog facet over a scripted ``Tui``, plus the mode and rules services."""
    found: list[Any] = []

    def services(env: FacetEnvironment) -> None:
        found.extend([env.use(ApprovalMode), env.use(ApprovalRulesService)])

    tui = kit.ScriptedTui()
    async with kit.presentation(s.host, [tui_facet, define_facet("s", services)], tui, s.group):
        yield tui, found[0], found[1]


async def until(state: Any, predicate: Any) -> None:
    """Wait (on deliveries, never a timer) until ``predicate(state.value)``."""
    changed = anyio.Event()

    def listener(_value: Any, _ctx: Context, _delivery: Any) -> None:
        changed.set()

    unsubscribe = state.subscribe(listener)
    try:
        with anyio.fail_after(5):
            while not predicate(state.value):
                await changed.wait()
                changed = anyio.Event()
    finally:
        unsubscribe()


def calls(*items: tuple[str, str, dict[str, Any]]) -> FauxStep:
    return faux_response(*(faux_tool_call(name, args, id=cid) for name, cid, args in items))


async def send(s: Session) -> None:
    handle = await (await s.root()).send("go", BACKGROUND)
    with anyio.fail_after(10):
        await handle.wait(BACKGROUND)


async def test_auto_cannot_be_entered_and_a_stored_auto_decides_as_ask(
    kit: Any, tmp_path: Path
) -> None:
    source = kit.RuleSource()
    script = [calls(("bash", "b1", {"command": "ls"})), faux_response("done")]
    async with session(script, tmp_path, source) as s, client(s, kit) as (tui, modes, _rules):
        await modes.set_mode("auto", BACKGROUND)  # before the switch: allowed
        source.restrictions = dict(NO_AUTO)  # the organisation's file turns it on
        with pytest.raises(RemoteServiceError) as refused:
            await modes.set_mode("auto", BACKGROUND)
        assert refused.value.code == "service_invalid_value"
        assert refused.value.message == f"Cannot switch to auto: {auto_refusal(USER)}"
        assert USER in refused.value.message
        await modes.set_mode("plan", BACKGROUND)  # the state now says auto is disabled
        await until(modes.state, lambda v: v.get("disabled") == {"auto": auto_refusal(USER)})
        with pytest.raises(RemoteServiceError):
            await modes.set_mode("auto", BACKGROUND)
        assert await s.stored_mode() == "plan"  # the refusal changed nothing
        source.restrictions = {}
        await modes.set_mode("auto", BACKGROUND)
        source.restrictions = dict(NO_AUTO)  # turned on while the session sits in auto
        handle = await (await s.root()).send("go", BACKGROUND)
        prompt = await tui.next_prompt()  # decided as ask, not run
        assert prompt.title == "Allow bash?"
        prompt.answer("deny")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
    assert s.runs == []


async def test_a_stored_auto_is_stored_and_shown_as_ask_when_the_session_opens(
    kit: Any, tmp_path: Path
) -> None:
    source = kit.RuleSource()

    def storage() -> Storage:
        return JsonlStorage(str(tmp_path / "store"), fsync=False)

    async with (
        session([], tmp_path, source, storage) as s,
        client(s, kit) as (_tui, modes, _rules),
    ):
        await modes.set_mode("auto", BACKGROUND)  # a session of before the switch
    source.restrictions = dict(NO_AUTO)
    async with (
        session([], tmp_path, source, storage) as s,
        client(s, kit) as (_tui, modes, _rules),
    ):
        await until(modes.state, lambda v: v.get("mode") == "ask")
        assert modes.state.value == {"mode": "ask", "disabled": {"auto": auto_refusal(USER)}}
        assert await s.stored_mode() == "ask"


@pytest.mark.parametrize("mode", ["ask", "accept-edits", "auto"])
async def test_deny_instead_of_prompting_refuses_what_would_ask_and_the_turn_goes_on(
    kit: Any, tmp_path: Path, mode: str
) -> None:
    source = kit.RuleSource(
        {USER: [("allow", "Bash(make test:*)"), ("ask", "Bash(git push:*)")]},
        restrictions=DENY_ASKS,
    )
    script = [
        calls(
            ("bash", "ls", {"command": "ls -la"}),
            ("bash", "test", {"command": "make test"}),
            ("bash", "push", {"command": "git push"}),
            ("write", "w", {"path": "notes.txt", "content": "x"}),
            ("read", "r", {"path": "README.md"}),
        ),
        faux_response("done"),
    ]
    async with session(script, tmp_path, source) as s, client(s, kit) as (tui, modes, _rules):
        await modes.set_mode(mode, BACKGROUND)
        await send(s)  # never waits: nobody is asked
        results = await s.results()
        entries = await (await s.root()).entries(BACKGROUND, limit=50)
    assert tui.prompts == []  # no dialog opened
    models: list[Any] = [e.model for e in entries if e.kind == "pi.assistant"]
    texts = [block.get("text") for model in models for block in model[0]["content"]]
    assert "done" in texts  # the model was told, and answered: the turn went on
    ran = sorted(str(args.get("command") or args.get("path")) for _name, args in s.runs)
    asked_by_rule = f"It would ask because the ask rule Bash(git push:*) in {USER} matches."
    assert results["push"].endswith(deny_instead_reason("bash", asked_by_rule, PROJECT))
    assert results["test"] == "bash ran" and results["r"] == "read ran"  # allowed runs
    if mode == "ask":
        assert results["ls"].endswith(
            deny_instead_reason("bash", "It would ask in ask mode.", PROJECT)
        )
        assert "write was not run: it needs approval" in results["w"]
        assert ran == ["README.md", "make test"]
    elif mode == "accept-edits":  # the edit runs in the mode; the command would ask
        assert "bash was not run: it needs approval" in results["ls"]
        assert ran == ["README.md", "make test", "notes.txt"]
    else:  # auto: nothing would ask but the ask rule
        assert ran == ["README.md", "ls -la", "make test", "notes.txt"]
    assert "Do not retry it" in results["push"]


async def test_deny_instead_of_prompting_makes_a_would_ask_command_check_block(
    kit: Any, tmp_path: Path
) -> None:
    source = kit.RuleSource({USER: [("deny", "Bash(rm:*)")]}, restrictions=DENY_ASKS)
    async with session([], tmp_path, source) as s, client(s, kit) as (_tui, _modes, rules):
        verdict = await rules.check_command("make build", BACKGROUND)
        assert verdict["verdict"] == "block"
        assert verdict["why"] == (
            "no allow rule covers it in ask mode, and permissions.denyInsteadOfPrompting in "
            f"{PROJECT} refuses what would ask"
        )
        denied = await rules.check_command("rm -rf x", BACKGROUND)
        assert denied["verdict"] == "block" and denied["by"] == "rule"


@pytest.mark.parametrize("mode", ["ask", "accept-edits", "auto"])
async def test_writes_outside_the_project_are_refused_in_every_mode_even_auto(
    kit: Any, tmp_path: Path, mode: str
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "link").symlink_to(tmp_path)
    source = kit.RuleSource(
        {USER: [("allow", "Edit(//**)"), ("deny", "Edit(./secret.txt)")]},
        root=str(project),
        restrictions=BLOCK_WRITES,
    )
    outside = str(tmp_path / "elsewhere.txt")
    script = [
        calls(
            ("write", "abs", {"path": outside, "content": "x"}),
            ("edit", "up", {"path": "../elsewhere.txt", "old": "a", "new": "b"}),
            ("write", "link", {"path": "link/via-link.txt", "content": "x"}),
            ("write", "home", {"path": "~/notes.txt", "content": "x"}),
            ("write", "in", {"path": "src/app.py", "content": "x"}),
            ("write", "secret", {"path": "secret.txt", "content": "x"}),
            ("bash", "cmd", {"command": f"touch {outside}"}),
        ),
        faux_response("done"),
    ]
    async with session(script, project, source) as s, client(s, kit) as (tui, modes, _rules):
        await modes.set_mode(mode, BACKGROUND)
        handle = await (await s.root()).send("go", BACKGROUND)
        if mode != "auto":  # bash is not a file tool: the mode decides it
            prompt = await tui.next_prompt()
            assert prompt.title == "Allow bash?"
            prompt.answer("allow")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        results = await s.results()
    for cid in ("abs", "up", "link", "home"):
        assert "is outside the working directories" in results[cid], cid
        assert "Ask the user to add that folder as a working directory" in results[cid]
    assert outside in results["abs"]  # tmp_path is a real path: as resolved
    assert results["secret"].endswith(
        rule_block_reason("write", f"the deny rule Edit(./secret.txt) in {USER} matches")
    )  # a deny rule still says it is a rule
    assert results["in"] == "write ran" and results["cmd"] == "bash ran"
    assert sorted(name for name, _args in s.runs) == ["bash", "write"]
    assert len(tui.prompts) == (0 if mode == "auto" else 1)  # the edits never asked
    # the target checked is the one written, in auto too (a symlink swapped in later fails it)
    (write_run,) = [i for i, (name, _args) in enumerate(s.runs) if name == "write"]
    assert str(project / "src" / "app.py") in s.pinned[write_run].values()


# -- the TUI: Shift+Tab and /mode over a disabled auto (Pilot) ----------------------------------
@asynccontextmanager
async def mode_app(s: Session, kit: Any) -> AsyncIterator[tuple[Any, Any]]:
    app = kit.DialogApp()
    async with (
        app.run_test() as pilot,
        kit.presentation(s.host, [tui_facet, mode_tui_facet], app.tui, s.group),
    ):
        yield app, pilot


async def shown(app: Any, pilot: Any, mode: str) -> None:
    with anyio.fail_after(10):
        while (
            not app.query(f"#{MODE_PANEL_ID}")
            or app.query_one(f"#{MODE_PANEL_ID}").permission_mode != mode
        ):
            await pilot.pause()


async def test_shift_tab_skips_a_disabled_auto_and_mode_auto_says_why(
    kit: Any, tmp_path: Path
) -> None:
    source = kit.RuleSource(restrictions=NO_AUTO)
    async with session([], tmp_path, source) as s, mode_app(s, kit) as (app, pilot):
        await shown(app, pilot, "ask")
        assert await app.tui.run_command("/mode plan", BACKGROUND)
        await shown(app, pilot, "plan")
        await pilot.press("shift+tab")  # plan → (auto is disabled) → ask
        await shown(app, pilot, "ask")
        assert await s.stored_mode() == "ask"
        messages = [str(n.message) for n in app._notifications]
        assert f"Skipped auto: {auto_refusal(USER)}" in messages
        assert not await app.tui.run_command("/mode auto", BACKGROUND)  # refused: not done
        await pilot.pause()
        messages = [str(n.message) for n in app._notifications]
        assert any("/mode failed" in m and USER in m for m in messages), messages
        assert await s.stored_mode() == "ask"
