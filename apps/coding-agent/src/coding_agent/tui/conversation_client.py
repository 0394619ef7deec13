"""The TUI's :class:`~coding_agent.tui.ConversationClient` over the remote ``pi.conversation``.

The session worker serves one ``pi.conversation`` instance per conversation (keyed by the
conversation id). The TUI process reaches them through a facet host whose service source is the
wire (:func:`chord.wire.connect_service_source`). :func:`conversation_client_facet` is the
presentation facet that *observes* that keyed service and points a
:class:`~coding_agent.tui.conversation.ViewRelay` at the ``view`` of **the branch the session is
on** (the one the user last prompted in, made or switched to, which the worker's status names:
:mod:`coding_agent.following`), or at the conversation chosen with
:meth:`RemoteConversationClient.follow` (``/fork`` follows the new fork). It tells them
apart by each instance's small ``conversation`` identity; a ``view`` is lazy across the wire
(docs/wire.md#lazy-state), so only the followed conversation's view is sent to the TUI.

The facet also reads the worker's status service (``coding-agent.worker``): the models the
worker knows (the ``/model`` picker's list and the footer's context window) and the outcome of
``--dev`` reloads, and the branch the session is on (followed at start).
:meth:`RemoteConversationClient.on_status` passes each status document on.

The wire does the hard part. When the worker goes away every observed instance's task is
cancelled (its facade is unavailable), and when the worker is back each conversation reappears as
a fresh observation, hydrated from a snapshot. The facet turns that into what the app expects:
the relay :meth:`~coding_agent.tui.conversation.ViewRelay.detach`\\ es (the app shows "unavailable")
and then :meth:`~coding_agent.tui.conversation.ViewRelay.follow`\\ s the new instance (a ``hydrate``
delivery: the app rebuilds its transcript from the new baseline).

Actions go to whichever instance is current; with none (the worker is down) they fail at once
with :class:`WorkerUnavailable`, a clear message the app shows as a toast.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from chord import Context, Delivery, ReplicatedState
from coding_agent.contracts import WorkerStatusService
from coding_agent.following import ConversationFollower, root_rank, status_branch
from coding_agent.tui.conversation import InputAbortResult, SendMode, SessionInfo, ViewRelay
from coding_agent.tui.document import model_label
from pico3 import ConversationService

if TYPE_CHECKING:  # start-up time: chord.facets loads as the facet host starts
    from chord import Facet, FacetEnvironment

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


class RemoteConversationClient:
    """The root conversation of a session worker, as the TUI app sees it.

    Create one, put :meth:`facet` in the TUI process's facet host (whose service source is the
    worker's socket) and give the client to :class:`~coding_agent.tui.CodingAgentApp`.
    :attr:`attached` tells whether a live conversation instance is followed right now.
    """

    def __init__(self, session: SessionInfo) -> None:
        self._session = session
        self._relay = ViewRelay()
        self._following = ConversationFollower(self._followed, lambda _: self._relay.detach())
        self._status: dict[str, Any] | None = None
        self._status_listeners: list[Callable[[dict[str, Any]], None]] = []
        self._follow_listeners: list[Callable[[int | None, int | None], None]] = []
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
        """The session facts, with the context window of the model the view names (if known)."""
        ref = model_label(self._relay.value, self._session.model)
        for model in self.models:
            if f"{model.get('provider')}/{model.get('id')}" == ref:
                window = model.get("contextWindow")
                if type(window) is int and window > 0:
                    return replace(self._session, context_window=window)
        return self._session

    async def send(
        self,
        text: str | list[dict[str, Any]],
        mode: SendMode,
        ctx: Context,
        options: Mapping[str, Any] | None = None,
    ) -> int:
        """Admit ``text`` (a string, or text and image blocks); a ``prompt`` that races a
        starting turn becomes a follow-up. ``options``: more members of the send (a command's
        ``model`` and ``allow``, for the turn it starts)."""
        sent = {**(options or {}), "content": text, "whenBusy": _WHEN_BUSY[mode]}
        result = await self._instance().send(sent, ctx)
        return cast(int, result)

    async def abort(self, ctx: Context) -> None:
        await self._instance().abort(ctx)

    async def input_abort(self, input_id: int, ctx: Context) -> InputAbortResult:
        return cast(InputAbortResult, await self._instance().input_abort(input_id, ctx))

    # -- more of the conversation (for slash commands) ---------------------------------------
    async def compact(self, instructions: str | None, ctx: Context) -> int:
        """``/compact``: start a manual compaction (pico3's ``pi.collapse`` task, through the
        conversation service's ``collapse``); returns its task id."""
        return cast(int, await self._instance().collapse(instructions, ctx))

    async def reset(self, ctx: Context) -> None:
        """Start a fresh context in the same conversation."""
        await self._instance().reset(None, ctx)

    async def config_set(self, patch: dict[str, Any], ctx: Context) -> None:
        """Set conversation config keys (for example ``model``)."""
        await self._instance().config_set(patch, ctx)

    async def fork(self, ctx: Context) -> int:
        """Fork the followed conversation at its latest entry; returns the new conversation id.

        The client does not switch by itself; :meth:`follow` the id to show the fork.
        """
        instance = self._instance()
        view = self._relay.value
        entries = view.get("entries") if isinstance(view, dict) else None
        last = entries[-1] if isinstance(entries, list) and entries else None
        at = last.get("id") if isinstance(last, dict) else None
        return cast(int, await instance.fork(at if type(at) is int else "start", {}, ctx))

    def follow(self, conversation_id: int | None) -> None:
        """Show conversation ``conversation_id`` (``None``: the root) as soon as it is live.

        The choice survives a worker restart: the client re-follows it when it reappears.
        Every :meth:`on_follow` listener hears of the switch (the branch left, the new one).
        """
        following = self._following
        previous = following.current_id if following.target is None else following.target
        following.target = conversation_id
        following.choose()
        if conversation_id != previous:
            for listener in list(self._follow_listeners):
                listener(previous, conversation_id)

    def on_follow(self, listener: Callable[[int | None, int | None], None]) -> Callable[[], None]:
        """Call ``listener(previous, new)`` on every :meth:`follow` that switches the
        conversation (``/fork``, ``/tree``, ``/branch``: Ctrl+B returns along them); returns
        the remover."""
        self._follow_listeners.append(listener)

        def remove() -> None:
            if listener in self._follow_listeners:
                self._follow_listeners.remove(listener)

        return remove

    def switch_session(self, session: SessionInfo) -> None:
        """Another session's worker serves the TUI from now on (``/resume``): new session
        facts, its status awaited, then the branch it is on followed as soon as it is live."""
        self._session = session
        self._following.target = None
        self._following.forget_home()
        self._status = None
        self._following.choose()

    @property
    def conversation_id(self) -> int | None:
        """The id of the conversation followed right now."""
        return self._following.current_id

    # -- the worker's status -----------------------------------------------------------------
    @property
    def status(self) -> dict[str, Any] | None:
        """The newest ``coding-agent.worker`` status document (``None`` before the first)."""
        return self._status

    @property
    def unconfigured(self) -> dict[str, str]:
        """The providers the worker has no credentials for, with why (naming the key to set)."""
        found = self._status.get("unconfigured") if self._status is not None else None
        if not isinstance(found, dict):
            return {}
        return {str(k): str(v) for k, v in found.items()}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]

    @property
    def any_model(self) -> list[str]:
        """The providers that take ids they do not list (an OpenAI-compatible server)."""
        found = self._status.get("anyModel") if self._status is not None else None
        return [str(name) for name in found] if isinstance(found, list) else []  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]

    @property
    def models(self) -> list[dict[str, Any]]:
        """The models the worker knows: ``{"provider", "id", "contextWindow"}`` each."""
        models = self._status.get("models") if self._status is not None else None
        if not isinstance(models, list):
            return []
        return [cast(dict[str, Any], m) for m in cast(list[Any], models) if isinstance(m, dict)]

    def on_status(self, listener: Callable[[dict[str, Any]], None]) -> Callable[[], None]:
        """Call ``listener(document)`` with every status document; returns unsubscribe."""
        self._status_listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._status_listeners:
                self._status_listeners.remove(listener)

        return unsubscribe

    def _status_changed(self, value: Any, ctx: Context, delivery: Delivery) -> None:
        del ctx, delivery
        if not isinstance(value, dict):
            return
        self._status = cast(dict[str, Any], value)
        if self._status.get("sessionId") in (None, self._session.session_id):  # not a stale one
            self._following.set_home(status_branch(self._status))
        for listener in list(self._status_listeners):
            listener(self._status)

    # -- attachment --------------------------------------------------------------------------
    @property
    def attached(self) -> bool:
        """True while a live root conversation instance is followed."""
        return self._following.current is not None

    def facet(self) -> Facet:
        """The presentation facet that observes ``pi.conversation`` and feeds this client."""
        from chord import define_facet  # lazy: see the TYPE_CHECKING import above

        @define_facet(CLIENT_FACET_ID)
        def setup(env: FacetEnvironment) -> None:
            status = env.use(WorkerStatusService)
            env.observe(ConversationService, self._following.observe)

            def activate() -> None:
                env.own(status.state.subscribe(self._status_changed))

            env.on_activate(activate)

        return setup

    def _instance(self) -> Any:
        current = self._following.current
        if current is None:
            raise WorkerUnavailable()
        return current

    def _followed(self, instance: Any) -> None:
        self._relay.follow(instance.view)
        self.attachments += 1


def conversation_client_facet(client: RemoteConversationClient) -> Facet:
    """The facet that feeds ``client`` from the observed ``pi.conversation`` instances."""
    return client.facet()
