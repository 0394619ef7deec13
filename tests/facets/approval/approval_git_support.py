"""The harness of the git-configuration tests (test_git_configuration.py,
test_git_remembered.py): real repositories whose traps leave marker files, a real ``bash`` tool,
the approval hook over a real harness, and a recording dialog (``Asked``).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from chord.context import BACKGROUND, Context
from facets_approval.session import ApprovalInstallation, install_approval
from pico3.harness import ConversationHandle, Harness, HarnessOptions
from pico3.models.faux import FauxProvider, FauxStep, faux_response, faux_tool_call
from pico3.storage import MemoryStorage
from pico3.tools import ToolDeclaration, ToolResult
from pico3.turn.models import Models

MODEL = {"provider": "faux", "modelId": "faux-1"}
QUIET = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}
"""Commits without a user's identity; the user's global configuration left out of the trap."""


@pytest.fixture(autouse=True)
def no_global_git_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in QUIET.items():
        monkeypatch.setenv(name, value)


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def script(root: Path, name: str, body: str = "") -> str:
    """A script that leaves ``<root>/markers/<name>`` when it runs; its path."""
    markers = root / "markers"
    markers.mkdir(exist_ok=True)
    path = root / f"{name}.sh"
    path.write_text(f"#!/bin/sh\ntouch {markers / name}\n{body}")
    path.chmod(0o755)
    return str(path)


def markers(root: Path) -> list[str]:
    folder = root / "markers"
    return sorted(os.listdir(folder)) if folder.exists() else []


def repository(root: Path) -> Path:
    """A committed repository with a tracked ``a.txt``."""
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", ".")
    (repo / "a.txt").write_text("hello\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    return repo


def bash(repo: Path) -> ToolDeclaration:
    """The ``bash`` tool: ``bash -c <command>`` in the repository, really."""

    async def execute(args: dict[str, Any], api: Any, ctx: Context) -> ToolResult:
        done = await anyio.to_thread.run_sync(
            lambda: subprocess.run(
                ["bash", "-c", args["command"]], cwd=repo, capture_output=True, check=False
            )
        )
        return ToolResult.text(f"exit {done.returncode}")

    schema = {"type": "object", "properties": {"command": {"type": "string"}}}
    return ToolDeclaration("bash", "Run a command.", schema, execute)


def calls(*commands: str) -> FauxStep:
    return faux_response(
        *(faux_tool_call("bash", {"command": c}, id=f"call-{i}") for i, c in enumerate(commands))
    )


class Asked:
    """The dialog: records each request and answers with ``answer(request)`` (deny unless
    told otherwise)."""

    def __init__(self, answer: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self._answer = answer or (lambda _request: {"decision": "deny", "by": "tui"})

    async def __call__(self, request: Any, ctx: Context) -> Any:
        self.requests.append(request)
        return self._answer(request)


@asynccontextmanager
async def harness(
    repo: Path,
    script_steps: Sequence[FauxStep],
    source: Any,
    asked: Asked,
    extra: dict[str, Any] | None = None,
) -> AsyncIterator[tuple[ConversationHandle, ApprovalInstallation]]:
    services = {
        "models": Models([FauxProvider(script_steps)]),
        "workspace": str(repo),
        "permission_rules": source,
        **(extra or {}),
    }
    h = await Harness.open(MemoryStorage(), HarnessOptions(services=services), BACKGROUND)
    async with h:
        h.register_tool(bash(repo))
        installation = install_approval(h, asked)
        try:
            await h.resume(BACKGROUND)
            root = await h.root(BACKGROUND)
            await root.set_config({"model": MODEL, "selectedTools": ["bash"]}, BACKGROUND)
            yield root, installation
        finally:
            installation()


async def run(root: ConversationHandle, text: str = "go") -> list[str]:
    """Send ``text``, wait for the turn; the tool results' texts, oldest first."""
    handle = await root.send(text, BACKGROUND)
    with anyio.fail_after(60):
        await handle.wait(BACKGROUND)
    entries = await root.entries(BACKGROUND, limit=100)
    return [
        e.model[0]["content"][0]["text"]  # pyright: ignore[reportUnknownMemberType, reportIndexIssue]
        for e in reversed(entries)  # newest first
        if e.kind == "pi.tool_result"
    ]


def allow(*rules: str, **options: Any) -> Any:
    return lambda kit: kit.RuleSource(
        {"user/config.toml": [("allow", r) for r in rules]}, **options
    )
