"""What file history costs on disk (issue 38, item 9): contents once per project, and a ``bash``
snapshot copies only what git does not already hold, within caps it names when rewinding.

The first three run the real worker (a session host over JSONL storage, the faux model driving
the real ``bash`` tool, the tree service called as a TUI calls it) and measure the bytes file
history stored: every file under the session's ``file-history`` folder and under the state
folder's ``coding-agent/projects``. The rest drive :class:`FileHistory` on real folders and
real git repositories.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from chord.remote import ServiceCall
from coding_agent.session_files.folders import Session, create_session
from coding_agent.session_files.tree import path_prompts
from coding_agent.worker.file_history import FileHistory
from coding_agent.worker.main import SessionRuntime, WorkerConfig, open_session_host

pytestmark = pytest.mark.anyio

TREE = "coding-agent.session-tree"
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(repo: Path, *args: str) -> None:
    env = {**os.environ, "HOME": str(repo.parent), "GIT_CONFIG_NOSYSTEM": "1"}
    identity = ("-c", "user.email=t@example.com", "-c", "user.name=t")
    subprocess.run(["git", *identity, *args], cwd=repo, env=env, check=True, capture_output=True)


def commit_all(repo: Path) -> None:
    git(repo, "init", "-q", ".")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")


def fill(folder: Path, count: int, size: int) -> int:
    """``count`` files of ``size`` distinct bytes under ``folder``; returns the bytes written."""
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        line = f"file {number:04d} ".encode()
        (folder / f"f{number:03d}.txt").write_bytes((line * (size // len(line) + 1))[:size])
    return count * size


def stored(session: Session) -> tuple[int, int]:
    """(bytes, files) file history keeps: every session's ``file-history`` folder and the
    projects' shared stores (nothing else of the state folder)."""
    sessions = session.path.parent
    places = [sessions / name / "file-history" for name in os.listdir(sessions)]
    places.append(sessions.parent / "projects")
    total = files = 0
    for place in places:
        for folder, _dirs, names in os.walk(place):
            for name in names:
                total += os.lstat(os.path.join(folder, name)).st_size
                files += 1
    return total, files


def bash(command: str) -> list[dict[str, Any]]:
    call = {"name": "bash", "arguments": {"command": command}}
    return [{"text": "Running it.", "toolCalls": [call]}, {"text": "Ran it."}]


async def call(runtime: SessionRuntime, method: str, *args: Any) -> Any:
    return await runtime.host.services.invoke(ServiceCall(TREE, method, args), BACKGROUND)


async def run_once(
    session: Session, tmp_path: Path, command: str, then: str = "plan"
) -> list[dict[str, Any]]:
    """Run ``command`` through the worker's ``bash`` in one turn; then return the rewind plan to
    before that turn (``then="rewind"``: and rewind the files, keeping every conflict)."""
    script = tmp_path / f"script-{session.id}.json"
    script.write_text(json.dumps(bash(command)))
    config = WorkerConfig(session, faux_script=script, permission_mode="auto", fsync=False)
    async with open_session_host(config) as runtime:
        root = (await runtime.harness.harness.root(BACKGROUND)).id
        handle = await runtime.harness.conversation(root, BACKGROUND)
        assert handle is not None
        sent = await handle.send("run it", BACKGROUND)
        with anyio.fail_after(120):
            await sent.wait(BACKGROUND)
            await handle.wait_for_idle(BACKGROUND)
        outline = await call(runtime, "outline")
        first = path_prompts(outline, root)[0]["id"]
        plan: list[dict[str, Any]] = await call(runtime, "rewind_plan", root, first)
        if then == "rewind":
            await call(runtime, "rewind", root, first, "files", [])
        return plan


def actions(plan: list[dict[str, Any]], project: Path) -> dict[str, str]:
    return {os.path.relpath(p["path"], project): p["action"] for p in plan}


@needs_git
async def test_the_first_bash_command_in_a_checkout_stores_far_less_than_the_checkout(
    session: Session, tmp_path: Path
) -> None:
    project = session.cwd
    size = fill(project / "src", 160, 25_000)  # a 4 MB checkout
    commit_all(project)
    (project / "README.md").write_text("edited since the commit\n")  # not what git holds
    pristine = (project / "src" / "f000.txt").read_bytes()
    gone = (project / "src" / "f001.txt").read_bytes()
    command = (
        "echo changed > main.py; echo more >> src/f000.txt; rm src/f001.txt; "
        "echo again > README.md; echo new > made.txt"
    )
    plan = await run_once(session, tmp_path, command, then="rewind")

    assert actions(plan, project) == {
        "main.py": "restore",
        "src/f000.txt": "restore",
        "src/f001.txt": "restore",
        "README.md": "restore",
        "made.txt": "delete",
    }
    total, _files = stored(session)
    # The changed files' earlier contents (two of 25 kB, a few small ones) and the journal:
    # far below the checkout (the old snapshot copied all of it, more than 4 MB).
    assert total < size / 50, f"{total} bytes stored for a {size}-byte checkout"
    # ... and every file the command changed is back.
    assert (project / "main.py").read_text() == "print('hello')\n"
    assert (project / "src" / "f000.txt").read_bytes() == pristine
    assert (project / "src" / "f001.txt").read_bytes() == gone
    assert (project / "README.md").read_text() == "edited since the commit\n"
    assert not (project / "made.txt").exists()


@needs_git
async def test_the_real_binary_stores_only_what_a_bash_command_changed_in_a_checkout(
    project: Path, agent_env: dict[str, str], tmp_path: Path
) -> None:
    """``coding-agent --approve allow -p`` in a 4 MB checkout, as a user would run it."""
    size = fill(project / "src", 160, 25_000)
    commit_all(project)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(bash("echo more >> src/f000.txt")))
    binary = Path(sys.executable).with_name("coding-agent")
    command = [str(binary), "--faux-script", str(script), "--approve", "allow", "-p", "run it"]
    with anyio.fail_after(120):
        done = await anyio.run_process(
            command, env=agent_env, cwd=project, check=False, stdin=subprocess.DEVNULL
        )
    assert done.returncode == 0, done.stderr.decode()
    assert (project / "src" / "f000.txt").read_bytes().endswith(b"more\n")
    state = Path(agent_env["XDG_STATE_HOME"]) / "coding-agent"
    (session_folder,) = (state / "sessions").iterdir()
    journal = session_folder / "file-history" / "journal.jsonl"
    (line,) = journal.read_bytes().splitlines()
    assert json.loads(line)["tool"] == "bash"
    (blob,) = (state / "projects").glob("*/file-history/blobs/*")  # f000.txt's earlier content
    assert blob.stat().st_size == 25_000 < size / 100
    assert not (session_folder / "file-history" / "blobs").exists()


async def test_two_sessions_of_a_project_share_its_contents(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    project = session.cwd  # no git repository here: the first snapshot copies the files
    size = fill(project / "data", 40, 10_000)
    await run_once(session, tmp_path, "echo first > main.py")
    first_total, first_files = stored(session)
    assert first_total > size  # the project's files, once
    assert not (session.path / "file-history" / "blobs").exists()  # not in the session folder

    second = create_session(project, env=agent_env)
    plan = await run_once(second, tmp_path, "echo second > main.py", then="rewind")
    assert actions(plan, project) == {"main.py": "restore"}
    total, files = stored(second)
    assert not (second.path / "file-history" / "blobs").exists()
    # The new journal, and two small contents: main.py as the first session's command left it
    # (its snapshot copied it) and as the second's did (the rewind keeps it, to be undone).
    # Every other content the snapshot met was in the project's store already.
    new_journal = (second.path / "file-history" / "journal.jsonl").stat().st_size
    added = len("first\n") + len("second\n")
    assert (total - first_total, files - first_files) == (new_journal + added, 3)
    assert (project / "main.py").read_text() == "first\n"  # rewound from the shared store


async def test_a_changed_file_over_the_cap_is_named_and_left_as_it_is(
    session: Session, tmp_path: Path
) -> None:
    project = session.cwd
    big = project / "big.bin"
    big.write_bytes(b"\x01" * (1024 * 1024 + 1))  # over the 1 MiB cap, and not in git
    plan = await run_once(session, tmp_path, "echo x >> big.bin; echo y >> main.py", "rewind")

    assert actions(plan, project) == {"big.bin": "lost", "main.py": "restore"}
    (lost,) = [p for p in plan if p["action"] == "lost"]
    assert "not kept" in lost["detail"]
    assert big.stat().st_size == 1024 * 1024 + 3  # left as the command made it
    assert (project / "main.py").read_text() == "print('hello')\n"
    total, _files = stored(session)
    assert total < 1024 * 1024


def test_a_run_copies_at_most_its_session_cap_and_names_the_rest(tmp_path: Path) -> None:
    project = tmp_path / "project"
    fill(project, 5, 100)
    history = FileHistory(tmp_path / "history", blobs=tmp_path / "shared", session_cap=250)
    before = history.snapshot(project)
    assert before is not None
    assert history.copied == 200 and len(os.listdir(tmp_path / "shared")) == 2
    for path in project.iterdir():
        path.write_text("changed\n")
    after = history.snapshot(project, keep=False)
    assert after is not None
    history.record_changes(before, after, conversation=1, anchor=5)
    plan = history.plan({1: None}, 4)
    assert [(Path(p.path).name, p.action) for p in plan] == [
        ("f000.txt", "restore"),
        ("f001.txt", "restore"),
        ("f002.txt", "lost"),
        ("f003.txt", "lost"),
        ("f004.txt", "lost"),
    ]


@needs_git
def test_a_content_git_no_longer_holds_is_named_not_restored(tmp_path: Path) -> None:
    project = tmp_path / "project"
    fill(project, 2, 1000)
    commit_all(project)
    history = FileHistory(tmp_path / "history", blobs=tmp_path / "shared")
    before = history.snapshot(project)
    assert before is not None and history.copied == 0  # git holds both
    assert not (tmp_path / "shared").exists()
    shutil.rmtree(project / ".git")  # what the command did, with a change to a tracked file
    (project / "f000.txt").write_text("changed\n")
    after = history.snapshot(project, keep=False)
    assert after is not None
    history.record_changes(before, after, conversation=1, anchor=5)
    (plan,) = history.plan({1: None}, 4)
    assert (Path(plan.path).name, plan.action) == ("f000.txt", "lost")
    assert history.restore([plan], conversation=1, anchor=6) == ([], [plan.path])
    assert (project / "f000.txt").read_text() == "changed\n"


def test_a_session_of_the_older_layout_still_rewinds(tmp_path: Path) -> None:
    """Blobs an older version kept in the session folder are still found there."""
    target = tmp_path / "notes.txt"
    target.write_text("old\n")
    older = FileHistory(tmp_path / "history")  # the old layout: blobs beside the journal
    older.record(target, b"new\n", conversation=1, anchor=5, tool="write")
    target.write_text("new\n")
    assert (tmp_path / "history" / "blobs").is_dir()

    history = FileHistory(tmp_path / "history", blobs=tmp_path / "shared")
    (plan,) = history.plan({1: None}, 4)
    assert plan.action == "restore"
    history.restore([plan], conversation=1, anchor=6)
    assert target.read_text() == "old\n"
