"""The managed system entry: system sections and the tool loadout, as ``pi.system`` entries.

The system prompt and the tools offered to the model are not request parameters that can drift
silently; they are entries in the transcript, so every request can be rebuilt from storage and a
fork sees what the model saw. Preparation compares what *should* be in effect (the registered
sections rendered for this conversation, the ``selectedTools`` resolved against the tool
registry) with what the newest ``pi.system`` entry in context says is in effect, and appends:

* nothing, when they are equal;
* a **baseline** (every section as ``## key\\nrendered``, ``tools_added`` = the full loadout)
  when no system entry is in context yet (first turn, or a head moved the context start);
* a **delta** otherwise: ``The key section now reads:\\n…`` / ``The key section no longer
  applies.`` blocks, ``tools_removed`` then ``tools_added``; a change visible only in the
  data (order) has ``model: []``.

Each ``pi.system`` entry's ``data`` holds the full resulting state (``sections``, ``tools``), so
the next preparation needs only the newest one: its sections are the *canonical section fold*.
A delta also names the baseline it builds on (``base``). When a head (a summary, a reset) moved
the context start past that baseline, the model no longer sees it: preparation appends a fresh
baseline whose ``edits`` omit the managed entries still in context, so nothing is said twice.
Preparation runs off the line; the transition builder re-takes the snapshot (settings, registry
revisions, newest head, newest system entry) and answers ``"retry"`` when anything moved.

**Section seed** (docs/design/harness.md#section-seeds). A conversation created with ``sections`` (a fork, a subagent)
folds its sections from that seed, not from entries, *while it has no local managed entry*:
"local" means a ``pi.system`` entry of the conversation itself. Entries a fork inherits from
its parent are context, not local: they still decide baseline versus delta (a seeded fork whose
parent had a system prompt gets a delta to the seeded sections), but not the fold. The first
model call that appends an entry makes the fold come from entries for good. A model call that
appends nothing found the seeded sections already in effect, so the seed simply stays in use.
A fork without a seed folds from what it inherited, exactly as before, and seeds are never
inherited: a fork of a seeded conversation sees the seed only through the entries it wrote.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from chord.context import Context
from chord.json import copy_json, equal_json
from pico3.kernel.tx import Transaction
from pico3.models.provider import Tool, extend_prefix
from pico3.registry import NamedRegistry
from pico3.session_data.entries import NewEntry
from pico3.storage.records import UNSET, SectionSeed, Task
from pico3.tasks.runtime import Runtime
from pico3.tools import ToolDeclaration, ToolRegistry
from pico3.turn.hook_points import system_instructions
from pico3.turn.sections import SectionDraft, SectionRegistry, SectionState, freeze

__all__ = ["OfferedTools", "SystemPlan", "ToolsMemo", "prepare_system", "request_tools"]

_SETTINGS = ("model", "thinkingLevel", "selectedTools", "profile")


def _registry(rt: Runtime, name: str) -> Any:
    harness = getattr(rt, "harness", None)
    return getattr(harness, name, None)


def _revision(registry: NamedRegistry[Any] | None) -> int:
    return int(getattr(registry, "revision", 0)) if registry is not None else 0


@dataclass
class SystemPlan:
    """What preparation decided, and the snapshot it decided on."""

    settings: dict[str, Any]
    tools: list[str]
    sections: dict[str, dict[str, Any]]
    tools_revision: int
    sections_revision: int
    head: int | None
    snapshot: _Snapshot
    registries: tuple[ToolRegistry | None, SectionRegistry | None] = field(default=(None, None))

    @property
    def previous(self) -> dict[str, Any] | None:
        """The state the newest managed entry says is in effect (``None``: none yet)."""
        return self.snapshot.state

    async def still_valid(self, tx: Transaction, cid: int) -> bool:
        """True when nothing this plan depends on moved (read before any append)."""
        tools, sections = self.registries
        if _revision(tools) != self.tools_revision or _revision(sections) != self.sections_revision:
            return False
        config = tx.config(cid)
        for key in _SETTINGS:
            if not equal_json(config.get(key), self.settings.get(key)):
                return False
        return await _snapshot(tx, cid) == self.snapshot

    def append(self, tx: Transaction, cid: int, now: int) -> int | None:
        """Append the baseline or delta this plan needs (or nothing); returns its id."""
        desired = {"sections": self.sections, "tools": self.tools}
        previous = self.previous
        if previous is None or self.snapshot.rebase:
            retained = self.snapshot.retained
            if not self.sections and not self.tools and not retained and previous is None:
                return None
            content = "\n\n".join(
                f"## {key}\n{state['rendered']}" for key, state in self.sections.items()
            )
            message: dict[str, Any] = {"role": "system", "content": content, "timestamp": now}
            if self.tools:
                message["tools_added"] = list(self.tools)
            data = {"baseline": True, **desired}
            edits = [{"target": target, "action": "omit"} for target in retained] or None
            entry = NewEntry("pi.system", model=[message], data=data, edits=edits)
            return tx.append_entry(cid, entry).id
        if equal_json(previous, desired):
            return None
        before: dict[str, Any] = previous.get("sections", {})
        blocks: list[str] = []
        for key in before:
            if key not in self.sections:
                blocks.append(f"The {key} section no longer applies.")
        for key, state in self.sections.items():
            if (before.get(key) or {}).get("rendered") != state["rendered"]:
                blocks.append(f"The {key} section now reads:\n{state['rendered']}")
        old_tools: list[str] = previous.get("tools", [])
        removed = [name for name in old_tools if name not in self.tools]
        added = [name for name in self.tools if name not in old_tools]
        model: list[dict[str, Any]] = []
        if blocks or removed or added:
            message = {"role": "system", "content": "\n\n".join(blocks), "timestamp": now}
            if removed:
                message["tools_removed"] = removed
            if added:
                message["tools_added"] = added
            model.append(message)
        data = {**desired, "base": self.snapshot.base}
        return tx.append_entry(cid, NewEntry("pi.system", model=model, data=data)).id


@dataclass(frozen=True)
class _Snapshot:
    """What preparation depends on in the transcript.

    ``state`` is the newest managed entry's full state (the canonical sections and loadout);
    ``base`` the baseline that entry builds on. When a head moved the context start past that
    baseline (``rebase``), the model no longer sees it: a fresh baseline is due, and the managed
    entries still in context (``retained``) are omitted by it so nothing is said twice.
    """

    head: int | None
    system: int | None
    state: dict[str, Any] | None
    base: int | None
    rebase: bool
    retained: list[int]
    local: bool = False
    """The newest managed entry belongs to the conversation itself (not inherited)."""


async def _snapshot(tx: Transaction, cid: int) -> _Snapshot:
    heads = await tx.scan_entries(cid, limit=1, with_head=True)
    head = heads[0].head if heads else None
    head_id = head if isinstance(head, int) else None
    systems = await tx.scan_entries(cid, limit=1, kind="pi.system")
    if not systems:
        return _Snapshot(head_id, None, None, None, False, [])
    entry = systems[0]
    # Own entries are minted after the fork point, so the newest fork-visible managed entry is
    # inherited only when the conversation has none of its own.
    local = entry.conversation_id == cid
    data = entry.data if isinstance(entry.data, dict) else {}
    state = {"sections": data.get("sections", {}), "tools": data.get("tools", [])}
    base = entry.id if data.get("baseline") is True else data.get("base")
    base_id = base if isinstance(base, int) else None
    if head_id is None or (base_id is not None and base_id >= head_id):
        return _Snapshot(head_id, entry.id, state, base_id, False, [], local)
    retained: list[int] = []
    if entry.id >= head_id:
        managed = await tx.scan_entries(cid, limit=256, kind="pi.system")
        retained = sorted(e.id for e in managed if e.id >= head_id)
    return _Snapshot(head_id, entry.id, state, base_id, True, retained, local)


def _section_seed(tx: Transaction, cid: int, snapshot: _Snapshot) -> list[SectionSeed] | None:
    """The conversation's section seed while it is in effect (no local managed entry)."""
    if snapshot.local:
        return None
    record = tx.conversation(cid)
    if record is None or record.sections is UNSET:
        return None
    return list(record.sections)


def _canonical(snapshot: _Snapshot, seed: list[SectionSeed] | None) -> dict[str, SectionState]:
    """The canonical section fold: the seed while it is in effect, else the newest managed
    entry's sections (empty when there is none)."""
    if seed is not None:
        return {item.key: SectionState(copy_json(item.value), item.rendered) for item in seed}
    canonical: dict[str, SectionState] = {}
    for key, state in ((snapshot.state or {}).get("sections") or {}).items():
        canonical[key] = SectionState(state.get("value"), state.get("rendered", ""))
    return canonical


async def prepare_system(
    rt: Runtime, cid: int, settings: dict[str, Any], ctx: Context
) -> SystemPlan:
    """Snapshot settings and registries, seed a section draft from the canonical sections
    (the section seed while it is in effect, else the newest managed entry's), run
    ``system_instructions`` and freeze the desired sections and loadout."""
    tools_registry: ToolRegistry | None = _registry(rt, "tools")
    sections_registry: SectionRegistry | None = _registry(rt, "sections")
    tools_revision = _revision(tools_registry)
    sections_revision = _revision(sections_registry)

    async def read(
        tx: Transaction, current: Task, ctx: Context
    ) -> tuple[_Snapshot, list[SectionSeed] | None]:
        snapshot = await _snapshot(tx, cid)
        return snapshot, _section_seed(tx, cid, snapshot)

    snapshot, seed = await rt.commit(read, ctx)
    known = set(tools_registry.names()) if tools_registry is not None else set()
    loadout = [name for name in settings.get("selectedTools", []) if name in known]
    canonical = _canonical(snapshot, seed)
    draft = SectionDraft(canonical)
    override = await system_instructions(rt, draft, settings, loadout, ctx)
    if override is not None:
        loadout = [name for name in override if isinstance(name, str) and name in known]
    desired = freeze(draft, canonical, sections_registry.snapshot() if sections_registry else {})
    sections = {
        key: {"value": copy_json(state.value), "rendered": state.rendered}
        for key, state in desired.items()
    }
    return SystemPlan(
        settings={key: copy_json(settings.get(key)) for key in _SETTINGS},
        tools=loadout,
        sections=sections,
        tools_revision=tools_revision,
        sections_revision=sections_revision,
        head=snapshot.head,
        snapshot=snapshot,
        registries=(tools_registry, sections_registry),
    )


@dataclass(frozen=True)
class OfferedTools:
    """The tools of the final request (docs/design/decisions.md#d8-g12: folded from its system messages)."""

    names: list[str]
    declarations: list[ToolDeclaration]

    def wire(self) -> list[Tool]:
        """The provider-facing tool list."""
        return [
            Tool(name=d.name, description=d.description, parameters=copy_json(d.parameters))
            for d in self.declarations
        ]


def request_tools(
    messages: Sequence[dict[str, Any]],
    registry: ToolRegistry | None,
    fallback: Sequence[str] = (),
    memo: ToolsMemo | None = None,
) -> OfferedTools:
    """Fold ``tools_removed``/``tools_added`` of the request's system messages into the offered
    set; declarations come from ``registry`` (names it no longer knows are offered by name
    only and fail ``missing tool`` if called). With ``memo`` (one per conversation) only the
    messages after the last call's are folded."""
    names, seen_system = (memo or ToolsMemo()).fold(messages)
    if not seen_system:
        names = list(fallback)
    declarations = []
    for name in names:
        found = registry.get(name) if registry is not None else None
        if found is not None:
            declarations.append(found)
    return OfferedTools(names, declarations)


class ToolsMemo:
    """:func:`request_tools`' fold of the offered names, remembered from the last call.

    A long conversation's request re-sends every message, but its system messages are few: when
    a call's messages start with the last call's (compared by identity first, then by value, in
    C, as :class:`pico3.models.MessageMemo` does) only the new ones are folded, so a late turn
    does not walk the whole history. Anything else folds from scratch, so the result is always
    the fold of the call's messages."""

    __slots__ = ("_names", "_seen", "_system")

    def __init__(self) -> None:
        self._seen: list[dict[str, Any]] = []
        self._names: list[str] = []
        self._system = False

    def fold(self, messages: Sequence[dict[str, Any]]) -> tuple[list[str], bool]:
        """``(offered names, whether any system message was seen)`` of ``messages``."""
        seen = self._seen
        known = len(seen)
        if not extend_prefix(seen, messages):
            self._seen, self._names, self._system = [], [], False
            seen, known = self._seen, 0
            seen.extend(messages)
        fresh = seen[known:]
        names = self._names
        for message in fresh:
            if message.get("role") != "system":
                continue
            self._system = True
            for name in message.get("tools_removed", []) or []:
                if name in names:
                    names.remove(name)
            for name in message.get("tools_added", []) or []:
                if name not in names:
                    names.append(name)
        return list(names), self._system
