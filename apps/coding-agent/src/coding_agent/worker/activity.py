"""The session's *last activity*: recorded when the user prompts or commands, and only then.

``--continue`` and every session list order sessions by when the user last did something in
them (:meth:`coding_agent.session_files.folders.Session.last_active`). The worker records it
(:func:`~coding_agent.session_files.folders.record_activity`) from the commits a user causes:

* an input admitted or placed — a prompt, a steer, a follow-up, a ``!cmd`` line's output;
* a conversation created — ``/fork``, ``/new``, a branch;
* a configuration change — ``/model``, ``/thinking``, a permission mode.

The record also names the branch the user is on — the conversation of the newest prompt, else
the one just made (``/fork``, a rewind, "continue from here"; never a subagent's) — which
``coding-agent export`` exports by default. A branch summary or a label written into another
conversation does not move it.

Nothing else counts: resuming a session, a view followed by a client, a turn's streamed
answer, an input resolved (the turn it started ending: one record per prompt, not two — each
costs a file and a folder fsync), and a lingering worker stopping record nothing, so an untouched session keeps its
creation time and a session left ten minutes ago does not jump ahead of the one in use.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import msgspec

from coding_agent.session_files.folders import Session, record_activity

__all__ = ["activity_recorder", "is_user_activity", "user_branch", "visit_recorder"]

_log = logging.getLogger("coding_agent.worker")


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


def activity_recorder(
    session: Session, *, fsync: bool = True
) -> Callable[[Any], Callable[[], None]]:
    """A harness registration (``HarnessServiceApi.add_registration``) that records the
    session's activity after every commit :func:`is_user_activity` accepts. Register it after
    the resume, so what the opening itself commits is not taken for the user's doing."""

    def install(opened: Any) -> Callable[[], None]:
        kernel = opened.kernel
        admitted: set[int] = set()  # see is_user_activity

        def on_commit(batch: Any) -> None:
            if not is_user_activity(batch, admitted):
                return
            try:
                record_activity(session, branch=user_branch(kernel, batch), fsync=fsync)
            except OSError as error:  # the order of a list is not worth a failed turn
                _log.warning("could not record the session's activity: %s", error)

        return kernel.add_commit_listener(on_commit)

    return install


def visit_recorder(session: Session, fsync: bool = True) -> Callable[[int], None]:
    """``on_visit`` of the session tree service: a switch to a branch (``/branch``, ``/tree``,
    Ctrl+B) is the user's doing, and that branch is the one they are on."""

    def visit(conversation: int) -> None:
        try:
            record_activity(session, branch=conversation, fsync=fsync)
        except OSError as error:
            _log.warning("could not record the session's activity: %s", error)

    return visit
