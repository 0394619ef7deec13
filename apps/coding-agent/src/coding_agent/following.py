"""Which conversation a client of a session worker follows: the TUI's
(:class:`~coding_agent.tui.conversation_client.RemoteConversationClient`) and the web page's
(:class:`~coding_agent.server.web_bridge.PageBridge`) share this one rule.

A client observes every ``pi.conversation`` instance the worker serves (its facet's
``env.observe``); :meth:`ConversationFollower.observe` keeps the live ones by conversation id
and follows the *target* whenever it is live and not followed yet. When the followed instance
ends (the worker restarting, the conversation closed) the client is told, and the choice is
made again, so a target chosen once (``/fork``, a branch picked on the page) is followed again
when it reappears after a restart.

Before anything is chosen (``target`` is ``None``) the client follows **the branch the session
is on**: the one the user last prompted in, made (``/fork``, ``/rewind``, "continue from here")
or switched to. The worker owns that fact (:class:`~coding_agent.worker.activity.ActivityWriter`,
stored in the session's storage, so a server that takes a session over opens it there too, and
recorded in the session folder's ``activity`` file, the same branch ``coding-agent sessions``
stars and ``export`` exports) and publishes it as its status document's ``branch``
(:mod:`coding_agent.worker.status`); the client passes it to :meth:`ConversationFollower.set_home`.
Nothing is followed until the status arrives (so a session rewound to a new branch never shows
its old branch first); then the named branch is followed as soon as its instance is live, or,
when the status names none (a session not prompted yet, an older worker), the lowest root
conversation. Whatever is followed first becomes the target, so a reconnect comes back to it.

Two clients of one session (two TUIs, a TUI and a page) each keep their own branch: when one
switches (a rewind, ``/fork``, ``/branch``) the worker's ``branch`` moves, but a client that
already follows one does not jump with it (its user may be typing); its next prompt lands where
it shows and moves the session's branch back there. A client opened later follows the newest.

Which conversation an instance is comes from its small ``conversation`` identity (replicated
before the observer runs), never from its ``view``: a view crosses the wire only while someone
subscribes to it (docs/wire.md#lazy-state), and only the followed one is subscribed to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import anyio

from chord import Context, cancel_scope

__all__ = ["ConversationFollower", "root_rank", "status_branch"]


def root_rank(info: Any) -> int | None:
    """The conversation id of ``info`` (an instance's ``conversation`` value, a
    :class:`~pico3.ConversationInfo`) if it is a root conversation (no parent, no owner).

    Returns ``None`` for forks, subagents and values that are not a conversation's identity.
    """
    if not isinstance(info, dict):
        return None
    info = cast(dict[str, Any], info)
    conversation_id = info.get("id")
    if type(conversation_id) is not int or "parent" in info or "owner" in info:
        return None
    return conversation_id


def status_branch(status: Any) -> int | None:
    """The branch the session is on, as the worker's status document names it (``None``: it
    names none, or the document is from a worker that does not say)."""
    branch = cast(dict[str, Any], status).get("branch") if isinstance(status, dict) else None
    return branch if type(branch) is int else None


def _conversation_id(info: Any) -> int | None:
    """The id in any conversation's identity ``info``."""
    conversation_id = cast(dict[str, Any], info).get("id") if isinstance(info, dict) else None
    return conversation_id if type(conversation_id) is int else None


class ConversationFollower:
    """The live conversation instances of one worker and the one followed (see the module
    docstring). ``follow(instance)`` is called when ``instance`` becomes the followed one
    (:attr:`current` is already set), ``lost(instance)`` when the followed instance ended
    (:attr:`current` is already ``None``; a new choice follows at once)."""

    def __init__(self, follow: Callable[[Any], None], lost: Callable[[Any], None]) -> None:
        self._follow = follow
        self._lost = lost
        self._live: dict[int, tuple[Any, bool]] = {}  # id -> (instance, is a root)
        self.target: int | None = None
        """The conversation to follow (``None``: none chosen yet, the session's branch); set
        it, then :meth:`choose`."""
        self.home: int | None = None
        """The branch the session is on, as the worker said last (:meth:`set_home`)."""
        self._home_known = False
        self.current: Any = None
        """The followed instance (``None``: none is live)."""
        self.current_id: int | None = None
        """Its conversation id."""

    async def observe(self, instance: Any, ctx: Context) -> None:
        """One observed conversation instance, for as long as it lives (``ctx`` ends with it)."""
        info = instance.conversation.value
        conversation_id = _conversation_id(info)
        if conversation_id is None:
            return
        self._live[conversation_id] = (instance, root_rank(info) is not None)
        try:
            self.choose()
            with cancel_scope(ctx):
                await anyio.sleep_forever()
        finally:
            if self._live.get(conversation_id, (None,))[0] is instance:
                del self._live[conversation_id]
            if self.current is instance:
                self.current, self.current_id = None, None
                self._lost(instance)
                self.choose()

    def set_home(self, branch: int | None) -> None:
        """The worker says the session is on ``branch`` (its status document's ``branch``,
        :func:`status_branch`). The first word decides what a client with no target follows;
        later ones only update :attr:`home` (see the module docstring)."""
        first = not self._home_known
        self.home, self._home_known = branch, True
        if first:
            self.choose()

    def forget_home(self) -> None:
        """Another session from now on (``/resume``): wait for its worker's word again."""
        self.home, self._home_known = None, False

    def choose(self) -> None:
        """Follow the target conversation if it is live and not followed; with no target, the
        session's branch (or the lowest root), which becomes the target (module docstring)."""
        if self.target is None:
            if not self._home_known:
                return  # which branch the session is on is not known yet
            if self.home is not None:
                pick = self.home if self.home in self._live else None
            else:
                roots = [key for key, (_, root) in self._live.items() if root]
                pick = min(roots) if roots else None
            if pick is None:
                return
            self.target = pick
        pick = self.target if self.target in self._live else None
        if pick is None or pick == self.current_id:
            return
        instance = self._live[pick][0]
        self.current, self.current_id = instance, pick
        self._follow(instance)
