"""A ``git`` command that would run without asking asks when its repository's own git
configuration names a program (facets_approval.gitconfig), over a real harness.

Each repository is real (``git init`` in ``tmp_path``) and its trap is a script that leaves a
marker file; the ``bash`` tool really runs the command (``bash -c`` in the repository), so
"nothing ran" is a fact on disk. After each refusal the test runs the same command itself to
prove the trap was armed (the harness: ``approval_git_support``). The rules come from an
in-memory permission source (``kit.RuleSource``), as in the neighbouring tests; the real worker
and binary are exercised in tests/app/worker/test_git_configuration.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
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


def git_reason(command: str, workspace: str, trusted: str | None) -> str | None:
    """Why the hook asks before ``command`` (:func:`git_check`'s reason), nothing remembered."""
    check = git_check(command, workspace, trusted)
    return None if check is None else check.reason


# -- the traps, one per family of settings -------------------------------------------------------
def fsmonitor(root: Path, repo: Path) -> str:
    git(repo, "config", "core.fsmonitor", script(root, "fsmonitor"))
    return "git status"


def textconv(root: Path, repo: Path) -> str:
    (repo / ".gitattributes").write_text("*.txt diff=evil\n")
    git(repo, "config", "diff.evil.textconv", script(root, "textconv", 'cat "$1"\n'))
    (repo / "a.txt").write_text("changed\n")
    return "git diff"


def filter_driver(root: Path, repo: Path) -> str:
    (repo / ".gitattributes").write_text("*.txt filter=evil\n")
    git(repo, "config", "filter.evil.clean", script(root, "clean", "cat\n"))
    stamp = (repo / "a.txt").stat()  # same size, newer time: status must hash (filter) it
    os.utime(repo / "a.txt", ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 10**10))
    return "git status"


def shell_alias(root: Path, repo: Path) -> str:
    git(repo, "config", "alias.st", f"!{script(root, 'alias')}")
    return "git st"


def included(root: Path, repo: Path) -> str:
    other = root / "other.config"
    other.write_text(f"[core]\n\tfsmonitor = {script(root, 'included')}\n")
    git(repo, "config", "include.path", str(other))
    return "git status"


def commit_hook(root: Path, repo: Path) -> str:
    hook = repo / ".git" / "hooks" / "pre-commit"
    shutil.copy(script(root, "hook"), hook)
    return "git commit --allow-empty -m x"


def gitdir_file(root: Path, repo: Path) -> str:
    elsewhere = root / "elsewhere.git"
    shutil.move(repo / ".git", elsewhere)
    (repo / ".git").write_text(f"gitdir: {elsewhere}\n")
    git(repo, "config", "core.fsmonitor", script(root, "elsewhere"))
    return "git status"


def trailer_command(root: Path, repo: Path) -> str:
    # `Bash(git commit:*)` covers `--trailer`, which runs the trailer's configured command
    git(repo, "config", "trailer.sign.cmd", script(root, "trailer") + " ;:")
    return 'git commit --allow-empty -m x --trailer "sign: me"'


def ext_transport(root: Path, repo: Path) -> str:
    # A "partial clone" lacking a blob: `git log -p` fetches it from the promisor remote, whose
    # address an insteadOf rewrites to an ext:: command (the command is in the key's subsection)
    blob = subprocess.run(
        ["git", "rev-parse", "HEAD:a.txt"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    for key, value in {
        "core.repositoryFormatVersion": "1",
        "extensions.partialClone": "origin",
        "remote.origin.promisor": "true",
        "remote.origin.url": "https://example.invalid/x",
        "protocol.ext.allow": "always",
        f"url.ext::{script(root, 'ext')}.insteadOf": "https://example.invalid/x",
    }.items():
        git(repo, "config", key, value)
    return "git log -p"


def deep_submodule(root: Path, repo: Path) -> str:
    # git status enters submodules at any depth: the fourth level's fsmonitor runs too
    chain = [repo / "s1"]
    for _ in range(4):
        chain.append(chain[-1] / f"s{len(chain) + 1}")
    for folder in chain:
        folder.mkdir()
        git(folder, "init", "-q", ".")
        (folder / "f").write_text("x\n")
        git(folder, "add", "f")
        git(folder, "commit", "-qm", "init")
    for parent, child in reversed(list(zip([repo, *chain], chain, strict=False))):
        git(parent, "add", child.name)
        git(parent, "commit", "-qm", "sub")
    git(chain[-1], "config", "core.fsmonitor", script(root, "deep"))
    (chain[-1] / "f").write_text("changed\n")
    return "git status"


def stdin_include(root: Path, repo: Path) -> str:
    # the configuration includes /dev/stdin: an input redirection (no write, so an allow rule
    # covers it) feeds git a configuration the check never sees
    git(repo, "config", "include.path", "/dev/stdin")
    (repo / "payload.cfg").write_text(f"[core]\n\tfsmonitor = {script(root, 'stdin')}\n")
    return "git status < payload.cfg"


def fd_hook(root: Path, repo: Path) -> str:
    # a hook symlinked to /dev/fd/3: git runs, as the hook, the file the line opens as fd 3
    (repo / ".git" / "hooks" / "pre-commit").symlink_to("/dev/fd/3")
    shutil.copy(script(root, "fd-hook"), repo / "notes.txt")
    return "git commit --allow-empty -m x 3< notes.txt"


TRAPS = [
    fd_hook,
    stdin_include,
    fsmonitor,
    textconv,
    filter_driver,
    shell_alias,
    included,
    commit_hook,
    gitdir_file,
    trailer_command,
    ext_transport,
    deep_submodule,
]


@pytest.mark.parametrize("trap", TRAPS, ids=[t.__name__ for t in TRAPS])
async def test_an_allowed_git_command_asks_when_the_repository_configured_a_program(
    kit: Any, tmp_path: Path, trap: Callable[[Path, Path], str]
) -> None:
    repo = repository(tmp_path)
    command = trap(tmp_path, repo)
    asked = Asked()
    source = kit.RuleSource({"user/config.toml": [("allow", f"Bash({command})")]})
    async with harness(repo, [calls(command), faux_response("done")], source, asked) as (root, _):
        results = await run(root)
    (request,) = asked.requests
    reason = request["reason"]
    assert reason.startswith("This asks because this repository's git configuration runs ")
    assert "rule" not in request  # no standing rule is offered: asked every time
    assert results == ["Tool call blocked: the user denied this call"]
    assert markers(tmp_path) == []  # nothing ran
    await anyio.run_process(["bash", "-c", command], cwd=repo, check=False)
    assert markers(tmp_path) != []  # ...though the trap was armed


async def test_the_reason_names_the_setting_the_file_and_the_program(
    kit: Any, tmp_path: Path
) -> None:
    repo = repository(tmp_path)
    (repo / ".hidden").mkdir()
    shutil.copy(script(tmp_path, "fsmonitor"), repo / ".hidden" / "run.sh")
    git(repo, "config", "core.fsmonitor", "./.hidden/run.sh")
    asked = Asked()
    source = allow("Bash(git status)")(kit)
    async with harness(repo, [calls("git status"), faux_response("ok")], source, asked) as (r, _):
        await run(r)
    (request,) = asked.requests
    assert request["reason"] == (
        "This asks because this repository's git configuration runs ./.hidden/run.sh "
        "(core.fsmonitor in .git/config). Trusting the project (/trust) lets its git "
        "configuration run unasked."
    )
    assert markers(tmp_path) == []


async def test_a_trusted_project_runs_its_repositorys_configuration(
    kit: Any, tmp_path: Path
) -> None:
    repo = repository(tmp_path)
    fsmonitor(tmp_path, repo)
    asked = Asked()
    source = allow("Bash(git status)", root=str(repo), trusted=True)(kit)
    async with harness(repo, [calls("git status"), faux_response("ok")], source, asked) as (r, _):
        assert await run(r) == ["exit 0"]
    assert asked.requests == []
    assert markers(tmp_path) == ["fsmonitor"]


async def test_trust_covers_the_project_only_not_a_repository_elsewhere(
    kit: Any, tmp_path: Path
) -> None:
    repo = repository(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", ".")
    git(other, "config", "core.fsmonitor", script(tmp_path, "other"))
    command = f"git -C {other} status"
    asked = Asked()
    source = allow(f"Bash({command})", root=str(repo), trusted=True)(kit)
    async with harness(repo, [calls(command), faux_response("ok")], source, asked) as (r, _):
        await run(r)
    (request,) = asked.requests
    assert f"(core.fsmonitor in {other}/.git/config)" in request["reason"]
    assert markers(tmp_path) == []


async def test_auto_mode_asks_too(kit: Any, tmp_path: Path) -> None:
    repo = repository(tmp_path)
    fsmonitor(tmp_path, repo)
    asked = Asked()
    source = kit.RuleSource()
    steps = [calls("git status"), faux_response("ok")]
    async with harness(repo, steps, source, asked) as (root, installation):
        await installation.set_mode("auto", BACKGROUND)
        await run(root)
    assert len(asked.requests) == 1
    assert markers(tmp_path) == []


async def test_an_always_answer_does_not_cover_a_configuration_added_later(
    kit: Any, tmp_path: Path
) -> None:
    # The session rule the dialog kept for a plain repository ("always") allows the next call
    # by rule; the fsmonitor armed in between makes it ask again.
    repo = repository(tmp_path)

    def always(request: dict[str, Any]) -> dict[str, Any]:
        if "rule" in request:
            return {"decision": "allow", "rule": request["rule"], "scope": "session", "by": "tui"}
        return {"decision": "deny", "by": "tui"}

    asked = Asked(always)
    steps = [calls("git status"), faux_response("one"), calls("git status"), faux_response("two")]
    async with harness(repo, steps, kit.RuleSource(), asked) as (root, _):
        assert await run(root, "one") == ["exit 0"]
        assert asked.requests[0]["rule"] == "Bash(git status:*)"
        fsmonitor(tmp_path, repo)
        results = await run(root, "two")
    assert len(asked.requests) == 2
    assert "core.fsmonitor in .git/config" in asked.requests[1]["reason"]
    assert results[-1] == "Tool call blocked: the user denied this call"
    assert markers(tmp_path) == []


def benign_fsmonitor(root: Path, repo: Path) -> None:
    git(repo, "config", "core.fsmonitor", "false")


def lfs_filters(root: Path, repo: Path) -> None:
    for key, value in {
        "filter.lfs.clean": "git-lfs clean -- %f",
        "filter.lfs.smudge": "git-lfs smudge -- %f",
        "filter.lfs.process": "git-lfs filter-process",
        "filter.lfs.required": "true",
    }.items():
        git(repo, "config", key, value)


def plain(root: Path, repo: Path) -> None:
    pass


BENIGN = [benign_fsmonitor, lfs_filters, plain]


@pytest.mark.parametrize("setup", BENIGN, ids=[b.__name__ for b in BENIGN])
async def test_an_ordinary_repository_runs_without_a_question(
    kit: Any, tmp_path: Path, setup: Callable[[Path, Path], None]
) -> None:
    repo = repository(tmp_path)
    setup(tmp_path, repo)
    asked = Asked()
    source = allow("Bash(git status)", "Bash(git log:*)")(kit)
    steps = [calls("git status", "git log --oneline"), faux_response("ok")]
    async with harness(repo, steps, source, asked) as (root, _):
        assert await run(root) == ["exit 0", "exit 0"]
    assert asked.requests == []


async def test_a_prompt_commands_line_asks_as_a_bash_call_would(kit: Any, tmp_path: Path) -> None:
    repo = repository(tmp_path)
    fsmonitor(tmp_path, repo)
    source = allow("Bash(git status)")(kit)
    async with harness(repo, [], source, Asked()) as (_root, installation):
        found = await installation.command_verdict("git status", BACKGROUND)
        plain_log = await installation.command_verdict("ls", BACKGROUND)
    assert found["verdict"] == "ask"
    assert found["by"] == "repository"
    assert "core.fsmonitor in .git/config" in found["why"]
    assert plain_log["verdict"] == "ask"  # no rule covers it: the mode asks, as before


@pytest.mark.parametrize(
    ("command", "where"),
    [
        ("cd sub && git status", "sub"),
        ("git -C sub status", "sub"),
        ("git --git-dir=sub/.git status", "sub"),
        ("timeout 5 git status", "."),
    ],
)
def test_the_repository_is_found_where_the_command_moves(
    tmp_path: Path, command: str, where: str
) -> None:
    top = tmp_path / "top"
    top.mkdir()
    sub = top / "sub"
    sub.mkdir()
    git(sub, "init", "-q", ".")
    git(sub if where == "sub" else top, "init", "-q", ".")
    armed = sub if where == "sub" else top
    git(armed, "config", "core.fsmonitor", "./run.sh")
    reason = git_reason(command, str(top), None)
    assert reason is not None and "./run.sh (core.fsmonitor in" in reason


def test_a_folder_known_only_when_it_runs_asks(tmp_path: Path) -> None:
    reason = git_reason('cd "$X" && git status', str(tmp_path), None)
    assert reason is not None and "known only when it runs" in reason
    assert git_reason("echo git", str(tmp_path), None) is None  # no git runs


def test_worktree_configuration_and_a_quoted_git_are_seen(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", ".")
    git(tmp_path, "config", "extensions.worktreeConfig", "true")
    git(tmp_path, "config", "--worktree", "core.fsmonitor", "./evil.sh")
    for command in ("git status", "g\\it status", '"git" status', "/usr/bin/git log"):
        assert git_reason(command, str(tmp_path), None) == (
            "this repository's git configuration runs ./evil.sh "
            "(core.fsmonitor in .git/config.worktree)"
        ), command
    assert git_reason("git status", str(tmp_path), str(tmp_path)) is None  # trusted


def test_a_folder_that_does_not_exist_yet_asks_and_hides_no_other_repository(
    tmp_path: Path,
) -> None:
    # `cd missing` fails and the second git runs in the armed session folder; `mkdir d && cp -r
    # …/.git d && git -C d status` makes the repository it runs in: neither can pass unasked
    git(tmp_path, "init", "-q", ".")
    git(tmp_path, "config", "core.fsmonitor", "./run.sh")
    for command in ("cd missing; git status", "git -C missing status; git status"):
        reason = git_reason(command, str(tmp_path), None)
        assert reason is not None and "missing, which does not exist yet" in reason, command
    plain = tmp_path / "plain"
    plain.mkdir()
    reason = git_reason("mkdir d && git -C d status", str(plain), None)
    assert reason is not None and "does not exist yet" in reason
    assert git_reason("mkdir d && git -C d status", str(plain), str(plain)) is None  # trusted


def test_a_relative_git_dir_is_read_in_the_folder_git_moves_to(tmp_path: Path) -> None:
    # git sets GIT_DIR from --git-dir as written and applies -C first: `git --git-dir=.git -C
    # sub status` reads sub/.git (its fsmonitor runs), not the session folder's plain .git
    git(tmp_path, "init", "-q", ".")
    sub = tmp_path / "sub"
    sub.mkdir()
    git(sub, "init", "-q", ".")
    git(sub, "config", "core.fsmonitor", "./run.sh")
    reason = git_reason("git --git-dir=.git -C sub status", str(tmp_path), None)
    assert reason is not None and "./run.sh (core.fsmonitor in" in reason


def test_a_tilde_bash_does_not_expand_is_not_taken_for_the_home_folder(tmp_path: Path) -> None:
    # bash expands neither `--git-dir=~/x` nor a quoted "~/x": git then reads ./~/x
    armed = tmp_path / "~" / "x"
    armed.mkdir(parents=True)
    git(armed, "init", "-q", ".")
    git(armed, "config", "core.fsmonitor", "./run.sh")
    for command in ("git --git-dir=~/x/.git --work-tree=~/x status", 'git -C "~/x" status'):
        reason = git_reason(command, str(tmp_path), None)
        assert reason is not None, command


async def test_a_repository_the_same_line_adds_is_checked_before_git_enters_it(
    kit: Any, tmp_path: Path
) -> None:
    # `git add -A` makes an untracked repository (vendor/) a gitlink; the `git status` after it
    # then enters it as a submodule and runs its fsmonitor
    repo = repository(tmp_path)
    vendor = repo / "vendor"
    vendor.mkdir()
    git(vendor, "init", "-q", ".")
    (vendor / "b.txt").write_text("b\n")
    git(vendor, "add", "b.txt")
    git(vendor, "commit", "-qm", "init")
    git(vendor, "config", "core.fsmonitor", script(tmp_path, "embedded"))
    (vendor / "b.txt").write_text("changed\n")
    command = "git add -A && git status"
    asked = Asked()
    source = allow("Bash(git add:*)", "Bash(git status)")(kit)
    async with harness(repo, [calls(command), faux_response("ok")], source, asked) as (r, _):
        results = await run(r)
    (request,) = asked.requests
    assert f"(core.fsmonitor in {vendor}/.git/config)" in request["reason"]
    assert results == ["Tool call blocked: the user denied this call"]
    assert markers(tmp_path) == []
    await anyio.run_process(["bash", "-c", command], cwd=repo, check=False)
    assert markers(tmp_path) == ["embedded"]  # ...though the trap was armed


async def test_an_include_naming_a_fifo_asks_at_once(kit: Any, tmp_path: Path) -> None:
    # git would wait for a writer on the FIFO (the check's own git too): the check must not
    # let git open it, and ask because of it; nobody ever writes to it here
    repo = repository(tmp_path)
    fifo = tmp_path / "payload.fifo"
    os.mkfifo(fifo)
    git(repo, "config", "include.path", str(fifo))
    asked = Asked()
    source = allow("Bash(git status)")(kit)
    async with harness(repo, [calls("git status"), faux_response("ok")], source, asked) as (r, _):
        results = await run(r)
    (request,) = asked.requests
    assert (
        f"an unknown program (it includes {fifo}, not a file this check can read)"
        in (request["reason"])
    )
    assert not request.get("repositories")  # what it includes cannot be pinned: no "always"
    assert results == ["Tool call blocked: the user denied this call"]
