"""The failover host of the crash injection (issue 23 deliver 4): two ``coding-agent serve`` on
one PostgreSQL database instead of one bare worker.

:class:`ServerPair` stands where :mod:`crash_scenario`'s ``_Worker`` stands (``start``,
``kill``, ``connect``, ``aclose``), so the scenario, its kill points and every
invariant check are the same; only what is killed and who resumes differ:

* two servers (``--storage postgresql://… --lease L``, TCP on loopback with a token, each its
  own Unix socket) share the state folder (one machine: the session folder, its process
  records and file history are on the same disk), or with ``separate`` B has a state folder of
  its own (two machines: B adopts the session from the database's session directory, and
  what stays in A's folder is not there);
* the client dials ``connect_any`` over the list of both TCP addresses, the server that
  answered last first (what ``coding-agent attach A,B`` and ``-p --server A,B`` do);
* a kill is the machine going away: the server that hosts the session (the one whose stderr
  said ``worker started`` last) and its worker are SIGKILLed together (the worker is stopped
  first, so it never sees its server go and exits by itself, and the killed server cannot
  start a new worker in between);
* the client reconnects to the other server, which starts a worker: its open waits for the
  dead worker's lease to expire, takes it with a new epoch and resumes (the failover time: from
  the SIGKILL until the client's view is hydrated again);
* the killed server is started again at once, on the same port and socket, in the background
  (on this one machine it shares the CPU with the takeover; the lease wait mostly hides it); a
  kill whose point comes before it listens waits for it (``delayed_kills``), so every kill has
  somewhere to fail over to.

A failover whose new worker does not start (a server answers ``start_failed``, or exits) is a
:class:`~crash_scenario.WorkerFailed`, reported as a ``restart`` violation; the servers'
stderr is kept in ``servers.log`` beside the trial's other files.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType

import anyio
import anyio.abc
import anyio.to_thread
from anyio.streams.buffered import BufferedByteReceiveStream

from chord import FrameConnection
from coding_agent.server.directory import SessionDirectory
from coding_agent.server.preface import Request
from coding_agent.server.remote import ServerAddress, connect_any
from coding_agent.session_files.folders import Session

__all__ = ["TOKEN", "ServerPair", "WorkerFailed"]

TOKEN = "crash-injection-token-0123456789"
_STARTED = re.compile(r"worker started \(pid (\d+)\)")


class _Server:
    """One ``coding-agent serve`` of the pair: its process and what its stderr said."""

    def __init__(self, name: str, socket: Path) -> None:
        self.name = name
        self.socket = socket
        self.port = 0
        self.process: anyio.abc.Process | None = None
        self.events: list[tuple[float, str]] = []
        self.listening = False
        """It printed its ``LISTENING tcp://`` line and has not been killed since."""
        self.worker: int | None = None
        """The pid of the session worker it started last, while it runs."""
        self.env: dict[str, str] | None = None
        """Its own environment (``None``: the pair's)."""


def _children(pid: int) -> list[int]:
    """The pids of the children of process ``pid`` (Linux ``/proc``)."""
    found: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


class WorkerFailed(RuntimeError):
    """The worker did not start (its exit code and the end of its log are in the message), or
    with a :class:`ServerPair`, a server did not, or the session's worker after a failover."""


class ServerPair:
    """Two (or more) servers on one database hosting the trial's session (see the module docstring)."""

    def __init__(
        self,
        session: Session,
        env: dict[str, str],
        project: Path,
        storage: str,
        lease: float,
        log: Path,
        *,
        separate: Path | None = None,
        servers: int = 2,
    ) -> None:
        self._session = session
        self._session_id = session.id
        self._env = env
        self._separate = separate
        self._project = project
        self._storage = storage
        self._lease = lease
        self._log = log
        self._folder = Path(tempfile.mkdtemp(prefix="ca-crash-"))  # short: socket paths
        self._token = self._folder / "token"
        self._token.write_text(TOKEN + "\n")
        os.chmod(self._token, 0o600)
        if not 2 <= servers <= 26:
            raise ValueError(f"servers={servers}: give 2 to 26")
        names = [chr(ord("A") + n) for n in range(servers)]
        self._servers = [_Server(name, self._folder / f"{name}.sock") for name in names]
        if separate is not None:  # the others on other machines: a state folder each
            for server in self._servers[1:]:
                server.env = {**env, "XDG_STATE_HOME": str(separate / server.name)}
        self._changed = anyio.Event()
        self._group: anyio.abc.TaskGroup | None = None
        self._index = 0
        """The server of the list that answered the client last (it is dialled first)."""
        self._killed: _Server | None = None
        self._killed_at = 0.0
        self.failovers = 0
        """Kills after which the *other* server's worker took the session."""
        self.takeover_seconds: list[float] = []
        """From each SIGKILL to the other server's ``worker started`` (lease taken, READY)."""
        self.takeover_kills = 0
        """Second kills that landed while another server was taking the session over."""
        self.delayed_kills = 0
        """Kills that waited for a server killed before to listen again (no other one was up
        when their drawn point came)."""
        self._standby_error: str | None = None
        self.cut_off_next = False
        """Set before a :meth:`kill`: leave the host's workers stopped, not killed (cut off from
        their dead server, like a machine that froze), and let them go on once another
        server's worker took the lease: fenced, they must stop without a trace."""
        self.cutoffs = 0
        self._thaw_error: str | None = None
        self._bound = 120.0
        self._frozen: list[tuple[int, int]] = []
        """The cut-off workers still stopped: pid and pidfd."""

    async def __aenter__(self) -> ServerPair:
        self._group = await anyio.create_task_group().__aenter__()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        assert self._group is not None
        self._group.cancel_scope.cancel()
        return await self._group.__aexit__(kind, error, traceback)

    # -- what the scenario calls ----------------------------------------------------------------
    def connect(self) -> Callable[[], Awaitable[FrameConnection]]:
        """The client's connect function: the servers' TCP addresses in order, the one that
        answered last first."""
        addresses = [ServerAddress(host="127.0.0.1", port=s.port) for s in self._servers]

        async def connect() -> FrameConnection:
            conn, _info, self._index = await connect_any(
                addresses, Request(session=self._session_id), start=self._index,
                token=TOKEN, insecure=True,
            )  # fmt: skip
            return conn

        return connect

    async def start(self, bound: float) -> None:
        """The first time: start both servers. After a kill: wait until a server's worker
        took the session over (its ``worker started`` line)."""
        if self._killed is None:
            if self._separate is not None:  # what the server that made it would record
                await SessionDirectory(self._storage).put(self._session.metadata)
            try:
                async with anyio.create_task_group() as group:  # all at once
                    for server in self._servers:
                        group.start_soon(self._launch, server, bound)
            except* WorkerFailed as failed:
                raise failed.exceptions[0] from None
            return
        killed, since = self._killed, self._killed_at
        with anyio.fail_after(bound):
            while True:
                for server in self._servers:
                    for at, line in server.events:
                        if at < since:
                            continue
                        if _STARTED.search(line):
                            if server is not killed:
                                self.failovers += 1
                            self.takeover_seconds.append(at - since)
                            await self._thaw(bound)
                            if self._thaw_error is not None:
                                raise WorkerFailed(self._thaw_error)
                            return
                        if "start_failed" in line:
                            raise WorkerFailed(f"server {server.name}: {line}")
                    if server.listening and self._exited(server):  # not one we killed
                        raise WorkerFailed(f"server {server.name} exited: {self._tail()}")
                await self._changed.wait()

    async def kill(self, bound: float) -> float:
        """SIGKILL the server hosting the session and its worker (the machine is gone), and start
        that server again in the background; the ``perf_counter`` time of the SIGKILL. First
        wait, if need be, until the server killed last listens again (the one to fail over to)."""
        host = max(
            (s for s in self._servers if s.worker is not None and not self._exited(s)),
            key=lambda s: next(at for at, line in reversed(s.events) if _STARTED.search(line)),
            default=None,
        )
        if host is None:
            raise WorkerFailed(f"no server hosts the session: {self._tail()}")
        assert host.process is not None and host.worker is not None
        waited = False
        with anyio.fail_after(bound):  # a server to fail over to
            while not any(s.listening for s in self._servers if s is not host):
                if self._standby_error is not None:
                    raise WorkerFailed(self._standby_error)
                if not waited:
                    self.delayed_kills, waited = self.delayed_kills + 1, True
                await self._changed.wait()
        cut_off, self.cut_off_next = self.cut_off_next, False
        await self._thaw(bound)  # none stays stopped across another kill
        return await self._down(host, bound, cut_off)

    async def kill_takeover(self, delay: float, bound: float) -> str:
        """``delay`` seconds after a :meth:`kill`, SIGKILL the server taking the session over
        (and the worker it is starting, waiting for the lease or replaying); what was killed."""
        await anyio.sleep(delay)
        await self._thaw(bound)
        killed, since = self._killed, self._killed_at
        assert killed is not None
        hosts = [s for s in self._servers if s.worker is not None and not self._exited(s)]
        if hosts:  # the takeover is over: kill the new host (its worker started after since)
            target, what = hosts[0], "its worker up"
        else:  # the next server of the client's list that is up: the one it dials
            order = self._servers[self._servers.index(killed) + 1 :] + self._servers
            up = [s for s in order if s.listening]
            if not up:
                return "no server up to kill in the takeover"
            target = up[0]
            starting = _children(target.process.pid) if target.process is not None else []
            what = "its worker starting" if starting else "no worker yet"
        self.takeover_kills += 1
        await self._down(target, bound)
        return f"killed {target.name} in the takeover ({what}, {time.monotonic() - since:.2f} s)"

    def release(self) -> None:
        """SIGKILL the cut-off workers still stopped (before the client closes: a connection
        relayed to a stopped worker would never answer)."""
        frozen, self._frozen = self._frozen, []
        for pid, fd in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.close(fd)

    async def aclose(self) -> None:
        """SIGTERM every server (they stop their workers cleanly) and wait for them."""
        self.release()
        with anyio.CancelScope(shield=True):
            for server in self._servers:
                process, server.process = server.process, None
                if process is None:
                    continue
                if process.returncode is None:
                    process.send_signal(signal.SIGTERM)
                    with anyio.move_on_after(30):
                        await process.wait()
                    if process.returncode is None:
                        process.kill()
                        await process.wait()
                await process.aclose()
            for path in self._folder.iterdir():
                path.unlink(missing_ok=True)
            self._folder.rmdir()

    # -- internals ------------------------------------------------------------------------------
    async def _down(self, server: _Server, bound: float, cut_off: bool = False) -> float:
        """SIGKILL ``server`` and every worker it runs or is starting (its children: they are
        stopped first, so none sees its server go and exits by itself), start the server again
        in the background, and return the ``perf_counter`` time of the SIGKILL. With
        ``cut_off`` the workers are left stopped instead, until the takeover (:meth:`_thaw`)."""
        process = server.process
        assert process is not None
        stopped: list[tuple[int, int]] = []
        workers = _children(process.pid)
        for pid in workers:
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:  # it ended meanwhile
                continue
            stopped.append((pid, fd))
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        fds = [fd for _pid, fd in stopped]
        self._note(server, f"SIGKILL (its workers {'cut off' if cut_off else 'too'}: {workers})")
        self._killed, self._killed_at = server, time.monotonic()
        killed = time.perf_counter()
        server.listening, server.worker = False, None
        process.kill()
        if cut_off:
            self._frozen += stopped
            self.cutoffs += 1
            fds = []
        try:
            for pid in workers if not cut_off else []:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            with anyio.fail_after(bound):
                for fd in fds:  # a pidfd reads as readable once its process has ended
                    await anyio.to_thread.run_sync(
                        select.select, [fd], [], [], abandon_on_cancel=True
                    )
                await process.wait()
        finally:
            for fd in fds:
                os.close(fd)
        await process.aclose()
        self._relaunch(server, bound)
        return killed

    async def _thaw(self, bound: float) -> None:
        """Let the cut-off workers go on (SIGCONT) and wait for their end: their server is gone
        (their stdin ends) and another worker holds the lease."""
        frozen, self._frozen = self._frozen, []
        try:
            for pid, _fd in frozen:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            for pid, fd in frozen:
                with anyio.move_on_after(bound) as waited:
                    await anyio.to_thread.run_sync(
                        select.select, [fd], [], [], abandon_on_cancel=True
                    )
                if waited.cancelled_caught:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    self._thaw_error = (
                        f"a cut-off worker (pid {pid}) still ran {bound:g} s after another "
                        "server's worker took its lease"
                    )
        finally:
            for _pid, fd in frozen:
                os.close(fd)

    def _relaunch(self, killed: _Server, bound: float) -> None:
        """Start the killed server again (same port and socket) in the background: a later
        :meth:`kill` with no other server up waits for it."""

        async def relaunch() -> None:
            try:
                await self._launch(killed, bound)
            except (WorkerFailed, TimeoutError) as error:
                self._standby_error = (
                    f"the killed server {killed.name} did not start again: {error}"
                )
                self._notify()

        assert self._group is not None
        self._group.start_soon(relaunch)

    def _exited(self, server: _Server) -> bool:
        return server.process is None or server.process.returncode is not None

    def _note(self, server: _Server, text: str) -> None:
        with self._log.open("a", encoding="utf-8") as log:
            log.write(f"{time.monotonic():.3f} {server.name}: {text}\n")

    async def _launch(self, server: _Server, bound: float) -> None:
        self._note(server, "starting")
        command = [
            sys.executable, "-m", "coding_agent.cli.main", "serve", "--cwd", str(self._project),
            "--storage", self._storage, "--lease", repr(self._lease),
            "--listen", f"tcp://127.0.0.1:{server.port}", "--insecure",
            "--token-file", str(self._token), "--socket", str(server.socket),
            "--host-sessions", "0",  # a worker process per session: the one killed with it
        ]  # fmt: skip
        process = await anyio.open_process(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=server.env or self._env,
            cwd=str(self._project),
        )
        server.process, server.worker = process, None
        assert process.stdout is not None and self._group is not None
        self._group.start_soon(self._follow, server, process)
        out = BufferedByteReceiveStream(process.stdout)
        tcp = ""
        try:
            with anyio.fail_after(bound):
                while not tcp:
                    line = (await out.receive_until(b"\n", 65536)).decode()
                    if line.startswith("LISTENING tcp://"):
                        tcp = line
        except (anyio.EndOfStream, anyio.IncompleteRead):
            code: int | None = None
            with anyio.CancelScope(shield=True):
                code = await process.wait()
            raise WorkerFailed(
                f"server {server.name} did not start ({code}): {self._tail()}"
            ) from None
        server.port = int(tcp.rsplit(":", 1)[1])
        server.listening = True
        self._note(server, f"listening ({tcp})")
        self._notify()

    async def _follow(self, server: _Server, process: anyio.abc.Process) -> None:
        assert process.stderr is not None
        stream = BufferedByteReceiveStream(process.stderr)
        with self._log.open("a", encoding="utf-8") as log:
            while True:
                try:
                    line = (await stream.receive_until(b"\n", 1 << 20)).decode(errors="replace")
                except (anyio.EndOfStream, anyio.IncompleteRead):
                    break
                log.write(f"{time.monotonic():.3f} {server.name}: {line}\n")
                log.flush()
                if server.process is process:
                    if (match := _STARTED.search(line)) is not None:
                        server.worker = int(match.group(1))
                        if self._frozen and self._group is not None:  # the lease was taken
                            self._group.start_soon(self._thaw, self._bound)
                    elif "worker exited" in line:
                        server.worker = None
                    server.events.append((time.monotonic(), line))
                self._notify()
        self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    def _tail(self) -> str:
        try:
            return self._log.read_text(errors="replace")[-2000:]
        except OSError:
            return ""
