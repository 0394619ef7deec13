"""The transcript: entries rendered incrementally, keyed by entry id, plus the live turn.

Rendering follows the view document, never events. Entry ids only grow and the active
transcript only changes by appending or by dropping a prefix (a head after compaction), so a
revision is reconciled by looking at its ends: widgets of entries older than the new first entry
are removed, entries newer than the last rendered one are mounted. Anything else (a different
document) is a *rebaseline*: :meth:`Transcript.rebuild` re-renders from scratch.

**Following the bottom.** The transcript is *anchored*: while it follows the bottom, new text
keeps the last line in view. Scrolling up (mouse, PageUp, Home, Ctrl+Up) leaves that mode, so
a reply arriving meanwhile does not yank the view; reaching the bottom again (End, PageDown or
Ctrl+Down to the end) returns to it (:attr:`Transcript.following`). Ctrl+Up/Ctrl+Down step
message by message (:meth:`Transcript.step`).

Only the tail is rendered: the newest :data:`TAIL` entries, with a "load earlier" button that
mounts the previous page on demand, so a 10,000-entry session paints as fast as a short one.

The live part of the view (``turn``) is rendered after the entries: ``turn.message`` in a live
:class:`~coding_agent.tui.widgets.messages.AssistantView` fed through Markdown streams, and the
``turn.tools`` slots on the tool cards of the newest assistant message. When the stored
``pi.assistant`` entry arrives, the live widget *becomes* that entry's widget, so the streamed
text is never parsed again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from textual import on
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Button

from coding_agent.tui.widgets.collapsible import QuietCollapsible
from coding_agent.tui.widgets.messages import AssistantView, entry_widget
from coding_agent.tui.widgets.tools import ToolCard
from coding_agent.tui.widgets.user_message import UserMessage
from pico3 import AssistantEntry, ToolResultEntry, View, ViewEntry, ViewTurn

__all__ = ["TAIL", "Transcript"]

TAIL = 100
"""Entries rendered at first paint and per "load earlier" page."""


class Transcript(VerticalScroll):
    """The scrolling conversation."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._entries: Sequence[ViewEntry] = ()
        self._first = 0  # index in ``_entries`` of the first rendered entry
        self._widgets: dict[int, Widget | None] = {}
        self._order: list[int] = []
        self._cards: dict[str, ToolCard] = {}
        self._live: AssistantView | None = None
        self._turn: ViewTurn | None = None
        self._more = self._load_button()
        self._more.display = False
        self.fold_pastes: Callable[[str], str] = lambda text: text
        """Puts the pastes the editor folded back behind their markers in a user message
        (the app sets it to its editor's ``pastes.fold``)."""
        self.expand_key: str | None = None
        """The key that expands tool output and big messages, as a hint names it."""

    # -- queries (tests, benchmarks) ---------------------------------------------------------
    @property
    def rendered_ids(self) -> list[int]:
        """Ids of the entries currently rendered (shown or hidden), oldest first."""
        return list(self._order)

    @property
    def live(self) -> AssistantView | None:
        """The streaming assistant message, while one is shown."""
        return self._live

    def widget_for(self, entry_id: int) -> Widget | None:
        return self._widgets.get(entry_id)

    def card(self, call_id: str) -> ToolCard | None:
        return self._cards.get(call_id)

    # -- scrolling ---------------------------------------------------------------------------
    @property
    def following(self) -> bool:
        """True while the view follows the bottom (new content stays in view)."""
        released = bool(getattr(self, "_anchor_released", False))
        return self.is_anchored and (not released or self.scroll_y >= self.max_scroll_y)

    def follow(self) -> None:
        """Go to the bottom and follow it again."""
        self.anchor()

    def page(self, direction: int) -> None:
        """PageUp (``-1``) / PageDown (``1``); paging up leaves follow mode. Each key moves from
        where the previous one is taking it (``scroll_target_y``) and at once, so keys read in
        one burst (a held key, a loaded machine) each count a page."""
        page = max(1, self.scrollable_content_region.height)
        target = self.scroll_target_y
        if direction < 0:
            self.scroll_to(y=max(0, target - page), animate=False, immediate=True)
        elif target + page >= self.max_scroll_y:
            self.follow()
        else:
            self.scroll_to(y=target + page, animate=False, immediate=True)

    def home(self) -> None:
        """The top of what is rendered (leaves follow mode)."""
        self.scroll_home(animate=False)

    def step(self, direction: int) -> None:
        """Ctrl+Up (``-1``): the previous message's top at the top of the view; Ctrl+Down
        (``1``): the next one's (past the last, follow the bottom again)."""
        top = round(self.scroll_y)
        starts = sorted({child.virtual_region.y for child in self.children if child.display})
        if direction < 0:
            earlier = [y for y in starts if y < top]
            self.scroll_to(y=earlier[-1] if earlier else 0, animate=False)
            return
        later = [y for y in starts if y > top]
        if not later or later[0] >= self.max_scroll_y:
            self.follow()
        else:
            self.scroll_to(y=later[0], animate=False)

    # -- rendering ---------------------------------------------------------------------------
    def on_mount(self) -> None:
        self.anchor()

    async def rebuild(self, view: View) -> None:
        """Render ``view`` from scratch: the tail of its entries, then its live turn."""
        entries = view.entries
        if self._live is not None:
            await self._live.stop_streams()
        self._live, self._turn = None, None
        self._widgets.clear()
        self._order.clear()
        self._cards.clear()
        self._entries = entries
        self._first = max(0, len(entries) - TAIL)
        widgets = self._build(entries[self._first :])
        with self.app.batch_update():
            await self.remove_children()
            self._more = self._load_button()  # a removed widget is never mounted again
            self._more.display = self._first > 0
            await self.mount(self._more)
            if widgets:
                await self.mount_all(widgets)
        await self._sync_turn(view, ())
        self.follow()

    async def update(self, view: View) -> bool:
        """Reconcile with the next revision; ``False`` when a rebuild is needed instead."""
        entries = view.entries
        added: Sequence[ViewEntry] = ()
        if entries is not self._entries:
            last = self._order[-1] if self._order else 0
            if entries and entries[-1].id < last:
                return False
            start = len(entries)
            while start > 0 and entries[start - 1].id > last:
                start -= 1
            added = entries[start:]
            first_id = entries[0].id if entries else last + 1
            await self._drop_before(first_id)
            self._entries = entries
            self._first = max(0, len(entries) - len(self._order) - len(added))
            self._more.display = self._first > 0
        await self._sync_turn(view, added)
        return True

    async def load_earlier(self) -> int:
        """Mount the previous page of entries above the rendered ones; returns how many."""
        if self._first == 0:
            return 0
        start = max(0, self._first - TAIL)
        page = self._entries[start : self._first]
        ids = [entry.id for entry in page]
        widgets = self._build(page, prepend=True)
        self._order[:0] = ids
        self._first = start
        with self.app.batch_update():
            if widgets:
                await self.mount_all(widgets, after=self._more)
            self._more.display = self._first > 0
        return len(page)

    @on(Button.Pressed, "#load-earlier")
    async def _load_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        await self.load_earlier()

    def set_tools_collapsed(self, collapsed: bool) -> None:
        """Collapse or expand every tool output, every big user message (a folded paste) and
        every collapsed summary line (a compaction summary, a handoff, an imported line the
        user did not type, such as ``(expanded /review prompt)``), as Claude Code's and pi's
        Ctrl+O do; a view following the bottom keeps following."""
        following = self.following
        for card in self.query(ToolCard):
            card.set_collapsed(collapsed)
        for message in self.query(UserMessage):
            message.set_expanded(not collapsed)
        for summary in self.query(".summary").results(QuietCollapsible):
            summary.collapsed = collapsed
        if following:
            self.call_after_refresh(self.follow)

    # -- internals ---------------------------------------------------------------------------
    @staticmethod
    def _load_button() -> Button:
        return Button("▲ load earlier messages", id="load-earlier", classes="load-earlier")

    def _build(self, entries: Sequence[ViewEntry], *, prepend: bool = False) -> list[Widget]:
        """Widgets for ``entries`` (a tool result joins its call's card when one is shown)."""
        widgets: list[Widget] = []
        for entry in entries:
            entry_id = entry.id
            widget = self._widget_for_entry(entry)
            self._widgets[entry_id] = widget
            if not prepend:
                self._order.append(entry_id)
            if widget is not None:
                widgets.append(widget)
        return widgets

    def _widget_for_entry(self, entry: ViewEntry) -> Widget | None:
        if isinstance(entry, ToolResultEntry):
            message = entry.message
            call_id = message.tool_call_id if message is not None else None
            card = self._cards.get(call_id) if call_id else None
            if card is not None:
                card.set_result(entry)
                return None
        widget = entry_widget(entry, fold_pastes=self.fold_pastes, expand_key=self.expand_key)
        if isinstance(widget, AssistantView):
            self._register_cards(widget)
        return widget

    def _register_cards(self, view: AssistantView) -> None:
        """Index an assistant entry's cards so its results (and live slots) find them."""
        self._cards.update(view.cards)

    async def _drop_before(self, first_id: int) -> None:
        drop = 0
        while drop < len(self._order) and self._order[drop] < first_id:
            drop += 1
        if not drop:
            return
        doomed = self._order[:drop]
        del self._order[:drop]
        widgets = [w for w in (self._widgets.pop(i, None) for i in doomed) if w is not None]
        for call_id, card in list(self._cards.items()):
            if any(card is w or card in w.walk_children() for w in widgets):
                del self._cards[call_id]
        if widgets:
            await self.remove_children(widgets)

    async def _sync_turn(self, view: View, added: Sequence[ViewEntry]) -> None:
        turn = view.turn
        message = turn.message if turn is not None else None
        live = self._live
        # The live message turns into the first new assistant entry (or is dropped).
        if live is not None and message is None:
            self._live = None
            adopted = False
            for index, entry in enumerate(added):
                if isinstance(entry, AssistantEntry):
                    await self._mount_entries(added[:index], before=live)
                    await self._adopt(live, entry)
                    await self._mount_entries(added[index + 1 :])
                    adopted = True
                    break
            if not adopted:
                await live.stop_streams()
                await live.remove()
                await self._mount_entries(added)
        else:
            await self._mount_entries(added, before=live)
        if message is not None:
            if self._live is None:
                self._live = AssistantView(None, live=True)
                self._live.add_class("live")
                await self.mount(self._live)
            await self._live.sync(message)
            for call_id, card in self._live.cards.items():
                self._cards.setdefault(call_id, card)
        if turn is not self._turn:
            self._turn = turn
            for slot in turn.tools if turn is not None else ():
                card = self._cards.get(slot.call_id)
                if card is not None:
                    card.set_slot(slot)

    async def _mount_entries(
        self, entries: Sequence[ViewEntry], *, before: Widget | None = None
    ) -> None:
        if not entries:
            return
        widgets = self._build(entries)
        if widgets:
            if before is not None and before.parent is self:
                await self.mount_all(widgets, before=before)
            else:
                await self.mount_all(widgets)

    async def _adopt(self, live: AssistantView, entry: AssistantEntry) -> None:
        message = entry.message
        if message is not None:
            await live.finalize(message)
        else:
            await live.stop_streams()
        live.live = False
        live.remove_class("live")
        if entry.display_only:
            live.add_class("display-only")
        if entry.data.reason == "aborted":
            live.mark_interrupted(entry.data.stopped_by)
        entry_id = entry.id
        self._widgets[entry_id] = live
        self._order.append(entry_id)
        for call_id, card in live.cards.items():
            self._cards[call_id] = card
