"""facets_approval.guarded_reason: which targets make the machine run code (issue 36 deliver 4).

The app owns the list (:mod:`coding_agent.settings.guarded_paths`); here the matcher is checked against
it on real files: the path as written and as resolved, any depth, any case, and the lookalikes
that must not ask. ``tests/app/worker/test_guarded_paths.py`` runs the same through the worker.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coding_agent.settings.guarded_paths import guarded_paths
from facets_approval.guarded import guarded_reason
from facets_approval.session import confinement

GUARDED = guarded_paths({"XDG_CONFIG_HOME": "/nonexistent/config"}, state_dir="/nonexistent/state")


@pytest.mark.parametrize(
    "target",
    [
        ".gitignore",
        ".gitattributes",
        ".github/workflows/ci.yml",
        "my.git/config",
        "src/envrc.py",
        "docs/.mcp.json.md",
        "vscode/tasks.json",
        "README.md",
    ],
)
def test_lookalikes_do_not_ask(tmp_path: Path, target: str) -> None:
    assert guarded_reason(target, str(tmp_path), GUARDED) is None


def test_a_symlinked_git_folder_is_still_git(tmp_path: Path) -> None:
    # ``.git`` pointing elsewhere: the resolved path has no ``.git`` in it, the written one has.
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / ".git").symlink_to(tmp_path / "elsewhere")
    reason = guarded_reason(".git/config", str(tmp_path), GUARDED)
    assert reason is not None and reason.startswith("git runs the hooks")
    assert reason.endswith(f"({tmp_path / 'elsewhere' / 'config'})")  # the real target


def test_a_symlink_pointing_at_a_nested_repository_s_hooks(tmp_path: Path) -> None:
    hooks = tmp_path / "vendor" / "lib" / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (tmp_path / "scripts").symlink_to(hooks)
    reason = guarded_reason("scripts/pre-push", str(tmp_path), GUARDED)
    assert reason is not None and str(hooks / "pre-push") in reason


def test_outside_the_project_the_whole_path_counts(tmp_path: Path) -> None:
    project = tmp_path / "repo" / "sub"
    project.mkdir(parents=True)
    reason = confinement({"path": "../.git/config"}, str(project), GUARDED)
    assert reason is not None and reason.startswith("git runs the hooks")
    outside = confinement({"path": "../notes.txt"}, str(project), GUARDED)
    assert outside is not None and outside.startswith("its target is outside the project")


def test_a_hard_link_asks(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x")
    assert guarded_reason("a.txt", str(tmp_path), GUARDED) is None
    os.link(tmp_path / "a.txt", tmp_path / "b.txt")
    reason = guarded_reason("a.txt", str(tmp_path), GUARDED)
    assert reason is not None and reason.startswith("the file has other hard links")


def test_bad_entries_are_skipped_and_bare_paths_are_the_agents_own(tmp_path: Path) -> None:
    guarded: list[object] = [42, {"pattern": ""}, {"reason": "x"}, str(tmp_path / "own")]
    assert guarded_reason("x.txt", str(tmp_path), guarded) is None
    reason = guarded_reason("own/config.toml", str(tmp_path), guarded)
    assert reason is not None and reason.startswith("it changes the agent's own configuration")
