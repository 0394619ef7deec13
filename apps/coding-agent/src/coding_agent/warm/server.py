"""The fork server: ``python -P -m coding_agent.warm.server`` (the thin client starts it).

It imports once what the served commands import (:func:`preload`: the command line, the headless
run, the session worker, pico3 and chord, anyio on asyncio, the OpenAI and Anthropic SDK clients
and their HTTP transport), takes its :class:`~coding_agent.warm.fingerprint.Fingerprint`,
checks that no thread and no event loop exist (a fork copies only the calling thread, and a loop
must belong to the child that runs it), calls ``gc.freeze()`` (the collector then never touches
the preloaded objects, so the children keep sharing their pages), and listens on the
installation's socket (:func:`coding_agent.settings.warm_start.socket_path`).

For each request, from a peer of the same uid only (``SO_PEERCRED``; another uid's connection is
closed unanswered) and in the server's own namespaces (a peer in a sandbox or a container is
closed unanswered too, and runs its command itself: a child forked here would run outside its
sandbox), it re-checks the fingerprint against the files and the client's environment
(any difference: it answers ``R`` with the reason, the client runs the command itself, and the
server stops taking requests and exits once its running children are done) and forks. The child
(:class:`Request`) becomes its own session, puts the client's stdin, stdout and stderr on 0, 1
and 2 (and new ``sys.std*`` streams over them, as a fresh interpreter would), changes to its
folder, takes its environment, umask, resource limits, nice value, CPU affinity and
``sys.argv``, sets every signal's handler as the
client's interpreter has it (the client sends the signals it ignores, SIGPIPE and SIGXFSZ among
them; SIGINT raises ``KeyboardInterrupt`` unless ignored, the rest are the defaults), reseeds
``random``, answers ``P<pid>``, and runs the same ``main`` the normal path would; a thread of the child reads the connection: a ``K<signal>`` line raises
that signal in the child, and EOF (the client died, say by ``SIGKILL``) kills the child at once,
so the session lock it holds is freed as if the client itself had been killed. The server reaps
every child and sends the client ``X<status>`` or ``S<signal>``.

The server ends after ``$CODING_AGENT_WARM_START_IDLE`` seconds (default 600) without a request
and with no child running, on a ``stop`` request (``coding-agent warm-start stop``), on SIGTERM,
or when it finds itself stale. One server per user and installation: it holds ``flock`` on a
lock file beside the socket while it takes requests, and a second one exits at once; one that
stops taking them (stale, stopped) lets go of the socket and the lock at once, and ends once its
running commands have. Its log (the reason it
ended, a failed preload), its lines timestamped, is ``warm-<key>.log`` beside the socket; a
server that starts with it past a megabyte moves it to ``warm-<key>.log.1`` first.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import importlib
import io
import json
import os
import random
import resource
import select
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from coding_agent.settings import warm_start as rendezvous
from coding_agent.warm.fingerprint import Fingerprint, recording_environ_reads
from coding_agent.warm.peer import other_namespace, same_groups, unfit_limits

__all__ = ["LOG_LIMIT", "Request", "Server", "main", "preload"]

KINDS = ("cli", "worker")
"""What a ``run`` request may run: the command line's main, or the session worker's."""

_PRELOAD = (
    "asyncio", "anyio", "anyio._backends._asyncio", "chord", "pico3",
    "coding_agent.cli.headless", "coding_agent.cli.attach", "coding_agent.worker.main",
    "coding_agent.supervisor",
)  # fmt: skip
"""The served commands' modules: the headless run (``-p --server`` and ``--wait-for-approval``
too), the session worker, the supervisor; pico3, chord and anyio on asyncio."""

_ALSO = (
    "coding_agent.context.waiting", "jsonschema", "pathspec", "sqlite3", "shlex", "pprint",
    "tree_sitter", "tree_sitter_bash", "anyio._core._fileio", "anyio._core._signals",
    "concurrent.futures.thread", "coding_agent.worker.providers.openai_responses",
)  # fmt: skip
"""What a headless run imports beyond the modules above: the default facets' libraries, the
bash parser of the permission rules, the signal receiver of the run, the worker threads' pool,
the OpenAI Responses provider (the registry's OpenAI entry imports it). Measured: a faux ``-p``
run in a preloaded process imported these 84 modules, nothing else; a ``-p`` run on either SDK
path imports nothing the preload did not."""

_PEERCRED = struct.Struct("3i")
LOG_LIMIT = 1 << 20
"""Bytes of log past which a starting server begins a new one (:meth:`Server._rotate_log`)."""
_HANDSHAKE_TIMEOUT = 10.0


def preload() -> set[str]:
    """Import what the served commands import; the environment variables read meanwhile."""
    with recording_environ_reads() as read:
        for module in _PRELOAD:
            importlib.import_module(module)
        from coding_agent.cli.main import prebuild_parser
        from coding_agent.settings.facets_site import activate
        from coding_agent.worker.providers import preload_sdk_clients, preload_tls_context

        activate()
        prebuild_parser()  # its lazily imported subcommand tables; the child's parser
        preload_sdk_clients()
        preload_tls_context()  # the first SDK client's, in each child (checked there first)
        for module in _ALSO:
            with contextlib.suppress(Exception):  # not installed: the child does without too
                importlib.import_module(module)
        from coding_agent.worker.shared_features import preload_installed

        preload_installed()  # the feature packages' generations, adopted by the children
    return read


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _no_event_loop() -> bool:
    import asyncio

    return not any(isinstance(o, asyncio.AbstractEventLoop) for o in gc.get_objects())


@dataclass
class Request:
    """One ``run`` request, in the forked child that serves it."""

    conn: socket.socket
    fds: list[int]
    body: dict[str, Any]
    reported: bool = False
    """Whether the client has its exit status (:meth:`_report_early`): from then on the
    client leaving is no reason to kill this process."""

    def run(self) -> int:
        """Become the client's command and run it; its exit status."""
        try:
            argv = self._become_client()
        except Exception as error:  # nothing of the command ran: the client runs it itself
            self._say(f"R the child could not take the client's place: {error!r}")
            os._exit(70)
        threading.Thread(target=self._watch, name="warm-start-client", daemon=True).start()
        self._say(f"P{os.getpid()}")
        if self.body.get("kind") == "worker":
            from coding_agent.worker.main import main as worker_main

            return worker_main(argv)
        from coding_agent.cli.main import main as cli_main

        code = cli_main(argv)
        self._report_early(code)
        return code

    def _report_early(self, code: int) -> None:
        """Give the client the command's exit status now, before this process's interpreter
        teardown (tens of milliseconds in a fork of a large preloaded heap: the collector and the
        module cleanup touch pages the child shares with the server, and each is copied).

        First, everything of the exit that the client or the user can observe: the other
        (non-daemon) threads joined, the ``atexit`` handlers run (they run once: the teardown
        finds none left), the standard streams flushed. The session lock is free by then: the
        command's ``main`` released it on its way out. Then the client's stdin, stdout and
        stderr are let go (fds 0-2 put on ``/dev/null``), so whoever reads the client's pipes
        sees their end once the client exits, and the client is told ``X<status>``. The
        teardown runs after it, unobserved; the watcher no longer kills this process when the
        client goes. Without ``atexit._run_exitfuncs`` (CPython has it since 3.0) the status
        comes from the server once this process has ended, as before."""
        import atexit

        run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
        if run_exitfuncs is None:
            return
        for thread in threading.enumerate():
            if thread is not threading.current_thread() and not thread.daemon:
                thread.join()
        run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.close(devnull)
        self.reported = True
        self._say(f"X{code}")

    def _become_client(self) -> list[str]:
        """The client's session, stdio, folder, environment, umask and argv in this process."""
        os.setsid()  # as the worker's spawn asks (start_new_session=True); a headless run too
        signal.set_wakeup_fd(-1)
        ignored = {int(n) for n in self.body["ignored"]}
        for number in signal.valid_signals():
            if number in (signal.SIGKILL, signal.SIGSTOP):
                continue
            handler: Any = signal.SIG_DFL  # as a fresh interpreter started by the client has
            if number in ignored:
                handler = signal.SIG_IGN
            elif number == signal.SIGINT:
                handler = signal.default_int_handler
            with contextlib.suppress(OSError, ValueError):
                signal.signal(number, handler)
        argv = [str(a) for a in self.body["argv"]]
        os.chdir(str(self.body["cwd"]))
        env: dict[str, str] = self.body["env"]
        os.environ.clear()
        os.environ.update(env)
        time.tzset()  # the client's $TZ for local times, as its own interpreter would have read
        os.umask(int(self.body["umask"]))
        for number, soft, hard in self.body["limits"]:  # unfit_limits checked they can be had
            if resource.getrlimit(number) != (soft, hard):
                resource.setrlimit(number, (soft, hard))
        if int(self.body["nice"]) != os.getpriority(os.PRIO_PROCESS, 0):
            os.setpriority(os.PRIO_PROCESS, 0, int(self.body["nice"]))
        cpus = {int(n) for n in self.body["cpus"]}
        if cpus and cpus != os.sched_getaffinity(0):
            os.sched_setaffinity(0, cpus)
        sys.argv = [str(self.body.get("argv0", "coding-agent")), *argv]
        random.seed()
        for target, fd in enumerate(self.fds[:3]):
            os.dup2(fd, target)
        for fd in self.fds:
            if fd > 2:
                os.close(fd)
        _new_stdio()
        return argv

    def _say(self, line: str) -> None:
        with contextlib.suppress(OSError):
            self.conn.sendall(line.encode() + b"\n")

    def _watch(self) -> None:
        """Relay the client's signals; the client gone (EOF): die at once."""
        pending = bytearray()
        while True:
            try:
                line = rendezvous.read_line(self.conn, pending)
            except OSError:
                line = None
            if line is None:
                if not self.reported:
                    os.kill(os.getpid(), signal.SIGKILL)
                return
            if line.startswith(b"K") and line[1:].isdigit():
                with contextlib.suppress(OSError, ValueError):
                    os.kill(os.getpid(), int(line[1:]))


def _new_stdio() -> None:
    """``sys.stdin``/``stdout``/``stderr`` over the new fds 0, 1 and 2, made as a fresh
    interpreter makes them (same encoding and errors, line-buffered on a terminal, stderr always
    line-buffered); the server's own streams (on /dev/null) are dropped."""
    made = []
    for fd, mode, name, like in (
        (0, "r", "<stdin>", sys.__stdin__),
        (1, "w", "<stdout>", sys.__stdout__),
        (2, "w", "<stderr>", sys.__stderr__),
    ):
        raw = io.FileIO(fd, mode + "b", closefd=False)
        raw.name = name  # type: ignore[misc] - CPython names its standard streams so
        tty = raw.isatty()
        unbuffered = like is not None and like.write_through and mode == "w"  # python -u
        buffer: Any = raw if unbuffered else (
            io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
        )  # fmt: skip
        stream = io.TextIOWrapper(
            buffer,
            encoding=like.encoding if like is not None else None,
            errors=like.errors if like is not None else None,
            newline="\n",
            line_buffering=mode == "w" and (tty or fd == 2),
            write_through=bool(unbuffered),
        )
        stream.mode = mode  # type: ignore[misc]
        made.append(stream)
    sys.stdin, sys.stdout, sys.stderr = made
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = made  # type: ignore[misc]


class Server:
    """The resident process: preload, then accept and fork (see the module docs)."""

    def __init__(self, path: str, idle: float) -> None:
        self.path = path
        self.idle = idle
        self.pid = os.getpid()
        self.children: dict[int, socket.socket] = {}
        self.listener: socket.socket | None = None
        self.fingerprint: Fingerprint | None = None
        self.last_request = time.monotonic()
        self.served = 0
        self._wake_r, self._wake_w = os.pipe()
        self._lock_fd = -1

    def log(self, message: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        print(f"{stamp} coding-agent warm-start[{self.pid}]: {message}", file=sys.stderr,
              flush=True)  # fmt: skip

    def _rotate_log(self) -> None:
        """Start a new log when the one beside the socket (this process's stderr, opened by the
        client that started it) has grown past :data:`LOG_LIMIT`: the old one becomes
        ``warm-<key>.log.1`` (one generation kept), so a server on by default never fills a
        disk with its start lines."""
        log = self.path.removesuffix(".sock") + ".log"
        try:
            found = os.stat(log)
            if found.st_size <= LOG_LIMIT or not os.path.samestat(found, os.fstat(2)):
                return
            os.replace(log, log + ".1")
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError:
            return
        os.dup2(fd, 2)
        os.close(fd)

    def serve(self) -> Request | None:
        """Serve until the end (``None``), or, in a forked child, its request."""
        directory = os.path.dirname(self.path)
        rendezvous.make_private_dir(directory)
        self._lock_fd = os.open(self.path + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.log("another server holds this installation's lock: exiting")
            return None
        self._rotate_log()
        started = time.monotonic()
        read = preload()
        from coding_agent.worker.providers import preloaded_tls_sources
        from coding_agent.worker.shared_features import preloaded_sources

        sources = [*preloaded_sources(), *preloaded_tls_sources()]
        self.fingerprint = Fingerprint.take(read, sources=sources)
        assert _threads() == 1, "a thread exists before the first fork: it would not survive"
        assert _no_event_loop(), "an event loop exists in the fork server: it must be the child's"
        gc.collect()
        gc.freeze()
        for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(number, lambda *_: None)
        os.set_blocking(self._wake_w, False)
        signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # a dead server's: we hold the lock
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        os.chmod(self.path, 0o600)
        listener.listen(64)
        self.listener = listener
        self.log(
            f"serving {self.path}: {len(sys.modules)} modules preloaded in "
            f"{time.monotonic() - started:.2f} s; reads at import: {sorted(read)}"
        )
        try:
            return self._loop()
        finally:
            if os.getpid() == self.pid:
                self._close_listener()

    def _loop(self) -> Request | None:
        while self.listener is not None or self.children:
            waiting: list[Any] = [self._wake_r]
            timeout: float | None = None
            if self.listener is not None:
                waiting.append(self.listener)
                if not self.children:
                    timeout = max(0.0, self.last_request + self.idle - time.monotonic())
            ready, _, _ = select.select(waiting, [], [], timeout)
            if not ready and not self.children:
                self.log(f"idle for {self.idle:g} s: exiting")
                self._close_listener()
                continue
            if self._wake_r in ready:
                signals = os.read(self._wake_r, 512)
                self._reap()
                if any(s in signals for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)):
                    self.log("stopped by a signal")
                    self._close_listener()
            if self.listener is not None and self.listener in ready:
                request = self._accept(self.listener)
                if request is not None:
                    return request
        return None

    def _close_listener(self) -> None:
        """Stop taking requests: the socket goes, then the lock, so a new server (of new code,
        or started under a refused client's environment) can start while this one waits for
        the commands it runs (a TUI's worker may run for hours)."""
        if self.listener is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)  # ours: no other server could bind it while we held the lock
        self.listener.close()
        self.listener = None
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # every child closed its copy: this lets go of the flock
            self._lock_fd = -1

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            line = f"X{code}" if code >= 0 else f"S{-code}"
            with contextlib.suppress(OSError):
                conn.sendall(line.encode() + b"\n")
            conn.close()

    def _accept(self, listener: socket.socket) -> Request | None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return None
        fds: list[int] = []
        try:
            raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
            peer, uid, _gid = _PEERCRED.unpack(raw)
            if uid != os.getuid():
                self.log(f"refused a connection from uid {uid}")
                conn.close()
                return None
            other = other_namespace(peer)
            if other is not None:
                self.log(
                    f"refused a connection from pid {peer} in another {other} namespace (a "
                    "sandbox or a container): it runs its command itself"
                )
                conn.close()
                return None
            if not same_groups(peer):
                self.log(f"refused a connection from pid {peer} with other groups than the "
                         "server's (newgrp, sg, dropped groups): it runs its command itself")  # fmt: skip
                conn.close()
                return None
            conn.settimeout(_HANDSHAKE_TIMEOUT)
            body, fds = rendezvous.recv_request(conn)
            conn.settimeout(None)
            return self._answer(conn, body, fds)
        except (OSError, ValueError, KeyError, TypeError) as error:
            self.log(f"a request failed: {error}")
            stale = self.fingerprint.stale_files() if self.fingerprint is not None else None
            if stale is not None:  # a client of newer code, say: make way for a new server
                self.log(f"stale ({stale}): exiting")
                self._close_listener()
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            conn.close()
            return None

    def _answer(self, conn: socket.socket, body: dict[str, Any], fds: list[int]) -> Request | None:
        op = body.get("op")
        if op == "ping":
            self._reply(conn, {"pid": self.pid, "modules": len(sys.modules), "idle": self.idle,
                               "children": len(self.children), "served": self.served,
                               "path": self.path})  # fmt: skip
            return None
        if op == "stop":
            self._reply(conn, {"pid": self.pid})
            self.log("stop requested")
            self._close_listener()
            return None
        if op != "run" or body.get("kind") not in KINDS or len(fds) != 3:
            raise ValueError(f"not a request this server takes: op={op!r}")
        self.last_request = time.monotonic()
        env = body["env"]
        if not isinstance(env, Mapping):
            raise ValueError("env is not a mapping")
        assert self.fingerprint is not None
        stale = self.fingerprint.stale(env)
        if stale is not None:
            self.log(f"stale ({stale}): refusing and exiting")
            conn.sendall(f"R{stale}\n".encode())
            conn.close()
            for fd in fds:
                os.close(fd)
            self._close_listener()
            return None
        unfit = unfit_limits(body)
        if unfit is not None:
            reason, make_way = unfit
            self.log(f"refusing ({reason})" + (": exiting, to make way" if make_way else ""))
            conn.sendall(f"R{reason}\n".encode())
            conn.close()
            for fd in fds:
                os.close(fd)
            if make_way:  # a server started under the client's limits can serve it
                self._close_listener()
            return None
        assert _threads() == 1, "a thread exists before a fork: it would not survive"
        pid = os.fork()
        if pid == 0:
            return self._child(conn, body, fds)
        for fd in fds:
            os.close(fd)
        self.children[pid] = conn
        self.served += 1
        return None

    def _child(self, conn: socket.socket, body: dict[str, Any], fds: list[int]) -> Request:
        """In the forked child: drop everything of the server's, keep the request."""
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        for other in self.children.values():
            other.close()  # their clients must see EOF when their own child ends
        self.children.clear()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
        signal.set_wakeup_fd(-1)
        os.close(self._wake_r)
        os.close(self._wake_w)
        return Request(conn, fds, body)

    def _reply(self, conn: socket.socket, answer: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            conn.sendall(b"O" + json.dumps(answer).encode() + b"\n")
        conn.close()


def _idle(env: Mapping[str, str]) -> float:
    try:
        value = float(env.get(rendezvous.IDLE_ENV, ""))
    except ValueError:
        return rendezvous.IDLE_DEFAULT
    return value if value > 0 else rendezvous.IDLE_DEFAULT


def main() -> int:
    """Run the server (in a served request's child: run that command, and exit with it)."""
    os.chdir("/")
    os.closerange(3, 65536)  # nothing of the client that started it (its pipes) stays open
    server = Server(rendezvous.socket_path(), _idle(os.environ))
    request = server.serve()
    if request is None:
        return 0
    return request.run()


if __name__ == "__main__":
    sys.exit(main())
