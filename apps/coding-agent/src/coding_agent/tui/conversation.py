"""What the TUI needs from a conversation: a replicated view and four actions.

The presentation layer never talks to the harness. It renders one JSON document, the pico3
``ConversationView`` (docs/design/view.md#shape), and sends user intent back through a
:class:`ConversationClient`. The real client wraps the chord ``ConversationService`` served by the
session worker; tests and benchmarks use a client backed by a local ``replicated_state``.

The view is any chord :class:`~chord.state.ReplicatedState`. Its value is the ``ConversationView``
dict, or ``None`` while the worker is unavailable (a cold replica). Deliveries follow chord's
contract: a ``hydrate`` delivery means "this is a fresh baseline, forget what you had" (first
subscription, reconnect, respawned worker), an ``update`` delivery is the next revision of the
same document. A client that learns the worker went away delivers a ``hydrate`` with ``None``.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from chord import BACKGROUND, Context, Delivery, Listener, ReplicatedState

__all__ = ["ConversationClient", "InputAbortResult", "SendMode", "SessionInfo", "ViewRelay"]

_logger = logging.getLogger("coding_agent.tui")

SendMode = Literal["prompt", "steer", "followUp"]
"""``prompt`` when idle; while a turn runs, ``steer`` (Enter) or ``followUp`` (Alt+Enter)."""

InputAbortResult = Literal["aborted", "already_placed", "not_found"]
"""The outcome of cancelling a queued input (docs/design/harness.md#public-api ``input_abort``)."""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """Facts about the session that are not part of the conversation view.

    ``model`` is the display name used until the view's ``config.model`` says otherwise;
    ``context_window`` (tokens) turns the last request's usage into the footer's context %.
    """

    session_id: str
    cwd: str
    model: str | None = None
    context_window: int | None = None


class ConversationClient(Protocol):
    """One watched conversation as the TUI sees it."""

    @property
    def view(self) -> ReplicatedState:
        """The replicated ``ConversationView`` (``None`` while the worker is unavailable)."""
        ...

    @property
    def session(self) -> SessionInfo:
        """Session facts shown in the footer."""
        ...

    async def send(self, text: str | list[dict[str, Any]], mode: SendMode, ctx: Context) -> int:
        """Admit user text (or text and image blocks); returns the input id (queued or placed)."""
        ...

    async def abort(self, ctx: Context) -> None:
        """Abort the running turn (queued steer/follow-up items are dropped by the harness)."""
        ...

    async def input_abort(self, input_id: int, ctx: Context) -> InputAbortResult:
        """Cancel one queued input."""
        ...


class ViewRelay:
    """A :class:`~chord.state.ReplicatedState` that follows one source state at a time.

    A client keeps one relay for the lifetime of the UI and points it at whatever currently
    serves the conversation: :meth:`follow` a state (the first delivery from it is forwarded as a
    ``hydrate``: a new baseline), :meth:`detach` when the worker goes away (listeners get a
    ``hydrate`` with ``None``). Listeners must be synchronous; one that raises is logged and
    the others still run.
    """

    def __init__(self) -> None:
        self._value: Any = None
        self._sequence = 0
        self._listeners: list[Listener] = []
        self._unfollow: Callable[[], None] | None = None
        self._source = 0

    @property
    def value(self) -> Any:
        """The followed state's value, or ``None`` while detached."""
        return self._value

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Follow the relay; a current value is delivered at once as a ``hydrate``."""
        self._listeners.append(listener)
        if self._value is not None:
            self._call(listener, self._value, BACKGROUND, Delivery("hydrate", self._sequence))

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def follow(self, state: ReplicatedState) -> None:
        """Switch to ``state``; its current value reaches listeners as a ``hydrate``.

        A cold state (value ``None``) makes the relay unavailable until the state hydrates.
        """
        self._stop_following()
        self._source += 1
        source = self._source
        first = [True]

        def forward(value: Any, ctx: Context, delivery: Delivery) -> None:
            if source != self._source:
                return
            kind = "hydrate" if first[0] or value is None else delivery.kind
            first[0] = False
            self._publish(value, ctx, kind)

        self._unfollow = state.subscribe(forward)
        if first[0] and state.value is None:  # a cold state: unavailable until it hydrates
            self._publish(None, BACKGROUND, "hydrate")

    def detach(self) -> None:
        """Stop following: the worker is unavailable (listeners get ``None``)."""
        self._stop_following()
        self._source += 1
        self._publish(None, BACKGROUND, "hydrate")

    def _stop_following(self) -> None:
        unfollow, self._unfollow = self._unfollow, None
        if unfollow is not None:
            unfollow()

    def _publish(self, value: Any, ctx: Context, kind: Literal["hydrate", "update"]) -> None:
        self._value = value
        self._sequence += 1
        delivery = Delivery(kind, self._sequence)
        for listener in list(self._listeners):
            self._call(listener, value, ctx, delivery)

    @staticmethod
    def _call(listener: Listener, value: Any, ctx: Context, delivery: Delivery) -> None:
        try:
            result = listener(value, ctx, delivery)
        except Exception:
            _logger.exception("view listener failed")
            return
        if result is not None:
            if inspect.iscoroutine(result):
                result.close()
            _logger.error("view listeners must be synchronous; %r returned an awaitable", listener)
