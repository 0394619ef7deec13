"""The ``coding-agent`` console script, and the thin client of the warm start.

With the warm start off (the default), or for a command it does not serve, :func:`main` runs
:func:`coding_agent.cli.main.main` exactly as the console script always did. With it on
(``CODING_AGENT_WARM_START=1`` or ``warm_start = true`` in the user's config.toml) and a
headless run (``-p``/``--print``/``--json`` on the command line), or a session worker
(``python -m coding_agent.warm.client --worker SESSION_DIR ...``, what the supervisor spawns
then), it imports nothing but the standard library's ``os``, ``socket``, ``signal``,
``resource`` and ``zlib``, connects to the user's fork server (:mod:`coding_agent.warm.server`) and sends its
argv, folder, whole environment, umask, resource limits, nice value and CPU affinity, with its
stdin, stdout and stderr (``SCM_RIGHTS``).
The server's child runs the command on those very fds; this process relays SIGINT, SIGTERM,
SIGHUP and SIGWINCH to it (those it does not ignore itself: the child ignores what it ignores)
and exits with its exit status (a signal that ended it as 128+N, as
a shell reports it). If the child is killed because this process was (``SIGKILL``), the child
sees the connection close and kills itself.

Nothing is lost when there is no server: no socket, a refused or broken handshake, a server that
finds itself stale (it answers ``R`` and exits): the command runs here, in this process, as with
the warm start off, and a server is started in the background (its own session, stdio on
/dev/null, a log beside the socket) for the next run.
"""

from __future__ import annotations

import os
import signal
import socket
import sys

from coding_agent.cli.argv import PiFlagError, headless_flag, pi_words
from coding_agent.settings import warm_start as rendezvous

TYPE_CHECKING = False  # not `from typing import`: typing (with re) costs the thin client ~5 ms

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main", "served", "start_server", "try_warm"]

RELAYED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGWINCH)
_HANDSHAKE_TIMEOUT = 30.0
"""Seconds the server gets to fork the child and have it answer (it takes milliseconds)."""

# The environment a server starts with: what the interpreter and the preload read, never the
# user's keys (a server's environment block is every child's /proc/PID/environ).
_SERVER_ENV = (
    "HOME", "PATH", "USER", "LOGNAME", "TMPDIR", "VIRTUAL_ENV", "CHORD_CODE_CACHE",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "SSLKEYLOGFILE",
)  # fmt: skip
_SERVER_ENV_PREFIXES = ("XDG_", "PYTHON", "LC_", "LANG", "CODING_AGENT_WARM_START", "OPENSSL_")


def served(argv: Sequence[str]) -> bool:
    """Whether the command line is a headless run (what the fork server serves): ``-p``,
    ``--print`` or ``--json`` (``-pPROMPT``, ``--print=``, ``--json=``, ``-cp``) before any
    ``--``, wherever the prompt stands (:mod:`coding_agent.cli.argv`). Every command line the
    command line parses as headless is served; so is a subcommand's own ``--json``
    (``sessions --json``), which the child runs as it would run here. Anything else (the TUI: a
    forked process has no controlling terminal) runs here. pi's ``--mode json``/``text`` count
    as ``--json``/``-p`` (:func:`~coding_agent.cli.argv.pi_words`)."""
    try:
        words = pi_words(argv)
    except PiFlagError:
        return False  # the command line here names what is wrong
    for arg in words:
        if arg == "--":
            return False
        if headless_flag(arg):
            return True
    return False


def main() -> None:
    """The console script: ``coding-agent ARGS``."""
    sys.exit(_run("cli", sys.argv[1:]))


def _run(kind: str, argv: list[str]) -> int:
    if kind == "worker" or served(argv):
        on, _origin = rendezvous.enabled()
        if on:
            code = try_warm(kind, argv)
            if code is not None:
                return code
            start_server(_REFUSED)
    if kind == "worker":
        from coding_agent.worker.main import main as worker_main

        return worker_main(argv)
    from coding_agent.cli.main import main as cli_main

    return cli_main(argv)


def try_warm(kind: str, argv: Sequence[str], path: str | None = None) -> int | None:
    """Run the command in the fork server's child; its exit status, or ``None`` when the
    server is absent or did not take it (then nothing of the command ran)."""
    try:
        cwd = os.getcwd()
        mask = os.umask(0o022)
        os.umask(mask)
        # what this process was started with (a background job ignores SIGINT, say): the child
        # takes the same, as this command run here would have
        ignored = [n for n in signal.valid_signals() if signal.getsignal(n) == signal.SIG_IGN]
        limits, nice, cpus = rendezvous.process_limits()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        sock.settimeout(_HANDSHAKE_TIMEOUT)
        sock.connect(path or rendezvous.socket_path())
        request = {
            "op": "run",
            "kind": kind,
            "argv": list(argv),
            "argv0": sys.argv[0],
            "cwd": cwd,
            "env": dict(os.environ),
            "umask": mask,
            "ignored": ignored,
            "limits": limits,
            "nice": nice,
            "cpus": cpus,
        }
        rendezvous.send_request(sock, request, [0, 1, 2])
        pending = bytearray()
        line = rendezvous.read_line(sock, pending)
        if line is None or not line.startswith(b"P"):
            sock.close()
            if line is not None and line.startswith(b"R$"):  # "$NAME differs ...": the next
                name = line[2:].split(b" ", 1)[0].decode("utf-8", "surrogateescape")
                _REFUSED.append(name)  # server starts with this client's NAME
            return None  # refused (stale, say) or the server went away: run it here
    except KeyboardInterrupt:
        sock.close()
        return 130
    except (OSError, ValueError):
        sock.close()
        return None
    _blank_environment()  # the child has it: nothing of it stays readable here
    return _follow(sock, pending, ignored)


def _blank_environment() -> None:
    """Overwrite this process's whole exec environment block (what ``/proc/<pid>/environ``
    shows) with NUL bytes, once the fork server's child runs the command with it. This process
    only relays signals from then on, and a command the child runs outside the sandbox may read
    its ancestors' ``environ``: the user's keys were there (the cold path hides them the same
    way, :func:`coding_agent.settings.secret_env.hide_secrets_from_proc`). ``os.environ`` keeps
    its copy. Best effort: where ``/proc`` is missing or refuses, nothing changes."""
    try:
        with open("/proc/self/stat", "rb") as handle:
            stat = handle.read()
        fields = stat[stat.rindex(b")") + 2 :].split()
        start, end = int(fields[47]), int(fields[48])  # fields 50 and 51: env_start, env_end
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            mem.write(b"\0" * (end - start))
    except (OSError, ValueError, IndexError):
        return


def _follow(sock: socket.socket, pending: bytearray, ignored: list[signal.Signals]) -> int:
    """The child runs: relay signals (those not ignored here) until its status arrives."""

    def relay(number: int, _frame: object) -> None:
        try:
            sock.sendall(b"K%d\n" % number)
        except OSError:
            pass

    for number in RELAYED:
        if number not in ignored:
            signal.signal(number, relay)
    sock.settimeout(None)
    while True:
        try:
            line = rendezvous.read_line(sock, pending)
        except OSError:
            line = None
        if line is None:
            sys.stderr.write(
                "coding-agent: error: the warm-start server ended while running the command; "
                "its exit status is unknown (coding-agent warm-start stop, then run it again)\n"
            )
            return 1
        if line[:1] == b"X":
            return int(line[1:])
        if line[:1] == b"S":
            return 128 + int(line[1:])


_REFUSED: list[str] = []
"""The variable a server refused this client for (its import-time reads differ: ``$OPENAI_LOG``,
say): the server this client starts next gets it from this client's environment, so a client
that keeps it set is served from then on, not refused by every server in turn."""


def start_server(also: Sequence[str] = ()) -> None:
    """Start this installation's fork server in the background, detached: its own session, and
    not this process's child (an intermediate child spawns it and exits at once), so a server
    that ends while this command still runs (a worker lingering for hours, say) is reaped by
    init instead of waiting as a zombie on a parent that never waits for it. A second server
    started meanwhile finds the first's lock and exits."""
    try:
        directory = rendezvous.runtime_dir()
        rendezvous.make_private_dir(directory)
        log = rendezvous.socket_path().removesuffix(".sock") + ".log"
        env = {
            name: value
            for name, value in os.environ.items()
            if name in _SERVER_ENV or name.startswith(_SERVER_ENV_PREFIXES) or name in also
        }
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        intermediate = os.fork()  # this thin client has no thread yet: a fork is safe here
    except OSError:
        return  # the next run tries again; this one runs as without the warm start
    if intermediate == 0:
        try:
            os.posix_spawn(
                sys.executable,
                [sys.executable, "-P", "-m", "coding_agent.warm.server"],
                env,
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 2, log, flags, 0o600),
                ],
                setsid=True,
            )
        finally:
            os._exit(0)
    try:
        os.waitpid(intermediate, 0)
    except ChildProcessError:
        pass


if __name__ == "__main__":  # the supervisor's: python -m coding_agent.warm.client --worker ...
    if sys.argv[1:2] != ["--worker"]:
        sys.exit("usage: python -m coding_agent.warm.client --worker SESSION_DIR [WORKER OPTIONS]")
    sys.exit(_run("worker", sys.argv[2:]))
