"""The server's side of a host process of many sessions (``serve --host-sessions``).

:class:`HostProcess` starts ``python -m coding_agent.worker.host`` (on first use, and again if
it died), writes it ``open``/``stop`` requests and reads its reports
(:mod:`coding_agent.worker.host` has the protocol). :class:`HostedSession` is one session in it,
with the part of :class:`~coding_agent.supervisor.WorkerSupervisor`'s interface the server uses
(``ensure_started``, ``wait``, ``stop``, ``pid``), so the server's queueing (``--max-starting``,
``--max-sessions``), reaping and dialing stay the same for both ways of running sessions.

A start that fails reports the session's exit before ``ready``; one that does not answer within
the ready timeout is stopped (and waited for) before the error is raised, so a failed start
leaves nothing running. The host process is tied to the server (its stdin is the server's
pipe: a server that dies takes it along, and its end of file stops every session cleanly).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import anyio
import anyio.abc
import msgspec
from anyio.streams.buffered import BufferedByteReceiveStream

from coding_agent.session_files.folders import Session
from coding_agent.supervisor import EXIT_ALREADY_SERVED, READY_TIMEOUT, WorkerStartError

__all__ = ["DEFAULT_POOL_SIZE", "HostProcess", "HostedSession"]

DEFAULT_POOL_SIZE = 10
"""``serve --db-pool-size``' default (always passed to the host process)."""

HOST_MAX_STARTING = 16
"""``serve --max-starting``' default with ``--host-sessions``: a hosted start is a task in a
running interpreter (about 0.2 s of CPU, much of its wall time waiting on the database), not a
new process, so more at once keep the hosts busy. Measured with ``benchmarks/serve_capacity.py
--sessions 100 --host-sessions 2`` on two loaded cores: 2 at once 8.8-9.5 s, 4: 7.5 s, 16:
6.1-6.6 s, 32: 6.1-6.8 s, 64: 7.1-8.0 s (docs/design/server-capacity.md)."""

STOP_TIMEOUT = 20.0
"""Seconds a stopped session gets to end before the whole host is killed (nothing is left
running that the server does not know of)."""


class _Report(msgspec.Struct, frozen=True):
    id: str
    ready: str | None = None
    exited: int | None = None
    error: str | None = None


_REPORT = msgspec.json.Decoder(_Report)


class HostProcess:
    """One ``coding_agent.worker.host`` process and its sessions (see the module doc)."""

    def __init__(
        self,
        *,
        env: Mapping[str, str] | None,
        storage: str | None,
        pool_size: int,
        linger: float | None,
        lease: float | None,
        log_path: Path,
        cwd: Path | None = None,
        python: str = sys.executable,
        on_event: Callable[[str], None] | None = None,
    ) -> None:
        self._env = dict(env) if env is not None else None
        self._storage = storage
        self._pool_size = pool_size
        self._linger = linger
        self._lease = lease
        self._log_path = log_path
        self._cwd = cwd
        self._python = python
        self._on_event = on_event
        self._process: anyio.abc.Process | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._lock = anyio.Lock()
        self._sessions: dict[str, HostedSession] = {}
        self.starts = 0
        """Host processes started so far."""

    @property
    def hosted(self) -> int:
        """Sessions running or starting in this host now."""
        return len(self._sessions)

    @property
    def pid(self) -> int | None:
        process = self._process
        return None if process is None or process.returncode is not None else process.pid

    def command(self) -> list[str]:
        argv = [self._python, "-m", "coding_agent.worker.host"]
        if self._storage is not None:
            argv += ["--storage", self._storage, "--db-pool-size", str(self._pool_size)]
        if self._linger is not None:
            argv += ["--linger", repr(float(self._linger))]
        if self._lease is not None:
            argv += ["--lease", repr(float(self._lease))]
        return argv

    def session(self, session: Session) -> HostedSession:
        return HostedSession(self, session)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Own the host's reader tasks until cancelled; then end the host (its stdin closed:
        every session stops cleanly; killed if it has not exited within the stop timeout)."""
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                task_status.started()
                await anyio.sleep_forever()
        finally:
            self._group = None
            with anyio.CancelScope(shield=True):
                await self._end()

    async def _end(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            await process.stdin.aclose()
        with anyio.move_on_after(STOP_TIMEOUT + 5):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
        await process.aclose()

    async def _ensure_process(self) -> anyio.abc.Process:
        async with self._lock:
            process = self._process
            if process is not None and process.returncode is None:
                return process
            if self._group is None:
                raise WorkerStartError("the session host is not running (the server is stopping)")
            log = os.open(self._log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                process = await anyio.open_process(
                    self.command(),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    env=self._env,
                    cwd=self._cwd,  # the server's project folder (a session never relies on it)
                    start_new_session=True,
                )
            finally:
                os.close(log)
            self._process = process
            self.starts += 1
            self._event(f"session host started (pid {process.pid})")
            self._group.start_soon(self._read, process)
            return process

    async def _read(self, process: anyio.abc.Process) -> None:
        assert process.stdout is not None
        stdout = BufferedByteReceiveStream(process.stdout)
        try:
            while True:
                line = await stdout.receive_until(b"\n", 1 << 20)
                try:
                    report = _REPORT.decode(line)
                except msgspec.DecodeError:
                    continue
                hosted = self._sessions.get(report.id)
                if hosted is not None:
                    hosted.report(report)
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError):
            pass
        status = await process.wait()
        self._event(f"session host exited ({status})")
        for hosted in list(self._sessions.values()):
            if hosted.process is process:
                hosted.report(_Report(hosted.session.id, exited=status if status else -9,
                                      error=f"the session host exited ({status})"))  # fmt: skip

    async def send(self, process: anyio.abc.Process, op: str, session: Session) -> None:
        assert process.stdin is not None
        line = msgspec.json.encode({"op": op, "id": session.id, "dir": str(session.path)})
        try:
            await process.stdin.send(line + b"\n")
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as error:
            raise WorkerStartError(f"the session host is gone: {error}") from None

    def _event(self, message: str) -> None:
        if self._on_event is not None:
            self._on_event(message)


class HostedSession:
    """One session in a :class:`HostProcess` (see the module doc)."""

    def __init__(self, host: HostProcess, session: Session) -> None:
        self.host = host
        self.session = session
        self.process: anyio.abc.Process | None = None
        self._ready = anyio.Event()
        self._exited = anyio.Event()
        self._status: int | None = None
        self._error: str | None = None
        self._running = False

    @property
    def pid(self) -> int | None:
        """The host's pid while this session runs in it."""
        process = self.process
        if not self._running or process is None or process.returncode is not None:
            return None
        return process.pid

    def report(self, report: _Report) -> None:
        if report.ready is not None:
            self._ready.set()
        elif report.exited is not None and not self._exited.is_set():
            self._status, self._error = report.exited, report.error
            self._running = False
            self._exited.set()
            sessions = self.host._sessions  # pyright: ignore[reportPrivateUsage]
            if sessions.get(self.session.id) is self:
                del sessions[self.session.id]

    async def ensure_started(self) -> bool:
        """Have the host serve the session; ``True`` if this call started it. Raises
        :class:`WorkerStartError` when it ended, or did not answer in time, before it served
        (then it was stopped: nothing is left running)."""
        if self.session.worker_running():
            return False
        process = await self.host._ensure_process()  # pyright: ignore[reportPrivateUsage]
        self.process = process
        self._ready, self._exited = anyio.Event(), anyio.Event()
        self._status = self._error = None
        self._running = True
        self.host._sessions[self.session.id] = self  # pyright: ignore[reportPrivateUsage]
        try:
            await self.host.send(process, "open", self.session)
            with anyio.move_on_after(READY_TIMEOUT) as timer:
                async with anyio.create_task_group() as group:

                    async def first(event: anyio.Event) -> None:
                        await event.wait()
                        group.cancel_scope.cancel()

                    group.start_soon(first, self._ready)
                    group.start_soon(first, self._exited)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.stop()
            raise
        if self._ready.is_set() and not self._exited.is_set():
            return True
        if timer.cancelled_caught:
            with anyio.CancelScope(shield=True):
                await self.stop()
            raise WorkerStartError(
                f"the session did not start within {READY_TIMEOUT:g} s (stopped)",
                f"the session did not start within {READY_TIMEOUT:g} s",
            )
        if self._status == EXIT_ALREADY_SERVED:
            return False
        raise WorkerStartError(
            f"the session did not start (exit status {self._status}): {self._error}",
            self._error,
            self._status,
        )

    async def wait(self) -> int | None:
        """Wait until the session ended in the host; its exit status."""
        if self.process is None:
            return None
        await self._exited.wait()
        return self._status

    async def stop(self) -> None:
        """Stop the session (cleanly: it closes its storage) and wait for it; a session that
        does not end within :data:`STOP_TIMEOUT` takes the whole host down with it."""
        process = self.process
        if process is None or self._exited.is_set() or process.returncode is not None:
            return
        try:
            await self.host.send(process, "stop", self.session)
        except WorkerStartError:
            pass  # the host is gone: its reader reports the end
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(STOP_TIMEOUT):
                await self._exited.wait()
            if not self._exited.is_set() and process.returncode is None:
                process.kill()  # its reader reports every session's end
                await self._exited.wait()
