"""Files that make the machine run code ask, through the real worker (issue 36 deliver 4).

In ``accept-edits`` a write of any file of :data:`coding_agent.settings.guarded_paths.CODE_PATHS` (in the
project, in a nested folder or repository, spelled in another case, reached through a symlink or
a hard link) and of the agent's own configuration, trust file and state asks, and the dialog's
request carries the reason the list gives; ``auto`` still runs them; a file next to them does not
ask. The table is the app's own list, so a new entry is tested by adding its file to ``TARGETS``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from worker_support import (
    TIMEOUT,
    Client,
    allow,
    connected,
    deny,
    text_of,
    worker_process,
    write_script,
)

from chord.context import BACKGROUND
from coding_agent.session_files.folders import Session
from coding_agent.settings.guarded_paths import CODE_PATHS

pytestmark = pytest.mark.anyio

REASONS = {entry.pattern: entry.reason for entry in CODE_PATHS}

TARGETS: list[tuple[str, str]] = [
    # (path the model writes, the CODE_PATHS entry whose reason the dialog must give)
    (".git/config", ".git/"),
    (".git/hooks/pre-commit", ".git/"),
    (".git/info/attributes", ".git/"),
    (".mcp.json", ".mcp.json"),
    (".claude/settings.json", ".claude/"),
    (".claude/settings.local.json", ".claude/"),
    (".claude/hooks/check.sh", ".claude/"),
    (".coding-agent/config.toml", ".coding-agent/"),
    (".coding-agent/facets/evil/__init__.py", ".coding-agent/"),
    (".pi/extensions/evil.ts", ".pi/"),  # pi runs it at its next start in the project
    (".pi/settings.json", ".pi/"),
    (".vscode/tasks.json", ".vscode/"),
    (".vscode/settings.json", ".vscode/"),
    (".idea/workspace.xml", ".idea/"),
    (".envrc", ".envrc"),
    (".husky/pre-commit", ".husky/"),
    (".pre-commit-config.yaml", ".pre-commit-config.yaml"),
    (".devcontainer/devcontainer.json", ".devcontainer/"),
    (".npmrc", ".npmrc"),
    (".yarnrc.yml", ".yarnrc.yml"),
    (".yarnrc", ".yarnrc"),
    # what a session started in the home folder would otherwise write freely
    (".bashrc", ".bashrc"),
    (".bash_profile", ".bash_profile"),
    (".profile", ".profile"),
    (".zshrc", ".zshrc"),
    (".zshenv", ".zshenv"),
    (".zprofile", ".zprofile"),
    (".gitconfig", ".gitconfig"),
    (".ssh/authorized_keys", ".ssh/"),
    # nested folders and repositories
    ("sub/.vscode/tasks.json", ".vscode/"),
    ("vendor/lib/.git/config", ".git/"),
    ("pkg/.envrc", ".envrc"),
    ("deep/er/.mcp.json", ".mcp.json"),
    # another case (a case-insensitive file system), a trailing dot (NTFS)
    (".GIT/config", ".git/"),
    (".VSCode/tasks.json", ".vscode/"),
    (".envrc.", ".envrc"),
    # symlinks: a folder inside the project pointing at .git/hooks, a file at .git/config
    ("hooks/post-checkout", ".git/"),
    ("cfg", ".git/"),
]

CODE_PATH_PATTERNS = {pattern for _, pattern in TARGETS}


def calls(*paths: str) -> dict[str, Any]:
    return {
        "toolCalls": [
            {"name": "write", "arguments": {"path": path, "content": "x\n"}} for path in paths
        ]
    }


def test_every_entry_of_the_list_is_in_the_table() -> None:
    assert set(REASONS) == CODE_PATH_PATTERNS


async def test_accept_edits_asks_for_every_guarded_path_with_its_reason(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    project = session.cwd
    (project / ".git" / "hooks").mkdir(parents=True)
    (project / ".git" / "config").write_text("[core]\n")
    (project / "hooks").symlink_to(project / ".git" / "hooks")
    (project / "cfg").symlink_to(project / ".git" / "config")
    os.link(project / ".git" / "config", project / "notes.txt")  # a hard link of it
    config = tmp_path / "config"
    env = {**agent_env, "XDG_CONFIG_HOME": str(config)}
    own = [
        str(config / "coding-agent" / "config.toml"),
        str(config / "coding-agent" / "trust.json"),
        str(Path(agent_env["XDG_STATE_HOME"]) / "coding-agent" / "sessions" / "x.json"),
    ]
    guarded = [path for path, _ in TARGETS] + ["notes.txt", *own]
    script = write_script(
        tmp_path / "script.json", [calls("src/ok.py", *guarded), {"text": "done"}]
    )
    client = Client(approve=deny)
    args = ("--faux-script", str(script), "--permission-mode", "accept-edits")
    async with worker_process(session, env, *args) as worker, connected(client, worker.socket):
        await client.root.send({"content": "write them"}, BACKGROUND)
        await client.wait_for(client.turn_ended)

    assert (project / "src" / "ok.py").read_text() == "x\n"  # an ordinary file: no dialog
    reasons = {
        dialog.request["args"]["path"]: dialog.request["reason"] for dialog in client.approvals
    }
    assert sorted(reasons) == sorted(guarded)  # each guarded write asked, nothing else did
    for path, pattern in TARGETS:
        reason = reasons[path]
        assert reason.startswith("This asks in every mode but auto: "), path
        assert REASONS[pattern] in reason, (path, reason)
    assert "other hard links" in reasons["notes.txt"]
    assert "the agent's own configuration" in reasons[own[0]]
    assert "the agent's trust file" in reasons[own[1]]
    assert "the agent's session storage" in reasons[own[2]]
    # Denied: nothing was written (the symlinked hook folder and config included).
    assert not (project / ".mcp.json").exists()
    assert not (project / ".git" / "hooks" / "post-checkout").exists()
    assert (project / ".git" / "config").read_text() == "[core]\n"


async def test_an_always_allowed_write_still_asks_for_a_guarded_path(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    # A standing allow rule chosen in the dialog (this path, this session) covers the same file
    # again, and no dialog of a guarded file offers one.
    kept: list[str] = []

    async def policy(facade: Any, request: dict[str, Any], ctx: Any) -> None:
        if "reason" in request:
            assert "rule" not in request  # a guarded path offers no standing choice
            await deny(facade, request, ctx)
        else:
            kept.append(request["rule"])
            decision = {"decision": "allow", "rule": request["rule"], "scope": "session"}
            await facade.decide({**decision, "by": "test"}, BACKGROUND)

    script = write_script(
        tmp_path / "script.json",
        [calls("a.txt"), calls("a.txt"), calls(".mcp.json"), {"text": "done"}],
    )
    client = Client(approve=policy)
    async with (
        worker_process(session, agent_env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "write them"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
    assert kept == ["Write(./a.txt)"]  # the second write ran on the kept rule
    assert [d.request["args"]["path"] for d in client.approvals] == ["a.txt", ".mcp.json"]
    assert (session.cwd / "a.txt").exists() and not (session.cwd / ".mcp.json").exists()


async def test_auto_still_runs_guarded_writes(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    targets = [".mcp.json", ".vscode/tasks.json", ".git/hooks/post-checkout", "sub/.envrc"]
    script = write_script(tmp_path / "script.json", [calls(*targets), {"text": "done"}])
    client = Client(approve=allow)
    args = ("--faux-script", str(script), "--permission-mode", "auto")
    async with (
        worker_process(session, agent_env, *args) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "write them"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
        results = [text_of(entry) for entry in client.entries("pi.tool_result")]
    assert client.approvals == []
    assert all(text.startswith("Successfully wrote") for text in results), results
    for target in targets:
        assert (session.cwd / target).read_text() == "x\n"


async def test_the_binary_in_accept_edits_blocks_a_guarded_write_and_says_why(
    project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    # `coding-agent -p --permission-mode accept-edits`: notes.txt is written, .mcp.json is not
    # (exit 3), and the blocked line gives the reason and the one mode that would run it.
    script = write_script(
        tmp_path / "script.json", [calls(".mcp.json", "notes.txt"), {"text": "done"}]
    )
    binary = Path(sys.executable).with_name("coding-agent")
    command = [str(binary), "-p", "write them", "--permission-mode", "accept-edits"]
    with anyio.fail_after(TIMEOUT):
        result = await anyio.run_process(
            [*command, "--faux-script", str(script)],
            env={**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "config")},
            cwd=project,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    assert result.returncode == 3, result.stderr.decode()
    assert result.stderr.decode() == (
        "coding-agent: error: blocked the write call (.mcp.json): it needs approval in every "
        f"mode but auto: {REASONS['.mcp.json']} ({project / '.mcp.json'}), and -p/--json asks "
        "nobody; allow it with --approve allow or --permission-mode auto\n"
    )
    assert (project / "notes.txt").read_text() == "x\n"
    assert not (project / ".mcp.json").exists()
