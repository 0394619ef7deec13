"""The TUI's :class:`~coding_agent.tui.ConversationClient` over the remote ``pi.conversation``.

The session worker serves one ``pi.conversation`` instance per conversation (keyed by the
conversation id). The TUI process reaches them through a facet host whose service source is the
wire (:func:`chord.wire.connect_service_source`). :func:`conversation_client_facet` is the
presentation facet that *observes* that keyed service and points a
:class:`~coding_agent.tui.client.ViewRelay` at the **root** conversation's ``view``: the one
without a parent or owner, the lowest id if there are several.

The wire does the hard part. When the worker goes away every observed instance's task is
cancelled (its facade is unavailable), and when the worker is back each conversation reappears as
a fresh observation, hydrated from a snapshot. The facet turns that into what the app expects:
the relay :meth:`~coding_agent.tui.client.ViewRelay.detach`\\ es (the app shows "unavailable")
and then :meth:`~coding_agent.tui.client.ViewRelay.follow`\\ s the new instance (a ``hydrate``
delivery: the app rebuilds its transcript from the new baseline).

Actions go to whichever instance is current; with none (the worker is down) they fail at once
with :class:`WorkerUnavailable`, a clear message the app shows as a toast.
"""

from __future__ import annotations

from typing import Any, cast

import anyio

from chord.context import Context, cancel_scope
from chord.facets import Facet, FacetEnvironment, define_facet
from chord.state import Delivery, ReplicatedState
from coding_agent.tui.client import InputAbortResult, SendMode, SessionInfo, ViewRelay
from pico3.chord import ConversationService

__all__ = [
    "CLIENT_FACET_ID",
    "RemoteConversationClient",
    "WorkerUnavailable",
    "conversation_client_facet",
    "root_rank",
]

CLIENT_FACET_ID = "@coding-agent/conversation-client"

_WHEN_BUSY: dict[SendMode, str] = {"prompt": "followUp", "steer": "steer", "followUp": "followUp"}


class WorkerUnavailable(RuntimeError):
    """The session worker is not connected right now (it is being restarted)."""

    def __init__(self) -> None:
        super().__init__("the session worker is unavailable (reconnecting)")


def root_rank(view: Any) -> int | None:
    """The conversation id of ``view`` if it is a root conversation (no parent, no owner).

    Returns ``None`` for forks, subagents and values that are not a conversation view yet.
    """
    if not isinstance(view, dict):
        return None
    info = cast(dict[str, Any], view).get("conversation")
    if not isinstance(info, dict):
        return None
    info = cast(dict[str, Any], info)
    conversation_id = info.get("id")
    if type(conversation_id) is not int or "parent" in info or "owner" in info:
        return None
    return conversation_id


class RemoteConversationClient:
    """The root conversation of a session worker, as the TUI app sees it.

    Create one, put :meth:`facet` in the TUI process's facet host (whose service source is the
    worker's socket) and give the client to :class:`~coding_agent.tui.CodingAgentApp`.
    :attr:`attached` tells whether a live conversation instance is followed right now;
    :meth:`wait_attached` / :meth:`wait_detached` let tests and the supervisor wait for it.
    """

    def __init__(self, session: SessionInfo) -> None:
        self._session = session
        self._relay = ViewRelay()
        self._current: Any = None
        self._current_id: int | None = None
        self._attached = anyio.Event()
        self._detached = anyio.Event()
        self._detached.set()
        self.attachments = 0
        """How many times a conversation instance was followed (2 after one reconnect)."""

    # -- ConversationClient ----------------------------------------------------------------
    @property
    def view(self) -> ReplicatedState:
        """The followed root conversation's view (``None`` while the worker is unavailable)."""
        # ViewRelay takes synchronous listeners only (all the app uses), a narrower signature
        # than the protocol's; the relay is the state the app follows.
        return cast(ReplicatedState, self._relay)

    @property
    def session(self) -> SessionInfo:
        return self._session

    async def send(self, text: str, mode: SendMode, ctx: Context) -> int:
        """Admit ``text``; a ``prompt`` that races a starting turn becomes a follow-up."""
        result = await self._instance().send({"content": text, "whenBusy": _WHEN_BUSY[mode]}, ctx)
        return cast(int, result)

    async def abort(self, ctx: Context) -> None:
        await self._instance().abort(ctx)

    async def input_abort(self, input_id: int, ctx: Context) -> InputAbortResult:
        return cast(InputAbortResult, await self._instance().input_abort(input_id, ctx))

    # -- more of the conversation (for slash commands) ---------------------------------------
    async def collapse(self, instructions: str | None, ctx: Context) -> int:
        """Start a manual compaction; returns its task id."""
        return cast(int, await self._instance().collapse(instructions, ctx))

    async def reset(self, ctx: Context) -> None:
        """Start a fresh context in the same conversation."""
        await self._instance().reset(None, ctx)

    async def config_set(self, patch: dict[str, Any], ctx: Context) -> None:
        """Set conversation config keys (for example ``model``)."""
        await self._instance().config_set(patch, ctx)

    # -- attachment --------------------------------------------------------------------------
    @property
    def attached(self) -> bool:
        """True while a live root conversation instance is followed."""
        return self._current is not None

    async def wait_attached(self) -> None:
        """Return once a live root conversation instance is followed."""
        await self._attached.wait()

    async def wait_detached(self) -> None:
        """Return once no instance is followed (the worker went away)."""
        await self._detached.wait()

    def facet(self) -> Facet:
        """The presentation facet that observes ``pi.conversation`` and feeds this client."""

        @define_facet(CLIENT_FACET_ID)
        def setup(env: FacetEnvironment) -> None:
            env.observe(ConversationService, self._observe)

        return setup

    def _instance(self) -> Any:
        current = self._current
        if current is None:
            raise WorkerUnavailable()
        return current

    async def _observe(self, instance: Any, ctx: Context) -> None:
        """One observed conversation instance, for as long as it lives (``ctx`` ends with it)."""
        view = instance.view
        rank = root_rank(view.value)
        if rank is None:
            # Not hydrated yet (or not a root): wait for the first value that says which it is.
            ready = anyio.Event()

            def first(value: Any, ctx: Context, delivery: Delivery) -> None:
                del ctx, delivery
                if value is not None:
                    ready.set()

            unsubscribe = view.subscribe(first)
            try:
                with cancel_scope(ctx):
                    await ready.wait()
            finally:
                unsubscribe()
            if ctx.cancelled:
                return
            rank = root_rank(view.value)
            if rank is None:
                return
        if self._current_id is not None and self._current_id < rank:
            return  # an older root is followed already
        self._current, self._current_id = instance, rank
        self._relay.follow(view)
        self.attachments += 1
        self._detached = anyio.Event()
        self._attached.set()
        try:
            with cancel_scope(ctx):
                await anyio.sleep_forever()
        finally:
            if self._current is instance:
                self._current, self._current_id = None, None
                self._relay.detach()
                self._attached = anyio.Event()
                self._detached.set()


def conversation_client_facet(client: RemoteConversationClient) -> Facet:
    """The facet that feeds ``client`` from the observed ``pi.conversation`` instances."""
    return client.facet()
