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

**The branch is in the session's storage too.** The folder is the disk of the machine that runs
the worker; a session on PostgreSQL taken over by another server (docs/server.md#failover) has
a folder of its own there, with no ``activity`` record. So the writer also stores the branch in
the session document, namespace :data:`BRANCH_NAMESPACE` (``{"branch": N}``, a session-wide
namespace slice: docs/design/harness.md#durable-primitives), in a commit of its own each time
the branch changes (a prompt in the branch already recorded commits nothing). The storage's is
the record :meth:`ActivityWriter.open` takes first, on any server and with JSONL as with
PostgreSQL; a session from before it (no stored branch) opens on its ``activity`` record as
before. The listeners hear a change once it is stored, so the branch a client is told is the one
a takeover opens; the ``activity`` file, written at once, is what the commands that read the
folder without opening the session read (``export``, ``sessions``).

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

from chord import BACKGROUND
from coding_agent.session_files.folders import Session, record_activity

__all__ = [
    "BRANCH_NAMESPACE",
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

BRANCH_NAMESPACE = "coding-agent.branch"
"""The session document's namespace holding ``branch``, the branch the session is on (see the
module doc); absent or ``null`` in a session that never changed branch since it existed."""


def _stored_branch(tx: Any, _ctx: Any) -> int | None:
    """A commit builder that reads the stored branch (it writes nothing, so stores nothing)."""
    slice_ = tx.snapshot("session").get("plugins", {}).get(BRANCH_NAMESPACE, {})
    branch = slice_.get("branch") if isinstance(slice_, dict) else None
    return branch if type(branch) is int else None


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
    without a branch names the branch of the newest record made before it.

    Once :meth:`install` is registered with the harness and :meth:`run` runs, a changed branch
    is also stored in the session document (:data:`BRANCH_NAMESPACE`) by :meth:`run`'s storing
    task, the newest one only, and the listeners hear it once it is stored (or could not be:
    the warning names why); :meth:`settle` waits for that commit too."""

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
        self._harness: Any = None  # the opened harness (install), whose session document ...
        self._namespace: Any = None  # ... holds the branch under this namespace token
        self._stored: int | None = None  # the branch the session document holds, as known
        self._published: int | None = None  # the branch the listeners heard last
        self._store_wake: anyio.Event | None = None  # made by run, like _wake
        self._storing: anyio.Lock | None = None

    @property
    def branch(self) -> int | None:
        """The branch the session is on: the newest record's (after :meth:`open`, the one the
        session recorded); ``None`` when none is known."""
        return self._branch

    def install(self, harness: Any) -> Callable[[], None]:
        """The harness registration (``HarnessServiceApi.add_registration``): registers
        :data:`BRANCH_NAMESPACE`, where a changed branch is stored from now on."""
        namespace = harness.namespace(BRANCH_NAMESPACE, {"session": {"branch": None}})
        self._harness, self._namespace = harness, namespace
        if self._store_wake is not None:
            self._store_wake.set()  # a change made while it was away (a reload) is stored now

        def uninstall() -> None:
            namespace.unregister()
            if self._harness is harness:
                self._harness = self._namespace = None

        return uninstall

    async def open(self, harness: Any) -> None:
        """Take the branch the session's storage names (:data:`BRANCH_NAMESPACE`), else, in a
        session from before it stored one, the one its ``activity`` record names; either only
        when it is one of the user's conversations in ``harness`` (not a subagent's, not one the
        storage lacks: a record from another copy of the session). Else none (clients follow
        the root). The listeners hear it at once."""
        root = await harness.root(BACKGROUND)
        stored = await root.commit(_stored_branch, BACKGROUND)
        self._stored = stored
        recorded = stored if stored is not None else self._session.current_branch()
        found = harness.kernel.conversations.get(recorded) if recorded is not None else None
        self._branch = recorded if found is not None and found.owner is msgspec.UNSET else None
        self._publish(self._branch)

    def on_branch(self, listener: Callable[[int | None], None]) -> None:
        """Call ``listener(branch)`` now and whenever the branch the session is on changes
        (once it is stored, see the class doc)."""
        self._listeners.append(listener)
        listener(self._published)

    def _set_branch(self, branch: int | None) -> None:
        if branch == self._branch:
            return
        self._branch = branch
        if self._store_wake is None or self._harness is None:
            self._publish(branch)  # nowhere to store it (no storing task, no harness)
        else:
            self._store_wake.set()

    def _publish(self, branch: int | None) -> None:
        if branch == self._published:
            return
        self._published = branch
        for listener in list(self._listeners):
            listener(branch)

    async def _store_newest(self) -> None:
        """Store the newest branch when the session document does not hold it yet, then tell
        the listeners; again while the branch changed meanwhile."""
        if self._storing is None:
            return
        async with self._storing:
            while True:
                branch, harness, namespace = self._branch, self._harness, self._namespace
                if branch is not None and branch != self._stored and harness is not None:
                    try:
                        with anyio.CancelScope(shield=True):  # a close waits for it
                            await self._store(harness, namespace, branch)
                        self._stored = branch
                    except Exception as error:  # a closed harness (reload), a lost lease
                        _log.warning("could not store the branch the session is on: %s", error)
                self._publish(branch)
                if self._branch == branch:
                    return

    @staticmethod
    async def _store(harness: Any, namespace: Any, branch: int) -> None:
        def write(tx: Any, _ctx: Any) -> None:
            tx.plugins(namespace)["branch"] = branch

        root = await harness.root(BACKGROUND)
        await root.commit(write, BACKGROUND)

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
        """Write the pending records, and store a changed branch, until cancelled; what is
        pending then is written at once."""
        self._drain = anyio.Lock()
        self._wake = anyio.Event()
        self._storing = anyio.Lock()
        self._store_wake = anyio.Event()
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._store_branches)
                while True:
                    await self._wake.wait()
                    self._wake = anyio.Event()
                    await self._settle_records()
                    await anyio.sleep(self._spacing)  # a newer record supersedes one made meanwhile
        finally:
            self._wake = self._store_wake = None
            self._publish(self._branch)  # no longer stored here: the listeners hear it at once
            if self._pending is not None:
                pending, self._pending = self._pending, None
                self._write(pending)

    async def _store_branches(self) -> None:
        while self._store_wake is not None:
            await self._store_wake.wait()
            if self._store_wake is not None:
                self._store_wake = anyio.Event()
            await self._store_newest()

    async def settle(self) -> None:
        """Write what is pending and store the branch; return once nothing is pending or being
        written."""
        await self._settle_records()
        await self._store_newest()

    async def _settle_records(self) -> None:
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
