"""A subagent's persistent memory (``memory`` in its definition): the folder Claude Code keeps
for it, created on first use, its ``MEMORY.md`` (first 200 lines) in the subagent's system
prompt, and written by that subagent without a dialog — only there, only by it, and only while
the folder is where it is written."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from facets_approval.memory import own_folder
from facets_approval.session import install_approval
from facets_subagents.session import session_facet as subagents_facet
from pico3 import (
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


def agent(home: Path, scope: str) -> None:
    folder = home / ".claude" / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "keeper.md").write_text(
        f"---\nname: keeper\ndescription: Remembers.\ntools: Grep\nmemory: {scope}\n---\n"
        "You are the keeper.\n"
    )


@dataclass
class Script:
    """The parent writes ``parent.txt`` into the memory folder, then runs ``keeper``; the
    subagent writes ``notes.md`` there and ``outside.txt`` in the project, then reports."""

    memory: Path
    project: Path
    child: list[Request] = field(default_factory=list[Request])
    parent: int = 0

    def __call__(self, request: Request, state: FauxState) -> FauxResponse:
        if any("You are the keeper" in s for s in request.system):
            self.child.append(request)
            if len(self.child) == 1:
                notes = {"path": str(self.memory / "notes.md"), "content": "learned"}
                outside = {"path": str(self.project / "outside.txt"), "content": "x"}
                return faux_response(
                    faux_tool_call("write", notes, id="w1"),
                    faux_tool_call("write", outside, id="w2"),
                )
            return faux_response("report: saved")
        self.parent += 1
        if self.parent == 1:
            args = {"path": str(self.memory / "parent.txt"), "content": "p"}
            return faux_response(faux_tool_call("write", args, id="p1"))
        if self.parent == 2:
            args = {"description": "keep", "prompt": "go", "subagent_type": "keeper"}
            return faux_response(faux_tool_call("agent", args, id="a1"))
        return faux_response("parent done")


def write_tool() -> ToolDeclaration:
    def write(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    async def execute(args: dict[str, Any], api: Any, ctx: Context) -> ToolResult:
        await anyio.to_thread.run_sync(write, Path(str(args["path"])), str(args.get("content")))
        return ToolResult.text("written")

    return ToolDeclaration("write", "Write a file.", {"type": "object"}, execute)


def noop_tool(name: str) -> ToolDeclaration:
    async def execute(args: dict[str, Any], api: Any, ctx: Context) -> ToolResult:
        return ToolResult.text("ok")

    return ToolDeclaration(name, name, {"type": "object"}, execute, replay="safe")


@asynccontextmanager
async def session(tmp: Path, script: Script, asked: list[str]) -> AsyncIterator[Any]:
    services: dict[str, Any] = {
        "models": Models([FauxProvider([script] * 30)]),
        "workspace": str(script.project),
        "mcp_env": {"HOME": str(tmp / "home"), "XDG_CONFIG_HOME": str(tmp / "config")},
    }
    workers: list[HarnessServiceApi] = []

    async def ask(request: Any, ctx: Context) -> Any:
        asked.append(str(request["args"]["path"]))
        return {"decision": "deny", "by": "headless"}

    def worker(env: FacetEnvironment) -> None:
        harness = env.use(HarnessService)
        workers.append(harness)

        def install(h: Any) -> Any:
            tools = [write_tool(), noop_tool("grep"), noop_tool("read"), noop_tool("edit")]
            undo = [install_approval(h, ask), *(h.register_tool(t) for t in tools)]
            return lambda: [fn() for fn in reversed(undo)]

        env.on_activate(lambda: env.own(harness.add_registration(install)))

    async with anyio.create_task_group() as group:
        facets = [
            harness_session_facet(
                MemoryStorage, HarnessOptions(services=services), task_group=group
            ),
            define_facet("test/worker", worker),
            subagents_facet,
        ]
        async with create_facet_host(facets):
            (service,) = workers
            await service.resume(BACKGROUND)
            root = await service.harness.root(BACKGROUND)
            await root.set_config({"model": MODEL, "selectedTools": ["write", "agent"]}, BACKGROUND)
            handle = await root.send("go", BACKGROUND)
            with anyio.fail_after(60):
                await handle.wait(BACKGROUND)
            yield service
        group.cancel_scope.cancel()


async def test_a_project_memory_is_in_the_prompt_and_the_subagent_alone_writes_there_unasked(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    memory = project / ".claude" / "agent-memory" / "keeper"
    memory.mkdir(parents=True)
    (memory / "MEMORY.md").write_text("".join(f"fact {n}\n" for n in range(1, 251)))
    agent(tmp_path / "home", "project")
    script, asked = Script(memory, project), []
    async with session(tmp_path, script, asked):
        pass
    (first, *_rest) = script.child
    prompt = "\n".join(first.system)
    assert f"persistent memory folder: {memory}" in prompt
    assert "fact 1\n" in prompt and "fact 200" in prompt and "fact 201" not in prompt
    # Read, Write, Edit come with memory, as in Claude Code (its tools said only Grep)
    assert {t.name for t in first.tools} == {"grep", "read", "write", "edit"}
    # its memory written without a dialog; its write outside asked; the parent's write into
    # the subagent's memory asked (the folder is the subagent's own, not the session's)
    assert (memory / "notes.md").read_text() == "learned"
    assert asked == [str(memory / "parent.txt"), str(project / "outside.txt")]
    assert not (memory / "parent.txt").exists() and not (project / "outside.txt").exists()


async def test_a_user_memory_folder_is_created_on_first_use(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    memory = tmp_path / "home" / ".claude" / "agent-memory" / "keeper"
    agent(tmp_path / "home", "user")
    script, asked = Script(memory, project), []
    async with session(tmp_path, script, asked):
        pass
    assert memory.is_dir()
    assert "(empty: nothing saved yet)" in "\n".join(script.child[0].system)
    # outside the project, and still its own: written unasked
    assert (memory / "notes.md").read_text() == "learned"
    assert asked == [str(memory / "parent.txt"), str(project / "outside.txt")]


async def test_a_project_memory_behind_a_symlink_is_not_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    project = tmp_path / "project"
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "agent-memory" / "keeper").mkdir(parents=True)
    (elsewhere / "agent-memory" / "keeper" / "MEMORY.md").write_text("SECRET\n")
    project.mkdir()
    (project / ".claude").symlink_to(elsewhere)
    memory = project / ".claude" / "agent-memory" / "keeper"
    agent(tmp_path / "home", "project")
    script, asked = Script(memory, project), []
    with caplog.at_level(logging.WARNING, logger="facets_subagents"):
        async with session(tmp_path, script, asked):
            pass
    prompt = "\n".join(script.child[0].system)
    assert "SECRET" not in prompt and "persistent memory" not in prompt
    assert any("is not where it is written" in r.getMessage() for r in caplog.records)
    # so its write there asked (and was denied) like any other
    assert asked == [
        str(memory / "parent.txt"),
        str(memory / "notes.md"),
        str(project / "outside.txt"),
    ]
    assert not (elsewhere / "agent-memory" / "keeper" / "notes.md").exists()


def test_the_approval_side_checks_the_folder_at_each_decision(tmp_path: Path) -> None:
    project = tmp_path / "project"
    memory = project / ".claude" / "agent-memory" / "keeper"
    memory.mkdir(parents=True)
    entry = {"folder": str(memory), "base": str(project)}
    assert own_folder(entry) == str(memory.resolve())
    # swapped for a symlink to another folder of the project: no longer its own
    (project / "src").mkdir()
    memory.rmdir()
    memory.symlink_to(project / "src")
    assert own_folder(entry) is None
    assert own_folder({"folder": "relative", "base": str(project)}) is None
    assert own_folder({"folder": str(project), "base": str(project)}) is None
    assert own_folder(None) is None


def _git_init(project: Path) -> None:
    import subprocess

    project.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)


async def test_a_local_memory_folder_git_would_commit_is_warned_about_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Claude Code's ``memory: local`` folder is not for version control: created in a git
    work tree that does not ignore it, one warning names the ``.gitignore`` line to add (the
    project's files are left alone); once the folder exists, nothing more is said."""
    project = tmp_path / "project"
    _git_init(project)
    memory = project / ".claude" / "agent-memory-local" / "keeper"
    agent(tmp_path / "home", "local")
    with caplog.at_level(logging.WARNING, logger="facets_subagents"):
        async with session(tmp_path, Script(memory, project), []):
            pass
    warned = [r.getMessage() for r in caplog.records if "git would commit" in r.getMessage()]
    assert warned == [
        f"{tmp_path / 'home' / '.claude' / 'agents' / 'keeper.md'}: memory: local keeps "
        f"{project / '.claude' / 'agent-memory-local'}/ on this machine, but git would commit "
        "it: add the line .claude/agent-memory-local/ to the project's .gitignore (Claude "
        "Code's local memory is not for version control either)"
    ]
    assert memory.is_dir() and not (project / ".gitignore").exists()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="facets_subagents"):
        async with session(tmp_path, Script(memory, project), []):
            pass
    assert not any("git would commit" in r.getMessage() for r in caplog.records)


async def test_a_local_memory_folder_the_project_ignores_is_not_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    project = tmp_path / "project"
    _git_init(project)
    (project / ".gitignore").write_text(".claude/agent-memory-local/\n")
    memory = project / ".claude" / "agent-memory-local" / "keeper"
    agent(tmp_path / "home", "local")
    with caplog.at_level(logging.WARNING, logger="facets_subagents"):
        async with session(tmp_path, Script(memory, project), []):
            pass
    assert memory.is_dir()
    assert not any("git would commit" in r.getMessage() for r in caplog.records)
