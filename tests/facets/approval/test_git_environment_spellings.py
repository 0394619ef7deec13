"""Spellings that give a ``git`` another repository, environment or folder, which the git check
(facets_approval.gitconfig) must read as such, over a real harness in ``auto`` mode.

Each line reaches the armed repository ``evil`` (its ``core.fsmonitor`` leaves a marker) in a
way bash honours but a plain reading misses: a declaration bash runs as a plain command
(``builtin export``), ``set`` behind a wrapper or ``set -k``, a shell option given to ``bash
-a``, a command run from a string or by ``find -exec`` that inherits its runner's
environment or folder, an alias, ``CDPATH``, or a name exported twice. The ``bash`` tool really
runs the command, so "nothing ran" is a fact on disk; the test then runs the same line itself
to prove the trap was armed.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from approval_git_support import (
    Asked,
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


def armed(root: Path) -> str:
    """Another committed repository, whose ``core.fsmonitor`` leaves the marker ``evil``:
    its git folder."""
    evil = root / "evil"
    evil.mkdir()
    git(evil, "init", "-q", ".")
    (evil / "a.txt").write_text("a\n")
    git(evil, "add", "-A")
    git(evil, "commit", "-qm", "init")
    git(evil, "config", "core.fsmonitor", script(root, "evil"))
    return f"{evil}/.git"


def exec_path() -> str:
    """The folder of git's own programs (``git-status``...), as ``git --exec-path`` says."""
    return subprocess.run(
        ["git", "--exec-path"], check=True, capture_output=True, text=True
    ).stdout.strip()


def cdpath(root: Path, repo: Path) -> str:
    """``cd evil`` with ``CDPATH`` set goes to ``<root>/evil``, not the session's own ``evil``."""
    armed(root)
    (repo / "evil").mkdir()  # an ordinary folder the line seems to mean
    return f"CDPATH={root}; cd evil; git status"


FORMS: dict[str, Callable[[Path, Path], str]] = {
    "builtin export": lambda root, repo: f"builtin export GIT_DIR={armed(root)}; git status",
    "command export": lambda root, repo: f"command export GIT_DIR={armed(root)}; git status",
    "escaped export": lambda root, repo: f"\\export GIT_DIR={armed(root)}; git status",
    "quoted export": lambda root, repo: f"'export' GIT_DIR={armed(root)}; git status",
    "prefixed export": lambda root, repo: f"x=1 export GIT_DIR={armed(root)}; git status",
    "builtin set -a": lambda root, repo: f"builtin set -a; GIT_DIR={armed(root)}; git status",
    "set -k": lambda root, repo: f"set -k; git status GIT_DIR={armed(root)}",
    "builtin set -k": lambda root, repo: f"builtin set -k; git status GIT_DIR={armed(root)}",
    "bash -a": lambda root, repo: f"bash -a -c 'GIT_DIR={armed(root)}; git status'",
    "bash -o allexport": lambda root, repo: (
        f"bash -o allexport -c 'GIT_DIR={armed(root)}; git status'"
    ),
    "bash -k": lambda root, repo: f"bash -k -c 'git status GIT_DIR={armed(root)}'",
    "prefix to bash -c": lambda root, repo: f"GIT_DIR={armed(root)} bash -c 'git status'",
    "env to sh -c": lambda root, repo: f"env GIT_DIR={armed(root)} sh -c 'git status'",
    "prefix to eval": lambda root, repo: f"GIT_DIR={armed(root)} eval git status",
    "prefix to find -exec": lambda root, repo: (
        f"GIT_DIR={armed(root)} find . -maxdepth 0 -exec git status ';'"
    ),
    "env -C to bash -c": lambda root, repo: (
        f"env -C {Path(armed(root)).parent} bash -c 'git status'"
    ),
    "env -C to find -exec": lambda root, repo: (
        f"env -C {Path(armed(root)).parent} find . -maxdepth 0 -exec git status ';'"
    ),
    "alias": lambda root, repo: (
        f"shopt -s expand_aliases\nalias st='GIT_DIR={armed(root)} git'\nst status"
    ),
    "CDPATH": lambda root, repo: cdpath(root, repo),
    "exported, then assigned": lambda root, repo: (
        f"export GIT_DIR=/nonexistent; GIT_DIR={armed(root)}; git status"
    ),
    "exported twice": lambda root, repo: (
        f"export GIT_DIR={armed(root)}; git status; export GIT_DIR={repo}/.git"
    ),
    "git's own program": lambda root, repo: (
        f"cd {Path(armed(root)).parent}; {exec_path()}/git-status"
    ),
    "xargs adds the subcommand": lambda root, repo: (
        f"echo status | xargs git -C {Path(armed(root)).parent}"
    ),
    "coproc": lambda root, repo: f"coproc git -C {Path(armed(root)).parent} status; wait",
}
"""Each spelling: the line, made against the session's repository and the folder above it."""


@pytest.mark.parametrize("name", list(FORMS))
async def test_a_spelling_that_reaches_another_repository_asks(
    kit: Any, tmp_path: Path, name: str
) -> None:
    repo = repository(tmp_path)  # the session's own repository: ordinary
    command = FORMS[name](tmp_path, repo)
    asked = Asked()
    steps = [calls(command), faux_response("done")]
    async with harness(repo, steps, kit.RuleSource(), asked) as (root, installation):
        await installation.set_mode("auto", BACKGROUND)
        results = await run(root)
    (request,) = asked.requests
    assert "git" in request["reason"], request["reason"]
    assert results == ["Tool call blocked: the user denied this call"]
    assert markers(tmp_path) == []  # nothing ran
    await anyio.run_process(["bash", "-c", command], cwd=repo, check=False)
    assert markers(tmp_path) == ["evil"]  # ...though the trap was armed


def test_everyday_lines_still_ask_nothing(tmp_path: Path) -> None:
    """The readings above stay narrow: the model's ordinary lines in an ordinary repository."""
    repo = repository(tmp_path)
    (repo / "src").mkdir()
    for command in (
        "bash -c 'git status'",
        "bash -o pipefail -c 'git log | head -1'",
        "find . -maxdepth 0 -exec git status ';'",
        "GIT_PAGER=cat bash -c 'git log'",
        "export GIT_DIR=.git; git status; export GIT_DIR=.git",
        'msg=x; git commit --allow-empty -m "$msg"',
        "cd src && git status",
        '"$PYTHON" -m pytest; git status',  # a command named when it runs: no rule allows it,
        # and auto mode lets the model name any program
    ):
        assert git_check(command, str(repo), None) is None, command
    evil = Path(armed(tmp_path)).parent
    for command in (f"npx -y git -C {evil} status", f"npm exec -- git -C {evil} status"):
        check = git_check(command, str(repo), None)
        assert check is not None and "core.fsmonitor" in check.reason, command
    check = git_check(f"npx tig -C {evil}", str(repo), None)  # its -C was read as a program
    assert check is not None and "known only when it runs" in check.reason
    assert git_check("alias ll='ls -la'; ll", str(repo), None) is None  # bash -c expands none
    check = git_check("shopt -s expand_aliases; alias st='git status'", str(repo), None)
    assert check is not None and "alias" in check.reason
