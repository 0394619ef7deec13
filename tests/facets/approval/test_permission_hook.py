"""Permission rules over a real harness (issue 36 deliver 3): deny beats ask beats allow beats
the mode, the dialog's narrow standing choice at a scope, session rules that are durable and
rewindable, the old ``autoAllow`` list still honoured, and ``/permissions``.

The session host composes pico3's harness session facet (faux model), the approval session
facet and tools that record their runs; the file rules come from an in-memory permission source
(``kit.RuleSource``, the app's interface; the app's real files are tested in
``tests/app/settings/test_permissions.py`` and through the real worker). Presentations reach the
session's services through chord's loopback source, as a TUI process reaches the worker.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, FacetHost, create_facet_host, define_facet
from chord.remote import RemoteServiceError
from facets_approval.contract import ApprovalMode, ApprovalRulesService
from facets_approval.permissions_tui import permissions_tui_facet
from facets_approval.session import plan_mode_reason, rule_block_reason, session_facet
from facets_approval.tui import tui_facet
from pico3 import HarnessService, HarnessServiceApi, harness_session_facet
from pico3.harness import ConversationHandle, HarnessOptions
from pico3.models.faux import FauxProvider, FauxStep, faux_response, faux_tool_call
from pico3.storage import JsonlStorage, MemoryStorage, Storage
from pico3.tools import ToolDeclaration, ToolResult
from pico3.turn.models import Models

pytestmark = pytest.mark.anyio

MODEL = {"provider": "faux", "modelId": "faux-1"}
TOOLS = ("read", "grep", "write", "edit", "bash")
SAFE = frozenset({"read", "grep"})
USER = "user/config.toml"


def call(name: str, call_id: str, **args: Any) -> Any:
    return faux_tool_call(name, args, id=call_id)


def turn(*calls: Any) -> FauxStep:
    return faux_response(*calls)


@dataclass
class Session:
    worker: HarnessServiceApi
    host: FacetHost
    group: TaskGroup
    runs: list[tuple[str, dict[str, Any]]]

    async def root(self) -> ConversationHandle:
        return await self.worker.harness.root(BACKGROUND)

    async def run(self, text: str, conversation: ConversationHandle | None = None) -> None:
        target = conversation or await self.root()
        handle = await target.send(text, BACKGROUND)
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)

    async def results(self, conversation: ConversationHandle | None = None) -> dict[str, str]:
        """The tool results' texts by call id (the newest wins)."""
        target = conversation or await self.root()
        out: dict[str, str] = {}
        for entry in reversed(await target.entries(BACKGROUND, limit=200)):
            if entry.kind == "pi.tool_result":
                message: Any = entry.model
                out[message[0]["toolCallId"]] = message[0]["content"][0]["text"]
        return out


@asynccontextmanager
async def session(
    script: Sequence[FauxStep],
    workspace: Path,
    *,
    source: Any = None,
    storage: Callable[[], Storage] = MemoryStorage,
    facets: Sequence[Any] = (session_facet,),
    protected: Sequence[str] = (),
    checked: dict[str, str] | None = None,
) -> AsyncIterator[Session]:
    services: dict[str, Any] = {
        "models": Models([FauxProvider(script)]),
        "workspace": str(workspace),
        "guarded_paths": list(protected),
    }
    if checked is not None:  # the host's checked_targets mapping (the tools here take nothing)
        services["checked_targets"] = checked
    if source is not None:
        services["permission_rules"] = source
    runs: list[tuple[str, dict[str, Any]]] = []
    workers: list[HarnessServiceApi] = []

    def declaration(name: str) -> ToolDeclaration:
        async def execute(args: dict[str, Any], api: Any, ctx: Context) -> ToolResult:
            runs.append((name, args))
            return ToolResult.text(f"{name} ran")

        replay = "safe" if name in SAFE else "unsafe"
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
            [harness, *facets, define_facet("test/worker", worker)]
        ) as host:
            (service,) = workers
            await service.resume(BACKGROUND)
            root = await service.harness.root(BACKGROUND)
            await root.set_config({"model": MODEL, "selectedTools": list(TOOLS)}, BACKGROUND)
            yield Session(service, host, group, runs)
        group.cancel_scope.cancel()


class CommandTui:
    """The scripted ``Tui`` plus what ``/permissions`` needs: commands and notices."""

    def __init__(self, kit: Any) -> None:
        self.scripted = kit.ScriptedTui()
        self.commands: dict[str, Any] = {}
        self.notices: list[tuple[str, str]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.scripted, name)

    def notify(self, message: str, *, severity: str = "information") -> None:
        self.notices.append((message, severity))

    def register_command(self, name: str, description: str, handler: Any) -> Callable[[], None]:
        self.commands[name] = handler
        return lambda: self.commands.pop(name, None)


@dataclass
class Client:
    tui: Any
    modes: Any
    rules: Any
    commands: CommandTui = field(repr=False, default=None)  # type: ignore[assignment]


@asynccontextmanager
async def client(s: Session, kit: Any) -> AsyncIterator[Client]:
    """The dialog and ``/permissions`` facets over a scripted ``Tui``, plus a facet using the
    mode and rules services."""
    found: list[Any] = []

    def services(env: FacetEnvironment) -> None:
        found.extend([env.use(ApprovalMode), env.use(ApprovalRulesService)])

    commands = CommandTui(kit)
    facets = [tui_facet, permissions_tui_facet, define_facet("services", services)]
    async with kit.presentation(s.host, facets, commands, s.group):
        yield Client(commands.scripted, found[0], found[1], commands)


STANDING = ["allow", "rule:session", "rule:user", "deny"]


@pytest.mark.parametrize("mode", ["ask", "accept-edits", "auto", "plan"])
async def test_deny_beats_ask_beats_allow_beats_the_mode(
    kit: Any, tmp_path: Path, mode: str
) -> None:
    source = kit.RuleSource(
        {USER: [("allow", "Bash"), ("ask", "Bash(git push:*)"), ("deny", "Bash(rm:*)")]}
    )
    script = [
        turn(call("bash", "ls", command="ls -la"), call("bash", "push", command="git push"),
             call("bash", "rm", command="cd x && rm -rf build")),
        faux_response("done"),
    ]  # fmt: skip
    async with session(script, tmp_path, source=source) as s, client(s, kit) as c:
        await c.modes.set_mode(mode, BACKGROUND)
        handle = await (await s.root()).send("go", BACKGROUND)
        if mode != "plan":  # the ask rule asks even in auto and beats the allow rule
            prompt = await c.tui.next_prompt()
            assert prompt.title == "Allow bash?"
            assert prompt.body.startswith(
                f"This asks because the ask rule Bash(git push:*) in {USER} matches."
            )
            assert prompt.choices == ["allow", "deny"]  # no standing rule against an ask rule
            prompt.answer("allow")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        results = await s.results()
    denied = rule_block_reason("bash", f"the deny rule Bash(rm:*) in {USER} matches")
    assert denied in results["rm"]  # in every mode, plan and auto included
    if mode == "plan":  # plan stays read-only whatever allow rules say
        assert plan_mode_reason("bash") in results["ls"]
        assert plan_mode_reason("bash") in results["push"]
        assert s.runs == [] and c.tui.prompts == []
    else:
        assert results["ls"] == results["push"] == "bash ran"
        assert sorted(args["command"] for _, args in s.runs) == ["git push", "ls -la"]
        assert len(c.tui.prompts) == 1


async def test_read_only_tools_follow_deny_and_ask_rules_even_in_auto(
    kit: Any, tmp_path: Path
) -> None:
    source = kit.RuleSource(
        {USER: [("deny", "Read(./.env)"), ("ask", "Read(./secrets/**)"), ("allow", "Read")]},
        root=str(tmp_path),
    )
    script = [
        turn(call("read", "env", path=".env"), call("grep", "key", path="secrets/k", pattern="x"),
             call("read", "readme", path="README.md")),
        faux_response("done"),
    ]  # fmt: skip
    async with session(script, tmp_path, source=source) as s, client(s, kit) as c:
        await c.modes.set_mode("auto", BACKGROUND)
        handle = await (await s.root()).send("go", BACKGROUND)
        prompt = await c.tui.next_prompt()
        assert prompt.title == "Allow grep?"
        assert f"the ask rule Read(./secrets/**) in {USER} matches" in prompt.body
        prompt.answer("deny")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        results = await s.results()
    assert (
        rule_block_reason("read", f"the deny rule Read(./.env) in {USER} matches") in results["env"]
    )
    assert "the user denied this call" in results["key"]
    assert s.runs == [("read", {"path": "README.md"})]


async def test_a_search_over_a_denied_file_or_credentials_asks_even_in_auto(
    kit: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A grep over the project reads ``.env`` too, so ``deny Read(./.env)`` makes it ask (a
    narrower path runs); a read of ``~/.ssh`` and a grep over the home holding it ask too,
    with no rule at all: what is read goes to the model provider."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY")
    monkeypatch.setenv("HOME", str(home))
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / ".env").write_text("DB_PASSWORD=hunter2\n")
    (project / "src" / "app.py").write_text("print('hi')\n")
    source = kit.RuleSource({USER: [("deny", "Read(./.env)")]}, root=str(project))
    script = [
        turn(call("grep", "all", pattern="PASSWORD"), call("grep", "src", pattern="x", path="src"),
             call("read", "key", path="~/.ssh/id_rsa"), call("grep", "home", pattern="KEY", path="~"),
             call("read", "app", path="src/app.py")),
        faux_response("done"),
    ]  # fmt: skip
    async with session(script, project, source=source) as s, client(s, kit) as c:
        await c.modes.set_mode("auto", BACKGROUND)
        handle = await (await s.root()).send("go", BACKGROUND)
        asked: list[str] = []
        for _ in range(3):  # the calls ask in turn, in no set order: deny all but the home grep
            prompt = await c.tui.next_prompt()
            asked.append(prompt.body.split("\n")[0])
            prompt.answer("allow" if "grep searches" in asked[-1] else "deny")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        results = await s.results()
    assert sorted(asked) == [
        f"This asks because grep over {project} would read .env, which the deny rule "
        f"Read(./.env) in {USER} covers (search a narrower path to leave it out).",
        f"This asks because grep searches {home}, which holds ~/.ssh, where credentials are "
        "kept (search a narrower path to leave it out).",
        "This asks because read reads ~/.ssh, where credentials are kept (no sandboxed command "
        "may read it; what is read is sent to the model provider).",
    ]
    assert "the user denied this call" in results["all"] and "denied" in results["key"]
    assert sorted((name, args.get("path")) for name, args in s.runs) == [
        ("grep", "src"),
        ("grep", "~"),  # allowed in the dialog
        ("read", "src/app.py"),
    ]


async def test_a_read_only_call_leaves_the_real_path_it_checked_for_the_tool(
    kit: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``read``/``grep`` were checked as (resolved once, symlinks followed) is left in
    ``checked_targets`` for the tool, which reads exactly there or fails; a denied call's is
    taken back; a tool that names no path leaves nothing."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY")
    monkeypatch.setenv("HOME", str(home))
    project = tmp_path / "project"
    (project / "d").mkdir(parents=True)
    (project / "d" / "notes.txt").write_text("notes\n")
    (project / "docs").symlink_to("d")  # a link that is part of the project
    script = [
        turn(call("read", "notes", path="docs/notes.txt"), call("grep", "all", pattern="x"),
             call("read", "key", path="~/.ssh/id_rsa"), call("bash", "ls", command="ls")),
        faux_response("done"),
    ]  # fmt: skip
    checked: dict[str, str] = {}
    async with session(script, project, checked=checked) as s, client(s, kit) as c:
        await c.modes.set_mode("auto", BACKGROUND)
        root = await s.root()
        handle = await root.send("go", BACKGROUND)
        prompt = await c.tui.next_prompt()  # credentials ask in every mode
        assert prompt.title == "Allow read?"
        prompt.answer("deny")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
    assert checked == {
        f"{root.id}:notes": str(project / "d" / "notes.txt"),
        f"{root.id}:all": str(project),
    }


async def test_no_allow_rule_covers_a_guarded_path(kit: Any, tmp_path: Path) -> None:
    source = kit.RuleSource({USER: [("allow", "Edit")]})  # every edit and write
    guarded = str(tmp_path / ".coding-agent" / "facets" / "x.py")
    script = [
        turn(
            call("write", "ok", path="ok.txt", content="x"),
            call("write", "bad", path=guarded, content="x"),
        ),
        faux_response("done"),
    ]
    async with (
        session(script, tmp_path, source=source, protected=[str(tmp_path / ".coding-agent")]) as s,
        client(s, kit) as c,
    ):
        handle = await (await s.root()).send("go", BACKGROUND)
        prompt = await c.tui.next_prompt()  # only the guarded one asks
        assert prompt.body.startswith("This asks in every mode but auto: ")
        assert prompt.choices == ["allow", "deny"]  # and offers no standing rule
        prompt.answer("deny")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
    assert s.runs == [("write", {"path": "ok.txt", "content": "x"})]


async def test_the_dialog_offers_a_narrow_rule_at_each_scope_and_keeps_the_chosen_one(
    kit: Any, tmp_path: Path
) -> None:
    source = kit.RuleSource(scopes=("project", "user"), root=str(tmp_path))
    script = [
        turn(call("bash", "c1", command="npm run test -- --watch")), faux_response("one"),
        turn(call("bash", "c2", command="npm run test")), faux_response("two"),
        turn(call("bash", "c3", command="npm run test && npm run lint")), faux_response("three"),
        turn(call("edit", "c4", path="src/app.py", edits=[])), faux_response("four"),
    ]  # fmt: skip
    async with session(script, tmp_path, source=source) as s, client(s, kit) as c:
        handle = await (await s.root()).send("first", BACKGROUND)
        first = await c.tui.next_prompt()
        assert first.choices == ["allow", "rule:session", "rule:project", "rule:user", "deny"]
        first.answer("rule:project")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        assert source.files == {"project/config.toml": [("allow", "Bash(npm run test:*)")]}
        await s.run("second")  # covered by the project rule: no dialog
        assert len(c.tui.prompts) == 1
        handle = await (await s.root()).send("third", BACKGROUND)
        third = await c.tui.next_prompt()  # `npm run lint` is the one part not covered yet
        assert third.choices == ["allow", "rule:session", "rule:project", "rule:user", "deny"]
        third.answer("deny")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        handle = await (await s.root()).send("fourth", BACKGROUND)
        fourth = await c.tui.next_prompt()
        assert fourth.choices == ["allow", "rule:session", "rule:project", "rule:user", "deny"]
        fourth.answer("rule:session")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        state = await c.rules.refresh(BACKGROUND)
    assert {(r["rule"], r["source"]) for r in state["rules"]} == {
        ("Bash(npm run test:*)", "project/config.toml"),
        ("Edit(./src/app.py)", "session"),
    }
    assert [args.get("command") for name, args in s.runs if name == "bash"] == [
        "npm run test -- --watch",
        "npm run test",
    ]


async def test_a_session_rule_is_durable_across_a_restart_and_rewound_with_the_conversation(
    kit: Any, tmp_path: Path
) -> None:
    storage = lambda: JsonlStorage(tmp_path / "session", fsync=False)  # noqa: E731
    script = [turn(call("bash", "c1", command="git status")), faux_response("one")]
    async with session(script, tmp_path, storage=storage) as s, client(s, kit) as c:
        handle = await (await s.root()).send("first", BACKGROUND)
        (await c.tui.next_prompt()).answer("rule:session")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
    again = [turn(call("bash", "c2", command="git status -s")), faux_response("two")] * 2
    async with session(again, tmp_path, storage=storage) as s, client(s, kit) as c:
        root = await s.root()
        rewindable = await root.rewindable(BACKGROUND)
        assert rewindable["plugins"]["approval"]["rules"] == ["Bash(git status:*)"]
        await s.run("after the restart")  # the stored rule allows it: no dialog
        assert c.tui.prompts == [] and len(s.runs) == 1
        entries = await root.entries(BACKGROUND, limit=100)
        first_prompt = min(e.id for e in entries if e.kind == "pi.user")
        rewound = await root.fork(first_prompt, BACKGROUND)  # a rewind: before the choice
        assert (await rewound.rewindable(BACKGROUND))["plugins"]["approval"]["rules"] == []
        handle = await rewound.send("on the rewound branch", BACKGROUND)
        prompt = await c.tui.next_prompt()  # the rule is gone on this branch: it asks
        assert prompt.title == "Allow bash?"
        prompt.answer("deny")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)


async def test_an_old_auto_allow_list_is_honoured_listed_and_removable(
    kit: Any, tmp_path: Path
) -> None:
    storage = lambda: JsonlStorage(tmp_path / "session", fsync=False)  # noqa: E731
    async with session([], tmp_path, storage=storage, facets=()) as s:
        # What "Always allow bash in this conversation" stored before permission rules.
        ns = s.worker.harness.namespace("approval", {"sticky": {"autoAllow": []}})
        await (await s.root()).commit(
            lambda tx, _ctx: tx.plugins(ns).__setitem__("autoAllow", ["bash"]), BACKGROUND
        )
        ns.unregister()
    script = [turn(call("bash", "c1", command="make")), faux_response("one")] * 2
    async with session(script, tmp_path, storage=storage) as s, client(s, kit) as c:
        await s.run("first")
        assert c.tui.prompts == [] and len(s.runs) == 1  # still honoured
        state = await c.rules.refresh(BACKGROUND)
        entry = {"rule": "bash", "kind": "allow", "source": "autoAllow", "scope": "session"}
        assert state["rules"] == [entry]
        await c.rules.remove(entry, BACKGROUND)
        handle = await (await s.root()).send("second", BACKGROUND)
        (await c.tui.next_prompt()).answer("deny")  # it asks again
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        with pytest.raises(
            RemoteServiceError, match=r"No allow rule bash in autoAllow \(already removed\?\)"
        ):
            await c.rules.remove(entry, BACKGROUND)


async def test_an_invalid_rule_is_reported_once_with_its_file_and_why(
    kit: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = kit.RuleSource({USER: [("allow", "Bash(git * x)"), ("deny", "Read(./.env)")]})
    script = [turn(call("bash", "c1", command="git diff x")), faux_response("one")]
    problem = (
        f"{USER}: allow rule 'Bash(git * x)' is invalid (a `*` (or another pattern or $expansion) "
        "is allowed only at the end, as a prefix: Bash(git log:*)); it is ignored"
    )
    with caplog.at_level(logging.WARNING, logger="facets_approval"):
        async with session(script, tmp_path, source=source) as s, client(s, kit) as c:
            handle = await (await s.root()).send("go", BACKGROUND)
            (await c.tui.next_prompt()).answer("deny")  # the bad allow rule allows nothing
            with anyio.fail_after(10):
                await handle.wait(BACKGROUND)
            state = await c.rules.refresh(BACKGROUND)
            await c.rules.refresh(BACKGROUND)
    assert state["problems"] == [problem]
    assert state["rules"] == [
        {"rule": "Read(./.env)", "kind": "deny", "source": USER, "scope": "user"}
    ]
    logged = [r.getMessage() for r in caplog.records if "permission rules" in r.getMessage()]
    assert logged == [f"permission rules: {problem}"]  # once, however often it was read
    assert c.commands.notices == [(f"Permission rules: {problem}", "warning")]


async def test_permissions_lists_every_rule_with_its_source_and_removes_one(
    kit: Any, tmp_path: Path
) -> None:
    source = kit.RuleSource(
        {USER: [("allow", "Bash(ls:*)")], "claude/settings.json": [("deny", "Read(./.env)")]}
    )
    async with session([], tmp_path, source=source) as s, client(s, kit) as c:
        command = c.commands.commands["permissions"]
        async with anyio.create_task_group() as group:
            group.start_soon(command, "", BACKGROUND)
            listing = await c.tui.next_prompt()
            assert listing.title == "Permission rules (2): Enter on a rule removes it"
            assert listing.choices == ["add", "1", "0"]  # add, then deny first, then allow
            listing.answer("0")
            confirm = await c.tui.next_prompt()
            assert confirm.title == "Remove the allow rule Bash(ls:*)?"
            assert confirm.choices == ["remove", "keep"]
            confirm.answer("remove")
        assert source.files[USER] == []
        assert source.files["claude/settings.json"] == [("deny", "Read(./.env)")]
        assert c.commands.notices[-1] == (
            f"Removed the allow rule Bash(ls:*) from {USER}",
            "information",
        )
        state = await c.rules.refresh(BACKGROUND)
        assert [r["rule"] for r in state["rules"]] == ["Read(./.env)"]


# -- adding rules with /permissions -----------------------------------------------------------
async def test_permissions_adds_a_rule_through_the_screen_asking_again_for_a_bad_one(
    kit: Any, tmp_path: Path
) -> None:
    source = kit.RuleSource({USER: [("allow", "Bash")]}, scopes=("project", "user"))
    script = [turn(call("bash", "rm", command="rm -rf build")), faux_response("done")]
    async with session(script, tmp_path, source=source) as s, client(s, kit) as c:
        await c.modes.set_mode("auto", BACKGROUND)
        command = c.commands.commands["permissions"]
        async with anyio.create_task_group() as group:
            group.start_soon(command, "", BACKGROUND)
            listing = await c.tui.next_prompt()
            assert listing.choices == ["add", "0"]  # "Add a rule…" first
            listing.answer("add")
            kind = await c.tui.next_prompt()
            assert (kind.title, kind.choices) == ("Add a rule: which kind?", KINDS)
            kind.answer("deny")
            typed = await c.tui.next_prompt()
            assert typed.title == "New deny rule" and typed.allow_text and typed.choices == []
            typed.answer("Bash(rm * build)")
            again = await c.tui.next_prompt()  # refused inline with the parser's message
            assert again.title == "New deny rule"
            assert (
                "✗ deny rule 'Bash(rm * build)' is invalid (a `*` (or another pattern or "
                "$expansion) is allowed only at the end, as a prefix: Bash(git log:*)); nothing "
                "was saved" in again.body
            )
            assert source.files == {USER: [("allow", "Bash")]}  # nothing saved
            again.answer("  Bash(rm:*) ")
            scope = await c.tui.next_prompt()
            assert scope.title == "Where should the deny rule Bash(rm:*) be kept?"
            assert scope.choices == ["project", "session", "user"]  # Claude Code's order
            scope.answer("user")
        assert c.commands.notices[-1] == (f"Added deny rule Bash(rm:*) to {USER}", "information")
        assert source.files[USER] == [("allow", "Bash"), ("deny", "Bash(rm:*)")]
        listed = (await c.rules.refresh(BACKGROUND))["rules"]
        assert {"rule": "Bash(rm:*)", "kind": "deny", "source": USER, "scope": "user"} in listed
        await s.run("go")  # auto mode, and an allow rule for all of bash: deny still wins
        results = await s.results()
    assert (
        rule_block_reason("bash", f"the deny rule Bash(rm:*) in {USER} matches") in (results["rm"])
    )
    assert s.runs == []


KINDS = ["allow", "ask", "deny"]


async def test_a_session_deny_rule_added_as_text_blocks_the_next_read_and_can_be_removed(
    kit: Any, tmp_path: Path
) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "key").write_text("k")
    source = kit.RuleSource({}, root=str(tmp_path))  # an untrusted project: user scope only
    script = [turn(call("read", "r1", path="secrets/key")), faux_response("one")] * 2
    async with session(script, tmp_path, source=source) as s, client(s, kit) as c:
        command = c.commands.commands["permissions"]
        await command("deny Read(./secrets/**)", BACKGROUND)  # no flag, no trusted project
        assert c.commands.notices[-1] == (
            "Added deny rule Read(./secrets/**) to this session",
            "information",
        )
        await command("deny Read(./secrets/**) --session", BACKGROUND)
        assert c.commands.notices[-1] == (
            "The deny rule Read(./secrets/**) is already in this session; nothing was added",
            "error",
        )
        await command("ask Bash(git push:*) --project", BACKGROUND)  # not offered: refused
        assert c.commands.notices[-1][0].startswith("Not added: this project is not trusted")
        assert source.files == {}
        await s.run("first")  # read-only, in every mode: the session's deny rule blocks it
        entry = {"rule": "Read(./secrets/**)", "kind": "deny", "source": "session"}
        entry["scope"] = "session"
        assert (await c.rules.refresh(BACKGROUND))["rules"] == [entry]
        rewindable = await (await s.root()).rewindable(BACKGROUND)
        assert rewindable["plugins"]["approval"]["denyRules"] == ["Read(./secrets/**)"]
        assert "denied" in (await s.results())["r1"] and s.runs == []
        await c.rules.remove(entry, BACKGROUND)
        await s.run("second")  # removed: the read runs
    assert s.runs == [("read", {"path": "secrets/key"})]


async def test_an_allow_rule_for_all_of_bash_needs_a_confirmation_naming_it(
    kit: Any, tmp_path: Path
) -> None:
    source = kit.RuleSource({}, scopes=("user",))
    async with session([], tmp_path, source=source) as s, client(s, kit) as c:
        command = c.commands.commands["permissions"]
        for answer in ("keep", "add"):
            async with anyio.create_task_group() as group:
                group.start_soon(command, "allow Bash(*) --user", BACKGROUND)
                confirm = await c.tui.next_prompt()
                assert confirm.title == "Allow all of bash with Bash(*)?"
                assert confirm.choices == ["keep", "add"]  # the safe answer first
                assert confirm.body.startswith("Bash(*) allows every bash command without asking")
                confirm.answer(answer)
            if answer == "keep":
                assert c.commands.notices[-1] == (
                    "Not added: Bash(*) (not confirmed)",
                    "information",
                )
                assert source.files == {}
        assert source.files == {"user/config.toml": [("allow", "Bash(*)")]}
        with pytest.raises(RemoteServiceError, match="allows every bash command"):
            await c.rules.add({"rule": "Bash", "kind": "allow", "scope": "session"}, BACKGROUND)
        with pytest.raises(RemoteServiceError, match="a prefix needs at least a command name"):
            await c.rules.check_rule("Bash(:*)", "allow", BACKGROUND)
        await command("ask Bash --session", BACKGROUND)  # only allow widens: no question
        assert c.commands.notices[-1] == ("Added ask rule Bash to this session", "information")
        assert len(c.tui.prompts) == 2


@pytest.mark.parametrize(
    ("rule", "title", "yes", "body"),
    [
        (
            "Edit",
            "Allow every edit and write with Edit?",
            "Yes, add Edit: every edit and write runs without asking",
            "Edit allows every file edit and write in the project without asking",
        ),
        (
            "Write",
            "Allow every write with Write?",
            "Yes, add Write: every write runs without asking",
            "Write allows every file write in the project without asking",
        ),
        (
            "mcp__github",
            "Allow every tool of the MCP server github with mcp__github?",
            "Yes, add mcp__github: every call of the MCP server github runs without asking",
            "mcp__github allows every tool of the MCP server github without asking",
        ),
        (
            "WebFetch",
            "Allow every web fetch with WebFetch?",
            "Yes, add WebFetch: every fetch of any URL runs without asking",
            "WebFetch allows fetching any URL without asking",
        ),
        (  # every path: the whole tool spelled as a pattern
            "Edit(**)",
            "Allow every edit and write with Edit(**)?",
            "Yes, add Edit(**): every edit and write runs without asking",
            "Edit(**) allows every file edit and write in the project without asking",
        ),
        (
            "Write(//**)",
            "Allow every write with Write(//**)?",
            "Yes, add Write(//**): every write runs without asking",
            "Write(//**) allows every file write in the project without asking",
        ),
    ],
    ids=["Edit", "Write", "mcp__github", "WebFetch", "Edit(**)", "Write(//**)"],
)
async def test_an_allow_rule_for_a_whole_tool_that_asks_needs_a_confirmation_naming_it(
    kit: Any, tmp_path: Path, rule: str, title: str, yes: str, body: str
) -> None:
    """As for all of bash: the text form and the screen ask a second question, "No" first, that
    names what the rule allows; the service refuses it unconfirmed; a narrow rule of the same
    tool, and an ask rule, are added without it."""
    source = kit.RuleSource({}, scopes=("user",))
    async with session([], tmp_path, source=source) as s, client(s, kit) as c:
        command = c.commands.commands["permissions"]
        for answer in ("keep", "add"):
            async with anyio.create_task_group() as group:
                group.start_soon(command, f"allow {rule} --session", BACKGROUND)
                confirm = await c.tui.next_prompt()
                assert confirm.title == title
                assert confirm.choices == ["keep", "add"]  # the safe answer first
                assert confirm.labels == ["No, do not add it", yes]
                assert confirm.body.startswith(body)
                confirm.answer(answer)
        assert c.commands.notices[-2] == (f"Not added: {rule} (not confirmed)", "information")
        assert c.commands.notices[-1] == (f"Added allow rule {rule} to this session", "information")
        with pytest.raises(RemoteServiceError, match="without asking"):
            await c.rules.add({"rule": rule, "kind": "allow", "scope": "user"}, BACKGROUND)
        # the screen asks it too, after the scope
        async with anyio.create_task_group() as group:
            group.start_soon(command, "", BACKGROUND)
            (await c.tui.next_prompt()).answer("add")
            (await c.tui.next_prompt()).answer("allow")
            (await c.tui.next_prompt()).answer(rule)
            (await c.tui.next_prompt()).answer("user")
            confirm = await c.tui.next_prompt()
            assert confirm.title == title and confirm.choices == ["keep", "add"]
            confirm.answer("keep")
        assert source.files == {}
        asked = len(c.tui.prompts)
        await command(f"ask {rule} --session", BACKGROUND)  # only allow widens: no question
        narrow = "WebFetch(domain:example.com)" if rule == "WebFetch" else "Edit(src/**)"
        await command(f"allow {narrow} --session", BACKGROUND)
        assert c.commands.notices[-1] == (
            f"Added allow rule {narrow} to this session",
            "information",
        )
        assert len(c.tui.prompts) == asked


async def test_permissions_adds_a_rule_in_a_real_app_with_the_keyboard(
    kit: Any, tmp_path: Path
) -> None:
    """Pilot: key 1 (the first entry) adds; Enter picks allow; the rule is typed; Enter keeps
    it at the first scope offered (the project's, as Claude Code's add dialog)."""
    source = kit.RuleSource({}, scopes=("project", "user"))
    script = [turn(call("bash", "t", command="npm run test")), faux_response("done")]
    app = kit.DialogApp()
    async with (
        session(script, tmp_path, source=source) as s,
        app.run_test() as pilot,
        kit.presentation(s.host, [permissions_tui_facet], app.tui, s.group),
    ):

        async def next_dialog(previous: Any) -> Any:
            await app.until(lambda: app.dialog() not in (None, previous))
            return await app.shown_dialog(pilot)

        async with anyio.create_task_group() as command:  # ends when /permissions has
            command.start_soon(app.tui.run_command, "/permissions", BACKGROUND)
            listing = await next_dialog(None)
            assert kit.title(listing) == "No permission rules yet"
            assert kit.options(listing) == ["1. + Add a rule… (allow, ask or deny)"]
            await pilot.press("1", "enter")
            kind = await next_dialog(listing)
            assert kit.options(kind)[0].startswith("1. allow — runs without asking")
            await pilot.press("enter")  # allow
            typed = await next_dialog(kind)
            assert kit.title(typed) == "New allow rule"
            await pilot.press(*"Bash(npm run test:*)", "enter")
            scope = await next_dialog(typed)
            assert kit.title(scope) == "Where should the allow rule Bash(npm run test:*) be kept?"
            assert kit.options(scope) == [
                "1. This project (.coding-agent/config.toml)",
                "2. This session only (kept with the conversation, rewound with it)",
                "3. Everywhere (your config.toml)",
            ]
            await pilot.press("enter")
            await app.until(lambda: app.dialog() is None)
        assert source.files == {"project/config.toml": [("allow", "Bash(npm run test:*)")]}
        await s.run("test")  # allowed by the new rule: no dialog, it ran
    assert s.runs == [("bash", {"command": "npm run test"})]
