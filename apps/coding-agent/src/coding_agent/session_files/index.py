"""What a session picker shows about each session, and names, search and delete.

A session's *name* (``/name TEXT``, ``--name TEXT``) is the file ``<session>/name`` (UTF-8, one
line, ``0600``), written atomically; no name is no file. Everything else is read from the session
folder without opening or locking it:

* last activity — the user's last prompt or command (:meth:`Session.last_active`; never a file
  time, so a lingering worker that stops does not bump it);
* first prompt — from the head of ``storage/main.jsonl`` (:func:`first_prompt`);
* model — the newest model the conversation was set to (read from the tail of ``main.jsonl``),
  else the one ``session.json`` names;
* size — the bytes of every file in the folder.

:func:`describe` gathers them as one JSON-ready dict (``coding-agent sessions --json`` prints a
list of them), :func:`matches` is the picker's fuzzy filter (name, id prefix, prompt text), and
:func:`delete_session` removes a session folder (never one a worker is serving).
"""

from __future__ import annotations

import os
import re
import shutil
from datetime import UTC, datetime
from typing import Any, cast

from coding_agent.marks import attachment_mark
from coding_agent.session_files.folders import Session, SessionError, open_regular, read_regular
from coding_agent.session_files.private import PRIVATE_FILE
from pico3 import write_atomic

__all__ = [
    "delete_session",
    "describe",
    "first_prompt",
    "human_size",
    "last_activity",
    "matches",
    "session_model",
    "session_name",
    "session_size",
    "set_session_name",
]

NAME_FILE = "name"
NAME_LIMIT = 200
_TAIL_BYTES = 256 * 1024
_MODEL = re.compile(rb'"provider":"([^"\\]{1,100})","modelId":"([^"\\]{1,200})"')


def session_name(session: Session) -> str | None:
    """The session's name, or ``None``."""
    try:  # a FIFO or a device in its place is no name (and never blocks the listing)
        raw = read_regular(session.path / NAME_FILE, 4 * NAME_LIMIT + 16, "a name file")
        text = raw.decode("utf-8").strip()
    except (OSError, SessionError, UnicodeDecodeError):
        return None
    return text or None


def set_session_name(session: Session, name: str) -> str | None:
    """Name the session (an empty ``name`` removes the name); returns the name stored.

    Raises :class:`SessionError` for a name over :data:`NAME_LIMIT` characters."""
    flat = " ".join(name.split())
    path = session.path / NAME_FILE
    if not flat:
        path.unlink(missing_ok=True)
        return None
    if len(flat) > NAME_LIMIT:
        raise SessionError(
            f"a session name has at most {NAME_LIMIT} characters ({len(flat)} given)"
        )
    write_atomic(path, flat + "\n", mode=PRIVATE_FILE)
    return flat


def last_activity(session: Session) -> datetime:
    """When the user last prompted or commanded in the session (:meth:`Session.last_active`,
    the rule ``--continue`` picks by); its creation for a session never used."""
    return datetime.fromtimestamp(session.last_active(), UTC)


def session_size(session: Session) -> int:
    """Bytes of every file in the session folder."""
    total = 0
    for folder, _dirs, files in os.walk(session.path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue
    return total


def session_model(session: Session) -> str | None:
    """The newest ``provider/id`` the session's conversation was set to, else ``session.json``'s."""
    path = session.storage_dir / "main.jsonl"
    try:
        with open(open_regular(path), "rb") as file:
            size = file.seek(0, os.SEEK_END)
            file.seek(max(0, size - _TAIL_BYTES))
            tail = file.read()
    except (OSError, SessionError):
        return session.model
    found = _MODEL.findall(tail)
    if found:
        provider, model = found[-1]
        return f"{provider.decode()}/{model.decode()}"
    return session.model


_PROMPT_SCAN_BYTES = 256 * 1024
_PROMPT_WIDTH = 60


def _prompt_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            cast(dict[str, Any], block).get("text")
            for block in cast(list[Any], content)
            if isinstance(block, dict)
        ]
        # An attached file's block (``@file``) is the model's, not what the user typed.
        typed = [text for text in texts if isinstance(text, str) and attachment_mark(text) is None]
        joined = " ".join(typed)
        return joined or None
    return None


def first_prompt(session: Session, *, width: int = _PROMPT_WIDTH) -> str | None:
    """The session's first user prompt on one line, cut to ``width``; ``None`` if there is none
    (yet) within the head of its storage file, or the file cannot be read. Of an imported
    session, the first thing the user typed there: a slash command as typed (``data.typed``),
    never the text Claude Code added unseen (``data.meta``: a local command's caveat)."""
    try:
        with open(open_regular(session.storage_dir / "main.jsonl"), "rb") as file:
            head = file.read(_PROMPT_SCAN_BYTES)
    except (OSError, SessionError):
        return None
    from pico3 import stored_writes

    # a line the read cut in two does not decode and is skipped
    for write in stored_writes(head):
        entry = write.get("entry")
        if not isinstance(entry, dict) or entry.get("kind") != "pi.user":
            continue
        data = entry.get("data")
        data = cast(dict[str, Any], data) if isinstance(data, dict) else {}
        typed = data.get("typed")
        if isinstance(typed, str) and typed.strip():  # an imported slash command, as typed
            return _one_line(typed, width)
        if data.get("meta"):  # imported text the user did not type (a local command's caveat)
            continue
        for message in entry.get("model") or []:
            text = _prompt_text(message.get("content")) if isinstance(message, dict) else None
            if text and text.strip():
                return _one_line(text, width)
    return None


def _one_line(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def describe(session: Session) -> dict[str, Any]:
    """One session as the picker and ``coding-agent sessions --json`` show it."""
    return {
        "id": session.id,
        "name": session_name(session),
        "cwd": str(session.cwd),
        "created": session.created.isoformat(),
        "lastActivity": last_activity(session).isoformat(timespec="seconds"),
        "firstPrompt": first_prompt(session, width=200),
        "model": session_model(session),
        "size": session_size(session),
        "running": session.worker_running(),
        "branches": session_branches(session),
    }


def session_branches(session: Session) -> list[dict[str, Any]]:
    """The session's branches, oldest first: ``{"id", "summary", "conversation", "current"}`` —
    ``id`` is the number users see (``/tree``'s, ``/branch N``'s, ``export --branch N``'s: 1, 2, 3
    in creation order), ``conversation`` the internal id, ``current`` whether it is the branch the
    user is on (the one ``--resume`` and ``export`` open); ``[]`` when its log cannot be read."""
    # lazy: start-up time (listing sessions does not load the exporter)
    from coding_agent.session_files.export import default_branch, read_session_records
    from coding_agent.session_files.tree import build_outline

    try:
        conversations, entries = read_session_records(session)
        outline = build_outline(conversations, entries)
    except (SessionError, OSError):
        return []
    known = {c["id"] for c in outline["conversations"]}
    current = default_branch(session, known, entries) if known else None
    return [
        {
            "id": c["number"],
            "summary": c.get("summary"),
            "conversation": c["id"],
            "current": c["id"] == current,
        }
        for c in outline["conversations"]
    ]


def _subsequence(needle: str, haystack: str) -> bool:
    position = 0
    for char in needle:
        position = haystack.find(char, position)
        if position < 0:
            return False
        position += 1
    return True


def matches(info: dict[str, Any], query: str) -> bool:
    """The picker filter: every word of ``query`` is in the name or prompt (as a fuzzy
    subsequence for the name), or the id starts with it."""
    name = (info.get("name") or "").lower()
    prompt = (info.get("firstPrompt") or "").lower()
    ident = str(info.get("id", "")).lower()
    for word in query.lower().split():
        if ident.startswith(word) or word in prompt or word in name:
            continue
        if name and _subsequence(word, name):
            continue
        return False
    return True


def delete_session(session: Session) -> None:
    """Remove the session folder. Raises :class:`SessionError` while a worker serves it."""
    if session.worker_running():
        raise SessionError(f"session {session.id} is running; quit it before deleting it")
    if not (session.path / "session.json").is_file():
        raise SessionError(f"{session.path}: not a session folder")
    shutil.rmtree(session.path)


def human_size(size: int) -> str:
    """``12.3 KB`` style."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover
