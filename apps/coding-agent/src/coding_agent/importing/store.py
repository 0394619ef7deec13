"""Store an imported conversation as a new session of ours, and find what can be imported.

:func:`read_session_file` reads a file of either agent (which one is told by its content, not
its folder); :func:`import_file` creates a session in the conversation's project folder
(:func:`~coding_agent.session_files.folders.create_session`) and writes the conversation into
its root conversation in one durable commit of the session's own storage
(:meth:`pico3.ConversationHandle.import_history`: the entries a turn would have written), so
``--resume ID`` continues it like any session. The source is recorded in the session folder's
``import.json`` (``{"tool", "path", "size", "mtime", "sourceId"}``), which is how a second
import of the same unchanged file finds the first (:func:`previous_imports`).

:func:`importable_sessions` lists the files of both agents kept for a project folder, newest
first: pi's ``<pi home>/sessions/--<cwd, / as ->--/*.jsonl`` and Claude Code's
``<claude home>/projects/<cwd, non-alphanumerics as ->/*.jsonl`` (subagents' ``agent-*.jsonl``
left out).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from coding_agent.importing.claude_code_sessions import (
    looks_like_claude_code,
    read_claude_code_session,
)
from coding_agent.importing.common import (
    FILE_LIMIT,
    LINE_LIMIT,
    ImportedSession,
    ImportProblem,
    read_lines,
)
from coding_agent.importing.pi_sessions import looks_like_pi, read_pi_session
from coding_agent.session_files.folders import (
    Session,
    create_session,
    list_sessions,
    record_activity,
)
from coding_agent.session_files.index import NAME_LIMIT, set_session_name
from coding_agent.session_files.private import PRIVATE_FILE
from coding_agent.settings.xdg import claude_project_folder, pi_home
from pico3 import write_atomic

__all__ = [
    "IMPORT_RECORD",
    "Importable",
    "import_file",
    "import_report",
    "import_session",
    "importable_sessions",
    "previous_imports",
    "read_session_file",
]

IMPORT_RECORD = "import.json"
"""The file in a session folder saying what it was imported from."""


def read_session_file(
    path: Path, *, line_limit: int = LINE_LIMIT, file_limit: int = FILE_LIMIT
) -> ImportedSession:
    """The conversation of a session file of pi or Claude Code (told apart by its lines).
    A line longer than ``line_limit`` bytes is skipped, and a note names it
    (:func:`~coding_agent.importing.common.read_lines`). Raises :class:`ImportProblem` for
    anything else, a file bigger than ``file_limit`` bytes, or a file with no conversation."""
    path = path.expanduser().absolute()
    lines = read_lines(path, line_limit=line_limit, file_limit=file_limit)
    if looks_like_pi(lines):
        session = read_pi_session(path, lines)
    elif looks_like_claude_code(lines):
        session = read_claude_code_session(path, lines)
    else:
        raise ImportProblem(
            f"{path}: not a session file of pi or Claude Code (pi's start with a "
            '{"type": "session", ...} line, Claude Code\'s have "user"/"assistant" lines '
            "with a sessionId; coding-agent import --list shows this folder's)"
        )
    if not any(m.get("role") in ("user", "assistant") for m in session.messages):
        raise ImportProblem(f"{path}: the session has no conversation to import (no message)")
    return session


def _source_record(session: ImportedSession) -> dict[str, Any]:
    stat = session.source.stat()
    return {
        "tool": session.tool,
        "path": str(session.source),
        "size": stat.st_size,
        "mtime": stat.st_mtime_ns,
        "sourceId": session.source_id,
    }


def previous_imports(source: Path, env: Mapping[str, str] | None = None) -> list[Session]:
    """The sessions of ours imported from ``source`` as it is now (same size and mtime)."""
    try:
        stat = source.stat()
    except OSError:
        return []
    found: list[Session] = []
    for session in list_sessions(None, env=env):
        try:
            record = json.loads((session.path / IMPORT_RECORD).read_text())
        except (OSError, ValueError):
            continue
        if (
            isinstance(record, dict)
            and record.get("path") == str(source)  # pyright: ignore[reportUnknownMemberType]
            and record.get("size") == stat.st_size  # pyright: ignore[reportUnknownMemberType]
            and record.get("mtime") == stat.st_mtime_ns  # pyright: ignore[reportUnknownMemberType]
        ):
            found.append(session)
    return found


def import_file(
    imported: ImportedSession, *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> Session:
    """:func:`import_session` for a caller outside an event loop (the command line)."""
    import anyio

    return anyio.run(lambda: import_session(imported, cwd=cwd, env=env))


async def import_session(
    imported: ImportedSession, *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> Session:
    """A new session of ours in ``cwd`` (default: the conversation's own folder) holding
    ``imported``'s conversation. Raises :class:`ImportProblem` when the folder is missing."""
    folder = cwd if cwd is not None else imported.cwd
    if folder is None:
        raise ImportProblem(
            f"{imported.source}: the session records no project folder: name the one to "
            "continue it in with --cwd FOLDER"
        )
    if not folder.is_absolute() or not folder.is_dir():
        raise ImportProblem(
            f"the session's project folder {folder} does not exist here: import it into "
            "another with --cwd FOLDER"
        )
    record = _source_record(imported)
    session = create_session(folder, env=env)
    # how clients show what the user did not type there, or typed as a command
    # (pico3.UserData.meta, .typed)
    data: list[dict[str, Any] | None] = [
        imported.shown.get(index) for index in range(len(imported.messages))
    ]
    data[0] = {
        **(data[0] or {}),
        "imported": {"tool": imported.tool, "sourceId": imported.source_id},
    }
    try:
        await _write(session.storage_dir, imported.messages, data)
        encoded = json.dumps(record, ensure_ascii=False).encode() + b"\n"
        write_atomic(session.path / IMPORT_RECORD, encoded, mode=PRIVATE_FILE, fsync=True)
        record_activity(session, branch=1)  # --continue picks the session just imported
        if imported.name:
            set_session_name(session, imported.name[:NAME_LIMIT])
    except BaseException:
        from coding_agent.session_files.folders import remove_session

        remove_session(session)  # a failed import leaves no half session behind
        raise
    return session


async def _write(
    storage_dir: Path, messages: list[dict[str, Any]], data: list[dict[str, Any] | None]
) -> None:
    from chord import BACKGROUND
    from pico3 import Harness, HarnessOptions, JsonlStorage

    storage = JsonlStorage(storage_dir, create=False)
    harness = await Harness.open(storage, HarnessOptions(), BACKGROUND)
    try:
        root = await harness.root(BACKGROUND)
        await root.import_history(messages, BACKGROUND, data=data)
    finally:
        await harness.close(BACKGROUND)


@dataclass(frozen=True)
class Importable:
    """A session file of another agent kept for this project folder."""

    tool: str
    path: Path
    modified: datetime
    first_prompt: str
    messages: int

    def listing(self) -> str:
        """Its two lines in ``import --list`` and the TUI's ``/import`` picker: the tool, when
        it last wrote (local time), the number of messages and the first prompt; the file."""
        when = self.modified.astimezone().strftime("%Y-%m-%d %H:%M")
        prompt = self.first_prompt[:70] or "(no prompt)"
        return (
            f"{self.tool:<11}  {when}  {self.messages:>4} messages  {prompt}\n"
            f"             {self.path}"
        )


def _pi_folder(cwd: Path, env: Mapping[str, str] | None) -> Path:
    name = "--" + re.sub(r"[/\\:]", "-", str(cwd).lstrip("/\\")) + "--"
    return pi_home(env) / "sessions" / name


def _claude_folder(cwd: Path, env: Mapping[str, str] | None) -> Path:
    return claude_project_folder(cwd, env)


def importable_sessions(cwd: Path, env: Mapping[str, str] | None = None) -> list[Importable]:
    """The session files of pi and Claude Code for ``cwd`` that hold a conversation, newest
    first (by file time: when the other agent last wrote it)."""
    found: list[Importable] = []
    for folder in (_pi_folder(cwd, env), _claude_folder(cwd, env)):
        try:
            files = sorted(folder.glob("*.jsonl"))
        except OSError:
            continue
        for path in files:
            if path.name.startswith("agent-"):
                continue
            try:
                session = read_session_file(path)
                modified = datetime.fromtimestamp(path.stat().st_mtime, UTC)
            except (ImportProblem, OSError):
                continue
            count = sum(1 for m in session.messages if m.get("role") in ("user", "assistant"))
            found.append(Importable(session.tool, path, modified, session.first_prompt, count))
    found.sort(key=lambda item: item.modified, reverse=True)
    return found


def import_report(
    imported: ImportedSession, session: Session, earlier: Sequence[Session] = ()
) -> list[str]:
    """What an import says it did: the messages imported into which session, then (indented)
    what was left out, the model it ran on there, and the sessions holding an earlier import of
    the same file (``earlier``: :func:`previous_imports`, asked before importing)."""
    name = "pi" if imported.tool == "pi" else "Claude Code"
    count = sum(1 for m in imported.messages if m.get("role") in ("user", "assistant"))
    lines = [
        f"Imported {count} messages of {name} session {imported.source_id} into session "
        f"{session.id} ({session.cwd})"
    ]
    if imported.skipped_lines:
        why = " (the last one was cut off)" if imported.truncated_tail else ""
        lines.append(f"  skipped {imported.skipped_lines} line(s) that are not whole JSON{why}")
    lines += [f"  {note}" for note in imported.notes]
    if imported.model:
        lines.append(
            f"  it ran on {imported.model} there; here it continues on the model you start it "
            "with (--model provider/id)"
        )
    if earlier:
        ids = ", ".join(s.id for s in earlier)
        lines.append(f"  this file was imported before, unchanged, as {ids}")
    return lines
