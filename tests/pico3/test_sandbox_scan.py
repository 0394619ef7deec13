"""pico3.sandbox_scan: the entries that run code, found in a project's folders.

What the sandbox binds read-only beyond the project's top: the named entries two folders down,
wherever they are, and nothing it must not walk into. Looking again reads only the folders that
changed, and whatever changed, a look finds what a fresh walk of the tree finds.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pico3 import entry_identities, planted_entries, sandbox_scan
from pico3.sandbox_scan import SCAN_DEPTH, find_entries

NAMES = (".git", ".vscode", ".claude", ".mcp.json")


def found(tree: Path) -> list[str]:
    return sorted(os.path.relpath(p, tree) for p in find_entries(tree, NAMES))


def test_what_a_command_planted_is_what_appeared_with_something_in_it(tmp_path: Path) -> None:
    """Between two looks: a new file, a new folder with something in it and a new link are
    named, in the second look's order; a new empty folder runs nothing and is not; what was
    there before is not, whatever happened to it."""
    (tmp_path / "api" / ".vscode").mkdir(parents=True)
    before = entry_identities(found_paths(tmp_path))
    (tmp_path / "api" / ".vscode" / "tasks.json").write_text("{}")  # was there: not named
    (tmp_path / "web" / ".vscode").mkdir(parents=True)
    (tmp_path / "web" / ".vscode" / "tasks.json").write_text("{}")
    (tmp_path / "web" / ".claude").mkdir()  # empty: runs nothing
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / ".mcp.json").write_text("{}")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / ".git").symlink_to(tmp_path / "elsewhere")  # dangling, still planted
    after = found_paths(tmp_path)
    made = [os.path.relpath(p, tmp_path) for p in planted_entries(before, after)]
    assert sorted(made) == ["docs/.git", "lib/.mcp.json", "web/.vscode"]
    assert planted_entries(entry_identities(after), after) == []


def test_an_entry_replaced_under_a_moved_folder_is_planted_the_moved_one_is_not(
    tmp_path: Path,
) -> None:
    """``mv sub sub_orig && git init sub``: the path ``sub/.git`` was there before, but the
    entry now there is a new one; ``sub_orig/.git`` is a new path but the same entry, moved."""
    (tmp_path / "sub" / ".git").mkdir(parents=True)
    (tmp_path / "sub" / ".git" / "config").write_text("[core]\n")
    before = entry_identities(found_paths(tmp_path))
    (tmp_path / "sub").rename(tmp_path / "sub_orig")
    (tmp_path / "sub" / ".git").mkdir(parents=True)
    (tmp_path / "sub" / ".git" / "config").write_text("[core]\n\tfsmonitor = evil\n")
    made = planted_entries(before, found_paths(tmp_path))
    assert [os.path.relpath(p, tmp_path) for p in made] == ["sub/.git"]


def test_a_placeholder_removed_while_it_is_looked_at_is_not_planted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox's placeholder ``.claude`` (an empty folder) is removed by its watcher as the
    command ends, possibly between the look's ``isdir`` and its listing: gone is nothing there
    (it was named "planted" under load, the listing's error read as "unreadable"). A file put
    in its place still counts."""
    placeholder = tmp_path / ".claude"
    real_scandir = os.scandir

    def removed_meanwhile(path: str) -> object:
        if path == str(placeholder) and placeholder.is_dir():
            placeholder.rmdir()  # the watcher, just before the listing
        return real_scandir(path)

    monkeypatch.setattr(sandbox_scan.os, "scandir", removed_meanwhile)
    placeholder.mkdir()
    assert planted_entries({}, [str(placeholder)]) == []
    assert not sandbox_scan.holds_something(str(placeholder))

    def replaced_meanwhile(path: str) -> object:
        if path == str(placeholder) and placeholder.is_dir():
            placeholder.rmdir()
            placeholder.write_text("planted")  # a file now: the next look's business, counted
        return real_scandir(path)

    monkeypatch.setattr(sandbox_scan.os, "scandir", replaced_meanwhile)
    placeholder.mkdir()
    assert sandbox_scan.holds_something(str(placeholder))

    # removed right after it was seen to exist, before it is seen to be a folder: gone, not
    # a file (the look decides from one lstat)
    monkeypatch.setattr(sandbox_scan.os, "scandir", real_scandir)
    placeholder.unlink()
    placeholder.mkdir()
    real_lexists, real_lstat = os.path.lexists, os.lstat

    def exists_then_gone(path: str) -> bool:
        found = real_lexists(path)
        if path == str(placeholder) and placeholder.is_dir():
            placeholder.rmdir()
        return found

    def lstat_then_gone(path: str) -> os.stat_result:
        found = real_lstat(path)
        if path == str(placeholder) and placeholder.is_dir():
            placeholder.rmdir()
        return found

    monkeypatch.setattr(sandbox_scan.os.path, "lexists", exists_then_gone)
    monkeypatch.setattr(sandbox_scan.os, "lstat", lstat_then_gone)
    assert not sandbox_scan.holds_something(str(placeholder))


def found_paths(tree: Path) -> list[str]:
    return find_entries(tree, NAMES)


def test_finds_the_names_in_the_folders_two_down_and_no_deeper(tmp_path: Path) -> None:
    """A folder of projects and a monorepo: each clone's ``.git`` (a folder, a worktree's file),
    a package's ``.vscode``, a service's ``.claude`` and ``.mcp.json``, down to
    ``a/b/.vscode``; not the tree's own (the caller names those), not three down, not inside
    what was found (a repository's insides), not in ``node_modules``, not through a link."""
    (tmp_path / ".git" / "objects").mkdir(parents=True)
    (tmp_path / ".vscode").mkdir()
    (tmp_path / "api" / ".git" / "objects").mkdir(parents=True)
    (tmp_path / "api" / ".git" / "sub" / ".vscode").mkdir(parents=True)
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / ".git").write_text("gitdir: /elsewhere/.git/worktrees/web\n")
    (tmp_path / "packages" / "ui" / ".vscode").mkdir(parents=True)
    (tmp_path / "services" / "api" / ".claude").mkdir(parents=True)
    (tmp_path / "services" / "api" / ".mcp.json").write_text("{}\n")
    (tmp_path / "vendor" / "lib" / ".git" / "objects").mkdir(parents=True)
    (tmp_path / "a" / "b" / ".vscode").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c" / ".vscode").mkdir(parents=True)
    (tmp_path / "node_modules" / "pkg" / ".git").mkdir(parents=True)
    (tmp_path / "linked").symlink_to(tmp_path / "packages" / "ui")
    (tmp_path / "notes.txt").write_text("x\n")
    assert SCAN_DEPTH == 2
    assert found(tmp_path) == [
        "a/b/.vscode",
        "api/.git",
        "packages/ui/.vscode",
        "services/api/.claude",
        "services/api/.mcp.json",
        "vendor/lib/.git",
        "web/.git",
    ]
    assert find_entries(tmp_path / "missing", NAMES) == []


def test_a_tree_too_large_is_looked_at_level_by_level_up_to_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past :data:`SCAN_LIMIT` folders the walk stops, having looked at the shallower folders
    first: what is one folder down is found before anything two down."""
    (tmp_path / "a" / ".vscode").mkdir(parents=True)
    (tmp_path / "b" / "c" / ".vscode").mkdir(parents=True)
    assert found(tmp_path) == ["a/.vscode", "b/c/.vscode"]
    monkeypatch.setattr(sandbox_scan, "SCAN_LIMIT", 3)  # the tree, a and b
    assert found(tmp_path) == ["a/.vscode"]


def test_a_look_after_a_change_sees_it_at_once(tmp_path: Path) -> None:
    """The listings kept from the last look do not hide what a command made or removed since,
    even within one tick of the file system's clock."""
    (tmp_path / "packages" / "ui").mkdir(parents=True)
    assert found(tmp_path) == []
    (tmp_path / "packages" / "ui" / ".vscode").mkdir()
    assert found(tmp_path) == ["packages/ui/.vscode"]
    (tmp_path / "packages" / "ui" / ".vscode").rename(tmp_path / "packages" / ".vscode")
    assert found(tmp_path) == ["packages/.vscode"]
    shutil.rmtree(tmp_path / "packages")
    assert found(tmp_path) == []


def test_two_changes_within_one_tick_of_the_clock_are_both_seen(tmp_path: Path) -> None:
    """A file system's clock ticks coarsely (a few ms): a folder changed again within the tick
    of the last look keeps the same time. A folder changed that recently is read again."""
    ui = tmp_path / "packages" / "ui"
    ui.mkdir(parents=True)
    tick = time.time_ns()
    os.utime(ui, ns=(tick, tick))
    assert found(tmp_path) == []
    (ui / ".vscode").mkdir()
    os.utime(ui, ns=(tick, tick))  # the same tick: the same time
    assert found(tmp_path) == ["packages/ui/.vscode"]


def _walk(tree: Path) -> list[str]:
    """The same question answered by a fresh walk, nothing kept."""
    out: list[str] = []
    for folder, folders, files in os.walk(tree):
        level = len(Path(folder).relative_to(tree).parts)
        for name in (*folders, *files):
            if level and name in NAMES:
                out.append(os.path.relpath(os.path.join(folder, name), tree))
        folders[:] = [f for f in folders if f not in NAMES and level < SCAN_DEPTH]
        folders[:] = [f for f in folders if not os.path.islink(os.path.join(folder, f))]
    return sorted(out)


_FOLDERS = ("a", "a/b", "a/b/c", "d", "d/e")
_STEP = st.tuples(
    st.sampled_from(("make", "remove", "move")),
    st.sampled_from(_FOLDERS),
    st.sampled_from((*NAMES, "x")),
)


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(_STEP, min_size=1, max_size=12))
def test_whatever_changes_a_look_finds_what_a_fresh_walk_finds(
    steps: list[tuple[str, str, str]],
) -> None:
    """Every folder is aged before each step (its listing then kept), so the next look reuses
    the untouched folders' listings and must read again exactly those the step changed."""
    import tempfile

    tree = Path(tempfile.mkdtemp(prefix="scan-"))
    try:
        for folder in _FOLDERS:
            (tree / folder).mkdir(parents=True, exist_ok=True)
        for number, (action, where, name) in enumerate(steps):
            aged = 1_000_000_000 * (1_000 + number)  # long ago, and new each step
            for folder, _, _ in os.walk(tree):
                os.utime(folder, ns=(aged, aged))
            find_entries(tree, NAMES)  # the listings kept, all aged
            target = tree / where / name
            if action == "make" and not target.exists() and (tree / where).is_dir():
                target.mkdir()
            elif action == "remove" and target.exists():
                shutil.rmtree(target)
            elif action == "move" and target.exists():
                target.rename(tree / where / f"moved-{number}")
            assert found(tree) == _walk(tree), steps[: number + 1]
    finally:
        shutil.rmtree(tree)
