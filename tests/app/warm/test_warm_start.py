"""The warm start (coding_agent.warm): the real binary, a real fork server, temp HOME/XDG dirs.

Every server a test starts (itself, or a client's cold run in the background) is stopped at the
end by :func:`_stop_servers`: the stop request, then a wait until the server's lock is free.
Waits poll a condition with a deadline; nothing sleeps to synchronise.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from coding_agent.settings import warm_start as rendezvous
from coding_agent.supervisor import worker_command
from tests.conftest import sigint_as_in_a_terminal

BINARY = str(Path(sys.executable).with_name("coding-agent"))
DEADLINE = 120.0
_STARTED: dict[str, list[subprocess.Popen[bytes]]] = {}
"""The servers each test started itself (by runtime folder), waited for at its end."""


def _until(check: Callable[[], object], what: str, deadline: float = DEADLINE) -> None:
    end = time.monotonic() + deadline
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)  # polling a condition with a deadline, not synchronising on time


def _lock_free(env: dict[str, str]) -> bool:
    try:
        fd = os.open(rendezvous.socket_path(env) + ".lock", os.O_RDWR)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def _stop_servers(env: dict[str, str]) -> None:
    """Stop whatever server runs for ``env`` (one still preloading too) and wait until it is
    gone: its lock free, its socket removed."""

    def gone() -> bool:
        rendezvous.stop(env)
        return _lock_free(env)

    _until(gone, "the warm-start server to stop")
    assert not os.path.exists(rendezvous.socket_path(env))


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    runtime = tempfile.mkdtemp(prefix="ws")  # short: a Unix socket path has ~107 bytes
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "OPENAI_"))}
    environment = {k: v for k, v in environment.items() if not k.startswith("ANTHROPIC_")}
    environment |= {
        "HOME": str(tmp_path / "home"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_RUNTIME_DIR": runtime,
        rendezvous.ENV: "1",
    }
    try:
        yield environment
    finally:
        _stop_servers(environment)
        for server in _STARTED.pop(runtime, []):
            server.wait(timeout=DEADLINE)
        shutil.rmtree(runtime, ignore_errors=True)


def _start_server(
    env: dict[str, str], *, serving: bool = True, nice: str = "", **extra: str
) -> subprocess.Popen[bytes]:
    log = open(os.path.join(env["XDG_RUNTIME_DIR"], "test-server.log"), "ab")  # noqa: SIM115
    niced = ["nice", "-n", nice] if nice else []
    with log:
        server = subprocess.Popen(
            [*niced, sys.executable, "-P", "-m", "coding_agent.warm.server"],
            env={**env, **extra},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )
    _STARTED.setdefault(env["XDG_RUNTIME_DIR"], []).append(server)
    if not serving:
        return server
    _until(lambda: rendezvous.ping(env) is not None or server.poll() is not None, "the server")
    assert server.poll() is None, _server_log(env)
    return server


def _server_log(env: dict[str, str]) -> str:
    return Path(env["XDG_RUNTIME_DIR"], "test-server.log").read_text()


def _served(env: dict[str, str]) -> int:
    answer = rendezvous.ping(env)
    assert answer is not None
    return int(answer["served"])


def _script(folder: Path, steps: list[dict[str, object]]) -> Path:
    path = folder / "script.json"
    path.write_text(json.dumps(steps))
    return path


def _held_bash_script(project: Path) -> tuple[Path, Path]:
    """A fifo and a faux script whose bash call writes ``started.txt`` then waits on the fifo."""
    fifo = project.parent / "hold"
    os.mkfifo(fifo)
    command = f"echo started > started.txt; read line < {fifo}"
    script = _script(project.parent, [
        {"toolCalls": [{"name": "bash", "arguments": {"command": command}}]},
        {"text": "done"},
    ])  # fmt: skip
    return fifo, script


def _run(
    env: dict[str, str], cwd: Path, *args: str, warm: bool
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BINARY, *args],
        env={**env, rendezvous.ENV: "1" if warm else "0"},
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "README.md").write_text("The answer is 42.\n")
    return folder


BLOCKED_THEN_ANSWER = [
    {"text": "Reading.", "toolCalls": [{"name": "read", "arguments": {"path": "README.md"}}]},
    {"toolCalls": [{"name": "bash", "arguments": {"command": "touch ran.txt"}}]},
    {"text": "The README says the answer is 42."},
]


def test_a_warm_run_prints_what_a_cold_run_prints(env: dict[str, str], project: Path) -> None:
    script = _script(project.parent, BLOCKED_THEN_ANSWER)
    cold = _run(env, project, "-p", "what is in the README?", "--faux-script", str(script),
                warm=False)  # fmt: skip
    _start_server(env)
    warm = _run(env, project, "-p", "what is in the README?", "--faux-script", str(script),
                warm=True)  # fmt: skip
    assert _served(env) == 1  # the server's child ran it, not the client
    assert cold.returncode == 3  # the bash call was blocked: a real stderr and status to compare
    assert "blocked the bash call (touch ran.txt)" in cold.stderr
    assert (warm.stdout, warm.stderr, warm.returncode) == (
        cold.stdout, cold.stderr, cold.returncode
    )  # fmt: skip
    assert not (project / "ran.txt").exists()


def test_the_status_comes_once_the_command_is_done_with_the_session_free(
    env: dict[str, str], project: Path
) -> None:
    """The child tells the client its status before its interpreter's teardown (which runs
    after, unobserved): by then all output is written and the session's lock is free, so a
    ``--continue`` started the moment the client exits takes the same session."""
    script = _script(project.parent, [{"text": "first answer"}, {"text": "second answer"}])
    _start_server(env)
    for prompt, extra, answer in (("one", (), "first answer"), ("two", ("-c",), "second answer")):
        ran = _run(env, project, "-p", prompt, *extra, "--faux-script", str(script), warm=True)
        assert (ran.returncode, ran.stdout, ran.stderr) == (0, f"{answer}\n", "")
    assert _served(env) == 2
    from coding_agent.session_files.folders import list_sessions

    [session] = list_sessions(project, env=env)
    assert not session.worker_running()


def _limited(
    nofile: int = 0, nice: int = 0, cpus: set[int] | None = None, address_space: int = 0
) -> Callable[[], None]:
    """A ``preexec_fn`` putting the client under a lower soft open-files limit, a nice value,
    a CPU affinity and an address-space limit (each when given)."""
    import resource

    def limit() -> None:
        if nofile:
            resource.setrlimit(
                resource.RLIMIT_NOFILE, (nofile, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
            )
        if nice:
            os.nice(nice)
        if cpus:
            os.sched_setaffinity(0, cpus)
        if address_space:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    return limit


def test_the_child_sees_the_clients_folder_environment_umask_and_limits(
    env: dict[str, str], project: Path
) -> None:
    """What a process the client started would run under: its folder, environment, umask,
    resource limits, nice value and CPU affinity (the command's own commands show them)."""
    folder = project / "sub"
    folder.mkdir()
    command = (
        'pwd > seen.txt; echo "$WARM_PROBE" >> seen.txt; umask >> seen.txt; ulimit -Sn >> seen.txt; '
        "nice >> seen.txt; grep Cpus_allowed_list /proc/self/status | cut -f2 >> seen.txt"
    )
    script = _script(project.parent, [
        {"toolCalls": [{"name": "bash", "arguments": {"command": command}}]},
        {"text": "done"},
    ])  # fmt: skip
    _start_server(env)
    cpu = min(os.sched_getaffinity(0))
    ran = subprocess.run(
        [BINARY, "-p", "go", "--faux-script", str(script), "--approve", "allow"],
        # a terminal's size exported (the preload's parser read both): still served
        env={**env, "WARM_PROBE": "only-in-the-client", "COLUMNS": "132", "LINES": "43"},
        cwd=folder,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        umask=0o027,
        preexec_fn=_limited(nofile=200, nice=3, cpus={cpu}),
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "done\n"
    assert _served(env) == 1
    seen = (folder / "seen.txt").read_text().splitlines()
    assert seen == [str(folder.resolve()), "only-in-the-client", "0027", "200", "3", str(cpu)]


def test_no_process_shows_the_clients_keys_while_the_child_runs(
    env: dict[str, str], project: Path
) -> None:
    """The keys go to the server's child with the request; the client, which only relays from
    then on, blanks its ``/proc/<pid>/environ``: a command (here unsandboxed, with --approve
    allow) that reads every process's environment finds the key nowhere."""
    key = "sk-ant-api03-warmprobe" + "x" * 20
    command = f"grep -l {key} /proc/[0-9]*/environ > found.txt 2>/dev/null; echo $$ > pid.txt"
    script = _script(project.parent, [
        {"toolCalls": [{"name": "bash", "arguments": {"command": command}}]},
        {"text": "done"},
    ])  # fmt: skip
    _start_server(env)
    ran = subprocess.run(
        [
            BINARY,
            "-p",
            "go",
            "--faux-script",
            str(script),
            "--approve",
            "allow",
            "--model",
            "faux/faux-1",
        ],
        env={**env, "ANTHROPIC_API_KEY": key},
        cwd=project,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert ran.returncode == 0, ran.stderr
    assert _served(env) == 1
    assert (project / "pid.txt").read_text().strip().isdigit()  # the command ran
    assert (project / "found.txt").read_text() == ""


def test_a_client_the_server_cannot_match_runs_its_command_itself(
    env: dict[str, str], project: Path
) -> None:
    """An address-space limit (``ulimit -v``) binds a fork of the preloaded heap otherwise than
    a new process: that client runs its command itself and the server goes on; a client at a
    lower nice value than the server's (started by a niced run) cannot be matched either, and
    the server makes way for one started at the client's."""
    script = _script(project.parent, [{"text": "hello"}])
    argv = [BINARY, "-p", "hi", "--faux-script", str(script)]
    server = _start_server(env)
    limited = subprocess.run(argv, env=env, cwd=project, capture_output=True, text=True,
                             timeout=DEADLINE, preexec_fn=_limited(address_space=8 << 30))  # fmt: skip
    assert (limited.returncode, limited.stdout) == (0, "hello\n"), limited.stderr
    assert _served(env) == 0 and server.poll() is None
    assert "memory limit (ulimit -v or -d) differs" in _server_log(env)
    _stop_servers(env)
    niced = _start_server(env, nice="5")
    plain = subprocess.run(argv, env=env, cwd=project, capture_output=True, text=True,
                           timeout=DEADLINE)  # fmt: skip
    assert (plain.returncode, plain.stdout) == (0, "hello\n"), plain.stderr
    assert niced.wait(timeout=DEADLINE) == 0  # made way
    assert "the client runs at nice 0, below the server's" in _server_log(env)


def _preloaded_module() -> Path:
    import coding_agent.context.waiting as preloaded  # the server preloads it

    return Path(preloaded.__file__ or "")


def _preloaded_feature_file() -> Path:
    import facets_question  # a preloaded feature package

    # a module only compiled in a session host (in no module table): the fingerprint covers
    # the feature packages' files, not only their imported modules
    source = Path(facets_question.__file__ or "").with_name("tui.py")
    assert source.is_file()
    return source


@pytest.mark.parametrize(
    "changed", [_preloaded_module, _preloaded_feature_file], ids=["module", "feature-package"]
)
def test_a_changed_preloaded_file_makes_the_server_refuse_and_exit(
    env: dict[str, str], project: Path, changed: Callable[[], Path]
) -> None:
    """A preloaded module, or a file of a preloaded feature package's generations, changes:
    the server refuses the next request (the client runs it cold) and ends."""
    script = _script(project.parent, [{"text": "hello"}])
    server = _start_server(env)
    source = changed()
    before = source.stat()
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    try:
        ran = _run(env, project, "-p", "hi", "--faux-script", str(script), warm=True)
        server.wait(timeout=DEADLINE)  # it refused, then ended
    finally:
        os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (ran.returncode, ran.stdout) == (0, "hello\n")  # run cold, in the client
    assert f"stale ({source} changed): refusing and exiting" in _server_log(env)


def test_a_changed_authorities_file_makes_the_server_refuse(
    env: dict[str, str], project: Path
) -> None:
    """The server preloads the first SDK client's TLS context; its fingerprint covers the file
    of the certificate authorities it read (here ``$SSL_CERT_FILE``)."""
    import certifi

    bundle = project.parent / "authorities.pem"
    shutil.copy(certifi.where(), bundle)
    env = {**env, "SSL_CERT_FILE": str(bundle)}
    script = _script(project.parent, [{"text": "hello"}])
    server = _start_server(env)
    first = _run(env, project, "-p", "hi", "--faux-script", str(script), warm=True)
    assert (first.returncode, first.stdout, _served(env)) == (0, "hello\n", 1)
    before = bundle.stat()
    os.utime(bundle, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    ran = _run(env, project, "-p", "hi", "--faux-script", str(script), warm=True)
    server.wait(timeout=DEADLINE)  # it refused, then ended
    assert (ran.returncode, ran.stdout) == (0, "hello\n")  # run cold, in the client
    assert f"stale ({bundle} changed): refusing and exiting" in _server_log(env)


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                if int(stat.rpartition(")")[2].split()[1]) == pid:
                    found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


@contextlib.contextmanager
def _held_run(env: dict[str, str], project: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A ``-p`` run (the client) whose bash call has written ``started.txt`` and waits on a
    fifo; on the way out the fifo is written, so the ``read`` ends wherever it runs."""
    fifo, script = _held_bash_script(project)
    client = subprocess.Popen(
        [BINARY, "-p", "go", "--faux-script", str(script), "--approve", "allow"],
        env=env,
        cwd=project,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _until(lambda: (project / "started.txt").exists(), "the tool call to start")
        yield client
    finally:
        with contextlib.suppress(OSError):
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, b"go\n")
            os.close(fd)
        if client.poll() is None and sys.exc_info()[0] is not None:
            client.kill()  # a failed test leaves no client behind


def test_sigkill_of_the_client_kills_its_child_and_frees_the_session(
    env: dict[str, str], project: Path
) -> None:
    from coding_agent.session_files.folders import list_sessions

    server = _start_server(env)
    with _held_run(env, project) as client:
        [child] = _children(server.pid)
        [session] = list_sessions(project, env=env)
        assert session.worker_running()  # the forked child holds the session's lock
        client.kill()
        client.wait(timeout=DEADLINE)
        _until(lambda: not _alive(child), "the forked child to die with its client")
        _until(lambda: not session.worker_running(), "the session lock to be free")


def test_the_server_a_cold_run_starts_is_not_the_clients_child(
    env: dict[str, str], project: Path
) -> None:
    """With no server, the client runs the command itself and starts one in the background.
    The server is not its child: should the server end first (idle, stale) while the command
    still runs (a worker lingers for hours), it is not left a zombie of a parent that never
    waits for it."""
    with _held_run(env, project) as client:
        _until(lambda: rendezvous.ping(env) is not None, "the server the client started")
        answer = rendezvous.ping(env)
        assert answer is not None
        server = int(answer["pid"])
        assert _served(env) == 0, "the command ran cold, in the client"
        assert server not in _children(client.pid)
        assert client.poll() is None, "the client still runs its command"
    assert client.wait(timeout=DEADLINE) == 0


def test_a_client_refused_for_a_variable_starts_a_server_that_serves_it(
    env: dict[str, str], project: Path
) -> None:
    """The SDKs read ``$OPENAI_LOG`` at import: a client that sets it is refused by a server
    preloaded without it. That server lets go of its socket and lock at once (it still runs
    a command: a TUI's worker may run for hours), and the refused client starts one under its
    own ``$OPENAI_LOG``, which serves it from then on: not refused by every server in turn."""
    old = _start_server(env)
    (project.parent / "hello").mkdir()
    hello = _script(project.parent / "hello", [{"text": "hello"}])  # the held run has its own
    debug = {**env, "OPENAI_LOG": "debug"}
    with _held_run(env, project) as held:
        assert _served(env) == 1
        refused = _run(debug, project, "-p", "hi", "--faux-script", str(hello), warm=True)
        assert (refused.returncode, refused.stdout) == (0, "hello\n"), refused.stderr
        assert "stale ($OPENAI_LOG differs from the server's)" in _server_log(env)

        def new_server() -> bool:
            answer = rendezvous.ping(env)
            return answer is not None and answer["pid"] != old.pid

        _until(new_server, "the server the refused client started")
        assert old.poll() is None  # still waiting for the held command, beside the new one
        served = _run(debug, project, "-p", "hi", "--faux-script", str(hello), warm=True)
        assert (served.returncode, served.stdout) == (0, "hello\n"), served.stderr
        assert _served(debug) == 1
    assert held.wait(timeout=DEADLINE) == 0
    assert old.wait(timeout=DEADLINE) == 0


def test_a_server_starting_with_a_full_log_begins_a_new_one(
    env: dict[str, str], project: Path
) -> None:
    """On by default, a server starts often: its log (beside the socket, timestamped lines) is
    moved to ``.log.1`` by a server that starts with it past ``LOG_LIMIT``, not grown forever."""
    from coding_agent.warm.server import LOG_LIMIT

    log = Path(rendezvous.socket_path(env).removesuffix(".sock") + ".log")
    rendezvous.make_private_dir(str(log.parent))
    log.write_bytes(b"an old line\n" * (LOG_LIMIT // 12 + 1))
    script = _script(project.parent, [{"text": "hello"}])
    ran = _run(env, project, "-p", "hi", "--faux-script", str(script), warm=True)
    assert (ran.returncode, ran.stdout) == (0, "hello\n"), ran.stderr
    _until(lambda: rendezvous.ping(env) is not None, "the server the run started")
    assert Path(f"{log}.1").stat().st_size > LOG_LIMIT
    [line] = log.read_text().splitlines()
    assert re.match(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ coding-agent warm-start\[\d+\]: serving ", line
    )


def test_a_server_that_dies_mid_handshake_leaves_the_client_to_run_cold(
    env: dict[str, str], project: Path
) -> None:
    script = _script(project.parent, [{"text": "hello"}])
    path = rendezvous.socket_path(env)
    rendezvous.make_private_dir(os.path.dirname(path))
    fake = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fake.bind(path)
    fake.listen(1)
    taken: list[int] = []

    def die_mid_handshake() -> None:
        conn, _ = fake.accept()
        _request, fds = rendezvous.recv_request(conn)
        taken.extend(fds)
        for fd in fds:
            os.close(fd)
        conn.close()  # no answer: the server "died"

    thread = threading.Thread(target=die_mid_handshake)
    thread.start()
    try:
        ran = _run(env, project, "-p", "hi", "--faux-script", str(script), warm=True)
    finally:
        thread.join(timeout=DEADLINE)
        fake.close()
    assert len(taken) == 3  # the client did hand over its stdio
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "hello\n", "")


def test_the_idle_timeout_ends_the_server(env: dict[str, str]) -> None:
    server = _start_server(env, serving=False, **{rendezvous.IDLE_ENV: "0.2"})
    assert server.wait(timeout=DEADLINE) == 0
    assert "serving " in _server_log(env)
    assert not os.path.exists(rendezvous.socket_path(env))
    assert "idle for 0.2 s: exiting" in _server_log(env)


def test_a_worker_forks_from_the_server_and_dies_with_its_client(
    env: dict[str, str], project: Path
) -> None:
    from coding_agent.session_files.folders import create_session

    session = create_session(project, env=env)
    server = _start_server(env)
    argv = worker_command(session.path, linger=0.0, warm_start=True)
    assert argv[1:4] == ["-m", "coding_agent.warm.client", "--worker"]
    with subprocess.Popen(
        argv, env=env, cwd=project, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, start_new_session=True,
    ) as worker:  # fmt: skip
        try:
            assert worker.stdout is not None
            line = worker.stdout.readline()
            assert line.startswith(b"READY "), line
            assert _served(env) == 1 and session.worker_running()
            [child] = _children(server.pid)
            worker.kill()
            worker.wait(timeout=DEADLINE)
            _until(lambda: not _alive(child), "the worker to die with its client")
            _until(lambda: not session.worker_running(), "the session lock to be free")
        finally:
            worker.kill()


def test_the_warm_start_is_on_unless_the_user_or_the_environment_turns_it_off(
    env: dict[str, str], project: Path
) -> None:
    def shown(environment: dict[str, str]) -> str:
        """``coding-agent config``'s warm_start line, its columns' padding squeezed."""
        out = subprocess.run([BINARY, "config"], env=environment, cwd=project,
                             capture_output=True, text=True, timeout=DEADLINE).stdout  # fmt: skip
        [line] = [line for line in out.splitlines() if line.startswith("warm_start =")]
        return " ".join(line.split())

    unset = {k: v for k, v in env.items() if k not in (rendezvous.ENV, "CI")}
    assert "warm_start = on # default (warm_start = false turns it off)" in shown(unset)
    ci = shown({**unset, "CI": "true"})  # a CI job's one run would pay for an unused server
    assert ci == "warm_start = off # default on a CI runner ($CI is set)"
    config = Path(env["XDG_CONFIG_HOME"], "coding-agent", "config.toml")
    config.parent.mkdir(parents=True)
    config.write_text('model = "faux/faux-1"\n')  # the file says nothing of it: still on
    assert "warm_start = on # default" in shown(unset)
    # on by default: a headless run starts the server for the next one
    first = subprocess.run([BINARY, "-p", "hi"], env=unset, cwd=project, capture_output=True,
                           text=True, timeout=DEADLINE)  # fmt: skip
    assert "offline demo" in first.stdout, first.stderr
    _until(lambda: rendezvous.ping(unset) is not None, "the server the first run started")
    _stop_servers(unset)
    config.write_text("warm_start = false\n")
    assert f"warm_start = off # {config}:1" in shown(unset)
    on = shown({**unset, rendezvous.ENV: "1"})
    assert on == "warm_start = on # environment $CODING_AGENT_WARM_START"
    config.unlink()
    off = shown({**unset, rendezvous.ENV: "0"})
    assert off == "warm_start = off # environment $CODING_AGENT_WARM_START"
    # off in the user's file: a headless run runs in the process started, and starts no server
    config.write_text("warm_start = false\n")
    answered = subprocess.run([BINARY, "-p", "hi"], env=unset, cwd=project, capture_output=True,
                              text=True, timeout=DEADLINE)  # fmt: skip
    assert "offline demo" in answered.stdout, answered.stderr  # the faux tour ran, here
    assert rendezvous.ping(unset) is None and _lock_free(unset)
    config.write_text("warm_start = true\n")  # the user's word wins over CI's default
    assert shown({**unset, "CI": "true"}) == f"warm_start = on # {config}:1"


def test_a_broken_config_file_runs_the_command_here_which_reports_it(
    env: dict[str, str], project: Path
) -> None:
    config = Path(env["XDG_CONFIG_HOME"], "coding-agent", "config.toml")
    config.parent.mkdir(parents=True)
    config.write_text("warm_start = \n")
    unset = {k: v for k, v in env.items() if k not in (rendezvous.ENV, "CI")}
    assert rendezvous.enabled(unset) == (False, str(config))
    failed = subprocess.run([BINARY, "-p", "hi"], env=unset, cwd=project, capture_output=True,
                            text=True, timeout=DEADLINE)  # fmt: skip
    assert failed.returncode != 0 and str(config) in failed.stderr
    assert rendezvous.ping(unset) is None and _lock_free(unset)


def test_doctor_and_warm_start_status_show_the_server(env: dict[str, str], project: Path) -> None:
    assert "no server is running" in _run(env, project, "warm-start", "status", warm=True).stdout
    _start_server(env)
    doctor = _run(env, project, "doctor", warm=True)
    assert "warm start: on (environment $CODING_AGENT_WARM_START); a server is running" in (
        doctor.stdout
    )
    stopped = _run(env, project, "warm-start", "stop", warm=True)
    assert stopped.stdout.startswith("stopped the warm-start server (pid ")


def test_only_the_users_own_config_may_turn_the_warm_start_on(
    env: dict[str, str], tmp_path: Path
) -> None:
    from coding_agent.settings.config import ConfigError, load_config

    project = tmp_path / "other"
    (project / ".coding-agent").mkdir(parents=True)
    (project / ".coding-agent" / "config.toml").write_text("warm_start = true\n")
    with pytest.raises(ConfigError, match=r"only your own config.toml may turn the warm start"):
        load_config(project, env=env, trusted=True)
    user = Path(env["XDG_CONFIG_HOME"], "coding-agent", "config.toml")
    user.parent.mkdir(parents=True)
    user.write_text("warm_start = true\n")
    assert load_config(None, env=env).warm_start is True
    assert rendezvous.enabled({**env, rendezvous.ENV: ""}) == (True, str(user))
    assert rendezvous.enabled({**env, rendezvous.ENV: "0"})[0] is False


def test_a_request_round_trips_through_its_frame() -> None:
    request = {
        "op": "run", "kind": "cli", "argv0": "coding-agent", "cwd": "/tmp/a b",
        "umask": 0o027, "ignored": [2, 13], "limits": [(0, -1, -1), (7, 1024, 524288)],
        "nice": 5, "cpus": [0, 3], "argv": ["-p", "", "naïve \udcff"],
        "env": {"A": "1", "EMPTY": ""},
    }  # fmt: skip
    assert rendezvous.decode_request(rendezvous.encode_request(request)) == request
    with pytest.raises(ValueError, match="NUL"):
        rendezvous.encode_request({**request, "argv": ["a\0b"]})


def test_sigint_to_the_client_interrupts_the_run_as_it_would_a_cold_one(
    env: dict[str, str], project: Path
) -> None:
    fifo, script = _held_bash_script(project)
    _start_server(env)
    outcomes = []
    for warm in (False, True):
        (project / "started.txt").unlink(missing_ok=True)
        with (
            sigint_as_in_a_terminal(),
            subprocess.Popen(
                [BINARY, "-p", "go", "--faux-script", str(script), "--approve", "allow"],
                env={**env, rendezvous.ENV: "1" if warm else "0"},
                cwd=project,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ) as client,
        ):
            try:
                _until(lambda: (project / "started.txt").exists(), "the tool call to start")
                client.send_signal(signal.SIGINT)
                out, err = client.communicate(timeout=DEADLINE)
            finally:
                client.kill()
                with contextlib.suppress(OSError):  # let the `read` end
                    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                    os.write(fd, b"go\n")
                    os.close(fd)
        # each run is its own session: the line names it
        outcomes.append((client.returncode, out, re.sub(r"--resume \S+\)", "--resume ID)", err)))
    assert _served(env) == 1
    assert outcomes[0][0] == 130
    assert outcomes[1] == outcomes[0]


def test_a_stale_server_that_cannot_read_a_request_ends_too(env: dict[str, str]) -> None:
    """A client of newer code speaks a protocol an older server cannot read: the server finds
    its files changed and makes way (the client has run the command itself)."""
    server = _start_server(env)
    import coding_agent.context.waiting as preloaded  # the server preloads it

    source = Path(preloaded.__file__ or "")
    before = source.stat()
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(rendezvous.socket_path(env))
            body = b"coding-agent-warm/0\0run"
            sock.sendall(len(body).to_bytes(4, "big") + body)
            assert sock.recv(100) == b""  # closed unanswered
        assert server.wait(timeout=DEADLINE) == 0
    finally:
        os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))
    log = _server_log(env)
    assert "a request failed: a request of another protocol ('coding-agent-warm/0'" in log
    assert f"stale ({source} changed): exiting" in log


def _ask_as(uid: int, path: str, op: str) -> bytes:
    """What a peer of ``uid`` reads after sending ``op`` to the server at ``path``: a forked
    child drops to ``uid`` (the test runs as root), asks, and writes back what it read."""
    read, write = os.pipe()
    with warnings.catch_warnings():  # 3.12+ warns of a fork beside threads; the child only
        warnings.simplefilter("ignore", DeprecationWarning)  # makes system calls, then _exit
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(DEADLINE)
                sock.connect(path)
                answer = b""
                # a server that closes at once (before the request is sent: a broken pipe; with
                # it unread: a reset) has answered nothing
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    rendezvous.send_request(sock, {"op": op})
                    while chunk := sock.recv(4096):
                        answer += chunk
            os.write(write, b"read:" + answer)
            code = 0
        except BaseException as error:
            os.write(write, f"failed: {error!r}".encode())
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as told:
        result = told.read()
    _, status = os.waitpid(pid, 0)
    assert result.startswith(b"read:"), result
    assert os.waitstatus_to_exitcode(status) == 0
    return result.removeprefix(b"read:")


@pytest.mark.skipif(os.getuid() != 0, reason="asking as another uid needs root (CI runs as root)")
def test_a_client_with_other_groups_runs_its_command_itself(
    env: dict[str, str], project: Path
) -> None:
    """A child forked here has the server's groups: a client that dropped one (or took
    another with ``newgrp``) is closed unanswered and runs its command itself."""
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("CI must run this test as root (setgroups)")
        pytest.skip("needs root to give the client other groups (setgroups)")
    script = _script(project.parent, [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "id -G > groups.txt"}}]},
        {"text": "done"},
    ])  # fmt: skip
    server = _start_server(env)
    argv = [BINARY, "-p", "go", "--faux-script", str(script), "--approve", "allow"]
    ran = subprocess.run(argv, env=env, cwd=project, capture_output=True, text=True,
                         timeout=DEADLINE, preexec_fn=lambda: os.setgroups([4242]))  # fmt: skip
    assert (ran.returncode, ran.stdout) == (0, "done\n"), ran.stderr
    assert _served(env) == 0 and server.poll() is None
    assert "4242" in (project / "groups.txt").read_text().split()
    assert "with other groups than the server's" in _server_log(env)


def _bwrap() -> str:
    from pico3 import sandbox_available

    status = sandbox_available()
    if status.bwrap is None or not status.available:
        if os.environ.get("CODING_AGENT_REQUIRE_SANDBOX"):  # CI: .ci/run
            pytest.fail(f"this test needs bubblewrap: {status.reason}")
        pytest.skip(status.reason)
    return status.bwrap


def test_a_client_in_a_sandbox_runs_its_command_there_not_forked_outside(
    env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    """A command in a sandbox (bubblewrap: its own user, mount, PID and network namespaces)
    that can reach the server's socket gets no child forked outside it with the user's rights:
    the server closes the connection unanswered, and the command runs where it was started."""
    bwrap = _bwrap()
    script = _script(project.parent, [
        {"toolCalls": [{"name": "bash", "arguments": {"command": "readlink /proc/self/ns/mnt > ns.txt"}}]},
        {"text": "done"},
    ])  # fmt: skip
    server = _start_server(env)
    runtime = env["XDG_RUNTIME_DIR"]
    sandboxed = [
        bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev",
        "--proc", "/proc", "--bind", str(tmp_path), str(tmp_path), "--bind", runtime, runtime,
        "--chdir", str(project), "--",
    ]  # fmt: skip
    ran = subprocess.run(
        [*sandboxed, BINARY, "-p", "go", "--faux-script", str(script), "--approve", "allow"],
        env={**env, "TMPDIR": str(tmp_path)}, stdin=subprocess.DEVNULL, capture_output=True,
        text=True, timeout=DEADLINE,
    )  # fmt: skip
    assert (ran.returncode, ran.stdout) == (0, "done\n"), ran.stderr
    assert _served(env) == 0 and server.poll() is None  # refused, and still serving others
    assert (project / "ns.txt").read_text().strip() != os.readlink("/proc/self/ns/mnt")
    assert "in another " in _server_log(env) and "(a sandbox or a container)" in _server_log(env)
    served = _run(env, project, "-p", "go", "--faux-script", str(script), "--approve", "allow",
                  warm=True)  # fmt: skip
    assert (served.returncode, _served(env)) == (0, 1)  # a client beside the server: forked
    assert (project / "ns.txt").read_text().strip() == os.readlink("/proc/self/ns/mnt")


def test_a_request_from_another_uid_is_closed_unanswered(env: dict[str, str]) -> None:
    """The socket's folder is the user's alone (0700); should it be opened up (a shared
    ``$XDG_RUNTIME_DIR``, a chmod by mistake), the peer's uid (``SO_PEERCRED``) still keeps
    another user from running anything as this one, and the server serves on."""
    _start_server(env)
    path = rendezvous.socket_path(env)
    folder = os.path.dirname(path)
    while folder != os.path.dirname(env["XDG_RUNTIME_DIR"]):  # open the way up to the socket
        os.chmod(folder, 0o711)
        folder = os.path.dirname(folder)
    os.chmod(path, 0o777)
    nobody = 65534
    assert _ask_as(nobody, path, "ping") == b"", "another uid is answered nothing"
    assert _ask_as(os.getuid(), path, "ping").startswith(b"O"), "the user's own ping is answered"
    assert f"refused a connection from uid {nobody}" in _server_log(env)
    assert _served(env) == 0
