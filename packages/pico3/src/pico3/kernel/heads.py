"""The head rules: a head only moves forward and never splits a tool-call exchange.

An entry's ``head`` says "the model's context starts at entry ``head``" (docs/design/harness.md#entries,
docs/design/harness.md#context-derivation). Only core writes heads (resets, handoffs, collapse summaries), and every one of them
must keep the transcript derivable:

* **forward only** — the new head may not name an entry before the conversation's current head
  (the ``head`` of its newest fork-visible entry carrying one). Moving the start of context
  backwards would resurrect history a summary or a reset already replaced.
* **never inside an exchange** — an assistant message with tool calls and the tool results that
  answer it stay on the same side of a head. A head that starts context *between* them would
  hand the model orphaned tool results, or an assistant whose results land after the new start.
  Concretely, walking back from the head's target (exclusive) past bookkeeping entries (no
  ``model``) and tool results, the first model entry must not end with an assistant whose calls
  are still unanswered there, unless those results can never appear: the assistant is inherited
  from a fork parent whose later entries are cut off (context derivation synthesizes such
  results, docs/design/harness.md#context-derivation), and the head does not point at one of its results either.
* **a visible target** — the target is the new entry itself (``head="self"``) or a fork-visible
  entry of the conversation (``head > id`` is refused when the entry is built).

The rules need reads (the committed transcript), so the kernel checks them once per commit,
after the builder returns and before anything is persisted, for the batch's entries that carry
a head — rare writes, so ordinary appends pay nothing. A violation raises
:class:`~pico3.session_data.entries.EntryRejected`: the whole batch is discarded and the session goes
on. Turn-loop code that can race a head (queued writes with explicit heads) checks first and
records ``unanswered/stale`` instead (docs/design/turn.md#boundaries).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from msgspec import UNSET

from chord.context import Context
from pico3.session_data.entries import EntryRejected
from pico3.storage.base import Storage
from pico3.storage.records import Conversation, Entry, EntryScan

__all__ = ["check_heads"]

_PAGE = 16


async def check_heads(
    storage: Storage,
    conversations: Mapping[int, Conversation],
    appended: Sequence[Entry],
    ctx: Context,
) -> None:
    """Check every entry of ``appended`` (one batch, in append order) that carries a head
    against committed state plus the batch's earlier entries; raise ``EntryRejected``."""
    for index, entry in enumerate(appended):
        head = entry.head
        if head is UNSET:
            continue
        cid = entry.conversation_id
        earlier = [e for e in appended[:index] if e.conversation_id == cid]
        current = await _current_head(storage, cid, earlier, ctx)
        if current is not None and head < current:
            raise EntryRejected(
                f"entry.head {head} is before the current head {current} of conversation "
                f"{cid}: heads only move forward"
            )
        target: Entry | None = None
        if head != entry.id:
            target = await _visible_entry(storage, conversations, cid, head, earlier, ctx)
            if target is None:
                raise EntryRejected(
                    f"entry.head {head} names no fork-visible entry of conversation {cid}"
                )
        await _check_exchange(storage, cid, head, target, earlier, ctx)


async def _current_head(
    storage: Storage, cid: int, earlier: Sequence[Entry], ctx: Context
) -> int | None:
    for entry in reversed(earlier):
        if entry.head is not UNSET:
            return entry.head
    found = await storage.scan_entries(EntryScan(conversation_id=cid, limit=1, with_head=True), ctx)
    if not found or found[0].head is UNSET:
        return None
    return found[0].head


async def _visible_entry(
    storage: Storage,
    conversations: Mapping[int, Conversation],
    cid: int,
    entry_id: int,
    earlier: Sequence[Entry],
    ctx: Context,
) -> Entry | None:
    for entry in earlier:
        if entry.id == entry_id:
            return entry
    found = (await storage.entries([entry_id], ctx)).get(entry_id)
    if found is None:
        return None
    cap: int | None = None
    current = conversations.get(cid)
    while current is not None:
        if current.id == found.conversation_id:
            return found if cap is None or entry_id <= cap else None
        if current.parent is UNSET:
            return None
        at = current.parent.at
        cap = at if cap is None else min(cap, at)
        current = conversations.get(current.parent.conversation_id)
    return None


async def _newest_first_before(
    storage: Storage, cid: int, before: int, earlier: Sequence[Entry], ctx: Context
) -> AsyncIterator[Entry]:
    """Fork-visible entries with ``id < before``, newest first: this batch's, then committed."""
    for entry in reversed(earlier):
        if entry.id < before:
            yield entry
    cursor = before
    while True:
        page = await storage.scan_entries(
            EntryScan(conversation_id=cid, limit=_PAGE, before=cursor), ctx
        )
        for entry in page:
            yield entry
        if len(page) < _PAGE:
            return
        cursor = page[-1].id


async def _check_exchange(
    storage: Storage,
    cid: int,
    head: int,
    target: Entry | None,
    earlier: Sequence[Entry],
    ctx: Context,
) -> None:
    answered: set[Any] = set()
    async for entry in _newest_first_before(storage, cid, head, earlier, ctx):
        messages = entry.model if entry.model is not UNSET else []
        if not messages:
            continue  # bookkeeping and display-only entries are outside every exchange
        if all(message.get("role") == "toolResult" for message in messages):
            answered.update(message.get("toolCallId") for message in messages)
            continue
        calls = _tool_call_ids(messages[-1])
        missing = [call for call in calls if call not in answered]
        if not missing:
            return
        if entry.conversation_id == cid or (target is not None and _answers(target, missing)):
            raise EntryRejected(
                f"entry.head {head} splits the tool-call exchange of assistant entry "
                f"{entry.id} in conversation {cid}: calls {missing} are answered at or after "
                "the head (or not yet); a head goes before the assistant or after its results"
            )
        return  # a fork cut the exchange: its results never appear (they are synthesized)


def _tool_call_ids(message: dict[str, Any]) -> list[Any]:
    if message.get("role") != "assistant":
        return []
    content = message.get("content")
    if type(content) is not list:
        return []
    return [
        block.get("id")
        for block in content  # pyright: ignore[reportUnknownVariableType]
        if type(block) is dict and block.get("type") == "toolCall"  # pyright: ignore[reportUnknownMemberType]
    ]


def _answers(entry: Entry, calls: Sequence[Any]) -> bool:
    model = entry.model if entry.model is not UNSET else []
    return any(
        message.get("role") == "toolResult" and message.get("toolCallId") in calls
        for message in model
    )
