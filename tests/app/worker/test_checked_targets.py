"""The approval's checked path reaches the tool, through one real session (the worker's harness,
the installed approval feature, the scripted ``faux`` model, the built-in tools).

The approval resolves a call's ``path`` once and leaves that real path in the harness service
``checked_targets``; the tool takes it and writes or reads exactly there, or fails. Here a
conversation-scoped ``before_tool`` hook — which runs after the approval's harness-wide one,
right before the tool (docs/design/decisions.md#d8-g9) — swaps the folder ``d`` for a symlink
to a folder outside the project, as another process could between the decision and the tool.
``write``, ``edit`` and ``read`` (and ``grep`` and ``ls`` of the folder) must then refuse,
naming the approved path, and change or return nothing; without the swap, the same calls run.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from worker_support import TIMEOUT, write_script

from chord.context import BACKGROUND
from coding_agent.session_files.folders import Session
from coding_agent.worker.main import SessionRuntime, WorkerConfig, open_session_host
from pico3 import TOOL_KIND, ToolResult

pytestmark = pytest.mark.anyio

NOTES = "meeting notes\n"
SECRET = "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n"
CONFIG = "[core]\n\tbare = false\n"

CALLS: list[dict[str, Any]] = [
    {"name": "write", "arguments": {"path": "d/new.txt", "content": "planted\n"}},
    {
        "name": "edit",
        "arguments": {"path": "d/config", "edits": [{"oldText": "false", "newText": "true"}]},
    },
    {"name": "read", "arguments": {"path": "d/notes.txt"}},
]
SEARCHES: list[dict[str, Any]] = [
    {"name": "grep", "arguments": {"pattern": "secret|meeting", "path": "d"}},
    {"name": "ls", "arguments": {"path": "d"}},
]
DONE = {"write": ("write", "written"), "edit": ("write", "written"), "read": ("read", "read")}
DONE |= {"grep": ("search", "searched"), "ls": ("list", "listed")}


def _layout(session: Session, tmp_path: Path) -> tuple[Path, Path]:
    """``d/`` in the project (a file to edit, one to read) and, outside it, a stand-in for
    ``~/.ssh`` holding files of the same names."""
    project = session.cwd
    (project / "d").mkdir()
    (project / "d" / "config").write_text(CONFIG)
    (project / "d" / "notes.txt").write_text(NOTES)
    outside = tmp_path / "home" / ".ssh"
    outside.mkdir(parents=True)
    (outside / "config").write_text(CONFIG)
    (outside / "notes.txt").write_text(SECRET)
    return project, outside


@asynccontextmanager
async def _worker(
    session: Session, agent_env: dict[str, str], tmp_path: Path, calls: list[dict[str, Any]]
) -> AsyncIterator[SessionRuntime]:
    """The worker in ``accept-edits`` (edits in the project run: the approval still checks
    their target) with the installed features, the model making ``calls`` one per turn step."""
    steps: list[dict[str, Any]] = [{"toolCalls": [call]} for call in calls]
    script = write_script(tmp_path / "script.json", [*steps, {"text": "done"}])
    config = WorkerConfig(
        session, faux_script=script, permission_mode="accept-edits", fsync=False, env=agent_env
    )
    async with open_session_host(config) as runtime:
        yield runtime


Swap = tuple[Callable[[dict[str, Any]], None], Callable[[], None]]


async def _run(runtime: SessionRuntime, swap: Swap | None) -> list[dict[str, Any]]:
    """One turn; ``swap[0](call)`` runs after the approval, before each tool, and ``swap[1]()``
    after it. Returns the tool results' model messages, oldest first."""
    harness = runtime.harness.harness
    root = await harness.root(BACKGROUND)
    registration = None
    if swap is not None:
        before, after = swap

        async def before_tool(call: dict[str, Any], api: Any, ctx: Any) -> None:
            del api, ctx
            before(call)

        async def after_tool(call: Any, result: ToolResult, api: Any, ctx: Any) -> ToolResult:
            del call, api, ctx
            after()
            return result

        handlers = {"before_tool": before_tool, "after_tool": after_tool}
        registration = root.hooks(harness.namespace("test-swap"), TOOL_KIND, handlers)
    try:
        with anyio.fail_after(TIMEOUT):
            await root.send("go", BACKGROUND)
            await harness.wait_for_idle(BACKGROUND)
    finally:
        if registration is not None:
            registration()
    entries = await root.entries(BACKGROUND, kind="pi.tool_result", limit=10)
    messages: list[dict[str, Any]] = []
    for entry in reversed(entries):  # newest first
        assert isinstance(entry.model, list)
        messages.append(dict(entry.model[0]))
    return messages


def _real(path: Path) -> str:
    return os.path.realpath(path)


def _text(message: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in message["content"])


async def test_a_swap_after_the_approval_makes_write_edit_and_read_refuse(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    project, outside = _layout(session, tmp_path)
    real_d = _real(project / "d")
    swapped: list[str] = []

    def swap(call: dict[str, Any]) -> None:  # d -> a link out of the project
        os.rename(project / "d", project / "d.away")
        os.symlink(outside, project / "d")
        swapped.append(call["name"])

    def restore() -> None:  # the next call is decided on the real d/ again
        os.unlink(project / "d")
        os.rename(project / "d.away", project / "d")

    calls = [*CALLS, *SEARCHES]
    async with _worker(session, agent_env, tmp_path, calls) as runtime:
        results = await _run(runtime, (swap, restore))
    assert swapped == ["write", "edit", "read", "grep", "ls"]
    assert len(results) == len(calls)
    for call, message in zip(calls, results, strict=True):
        path = call["arguments"]["path"]
        approved = real_d if path == "d" else f"{real_d}/{path.removeprefix('d/')}"
        now = approved.replace(real_d, str(outside), 1)
        verb, done = DONE[call["name"]]
        assert message["isError"] is True, _text(message)
        assert _text(message) == (
            f"Cannot {verb} {path}: its path changed while the call ran (a symlink appeared on "
            f"the way); nothing was {done}. It was approved as {approved} and now leads to "
            f"{now}."
        )
    assert sorted(p.name for p in outside.iterdir()) == ["config", "notes.txt"]  # no new.txt
    assert (outside / "config").read_text() == CONFIG  # not edited
    assert not (project / "d" / "new.txt").exists()
    assert (project / "d" / "config").read_text() == CONFIG


async def test_without_a_swap_the_same_calls_run(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    project, outside = _layout(session, tmp_path)
    # the edit needs a read first (the read ledger): read, then write, edit, read again
    calls = [{"name": "read", "arguments": {"path": "d/config"}}, *CALLS]
    async with _worker(session, agent_env, tmp_path, calls) as runtime:
        results = await _run(runtime, None)
    assert [m["isError"] for m in results] == [False] * 4, [_text(m) for m in results]
    assert (project / "d" / "new.txt").read_text() == "planted\n"
    assert (project / "d" / "config").read_text() == CONFIG.replace("false", "true")
    assert _text(results[-1]) == NOTES.rstrip("\n")
    assert (outside / "config").read_text() == CONFIG
