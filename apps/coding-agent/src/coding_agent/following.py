"""Which conversation a client of a session worker follows: the TUI's
(:class:`~coding_agent.tui.conversation_client.RemoteConversationClient`) and the web page's
(:class:`~coding_agent.server.web_bridge.PageBridge`) share this one rule.

A client observes every ``pi.conversation`` instance the worker serves (its facet's
``env.observe``); :meth:`ConversationFollower.observe` keeps the live ones by conversation id
and follows the *target* (``None``: the lowest root conversation) whenever it is live and not
followed yet. When the followed instance ends (the worker restarting, the conversation closed)
the client is told, and the choice is made again, so a target chosen once (``/fork``, a branch
picked on the page) is followed again when it reappears after a restart.

Which conversation an instance is comes from its small ``conversation`` identity (replicated
before the observer runs), never from its ``view``: a view crosses the wire only while someone
subscribes to it (docs/wire.md#lazy-state), and only the followed one is subscribed to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import anyio

from chord import Context, cancel_scope

__all__ = ["ConversationFollower", "root_rank"]


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
        """The conversation to follow (``None``: the lowest root); set it, then :meth:`choose`."""
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

    def choose(self) -> None:
        """Follow the target conversation (or the lowest root) if it is live and not followed."""
        if self.target is not None:
            pick = self.target if self.target in self._live else None
        else:
            roots = [key for key, (_, root) in self._live.items() if root]
            pick = min(roots) if roots else None
        if pick is None or pick == self.current_id:
            return
        instance = self._live[pick][0]
        self.current, self.current_id = instance, pick
        self._follow(instance)
