"""pico3.run_git: git for the agent's own purposes runs nothing a repository configured.

A real repository whose ``.git/config`` points ``core.fsmonitor``, a ``.gitattributes``-selected
filter driver (``clean`` and ``process``), a diff driver's ``textconv``, ``diff.external`` and a
``post-index-change`` hook at scripts that leave a marker file. Plain git runs them (the test
proves the trap is armed); :func:`pico3.run_git` never does, whatever the command.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import suppress
from itertools import pairwise
from pathlib import Path

import pytest

from pico3 import run_git
from pico3.git import submodule_git_entries

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def armed_repository(root: Path) -> tuple[Path, Path]:
    """A committed repository with every trap set; returns (repo, marker folder)."""
    markers = root / "markers"
    markers.mkdir()
    repo = root / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", ".")
    (repo / "a.txt").write_text("hello\n")
    (repo / "b.Weird").write_text("weird\n")
    (repo / ".gitattributes").write_text("*.txt filter=evil diff=evil\n*.Weird filter=Odd.One\n")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "init")

    def script(name: str, body: str = "") -> str:
        path = root / f"{name}.sh"
        path.write_text(f"#!/bin/sh\ntouch {markers / name}\n{body}")
        path.chmod(0o755)
        return str(path)

    config = {
        "core.fsmonitor": script("fsmonitor"),
        "filter.evil.clean": script("clean", "cat\n"),
        "filter.evil.process": script("process"),
        "filter.evil.required": "true",
        "filter.Odd.One.clean": script("odd", "cat\n"),
        "diff.evil.textconv": script("textconv", 'cat "$1"\n'),
        "diff.external": script("external"),
    }
    for key, value in config.items():
        _git(repo, "config", key, value)
    hook = Path(script("hook"))
    shutil.copy(hook, repo / ".git" / "hooks" / "post-index-change")
    stamp = (repo / "a.txt").stat()  # same size, newer time: status must hash (filter) it
    os.utime(repo / "a.txt", ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 10**10))
    (repo / "b.Weird").write_text("weird\nchanged\n")
    return repo, markers


def test_plain_git_runs_the_repositorys_programs(tmp_path: Path) -> None:
    # The trap is real: without run_git, an ordinary listing and status run the scripts.
    repo, markers = armed_repository(tmp_path)
    subprocess.run(["git", "ls-files", "-co"], cwd=repo, capture_output=True, check=False)
    subprocess.run(["git", "status"], cwd=repo, capture_output=True, check=False)
    assert {"fsmonitor", "process"} <= set(os.listdir(markers))


@pytest.mark.parametrize(
    "args",
    [
        ("ls-files", "-z", "--cached", "--others", "--exclude-standard"),
        ("rev-parse", "--show-toplevel"),
        ("status", "--porcelain"),
        ("diff",),
        ("diff", "HEAD"),
        ("log", "-p", "-1"),
        ("show", "HEAD"),
    ],
)
def test_run_git_runs_none_of_them(tmp_path: Path, args: tuple[str, ...]) -> None:
    repo, markers = armed_repository(tmp_path)
    done = run_git(repo, *args)
    assert done.returncode == 0, done.stderr
    assert os.listdir(markers) == []


def test_run_git_still_does_the_job(tmp_path: Path) -> None:
    repo, markers = armed_repository(tmp_path)
    listed = run_git(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    assert sorted(listed.stdout.split(b"\0")[:-1]) == [b".gitattributes", b"a.txt", b"b.Weird"]
    status = run_git(repo, "status", "--porcelain").stdout.decode()
    assert status == " M b.Weird\n"  # a.txt's content was compared (unfiltered): unchanged
    assert "+changed" in run_git(repo, "diff").stdout.decode()
    assert os.listdir(markers) == []


def test_inherited_git_variables_do_not_redirect_it(tmp_path: Path) -> None:
    repo, markers = armed_repository(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    env = {
        **os.environ,
        "GIT_DIR": str(other),
        "GIT_CONFIG_PARAMETERS": "'core.fsmonitor'='" + str(tmp_path / "fsmonitor.sh") + "'",
    }
    done = run_git(repo, "rev-parse", "--show-toplevel", env=env)
    assert done.stdout.decode().strip() == str(repo)
    assert os.listdir(markers) == []


def test_run_git_refuses_other_commands(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"run_git runs only git's built-in .*got \['commit'\]"):
        run_git(tmp_path, "commit")
    with pytest.raises(ValueError, match=r"got \[\]"):
        run_git(tmp_path)


def _committed(folder: Path) -> Path:
    folder.mkdir()
    _git(folder, "init", "-q", ".")
    _git(folder, *WHO, "commit", "-q", "--allow-empty", "-m", "first")
    return folder


WHO = ("-c", "user.email=t@example.com", "-c", "user.name=t")
FILES = ("-c", "protocol.file.allow=always")


def test_submodule_git_entries_names_every_repository_git_enters(tmp_path: Path) -> None:
    """An absorbed submodule (its ``.git`` a file) and its own submodule, one not checked out
    (its empty folder), an embedded repository added as it is (its ``.git`` a folder); read
    without running the superproject's ``core.fsmonitor``, and read again once the index
    changes."""
    repo, markers = armed_repository(tmp_path)
    lib = _committed(tmp_path / "lib")
    outer = _committed(tmp_path / "outer")
    _git(outer, *FILES, "submodule", "add", "-q", str(lib), "deep")
    _git(outer, *WHO, "commit", "-qm", "with deep")
    _git(repo, *FILES, "submodule", "add", "-q", str(outer), "libs/outer")
    _git(repo / "libs" / "outer", *FILES, "submodule", "update", "-q", "--init")
    _git(repo, *FILES, "submodule", "add", "-q", str(lib), "libs/unfetched")
    shutil.rmtree(repo / "libs" / "unfetched")
    (repo / "libs" / "unfetched").mkdir()  # as a clone leaves a submodule never updated
    (markers / "fsmonitor").unlink(missing_ok=True)  # plain git ran it above

    libs = repo / "libs"
    entries = submodule_git_entries(repo)
    assert sorted(entries) == sorted(
        str(p)
        for p in (libs / "outer" / ".git", libs / "outer" / "deep" / ".git", libs / "unfetched")
    )
    assert (libs / "outer" / ".git").is_file() and (libs / "outer" / "deep" / ".git").is_file()
    assert submodule_git_entries(libs) == entries, "from a folder of the repository"
    assert not (markers / "fsmonitor").exists(), "git ran with the repository's fsmonitor off"

    embedded = _committed(repo / "embedded")
    subprocess.run(["git", "add", "embedded"], cwd=repo, check=True, capture_output=True)
    assert str(embedded / ".git") in submodule_git_entries(repo), "the index changed: read again"
    assert (embedded / ".git").is_dir()
    assert submodule_git_entries(tmp_path) == [], "not in a repository"


def test_submodule_git_entries_pass_over_an_empty_dot_git_as_git_does(tmp_path: Path) -> None:
    """A session folder inside a repository has the sandbox's empty ``.git`` placeholder while
    a command runs: git passes over it to the outer repository, and so must the search for the
    index that lists the submodules below (they stay read-only for the next command)."""
    outer = _committed(tmp_path / "outer")
    lib = _committed(tmp_path / "lib")
    _git(outer, *FILES, "submodule", "add", "-q", str(lib), "sub/a/b/lib")
    session = outer / "sub"
    (session / ".git").mkdir()
    assert submodule_git_entries(session) == [str(session / "a" / "b" / "lib" / ".git")]


def _nested(top: Path, levels: int) -> list[Path]:
    """``levels`` repositories, each an embedded submodule (a gitlink) of the one above."""
    chain = [top]
    for level in range(levels):
        chain.append(_committed(chain[-1] / f"s{level}"))
    for parent, child in reversed(list(pairwise(chain))):
        _git(parent, "add", child.name)
        _git(parent, *WHO, "commit", "-qm", "sub")
    return chain[1:]


def test_submodule_git_entries_follow_submodules_at_any_depth(tmp_path: Path) -> None:
    # git status enters every level (it runs a git status in each submodule, which does the
    # same in its own): the sixth level's .git stays read-only like the first's
    chain = _nested(_committed(tmp_path / "repo"), 6)
    assert submodule_git_entries(tmp_path / "repo") == [str(p / ".git") for p in chain]


def test_submodule_git_entries_read_each_repository_once(tmp_path: Path) -> None:
    # a submodule folder that is a link back to its superproject: a cycle, read once
    repo = _committed(tmp_path / "repo")
    (inner,) = _nested(repo, 1)
    shutil.rmtree(inner)
    inner.symlink_to(repo)
    assert submodule_git_entries(repo) == [str(inner / ".git")]


def test_past_the_limit_a_submodule_is_kept_whole(tmp_path: Path) -> None:
    # past the most indexes one look reads, an unread submodule is its whole folder: the
    # repositories inside it, however deep, are covered with it
    chain = _nested(_committed(tmp_path / "repo"), 5)
    entries = submodule_git_entries(tmp_path / "repo", limit=3)
    assert entries == [*(str(p / ".git") for p in chain[:3]), str(chain[2])]
    assert all(str(p).startswith(str(chain[2])) for p in chain[3:])


# -- repository_programs: the same knowledge, for a git that runs unchanged ---------------------
def test_repository_programs_names_every_armed_setting_and_the_hook(tmp_path: Path) -> None:
    from pico3 import repository_programs

    repo, markers = armed_repository(tmp_path)
    found = repository_programs(repo / "sub" if (repo / "sub").is_dir() else repo, "status")
    assert found is not None and found.folder == os.path.realpath(repo)
    settings = {(p.setting, p.origin) for p in found.programs}
    assert {s for s, _origin in settings} == {
        "core.fsmonitor",
        "filter.evil.clean",
        "filter.evil.process",
        "filter.Odd.One.clean",
        "diff.evil.textconv",
        "diff.external",
        "the post-index-change hook",
    }
    assert ("core.fsmonitor", ".git/config") in settings
    assert str(next(p for p in found.programs if p.setting == "core.fsmonitor")) == (
        f"{tmp_path / 'fsmonitor.sh'} (core.fsmonitor in .git/config)"
    )
    assert os.listdir(markers) == []  # reading the configuration ran nothing


def test_repository_programs_passes_benign_values_and_the_users_own_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pico3 import repository_programs

    user = tmp_path / "user.gitconfig"
    user.write_text("[core]\n\tfsmonitor = /usr/local/bin/mine\n[alias]\n\tst = !git status\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(user))
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", ".")
    assert repository_programs(repo, "status") == repository_programs(repo, "st")
    found = repository_programs(repo, "commit")
    assert found is not None and found.programs == ()  # a fresh repository: .sample hooks only
    for key, value in {
        "core.fsmonitor": "true",
        "filter.lfs.clean": "git-lfs clean -- %f",
        "filter.lfs.smudge": "git-lfs smudge -- %f",
        "filter.lfs.process": "git-lfs filter-process",
        "filter.lfs.required": "true",
        "credential.helper": "",
        "pager.log": "false",
    }.items():
        _git(repo, "config", key, value)
    found = repository_programs(repo, "st")
    assert found is not None and found.programs == ()
    assert repository_programs(tmp_path, "status") is None  # not a repository


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("interactive.diffFilter", "./filter.sh"),  # `git add -p` pipes its diff through it
        ("trailer.sign.cmd", "./sign.sh"),  # `git commit --trailer sign:…`
        ("trailer.sign.command", "./sign.sh"),
        ("hook.lint.command", "./lint.sh"),  # configuration-defined hooks (newer git)
        ("sendemail.sendmailCmd", "./mail.sh"),
        ("imap.tunnel", "./tunnel.sh"),
        ("url.ext::./fetch.sh.insteadOf", "https://example.invalid/"),  # the key holds it
        ("url.EXT::./fetch.sh .pushInsteadOf", "https://example.invalid/"),
    ],
)
def test_repository_programs_knows_the_rarer_settings_that_run_a_program(
    tmp_path: Path, key: str, value: str
) -> None:
    from pico3 import repository_programs

    _git(tmp_path, "init", "-q", ".")
    assert repository_programs(tmp_path, "commit") == repository_programs(tmp_path, "add")
    found = repository_programs(tmp_path, "commit")
    assert found is not None and found.programs == ()
    _git(tmp_path, "config", key, value)
    found = repository_programs(tmp_path, "commit")
    assert found is not None
    (program,) = found.programs
    assert program.setting.lower() == key.lower() and program.origin == ".git/config"


def test_an_ordinary_url_rewrite_runs_nothing(tmp_path: Path) -> None:
    from pico3 import repository_programs

    _git(tmp_path, "init", "-q", ".")
    _git(tmp_path, "config", "url.https://mirror.example/.insteadOf", "https://example.com/")
    _git(tmp_path, "config", "remote.origin.url", "https://example.com/x")
    found = repository_programs(tmp_path, "log")
    assert found is not None and found.programs == ()


def test_submodules_deeper_than_followed_are_an_unknown_program(tmp_path: Path) -> None:
    from pico3 import repository_programs
    from pico3.git_programs import _SUBMODULE_DEPTH  # pyright: ignore[reportPrivateUsage]

    identity = ("-c", "user.email=t@example.com", "-c", "user.name=t")
    chain = [tmp_path]
    for level in range(_SUBMODULE_DEPTH + 1):
        chain.append(chain[-1] / f"s{level}")
    for folder in chain:
        folder.mkdir(exist_ok=True)
        _git(folder, "init", "-q", ".")
        (folder / "f").write_text("x\n")
        _git(folder, "add", "f")
        _git(folder, *identity, "commit", "-qm", "init")
    for parent, child in reversed(list(pairwise(chain))):
        _git(parent, "add", child.name)
        _git(parent, *identity, "commit", "-qm", "sub")
    found = repository_programs(chain[0], "status")
    assert found is not None
    (program,) = found.programs
    assert program.origin == str(chain[-1]) and "nested deeper than" in program.program
    _git(chain[-2], "config", "core.fsmonitor", "./deep.sh")  # the deepest one followed
    found = repository_programs(chain[0], "status")
    assert found is not None and [p.setting for p in found.programs] == [
        "core.fsmonitor",
        "its configuration",
    ]


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="gives a folder to another user"
)
def test_a_repository_the_system_configuration_trusts_is_read_whoever_owns_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `safe.directory = *` in /etc/gitconfig (many container images): git enters a repository
    # another user owns and runs its fsmonitor, its submodule's too; the check must see them
    from pico3 import repository_programs

    identity = ("-c", "user.email=t@example.com", "-c", "user.name=t")
    repo, lib = tmp_path / "repo", tmp_path / "repo" / "lib"
    for folder in (repo, lib):
        folder.mkdir()
        _git(folder, "init", "-q", ".")
        (folder / "f").write_text("x\n")
        _git(folder, "add", "f")
        _git(folder, *identity, "commit", "-qm", "init")
    _git(repo, "add", "lib")
    _git(repo, "config", "core.fsmonitor", "./top.sh")
    _git(lib, "config", "core.fsmonitor", "./lib.sh")
    for path in (tmp_path, *tmp_path.rglob("*")):
        os.lchown(path, 65534, 65534)  # nobody's
    system = tmp_path.parent / f"{tmp_path.name}.system.gitconfig"
    system.write_text("[safe]\n\tdirectory = *\n")
    monkeypatch.delenv("GIT_CONFIG_NOSYSTEM", raising=False)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    assert repository_programs(repo, "status") is None  # git refuses it: nothing runs
    monkeypatch.setenv("GIT_CONFIG_SYSTEM", str(system))
    found = repository_programs(repo, "status")
    assert found is not None
    assert [p.program for p in found.programs] == ["./top.sh", "./lib.sh"]


def test_an_include_this_reading_cannot_see_is_an_unknown_program(tmp_path: Path) -> None:
    # `include.path = /dev/stdin`: `git status < payload.cfg` (an allowed `git status`, an
    # input redirection) reads payload.cfg's fsmonitor, the check's git reads /dev/null
    from pico3 import repository_programs

    _git(tmp_path, "init", "-q", ".")
    (tmp_path / ".git" / "real.cfg").write_text("[core]\n\tbare = false\n")
    _git(tmp_path, "config", "include.path", "real.cfg")  # a file, next to .git/config
    _git(tmp_path, "config", "includeIf.onbranch:x.path", "missing.cfg")  # includes nothing
    found = repository_programs(tmp_path, "status")
    assert found is not None and found.programs == ()
    (tmp_path / "dev").symlink_to("/dev")
    for value in ("/dev/stdin", "/proc/self/fd/0", "../dev/fd/0"):
        _git(tmp_path, "config", "--replace-all", "include.path", value)
        found = repository_programs(tmp_path, "status")
        assert found is not None
        (program,) = found.programs
        assert program.setting == "include.path" and f"it includes {value}," in program.program
    _git(tmp_path, "config", "--unset-all", "include.path")
    config = tmp_path / ".git" / "config"
    config.rename(tmp_path / ".git" / "config.real")
    config.symlink_to("/dev/stdin")  # the repository's own configuration, read from the input
    found = repository_programs(tmp_path, "status")
    assert found is not None
    (program,) = found.programs
    assert program.origin == str(config) and "cannot read" in program.program


def test_a_git_file_read_from_the_input_is_an_unknown_program(tmp_path: Path) -> None:
    # `.git` -> /dev/stdin: `git status < g.txt` reads `gitdir: /elsewhere/.git` from the input
    from pico3 import repository_programs

    folder = tmp_path / "work"
    folder.mkdir()
    (folder / ".git").symlink_to("/dev/stdin")
    found = repository_programs(folder, "status")
    assert found is not None
    (program,) = found.programs
    assert program.origin == str(folder / ".git") and "cannot read" in program.program
    (folder / ".git").unlink()
    _git(folder, "init", "-q", ".")
    (folder / ".git" / "commondir").symlink_to("/dev/stdin")
    found = repository_programs(folder / ".git", "status")
    assert found is not None
    (program,) = found.programs
    assert program.origin == str(folder / ".git" / "commondir")


def test_a_hook_or_hooks_folder_that_is_another_file_for_git_is_a_program(tmp_path: Path) -> None:
    # `pre-commit -> /dev/fd/3` runs what `git commit 3< x` opened; `/proc/self/cwd` is git's
    # folder for git and this reader's for this reader
    from pico3 import repository_programs

    _git(tmp_path, "init", "-q", ".")
    hook = tmp_path / ".git" / "hooks" / "pre-commit"
    hook.symlink_to("/dev/fd/3")
    found = repository_programs(tmp_path, "commit")
    assert found is not None
    assert [(p.setting, p.program) for p in found.programs] == [
        ("the pre-commit hook", ".git/hooks/pre-commit")
    ]
    hook.unlink()
    _git(tmp_path, "config", "core.hooksPath", "/proc/self/cwd/hooks")
    found = repository_programs(tmp_path, "commit")
    assert found is not None
    assert [(p.setting, p.program) for p in found.programs] == [
        ("core.hooksPath", "/proc/self/cwd/hooks")
    ]


@pytest.mark.parametrize("nested", [False, True], ids=["included", "included-by-an-include"])
def test_an_include_naming_a_fifo_is_an_unknown_program_at_once(
    tmp_path: Path, nested: bool
) -> None:
    # git opens an include whatever it is: a FIFO makes every git there (rev-parse, config
    # --list) wait for a writer. Nobody writes here: the check must answer without git opening
    # it (a worker thread, joined with a generous deadline; the FIFO is opened for writing
    # only afterwards, to release a reader if the check did hang).
    import threading

    from pico3 import RepositoryPrograms, repository_programs

    _git(tmp_path, "init", "-q", ".")
    fifo = tmp_path / "payload.fifo"
    os.mkfifo(fifo)
    if nested:  # a regular included file that includes the FIFO, relative to itself
        (tmp_path / "more").mkdir()
        (tmp_path / "more" / "a.cfg").write_text("[include]\n\tpath = ../payload.fifo\n")
        _git(tmp_path, "config", "include.path", "../more/a.cfg")
    else:
        _git(tmp_path, "config", "includeIf.onbranch:nothing.path", str(fifo))
    answers: list[RepositoryPrograms | None] = []
    worker = threading.Thread(
        target=lambda: answers.append(repository_programs(tmp_path, "status", timeout=600)),
        daemon=True,
    )
    worker.start()
    worker.join(timeout=60)
    hung = worker.is_alive()
    while worker.is_alive():  # release each git waiting on the FIFO (old code), then fail
        with suppress(OSError):  # ENXIO: no reader waits right now
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(timeout=0.1)
    assert not hung, "the check waited on the FIFO"
    (found,) = answers
    assert found is not None
    (program,) = found.programs
    assert "not a file this check can read" in program.program
    assert found.git_dir == ""  # an unknown program: never remembered
