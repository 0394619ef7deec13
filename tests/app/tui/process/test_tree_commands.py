"""``/rewind`` (files only, conversation only, both with conflicts; Esc Esc), ``/tree`` and
``/label`` in the real TUI against a real worker, driven with Textual's Pilot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Tree

from chord.textual import ConfirmScreen
from coding_agent.session_files.folders import Session
from coding_agent.supervisor import WorkerSupervisor
from coding_agent.tui.commands.tree import TreeScreen

pytestmark = pytest.mark.anyio


def _write(path: str, content: str) -> dict[str, Any]:
    return {"name": "write", "arguments": {"path": path, "content": content}}


def _edit(path: str, old: str, new: str) -> dict[str, Any]:
    return {
        "name": "edit",
        "arguments": {"path": path, "edits": [{"oldText": old, "newText": new}]},
    }


def keeper(kit: Any, session: Session, agent_env: dict[str, str], steps: Any, tmp_path: Path):
    return WorkerSupervisor(
        session,
        exit_with_parent=True,
        env=agent_env,
        faux_script=kit.script(tmp_path, steps),
        permission_mode="auto",
    )


def user_texts(kit: Any, app: Any) -> list[str]:
    out = []
    for entry in kit.entries(app):
        if entry["kind"] == "pi.user":
            content = entry["model"][0]["content"]
            out.append(content if isinstance(content, str) else content[0]["text"])
    return out


async def turn(kit: Any, pilot: Any, text: str, answer: str) -> None:
    app = kit.app_of(pilot)
    await pilot.press(*text, "enter")
    await kit.wait_for(pilot, lambda: answer in kit.assistant_texts(app), f"the answer {answer!r}")
    await kit.wait_for(pilot, lambda: kit.idle(app), "the turn to end")


async def choose(kit: Any, pilot: Any, title: str, downs: int) -> None:
    app = kit.app_of(pilot)
    await kit.wait_for(
        pilot, lambda: kit.picker_open(app, title), f"the picker {title!r} ({kit.toasts(app)})"
    )
    await pilot.press(*(["down"] * downs), "enter")


async def confirm(kit: Any, pilot: Any, key: str) -> str:
    app = kit.app_of(pilot)
    await kit.wait_for(pilot, lambda: kit.dialog_ready(app, ConfirmScreen), "a conflict dialog")
    dialog = app.screen
    title = str(dialog.query_one(".title").render())
    await pilot.press(*{"y": ["1", "enter"], "n": ["2", "enter"]}[key])
    await kit.wait_for(pilot, lambda: app.screen is not dialog, "it to close")
    return title


REWIND_STEPS = [
    {"text": "Writing.", "toolCalls": [_write("a.txt", "one\n"), _write("b.txt", "bee\n")]},
    {"text": "First done."},
    {"text": "Editing.", "toolCalls": [_edit("a.txt", "one", "two")]},
    {"text": "Second done."},
]


async def test_rewind_files_only_conversation_only_and_both_with_conflicts(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    project = session.cwd
    a, b = project / "a.txt", project / "b.txt"
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        client = app.client
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        root = client.conversation_id
        await turn(kit, pilot, "first", "First done.")
        await turn(kit, pilot, "second", "Second done.")
        assert a.read_text() == "two\n"

        # 1. Files only, to before "second": a.txt is back, the conversation stays.
        await pilot.press(*"/rewind", "enter")
        await choose(kit, pilot, "Rewind to before which prompt?", 0)
        await choose(kit, pilot, "Rewind what?", 2)
        await kit.wait_for(pilot, lambda: a.read_text() == "one\n", "a.txt restored")
        await kit.wait_for(pilot, lambda: any("restored" in m for _, m in kit.toasts(app)), "toast")
        assert client.conversation_id == root
        assert user_texts(kit, app) == ["first", "second"]
        assert b.read_text() == "bee\n"

        # 2. Conversation only (Esc Esc on the empty editor), to before "first": a new, empty
        # branch, the prompt back in the editor, the files untouched.
        await pilot.press("escape", "escape")
        await choose(kit, pilot, "Rewind to before which prompt?", 1)
        await choose(kit, pilot, "Rewind what?", 1)
        await kit.wait_for(pilot, lambda: client.conversation_id != root, "the new branch")
        await kit.wait_for(pilot, lambda: kit.idle(app) and user_texts(kit, app) == [], "empty")
        seen["editor"] = app.editor.text
        assert a.read_text() == "one\n" and b.read_text() == "bee\n"
        app.editor.load_text("")

        # 3. Back to the branch left (Ctrl+B), change both files by hand, and rewind both to
        # before "first": a.txt is kept (Keep), b.txt is overwritten (it did not exist).
        await pilot.press("ctrl+b")
        await kit.wait_for(pilot, lambda: client.conversation_id == root, "back on the root")
        await kit.wait_for(pilot, lambda: user_texts(kit, app) == ["first", "second"], "root view")
        a.write_text("by hand a\n")
        b.write_text("by hand b\n")
        await pilot.press(*"/rewind", "enter")
        await choose(kit, pilot, "Rewind to before which prompt?", 1)
        await choose(kit, pilot, "Rewind what?", 0)
        seen["conflicts"] = [await confirm(kit, pilot, "n"), await confirm(kit, pilot, "y")]
        await kit.wait_for(pilot, lambda: not b.exists(), "b.txt removed")
        await kit.wait_for(pilot, lambda: client.conversation_id not in (root, None), "branch")
        await kit.wait_for(pilot, lambda: any("1 kept" in m for _, m in kit.toasts(app)), "toast")
        assert a.read_text() == "by hand a\n"

    await kit.drive(session, keeper(kit, session, agent_env, REWIND_STEPS, tmp_path), test)
    assert seen["editor"] == "first"
    assert seen["conflicts"] == ["Conflict: a.txt", "Conflict: b.txt"]


async def test_rewind_offers_only_the_conversation_when_no_file_changed(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    """It said "The agent changed no files since then." above "Conversation and files" and
    "Files only": choices that restore nothing."""
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        client = app.client
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        root = client.conversation_id
        await turn(kit, pilot, "just talk", "Answer one.")
        await pilot.press(*"/rewind", "enter")
        await choose(kit, pilot, "Rewind to before which prompt?", 0)
        await kit.wait_for(pilot, lambda: kit.picker_open(app, "Rewind what?"), "the modes")
        seen["options"] = kit.options(app)
        await pilot.press("enter")
        await kit.wait_for(pilot, lambda: client.conversation_id not in (root, None), "branch")
        await kit.wait_for(pilot, lambda: kit.idle(app) and user_texts(kit, app) == [], "empty")
        seen["editor"] = app.editor.text

    await kit.drive(
        session, keeper(kit, session, agent_env, [{"text": "Answer one."}], tmp_path), test
    )
    assert seen["options"] == ["Conversation (no file to restore)"]
    assert seen["editor"] == "just talk"


TREE_STEPS = [{"text": "Answer one."}, {"text": "Answer two."}]


def tree_ready(app: Any) -> bool:
    """Whether the /tree screen is mounted, filled and focused (its keys reach the tree): the
    screen is on the stack before its ``on_mount`` fills the tree, and a pause is no proof
    that the mount ran on a loaded machine."""
    screen = app.screen
    if not isinstance(screen, TreeScreen):
        return False
    trees = screen.query(Tree)
    return bool(trees) and bool(trees.first().root.children) and screen.focused is trees.first()


def tree_lines(app: Any) -> list[str]:
    tree = app.screen.query_one(Tree)
    lines: list[str] = []

    def walk(node: Any, depth: int) -> None:
        for child in node.children:
            lines.append("  " * depth + str(child.label))
            walk(child, depth + 1)

    walk(tree.root, 0)
    return lines


async def test_tree_continues_from_an_earlier_prompt_and_goes_back(
    kit: Any,
    session: Session,
    agent_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", agent_env["XDG_STATE_HOME"])  # /sessions finds it
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        client = app.client
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        root = client.conversation_id
        await turn(kit, pilot, "alpha", "Answer one.")
        await pilot.press(*"/label checkpoint", "enter")
        await kit.wait_for(pilot, lambda: any("Labelled" in m for _, m in kit.toasts(app)), "label")
        await turn(kit, pilot, "beta", "Answer two.")

        await pilot.press(*"/tree", "enter")
        await kit.wait_for(pilot, lambda: tree_ready(app), "the tree")
        seen["before"] = tree_lines(app)
        # The cursor starts on this branch; the first prompt is one row down.
        await pilot.press("down", "enter")
        await kit.wait_for(pilot, lambda: client.conversation_id != root, "the new branch")
        await kit.wait_for(pilot, lambda: kit.idle(app) and user_texts(kit, app) == ["alpha"], "")
        branch = client.conversation_id
        await turn(kit, pilot, "gamma", "Answer two.")  # the faux model answers by position
        await pilot.press(*"/tree", "enter")
        await kit.wait_for(pilot, lambda: tree_ready(app), "the tree again")
        seen["after"] = tree_lines(app)
        await pilot.press("b")  # back to the branch left
        await kit.wait_for(pilot, lambda: client.conversation_id == root, "back on the root")
        await kit.wait_for(pilot, lambda: user_texts(kit, app) == ["alpha", "beta"], "root view")
        # Branches are numbered as users see them: 1, 2, 3 in creation order (not internal ids).
        assert branch != 2, "the branch's internal id differs from its number (else moot)"
        await pilot.press(*"/branch 2", "enter")
        await kit.wait_for(pilot, lambda: client.conversation_id == branch, "/branch N")
        # /resume addresses a branch as /tree shows it ("branch N", or "#N"): never a session id.
        await pilot.press(*"/resume branch 1", "enter")
        await kit.wait_for(pilot, lambda: client.conversation_id == root, "/resume branch N")
        await kit.wait_for(pilot, lambda: user_texts(kit, app) == ["alpha", "beta"], "root again")
        await pilot.press(*"/resume #2", "enter")
        await kit.wait_for(pilot, lambda: client.conversation_id == branch, "/resume #N")
        await pilot.press(*"/resume branch 999", "enter")
        await kit.wait_for(
            pilot, lambda: any("no branch 999" in m for _, m in kit.toasts(app)), "unknown branch"
        )
        assert client.conversation_id == branch
        assert not any("Resuming session" in m for _, m in kit.toasts(app))  # same session
        # The picker lists this session's branches under it; choosing one switches to it.
        await pilot.press(*"/sessions", "enter")
        await kit.wait_for(
            pilot, lambda: kit.picker_open(app, "Sessions of"), f"the picker {kit.toasts(app)}"
        )
        seen["picker"] = kit.options(app)
        await pilot.press("down", "enter")  # the row under the session: its first branch
        await kit.wait_for(pilot, lambda: client.conversation_id == root, "the picked branch")
        seen["root"], seen["branch"] = root, branch

    keep = keeper(kit, session, agent_env, TREE_STEPS, tmp_path)
    await kit.drive(session, keep, test)
    before, after = seen["before"], seen["after"]
    mine, *rows = seen["picker"]
    assert mine.startswith(session.id) and "2 branches" in mine
    assert [r.strip().split(" — ")[0] for r in rows] == ["⎇ branch 1", "⎇ branch 2"]
    assert "alpha" in rows[0]  # a branch left shows its summary
    assert "gamma" in rows[1]  # a branch never left too: its first prompt
    assert before[0].startswith("● branch 1")
    assert "alpha" in before[1] and "faux/faux-1" in before[1] and "[checkpoint]" in before[1]
    assert "beta" in before[2]
    # After continuing from "alpha": the new branch hangs under it, the old one is summarised.
    assert after[0].startswith("⎇ branch 1 — alpha")
    assert after[2].strip().startswith("● branch 2 — gamma")
    assert "gamma" in after[3]
    assert "beta" in after[4]


async def test_ctrl_b_after_fork_returns_to_the_branch_forked_from(
    kit: Any, session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}

    async def test(pilot: Any) -> None:
        app = kit.app_of(pilot)
        client = app.client
        await kit.wait_for(pilot, lambda: kit.idle(app), "the conversation view")
        root = client.conversation_id
        await turn(kit, pilot, "alpha", "Answer one.")
        await pilot.press(*"/fork", "enter")
        await kit.wait_for(pilot, lambda: client.conversation_id not in (root, None), "the fork")
        await kit.wait_for(
            pilot, lambda: any(m.startswith("Forked:") for _, m in kit.toasts(app)), "toast"
        )
        seen["toast"] = next(m for _, m in kit.toasts(app) if m.startswith("Forked:"))
        await kit.wait_for(pilot, lambda: kit.idle(app), "the fork's view")
        await pilot.press("ctrl+b")
        await kit.wait_for(pilot, lambda: client.conversation_id == root, "back on the parent")
        await kit.wait_for(
            pilot, lambda: any("Back on branch 1" in m for _, m in kit.toasts(app)), "back toast"
        )

    await kit.drive(session, keeper(kit, session, agent_env, TREE_STEPS, tmp_path), test)
    assert seen["toast"] == "Forked: now on branch 2 (Ctrl+B goes back)"
