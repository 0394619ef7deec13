"""The working directories (facets_approval.workdirs): a read outside the project and the added
folders asks in every mode but auto, unless an allow rule covers it; the agent's own files never
ask; deny still wins; ``blockReadsOutsideWorkingDirectories`` refuses such reads in every mode.

The hook runs over a real harness (faux model, tools that record their runs); ``ask`` is a
function that records each request and answers deny, as a headless run does.
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

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from facets_approval.contract import ApprovalDecision, ApprovalRequest
from facets_approval.session import (
    ApprovalInstallation,
    confinement,
    install_approval,
    rule_block_reason,
)
from facets_approval.workdirs import (
    WORKING_DIRECTORIES_SERVICE,
    WorkingDirectories,
    read_outside,
    working_directories,
)
from pico3 import HarnessService, HarnessServiceApi, harness_session_facet
from pico3.harness import HarnessOptions
from pico3.models.faux import FauxProvider, faux_response, faux_tool_call
from pico3.storage import MemoryStorage
from pico3.tools import ToolDeclaration, ToolResult
from pico3.turn.models import Models

MODEL = {"provider": "faux", "modelId": "faux-1"}
TOOLS = ("read", "grep", "find", "ls", "write")
USER = "user/config.toml"


@dataclass
class Place:
    home: Path
    project: Path
    added: Path
    outside: Path
    agent: Path
    temp: Path


@pytest.fixture
def place(tmp_path: Path) -> Place:
    found = Place(*(tmp_path / n for n in ("home", "project", "added", "outside", "agent", "tmp")))
    for folder in (found.home, found.project, found.added, found.outside, found.agent, found.temp):
        folder.mkdir()
    for folder in (found.project, found.added, found.outside, found.agent):
        (folder / "notes.txt").write_text("notes\n")
    (found.temp / "coding-agent-bash-1.log").write_text("log\n")
    (found.temp / "other.log").write_text("other\n")
    (found.project / "link").symlink_to(found.outside)  # a symlink out of the project
    return found


def dirs_of(place: Place, *, block: bool = False) -> WorkingDirectories | None:
    return working_directories(
        str(place.project),
        {
            WORKING_DIRECTORIES_SERVICE: {
                "added": [str(place.added)],
                "agent": [str(place.agent), str(place.temp / "coding-agent-*")],
                "blockReadsOutside": block,
            }
        },
    )


@pytest.mark.parametrize(
    ("tool", "path", "outside"),
    [
        ("read", "notes.txt", False),  # relative: the project
        ("grep", None, False),  # a folder tool without a path reads the project
        ("ls", ".", False),
        ("read", "{added}/notes.txt", False),  # an added working directory
        ("find", "{added}", False),
        ("read", "{agent}/notes.txt", False),  # the agent's own files
        ("read", "{temp}/coding-agent-bash-1.log", False),  # its temporary files, by prefix
        ("read", "{temp}/other.log", True),  # ... not every file beside them
        ("read", "{outside}/notes.txt", True),
        ("grep", "{outside}", True),
        ("ls", "..", True),  # the folder holding the project is outside it
        ("read", "link/notes.txt", True),  # symlinks are followed
        ("read", "~/x", True),
        ("write", "{outside}/notes.txt", False),  # not a read tool: confinement's business
    ],
)
def test_which_reads_are_outside_the_working_directories(
    place: Place, tool: str, path: str | None, outside: bool
) -> None:
    arguments = {} if path is None else {"path": path.format(**vars(place))}
    found = read_outside(tool, arguments, dirs_of(place), str(place.home))
    assert (found is not None) is outside
    if found is not None:
        assert found.folder in found.why and "--add-dir" in found.why


def test_no_service_means_no_check_and_the_project_comes_first(place: Place) -> None:
    assert working_directories(str(place.project), {}) is None
    assert read_outside("read", {"path": "/etc/hosts"}, None, str(place.home)) is None
    dirs = dirs_of(place)
    assert dirs is not None
    assert dirs.folders == (os.path.realpath(place.project), os.path.realpath(place.added))


# -- the hook, over a real harness ------------------------------------------------------------
class Session:
    def __init__(self, worker: HarnessServiceApi, installation: ApprovalInstallation) -> None:
        self.worker = worker
        self.installation = installation
        self.runs: list[tuple[str, dict[str, Any]]] = []
        self.asked: list[ApprovalRequest] = []

    async def run(self) -> dict[str, str]:
        """One turn: the tool results' texts by call id."""
        root = await self.worker.harness.root(BACKGROUND)
        handle = await root.send("go", BACKGROUND)
        with anyio.fail_after(20):
            await handle.wait(BACKGROUND)
        out: dict[str, str] = {}
        for entry in await root.entries(BACKGROUND, limit=200):
            if entry.kind == "pi.tool_result":
                message: Any = entry.model
                out[message[0]["toolCallId"]] = message[0]["content"][0]["text"]
        return out


@asynccontextmanager
async def hooked(
    calls: Sequence[Any],
    place: Place,
    source: Any,
    *,
    block: bool = False,
    later: Sequence[Any] = (),
    answer: Callable[[ApprovalRequest], ApprovalDecision] | None = None,
) -> AsyncIterator[Session]:
    """The session; ``calls`` are its first turn's, ``later`` its second's; ``answer`` decides
    each request (default: deny, as a headless run does)."""
    steps = [faux_response(*calls), faux_response("done")]
    if later:
        steps += [faux_response(*later), faux_response("done again")]
    services: dict[str, Any] = {
        "models": Models([FauxProvider(steps)]),
        "workspace": str(place.project),
        "permission_rules": source,
        WORKING_DIRECTORIES_SERVICE: {
            "added": [str(place.added)],
            "agent": [str(place.agent)],
            "blockReadsOutside": block,
        },
    }
    box: dict[str, Any] = {}

    async def ask(request: ApprovalRequest, ctx: Context) -> ApprovalDecision:
        box["session"].asked.append(request)
        return answer(request) if answer is not None else {"decision": "deny", "by": "headless"}

    def declaration(name: str) -> ToolDeclaration:
        async def execute(args: dict[str, Any], api: Any, ctx: Context) -> ToolResult:
            box["session"].runs.append((name, args))
            return ToolResult.text(f"{name} ran")

        replay = "unsafe" if name == "write" else "safe"
        return ToolDeclaration(name, name, {"type": "object"}, execute, replay=replay)

    def worker(env: FacetEnvironment) -> None:
        harness = env.use(HarnessService)
        box["worker"] = harness

        def install(h: Any) -> Any:
            box["installation"] = install_approval(h, ask)
            return box["installation"]

        def activate() -> None:
            env.own(harness.add_registration(install))
            for name in TOOLS:
                tool = declaration(name)
                env.own(harness.add_registration(lambda h, d=tool: h.register_tool(d)))

        env.on_activate(activate)

    async with anyio.create_task_group() as group:
        harness = harness_session_facet(
            MemoryStorage, HarnessOptions(services=services), task_group=group
        )
        async with create_facet_host([harness, define_facet("test/worker", worker)]):
            service: HarnessServiceApi = box["worker"]
            await service.resume(BACKGROUND)
            root = await service.harness.root(BACKGROUND)
            await root.set_config({"model": MODEL, "selectedTools": list(TOOLS)}, BACKGROUND)
            box["session"] = Session(service, box["installation"])
            yield box["session"]
        group.cancel_scope.cancel()


def calls_of(place: Place) -> list[Any]:
    return [
        faux_tool_call("read", {"path": "notes.txt"}, id="project"),
        faux_tool_call("read", {"path": str(place.added / "notes.txt")}, id="added"),
        faux_tool_call("read", {"path": str(place.agent / "notes.txt")}, id="agent"),
        faux_tool_call("read", {"path": str(place.outside / "notes.txt")}, id="outside"),
        faux_tool_call("grep", {"path": str(place.outside), "pattern": "x"}, id="grep"),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("mode", "asks"),
    [("ask", True), ("accept-edits", True), ("plan", True), ("sandbox", True), ("auto", False)],
)
async def test_a_read_outside_asks_in_every_mode_but_auto(
    kit: Any, place: Place, mode: str, asks: bool
) -> None:
    async with hooked(calls_of(place), place, kit.RuleSource({})) as s:
        await s.installation.set_mode(mode, BACKGROUND)  # type: ignore[arg-type]
        results = await s.run()
    ran = sorted(args.get("path", "") for _, args in s.runs)
    inside = sorted(["notes.txt", str(place.added / "notes.txt"), str(place.agent / "notes.txt")])
    if asks:
        assert sorted(r["callId"] for r in s.asked) == ["grep", "outside"]
        reason = next(r for r in s.asked if r["callId"] == "outside").get("reason", "")
        assert reason.startswith(f"This asks because read reads {place.outside / 'notes.txt'}")
        assert f"--add-dir {place.outside}" in reason  # the dialog names the folder
        assert "denied" in results["outside"] and "denied" in results["grep"]
        assert ran == inside
    else:
        assert s.asked == []
        assert ran == sorted([*inside, str(place.outside), str(place.outside / "notes.txt")])


@pytest.mark.anyio
async def test_an_allow_rule_lets_a_read_outside_run_and_deny_still_wins(
    kit: Any, place: Place
) -> None:
    source = kit.RuleSource(
        {USER: [("allow", f"Read(/{place.outside})"), ("deny", f"Read(/{place.added}/**)")]}
    )
    async with hooked(calls_of(place), place, source) as s:
        results = await s.run()
    assert s.asked == []  # the allow rule covers the outside folder: nothing asks
    assert ("read", {"path": str(place.outside / "notes.txt")}) in s.runs
    assert ("grep", {"path": str(place.outside), "pattern": "x"}) in s.runs
    why = f"the deny rule Read(/{place.added}/**) in {USER} matches"
    assert rule_block_reason("read", why) in results["added"]  # an added folder: deny wins


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["ask", "auto"])
async def test_block_reads_outside_refuses_them_in_every_mode(
    kit: Any, place: Place, mode: str
) -> None:
    source = kit.RuleSource({USER: [("allow", f"Read(/{place.outside}/**)")]})
    async with hooked(calls_of(place), place, source, block=True) as s:
        await s.installation.set_mode(mode, BACKGROUND)  # type: ignore[arg-type]
        results = await s.run()
    assert s.asked == []  # refused, not asked about: even an allow rule does not open it
    refusal = results["outside"]
    assert "blockReadsOutsideWorkingDirectories" in refusal
    assert f"--add-dir {place.outside}" in refusal and "ask the user" in refusal
    assert "blockReadsOutsideWorkingDirectories" in results["grep"]
    assert sorted(args["path"] for _, args in s.runs) == sorted(
        ["notes.txt", str(place.added / "notes.txt"), str(place.agent / "notes.txt")]
    )


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["ask", "accept-edits"])
async def test_an_edit_in_an_added_folder_follows_the_mode_as_in_the_project(
    kit: Any, place: Place, mode: str
) -> None:
    """The added folders count as the project for an edit; outside them, or on a guarded path
    inside them, an edit asks in every mode but auto."""
    calls = [
        faux_tool_call("write", {"path": str(place.added / "new.txt"), "content": "x"}, id="in"),
        faux_tool_call("write", {"path": str(place.outside / "new.txt"), "content": "x"}, id="out"),
    ]
    async with hooked(calls, place, kit.RuleSource({})) as s:
        await s.installation.set_mode(mode, BACKGROUND)  # type: ignore[arg-type]
        await s.run()
    asked = {r["callId"]: r.get("reason", "") for r in s.asked}
    if mode == "ask":
        assert sorted(asked) == ["in", "out"] and asked["in"] == ""  # the mode asks, as inside
    else:
        assert sorted(asked) == ["out"]
        assert [args["path"] for _, args in s.runs] == [str(place.added / "new.txt")]
    assert "its target is outside the project and the added working directories" in asked["out"]


def test_a_guarded_path_in_an_added_folder_still_asks(place: Place) -> None:
    guarded = confinement(
        {"path": str(place.added / ".git" / "config")},
        str(place.project),
        [{"pattern": ".git/", "reason": "git runs it"}],
        added=[os.path.realpath(place.added)],
    )
    assert guarded is not None and guarded.startswith("git runs it")  # still asks


@pytest.mark.anyio
async def test_the_dialog_offers_to_keep_reading_the_folder(kit: Any, place: Place) -> None:
    """An outside read's dialog offers ``Read(//folder)`` at a scope; kept for the session, a
    later read in that folder runs unasked, one elsewhere still asks."""
    (place.outside / "more.txt").write_text("more\n")
    first = [faux_tool_call("read", {"path": str(place.outside / "notes.txt")}, id="first")]
    later = [
        faux_tool_call("read", {"path": str(place.outside / "more.txt")}, id="more"),
        faux_tool_call("read", {"path": str(place.home / "x.txt")}, id="home"),
    ]

    def keep(request: ApprovalRequest) -> ApprovalDecision:
        if request["callId"] != "first":
            return {"decision": "deny", "by": "test"}
        return {
            "decision": "allow",
            "by": "test",
            "rule": request.get("rule", ""),
            "scope": "session",
        }

    async with hooked(first, place, kit.RuleSource({}), later=later, answer=keep) as s:
        await s.run()
        (offered,) = s.asked
        assert offered.get("rule") == f"Read(/{place.outside})"
        assert "session" in offered.get("scopes", [])
        assert "outside the working directories" in offered.get("reason", "")
        await s.run()
    assert [r["callId"] for r in s.asked] == ["first", "home"]
    assert ("read", {"path": str(place.outside / "more.txt")}) in s.runs


@pytest.mark.anyio
async def test_claude_codes_switches_see_the_added_folders(kit: Any, place: Place) -> None:
    """``blockReadsOutsideWorkingDirectories`` handed over with the restrictive switches (from
    any Claude Code file) refuses an outside read in auto mode; under
    ``blockWritesOutsideWorkingDirectories`` a write in an added folder is inside."""
    source = kit.RuleSource(
        {},
        restrictions={
            "blockReadsOutsideWorkingDirectories": "proj/.claude/settings.json",
            "blockWritesOutsideWorkingDirectories": "proj/.claude/settings.json",
        },
    )
    calls = [
        *calls_of(place),
        faux_tool_call("write", {"path": str(place.added / "new.txt"), "content": "x"}, id="in"),
        faux_tool_call("write", {"path": str(place.outside / "new.txt"), "content": "x"}, id="out"),
    ]
    async with hooked(calls, place, source) as s:
        await s.installation.set_mode("auto", BACKGROUND)
        results = await s.run()
    assert s.asked == []
    assert "blockReadsOutsideWorkingDirectories" in results["outside"]
    assert "blockReadsOutsideWorkingDirectories" in results["grep"]
    assert "blockWritesOutsideWorkingDirectories" in results["out"]
    assert ("write", {"path": str(place.added / "new.txt"), "content": "x"}) in s.runs


@pytest.mark.anyio
async def test_deny_instead_of_prompting_refuses_an_outside_read(kit: Any, place: Place) -> None:
    source = kit.RuleSource({}, restrictions={"denyInsteadOfPrompting": "claude/settings.json"})
    async with hooked(calls_of(place), place, source) as s:
        results = await s.run()
    assert s.asked == []  # nobody is asked
    assert "denyInsteadOfPrompting" in results["outside"]
    assert "outside the working directories" in results["outside"]  # why it would have asked
    assert ("read", {"path": str(place.added / "notes.txt")}) in s.runs
