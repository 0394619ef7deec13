"""pico3.Sandbox: the bwrap argv a policy makes, refusals explained, availability (issue 41).

The escapes themselves are attempted through the real ``bash`` tool in
tests/app/worker/test_sandbox.py; here the policy's shape and the unavailable paths.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from pico3 import (
    OUTSIDE_HINT,
    SANDBOX_MODE_SERVICE,
    SANDBOX_SERVICE,
    Sandbox,
    SandboxMode,
    SandboxPolicy,
    SandboxStatus,
    commands_sandbox,
    domain_allowed,
    explain_refusal,
    job_input,
    sandbox_available,
)
from pico3.sandbox_placeholders import _WRAPPER  # pyright: ignore[reportPrivateUsage]
from pico3.unix_sockets import unix_socket_filter

needs_bwrap = pytest.mark.skipif(
    not sandbox_available().available, reason=sandbox_available().reason
)


def _policy(tmp_path: Path) -> SandboxPolicy:
    project, home = tmp_path / "project", tmp_path / "home"
    (project / ".git" / "hooks").mkdir(parents=True, exist_ok=True)
    (project / ".secret").mkdir(exist_ok=True)
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    (home / ".netrc").write_text("machine x password p\n")
    return SandboxPolicy(
        project=str(project),
        temp_dir=str(tmp_path / "tmp"),
        deny_read=("~/.ssh", "~/.netrc", "~/.aws", str(project / ".secret")),
        read_only=(str(project / ".git" / "hooks"),),
        home=str(home),
    )


@needs_bwrap
def test_the_argv_binds_then_hides_and_keeps_read_only(tmp_path: Path) -> None:
    policy = _policy(tmp_path)
    argv, env = Sandbox(policy).wrap(["true"], cwd=policy.project, env={"A": "1"})
    assert env == {"A": "1", "TMPDIR": str(tmp_path / "tmp")}
    assert (tmp_path / "tmp").is_dir()
    for option in ("--unshare-all", "--die-with-parent", "--new-session", "--cap-drop"):
        assert option in argv
    assert "--share-net" not in argv
    assert argv[-2:] == ["--", "true"]
    # the seccomp filter (no unix sockets): a shell opens its file as fd 3 and becomes bwrap
    assert argv[:3] == ["/bin/sh", "-c", 'exec "$@" 3<"$0"']
    assert argv[argv.index("--seccomp") + 1] == "3"
    assert Path(argv[3]).read_bytes() == unix_socket_filter()
    joined = " ".join(argv)
    project = policy.project
    bind = joined.index(f"--bind {project} {project}")
    hooks = joined.index(f"--ro-bind {project}/.git/hooks")
    hidden = joined.index(f"--tmpfs {project}/.secret --remount-ro {project}/.secret")
    assert bind < hooks < hidden  # later mounts win: hidden beats writable
    assert f"--ro-bind /dev/null {tmp_path}/home/.netrc" in joined
    assert "/.aws" not in joined  # a path that does not exist is not mounted
    done = subprocess.run(
        [*argv[:-1], "cat", f"{tmp_path}/home/.netrc"], env=env, capture_output=True, text=True
    )
    assert "password" not in done.stdout + done.stderr  # /dev/null over it: nothing to read


@needs_bwrap
def test_a_read_only_repository_is_bound_whole_whether_its_git_is_a_folder_or_a_file(
    tmp_path: Path,
) -> None:
    policy = _policy(tmp_path)
    project = Path(policy.project)
    worktree = project / "worktree"
    worktree.mkdir()
    (worktree / ".git").write_text("gitdir: /elsewhere/.git/worktrees/w\n")  # a worktree's
    policy = dataclasses.replace(policy, read_only_repositories=(str(project), str(worktree)))
    argv, _env = Sandbox(policy).wrap(["true"], cwd=policy.project, env={})
    joined = " ".join(argv)
    assert f"--ro-bind {project}/.git {project}/.git" in joined
    assert f"--ro-bind {worktree}/.git {worktree}/.git" in joined
    assert (
        f"  read-only inside: {worktree}/.git (its submodules' and those in its folders 2 down "
        "too; not created where no repository is)"
    ) in policy.describe()
    no_git = dataclasses.replace(policy, read_only_repositories=(str(tmp_path / "home"),))
    assert "/home/.git" not in " ".join(Sandbox(no_git).wrap(["true"], cwd="/", env={})[0])


def test_refusals_are_explained_in_one_line() -> None:
    line = explain_refusal("bash: line 1: /x: Read-only file system")
    assert line is not None and line.startswith("[Sandbox: the sandbox refused a write")
    assert line.endswith(f"{OUTSIDE_HINT}.]") and "\n" not in line
    net = explain_refusal("curl: (6) Could not resolve host: example.com")
    assert net is not None and "no network" in net
    hidden = explain_refusal("cat: /h/.ssh/id_rsa: No such file or directory", ["/h/.ssh"])
    assert hidden is not None and "/h/.ssh is hidden inside the sandbox" in hidden
    assert explain_refusal("error: tests failed") is None


def test_without_bwrap_on_path_there_is_no_sandbox(tmp_path: Path) -> None:
    status = sandbox_available(str(tmp_path))
    assert status == SandboxStatus(
        False, "bubblewrap (bwrap) is not on PATH: install it (apt-get install bubblewrap)"
    )
    found = Sandbox.create(_policy(tmp_path), str(tmp_path))
    assert found == status
    with pytest.raises(RuntimeError, match="no sandbox: bubblewrap"):
        Sandbox(_policy(tmp_path), status)


@pytest.mark.skipif(unix_socket_filter() is None, reason="no seccomp filter for this machine")
def test_a_bubblewrap_that_cannot_load_the_filter_is_no_sandbox(tmp_path: Path) -> None:
    """The probe loads the filter as every command does: where it cannot, nothing would run
    without it, and the status says why (the host then asks instead)."""
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\n"
        'case " $* " in *" --seccomp 3 "*) echo "bwrap: prctl(PR_SET_SECCOMP): Invalid argument" >&2; exit 1;; esac\n'
        "exit 0\n"
    )
    fake.chmod(0o755)
    status = sandbox_available(str(tmp_path))
    assert not status.available
    assert "PR_SET_SECCOMP" in status.reason and "CONFIG_SECCOMP_FILTER" in status.reason


def test_a_job_label_is_checked_and_kept() -> None:
    value = job_input(
        "/usr/bin/bwrap", ["--", "bash", "-c", "x"], cwd=os.getcwd(), label="bash -c x"
    )
    assert value["label"] == "bash -c x"
    with pytest.raises(ValueError, match=r"pi\.job input\.label"):
        job_input("bwrap", cwd="/", label="")


def test_domains_match_exactly_or_under_a_wildcard() -> None:
    allow = ["pypi.org", "*.pythonhosted.org"]
    assert domain_allowed("pypi.org", allow) and domain_allowed("PyPI.org.", allow)
    assert domain_allowed("files.pythonhosted.org", allow)
    assert not domain_allowed("pythonhosted.org", allow)  # the wildcard means a subdomain
    assert not domain_allowed("evilpypi.org", allow) and not domain_allowed("pypi.org.evil", allow)


@needs_bwrap
def test_commands_run_inside_when_enforced_or_while_the_mode_is_sandbox(tmp_path: Path) -> None:
    policy = _policy(tmp_path)
    optional, enforced = Sandbox(policy), Sandbox(policy, enforced=True)
    mode = SandboxMode()
    assert commands_sandbox({}) is None
    assert commands_sandbox({SANDBOX_SERVICE: enforced}) is enforced
    assert commands_sandbox({SANDBOX_SERVICE: optional, SANDBOX_MODE_SERVICE: mode}) is None
    mode.active = True  # the approval feature: the session's mode became ``sandbox``
    assert commands_sandbox({SANDBOX_SERVICE: optional, SANDBOX_MODE_SERVICE: mode}) is optional
    assert (
        commands_sandbox({SANDBOX_SERVICE: SandboxStatus(False, "no"), SANDBOX_MODE_SERVICE: mode})
        is None
    )


# -- placeholders: the folders no command may create (pico3.sandbox_placeholders) --------------


def _placeholder_policy(tmp_path: Path, *names: str, git: bool = False) -> SandboxPolicy:
    """The project's folders ``names`` kept absent (and its ``.git`` with ``git``)."""
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    return SandboxPolicy(
        project=str(project),
        temp_dir=str(tmp_path / "tmp"),
        read_only_folders=tuple(str(project / name) for name in names),
        read_only_repositories=(str(project),) if git else (),
    )


async def _run(
    sandbox: Sandbox, script: str, cwd: str, processes: Any
) -> tuple[subprocess.CompletedProcess[str], str]:
    """``script`` run inside to its end, then its placeholders' watcher too; with the lock."""
    argv, env = sandbox.wrap(["bash", "-c", script], cwd=cwd, env={"PATH": os.environ["PATH"]})
    assert argv[2] == _WRAPPER  # bash takes the lock and becomes bubblewrap
    lock = argv[4]
    others = processes.holding(lock)  # the watchers of commands still running (not this one's)
    done = await anyio.run_process(argv, env=env, check=False)
    text = subprocess.CompletedProcess(
        argv, done.returncode, done.stdout.decode(), done.stderr.decode()
    )
    await processes.ended([pid for pid in processes.holding(lock) if pid not in others])
    return text, lock


needs_flock = pytest.mark.skipif(shutil.which("flock") is None, reason="no flock (util-linux)")


@needs_bwrap
@needs_flock
@pytest.mark.anyio
async def test_a_missing_folder_cannot_be_created_inside_and_is_gone_after(
    tmp_path: Path, processes: Any
) -> None:
    """``.vscode`` and ``.idea`` are missing: inside, each is an empty read-only folder (nothing
    can be made in it or in its place); after the command nothing is left of them. The
    project has no git repository (nor one above it): ``git init`` is refused the same way."""
    if any((d / ".git").exists() for d in tmp_path.parents):
        pytest.skip("the test folder is inside a git repository")
    policy = _placeholder_policy(tmp_path, ".vscode", ".idea", git=True)
    done, _lock = await _run(
        Sandbox(policy),
        "ls -A; mkdir .vscode/x; echo '{}' > .idea/workspace.xml; rmdir .vscode; git init -q; "
        "echo work > notes.txt",
        policy.project,
        processes,
    )
    assert done.stdout.split() == [".git", ".idea", ".vscode"], done.stdout
    assert done.stderr.count("Read-only file system") == 3, done.stderr
    assert "rmdir: failed to remove '.vscode': Device or resource busy" in done.stderr
    assert [p.name for p in (tmp_path / "project").iterdir()] == ["notes.txt"]


@needs_bwrap
@needs_flock
@pytest.mark.anyio
async def test_a_placeholder_stays_while_another_command_still_runs(
    tmp_path: Path, processes: Any
) -> None:
    """A background command holds the placeholder; a second command starts and ends meanwhile.
    The folder stays (removing it would undo the first command's mount), and the first command
    still cannot create it; the last one to end removes it."""
    policy = _placeholder_policy(tmp_path, ".vscode")
    sandbox = Sandbox(policy)
    project = tmp_path / "project"
    script = 'echo ready; read -r _; mkdir .vscode/tasks; echo "rc=$?"'
    argv, env = sandbox.wrap(
        ["bash", "-c", script], cwd=policy.project, env={"PATH": os.environ["PATH"]}
    )
    async with await anyio.open_process(argv, env=env, stderr=subprocess.STDOUT) as first:
        assert first.stdin is not None and first.stdout is not None
        assert await first.stdout.receive() == b"ready\n"  # inside, its placeholder laid
        second, lock = await _run(
            sandbox, "test -d .vscode && echo there", policy.project, processes
        )
        assert second.stdout == "there\n"
        assert (project / ".vscode").is_dir()  # the first one still runs: not removed
        await first.stdin.send(b"go\n")
        out = b""
        async for chunk in first.stdout:
            out += chunk
    assert b"Read-only file system" in out and out.endswith(b"rc=1\n"), out
    await processes.ended(processes.holding(lock))
    assert list(project.iterdir()) == []


@needs_bwrap
@needs_flock
@pytest.mark.anyio
async def test_a_killed_commands_placeholder_is_removed_by_the_next_and_a_filled_one_is_kept(
    tmp_path: Path, processes: Any
) -> None:
    """A command killed with its process group leaves its placeholder (its watcher died too);
    the next command uses it as its own and removes it. A placeholder the user put a file in
    meanwhile is theirs: kept, and bound read-only as any existing folder."""
    policy = _placeholder_policy(tmp_path, ".vscode", ".idea")
    sandbox = Sandbox(policy)
    project = tmp_path / "project"
    argv, env = sandbox.wrap(
        ["bash", "-c", "echo up; sleep 600"], cwd=policy.project, env={"PATH": "/usr/bin:/bin"}
    )
    async with await anyio.open_process(argv, env=env, start_new_session=True) as killed:
        assert killed.stdout is not None and await killed.stdout.receive() == b"up\n"
        os.killpg(killed.pid, signal.SIGKILL)
        await killed.wait()
    await processes.ended(processes.holding(argv[4]))
    assert sorted(p.name for p in project.iterdir()) == [".idea", ".vscode"]
    (project / ".idea" / "workspace.xml").write_text("<project/>\n")  # the user's now
    done, _lock = await _run(
        sandbox, "echo x > .idea/workspace.xml; ls .idea", policy.project, processes
    )
    assert "Read-only file system" in done.stderr and done.stdout == "workspace.xml\n"
    assert [p.name for p in project.iterdir()] == [".idea"]
    assert (project / ".idea" / "workspace.xml").read_text() == "<project/>\n"


@needs_bwrap
def test_a_tree_with_no_repository_of_its_own_keeps_git_absent_inside_another_too(
    tmp_path: Path,
) -> None:
    outer = tmp_path / "outer"
    (outer / ".git").mkdir(parents=True)
    (outer / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (outer / "sub").mkdir()
    inside = dataclasses.replace(
        _placeholder_policy(tmp_path),
        project=str(outer),
        read_only_repositories=(str(outer / "sub"),),
    )
    # a session in a folder of a repository: git init there is refused too
    assert inside.kept_absent() == [f"{outer}/sub/.git"]
    (outer / "sub" / ".git").mkdir()
    (outer / "sub" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert inside.kept_absent() == []  # a repository of its own: read-only instead
    assert inside.kept_read_only() == [f"{outer}/sub/.git"]
    alone = _placeholder_policy(tmp_path, ".claude", git=True)
    assert alone.kept_absent() == [f"{alone.project}/.claude", f"{alone.project}/.git"]


@needs_bwrap
def test_where_nothing_can_lock_the_placeholders_are_made_and_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``flock`` here (or a file system without locks): the missing folders are made before
    the command and left, empty, still read-only inside; the command runs as it is."""
    import pico3.sandbox_placeholders as placeholders_module

    folder = os.path.join(placeholders_module.private_folder(), "placeholders")
    monkeypatch.setitem(placeholders_module._lockable, folder, False)  # pyright: ignore[reportPrivateUsage]
    policy = _placeholder_policy(tmp_path, ".vscode")
    argv, env = Sandbox(policy).wrap(["mkdir", ".vscode/x"], cwd=policy.project, env={})
    assert argv[2] != _WRAPPER and (tmp_path / "project" / ".vscode").is_dir()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert "Read-only file system" in done.stderr
    assert list((tmp_path / "project" / ".vscode").iterdir()) == []
