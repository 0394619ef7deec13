"""The session's *last activity*: recorded when the user prompts or commands, and only then.

``--continue`` and every session list order sessions by when the user last did something in
them (:meth:`coding_agent.session_files.folders.Session.last_active`). The worker records it
(:func:`~coding_agent.session_files.folders.record_activity`) from the commits a user causes:

* an input admitted or placed — a prompt, a steer, a follow-up, a ``!cmd`` line's output;
* a conversation created — ``/fork``, ``/new``, a branch;
* a configuration change — ``/model``, ``/thinking``, a permission mode.

The record also names the branch the user is on — the conversation of the newest prompt, else
the one just made (``/fork``, a rewind, "continue from here"; never a subagent's) — which
``coding-agent export`` exports by default and every client that opens the session follows
(``--continue``, ``--resume``, ``attach``, the web page, ``-p``). The writer is that branch's one
owner in the worker: :meth:`ActivityWriter.open` takes the recorded one when the session opens
(if it is still one of the user's conversations) and :meth:`ActivityWriter.on_branch` listeners
(the worker's status document, ``branch``) hear every change. A branch summary or a label
written into another conversation does not move it.

Nothing else counts: resuming a session, a view followed by a client, a turn's streamed
answer, an input resolved (the turn it started ending: one record per prompt, not two — each
costs a file and a folder fsync), and a lingering worker stopping record nothing, so an untouched session keeps its
creation time and a session left ten minutes ago does not jump ahead of the one in use.

A prompt's record is written off the event loop (:class:`ActivityWriter`): a record is two
fsyncs and a rename (~5 ms on an idle disk), which the commit of every prompt waited for, on
the loop, before the turn could go on. Its moment and branch are taken when the commit is seen;
the writer writes the newest record not yet written, in order (a record superseded before it
was written is skipped: only the newest is ever read), and what is pending is written before
the session host closes. A conversation made, a configuration change and a visit are recorded
at once, as before, so a branch just made is the one the file names when the call returns.

The writer writes a prompt's record at most once every :data:`SPACING` seconds: a prompt after
a write waits for the rest of that time (a newer one supersedes it meanwhile). A person prompts
far less often, so for them nothing changes; a scripted session that runs many short turns a
second (headless, a benchmark) pays the two fsyncs once a second instead of once a turn, where
they were a fifth of its durable writes. The moment recorded is still the prompt's own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import anyio
import msgspec

from coding_agent.session_files.folders import Session, record_activity

__all__ = [
    "SPACING",
    "ActivityWriter",
    "activity_recorder",
    "is_user_activity",
    "user_branch",
    "visit_recorder",
]

_log = logging.getLogger("coding_agent.worker")

SPACING = 1.0
"""Seconds the writing task leaves between two writes of prompts' records (see the module doc)."""


def is_user_activity(batch: Any, admitted: set[int] | None = None) -> bool:
    """True when a committed batch carries what a user did (see the module docstring).

    ``admitted`` (kept up to date by the call) holds the ids of the inputs seen queued or
    placed and not resolved since: a ``done``/``unanswered`` input among them is the turn's end,
    not the user's doing. An input written ``done`` at once (a ``!cmd`` line's output), or
    resolved after a restart, counts. Without ``admitted`` every input counts."""
    user = bool(batch.created or batch.config_changed)
    for input_id, record in batch.inputs.items():
        if admitted is None or record.status in _OPEN:
            user = True
            if admitted is not None:
                admitted.add(input_id)
        elif input_id in admitted:
            admitted.discard(input_id)
        else:
            user = True
    return user


_OPEN = frozenset({"queued", "placed"})


def user_branch(kernel: Any, batch: Any) -> int | None:
    """The conversation of the batch's newest prompt, else the newest it made, that is the
    user's (a subagent's conversation has an owner); ``None`` when there is none."""
    prompted = [e.conversation_id for e in batch.new_entries if e.kind == "pi.user"]
    candidates = [*batch.created, *prompted]
    conversations = kernel.conversations
    for conversation_id in reversed(candidates):
        record = conversations.get(conversation_id)
        if record is not None and record.owner is msgspec.UNSET:
            return conversation_id
    return None


class ActivityWriter:
    """Writes a session's activity records (see the module doc). :meth:`record` is called on
    the event loop (a commit listener, a visit). A prompt's record (``later=True``) is written
    by :meth:`run`, the writing task started in the host's task group, in a worker thread: the
    newest pending one, in order. Any other record (a conversation made, a configuration
    change, a visit), and every record while :meth:`run` is not running, is written at once,
    as before there was a writer, and supersedes what is pending. :meth:`settle` writes what is
    pending and waits for the write in flight (the host's close, shielded). :meth:`run` leaves
    ``spacing`` seconds between its writes (:data:`SPACING`).

    Every record is numbered when it is made and a write never replaces a newer record's (a
    lock orders them), so the file always ends with the newest record written. A record
    without a branch names the branch of the newest record made before it."""

    def __init__(self, session: Session, *, fsync: bool = True, spacing: float = SPACING) -> None:
        self._session = session
        self._fsync = fsync
        self._spacing = spacing
        self._made = 0  # records made
        self._written = 0  # the number of the newest record written
        self._branch: int | None = None  # the branch of the newest record made
        self._listeners: list[Callable[[int | None], None]] = []
        self._pending: tuple[int, datetime, int | None] | None = None
        self._file = threading.Lock()  # held while a record is written
        self._wake: anyio.Event | None = None  # made by run (an event needs the loop)
        self._drain: anyio.Lock | None = None

    @property
    def branch(self) -> int | None:
        """The branch the session is on: the newest record's (after :meth:`open`, the one the
        session folder recorded); ``None`` when none is known."""
        return self._branch

    def open(self, kernel: Any) -> None:
        """Take the branch the session's ``activity`` record names, when it is one of the
        user's conversations in ``kernel`` (not a subagent's, not one the storage lacks: a
        record from another copy of the session); else none (clients follow the root)."""
        recorded = self._session.current_branch()
        found = kernel.conversations.get(recorded) if recorded is not None else None
        self._set_branch(recorded if found is not None and found.owner is msgspec.UNSET else None)

    def on_branch(self, listener: Callable[[int | None], None]) -> None:
        """Call ``listener(branch)`` now and whenever the branch the session is on changes."""
        self._listeners.append(listener)
        listener(self._branch)

    def _set_branch(self, branch: int | None) -> None:
        if branch == self._branch:
            return
        self._branch = branch
        for listener in list(self._listeners):
            listener(branch)

    def record(self, branch: int | None, *, later: bool = False) -> None:
        """Record the user's doing now, on ``branch`` (``None``: the branch recorded last);
        ``later``: by the writing task, when it runs."""
        if branch is None:
            branch = self._branch
        self._set_branch(branch)
        self._made += 1
        record = (self._made, datetime.now(UTC), branch)
        if later and self._wake is not None:
            self._pending = record
            self._wake.set()
            return
        self._pending = None  # superseded
        self._write(record)

    def _write(self, record: tuple[int, datetime, int | None]) -> None:
        number, when, branch = record
        with self._file:
            if number <= self._written:
                return  # a newer record is on disk already
            try:
                record_activity(self._session, when, branch=branch, fsync=self._fsync)
            except OSError as error:  # the order of a list is not worth a failed turn
                _log.warning("could not record the session's activity: %s", error)
            self._written = number

    async def run(self) -> None:
        """Write the pending records until cancelled; what is pending then is written at once."""
        self._drain = anyio.Lock()
        self._wake = anyio.Event()
        try:
            while True:
                await self._wake.wait()
                self._wake = anyio.Event()
                await self.settle()
                await anyio.sleep(self._spacing)  # a newer record supersedes one made meanwhile
        finally:
            self._wake = None
            if self._pending is not None:
                pending, self._pending = self._pending, None
                self._write(pending)

    async def settle(self) -> None:
        """Write what is pending; return once nothing is pending or being written."""
        if self._drain is None:
            return
        async with self._drain:
            while self._pending is not None:
                pending, self._pending = self._pending, None
                with anyio.CancelScope(shield=True):  # taken: written whatever happens
                    await anyio.to_thread.run_sync(self._write, pending)


def activity_recorder(
    session: Session, *, fsync: bool = True, writer: ActivityWriter | None = None
) -> Callable[[Any], Callable[[], None]]:
    """A harness registration (``HarnessServiceApi.add_registration``) that records the
    session's activity after every commit :func:`is_user_activity` accepts (through
    ``writer`` when given: a prompt's off the loop; else at once). Register it after the
    resume, so what the opening itself commits is not taken for the user's doing."""
    out = writer if writer is not None else ActivityWriter(session, fsync=fsync)

    def install(opened: Any) -> Callable[[], None]:
        kernel = opened.kernel
        admitted: set[int] = set()  # see is_user_activity

        def on_commit(batch: Any) -> None:
            if is_user_activity(batch, admitted):
                prompt_only = not (batch.created or batch.config_changed)
                out.record(user_branch(kernel, batch), later=prompt_only)

        return kernel.add_commit_listener(on_commit)

    return install


def visit_recorder(
    session: Session, fsync: bool = True, *, writer: ActivityWriter | None = None
) -> Callable[[int], None]:
    """``on_visit`` of the session tree service: a switch to a branch (``/branch``, ``/tree``,
    Ctrl+B) is the user's doing, and that branch is the one they are on (recorded through
    ``writer`` when given, in order with the prompts', else at once)."""
    out = writer if writer is not None else ActivityWriter(session, fsync=fsync)
    return out.record
