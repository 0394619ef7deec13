"""The ``bash`` tool: run a command, keep the end of its output, never leave a process behind.

Arguments: ``command``, ``timeout`` (seconds, default :data:`DEFAULT_BASH_TIMEOUT`) and
``background`` (and ``outside_sandbox`` with a ``reason``, below). With ``background: true`` the command is not run here: it becomes a durable job
(:mod:`.jobs`) and the call returns at once with the job's id and where its output goes.

The command runs as ``bash -c COMMAND`` in the working directory, with stdin at end of file,
stdout and stderr merged into one pipe, in a session (and so a process group) of its own. When
the timeout passes, the call's chord context is cancelled or the calling anyio task is
cancelled, every process of the command is killed (``SIGKILL``): the whole session, including
children that job control (``set -m``) moved to groups of their own, and every descendant found
by walking the process tree (:mod:`.procs`).

Durable start: the shell first waits at a gate (it reads one line of stdin) while the caller's
``on_start`` records the command's :class:`~.procs.ProcessRecord` (the tool stores it with
``ToolContext.remember``, a memo committed to the session); only then is the gate opened. A
worker that dies before the record is stored closes the gate's pipe by dying, and the shell
exits without running anything. A worker that dies while the command runs leaves the record
behind: the restarted worker's :func:`recover` kills what is left of the command *before* the
result is written, and the result says the command was interrupted after it started and may
have had partial effects.

Sandbox: with a :class:`pico3.Sandbox` in the context (``ToolContext.sandbox``, the session's
when bubblewrap works) the command runs inside it when the sandbox is enforced
(``sandbox.enabled``) or the call says ``outside_sandbox: false`` (the approval feature's
``sandbox`` mode rewrites every command it lets run without asking so), and never when it says
``outside_sandbox: true`` (the approval feature asks the user about such a call). When a
sandboxed command fails and its output shows a refusal (a read-only file system, a hidden path,
no network), one line is added before the exit code saying what the sandbox refused and how to
ask to run outside (:func:`pico3.explain_refusal`), so the model does not retry the same thing.
When something that runs code outside the sandbox appeared in the project while a sandboxed
command ran (``packages/web/.vscode/tasks.json``, a clone's ``vendor/lib/.git``: the sandbox
keeps such names read-only where they exist, but a command may make a new one in a subfolder),
one line names each, with what runs it (:data:`coding_agent.settings.guarded_paths.CODE_PATHS`'
reasons), so the model and the user reading the call see it (:func:`planted`); an empty folder
runs nothing and is not named.

Output handling follows pi: the text the model sees is tail-truncated to 2000 lines / 50 KB
(errors and results come last); as soon as the output passes 50 KB, all of it, byte for byte,
is also written to a temporary log file, and the footer names it:
``[Showing lines A-B of N. Full output: /tmp/coding-agent-bash-….log]``. Empty output reads
``(no output)``. A non-zero exit, a timeout and an abort are errors whose text ends in
``Command exited with code N``, ``Command timed out after N seconds`` or ``Command aborted``.

Spill files live in the context's ``temp_dir`` (the worker's is the session folder's ``spill/``,
removed with the session). Files there older than :data:`SPILL_RETENTION` are deleted whenever
a new one is made and when the worker starts (:func:`prune_spills`).

A command that leaves a background process holding the output pipe (``server &``) would keep
the pipe open forever (pi#7636). Once the shell itself has exited we read for at most
:data:`DRAIN_GRACE` more seconds, then stop reading and return; the background process lives on
and its later output is not captured.

:func:`run_bash` is the executor without the tool wrapping (the TUI's ``!cmd`` uses the same);
``on_output`` receives decoded output chunks as they arrive.
"""

from __future__ import annotations

import codecs
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

from chord import Context
from coding_agent.settings.guarded_paths import CODE_PATHS
from pico3 import (
    ChildEnvironment,
    Sandbox,
    SandboxPolicy,
    entry_identities,
    explain_refusal,
    planted_entries,
)

from .jobs import start_background
from .procs import ProcessRecord, kill_command, start_time
from .spec import (
    OnUpdate,
    ToolContext,
    ToolError,
    ToolResult,
    ToolSpec,
    abortable,
    resolve_path,
    text_result,
)
from .truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Truncation, format_size, truncate_tail

__all__ = [
    "BASH_TOOL",
    "DEFAULT_BASH_TIMEOUT",
    "DRAIN_GRACE",
    "SPILL_PREFIX",
    "SPILL_RETENTION",
    "BashRun",
    "planted",
    "prune_spills",
    "recover",
    "run_bash",
]

DEFAULT_BASH_TIMEOUT = 120.0
DRAIN_GRACE = 0.25
SPILL_PREFIX = "coding-agent-bash-"
SPILL_RETENTION = 7 * 24 * 3600.0
"""Seconds a spill file is kept (a week): older ones go when a new one is made."""


def prune_spills(folder: str | os.PathLike[str], retention: float = SPILL_RETENTION) -> int:
    """Delete the spill files in ``folder`` last modified more than ``retention`` seconds ago;
    returns how many went. Other files are left alone; a missing folder is fine."""
    cutoff = time.time() - retention
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        if not (entry.name.startswith(SPILL_PREFIX) and entry.name.endswith(".log")):
            continue
        try:
            if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime < cutoff:
                os.unlink(entry.path)
                removed += 1
        except OSError:
            continue
    return removed


def _new_spill(folder: str) -> str:
    prune_spills(folder)
    fd, path = tempfile.mkstemp(prefix=SPILL_PREFIX, suffix=".log", dir=folder)
    os.close(fd)
    return path


BASH_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "Bash command to execute"},
        "timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": f"Timeout in seconds (default: {DEFAULT_BASH_TIMEOUT:g})",
        },
        "background": {
            "type": "boolean",
            "description": (
                "Run as a background job (dev servers, watchers, long builds): returns at once "
                "with a job id; read it with job_output, stop it with job_kill. No timeout."
            ),
        },
        "outside_sandbox": {
            "type": "boolean",
            "description": (
                "Run outside the sandbox (network, files outside the project). Only when the "
                "sandbox refused the command and the task needs it; give a reason. The user is "
                "asked."
            ),
        },
        "reason": {
            "type": "string",
            "description": "Why the command must run outside the sandbox (shown to the user).",
        },
    },
    "required": ["command"],
    "additionalProperties": False,
}


@dataclass
class BashRun:
    """The outcome of :func:`run_bash`.

    ``tail`` holds at least the last 50 KB of output (all of it when shorter); ``spill_path`` is
    the log file with the complete output, created once the output passed ``max_bytes`` (or by
    :meth:`ensure_spill`).
    """

    tail: str = ""
    total_bytes: int = 0
    newlines: int = 0
    ends_with_newline: bool = True
    exit_code: int | None = None
    timed_out: bool = False
    aborted: bool = False
    spill_path: str | None = None
    _pending: bytearray = field(default_factory=bytearray, repr=False)

    @property
    def total_lines(self) -> int:
        if self.total_bytes == 0:
            return 0
        return self.newlines + (0 if self.ends_with_newline else 1)


_GATE = 'read -r _ || exit 125; exec "$0" -c "$1"'
"""The shell waits for one line on stdin (the go-ahead) before it runs the command."""


def _kill_all(process: anyio.abc.Process) -> None:
    """Kill every process of the command (its session and its descendants, see :mod:`.procs`)."""
    kill_command(process.pid)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _shell() -> str:
    return shutil.which("bash") or "/bin/sh"


class _Sink:
    """Decodes, counts, keeps a bounded tail, and spills everything once it grows large."""

    def __init__(
        self, run: BashRun, spill_dir: str, max_bytes: int, on_output: Callable[[str], None] | None
    ) -> None:
        self.run = run
        self.spill_dir = spill_dir
        self.max_bytes = max_bytes
        self.on_output = on_output
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.spill: anyio.AsyncFile[bytes] | None = None

    async def open_spill(self) -> None:
        path = await anyio.to_thread.run_sync(_new_spill, self.spill_dir)
        self.run.spill_path = path
        self.spill = await anyio.open_file(path, "wb")
        await self.spill.write(bytes(self.run._pending))
        self.run._pending.clear()

    async def feed(self, chunk: bytes) -> None:
        run = self.run
        run.total_bytes += len(chunk)
        if self.spill is None:
            run._pending.extend(chunk)
            if run.total_bytes > self.max_bytes:
                await self.open_spill()
        else:
            await self.spill.write(chunk)
        self._text(self.decoder.decode(chunk))

    def _text(self, text: str) -> None:
        if not text:
            return
        run = self.run
        run.newlines += text.count("\n")
        run.ends_with_newline = text.endswith("\n")
        run.tail += text
        if len(run.tail) > 4 * self.max_bytes:  # keep >= 2x max_bytes, from a line start
            keep = run.tail[-2 * self.max_bytes :]
            cut = keep.find("\n")
            run.tail = keep[cut + 1 :] if 0 <= cut < len(keep) - 1 else keep
        if self.on_output is not None:
            self.on_output(text)

    async def close(self) -> None:
        self._text(self.decoder.decode(b"", final=True))
        if self.spill is not None:
            await self.spill.aclose()
            self.spill = None


async def _pump(process: anyio.abc.Process, sink: _Sink, done: anyio.Event) -> None:
    try:
        assert process.stdout is not None
        async for chunk in process.stdout:
            await sink.feed(chunk)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    finally:
        done.set()


async def run_bash(
    command: str,
    *,
    cwd: str | os.PathLike[str],
    time_limit: float | None = DEFAULT_BASH_TIMEOUT,
    spill_dir: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    on_output: Callable[[str], None] | None = None,
    on_start: Callable[[ProcessRecord], Awaitable[None]] | None = None,
    env: Mapping[str, str] | None = None,
    sandbox: Sandbox | None = None,
    ctx: Context,
) -> BashRun:
    """Run ``command`` with ``bash -c`` in ``cwd``; see the module docstring for the contract.

    With a ``sandbox`` the shell runs inside it (:meth:`pico3.Sandbox.wrap`): ``bwrap`` is the
    process started (the session leader the record names), the gate waits inside.

    ``on_start`` receives the command's :class:`~.procs.ProcessRecord` before the command is
    let run (if it raises, nothing runs and the error propagates). ``env`` is the command's
    whole environment (default: this process's without :data:`~pico3.WELL_KNOWN_SECRETS`).
    Returns normally on exit, timeout and context abort (the flags say which). A cancelled
    anyio task kills every process of the command and re-raises the cancellation.
    """
    run = BashRun()
    sink = _Sink(run, spill_dir or tempfile.gettempdir(), max_bytes, on_output)
    shell = _shell()
    argv = [shell, "-c", _GATE, shell, command]
    environ = dict(env) if env is not None else ChildEnvironment.default().environ()
    if sandbox is not None:
        argv, environ = await anyio.to_thread.run_sync(
            lambda: sandbox.wrap(argv, cwd=os.fspath(cwd), env=environ)
        )
    process = await anyio.open_process(
        argv,
        cwd=cwd,
        env=environ,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        assert process.stdin is not None
        if on_start is not None:
            await on_start(ProcessRecord(process.pid, start_time(process.pid)))
        await process.stdin.send(b"\n")  # the go-ahead; then stdin is at end of file
        await process.stdin.aclose()
    except BaseException:
        with anyio.CancelScope(shield=True):
            _kill_all(process)
            await process.wait()
            await process.aclose()
        raise
    try:
        with abortable(ctx, time_limit) as scope:
            drained = anyio.Event()
            async with anyio.create_task_group() as group:
                group.start_soon(_pump, process, sink, drained)
                await process.wait()
                with anyio.move_on_after(DRAIN_GRACE):
                    await drained.wait()
                group.cancel_scope.cancel()
        if scope.cancelled_caught:
            run.aborted = ctx.cancelled
            run.timed_out = not run.aborted
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None or run.aborted or run.timed_out:
                _kill_all(process)
            run.exit_code = await process.wait()
            await process.aclose()
            await sink.close()
    return run


def _sandbox_for(args: dict[str, Any], tools: ToolContext) -> Sandbox | None:
    """The sandbox this call runs in: ``None`` when it says ``outside_sandbox: true`` or no
    sandbox is known; the session's when it is enforced (``sandbox.enabled``) or the call says
    ``outside_sandbox: false`` (the ``sandbox`` permission mode's hook sets that)."""
    sandbox = tools.sandbox
    outside = args.get("outside_sandbox")
    if sandbox is None or outside is True:
        return None
    return sandbox if sandbox.enforced or outside is False else None


def _footer(run: BashRun, cut: Truncation) -> str:
    last = run.total_lines
    first = last - cut.output_lines + 1
    where = f"Full output: {run.spill_path}"
    if cut.last_line_partial:
        return f"[Showing last {format_size(cut.output_bytes)} of line {last}. {where}]"
    if cut.truncated_by == "lines":
        return f"[Showing lines {first}-{last} of {last}. {where}]"
    return f"[Showing lines {first}-{last} of {last} ({format_size(DEFAULT_MAX_BYTES)} limit). {where}]"


async def _bash(args: dict[str, Any], tools: ToolContext, on_update: OnUpdate | None) -> ToolResult:
    sandbox = _sandbox_for(args, tools)
    if args.get("background") is True:
        return await start_background(args, tools, sandbox)
    timeout = float(args.get("timeout") or DEFAULT_BASH_TIMEOUT)
    cwd = resolve_path(".", tools.cwd)
    if not await anyio.Path(cwd).is_dir():
        raise ToolError(f"Working directory does not exist: {cwd}")

    live: list[str] = [""]

    def progress(chunk: str) -> None:
        assert on_update is not None
        live[0] = (live[0] + chunk)[-2 * DEFAULT_MAX_BYTES :]
        on_update(text_result(truncate_tail(live[0]).content.rstrip("\n"), {"partial": True}))

    remember = tools.remember
    before = (
        None if sandbox is None else await anyio.to_thread.run_sync(_entries_now, sandbox.policy)
    )

    async def started(record: ProcessRecord) -> None:
        assert remember is not None
        await remember("process", record.to_json())

    run = await run_bash(
        args["command"],
        cwd=cwd,
        ctx=tools.ctx,
        time_limit=timeout,
        spill_dir=tools.spill_dir,
        on_output=progress if on_update is not None else None,
        on_start=started if remember is not None else None,
        env=tools.child_env(),
        sandbox=sandbox,
    )
    cut = truncate_tail(run.tail)
    truncated = cut.truncated or run.total_bytes > DEFAULT_MAX_BYTES
    if truncated and run.spill_path is None:
        await _spill_pending(run, tools.spill_dir)
    text = cut.content.rstrip("\n") or "(no output)"
    details: dict[str, Any] = {
        "exit_code": run.exit_code,
        "timed_out": run.timed_out,
        "aborted": run.aborted,
        "total_bytes": run.total_bytes,
        "total_lines": run.total_lines,
        "sandboxed": sandbox is not None,
    }
    if truncated:
        text += "\n\n" + _footer(run, cut)
        details["truncation"] = cut.as_details()
        details["full_output_path"] = run.spill_path
    if sandbox is not None and before is not None:
        made = await anyio.to_thread.run_sync(planted, sandbox.policy, before)
        if made is not None:
            text += "\n" + made
    if run.aborted:
        raise ToolError(f"{text}\n\nCommand aborted", details)
    if run.timed_out:
        raise ToolError(f"{text}\n\nCommand timed out after {timeout:g} seconds", details)
    if run.exit_code != 0:
        refused = explain_refusal(run.tail, sandbox.policy.hidden_names()) if sandbox else None
        if refused is not None:
            text += "\n" + refused
        raise ToolError(f"{text}\n\nCommand exited with code {run.exit_code}", details)
    return text_result(text, details)


def _entries_now(policy: SandboxPolicy) -> dict[str, tuple[int, int]]:
    return entry_identities(policy.kept_read_only())


def planted(policy: SandboxPolicy, before: Mapping[str, tuple[int, int]]) -> str | None:
    """The line saying what appeared in ``policy``'s project that runs code outside the
    sandbox, since ``before`` (:func:`pico3.entry_identities` of
    :meth:`pico3.SandboxPolicy.kept_read_only`); ``None`` when nothing did (a new empty folder
    runs nothing, a moved one is not new)."""
    made = planted_entries(before, policy.kept_read_only())
    if not made:
        return None
    named: list[str] = []
    for path in made:
        name = os.path.basename(path)
        reason = next((g.reason for g in CODE_PATHS if g.pattern.rstrip("/") == name), "")
        shown = os.path.relpath(path, policy.project)
        shown = path if shown.startswith("..") else shown
        why = f" ({reason})" if reason else ""
        named.append(f"{shown}{'/' if os.path.isdir(path) else ''}{why}")
    return (
        "[Sandbox: new while the command ran, and run code outside the sandbox: "
        + "; ".join(named)
        + ". Later sandboxed commands cannot change them; check them before you use them.]"
    )


async def _spill_pending(run: BashRun, spill_dir: str) -> None:
    path = await anyio.to_thread.run_sync(_new_spill, spill_dir)
    await anyio.Path(path).write_bytes(bytes(run._pending))
    run._pending.clear()
    run.spill_path = path


async def recover(args: dict[str, Any], tools: ToolContext) -> ToolResult:
    """A ``bash`` call interrupted by a worker crash: kill what is left of the command (if its
    record says it was let run), then say what happened. The command is never run again."""
    if args.get("background") is True:
        return text_result(
            "Starting the background job was interrupted by a restart: the job may or may not "
            "have been created. Check with job_output before starting it again.",
            {"interrupted": True},
            is_error=True,
        )
    value = await tools.recall("process") if tools.recall is not None else None
    record = ProcessRecord.from_json(value)
    if record is None:  # never let past the gate: the shell exited without running it
        return text_result(
            "Command interrupted by a worker restart before it started: nothing of it ran. "
            "Run it again if it is still needed.",
            {"interrupted": True, "started": False},
            is_error=True,
        )
    killed = await anyio.to_thread.run_sync(record.kill)
    if killed == 1:
        stopped = "It was still running; its remaining process was killed."
    elif killed:
        stopped = f"It was still running; its {killed} remaining processes were killed."
    else:
        stopped = "It was no longer running."
    return text_result(
        "Command interrupted by a worker restart after it had started: it may have had partial "
        f"effects. {stopped} It was not repeated; check what it did before running it again.",
        {"interrupted": True, "started": True, "killed": killed},
        is_error=True,
    )


BASH_TOOL = ToolSpec(
    name="bash",
    description=(
        "Execute a bash command in the current working directory. Returns stdout and stderr "
        f"combined. Output is truncated to the last {DEFAULT_MAX_LINES} lines or "
        f"{DEFAULT_MAX_BYTES // 1024}KB (whichever is hit first); the full output is then saved "
        f"to a temp file named in the result. Default timeout {DEFAULT_BASH_TIMEOUT:g} seconds; "
        "for long-running servers and watchers set background: true (then job_output and "
        "job_kill read and stop it)."
    ),
    parameters=BASH_PARAMETERS,
    handler=_bash,
    recover=recover,
)
