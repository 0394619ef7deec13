"""A git front-end an allow rule lets run (``Bash(gh pr checkout:*)``) is checked as the
``git`` it runs (facets_approval.gitconfig.GIT_FRONT_ENDS); a program that is no front-end
(``make``) is the rule's whole doing. The check reads the command line: the program itself
need not be installed (the decision is what is asserted, over the real harness).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

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

from facets_approval.gitconfig import git_check
from pico3.models.faux import faux_response

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]


async def test_an_allowed_gh_pr_checkout_asks_when_the_repository_configured_a_program(
    kit: Any, tmp_path: Path
) -> None:
    repo = repository(tmp_path)
    hook = repo / ".git" / "hooks" / "post-checkout"
    shutil.copy(script(tmp_path, "post-checkout"), hook)  # what `gh pr checkout`'s git runs
    command = "gh pr checkout 12"
    asked = Asked()
    source = allow("Bash(gh pr checkout:*)")(kit)
    async with harness(repo, [calls(command), faux_response("ok")], source, asked) as (r, _):
        results = await run(r)
    (request,) = asked.requests
    assert request["reason"].startswith(
        "This asks because this repository's git configuration runs .git/hooks/post-checkout "
        "(the post-checkout hook in .git/hooks)"
    )
    assert results == ["Tool call blocked: the user denied this call"]
    assert markers(tmp_path) == []


def test_front_ends_are_checked_as_git_and_other_programs_are_not(tmp_path: Path) -> None:
    repo = repository(tmp_path)
    assert git_check("gh pr checkout 3", str(repo), None) is None  # an ordinary repository
    git(repo, "config", "core.fsmonitor", "./run.sh")
    for command in (
        "gh pr status",
        "/usr/local/bin/gh repo sync",
        "tig status",
        "lazygit",
        "git-lfs pull",
        "pre-commit run --all-files",
        "lefthook run pre-commit",
        "npx husky",
        "timeout 60 gh pr checkout 3",
        'gh pr checkout "$N"',  # gh has no option that moves it: a run-time word cannot
    ):
        check = git_check(command, str(repo), None)
        assert check is not None and "core.fsmonitor in .git/config" in check.reason, command
    for command in ("tig -C ../other", "lazygit -p /elsewhere", 'tig "$X"'):
        check = git_check(command, str(repo), None)
        assert check is not None and "known only when it runs" in check.reason, command
    for command in ("make", "npm test", "ghost status", "echo gh"):  # out of scope: the rule's
        assert git_check(command, str(repo), None) is None, command
    assert git_check("gh pr status", str(repo), str(repo)) is None  # a trusted project
