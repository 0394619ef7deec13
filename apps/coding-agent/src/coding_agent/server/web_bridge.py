"""One browser page's view of a session: a chord wire client of the worker, in the server.

The page (:mod:`.web`, the files in ``web_static/``) does not speak the chord wire itself: the
wire's path-compressed ops, lazy members and keyed instances would have to be re-implemented in
JavaScript. Instead the server attaches to the session worker exactly as the TUI does (a facet
host whose service source is the worker's socket, reconnecting with backoff, the worker
restarted on demand) and turns what it replicates into a few plain JSON messages, one per
WebSocket text frame:

* ``{"type": "view", "reset": true, "entries": [...], "rest": {...}}`` — a fresh baseline of the
  followed conversation's ``ConversationView`` (docs/design/view.md#shape): its entries, and
  every other section (``turn``, ``tasks``, ``inbox``, ``config``, ``plugins``, …) in ``rest``;
* ``{"type": "view", "keep": N, "entries": [...], "rest": {...}}`` — the next revision: the
  first ``N`` entries the page holds are unchanged, the rest of the transcript is ``entries``.
  The replica is copy-on-write, so an unchanged entry is the *same* object and the comparison
  is by identity (a streamed token sends the ``turn`` section and no entry at all);
* ``{"type": "view", "view": null}`` — the worker is unavailable (restarting); the page keeps
  what it shows, greyed, until the next ``reset``;
* ``{"type": "dialogs", "dialogs": [{"key", "kind": "approval"|"question", "request"}]}`` —
  every open approval and question dialog (their ``request`` as the features replicate it);
* ``{"type": "reply", "id", "ok", "result"|"error"}`` — the answer to one of the page's requests.

The page's requests (``{"type", "id", ...}``): ``send`` (``text``, ``mode``: ``prompt``,
``steer``, ``followUp``), ``abort``, ``decide`` (``key``, ``decision``: an approval's
``{"decision": "allow"|"deny", ...}``), ``submit`` (``key``, ``response``: a question's
``{"outcome", "answer"?}``), ``branches`` (the session tree's branches) and ``follow``
(``conversation``: switch to that branch). The page starts on the branch the session is on (the
one the user last prompted in, made or switched to; :mod:`coding_agent.following`). Each goes to the same services the TUI calls, on the
same worker, so every other client sees the result in committed state.

Views are sent as fast as the page takes them and no faster: a view change only marks the page
dirty, and one sender task sends the newest revision whenever the previous frame is written (a
burst of tokens to a slow page becomes one frame).
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import Any, cast

import anyio
import anyio.abc
import msgspec

from chord import (
    Context,
    Delivery,
    FacetEnvironment,
    FrameConnection,
    cancel_scope,
    connect_service_source,
    create_facet_host,
    define_facet,
)
from coding_agent.contracts import (
    APPROVAL_DIALOGS,
    QUESTION_DIALOGS,
    SessionTreeService,
    WorkerStatusService,
)
from coding_agent.following import ConversationFollower, status_branch
from pico3 import ConversationService

__all__ = ["PageBridge", "PageError"]

_WHEN_BUSY = {"prompt": "followUp", "steer": "steer", "followUp": "followUp"}
_encode = msgspec.json.Encoder().encode


class PageError(Exception):
    """A page's request that cannot be done; ``code`` and the message go back in its reply."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class PageBridge:
    """The worker's replicated state for one page (see the module docstring).

    ``dial`` connects to the session's worker (starting it when none runs); ``send`` writes one
    text frame to the page. :meth:`run` serves until cancelled; :meth:`handle` answers one of the
    page's requests.
    """

    def __init__(
        self,
        dial: Callable[[], Awaitable[FrameConnection]],
        send: Callable[[bytes], Awaitable[None]],
    ) -> None:
        self._dial = dial
        self._send = send
        self._following = ConversationFollower(self._followed, self._lost)
        self._unfollow: Callable[[], None] | None = None
        self._view: Any = None
        self._reset = True  # the next view frame is a fresh baseline
        self._shown = False  # the page holds a view
        self._sent: list[Any] = []
        self._dialogs: dict[str, tuple[str, Any, Any]] = {}  # key -> (kind, facade, request)
        self._keys = itertools.count(1)
        self._tree: Any = None
        self._dirty = anyio.Event()
        self._dialogs_dirty = True

    # -- running -------------------------------------------------------------------------------
    async def run(self) -> None:
        """Attach to the worker and keep the page up to date until cancelled."""
        async with anyio.create_task_group() as group:
            source = connect_service_source(self._dial, task_group=group)
            try:
                async with create_facet_host([self._facet()], service_sources=[source]):
                    await self._pump()
            finally:
                with anyio.CancelScope(shield=True):
                    await source.aclose()
                group.cancel_scope.cancel()

    async def _pump(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty = anyio.Event()
            if self._dialogs_dirty:
                self._dialogs_dirty = False
                await self._send(self._dialogs_message())
            message = self._view_message()
            if message is not None:
                await self._send(message)

    def _mark(self) -> None:
        self._dirty.set()

    # -- what the page is sent -------------------------------------------------------------------
    def _view_message(self) -> bytes | None:
        """The frame that brings the page from what it holds to the newest view (``None``: it
        holds it already)."""
        value = self._view
        if value is None:
            if not self._shown:
                return None  # nothing shown, or the page was told already
            self._shown, self._reset, self._sent = False, True, []
            return _encode({"type": "view", "view": None})
        entries = value.get("entries")
        entries = cast(list[Any], entries) if isinstance(entries, list) else []
        rest = {key: item for key, item in value.items() if key not in ("entries", "commit")}
        if self._reset or not self._shown:
            self._reset, self._shown, self._sent = False, True, list(entries)
            return _encode({"type": "view", "reset": True, "entries": entries, "rest": rest})
        sent, keep = self._sent, 0
        limit = min(len(sent), len(entries))
        while keep < limit and sent[keep] is entries[keep]:
            keep += 1
        self._sent = list(entries)
        return _encode({"type": "view", "keep": keep, "entries": entries[keep:], "rest": rest})

    def _dialogs_message(self) -> bytes:
        dialogs = [
            {"key": key, "kind": kind, "request": request}
            for key, (kind, _, request) in self._dialogs.items()
        ]
        return _encode({"type": "dialogs", "dialogs": dialogs})

    # -- what the page asks ---------------------------------------------------------------------
    async def handle(self, request: dict[str, Any], ctx: Context) -> Any:
        """Do one of the page's requests; returns its result (JSON) or raises :class:`PageError`."""
        kind = request.get("type")
        if kind == "send":
            text, mode = request.get("text"), request.get("mode", "prompt")
            if not isinstance(text, str) or not text.strip() or mode not in _WHEN_BUSY:
                raise PageError("invalid_argument", "send needs a text and a mode")
            args = {"content": text, "whenBusy": _WHEN_BUSY[mode]}
            return await self._instance().send(args, ctx)
        if kind == "abort":
            await self._instance().abort(ctx)
            return None
        if kind in ("decide", "submit"):
            found = self._dialogs.get(str(request.get("key")))
            expected = "approval" if kind == "decide" else "question"
            if found is None or found[0] != expected:
                raise PageError("not_found", "that dialog is no longer open (answered elsewhere?)")
            answer = request.get("decision" if kind == "decide" else "response")
            if not isinstance(answer, dict):
                raise PageError("invalid_argument", f"{kind} needs an answer object")
            answer = {**cast(dict[str, Any], answer), "by": "web"}
            if kind == "decide":
                await found[1].decide(answer, ctx)
            else:
                await found[1].submit(answer, ctx)
            return None
        if kind == "branches":
            outline = await self._tree_service().outline(ctx)
            return {
                "current": self._following.current_id,
                "branches": [
                    {"id": c["id"], "number": c["number"], "summary": c.get("summary")}
                    for c in outline.get("conversations", [])
                ],
            }
        if kind == "follow":
            conversation = request.get("conversation")
            if type(conversation) is not int:
                raise PageError("invalid_argument", "follow needs a conversation id")
            await self._tree_service().visit(conversation, ctx)  # raises for no such branch
            self._following.target = conversation
            self._following.choose()
            return None
        raise PageError("invalid_request", f"unknown request type {kind!r}")

    def _instance(self) -> Any:
        current = self._following.current
        if current is None:
            raise PageError("unavailable", "the session worker is unavailable (reconnecting)")
        return current

    def _tree_service(self) -> Any:
        if self._tree is None:
            raise PageError("unavailable", "the session worker is unavailable (reconnecting)")
        return self._tree

    # -- the facet -------------------------------------------------------------------------------
    def _facet(self) -> Any:
        def setup(env: FacetEnvironment) -> None:
            self._tree = env.use(SessionTreeService)
            status = env.use(WorkerStatusService)  # names the branch the session is on
            env.observe(ConversationService, self._following.observe)
            env.observe(APPROVAL_DIALOGS, self._dialog("approval"))
            env.observe(QUESTION_DIALOGS, self._dialog("question"))

            def on_status(value: Any, ctx: Context, delivery: Delivery) -> None:
                del ctx, delivery
                if isinstance(value, dict):
                    self._following.set_home(status_branch(value))

            def activate() -> None:
                env.own(status.state.subscribe(on_status))

            env.on_activate(activate)

        return define_facet("@coding-agent/web-page", setup)

    def _dialog(self, kind: str) -> Callable[[Any, Context], Awaitable[None]]:
        async def observe(dialog: Any, ctx: Context) -> None:
            key = f"d{next(self._keys)}"
            self._dialogs[key] = (kind, dialog, dialog.request.value)
            self._dialogs_dirty = True
            self._mark()
            try:
                with cancel_scope(ctx):
                    await anyio.sleep_forever()
            finally:
                del self._dialogs[key]
                self._dialogs_dirty = True
                self._mark()

        return observe

    def _lost(self, instance: Any) -> None:
        del instance
        self._stop_following()
        self._view = None
        self._mark()

    def _followed(self, instance: Any) -> None:
        self._stop_following()

        def changed(value: Any, ctx: Context, delivery: Delivery) -> None:
            del ctx
            if self._following.current is not instance:
                return
            if delivery.kind == "hydrate" or value is None:
                self._reset, self._sent = True, []
            self._view = value
            self._mark()

        self._reset, self._sent = True, []
        self._unfollow = instance.view.subscribe(changed)

    def _stop_following(self) -> None:
        unfollow, self._unfollow = self._unfollow, None
        if unfollow is not None:
            unfollow()
