"""The session's *last activity*: recorded when the user prompts or commands, and only then.

``--continue`` and every session list order sessions by when the user last did something in
them (:meth:`coding_agent.session_files.folders.Session.last_active`). The worker records it
(:func:`~coding_agent.session_files.folders.record_activity`) from the commits a user causes:

* an input admitted or placed — a prompt, a steer, a follow-up, a ``!cmd`` line's output;
* a conversation created — ``/fork``, ``/new``, a branch;
* a configuration change — ``/model``, ``/thinking``, a permission mode.

Nothing else counts: resuming a session, a view followed by a client, a turn's streamed
answer, and a lingering worker stopping record nothing, so an untouched session keeps its
creation time and a session left ten minutes ago does not jump ahead of the one in use.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from coding_agent.session_files.folders import Session, record_activity

__all__ = ["activity_recorder", "is_user_activity"]

_log = logging.getLogger("coding_agent.worker")


def is_user_activity(batch: Any) -> bool:
    """True when a committed batch carries what a user did (see the module docstring)."""
    return bool(batch.inputs or batch.created or batch.config_changed)


def activity_recorder(session: Session, *, fsync: bool = True) -> Callable[[Any], Callable[[], None]]:
    """A harness registration (``HarnessServiceApi.add_registration``) that records the
    session's activity after every commit :func:`is_user_activity` accepts. Register it after
    the resume, so what the opening itself commits is not taken for the user's doing."""

    def on_commit(batch: Any) -> None:
        if not is_user_activity(batch):
            return
        try:
            record_activity(session, fsync=fsync)
        except OSError as error:  # the order of a list is not worth a failed turn
            _log.warning("could not record the session's activity: %s", error)

    def install(opened: Any) -> Callable[[], None]:
        return opened.kernel.add_commit_listener(on_commit)

    return install
