"""Background commands as durable jobs: ``bash`` with ``background: true``, ``job_output``, ``job_kill``.

A dev server or a long build must not block the turn, and must not die with the process that
started it. So a background command is not run by the tool at all: the tool asks a
:class:`JobControl` to start a *job*, gets its id back at once, and returns. What a job is
belongs to the caller. In the coding agent it is a pico3 ``pi.job`` task (see
:mod:`coding_agent.worker.job_control`): created in the tool call's own durable commit, run by a
process host that outlives the worker, visible in the view's ``tasks`` while it runs, and
re-found after a worker restart. The tools here only speak the protocol, so they stay
independent of the harness like every other built-in tool.

The three calls:

``bash {command, background: true}``
    Starts ``bash -c COMMAND`` in the working directory and answers with the job id and the
    files its stdout and stderr go to. ``timeout`` does not apply to a background command.
``job_output {id?}``
    With ``id``: the job's state (running, exited with code N, failed, killed) and the tail of
    its stdout and stderr, cut with pi's tail rule (:func:`~.truncate.truncate_tail`: the last
    2000 lines / 50 KB, shared between the two streams) and a footer naming the full log.
    Without ``id``: one line per job of the conversation, newest first.
``job_kill {id}``
    Stops a running job (``SIGTERM``, then ``SIGKILL`` after a grace period) and waits for it
    to end; a job that already ended is reported as such.

A :class:`JobControl` reports a job as a :class:`JobInfo`; its failures are :class:`ToolError`
(an unknown id, a job of another conversation), which reach the model as error results.
"""

from __future__ import annotations

from typing import Any

import anyio

from pico3 import Sandbox

from .host import JobControl, JobInfo
from .spec import ToolContext, ToolError, ToolResult, ToolSpec, resolve_path, text_result
from .truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_tail

__all__ = [
    "JOB_KILL_TOOL",
    "JOB_OUTPUT_TOOL",
    "describe_state",
    "start_background",
]


_STDERR_SHARE = 5
"""stderr gets at most 1/5 of the output budget when stdout has output too."""

_LIST_LIMIT = 50
"""Jobs listed by ``job_output`` without an id (the newest)."""


def describe_state(job: JobInfo) -> str:
    """``running``, ``exited with code 0``, ``failed: …``, ``killed``… in words."""
    if job.state == "exited":
        return f"exited with code {job.exit_code}"
    if job.state == "failed":
        return f"failed: {job.detail}" if job.detail else "failed"
    if job.state == "running" and job.stopping:
        return "running (stopping)"
    return job.state


def _jobs(tools: ToolContext) -> JobControl:
    if tools.jobs is None:
        raise ToolError("Background jobs are not available here (this host runs no job host).")
    return tools.jobs


def _where(job: JobInfo) -> str:
    if job.stdout_path is None:
        return "Output: read it with job_output."
    if job.stderr_path is None:
        return f"Output: {job.stdout_path}"
    return f"Output: {job.stdout_path} (stdout), {job.stderr_path} (stderr)"


async def start_background(
    args: dict[str, Any], tools: ToolContext, sandbox: Sandbox | None = None
) -> ToolResult:
    """``bash`` with ``background: true``: start the command as a job and return at once
    (inside ``sandbox`` when one is given)."""
    jobs = _jobs(tools)
    cwd = resolve_path(".", tools.cwd)
    if not await anyio.Path(cwd).is_dir():
        raise ToolError(f"Working directory does not exist: {cwd}")
    command: str = args["command"]
    job = await jobs.start(command, str(cwd), tools.ctx, sandbox)
    text = (
        f"Started background job {job.id}: {command}\n{_where(job)}\n"
        f"Read its status and output with job_output (id {job.id}); stop it with job_kill."
    )
    return text_result(text, {"background": True, **job.as_details()})


def _cut(name: str, text: str, dropped: int, path: str | None, max_bytes: int) -> tuple[str, Any]:
    """The tail of one stream, and its truncation record (``None`` when whole)."""
    lines = max(1, DEFAULT_MAX_LINES * max_bytes // DEFAULT_MAX_BYTES)
    cut = truncate_tail(text, max_lines=lines, max_bytes=max_bytes)
    body = cut.content.rstrip("\n")
    if not cut.truncated and not dropped:
        return body, None
    kept = format_size(cut.output_bytes)
    where = f"Full {name}: {path}" if path is not None else f"Earlier {name} is not kept"
    footer = f"[Showing the last {cut.output_lines} lines ({kept}) of {name}. {where}]"
    if cut.last_line_partial:
        footer = f"[Showing the last {kept} of {name}'s last line. {where}]"
    details = {**cut.as_details(), "dropped_before": dropped}
    return f"{body}\n\n{footer}", details


def _render(job: JobInfo) -> tuple[str, dict[str, Any]]:
    details = job.as_details()
    head = f"Job {job.id} ({describe_state(job)}): {job.command}"
    stderr_budget = DEFAULT_MAX_BYTES // _STDERR_SHARE if job.stdout else DEFAULT_MAX_BYTES
    stdout_budget = DEFAULT_MAX_BYTES - (stderr_budget if job.stderr else 0)
    parts = [head]
    if job.stdout or job.dropped_stdout:
        body, cut = _cut("stdout", job.stdout, job.dropped_stdout, job.stdout_path, stdout_budget)
        parts.append(body)
        if cut is not None:
            details["stdout_truncation"] = cut
    if job.stderr or job.dropped_stderr:
        body, cut = _cut("stderr", job.stderr, job.dropped_stderr, job.stderr_path, stderr_budget)
        parts.append(f"[stderr]\n{body}")
        if cut is not None:
            details["stderr_truncation"] = cut
    if len(parts) == 1:
        parts.append("(no output)" if job.state != "starting" else "(not started yet)")
    return "\n".join(parts), details


def _last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line if len(line) <= 120 else line[:117] + "..."
    return ""


async def _job_output(args: dict[str, Any], tools: ToolContext, _on_update: Any) -> ToolResult:
    jobs = _jobs(tools)
    if "id" in args:
        job = await jobs.get(int(args["id"]), tools.ctx)
        text, details = _render(job)
        return text_result(text, details)
    found = (await jobs.list(tools.ctx))[::-1]
    if not found:
        return text_result("No background jobs in this conversation.", {"jobs": []})
    lines: list[str] = []
    for job in found[:_LIST_LIMIT]:
        last = _last_line(job.stdout) or _last_line(job.stderr)
        lines.append(
            f"Job {job.id} ({describe_state(job)}): {job.command}"
            + (f"\n    {last}" if last else "")
        )
    if len(found) > _LIST_LIMIT:
        lines.append(f"[{len(found) - _LIST_LIMIT} older jobs not shown]")
    details = {"jobs": [job.as_details() for job in found[:_LIST_LIMIT]]}
    return text_result("\n".join(lines), details)


async def _job_kill(args: dict[str, Any], tools: ToolContext, _on_update: Any) -> ToolResult:
    jobs = _jobs(tools)
    job_id = int(args["id"])
    before = await jobs.get(job_id, tools.ctx)
    if before.ended:
        text = f"Job {job_id} had already ended ({describe_state(before)}); nothing to stop."
        return text_result(text, {"already_ended": True, **before.as_details()})
    job = await jobs.kill(job_id, tools.ctx)
    text, details = _render(job)
    return text_result(f"Stopped job {job_id}.\n{text}", details)


JOB_OUTPUT_TOOL = ToolSpec(
    name="job_output",
    description=(
        "Read a background job started with bash (background: true): its state (running, "
        "exited with code N, failed, killed) and the tail of its stdout and stderr (last "
        f"{DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB; the full logs are named). "
        "Without id, lists this conversation's jobs, newest first."
    ),
    parameters={
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": 1, "description": "The job id bash returned"}
        },
        "additionalProperties": False,
    },
    handler=_job_output,
)

JOB_KILL_TOOL = ToolSpec(
    name="job_kill",
    description=(
        "Stop a background job started with bash (background: true): SIGTERM to its process "
        "group, SIGKILL if it is still running a few seconds later. Waits until it ended and "
        "returns its final output."
    ),
    parameters={
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": 1, "description": "The job id bash returned"}
        },
        "required": ["id"],
        "additionalProperties": False,
    },
    handler=_job_kill,
)
