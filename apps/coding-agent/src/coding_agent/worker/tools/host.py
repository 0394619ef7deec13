"""What the built-in tools need from their host, and the records they exchange with it.

The tools stay independent of the harness: whoever runs them hands a :class:`~.spec.ToolContext`
a :class:`ReadLedger` (the stamps of the files a conversation read or wrote, for read-before-edit)
and a :class:`JobControl` (background jobs). This module holds those protocols and their records
(:class:`FileStamp`, :class:`JobInfo`) and imports nothing of the tools, so every tool module and
the context itself can name them without importing each other. The worker's answers are
:class:`~coding_agent.worker.tools_facet.HarnessReadLedger` and
:class:`~coding_agent.worker.job_control.HarnessJobs`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Literal, Protocol

import msgspec

from chord import Context
from pico3 import Sandbox

__all__ = [
    "CHECKED_TARGETS_SERVICE",
    "EDITOR_FILES_SERVICE",
    "HASH_LIMIT",
    "CheckedTargets",
    "EditorFiles",
    "FileStamp",
    "JobControl",
    "JobInfo",
    "JobState",
    "ReadLedger",
    "TodoStore",
]

HASH_LIMIT = 16 * 1024 * 1024
"""Files up to this size are hashed for their stamp; bigger ones are stamped by size and time."""


JobState = Literal["starting", "running", "exited", "failed", "killed"]
"""Where a job is: not started yet, running, ended by itself, never started or lost, stopped."""


# -- stamps and the ledger -----------------------------------------------------------------------
class FileStamp(msgspec.Struct, frozen=True):
    """What a file was when it was last read or written: size, mtime (ns) and maybe a hash."""

    size: int
    mtime_ns: int
    sha256: str | None = None

    @classmethod
    def of(cls, info: os.stat_result, sha256: str | None) -> FileStamp:
        return cls(info.st_size, info.st_mtime_ns, sha256)

    @classmethod
    def of_bytes(cls, info: os.stat_result, data: bytes) -> FileStamp:
        sha = hashlib.sha256(data).hexdigest() if len(data) <= HASH_LIMIT else None
        return cls(info.st_size, info.st_mtime_ns, sha)

    def to_json(self) -> dict[str, Any]:
        """A JSON object (the nanosecond mtime as a string: it exceeds JSON's safe integers)."""
        return {"size": self.size, "mtimeNs": str(self.mtime_ns), "sha256": self.sha256}

    @classmethod
    def from_json(cls, value: Any) -> FileStamp | None:
        if not isinstance(value, dict):
            return None
        size, mtime, sha = value.get("size"), value.get("mtimeNs"), value.get("sha256")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if type(size) is not int or not isinstance(mtime, str) or not mtime.isdigit():
            return None
        return cls(size, int(mtime), sha if isinstance(sha, str) else None)


class ReadLedger(Protocol):
    """The stamps of the files one conversation has read or written, by :func:`ledger_key`."""

    async def get(self, key: str) -> FileStamp | None: ...
    async def put(self, key: str, stamp: FileStamp) -> None: ...


# -- what the approval checked -------------------------------------------------------------------
CHECKED_TARGETS_SERVICE = "checked_targets"
"""The harness service where the approval feature leaves the real path it checked a call's
``path`` as (a ``write`` or ``edit`` target; what ``read``, ``grep``, ``find`` or ``ls``
reads), under ``"<conversationId>:<callId>"`` (a :class:`CheckedTargets`); the call takes it as
``ToolContext.checked_target`` and writes or reads exactly there, or fails."""


class CheckedTargets(dict[str, str]):
    """The :data:`CHECKED_TARGETS_SERVICE` mapping: a dict keeping the newest ``limit`` entries
    (a call blocked after the approval's check leaves its entry behind; nothing else cleans it)."""

    def __init__(self, limit: int = 4096) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: str, value: str) -> None:
        self.pop(key, None)
        super().__setitem__(key, value)
        while len(self) > self.limit:
            del self[next(iter(self))]


# -- an editor's buffers ---------------------------------------------------------------------------
EDITOR_FILES_SERVICE = "coding-agent.editor-files"
"""The harness service holding the session's :class:`EditorFiles`, when a client brought its
editor's buffers (``coding-agent acp`` with an editor offering ``fs.readTextFile`` /
``fs.writeTextFile``); absent, the tools read and write the disk."""


class EditorFiles(Protocol):
    """An editor's view of the files (the Agent Client Protocol's ``fs/read_text_file`` and
    ``fs/write_text_file``): ``read``, ``edit`` and ``write`` of a text file go through it, so
    the model sees unsaved changes and its edits land in the editor's buffers (which the editor
    saves, or shows unsaved, as it does). The tools are called only after the call was approved:
    this changes where the bytes go, never whether they may."""

    async def read_text(self, path: Path) -> str | None:
        """The editor's text of ``path`` (an absolute path), or ``None`` when the editor does not
        offer reads or cannot read that file (the tool reads the disk instead)."""
        ...

    async def write_text(self, path: Path, text: str) -> bool:
        """Give ``text`` to the editor as the content of ``path``: ``True`` once it took it,
        ``False`` when it does not offer writes (the tool writes the disk instead). Raises
        :class:`OSError` naming why when the editor refused."""
        ...


# -- jobs ----------------------------------------------------------------------------------------
class TodoStore(Protocol):
    """Where a conversation's todo list is kept (``coding-agent.todo`` in a session)."""

    async def put(self, todos: list[dict[str, str]]) -> None:
        """Replace the list (durably, with the call's result)."""
        ...


class JobInfo(msgspec.Struct, frozen=True):
    """What a :class:`JobControl` knows about one job.

    ``stdout``/``stderr`` are the tails the process host keeps (``dropped_*`` bytes before
    them are gone from the tail, not from the logs); ``stdout_path``/``stderr_path`` are the
    complete logs when the host writes them to files. ``detail`` explains a ``failed`` state.
    ``stopping`` is set once a kill was requested and the job has not ended yet.
    """

    id: int
    command: str
    state: JobState
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    dropped_stdout: int = 0
    dropped_stderr: int = 0
    stdout_path: str | None = None
    stderr_path: str | None = None
    detail: str | None = None
    stopping: bool = False

    @property
    def ended(self) -> bool:
        """True once the job is over (exited, failed or killed)."""
        return self.state in ("exited", "failed", "killed")

    def as_details(self) -> dict[str, Any]:
        """The job without its output, for a result's ``details``."""
        details: dict[str, Any] = {"job_id": self.id, "command": self.command, "state": self.state}
        if self.exit_code is not None:
            details["exit_code"] = self.exit_code
        if self.stdout_path is not None:
            details["stdout_path"] = self.stdout_path
        if self.stderr_path is not None:
            details["stderr_path"] = self.stderr_path
        if self.detail is not None:
            details["detail"] = self.detail
        if self.stopping:
            details["stopping"] = True
        return details


class JobControl(Protocol):
    """What the job tools need from their host (see the module docstring)."""

    async def start(
        self, command: str, cwd: str, ctx: Context, sandbox: Sandbox | None = None
    ) -> JobInfo:
        """Start ``bash -c command`` in ``cwd`` as a job, exactly once; return it (``starting``).
        With a ``sandbox``, the job runs inside it (its whole process tree dies with it)."""
        ...

    async def get(self, job_id: int, ctx: Context) -> JobInfo:
        """The job ``job_id`` with fresh output; :class:`ToolError` when there is no such job."""
        ...

    async def list(self, ctx: Context) -> list[JobInfo]:
        """Every job of the conversation, oldest first."""
        ...

    async def kill(self, job_id: int, ctx: Context) -> JobInfo:
        """Stop the job and wait until it ended; return it. An ended job is returned as is."""
        ...
