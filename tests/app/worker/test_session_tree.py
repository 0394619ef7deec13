"""The worker's session tree service: pre-images of writes and edits, rewind, branches, labels.

Everything runs in a real session host over JSONL storage with the faux model driving the real
``write`` and ``edit`` tools (permission mode ``auto``), and the service is called through the
host's service registry, exactly as a TUI's call arrives.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from chord.remote import ServiceCall
from coding_agent.session_files.folders import Session
from coding_agent.session_files.tree import build_tree, path_prompts
from coding_agent.worker.file_history import FileHistory
from coding_agent.worker.main import SessionRuntime, WorkerConfig, open_session_host

pytestmark = pytest.mark.anyio

TREE = "coding-agent.session-tree"


def _write(path: str, content: str) -> dict[str, Any]:
    return {"name": "write", "arguments": {"path": path, "content": content}}


def _edit(path: str, old: str, new: str) -> dict[str, Any]:
    return {
        "name": "edit",
        "arguments": {"path": path, "edits": [{"oldText": old, "newText": new}]},
    }


STEPS = [
    {"text": "Writing notes.", "toolCalls": [_write("notes.txt", "one\n")]},
    {"text": "Wrote notes."},
    {"text": "Reading.", "toolCalls": [{"name": "read", "arguments": {"path": "main.py"}}]},
    {
        "text": "Editing.",
        "toolCalls": [_edit("notes.txt", "one", "two"), _edit("main.py", "hello", "bye")],
    },
    {"text": "Edited."},
    {"text": "A third answer."},
]


async def call(runtime: SessionRuntime, method: str, *args: Any) -> Any:
    return await runtime.host.services.invoke(ServiceCall(TREE, method, args), BACKGROUND)


async def prompt(runtime: SessionRuntime, conversation: int, text: str) -> None:
    handle = await runtime.harness.conversation(conversation, BACKGROUND)
    assert handle is not None
    sent = await handle.send(text, BACKGROUND)
    with anyio.fail_after(60):
        await sent.wait(BACKGROUND)
        await handle.wait_for_idle(BACKGROUND)


def config(session: Session, tmp_path: Path) -> WorkerConfig:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(STEPS))
    return WorkerConfig(
        session, faux_script=script, permission_mode="auto", fsync=False, installed_features=True
    )


async def test_rewind_restores_files_and_branches_the_conversation(
    session: Session, tmp_path: Path
) -> None:
    project = session.cwd
    async with open_session_host(config(session, tmp_path)) as runtime:
        root = (await runtime.harness.harness.root(BACKGROUND)).id
        await prompt(runtime, root, "write the notes")
        await prompt(runtime, root, "now edit them")
        await prompt(runtime, root, "third")
        assert (project / "notes.txt").read_text() == "two\n"
        assert (project / "main.py").read_text() == "print('bye')\n"
        outline = await call(runtime, "outline")
        prompts = path_prompts(outline, root)
        assert [p["text"] for p in prompts] == ["write the notes", "now edit them", "third"]
        assert prompts[0]["model"] == "faux/faux-1"
        second = prompts[1]["id"]

        plan = await call(runtime, "rewind_plan", root, second)
        assert {(Path(p["path"]).name, p["action"]) for p in plan} == {
            ("notes.txt", "restore"),
            ("main.py", "restore"),
        }
        (project / "main.py").write_text("print('changed by hand')\n")
        plan = await call(runtime, "rewind_plan", root, second)
        assert {(Path(p["path"]).name, p["action"]) for p in plan} == {
            ("notes.txt", "restore"),
            ("main.py", "conflict"),
        }
        result = await call(runtime, "rewind", root, second, "both", [])
        assert (project / "notes.txt").read_text() == "one\n"
        assert (project / "main.py").read_text() == "print('changed by hand')\n"
        assert [Path(p).name for p in result["kept"]] == ["main.py"]
        branch = result["conversation"]
        assert branch != root
        outline = await call(runtime, "outline")
        assert [p["text"] for p in path_prompts(outline, branch)] == ["write the notes"]
        # The branch left behind is intact, summarised, and the new branch hangs under the
        # prompt whose turn it continues.
        assert [p["text"] for p in path_prompts(outline, root)][-1] == "third"
        (tree,) = build_tree(outline)
        assert tree.summary == "write the notes"
        first_prompt = tree.children[0]
        assert [c.conversation_id for c in first_prompt.children] == [branch]

        # Rewinding to the first prompt, overwriting the conflict this time: the files are as
        # they were before the session began (notes.txt did not exist).
        result = await call(
            runtime,
            "rewind",
            root,
            prompts[0]["id"],
            "files",
            [str((project / "main.py").resolve())],
        )
        assert not (project / "notes.txt").exists()
        assert (project / "main.py").read_text() == "print('hello')\n"
        assert result["conversation"] == root


async def test_conversation_only_rewind_to_the_first_prompt_keeps_the_settings(
    session: Session, tmp_path: Path
) -> None:
    async with open_session_host(config(session, tmp_path)) as runtime:
        root = (await runtime.harness.harness.root(BACKGROUND)).id
        await prompt(runtime, root, "write the notes")
        outline = await call(runtime, "outline")
        first = path_prompts(outline, root)[0]["id"]
        result = await call(runtime, "rewind", root, first, "conversation", [])
        assert (session.cwd / "notes.txt").read_text() == "one\n"  # files untouched
        branch = result["conversation"]
        handle = await runtime.harness.conversation(branch, BACKGROUND)
        assert handle is not None
        assert (await handle.config(BACKGROUND))["model"] == {
            "provider": "faux",
            "modelId": "faux-1",
        }
        outline = await call(runtime, "outline")
        assert path_prompts(outline, branch) == []
        (tree,) = build_tree(outline)
        # rewound to the start: drawn at the start, before the prompts, numbered 2 (made second)
        assert tree.children[0].kind == "branch" and tree.children[0].conversation_id == branch
        assert [c.kind for c in tree.children[1:]] == ["prompt"]
        assert (tree.number, tree.children[0].number) == (1, 2)


async def test_rewinding_a_fork_to_the_first_prompt_draws_the_branch_at_the_start(
    session: Session, tmp_path: Path
) -> None:
    """/fork, then /rewind (conversation only) to the session's first prompt: the first prompt
    is the root branch's, so the new branch starts there (not under the fork, which hangs after
    the last prompt)."""
    async with open_session_host(config(session, tmp_path)) as runtime:
        root = (await runtime.harness.harness.root(BACKGROUND)).id
        await prompt(runtime, root, "write the notes")
        await prompt(runtime, root, "now edit them")
        handle = await runtime.harness.conversation(root, BACKGROUND)
        assert handle is not None
        newest = (await handle.entries(BACKGROUND, limit=1))[0].id
        fork = (await handle.fork(newest, BACKGROUND)).id  # what /fork does
        outline = await call(runtime, "outline")
        first = path_prompts(outline, fork)[0]
        assert first["text"] == "write the notes"
        result = await call(runtime, "rewind", fork, first["id"], "conversation", [])
        branch = result["conversation"]
        outline = await call(runtime, "outline")
        assert path_prompts(outline, branch) == []
        (tree,) = build_tree(outline)
        assert tree.children[0].kind == "branch" and tree.children[0].conversation_id == branch
        assert tree.children[0].number == 3  # made third: root 1, the fork 2
        assert [c.kind for c in tree.children[1:]] == ["prompt", "prompt"]
        assert [c.conversation_id for c in tree.children[-1].children] == [fork]
        # Neither has a prompt of its own: the pickers say what each continues from.
        summaries = {c["id"]: c["summary"] for c in outline["conversations"]}
        assert summaries == {
            root: "write the notes",
            fork: "no prompt yet · after “now edit them”",
            branch: "no prompt yet · from the start",
        }


async def test_branch_and_label(session: Session, tmp_path: Path) -> None:
    async with open_session_host(config(session, tmp_path)) as runtime:
        root = (await runtime.harness.harness.root(BACKGROUND)).id
        await prompt(runtime, root, "write the notes")
        await prompt(runtime, root, "now edit them")
        outline = await call(runtime, "outline")
        first = path_prompts(outline, root)[0]
        assert await call(runtime, "branch", root, path_prompts(outline, root)[-1]["end"]) == root
        fork = await call(runtime, "branch", root, first["end"])
        assert fork != root
        target = await call(runtime, "label", fork, 0, "checkpoint A")
        assert target == first["end"]
        outline = await call(runtime, "outline")
        assert outline["labels"] == {str(first["end"]): "checkpoint A"}
        (tree,) = build_tree(outline)
        assert tree.children[0].label == "checkpoint A"
        assert [c.conversation_id for c in tree.children[0].children] == [fork]


def test_a_torn_journal_line_is_ignored_and_blobs_are_deduplicated(tmp_path: Path) -> None:
    history = FileHistory(tmp_path / "history")
    target = tmp_path / "file.txt"
    target.write_text("same\n")
    history.record(target, b"x", conversation=1, anchor=5, tool="write")
    history.record(target, b"y", conversation=1, anchor=6, tool="write")  # same pre-image
    assert len(list(history.blobs.iterdir())) == 1
    modes = {p.name: p.stat().st_mode & 0o777 for p in [history.blobs, *history.blobs.iterdir()]}
    assert modes == {"blobs": 0o700, next(history.blobs.iterdir()).name: 0o600}
    assert history.journal_path.stat().st_mode & 0o777 == 0o600
    with open(history.journal_path, "ab") as journal:
        journal.write(b'{"seq": 3, "conversa')
    assert [c.seq for c in history.changes()] == [1, 2]


BASH_STEPS = [
    {
        "text": "Running a command.",
        "toolCalls": [
            {
                "name": "bash",
                "arguments": {
                    "command": "echo changed > main.py; echo new > made.txt; rm README.md; "
                    "echo more >> build.log"
                },
            }
        ],
    },
    {"text": "Ran it."},
]


async def test_files_a_bash_command_changed_are_rewound_except_ignored_ones(
    session: Session, tmp_path: Path
) -> None:
    project = session.cwd
    (project / ".gitignore").write_text("*.log\n")
    (project / "build.log").write_text("old log\n")
    readme = (project / "README.md").read_text()
    script = tmp_path / "bash.json"
    script.write_text(json.dumps(BASH_STEPS))
    config = WorkerConfig(session, faux_script=script, permission_mode="auto", fsync=False)
    async with open_session_host(config) as runtime:
        root = (await runtime.harness.harness.root(BACKGROUND)).id
        await prompt(runtime, root, "run it")
        assert (project / "main.py").read_text() == "changed\n"
        assert not (project / "README.md").exists()
        outline = await call(runtime, "outline")
        first = path_prompts(outline, root)[0]["id"]
        plan = await call(runtime, "rewind_plan", root, first)
        assert {(Path(p["path"]).name, p["action"]) for p in plan} == {
            ("main.py", "restore"),
            ("made.txt", "delete"),
            ("README.md", "restore"),
        }
        await call(runtime, "rewind", root, first, "files", [])
    assert (project / "main.py").read_text() == "print('hello')\n"
    assert not (project / "made.txt").exists()
    assert (project / "README.md").read_text() == readme
    assert (project / "build.log").read_text() == "old log\nmore\n"  # ignored: not tracked
