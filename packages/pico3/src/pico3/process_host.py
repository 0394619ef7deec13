"""Process hosts: how ``pi.job`` starts, observes and kills operating-system processes.

The harness never spawns a process itself. It is handed a :class:`ProcessHost` (through
``HarnessOptions(services={"process_host": host})``) and speaks to it with three calls, all
keyed by a string the job persisted *before* the effect (docs/design/turn.md#jobs):

``start(key, spec, ctx)``
    Idempotent per key: a second ``start`` of a key that is running or has exited does
    nothing. It raises :class:`ProcessStartError` only when the process was *certainly* not
    started (missing executable, permission denied, bad working directory); any uncertain
    outcome returns normally and is resolved by ``status``.
``status(key, ctx)``
    A :class:`ProcessStatus`: ``running`` or ``exited`` with the captured output, or
    ``unknown`` when the host has no usable record of the key, or ``lost`` when it knows the
    key was started but can no longer observe or reach the process (it ran on a machine that
    is gone): ``pi.job`` then fails the job ``interrupted`` and never starts the key again,
    whatever ``rerun`` says.
``kill(key, signal, ctx)``
    ``"SIGTERM"`` or ``"SIGKILL"`` to the process tree; idempotent for exited and unknown keys.

A host must outlive the harness instance that uses it: a suspended and reopened harness
reconciles its running jobs through ``status(key)`` instead of finding them ``unknown``.

:class:`LocalProcessHost` is the real implementation. It keeps one *record directory* per key
under a state directory and runs every command under a small supervisor script
(:mod:`pico3._supervise`) that is detached from the harness, owns the command as its child and
writes the exit code to the record when the command ends. So the record answers ``status``
even after the harness, or the whole Python process that ran it, went away — a new
:class:`LocalProcessHost` on the same state directory re-finds every key. A record whose
supervisor died without writing an exit code (it was SIGKILLed, the machine rebooted) is
*lost* and reads ``unknown``; ``start`` on a lost key starts the command afresh.

Whether a supervisor is alive is answered by its *claim*: the host creates ``claim`` in the
record, takes an exclusive ``flock`` on it and hands the open file to the supervisor before it
launches it, so the lock is held, without a gap, from before the launch until the supervisor
exits. A host SIGKILLed mid-launch leaves a record whose supervisor has not yet written
``supervisor.json``; the claim still reads held, so the key reads ``running`` (and is never
started a second time beside it), not lost. Records written before claims existed fall back to
``supervisor.json``'s pid and start time.

:meth:`LocalProcessHost.fence` kills every running command at once, synchronously and from any
thread: the self-fencing of a worker that may lose its session (registered with
:meth:`pico3.PostgresStorage.on_fence`).

Limits, plainly: output is captured to files and ``status`` returns at most ``output_limit``
bytes of each stream (the *tail*; ``dropped_*`` counts the bytes left out); killing reaches the
command's process group, so a descendant that moves to a session or group of its own escapes;
POSIX only.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable
from urllib.parse import quote, unquote

import anyio
import msgspec
from anyio.streams.text import TextReceiveStream

from chord.context import Context, cancel_scope
from pico3.child_env import ChildEnvironment
from pico3.files import write_atomic

__all__ = [
    "KillSignal",
    "LocalProcessHost",
    "ProcessHost",
    "ProcessHostBusy",
    "ProcessSpec",
    "ProcessStartError",
    "ProcessStatus",
]

KillSignal = Literal["SIGTERM", "SIGKILL"]
_SIGNALS: dict[str, int] = {"SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL}
_SUPERVISOR = Path(__file__).with_name("_supervise.py")
_KEY = re.compile(r"^[\x21-\x7e]{1,200}$")


class ProcessStartError(Exception):
    """The process was certainly not started (the OS refused); ``errno`` says why."""

    def __init__(self, message: str, errno_: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno_


class ProcessHostBusy(RuntimeError):
    """Another :class:`LocalProcessHost` holds the state directory."""


@dataclass(frozen=True, slots=True)
class ProcessSpec:
    """What to run: ``command`` with ``args`` in ``cwd``; ``env`` entries are laid over the
    host's own environment (so ``PATH`` and friends still apply). A host withholds its
    :class:`~pico3.ChildEnvironment`'s secrets from both."""

    command: str
    args: tuple[str, ...] = ()
    cwd: str = "."
    env: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.command, str) or not self.command:
            raise ValueError("ProcessSpec.command must be a non-empty string")
        if not all(isinstance(a, str) for a in self.args):
            raise ValueError("ProcessSpec.args must be strings")
        if not isinstance(self.cwd, str) or not self.cwd:
            raise ValueError("ProcessSpec.cwd must be a non-empty string")
        if self.env is not None and not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.env.items()
        ):
            raise ValueError("ProcessSpec.env must map strings to strings")


class ProcessStatus(msgspec.Struct, frozen=True):
    """What a host knows about a key.

    ``state`` is ``"running"``, ``"exited"`` (then ``exit_code`` is set; negative means killed
    by that signal), ``"unknown"`` or ``"lost"`` (started, but out of reach: ``detail`` says
    where). ``stdout``/``stderr`` hold the captured tail of each stream and
    ``dropped_stdout``/``dropped_stderr`` the number of bytes left out before it.
    """

    state: Literal["running", "exited", "unknown", "lost"]
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    dropped_stdout: int = 0
    dropped_stderr: int = 0
    detail: str = ""

    @classmethod
    def unknown(cls) -> ProcessStatus:
        """The status of a key the host has no usable record of."""
        return cls(state="unknown")


@runtime_checkable
class ProcessHost(Protocol):
    """The three calls ``pi.job`` makes (see the module docstring for the contract)."""

    async def start(self, key: str, spec: ProcessSpec, ctx: Context) -> None: ...

    async def status(self, key: str, ctx: Context) -> ProcessStatus: ...

    async def kill(self, key: str, signal: KillSignal, ctx: Context) -> None: ...


@dataclass(slots=True)
class _Locks:
    by_key: dict[str, anyio.Lock] = field(default_factory=dict)

    def __call__(self, key: str) -> anyio.Lock:
        lock = self.by_key.get(key)
        if lock is None:
            lock = self.by_key[key] = anyio.Lock()
        return lock


class LocalProcessHost:
    """Real subprocesses, supervised and recorded under ``state_dir`` (see the module docs).

    One instance per state directory at a time (an advisory lock enforces it; the lock dies
    with the process holding it). :meth:`close` releases the directory and leaves every
    process running. Usable as a context manager. ``environment`` says what a command's
    environment leaves out (default :meth:`~pico3.ChildEnvironment.default`): the supervisor
    starts with :meth:`~pico3.ChildEnvironment.environ` and a spec's ``env`` is scrubbed.
    """

    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        *,
        output_limit: int = 64 * 1024,
        environment: ChildEnvironment | None = None,
    ):
        if output_limit < 0:
            raise ValueError("output_limit must be >= 0")
        self.state_dir = Path(state_dir)
        self.output_limit = output_limit
        self.environment = environment if environment is not None else ChildEnvironment.default()
        self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock_fd: int | None = os.open(self.state_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise ProcessHostBusy(f"{self.state_dir} is used by another process host") from None
        self._locks = _Locks()

    def close(self) -> None:
        """Release the state directory (idempotent). Processes keep running."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> LocalProcessHost:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- the protocol ----------------------------------------------------------------------
    async def start(self, key: str, spec: ProcessSpec, ctx: Context) -> None:
        """Start ``spec`` under ``key`` unless the key already runs or ran (idempotent)."""
        ctx.raise_if_cancelled()
        record = self._record(key)
        if not isinstance(spec, ProcessSpec):
            raise TypeError(f"spec must be a ProcessSpec, got {type(spec).__name__}")
        async with self._locks(key):
            self._check_open()
            if _state(record, self.output_limit).state != "unknown":
                return
            if record.exists():  # lost: make sure nothing of it survives, then start afresh
                _kill_child(record, signal.SIGKILL)
                shutil.rmtree(record)
            record.mkdir()
            _write_json(record / "spec.json", _spec_json(spec, self.environment))
            # The launch is short and must not be abandoned halfway: a cancelled caller would
            # leave an unreaped intermediate process. Uncertain outcomes resolve via status().
            report: dict[str, Any] | None = None
            claim = os.open(record / _CLAIM, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(claim, fcntl.LOCK_EX)  # a fresh record: nobody else has it
                with anyio.CancelScope(shield=True):
                    report = await _launch(record, claim, self.environment.environ())
            finally:
                os.close(claim)  # the supervisor holds its own copy of the locked file
            if report is not None and report.get("ok") is False:
                shutil.rmtree(record, ignore_errors=True)
                raise ProcessStartError(
                    f"could not start {spec.command!r} in {spec.cwd!r}: {report.get('error')}",
                    report.get("errno"),
                )

    async def status(self, key: str, ctx: Context) -> ProcessStatus:
        """``running``/``exited`` with the captured output, or ``unknown``."""
        ctx.raise_if_cancelled()
        record = self._record(key)
        async with self._locks(key):
            self._check_open()
            return _state(record, self.output_limit)

    async def kill(self, key: str, signal: KillSignal, ctx: Context) -> None:
        """Send ``signal`` to the key's process group; nothing for exited or unknown keys."""
        ctx.raise_if_cancelled()
        if signal not in _SIGNALS:
            raise ValueError(f"signal must be 'SIGTERM' or 'SIGKILL', got {signal!r}")
        record = self._record(key)
        async with self._locks(key):
            self._check_open()
            if not record.exists() or (record / "exit.json").exists():
                return
            # Request first, then look for the group: the supervisor writes the group first,
            # then reads the request, so one of the two always delivers the signal.
            _write_json(record / "kill.json", {"signal": signal})
            _kill_child(record, _SIGNALS[signal])

    def fence(self, reason: str = "") -> list[str]:
        """Kill every running command of this host now (SIGKILL to each one's process group and
        session): self-fencing, for a worker that may lose its session to another worker (its
        lease could not be renewed, or was lost) and must not let its commands go on writing
        beside the new writer's. Synchronous and thread-safe, with no await: meant to be
        registered as a storage's fence callback
        (``storage.on_fence(host.fence)``, :meth:`pico3.PostgresStorage.on_fence`), which runs
        on the storage's watchdog thread even while the event loop is stuck. Writes
        ``fenced.json`` (``reason``) and a SIGKILL request into each record (so a supervisor
        still launching delivers it too); returns the keys it killed."""
        if self._lock_fd is None:
            return []
        killed: list[str] = []
        try:
            records = sorted(self.state_dir.iterdir())
        except OSError:
            return killed
        for record in records:
            if not record.is_dir() or (record / "exit.json").exists():
                continue
            try:
                _write_json(record / "fenced.json", {"reason": reason})
                _write_json(record / "kill.json", {"signal": "SIGKILL"})
                _kill_child(record, signal.SIGKILL)
            except OSError:
                continue
            killed.append(unquote(record.name))
        return killed

    async def wait(self, key: str, ctx: Context) -> ProcessStatus:
        """Wait until ``key`` is no longer running, then return its status.

        An event wait, not a poll: it watches the supervisor with a Linux pidfd (the
        supervisor exits right after recording the exit code). Not part of
        :class:`ProcessHost`; ``pi.job`` uses it, when a host has it, to notice an exit before
        its next scheduled poll. Cancelling ``ctx`` ends the wait only.
        """
        ctx.raise_if_cancelled()
        record = self._record(key)
        supervisor = _read_json(record / "supervisor.json")
        if supervisor is None and _claim_held(record):
            # Launched by a host that died before the supervisor wrote supervisor.json: the
            # claim is released when the supervisor exits.
            with cancel_scope(ctx):
                await anyio.to_thread.run_sync(_await_claim, record, abandon_on_cancel=True)
        elif supervisor is not None:
            fd = _pidfd(supervisor)
            if fd is not None:
                try:
                    with cancel_scope(ctx):
                        await anyio.wait_readable(fd)
                finally:
                    os.close(fd)
        return await self.status(key, ctx)

    # -- helpers ---------------------------------------------------------------------------
    def _record(self, key: str) -> Path:
        if not isinstance(key, str) or not _KEY.match(key):
            raise ValueError(f"process key must be 1-200 printable ASCII characters, got {key!r}")
        return self.state_dir / quote(key, safe="")

    def _check_open(self) -> None:
        if self._lock_fd is None:
            raise RuntimeError("the process host is closed")


def _spec_json(spec: ProcessSpec, environment: ChildEnvironment) -> dict[str, Any]:
    return {
        "command": spec.command,
        "args": list(spec.args),
        "cwd": spec.cwd,
        "env": None if spec.env is None else environment.scrub(spec.env),
    }


async def _launch(record: Path, claim: int, env: Mapping[str, str]) -> dict[str, Any] | None:
    """Run the supervisor in ``env`` (the command inherits it), handing it the locked
    ``claim`` file; return its one-line report, or ``None`` when it gave none."""
    with open(record / "supervisor.log", "ab") as log:  # noqa: ASYNC230 - a local, short open
        process = await anyio.open_process(
            [sys.executable, "-I", str(_SUPERVISOR), str(record), str(claim)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
            pass_fds=(claim,),
            env=env,
        )
    async with process:
        assert process.stdout is not None
        text = ""
        async for chunk in TextReceiveStream(process.stdout):
            text += chunk
        await process.wait()
    line = text.strip()
    if not line:
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


_CLAIM = "claim"


def _claim_held(record: Path) -> bool | None:
    """Is the record's claim locked (its supervisor alive or being launched)? ``None`` for a
    record without a claim (written by a host before claims existed)."""
    try:
        fd = os.open(record / _CLAIM, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases the probe's own lock, if it got one
    return False


def _await_claim(record: Path) -> None:
    """Block (in a worker thread) until the record's claim is released."""
    try:
        fd = os.open(record / _CLAIM, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    finally:
        os.close(fd)


def _supervisor_alive(record: Path) -> bool:
    held = _claim_held(record)
    if held is not None:
        return held
    supervisor = _read_json(record / "supervisor.json")
    return supervisor is not None and _alive(supervisor)


def _state(record: Path, limit: int) -> ProcessStatus:
    exited = _read_json(record / "exit.json")
    if exited is None and not _supervisor_alive(record):
        # It may have written the exit code between our two reads.
        exited = _read_json(record / "exit.json")
        if exited is None:
            return ProcessStatus.unknown()
    stdout, dropped_stdout = _tail(record / "stdout", limit)
    stderr, dropped_stderr = _tail(record / "stderr", limit)
    return ProcessStatus(
        state="running" if exited is None else "exited",
        exit_code=None if exited is None else int(exited["exitCode"]),
        stdout=stdout,
        stderr=stderr,
        dropped_stdout=dropped_stdout,
        dropped_stderr=dropped_stderr,
    )


def _kill_child(record: Path, signum: int) -> None:
    """Signal the child's whole tree: its process group, and every process of its session
    (the child leads a session of its own), so children that job control (``set -m``) moved to
    groups of their own are reached too."""
    child = _read_json(record / "child.json")
    if child is None or not _alive(child):
        return
    pid = int(child["pid"])
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        pass
    for member in _session_members(pid):
        try:
            os.kill(member, signum)
        except (ProcessLookupError, PermissionError):
            pass


def _session_members(session: int) -> list[int]:
    """The live processes whose session id is ``session`` (from ``/proc``; none elsewhere)."""
    members: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return members
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                data = file.read()
        except OSError:
            continue
        fields = data[data.rindex(b")") + 2 :].split()
        if fields[0] not in (b"Z", b"X") and int(fields[3]) == session:
            members.append(int(name))
    return members


def _alive(who: dict[str, Any]) -> bool:
    """Is the process ``{pid, start}`` still the one recorded (and not a zombie)?"""
    pid = int(who["pid"])
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: fall back to a signal-0 probe
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    fields = raw[raw.rindex(b")") + 2 :].split()
    if fields[0] in (b"Z", b"X"):
        return False
    start = who.get("start")
    return start is None or int(fields[19]) == int(start)


def _pidfd(who: dict[str, Any]) -> int | None:
    """A pidfd on the recorded process ``{pid, start}``, or ``None`` when it is gone."""
    try:
        fd = os.pidfd_open(int(who["pid"]))
    except ProcessLookupError:
        return None
    if not _alive(who):  # opened after the pid was reused or the process became a zombie
        os.close(fd)
        return None
    return fd


def _tail(path: Path, limit: int) -> tuple[str, int]:
    try:
        with open(path, "rb") as stream:
            size = stream.seek(0, os.SEEK_END)
            skip = max(0, size - limit)
            stream.seek(skip)
            data = stream.read(size - skip)
    except FileNotFoundError:
        return "", 0
    cut = 0
    if skip:  # never start inside a UTF-8 sequence
        while cut < min(3, len(data)) and data[cut] & 0xC0 == 0x80:
            cut += 1
    return data[cut:].decode("utf-8", errors="replace"), skip + cut


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except ValueError:
        return None
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise


def _write_json(path: Path, value: Any) -> None:
    write_atomic(path, json.dumps(value))
