"""Keep one session worker serving a session: start it, reuse it, restart it when it dies.

The session worker (``python -m coding_agent.worker.main SESSION_DIR``) is its own process
(docs/design/decisions.md#d9): it owns the harness and serves it on a Unix socket in the session folder. The TUI
process connects to that socket through a reconnecting wire source and never owns the worker's
life the way a parent owns a child: the worker runs in its own process group, so it outlives a
crashed TUI, and a second TUI can attach to it.

:class:`WorkerSupervisor` is the TUI side's caretaker:

* :meth:`~WorkerSupervisor.ensure_started` reuses a worker that already serves the session (it
  holds ``worker.lock``) or starts one and waits for its ``READY <socket>`` line;
* :meth:`~WorkerSupervisor.watch` follows a :class:`~chord.wire.WireServiceSource`: every time
  the connection drops and no worker holds the session any more, it starts a new one. The
  worker resumes from storage, the source reconnects, and every facade rehydrates;
* :meth:`~WorkerSupervisor.stop` sends SIGTERM to a worker *this* supervisor started (a clean
  shutdown flushes storage) and waits for it.

Two supervisors may race to restart the same session (two attached TUIs). The worker's own lock
settles it: the loser exits with :data:`EXIT_ALREADY_SERVED` and both TUIs use the winner.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import anyio
import anyio.abc
import anyio.to_thread
from anyio.streams.buffered import BufferedByteReceiveStream

from chord import Backoff, WireServiceSource
from coding_agent.session_files.folders import Session
from coding_agent.settings.run_options import RunFlags
from coding_agent.settings.warm_start import enabled as warm_start_enabled

__all__ = [
    "EXIT_ALREADY_SERVED",
    "READY_TIMEOUT",
    "WorkerStartError",
    "WorkerSupervisor",
    "worker_command",
]

READY_TIMEOUT = 60.0
"""Seconds a starting worker gets to print its ready line."""

EXIT_ALREADY_SERVED = 3
"""The worker's exit code when another worker already serves the session."""

_MAX_FAILED_RESTARTS = 5
RESTART_BACKOFF = Backoff(initial=0.4, maximum=3.2)
"""The waits between failed restarts (0.4 s doubling to 3.2 s, jittered; see chord.Backoff)."""
_LOCK_RACE_ATTEMPTS = 3
_LOCK_RECHECK = 0.5


class WorkerStartError(RuntimeError):
    """The session worker could not be started (its message and the log's tail say why)."""

    def __init__(
        self, message: str, last_line: str | None = None, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.last_line = last_line
        self.status = status
        """The worker's exit status (2 usage, 4 model; ``None``: still running)."""

    def reason(self) -> str:
        """What the worker said last (its own error line), else the whole message."""
        if self.last_line:
            return self.last_line.removeprefix("coding-agent worker: ")
        return str(self)


def worker_command(
    session_dir: Path,
    *,
    model: str | None = None,
    dev: bool = False,
    facets_dirs: Sequence[str | Path] = (),
    faux_script: str | Path | None = None,
    exit_with_parent: bool = False,
    python: str = sys.executable,
    permission_mode: str | None = None,
    thinking: str | None = None,
    storage: str | None = None,
    linger: float | None = None,
    lease: float | None = None,
    warm_start: bool = False,
    run: RunFlags | None = None,
) -> list[str]:
    """The worker's command line. Whatever is not on it the worker takes from the launch
    settings stored in the session (:class:`~coding_agent.session_files.folders.LaunchSettings`).

    ``warm_start``: the warm start's thin client runs it instead (``python -m
    coding_agent.warm.client --worker``, same options): forked from the user's preloaded server
    when one serves, else run in that process as ``coding_agent.worker.main`` would. ``run``:
    Claude Code's run-scoped flags (:mod:`coding_agent.settings.run_options`), on every worker's
    command line (never stored)."""
    module = "coding_agent.warm.client" if warm_start else "coding_agent.worker.main"
    argv = [python, "-m", module, *(["--worker"] if warm_start else []), str(session_dir)]
    if model is not None:
        argv += ["--model", model]
    if thinking is not None:
        argv += ["--thinking", thinking]
    if dev:
        argv.append("--dev")
    for folder in facets_dirs:
        argv += ["--facets-dir", str(folder)]
    if faux_script is not None:
        argv += ["--faux-script", str(faux_script)]
    if exit_with_parent:
        argv.append("--exit-on-stdin-eof")
    if permission_mode is not None:
        argv += ["--permission-mode", permission_mode]
    if storage is not None:
        argv += ["--storage", storage]
    if linger is not None:
        argv += ["--linger", repr(float(linger))]
    if lease is not None:
        argv += ["--lease", repr(float(lease))]
    if run is not None:
        argv += run.worker_args()
    return argv


def _wait_unlocked(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    finally:
        os.close(fd)  # closing drops the shared lock at once


class WorkerSupervisor:
    """Start, reuse and restart the worker of one session (see the module docstring).

    ``faux_script`` is a JSON script for the faux model (tests and demos; see
    :func:`coding_agent.worker.demo.load_script`). ``exit_with_parent`` ties the worker to this process (its stdin is a pipe and it exits on
    end-of-file): tests use it so no worker outlives them. ``on_event`` hears one short line
    per lifecycle event ("worker started (pid 12)", "worker exited (-9); restarting"…).
    ``restart_backoff`` paces retries of a restart that failed (tests inject one with a fixed
    ``random``). ``storage`` (a PostgreSQL URL) and ``linger`` (seconds) go on every worker's
    command line (``coding-agent serve`` sets both), and ``lease`` (the PostgreSQL lease's
    expiry, seconds).
    """

    def __init__(
        self,
        session: Session,
        *,
        model: str | None = None,
        dev: bool = False,
        facets_dirs: Sequence[str | Path] = (),
        faux_script: str | Path | None = None,
        exit_with_parent: bool = False,
        env: Mapping[str, str] | None = None,
        ready_timeout: float = READY_TIMEOUT,
        on_event: Callable[[str], None] | None = None,
        permission_mode: str | None = None,
        thinking: str | None = None,
        restart_backoff: Backoff = RESTART_BACKOFF,
        storage: str | None = None,
        linger: float | None = None,
        lease: float | None = None,
        run: RunFlags | None = None,
    ) -> None:
        self.session = session
        # Claude Code's run-scoped flags: on every worker this supervisor starts (a restarted
        # one, a /resume'd session's), as they hold for the whole run and are stored nowhere
        self.run = run
        self._lease = lease
        self._storage = storage
        self._linger = linger
        self._restart_backoff = restart_backoff
        # ``--permission-mode``, ``--model`` and ``--thinking`` go to the first worker only: a
        # restarted worker keeps what the session stores (changed in a TUI meanwhile, say).
        self._permission_mode = permission_mode
        self._thinking = thinking
        self._model = model
        self._dev = dev
        self._facets_dirs = tuple(facets_dirs)
        self._faux_script = faux_script
        self._exit_with_parent = exit_with_parent
        self._env = dict(env) if env is not None else None
        self._ready_timeout = ready_timeout
        self._on_event = on_event
        self._process: anyio.abc.Process | None = None
        self._launched: anyio.abc.Process | None = None  # spawned, its ready line not read
        self._model_applied = False
        self.starts = 0
        """Workers this supervisor started (reused ones do not count)."""
        self.restarts = 0
        """Workers started because the one serving the session went away."""

    @property
    def pid(self) -> int | None:
        """The pid of the worker this supervisor started, while it runs."""
        process = self._process
        if process is None or process.returncode is not None:
            return None
        return process.pid

    def for_session(self, session: Session) -> WorkerSupervisor:
        """A supervisor of ``session`` with this one's options (``/resume`` in a running TUI).

        The ``--model`` and ``--permission-mode`` given for the first session are not carried
        over: a resumed session keeps the model and the mode stored in it. The run-scoped flags
        (:attr:`run`) are, so ``session`` must not be served already (by a worker without
        them: its rules would not hold there): ``RuntimeError`` (:meth:`refusal`) then.
        """
        refused = self.refusal(session)
        if refused is not None:
            raise RuntimeError(refused)
        return WorkerSupervisor(
            session,
            dev=self._dev,
            facets_dirs=self._facets_dirs,
            faux_script=self._faux_script,
            exit_with_parent=self._exit_with_parent,
            env=self._env,
            ready_timeout=self._ready_timeout,
            on_event=self._on_event,
            restart_backoff=self._restart_backoff,
            storage=self._storage,
            linger=self._linger,
            lease=self._lease,
            run=self.run,
        )

    def refusal(self, session: Session | None = None) -> str | None:
        """Why this run's run-scoped flags (:attr:`run`) cannot apply to ``session`` (default:
        this supervisor's), or ``None``: a worker serves it already, started without them (by
        another TUI, or lingering), and only a worker started here has them."""
        session = session or self.session
        if self.run is None or not session.worker_running():
            return None
        return (
            f"{', '.join(self.run.names())} apply to a worker this command starts, and session "
            f"{session.id} is served by a running one already (another TUI, or one lingering): "
            f"stop it (coding-agent attach {session.id}, then /stop), or start without them"
        )

    def command(self) -> list[str]:
        """The command line of the next worker (``--model`` only for the first one)."""
        return worker_command(
            self.session.path,
            model=None if self._model_applied else self._model,
            permission_mode=None if self._model_applied else self._permission_mode,
            thinking=None if self._model_applied else self._thinking,
            dev=self._dev,
            facets_dirs=self._facets_dirs,
            faux_script=self._faux_script,
            exit_with_parent=self._exit_with_parent,
            storage=self._storage,
            linger=self._linger,
            lease=self._lease,
            warm_start=warm_start_enabled(self._env)[0],
            run=self.run,
        )

    async def wait(self) -> int | None:
        """Wait until the worker this supervisor started exits, and forget it; its exit status
        (``None`` when there is none: nothing started, or already reaped)."""
        process = self._process
        if process is None:
            return None
        await process.wait()
        if self._process is not process:
            return process.returncode
        return await self._reap()

    async def launch(self) -> None:
        """Spawn the session's worker now, without waiting for it to serve (when none serves
        the session yet); :meth:`ensure_started` then waits for that one's ready line.

        The TUI calls it first thing, so the worker starts *beside* the TUI's own imports
        and first frame instead of before them.
        """
        if self._launched is None and not self.session.worker_running():
            await self._reap()
            self._launched = await self._spawn()

    async def ensure_started(self) -> bool:
        """Make sure a worker serves the session; ``True`` if this call started it.

        A worker that already holds the session lock is reused as it is (it may still be
        starting: the wire source waits for its socket). Raises :class:`WorkerStartError` when
        the new worker exits or times out before it is ready. A worker started with :meth:`launch`
        before is waited for first.
        """
        launched, self._launched = self._launched, None
        if launched is not None:
            started = await self._ready(launched)
            if started or self.session.worker_running():
                return started
        for _ in range(_LOCK_RACE_ATTEMPTS):
            if self.session.worker_running():
                return False
            started = await self._start_one()
            if started or self.session.worker_running():
                return started
            # The new worker found the lock taken, yet nobody holds it now: it lost a race
            # against a short-lived probe or a worker that died at once. Try again.
        raise WorkerStartError(
            f"the session worker kept finding session {self.session.id} locked by nobody"
        )

    async def _start_one(self) -> bool:
        await self._reap()
        return await self._ready(await self._spawn())

    async def _spawn(self) -> anyio.abc.Process:
        argv = self.command()
        log = self._open_log()
        try:
            process = await anyio.open_process(
                argv,
                stdin=subprocess.PIPE if self._exit_with_parent else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=self.session.cwd,
                env=self._env,
                start_new_session=True,
            )
        finally:
            os.close(log)
        self._process = process
        return process

    async def _ready(self, process: anyio.abc.Process) -> bool:
        """Wait for the ready line of ``process`` (just spawned); ``True`` once it serves."""
        started = await self._wait_ready(process)
        if started:
            self._model_applied = True
            self.starts += 1
            self._event(f"worker started (pid {process.pid})")
        return started

    async def watch(self, source: WireServiceSource) -> None:
        """Restart the worker whenever ``source`` loses it; runs until cancelled.

        A restart that fails is retried a few times, waiting ``restart_backoff``'s delays; then
        the error is raised (the caller decides whether the UI can go on).
        """
        failures = 0
        while True:
            await source.wait_connected()
            await source.wait_disconnected()
            while not source.connected:
                status = await self._reap()
                if status is not None:
                    self._event(f"worker exited ({status}); restarting")
                try:
                    if await self.ensure_started():
                        self.restarts += 1
                        # It serves (its ready line is read): reconnect now, not at the end of
                        # the source's backoff wait (up to 0.4 s at this point of a restart).
                        source.retry_now()
                        break
                    failures = 0
                except WorkerStartError as error:
                    failures += 1
                    self._event(f"restart failed: {error}")
                    if failures >= _MAX_FAILED_RESTARTS:
                        raise
                    await anyio.sleep(self._restart_backoff.delay(failures))
                    continue
                # The lock is held: another worker is starting, or the dying one has not
                # released it yet (a killed process closes its socket and its lock one after
                # the other). Wait for the source to reconnect, and look again now and then.
                with anyio.move_on_after(_LOCK_RECHECK):
                    await source.wait_connected()

    async def release(self) -> None:
        """Leave the worker this supervisor started running (``/quit``): it serves the next
        client and stops by itself once it has lingered with no client and nothing live. A
        worker tied to this process (``exit_with_parent``) cannot outlive it: it is stopped, and
        so is one carrying Claude Code's run-scoped flags (:attr:`run`: ``--allowedTools``...
        hold for this run only; a later ``--continue`` must not find them in force)."""
        self._launched = None
        process = self._process
        if process is None:
            return
        if self._exit_with_parent or self.run is not None or process.returncode is not None:
            await self.stop()
            return
        self._process = None
        # asyncio's subprocess transport kills a child it believes is still running when it
        # is closed or collected; the worker is no longer ours to end, so it forgets it.
        transport = getattr(getattr(process, "_process", None), "_transport", None)
        if transport is not None:
            transport._proc = None  # pyright: ignore[reportAttributeAccessIssue]
        if process.stdout is not None:
            with anyio.CancelScope(shield=True):
                await process.stdout.aclose()

    async def stop_worker(self) -> None:
        """``/stop``: end the session's worker, whoever started it (a reused one gets SIGTERM
        through the pid its lock file names), and wait until it let go of the session."""
        if self._process is not None:
            await self.stop()
            return
        if not self.session.worker_running():
            return
        try:
            pid = int(self.session.lock_path.read_text().split()[0])
            os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError, IndexError):
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(20):
            # Another process: its lock is all there is to watch (a blocking shared flock
            # returns once the worker has let go of it).
            await anyio.to_thread.run_sync(
                _wait_unlocked, self.session.lock_path, abandon_on_cancel=True
            )

    async def stop(self) -> None:
        """SIGTERM the worker this supervisor started (if still running) and wait for it."""
        self._launched = None
        process = self._process
        if process is None:
            return
        if process.returncode is None:
            try:
                process.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(20) as waited:
                    await process.wait()
                if waited.cancelled_caught:
                    process.kill()
                    await process.wait()
        await self._reap()

    # -- internals ---------------------------------------------------------------------------
    async def _wait_ready(self, process: anyio.abc.Process) -> bool:
        assert process.stdout is not None
        stdout = BufferedByteReceiveStream(process.stdout)
        line = b""
        with anyio.move_on_after(self._ready_timeout) as timer:
            try:
                line = await stdout.receive_until(b"\n", 65536)
            except (anyio.EndOfStream, anyio.IncompleteRead):
                line = b""
        if line.startswith(b"READY"):
            return True
        if timer.cancelled_caught:
            process.kill()
        status = await process.wait()
        await self._reap()
        if status == EXIT_ALREADY_SERVED:
            return False  # another supervisor won the race: that worker serves the session
        tail = self._log_tail()
        last = (
            tail.rsplit(" | ", 1)[-1]
            if tail.startswith("coding-agent worker: ") or (" | coding-agent worker: " in tail)
            else None
        )
        raise WorkerStartError(
            f"the session worker did not start (exit status {status}"
            f"{', timed out' if timer.cancelled_caught else ''}): {tail}",
            last,
            status,
        )

    async def _reap(self) -> int | None:
        """Forget a worker of ours that has exited; returns its exit status if there was one."""
        process = self._process
        if process is None:
            return None
        if process.returncode is None and self.session.worker_running():
            return None  # still alive and serving
        if process.returncode is None:
            with anyio.move_on_after(5):
                await process.wait()
            if process.returncode is None:  # lost its lock but hangs on: end it
                process.kill()
                await process.wait()
        self._process = None
        status = process.returncode
        with anyio.CancelScope(shield=True):
            await process.aclose()
        return status

    def _open_log(self) -> int:
        """The worker's stderr: appended to the session's log file (a raw descriptor)."""
        return os.open(self.session.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def _log_tail(self, lines: int = 8) -> str:
        try:
            text = Path(self.session.log_path).read_text(errors="replace")
        except OSError:
            return "(no worker log)"
        tail = [line for line in text.splitlines() if line.strip()][-lines:]
        return " | ".join(tail) if tail else "(the worker log is empty)"

    def _event(self, message: str) -> None:
        if self._on_event is not None:
            self._on_event(message)
