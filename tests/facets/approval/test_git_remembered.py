"""The dialog's "Allow always while this repository's git configuration stays as is"
(facets_approval.git_approvals): remembered per git folder and fingerprint, over a real harness
and real repositories (the harness of approval_git_support).

The store here is an in-memory one with the app's interface (as ``kit.RuleSource`` stands for
the app's rule files); the app's file store and a real worker restart are in
tests/app/worker/test_git_remembered.py.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
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
    run,
    script,
)

from chord.context import BACKGROUND
from chord.remote import RemoteServiceError
from facets_approval.contract import check_decision
from facets_approval.git_approvals import GIT_APPROVALS_SERVICE
from facets_approval.gitconfig import git_check
from facets_approval.tui import REMEMBER, approval_choices, decision_for
from pico3.models.faux import faux_response

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]

COMMIT = "git commit --allow-empty -m x"


class MemoryApprovals:
    """An in-memory store with the app's interface (``fingerprint``, ``approve``, ``listed``,
    ``forget``); ``broken`` makes every call fail as a corrupt file does."""

    def __init__(self, broken: str | None = None) -> None:
        self.kept: dict[str, tuple[str, tuple[str, ...]]] = {}
        self.broken = broken

    def _check(self) -> None:
        if self.broken is not None:
            raise ValueError(self.broken)

    def fingerprint(self, git_dir: str) -> str | None:
        self._check()
        found = self.kept.get(git_dir)
        return None if found is None else found[0]

    def approve(self, git_dir: str, fingerprint: str, programs: Sequence[str]) -> None:
        self._check()
        self.kept[git_dir] = (fingerprint, tuple(programs))

    def listed(self) -> list[dict[str, Any]]:
        self._check()
        return [
            {"gitDir": d, "fingerprint": f, "programs": [*p]} for d, (f, p) in self.kept.items()
        ]

    def forget(self, git_dir: str) -> None:
        self._check()
        del self.kept[git_dir]


def hooked(root: Path, name: str = "repo") -> Path:
    """A committed repository whose ``pre-commit`` hook leaves the marker ``hook``."""
    repo = root / name
    repo.mkdir()
    git(repo, "init", "-q", ".")
    git(repo, "commit", "-q", "--allow-empty", "-m", "init")
    shutil.copy(script(root, "hook"), repo / ".git" / "hooks" / "pre-commit")
    return repo


def remember_once(request: dict[str, Any]) -> dict[str, Any]:
    """The person's answer: remember where offered, else deny."""
    if request.get("repositories"):
        return {"decision": "allow", "by": "tui", "remember": True}
    return {"decision": "deny", "by": "tui"}


def two_turns(command: str) -> list[Any]:
    return [calls(command), faux_response("one"), calls(command), faux_response("two")]


def forget_marker(root: Path) -> None:
    for name in markers(root):
        os.remove(root / "markers" / name)


async def test_a_remembered_approval_runs_the_same_commit_next_time_without_a_question(
    kit: Any, tmp_path: Path
) -> None:
    repo = hooked(tmp_path)
    store = MemoryApprovals()
    asked = Asked(remember_once)
    source = allow("Bash(git commit:*)")(kit)
    extra = {GIT_APPROVALS_SERVICE: store}
    async with harness(repo, two_turns(COMMIT), source, asked, extra) as (root, _):
        assert await run(root, "one") == ["exit 0"]
        assert markers(tmp_path) == ["hook"]  # allowed: the hook ran
        forget_marker(tmp_path)
        assert (await run(root, "two"))[-1] == "exit 0"
    (request,) = asked.requests  # the second commit asked nobody...
    assert markers(tmp_path) == ["hook"]  # ...and its hook ran
    (offered,) = request["repositories"]
    assert offered["gitDir"] == str((repo / ".git").resolve())
    assert offered["programs"] == [".git/hooks/pre-commit (the pre-commit hook in .git/hooks)"]
    assert list(store.kept) == [offered["gitDir"]]
    assert store.kept[offered["gitDir"]][0] == offered["fingerprint"]


def edit_hook(root: Path, repo: Path) -> None:
    with (repo / ".git" / "hooks" / "pre-commit").open("a") as hook:
        hook.write("echo edited\n")


def add_fsmonitor(root: Path, repo: Path) -> None:
    git(repo, "config", "core.fsmonitor", script(root, "fsmonitor"))


def add_hook(root: Path, repo: Path) -> None:
    shutil.copy(script(root, "another"), repo / ".git" / "hooks" / "commit-msg")


CHANGES = [edit_hook, add_fsmonitor, add_hook]


@pytest.mark.parametrize("change", CHANGES, ids=[c.__name__ for c in CHANGES])
async def test_a_changed_configuration_asks_again(
    kit: Any, tmp_path: Path, change: Callable[[Path, Path], None]
) -> None:
    repo = hooked(tmp_path)
    answers = iter(["remember", "deny"])

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        if next(answers) == "remember":
            return remember_once(request)
        return {"decision": "deny", "by": "tui"}

    asked = Asked(answer)
    source = allow("Bash(git commit:*)")(kit)
    extra = {GIT_APPROVALS_SERVICE: MemoryApprovals()}
    async with harness(repo, two_turns(COMMIT), source, asked, extra) as (root, _):
        assert await run(root, "one") == ["exit 0"]
        forget_marker(tmp_path)
        change(tmp_path, repo)
        results = await run(root, "two")
    assert len(asked.requests) == 2  # asked again
    assert results[-1] == "Tool call blocked: the user denied this call"
    assert markers(tmp_path) == []  # and nothing ran
    assert asked.requests[1]["repositories"]  # the new configuration can be approved in turn


async def test_another_repository_with_the_same_hook_still_asks(kit: Any, tmp_path: Path) -> None:
    first, second = hooked(tmp_path, "first"), hooked(tmp_path, "second")
    store = MemoryApprovals()
    source = allow("Bash(git commit:*)")(kit)
    extra = {GIT_APPROVALS_SERVICE: store}
    steps = [calls(COMMIT), faux_response("one")]
    async with harness(first, steps, source, Asked(remember_once), extra) as (root, _):
        assert await run(root) == ["exit 0"]
    forget_marker(tmp_path)
    asked = Asked()  # denies
    async with harness(second, steps, source, asked, extra) as (root, _):
        assert await run(root) == ["Tool call blocked: the user denied this call"]
    assert len(asked.requests) == 1
    assert markers(tmp_path) == []
    assert list(store.kept) == [str((first / ".git").resolve())]


async def test_an_approved_configuration_widens_nothing_else(kit: Any, tmp_path: Path) -> None:
    # `git commit` is allowed by no rule: with the repository approved it asks as any command
    # does in ask mode (the mode's question, its narrow rule offered), not as the repository's
    repo = hooked(tmp_path)
    store = MemoryApprovals()
    extra = {GIT_APPROVALS_SERVICE: store}
    steps = [calls(COMMIT), faux_response("one")]
    async with harness(
        repo, steps, allow("Bash(git commit:*)")(kit), Asked(remember_once), extra
    ) as (
        root,
        _,
    ):
        await run(root)
    asked = Asked()
    async with harness(repo, steps, kit.RuleSource(), asked, extra) as (root, _):
        assert await run(root) == ["Tool call blocked: the user denied this call"]
    (request,) = asked.requests
    assert "reason" not in request and "repositories" not in request
    assert request["rule"] == "Bash(git commit:*)"


async def test_a_store_that_cannot_be_read_asks_and_says_so(kit: Any, tmp_path: Path) -> None:
    repo = hooked(tmp_path)
    broken = "/x/git-approvals.json: the git approvals file is corrupt (bad JSON); fix or delete it"
    asked = Asked()
    extra = {GIT_APPROVALS_SERVICE: MemoryApprovals(broken)}
    steps = [calls(COMMIT), faux_response("one")]
    async with harness(repo, steps, allow("Bash(git commit:*)")(kit), asked, extra) as (root, _):
        assert await run(root) == ["Tool call blocked: the user denied this call"]
    (request,) = asked.requests
    assert request["reason"].endswith(f"The remembered approvals could not be read: {broken}")
    assert "repositories" not in request  # nothing to keep it in: not offered


async def test_without_a_store_nothing_is_offered(kit: Any, tmp_path: Path) -> None:
    repo = hooked(tmp_path)
    asked = Asked()
    steps = [calls(COMMIT), faux_response("one")]
    async with harness(repo, steps, allow("Bash(git commit:*)")(kit), asked) as (root, _):
        await run(root)
    (request,) = asked.requests
    assert "repositories" not in request


async def test_a_prompt_commands_line_honours_a_remembered_approval(
    kit: Any, tmp_path: Path
) -> None:
    repo = hooked(tmp_path)
    store = MemoryApprovals()
    extra = {GIT_APPROVALS_SERVICE: store}
    steps = [calls(COMMIT), faux_response("one")]
    source = allow("Bash(git commit:*)")(kit)
    async with harness(repo, steps, source, Asked(remember_once), extra) as (root, installation):
        before = await installation.command_verdict(COMMIT, BACKGROUND)
        await run(root)
        after = await installation.command_verdict(COMMIT, BACKGROUND)
    assert before["verdict"] == "ask" and before["by"] == "repository"
    assert after == {"verdict": "run", "by": "rule", "why": after["why"]}


def test_the_dialog_offers_it_only_where_the_request_does() -> None:
    request: dict[str, Any] = {"name": "bash", "args": {"command": COMMIT}}
    assert REMEMBER not in [c.value for c in approval_choices(request)]
    request["repositories"] = [{"gitDir": "/r/.git", "fingerprint": "f", "programs": []}]
    assert REMEMBER in [c.value for c in approval_choices(request)]
    answer = decision_for(REMEMBER, request)
    assert answer == {"decision": "allow", "by": "tui", "remember": True}
    assert check_decision(answer, request) == answer
    with pytest.raises(RemoteServiceError, match="did not offer to remember"):
        check_decision(answer, {"name": "bash"})
    with pytest.raises(RemoteServiceError, match="only to a plain 'allow'"):
        check_decision({"decision": "deny", "remember": True}, request)


def test_the_fingerprint_is_the_repositorys_wherever_the_command_starts(tmp_path: Path) -> None:
    repo = hooked(tmp_path)
    (repo / "sub").mkdir()
    git(repo, "config", "core.fsmonitor", "./run.sh")
    (repo / "run.sh").write_text("#!/bin/sh\n")
    checks = [git_check(COMMIT, str(folder), None) for folder in (repo, repo / "sub")]
    top, sub = (c.repositories if c is not None else () for c in checks)
    assert [r.fingerprint for r in top] == [r.fingerprint for r in sub] != []
    (repo / "run.sh").write_text("#!/bin/sh\necho changed\n")  # the file a value names
    changed = git_check(COMMIT, str(repo), None)
    assert changed is not None
    assert [r.fingerprint for r in changed.repositories] != [r.fingerprint for r in top]


def test_a_hook_whose_content_cannot_be_pinned_is_never_offered_always(tmp_path: Path) -> None:
    # `pre-commit -> /dev/fd/3`: git runs whatever `3< notes.txt` opened, so a fingerprint of
    # the link would stay the same while the program changes
    repo = hooked(tmp_path)
    check = git_check(COMMIT, str(repo), None)
    assert check is not None and check.repositories != ()  # a regular hook: offered
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.unlink()
    hook.symlink_to("/dev/fd/3")
    linked = git_check(COMMIT, str(repo), None)
    assert linked is not None and "pre-commit" in linked.reason
    assert linked.repositories == ()


def test_a_hook_linked_to_a_tracked_script_is_pinned_by_the_scripts_content(
    tmp_path: Path,
) -> None:
    # `.git/hooks/pre-commit -> ../../scripts/pre-commit`, as many projects install their hooks
    repo = hooked(tmp_path)
    (repo / "scripts").mkdir()
    hook = repo / ".git" / "hooks" / "pre-commit"
    shutil.move(hook, repo / "scripts" / "pre-commit")
    hook.symlink_to("../../scripts/pre-commit")
    first = git_check(COMMIT, str(repo), None)
    assert first is not None and first.repositories != ()
    with (repo / "scripts" / "pre-commit").open("a") as script:
        script.write("echo changed\n")
    changed = git_check(COMMIT, str(repo), None)
    assert changed is not None and changed.repositories != ()
    assert changed.repositories[0].fingerprint != first.repositories[0].fingerprint


def test_a_value_naming_a_per_process_file_is_never_offered_always(tmp_path: Path) -> None:
    # `core.fsmonitor = ./x` with `x -> /dev/stdin`: `git status < payload` runs the payload
    repo = hooked(tmp_path)
    (repo / ".git" / "hooks" / "pre-commit").unlink()
    (repo / "x").symlink_to("/dev/stdin")
    git(repo, "config", "core.fsmonitor", "./x")
    check = git_check("git status", str(repo), None)
    assert check is not None and "core.fsmonitor" in check.reason
    assert check.repositories == ()
