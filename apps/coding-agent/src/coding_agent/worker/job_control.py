"""Background jobs of the coding agent as pico3 ``pi.job`` tasks (the tools' :class:`JobControl`).

The job tools (:mod:`coding_agent.worker.tools.jobs`) only speak :class:`JobControl`.
:class:`HarnessJobs` answers it for one tool call, with the call's
:class:`~pico3.tools.ToolApi` and the open harness:

* **start** creates a ``pi.job`` task running ``bash -c COMMAND`` in the call's working
  directory, as a *background* task of the call's conversation (a conversation abort leaves it
  running; it shows in ``view.tasks`` while it lives). The task is created by
  :meth:`ToolApi.task <pico3.tools.ToolApi.task>`, one commit of the tool task itself, so the
  job exists exactly when that commit does: a worker killed before it started no job, one killed
  after it never starts a second (``bash`` is a ``replay: "unsafe"`` tool, so an interrupted call
  is reported, not run again). From there on ``pi.job`` owns exactly-once: it persists its
  process key before it asks the process host to start it, and after a restart it re-finds the
  process by that key (``rerun`` starts the key again only when the host has no record of it).
  A job notifies (``notify``): its end is written to the conversation as a ``pi.notice`` the
  model sees at its next step.
* **get** / **list** read the task records (reach is checked by ``ToolApi.get_task``: the
  call's conversation and the ones it owns) and the process host's *fresh* status of the job's
  key, so a running job's output is current, not the last mirror in its slot. The complete logs
  are the host's record files (``<state dir>/<key>/stdout`` and ``stderr``) when the host is a
  :class:`~pico3.process_host.LocalProcessHost`.
* **kill** marks the task for abort (``Harness.abort_task``, durable: a restart finishes the
  abort) and waits until it ended; ``pi.job``'s abort sends ``SIGTERM``, waits up to
  :data:`pico3.jobs.KILL_GRACE_MS`, then ``SIGKILL``.

The process key of a one-shot job is ``"<task id>:1"`` (``pi.job``'s key scheme); it is used to
name the log files before the job has checkpointed it, and to read the output of a job that
ended (a terminal task no longer holds its checkpoint).
"""

from __future__ import annotations

import shutil
from typing import Any
from urllib.parse import quote

import anyio

from chord import Context
from coding_agent.worker.tools import JobInfo, ToolError
from pico3 import (
    JOB_KIND,
    Forbidden,
    Harness,
    LocalProcessHost,
    ProcessHost,
    ProcessStatus,
    Sandbox,
    Task,
    ToolApi,
    job_input,
)

__all__ = ["HarnessJobs", "job_key"]


def job_key(job_id: int) -> str:
    """The process-host key of one-shot job ``job_id``."""
    return f"{job_id}:1"


def _shell() -> str:
    """``bash`` (found on ``PATH`` when the job starts), else ``sh``; a short name reads well
    in the job's notice (``Job `bash -c …` exited with code 0.``)."""
    return "bash" if shutil.which("bash") else "sh"


def _command(task: Task) -> str:
    """The user's command of a job created by :meth:`HarnessJobs.start` (else its argv)."""
    value: Any = task.input if isinstance(task.input, dict) else {}
    args = value.get("args") or []
    if len(args) >= 2 and args[-2] == "-c" and isinstance(args[-1], str):
        return args[-1]  # bash -c COMMAND, sandboxed or not
    return " ".join([str(value.get("command", "?")), *map(str, args)])


class HarnessJobs:
    """:class:`~coding_agent.worker.tools.JobControl` over one tool call (see the module docs)."""

    def __init__(self, api: ToolApi, harness: Harness) -> None:
        self._api = api
        self._harness = harness

    # -- the process host --------------------------------------------------------------------
    def _host(self) -> ProcessHost | None:
        host = self._harness.scheduler.services.get("process_host")
        return host if isinstance(host, ProcessHost) else None

    def _paths(self, key: str) -> tuple[str | None, str | None]:
        host = self._host()
        host = getattr(host, "local", host)  # a SharedProcessHost's own (PostgreSQL storage)
        if not isinstance(host, LocalProcessHost):
            return None, None
        record = host.state_dir / quote(key, safe="")
        return str(record / "stdout"), str(record / "stderr")

    async def _status(self, key: str, ctx: Context) -> ProcessStatus:
        host = self._host()
        if host is None:
            return ProcessStatus.unknown()
        try:
            return await host.status(key, ctx)
        except (OSError, RuntimeError):  # a closed or broken host: the task's view still answers
            return ProcessStatus.unknown()

    # -- JobControl --------------------------------------------------------------------------
    async def start(
        self, command: str, cwd: str, ctx: Context, sandbox: Sandbox | None = None
    ) -> JobInfo:
        if self._host() is None:
            raise ToolError("Background jobs are not available: the worker has no process host.")
        if sandbox is None:
            value = job_input(_shell(), ["-c", command], cwd=cwd, notify=True, rerun=True)
        else:  # the job's argv is bwrap's: the process host needs no sandbox of its own
            # in a thread: a wrap may read the repository's submodules with git first
            argv, environ = await anyio.to_thread.run_sync(
                lambda: sandbox.wrap([_shell(), "-c", command], cwd=cwd, env={})
            )
            label = f"{_shell()} -c {command}"  # notices show the command, not bwrap's argv
            value = job_input(
                argv[0], argv[1:], cwd=cwd, env=environ, notify=True, rerun=True, label=label
            )
        job_id: int = await self._api.task(JOB_KIND, value, {"background": True}, ctx)
        stdout, stderr = self._paths(job_key(job_id))
        return JobInfo(job_id, command, "starting", stdout_path=stdout, stderr_path=stderr)

    async def get(self, job_id: int, ctx: Context) -> JobInfo:
        try:
            task = await self._api.get_task(job_id, ctx)
        except Forbidden:
            task = None
        if not isinstance(task, Task) or task.kind != JOB_KIND.name:
            raise ToolError(f"No background job {job_id} in this conversation.")
        return await self._info(task, ctx)

    async def list(self, ctx: Context) -> list[JobInfo]:
        conversation = self._api.conversation_id
        tasks: list[Task] = await self._harness.kernel.commit(
            lambda tx, _ctx: tx.tasks(conversation, kind=JOB_KIND.name), ctx
        )
        return [await self._info(task, ctx) for task in tasks]

    async def kill(self, job_id: int, ctx: Context) -> JobInfo:
        job = await self.get(job_id, ctx)
        if job.ended:
            return job
        await self._harness.abort_task(job_id, ctx)
        await self._api.wait_for_task(job_id, ctx)
        return await self.get(job_id, ctx)

    # -- reading a job ---------------------------------------------------------------------
    async def _info(self, task: Task, ctx: Context) -> JobInfo:
        checkpoint: dict[str, Any] = task.checkpoint if isinstance(task.checkpoint, dict) else {}
        key = str(checkpoint.get("key") or job_key(task.id))
        stdout_path, stderr_path = self._paths(key)
        base: dict[str, Any] = {
            "id": task.id,
            "command": _command(task),
            "stdout_path": stdout_path,
            "stderr_path": stderr_path,
        }
        status = await self._status(key, ctx)
        seen = status.state in ("running", "exited")  # lost: ran on another machine
        if seen:
            base.update(
                stdout=status.stdout,
                stderr=status.stderr,
                dropped_stdout=status.dropped_stdout,
                dropped_stderr=status.dropped_stderr,
            )
        if task.status == "terminal":
            return self._ended(task, base)
        if not seen:  # not started yet, the host forgot, or lost: the slot's mirror
            slot = await self._api.slot(task.id, ctx)
            if isinstance(slot, dict):
                base.update(
                    stdout=str(slot.get("stdout", "")),
                    stderr=str(slot.get("stderr", "")),
                    dropped_stdout=int(slot.get("droppedStdout", 0)),
                    dropped_stderr=int(slot.get("droppedStderr", 0)),
                )
        phase = checkpoint.get("phase")
        state = "running" if phase == "running" or seen else "starting"
        return JobInfo(**base, state=state, stopping=task.abort is True)

    def _ended(self, task: Task, base: dict[str, Any]) -> JobInfo:
        outcome: dict[str, Any] = task.outcome if isinstance(task.outcome, dict) else {}
        if outcome.get("status") == "completed":
            result = outcome.get("result") or {}
            if "stdout" not in base:
                base.update(stdout=str(result.get("stdout", "")))
                base.update(stderr=str(result.get("stderr", "")))
            return JobInfo(**base, state="exited", exit_code=result.get("exitCode"))
        if outcome.get("status") == "failed":
            failure = outcome.get("failure") or {}
            detail = f"{failure.get('reason', '?')}: {failure.get('detail', '')}".rstrip(": ")
            return JobInfo(**base, state="failed", detail=detail)
        return JobInfo(**base, state="killed")
