"""A ``git`` that would run without asking asks when its environment points it at another
repository's configuration or names a program (facets_approval.gitconfig), over a real harness.

Each form sets the environment a different way: a prefix assignment (``GIT_DIR=… git status``),
``env A=1 git``, ``export A=…;`` earlier on the line, ``env -C DIR``, or the agent's own
environment (inherited). The trap is a script that leaves a marker file; the ``bash`` tool
really runs the command, so "nothing ran" is a fact on disk, and the test then runs the same
line itself to prove the trap was armed. ``auto`` mode lets every line run unasked (a prefix
assignment makes a line no allow rule covers); the inherited case is an allow rule's.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from approval_git_support import (
    Asked,
    allow,
    calls,
    git,
    harness,
    markers,
    no_global_git_config,  # noqa: F401 - the autouse fixture
    repository,
    run,
    script,
)

from chord.context import BACKGROUND
from facets_approval.gitconfig import git_check
from pico3.models.faux import faux_response

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]


def armed(root: Path) -> Path:
    """Another committed repository, whose ``core.fsmonitor`` leaves the marker ``evil``."""
    evil = root / "evil"
    evil.mkdir()
    git(evil, "init", "-q", ".")
    (evil / "a.txt").write_text("a\n")
    git(evil, "add", "-A")
    git(evil, "commit", "-qm", "init")
    git(evil, "config", "core.fsmonitor", script(root, "evil"))
    return evil


def git_dir_prefix(root: Path, repo: Path) -> str:
    evil = armed(root)
    return f"GIT_DIR={evil}/.git GIT_WORK_TREE={evil} git status"


def relative_git_dir(root: Path, repo: Path) -> str:
    armed(root)
    return "GIT_DIR=../evil/.git GIT_WORK_TREE=../evil git status"


def exported_git_dir(root: Path, repo: Path) -> str:
    evil = armed(root)
    return f"export GIT_DIR={evil}/.git GIT_WORK_TREE={evil}; git status"


def env_config(root: Path, repo: Path) -> str:
    monitor = script(root, "config")
    return (
        "env GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor "
        f"GIT_CONFIG_VALUE_0={monitor} git status"
    )


def config_parameters(root: Path, repo: Path) -> str:
    return f"GIT_CONFIG_PARAMETERS=\"'core.fsmonitor'='{script(root, 'parameters')}'\" git status"


def global_config(root: Path, repo: Path) -> str:
    config = root / "other.gitconfig"
    config.write_text(f"[core]\n\tfsmonitor = {script(root, 'global')}\n")
    return f"GIT_CONFIG_GLOBAL={config} git status"


def external_diff(root: Path, repo: Path) -> str:
    (repo / "a.txt").write_text("changed\n")
    return f"GIT_EXTERNAL_DIFF={script(root, 'external')} git diff"


def ssh_command(root: Path, repo: Path) -> str:
    return f"GIT_SSH_COMMAND={script(root, 'ssh')} git ls-remote ssh://example.invalid/x"


def env_chdir(root: Path, repo: Path) -> str:
    evil = armed(root)
    return f"env -C {evil} git status"


FORMS = [
    git_dir_prefix,
    relative_git_dir,
    exported_git_dir,
    env_config,
    config_parameters,
    global_config,
    external_diff,
    ssh_command,
    env_chdir,
]


@pytest.mark.parametrize("form", FORMS, ids=[f.__name__ for f in FORMS])
async def test_a_git_whose_line_sets_its_environment_asks(
    kit: Any, tmp_path: Path, form: Callable[[Path, Path], str]
) -> None:
    repo = repository(tmp_path)  # the session's own repository: ordinary
    command = form(tmp_path, repo)
    asked = Asked()
    steps = [calls(command), faux_response("done")]
    async with harness(repo, steps, kit.RuleSource(), asked) as (root, installation):
        await installation.set_mode("auto", BACKGROUND)
        results = await run(root)
    (request,) = asked.requests
    assert request["reason"].startswith("This asks because ")
    assert results == ["Tool call blocked: the user denied this call"]
    assert markers(tmp_path) == []  # nothing ran
    await anyio.run_process(["bash", "-c", command], cwd=repo, check=False)
    assert markers(tmp_path) != []  # ...though the trap was armed


async def test_an_inherited_git_dir_is_the_repository_checked(
    kit: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the agent started with GIT_DIR set (inside a git hook, by a wrapper script): its plain
    # `git status` reads that repository, whose configuration is what must be checked
    repo = repository(tmp_path)
    evil = armed(tmp_path)
    monkeypatch.setenv("GIT_DIR", str(evil / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(evil))
    asked = Asked()
    source = allow("Bash(git status)")(kit)
    async with harness(repo, [calls("git status"), faux_response("ok")], source, asked) as (r, _):
        results = await run(r)
    (request,) = asked.requests
    assert f"(core.fsmonitor in {evil}/.git/config)" in request["reason"]
    assert results == ["Tool call blocked: the user denied this call"]
    assert markers(tmp_path) == []
    await anyio.run_process(["bash", "-c", "git status"], cwd=repo, check=False)
    assert markers(tmp_path) == ["evil"]  # ...though the trap was armed


def test_routine_variables_ask_nothing(tmp_path: Path) -> None:
    repo = repository(tmp_path)
    for command in (
        "GIT_PAGER=cat git log",
        "GIT_EDITOR=true git commit --allow-empty -m x",
        "LC_ALL=C GIT_AUTHOR_NAME=me git status",
        f"GIT_DIR={repo}/.git git status",  # the same, ordinary repository
    ):
        assert git_check(command, str(repo), None) is None, command
    check = git_check("GIT_PAGER=less git log", str(repo), None)
    assert check is not None and "GIT_PAGER" in check.reason
    check = git_check("read GIT_DIR; export GIT_DIR; git status", str(repo), None)
    assert check is not None and "known only when it runs" in check.reason


def test_a_shell_variable_the_line_only_assigns_never_reaches_git(tmp_path: Path) -> None:
    """``msg=x; git commit -m "$msg"`` is the model's everyday line: a shell variable that is
    not exported is not in git's environment, so it asks nothing. It counts once the line
    exports it, turns on ``set -a``, or assigns a name the environment already holds."""
    repo = repository(tmp_path)
    quiet = (
        'msg="fix the parser"; git commit --allow-empty -m "$msg"',
        "head=$(git rev-parse HEAD); git show $head",
        'while read -r f; do git add "$f"; done < /dev/null',
        "GIT_CONFIG_COUNT=1; GIT_CONFIG_KEY_0=core.pager; GIT_CONFIG_VALUE_0=./x; git log",
        "local GIT_EXTERNAL_DIFF=./x; git diff",
    )
    for command in quiet:
        assert git_check(command, str(repo), None) is None, command
    counted = {
        "export GIT_EXTERNAL_DIFF=./x; git diff": "GIT_EXTERNAL_DIFF",
        "GIT_EXTERNAL_DIFF=./x; export GIT_EXTERNAL_DIFF; git diff": "GIT_EXTERNAL_DIFF",
        "set -a; GIT_EXTERNAL_DIFF=./x; git diff": "GIT_EXTERNAL_DIFF",
        "set -o allexport; GIT_EXTERNAL_DIFF=./x; git diff": "GIT_EXTERNAL_DIFF",
        "declare -x GIT_EXTERNAL_DIFF=./x; git diff": "GIT_EXTERNAL_DIFF",
        "PATH=./bin:$PATH; git status": "PATH",
        "read -r HOME; git status": "HOME",
    }
    for command, name in counted.items():
        check = git_check(command, str(repo), None)
        assert check is not None and name in check.reason, command
