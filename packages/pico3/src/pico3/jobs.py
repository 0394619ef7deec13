"""``pi.job``: a durable task that runs an operating-system process (docs/design/turn.md#jobs).

A job is an ordinary task (built-in, ordinary authority) whose effect is a process. It never
spawns anything itself: it asks the :class:`~pico3.process_host.ProcessHost` found in
``rt.services["process_host"]``, and it speaks to it only through a *key* it persisted first::

    initial ──► spawning{key} ──start(key)──► running{key} ──status(key) … exited──► done
       │            (in-flight)                  (in-flight)
       └─ notBefore in the future ─► waiting{untilMs} ─sleep─► spawning …

* ``spawning{key}`` is committed **before** ``start(key)``: if the harness dies in between,
  recovery asks ``status(key)`` instead of starting blindly.
* ``running{key}`` is where the job polls ``status(key)`` (every ``min(1000, 100·2^k)`` ms, or
  at once when the host can report the exit, see :meth:`LocalProcessHost.wait
  <pico3.process_host.LocalProcessHost.wait>`), mirroring the captured output into its slot
  so ``tasks[id].status`` shows it.
* Both are *in-flight* phases, entered by the scheduler only after a reopen. A reopened
  session therefore re-finds a running process by its key and completes with its exit code,
  provided the host outlived the old harness (a host that forgot the key answers ``unknown``,
  and then the job starts the key again when ``rerun`` is set, else fails ``interrupted``; a
  host that knows the key started where it can no longer reach answers ``lost``, and the job
  fails ``interrupted`` without starting it again, ``rerun`` or not).
* A recurring job (``every``) writes each occurrence's notice, resets its slot and sleeps in
  ``waiting`` until ``exit time + every``; after downtime it runs once, never a backlog.
* Abort: before a key exists it ends ``{killed: false}`` without touching the host; otherwise
  it sends SIGTERM, waits up to 5 s (less when the host reports the exit), sends SIGKILL and
  ends ``{killed: true}``. A host that fails to kill makes the abort fail.

Input (see :func:`job_input`): ``{command, args, cwd, env?, notify, rerun, every?,
notBefore?}``. Result ``{exitCode, occurrences, stdout, stderr}``; failure ``{reason: "spawn" |
"interrupted", detail}``; aborted result ``{killed}``. Notices (``notify``) are ``pi.notice``
passive writes: appended at once when the conversation is idle, else placed at its next
boundary.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio

from chord.context import Context
from pico3.kernel.tx import Transaction
from pico3.process_host import KillSignal, ProcessHost, ProcessSpec, ProcessStatus
from pico3.storage.records import Task
from pico3.tasks import Completion, Done, Next, Runtime, Step, TaskInfo, TaskKind, define_task

__all__ = ["JOB_KIND", "KILL_GRACE_MS", "install", "job_input"]

KILL_GRACE_MS = 5_000
"""How long an abort waits between SIGTERM and SIGKILL."""

_NOTICE = "pi.notice"


def job_input(
    command: str,
    args: Sequence[str] = (),
    *,
    cwd: str,
    env: Mapping[str, str] | None = None,
    notify: bool = False,
    rerun: bool = False,
    every: int | None = None,
    not_before: int | None = None,
    label: str | None = None,
) -> dict[str, Any]:
    """A checked ``pi.job`` input (raises ``ValueError`` naming the bad field).

    ``every`` (ms) makes the job recurring; ``not_before`` (epoch ms, harness clock) delays the
    first occurrence; ``rerun`` starts the key again when the host has forgotten it; ``label``
    is the command line notices show instead of the argv (a sandboxed job's argv is
    ``bwrap …``; its label is the command the user knows).
    """
    value: dict[str, Any] = {
        "command": command,
        "args": list(args),
        "cwd": cwd,
        "notify": notify,
        "rerun": rerun,
    }
    if env is not None:
        value["env"] = dict(env)
    if every is not None:
        value["every"] = every
    if not_before is not None:
        value["notBefore"] = not_before
    if label is not None:
        value["label"] = label
    _check_input(value)
    return value


def _check_input(value: Any) -> None:
    if not isinstance(value, dict):
        raise ValueError("pi.job input must be an object")
    for name in ("command", "cwd"):
        if not isinstance(value.get(name), str) or not value[name]:
            raise ValueError(f"pi.job input.{name}: must be a non-empty string")
    args = value.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ValueError("pi.job input.args: must be a list of strings")
    if "label" in value and (not isinstance(value["label"], str) or not value["label"]):
        raise ValueError("pi.job input.label: must be a non-empty string")
    env = value.get("env")
    if env is not None and (
        not isinstance(env, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        raise ValueError("pi.job input.env: must map strings to strings")
    for name in ("notify", "rerun"):
        if not isinstance(value.get(name, False), bool):
            raise ValueError(f"pi.job input.{name}: must be a boolean")
    every = value.get("every")
    if every is not None and (type(every) is not int or every <= 0):
        raise ValueError("pi.job input.every: must be a positive integer (ms)")
    not_before = value.get("notBefore")
    if not_before is not None and type(not_before) is not int:
        raise ValueError("pi.job input.notBefore: must be an integer (epoch ms)")


def _spec(job: dict[str, Any]) -> ProcessSpec:
    return ProcessSpec(
        job["command"], tuple(job.get("args", [])), job["cwd"], job.get("env") or None
    )


def _host(rt: Runtime) -> ProcessHost | None:
    host = rt.services.get("process_host")
    return host if isinstance(host, ProcessHost) else None


def _no_host(rt: Runtime) -> str:
    found = rt.services.get("process_host")
    if found is None:
        return "no process host"
    return f"services['process_host'] is not a ProcessHost: {type(found).__name__}"


def _fresh_slot(occurrence: int) -> dict[str, Any]:
    return {
        "stdout": "",
        "stderr": "",
        "droppedStdout": 0,
        "droppedStderr": 0,
        "occurrence": occurrence,
    }


def _describe(task: TaskInfo) -> Any:
    slot = {k: v for k, v in (task.slot or {}).items() if k != "memos"}
    return {"stage": task.phase or "starting", **slot}


def _command_line(job: dict[str, Any]) -> str:
    label = job.get("label")
    return label if isinstance(label, str) else " ".join([job["command"], *job.get("args", [])])


def _notice(tx: Transaction, current: Task, text: str, data: dict[str, Any], now: int) -> None:
    tx.write(
        current.conversation_id,
        _NOTICE,
        model=[{"role": "user", "content": text, "timestamp": now}],
        data={"job": current.id, **data},
    )


def _fail(rt: Runtime, job: Any, reason: str, detail: str) -> Done:
    notify = isinstance(job, dict) and job.get("notify") is True
    now = rt.now()

    def closure(tx: Transaction, current: Task, _ctx: Context) -> Completion:
        if notify:
            text = f"Job {current.id} failed ({reason}): {detail}"
            _notice(tx, current, text, {"failure": reason}, now)
        return Completion.failed({"reason": reason, "detail": detail})

    return Done(closure)


def _mirroring(status: ProcessStatus) -> Callable[[Transaction, Task, Context], None]:
    return lambda tx, current, _ctx: _mirror(tx.slot(current), status)


def _mirror(slot: Any, status: ProcessStatus) -> None:
    fields = {
        "stdout": status.stdout,
        "stderr": status.stderr,
        "droppedStdout": status.dropped_stdout,
        "droppedStderr": status.dropped_stderr,
    }
    if status.exit_code is not None:
        fields["exitCode"] = status.exit_code
    for name, value in fields.items():
        if slot.get(name) != value:
            slot[name] = value


def _reraise_if_cancelled(exc: Exception, ctx: Context) -> None:
    """A host call that failed because *our* context was cancelled (abort, suspend) is an
    unwind, never a job failure."""
    if ctx.cancelled:
        raise exc


# -- the phases ---------------------------------------------------------------------------
async def _initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
    try:
        _check_input(task.input)
    except ValueError as exc:
        return _fail(rt, task.input, "spawn", str(exc))
    if _host(rt) is None:
        return _fail(rt, task.input, "spawn", _no_host(rt))
    not_before = task.input.get("notBefore")
    if not_before is not None and not_before > rt.now():
        return Next({"phase": "waiting", "untilMs": not_before, "occurrence": 1})
    return await _spawn(task, rt, 1, ctx)


async def _waiting(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
    assert task.checkpoint is not None
    await rt.sleep(task.checkpoint["untilMs"], ctx)
    return await _spawn(task, rt, task.checkpoint["occurrence"], ctx)


async def _spawn(task: TaskInfo, rt: Runtime, occurrence: int, ctx: Context) -> Step:
    host = _host(rt)
    if host is None:
        return _fail(rt, task.input, "spawn", _no_host(rt))
    key = f"{task.id}:{occurrence}"
    checkpoint = {"phase": "spawning", "key": key, "occurrence": occurrence}
    await rt.commit(lambda tx, _cur, _c: tx.checkpoint(checkpoint), ctx)  # before the effect
    try:
        await host.start(key, _spec(task.input), ctx)
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:  # the host's contract: it raises only when certainly not started
        _reraise_if_cancelled(exc, ctx)
        return _fail(rt, task.input, "spawn", str(exc) or type(exc).__name__)
    return await _running_from(task, rt, host, key, occurrence, ctx)


async def _spawning(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
    """Recovery: the harness stopped between ``spawning`` and ``running``; ask the host."""
    assert task.checkpoint is not None
    host = _host(rt)
    if host is None:
        return _fail(rt, task.input, "interrupted", _no_host(rt))
    key, occurrence = task.checkpoint["key"], task.checkpoint["occurrence"]
    return await _running_from(task, rt, host, key, occurrence, ctx)


async def _running(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
    """Recovery: the process was started before the harness stopped; re-find it by key."""
    assert task.checkpoint is not None
    host = _host(rt)
    if host is None:
        return _fail(rt, task.input, "interrupted", _no_host(rt))
    return await _poll(task, rt, host, task.checkpoint["key"], task.checkpoint["occurrence"], ctx)


async def _running_from(
    task: TaskInfo, rt: Runtime, host: ProcessHost, key: str, occurrence: int, ctx: Context
) -> Step:
    checkpoint = {"phase": "running", "key": key, "occurrence": occurrence}
    await rt.commit(lambda tx, _cur, _c: tx.checkpoint(checkpoint), ctx)
    return await _poll(task, rt, host, key, occurrence, ctx)


async def _poll(
    task: TaskInfo, rt: Runtime, host: ProcessHost, key: str, occurrence: int, ctx: Context
) -> Step:
    job: dict[str, Any] = task.input
    attempt = 0
    restarted = False
    while True:
        try:
            status = await host.status(key, ctx)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            _reraise_if_cancelled(exc, ctx)
            return _fail(rt, job, "interrupted", f"status failed: {exc}")
        if status.state == "lost":  # started out of reach (another machine): never again
            detail = status.detail or f"the process host lost {key!r}"
            return _fail(rt, job, "interrupted", f"{detail}; it is not started again")
        if status.state == "unknown":
            if not job.get("rerun"):
                return _fail(rt, job, "interrupted", f"the process host does not know {key!r}")
            if restarted:  # started again just now, and still unknown: the start did not take
                return _fail(rt, job, "interrupted", f"the process host lost {key!r} again")
            restarted = True
            try:
                await host.start(key, _spec(job), ctx)  # the same key: idempotent on the host
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as exc:
                _reraise_if_cancelled(exc, ctx)
                return _fail(rt, job, "spawn", str(exc) or type(exc).__name__)
            continue
        await rt.commit(_mirroring(status), ctx)
        if status.state == "exited":
            return _finish(rt, job, status, occurrence)
        delay = min(1000, 100 * 2 ** min(attempt, 4))
        attempt += 1
        await _sleep_or_exit(rt, host, key, rt.now() + delay, ctx)


async def _sleep_or_exit(
    rt: Runtime, host: ProcessHost, key: str, until_ms: int, ctx: Context
) -> None:
    """Sleep until ``until_ms``, or less when the host can report the exit itself."""
    wait: Callable[[str, Context], Any] | None = getattr(host, "wait", None)
    if wait is None:
        await rt.sleep(until_ms, ctx)
        return
    failure: Exception | None = None
    async with anyio.create_task_group() as group:

        async def watcher() -> None:
            try:
                await wait(key, ctx)
            except Exception:
                return  # the scheduled poll still comes; a watch is only a shortcut
            group.cancel_scope.cancel()

        group.start_soon(watcher)
        try:
            await rt.sleep(until_ms, ctx)
        except Exception as exc:  # raised after the group, unwrapped (not an ExceptionGroup)
            failure = exc
        finally:
            group.cancel_scope.cancel()
    if failure is not None:
        raise failure


def _finish(rt: Runtime, job: dict[str, Any], status: ProcessStatus, occurrence: int) -> Step:
    code = status.exit_code
    notify = job.get("notify") is True
    now = rt.now()
    text = f"Job `{_command_line(job)}` exited with code {code}."
    every = job.get("every")
    if every is None:

        def closure(tx: Transaction, current: Task, _ctx: Context) -> Completion:
            if notify:
                _notice(tx, current, text, {"occurrence": occurrence, "exitCode": code}, now)
            return Completion.completed(
                {
                    "exitCode": code,
                    "occurrences": occurrence,
                    "stdout": status.stdout,
                    "stderr": status.stderr,
                }
            )

        return Done(closure)

    def advance(tx: Transaction, current: Task, _ctx: Context) -> dict[str, Any]:
        if notify:
            _notice(tx, current, text, {"occurrence": occurrence, "exitCode": code}, now)
        slot = tx.slot(current)
        for name, value in _fresh_slot(occurrence + 1).items():
            slot[name] = value
        slot.pop("exitCode", None)
        return {"phase": "waiting", "untilMs": now + every, "occurrence": occurrence + 1}

    return Next(advance)


async def _abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Callable[..., Any]:
    checkpoint = task.checkpoint
    if checkpoint is None or checkpoint.get("phase") == "waiting":
        return lambda _tx, _cur, _c: {"killed": False}
    host = _host(rt)
    if host is None:
        raise RuntimeError(f"pi.job {task.id}: {_no_host(rt)}; cannot kill {checkpoint['key']!r}")
    key: str = checkpoint["key"]
    await _kill(host, key, "SIGTERM", ctx)
    await _sleep_or_exit(rt, host, key, rt.now() + KILL_GRACE_MS, ctx)
    await _kill(host, key, "SIGKILL", ctx)
    return lambda _tx, _cur, _c: {"killed": True}


async def _kill(host: ProcessHost, key: str, signal: KillSignal, ctx: Context) -> None:
    await host.kill(key, signal, ctx)


JOB_KIND: TaskKind = define_task(
    "pi.job",
    initial=_initial,
    phases={"waiting": _waiting, "spawning": _spawning, "running": _running},
    inflight=("spawning", "running"),
    abort=_abort,
    slot=lambda _input: _fresh_slot(1),
    describe=_describe,
    builtin=True,
)
"""The built-in job kind (ordinary task authority). Register it before ``resume()`` so jobs
found in storage recover: ``pico3.jobs.install``."""


def install(harness: Any) -> Callable[[], None]:
    """Register :data:`JOB_KIND` on ``harness``; returns the unregister function. Usable as a
    :class:`~pico3.handle.HarnessHandle` registration.

    A :class:`~pico3.harness.Harness` registers ``pi.job`` itself, so on one this is a no-op
    (its remover too); it remains for hosts written before that and for bare schedulers."""
    scheduler = getattr(harness, "scheduler", None)
    kinds = getattr(scheduler, "kinds", None)
    if kinds is not None and kinds.get(JOB_KIND.name) is JOB_KIND:
        return lambda: None
    return harness.register_task_kind(JOB_KIND)
