"""The conversation view: one JSON document per watched conversation, changed by envelopes.

A client never sees kernel state. It sees a rendering-shaped document (docs/design/view.md#shape)::

    {conversation, entries, config, inbox, tasks, plugins}

and, after every commit that changes anything visible to the conversation, exactly one
:class:`Envelope` ``{revision, ops, events}``: the ``chord.delta`` ops that transform the view,
and the named events the commit emitted. Ops alone determine the replica; events annotate.

How it is built. The kernel keeps one tracked view per conversation that has at least one watch
(built on the line at the first watch, dropped with the last). After each commit it recomputes
the changed parts and writes them *in place* through a tracked proxy, so the recorder produces
minimal ops: unchanged branches produce nothing, ``entries`` only ever sees splices (append, or
a head's "drop everything before ``head``" followed by the append), a string that grew records
an append. The same envelope object goes to every watch of the conversation.

What never appears: raw namespace slices (only a namespace's ``view`` projection, re-run when
its merged slice changes), slot memos, task records, documents, storage seqs, section seeds.

Watches (docs/design/view.md#watch): :meth:`ViewRegistry.watch` captures a snapshot of its own
(the view keeps only its entries' ids; a snapshot reads the entries from storage, which hands
out fresh clones, so no two holders share an entry object) and subscribes in one
line operation, so the first envelope is ``revision + 1``. Envelopes that arrive before
:meth:`Watch.start` are buffered (256; overflow closes the watch). A listener that raises closes
only its own watch and is reported; it never fails the writer. ``stop`` is idempotent.

Why one module: the view registry, its per-conversation tracked view and the watches are one
mechanism: the registry writes the view in place after each commit and hands the same envelope to
every watch whose snapshot it captured in the same line operation, so the revision numbering that
ties snapshots and envelopes together lives in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET

from chord.context import Context
from chord.delta.apply import apply
from chord.json import copy_json, equal_json
from pico3.kernel.errors import Closed, UnknownConversation
from pico3.kernel.namespaces import Namespace, SliceDoc, merged_slice
from pico3.kernel.proxy import Membrane, Op, Recorder, TrackedDict, TrackedList
from pico3.kernel.tx.authority import VIEW_HIDDEN_KINDS
from pico3.session_data.config import resolve_config
from pico3.session_data.json_shapes import conversation_json, entry_json
from pico3.storage.base import Storage
from pico3.storage.records import DocRef, Entry, Task

if TYPE_CHECKING:
    from pico3.kernel.core import KernelCore
    from pico3.kernel.tx.batch import Batch

__all__ = ["BUFFER_LIMIT", "Envelope", "Listener", "PendingEnvelope", "ViewRegistry", "Watch"]

BUFFER_LIMIT = 256
"""Envelopes a watch buffers before :meth:`Watch.start`; one more closes the watch."""


class Envelope(msgspec.Struct, frozen=True):
    """One commit's change to one conversation's view."""

    revision: int
    ops: list[Op]
    events: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        """The wire shape ``{revision, ops, events}`` (ops as JSON arrays)."""
        return {
            "revision": self.revision,
            "ops": [_op_json(op) for op in self.ops],
            "events": self.events,
        }


def _op_json(op: Op) -> list[Any]:
    return [list(part) if isinstance(part, tuple) else part for part in op]


Listener = Callable[[Envelope], None]
PendingEnvelope = Callable[[], None]
"""One envelope for one watch, handed over when called, once its commit is durable (not
:class:`chord.Delivery`, the ``hydrate``/``update`` mark chord's listeners receive)."""


@dataclass(eq=False)
class Watch:
    """A subscription to one conversation's view: a snapshot, then envelopes in order."""

    conversation_id: int
    view: dict[str, Any]
    revision: int
    _registry: ViewRegistry
    _listener: Listener | None = None
    _buffer: list[Envelope] = field(default_factory=list[Envelope])
    closed: bool = False
    close_reason: str | None = None

    def start(self, listener: Listener) -> None:
        """Deliver buffered envelopes, then every later one, synchronously, to ``listener``."""
        if self.closed:
            raise Closed(f"watch is closed: {self.close_reason}")
        if self._listener is not None:
            raise RuntimeError("watch already started")
        self._listener = listener
        buffered, self._buffer = self._buffer, []
        for envelope in buffered:
            self._deliver(envelope)

    def stop(self) -> None:
        """Stop delivery (idempotent)."""
        self._close("stopped")

    def _close(self, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        self._buffer = []
        self._registry.remove(self)

    def _deliver(self, envelope: Envelope) -> None:
        if self.closed:
            return
        listener = self._listener
        if listener is None:
            if len(self._buffer) >= BUFFER_LIMIT:
                self._close(f"more than {BUFFER_LIMIT} envelopes buffered before start")
                return
            self._buffer.append(envelope)
            return
        try:
            listener(envelope)
        except Exception as exc:
            self._close(f"listener raised {type(exc).__name__}: {exc}")
            self._registry.report(exc)


class _ConversationView:
    """The tracked view of one conversation and its watches."""

    def __init__(self, conversation_id: int, value: dict[str, Any], entries: list[Entry]) -> None:
        self.conversation_id = conversation_id
        self.value = value  # its ``entries`` stays empty: the entries stay in storage
        # the ids of the entries the view shows, oldest first (for a head's drop, and for a
        # snapshot to read them from storage: the view keeps no copy of its own)
        self.ids: list[int] = [entry.id for entry in entries]
        # ``entries`` is the build's own decode (storage hands out clones) that nothing else
        # holds: the first snapshot takes their shapes instead of reading storage again
        self.fresh: list[dict[str, Any]] | None = [entry_json(entry) for entry in entries]
        self.recorder = Recorder(Membrane())
        self.root = self.recorder.root(value)
        self.revision = 0
        self.watches: list[Watch] = []
        # namespace -> (merged slice, projection or _FAILED, token that projected it)
        self.projections: dict[str, tuple[dict[str, Any], Any, Namespace]] = {}
        # task id -> (the record, the slot it was described with, its status): ``describe``
        # turns record and slot into the status, so it runs again only when one of them changed
        self.statuses: dict[int, tuple[Task, Any, Any]] = {}

    async def snapshot(self, storage: Storage, ctx: Context) -> dict[str, Any]:
        """A copy of the view that shares nothing with it or with another snapshot: every
        section deep-copied, the entries storage's own fresh clones of them (by id)."""
        entries, self.fresh = self.fresh, None
        if entries is None:
            found = await storage.entries(self.ids, ctx)
            entries = [entry_json(found[entry_id]) for entry_id in self.ids]
        return {
            key: entries if key == "entries" else copy_json(section)
            for key, section in self.value.items()
        }


class ViewRegistry:
    """The tracked views of one kernel, by conversation id."""

    def __init__(self, kernel: KernelCore) -> None:
        self._kernel = kernel
        self._views: dict[int, _ConversationView] = {}
        self._stale = False
        kernel.namespaces.on_change = self.mark_stale

    @property
    def active(self) -> bool:
        """True while some conversation is watched (otherwise commits skip the view work)."""
        return bool(self._views)

    def mark_stale(self) -> None:
        """Registrations changed (a namespace came or went): refresh every watched view in
        the next envelope, whatever that commit touches."""
        self._stale = True

    def report(self, error: BaseException) -> None:
        """Route a listener or projection error to the session's reporter."""
        self._kernel.report(error)

    async def watch(self, conversation_id: int, ctx: Context) -> Watch:
        """Capture and subscribe in one line operation."""

        async def capture() -> Watch:
            view = self._views.get(conversation_id)
            if view is None:
                view = await self._build(conversation_id, ctx)
                self._views[conversation_id] = view
            snapshot = await view.snapshot(self._kernel.storage, ctx)
            watch = Watch(conversation_id, snapshot, view.revision, self)
            view.watches.append(watch)
            return watch

        return await self._kernel.on_line(capture, ctx)

    def remove(self, watch: Watch) -> None:
        """Forget a closed watch; drop the view with its last watch."""
        view = self._views.get(watch.conversation_id)
        if view is None or watch not in view.watches:
            return
        view.watches.remove(watch)
        if not view.watches:
            del self._views[watch.conversation_id]

    def close_all(self) -> None:
        """Close every watch (session close)."""
        for view in list(self._views.values()):
            for watch in list(view.watches):
                watch._close("the session closed")  # pyright: ignore[reportPrivateUsage]
        self._views.clear()

    async def _build(self, conversation_id: int, ctx: Context) -> _ConversationView:
        record = self._kernel.conversations.get(conversation_id)
        if record is None:
            raise UnknownConversation(f"conversation {conversation_id} does not exist")
        await self._kernel.conversation_docs(conversation_id, ctx)
        transcript = await self._kernel.transcript(conversation_id, None, ctx)
        value: dict[str, Any] = {
            "conversation": conversation_json(record),
            "entries": [],  # kept in storage, by id (see _ConversationView)
            "config": {},
            "inbox": [],
            "tasks": {},
            "plugins": {},
        }
        view = _ConversationView(conversation_id, value, transcript)
        self._refresh(view)
        view.recorder.take()
        return view

    def after_commit(self, batch: Batch) -> list[PendingEnvelope]:
        """Fold one persisted commit into every affected view; return the deliveries.

        Only the sections the commit can have changed are recomputed: the top-level keys its
        document ops touched (:attr:`Batch.changed_keys`) name them (``turn`` for a streamed
        delta, ``tasks`` for a task's slot, a config key for ``config``, ``plugins`` for a
        namespace slice), and a task record written in the conversation refreshes ``tasks``.
        A whole-document write, or registrations that changed, refresh everything."""
        deliveries: list[PendingEnvelope] = []
        changed = batch.changed_docs  # often empty (a plain write): then no ref is built
        stale = self._stale
        self._stale = False
        keys = batch.changed_keys
        if stale:  # registrations changed (a kind's describe among them): describe again
            for each in self._views.values():
                each.statuses.clear()
        session_plugins = bool(changed) and DocRef.session() in changed
        if stale or session_plugins:
            targets = list(self._views.items())
        else:  # only the conversations this commit wrote to
            affected = set(batch.events) | batch.task_conversations
            affected.update(entry.conversation_id for entry in batch.new_entries)
            affected.update(
                ref.conversation_id
                for ref in changed
                if ref.doc != "session" and type(ref.conversation_id) is int
            )
            views = self._views
            targets = [(cid, views[cid]) for cid in affected if cid in views]
            if len(targets) > 1:
                order = {cid: n for n, cid in enumerate(views)}
                targets.sort(key=lambda item: order[item[0]])
        config_keys = self._kernel.config_keys
        for cid, view in targets:
            new = [entry for entry in batch.new_entries if entry.conversation_id == cid]
            sections: frozenset[str] | set[str]
            sticky_ops: list[Any] | None = None
            if stale:
                sections = _ALL_SECTIONS
            else:
                sections = set()
                if changed:
                    rewindable, sticky = DocRef.rewindable(cid), DocRef.sticky(cid)
                    if rewindable in changed:
                        sections |= _sections(keys.get(rewindable), config_keys)
                    if sticky in changed:
                        sticky_keys = keys.get(sticky)
                        sections |= _sections(sticky_keys, config_keys)
                        if sticky_keys is not None:
                            sticky_ops = batch.doc_ops.get(sticky)
                    if session_plugins:
                        sections.add("plugins")
                if cid in batch.task_conversations:
                    sections.add("tasks")
            events = batch.events.get(cid, [])
            if not new and not sections and not events:
                continue
            shapes = {entry.id: self._fold_entry(view, entry) for entry in new}
            if sections:
                self._refresh(view, sections, sticky_ops)
            ops = view.recorder.take()
            if not ops and not events:
                continue
            view.revision += 1
            envelope = Envelope(
                view.revision, ops, _own_events(events, batch.shared_events, shapes)
            )
            for watch in list(view.watches):
                deliveries.append(_deliver(watch, envelope))
        return deliveries

    def _fold_entry(self, view: _ConversationView, entry: Entry) -> Any:
        """Fold one committed entry into ``entries``; returns the shape the op carries."""
        view.fresh = None  # (never set by now: the first snapshot follows the build at once)
        ops = view.recorder.ops  # the entries' splices come before the sections' ops
        ids = view.ids
        if entry.head is not UNSET:
            drop = 0
            while drop < len(ids) and ids[drop] < entry.head:
                drop += 1
            if drop:
                del ids[:drop]
                ops.append(("p", ("entries",), 0, drop, []))
        # the entry was validated on its way in and storage keeps it: the op carries a copy
        # of its shape (shared with this envelope's entry events), the view only its id
        shape = _DECODE(_ENCODE(entry_json(entry)))
        ops.append(("p", ("entries",), len(ids), 0, [shape]))
        ids.append(entry.id)
        return shape

    def _refresh(
        self,
        view: _ConversationView,
        sections: frozenset[str] | set[str] = frozenset(),
        sticky_ops: list[Any] | None = None,
    ) -> None:
        """Recompute ``sections`` of the view (all of them when empty) and write what differs.

        With ``sticky_ops`` (the commit's ops on the sticky document), ``turn`` is not
        recomputed: those of its ops are replayed on the view (memos left out), which keeps a
        streamed delta O(delta) instead of O(turn)."""
        every = not sections
        documents = self._kernel.documents
        cid = view.conversation_id
        rewindable = documents.get(DocRef.rewindable(cid)) or {}
        sticky = documents.get(DocRef.sticky(cid)) or {}
        root = view.root
        if every or "config" in sections:
            _sync(root, "config", resolve_config(self._kernel.config_keys, rewindable, sticky))
        if every or "inbox" in sections:
            _sync(root, "inbox", copy_json(sticky.get("inbox", [])))
        if every or "tasks" in sections:
            _sync(root, "tasks", self._tasks(view, sticky))
        replayed = sticky_ops is not None and _replay_turn(view, sticky_ops)
        if (every or "turn" in sections) and not replayed:
            _optional(root, "turn", _turn_view(sticky.get("turn")))
        if every or "compaction" in sections:
            _optional(
                root,
                "compaction",
                copy_json(sticky["compaction"]) if "compaction" in sticky else _FAILED,
            )
        if not (every or "plugins" in sections):
            return
        session = documents.get(DocRef.session()) or {}
        docs: dict[SliceDoc, dict[str, Any]] = {
            "rewindable": rewindable,
            "sticky": sticky,
            "session": session,
        }
        projections: dict[str, Any] = {}
        for token in self._kernel.namespaces.live():
            if token.view is None:
                continue
            projected = self._project(view, token, docs)
            if projected is not _FAILED:
                projections[token.name] = projected
        _sync(root, "plugins", projections)

    def _tasks(self, view: _ConversationView, sticky: dict[str, Any]) -> dict[str, Any]:
        """``tasks[id] = {kind, background?, marked?, status}`` for live tasks shown there."""
        conversation_id = view.conversation_id
        slots = sticky.get("tasks")
        out: dict[str, Any] = {}
        cache, view.statuses = view.statuses, {}
        for task in self._kernel.live_tasks(conversation_id):
            if task.kind in VIEW_HIDDEN_KINDS:
                continue
            slot = slots.get(str(task.id)) if type(slots) is dict else None
            if type(slot) is dict:
                slot = {key: value for key, value in slot.items() if key != "memos"}
            else:
                slot = None
            cached = cache.get(task.id)
            if cached is not None and cached[0] is task and equal_json(cached[1], slot):
                status = cached[2]
            else:
                try:
                    status = self._status(task, slot)
                except Exception as exc:  # docs/design/decisions.md#d8-g21: the record leaves the view; the commit stands
                    self.report(exc)
                    continue
                cached = (task, copy_json(slot), status)
            view.statuses[task.id] = cached
            record: dict[str, Any] = {"kind": task.kind}
            if task.background is True:
                record["background"] = True
            if task.abort is True:
                record["marked"] = True
            record["status"] = status
            out[str(task.id)] = record
        return out

    def _status(self, task: Task, slot: dict[str, Any] | None) -> Any:
        describe = self._kernel.describe
        if describe is not None:
            return copy_json(describe(task, copy_json(slot)), ("tasks", str(task.id), "status"))
        if task.checkpoint is not UNSET:
            return {"phase": task.checkpoint.get("phase")}
        return {"phase": task.status}

    def _project(
        self, view: _ConversationView, token: Namespace, docs: dict[SliceDoc, dict[str, Any]]
    ) -> Any:
        merged = merged_slice(token, docs)
        cached = view.projections.get(token.name)
        if cached is not None and cached[2] is token and equal_json(cached[0], merged):
            return cached[1] if cached[1] is _FAILED else copy_json(cached[1])
        assert token.view is not None
        try:
            projected = copy_json(token.view(copy_json(merged)), ("plugins", token.name))
        except Exception as exc:
            # docs/design/decisions.md#d8-g21: the record leaves the view and is reported once; it is re-run (and may
            # come back) only when the slice changes. The commit stands.
            view.projections[token.name] = (merged, _FAILED, token)
            self.report(exc)
            return _FAILED
        view.projections[token.name] = (merged, projected, token)
        return copy_json(projected)


_FAILED: Any = object()
_ALL_SECTIONS = frozenset({"config", "inbox", "tasks", "turn", "compaction", "plugins"})
_KEY_SECTIONS = {
    "inbox": "inbox",
    "tasks": "tasks",
    "turn": "turn",
    "compaction": "compaction",
    "plugins": "plugins",
}
"""The view section each top-level document key feeds (besides config keys)."""


def _sections(keys: set[Any] | None, config_keys: Any) -> frozenset[str] | set[str]:
    """The view sections fed by a document's changed top-level ``keys`` (``None``: all)."""
    if keys is None:
        return _ALL_SECTIONS
    out: set[str] = set()
    for key in keys:
        section = _KEY_SECTIONS.get(key)
        if section is not None:
            out.add(section)
        elif key in config_keys:
            out.add("config")
    return out


_ENCODE = msgspec.json.Encoder().encode
_DECODE = msgspec.json.Decoder().decode
"""A fast deep copy for JSON the kernel already validated (entries): encode once, decode."""


def _turn_view(turn: Any) -> Any:
    """``sticky.turn`` as the view shows it (tool slots without ``memos``), or absent."""
    if type(turn) is not dict:
        return _FAILED
    out = copy_json(turn)
    tools = out.get("tools")
    if type(tools) is list:
        out["tools"] = [
            {k: v for k, v in slot.items() if k != "memos"} if type(slot) is dict else slot
            for slot in tools
        ]
    return out


def _strip_memos(slot: Any) -> Any:
    return {k: v for k, v in slot.items() if k != "memos"} if type(slot) is dict else slot


def _turn_ops(ops: list[Any]) -> list[Any] | None:
    """The sticky ``ops`` under ``turn`` as the view shows them (tool slots without ``memos``),
    or ``None`` when one of them cannot be replayed (the caller recomputes ``turn``)."""
    out: list[Any] = []
    for op in ops:
        verb, path = op[0], op[1]
        if verb == "r" or not path:
            return None
        if path[0] != "turn":
            continue
        depth = len(path)
        if depth == 1:
            if verb == "d":
                out.append(op)
            elif verb == "s":
                shown = _turn_view(op[2])
                if shown is _FAILED:
                    return None
                out.append(("s", path, shown))
            else:
                return None
        elif path[1] == "tools" and depth <= 3:
            if depth == 2 and verb == "s" and type(op[2]) is list:
                out.append(("s", path, [_strip_memos(slot) for slot in op[2]]))
            elif depth == 2 and verb == "p":
                out.append(("p", path, op[2], op[3], [_strip_memos(slot) for slot in op[4]]))
            elif depth == 2 and verb == "m":
                out.append(op)
            elif depth == 3 and verb == "s":
                out.append(("s", path, _strip_memos(op[2])))
            elif depth == 3 and verb == "d":
                out.append(op)
            else:
                return None
        elif path[1] == "tools" and path[3] == "memos":
            continue
        else:
            out.append(op)
    return out


def _replay_turn(view: _ConversationView, sticky_ops: list[Any]) -> bool:
    """Replay the commit's ``turn`` ops on the view and record them for its envelope; False
    when they cannot be (nothing changed then)."""
    ops = _turn_ops(sticky_ops)
    if ops is None:
        return False
    if not ops:
        return True
    # the view adopts one copy of the payloads, the envelope carries another
    try:
        apply(view.value, [_copy_op(op) for op in ops])
    except (ValueError, TypeError):
        return False
    view.recorder.ops.extend(_copy_op(op) for op in ops)
    return True


def _copy_op(op: Any) -> Any:
    """``op`` with its own copy of the payload (paths are tuples of scalars: shared)."""
    if len(op) == 2:
        return op
    return (op[0], tuple(op[1]), *_DECODE(_ENCODE(op[2:])))


def _own_events(
    events: list[dict[str, Any]], shared: set[int], shapes: dict[int, Any]
) -> list[dict[str, Any]]:
    """The envelope's events. ``entry.added``/``head.moved`` share the committed entry's payload
    inside the batch; here they get the entry shape this envelope's op carries (``shapes``, by
    entry id), or one fresh copy per entry."""
    if not shared:
        return list(events)
    out: list[dict[str, Any]] = []
    for event in events:
        if id(event) in shared:
            entry = event["entry"]
            shape = shapes.get(entry["id"])
            if shape is None:
                shape = shapes[entry["id"]] = _DECODE(_ENCODE(entry))
            event = {"type": event["type"], "entry": shape}
        out.append(event)
    return out


def _optional(root: TrackedDict, key: str, value: Any) -> None:
    """Sync ``root[key]`` to ``value``, or delete it when ``value`` is the absent marker."""
    if value is _FAILED:
        if key in root:
            del root[key]
        return
    _sync(root, key, value)


def _deliver(watch: Watch, envelope: Envelope) -> PendingEnvelope:
    return partial(watch._deliver, envelope)  # pyright: ignore[reportPrivateUsage]


def _sync(parent: TrackedDict | TrackedList, key: Any, new: Any) -> None:
    """Make ``parent[key]`` equal ``new`` through the tracker, touching only what differs."""
    raw: Any = parent._raw  # pyright: ignore[reportPrivateUsage]
    if isinstance(parent, TrackedDict) and key not in raw:
        parent[key] = new
        return
    old = raw[key]
    if type(old) is dict and type(new) is dict:
        child = parent[key]
        for name in [name for name in old if name not in new]:
            del child[name]
        for name, value in new.items():
            _sync(child, name, value)
        return
    if type(old) is list and type(new) is list:
        child = parent[key]
        if len(old) == len(new):
            for index, value in enumerate(new):
                _sync(child, index, value)
            return
        start = 0
        limit = min(len(old), len(new))
        while start < limit and equal_json(old[start], new[start]):
            start += 1
        end = 0
        while end < limit - start and equal_json(old[-1 - end], new[-1 - end]):
            end += 1
        child[start : len(old) - end] = new[start : len(new) - end]
        return
    if type(old) is not type(new) or not equal_json(old, new):
        parent[key] = new
