"""The head rules (docs/design/harness.md#entries, #context-derivation, docs/design/view.md#active-transcript): heads only move forward and never split an
assistant/tool-result exchange; a violating batch is rejected whole and the session goes on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from chord.context import BACKGROUND, Context
from pico3.harness import ConversationHandle, Harness
from pico3.kernel.tx import Authority, Transaction
from pico3.session_data.entries import EntryRejected, NewEntry
from pico3.storage import Storage

pytestmark = pytest.mark.anyio
StorageFactory = Callable[[], Storage]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 0}


def assistant(*calls: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": "working"}]
    content += [{"type": "toolCall", "id": c, "name": "read", "arguments": {}} for c in calls]
    return {"role": "assistant", "content": content, "timestamp": 1}


def result(call: str) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call,
        "toolName": "read",
        "content": [{"type": "text", "text": "ok"}],
        "isError": False,
        "timestamp": 2,
    }


async def open_root(storage_factory: StorageFactory) -> tuple[Harness, ConversationHandle]:
    h = await Harness.open(storage_factory(), None, BACKGROUND)
    return h, await h.root(BACKGROUND)


async def append(h: Harness, cid: int, *entries: NewEntry) -> list[int]:
    """Append ``entries`` with core authority in one commit; return their ids."""

    def build(tx: Transaction, ctx: Context) -> list[int]:
        return [tx.append_entry(cid, entry).id for entry in entries]

    return await h.kernel.commit(build, BACKGROUND, conversation_id=cid, authority=Authority.CORE)


def summary(head: int | str) -> NewEntry:
    return NewEntry(kind="pi.summary", model=[user("summary")], head=head, data={"through": 1})  # type: ignore[arg-type]


async def rejected(h: Harness, cid: int, *entries: NewEntry) -> EntryRejected:
    """Assert the batch is refused with nothing recorded; return the error."""
    storage = h.kernel.storage
    seq = storage.seq  # type: ignore[attr-defined]
    before = await h.kernel.commit(lambda tx, ctx: tx.scan_entries(cid, limit=1000), BACKGROUND)
    with pytest.raises(EntryRejected) as caught:
        await append(h, cid, *entries)
    assert storage.seq == seq  # type: ignore[attr-defined]
    after = await h.kernel.commit(lambda tx, ctx: tx.scan_entries(cid, limit=1000), BACKGROUND)
    assert after == before
    return caught.value


async def test_a_head_before_the_current_head_is_rejected(
    storage_factory: StorageFactory,
) -> None:  # docs/design/harness.md#entries heads only move forward
    h, c = await open_root(storage_factory)
    first, second, third = await append(
        h,
        c.id,
        NewEntry(kind="pi.user", model=[user("a")]),
        NewEntry(kind="pi.user", model=[user("b")]),
        NewEntry(kind="pi.user", model=[user("c")]),
    )
    [moved] = await append(h, c.id, summary(second))
    error = await rejected(h, c.id, summary(first))
    assert f"entry.head {first} is before the current head {second}" in str(error)
    # the session goes on: the same head again, a later one and a self head all land
    [same] = await append(h, c.id, summary(second))
    [later] = await append(h, c.id, summary(third))
    [reset] = await append(h, c.id, NewEntry(kind="pi.reset", head="self"))
    assert [moved, same, later, reset] == sorted([moved, same, later, reset])
    context = await c.context(BACKGROUND)
    assert context.head is not None and context.head.id == reset
    await h.close(BACKGROUND)


async def test_two_heads_in_one_commit_are_checked_in_order(
    storage_factory: StorageFactory,
) -> None:
    h, c = await open_root(storage_factory)
    first, second = await append(
        h,
        c.id,
        NewEntry(kind="pi.user", model=[user("a")]),
        NewEntry(kind="pi.user", model=[user("b")]),
    )
    await rejected(h, c.id, summary(second), summary(first))
    ids = await append(h, c.id, summary(first), summary(second))
    assert len(ids) == 2
    await h.close(BACKGROUND)


async def test_a_head_at_a_tool_result_splits_the_exchange_and_is_rejected(
    storage_factory: StorageFactory,
) -> None:  # docs/design/harness.md#entries a head never splits an assistant/tool-result exchange
    h, c = await open_root(storage_factory)
    _, call, first, second = await append(
        h,
        c.id,
        NewEntry(kind="pi.user", model=[user("go")]),
        NewEntry(kind="pi.assistant", model=[assistant("c1", "c2")]),
        NewEntry(kind="pi.tool_result", model=[result("c1")]),
        NewEntry(kind="pi.tool_result", model=[result("c2")]),
    )
    for head in (first, second):
        error = await rejected(h, c.id, summary(head))
        assert f"splits the tool-call exchange of assistant entry {call}" in str(error)
    # before the assistant, or after the last result, is fine
    [summary_id] = await append(h, c.id, summary(call))
    [later] = await append(h, c.id, NewEntry(kind="pi.reset", head="self"))
    assert later > summary_id
    await h.close(BACKGROUND)


async def test_a_self_head_while_tool_results_are_pending_is_rejected(
    storage_factory: StorageFactory,
) -> None:
    h, c = await open_root(storage_factory)
    _, call, _ = await append(
        h,
        c.id,
        NewEntry(kind="pi.user", model=[user("go")]),
        NewEntry(kind="pi.assistant", model=[assistant("c1", "c2")]),
        NewEntry(kind="pi.tool_result", model=[result("c1")]),
    )
    error = await rejected(h, c.id, NewEntry(kind="pi.reset", head="self"))
    assert f"assistant entry {call}" in str(error) and "'c2'" in str(error)
    # also within one commit: the reset may follow the missing result, not precede it
    await rejected(
        h,
        c.id,
        NewEntry(kind="pi.reset", head="self"),
        NewEntry(kind="pi.tool_result", model=[result("c2")]),
    )
    await append(
        h,
        c.id,
        NewEntry(kind="pi.tool_result", model=[result("c2")]),
        NewEntry(kind="pi.reset", head="self"),
    )
    await h.close(BACKGROUND)


async def test_bookkeeping_entries_do_not_hide_an_open_exchange(
    storage_factory: StorageFactory,
) -> None:
    h, c = await open_root(storage_factory)
    await append(
        h,
        c.id,
        NewEntry(kind="pi.assistant", model=[assistant("c1")]),
        NewEntry(kind="pi.usage", data={"attempt": 1, "error": "x"}),
    )
    await rejected(h, c.id, NewEntry(kind="pi.reset", head="self"))
    await append(h, c.id, NewEntry(kind="pi.tool_result", model=[result("c1")]))
    await append(h, c.id, NewEntry(kind="pi.reset", head="self"))
    await h.close(BACKGROUND)


async def test_a_fork_that_cut_an_exchange_may_start_a_fresh_context(
    storage_factory: StorageFactory,
) -> None:
    # results cut by a fork are synthesized, never stored (docs/design/harness.md#context-derivation)
    h, c = await open_root(storage_factory)
    _, call, first, _ = await append(
        h,
        c.id,
        NewEntry(kind="pi.user", model=[user("go")]),
        NewEntry(kind="pi.assistant", model=[assistant("c1", "c2")]),
        NewEntry(kind="pi.tool_result", model=[result("c1")]),
        NewEntry(kind="pi.tool_result", model=[result("c2")]),
    )
    at_call = await c.fork(call, BACKGROUND)
    [reset] = await append(h, at_call.id, NewEntry(kind="pi.reset", head="self"))
    assert (await at_call.context(BACKGROUND)).head is not None
    # but a head at a result the fork kept still splits the exchange
    at_result = await c.fork(first, BACKGROUND)
    await rejected(h, at_result.id, summary(first))
    await append(h, at_result.id, summary(call))
    assert reset > first
    await h.close(BACKGROUND)


async def test_a_head_must_name_a_fork_visible_entry(
    storage_factory: StorageFactory,
) -> None:
    h, c = await open_root(storage_factory)
    first, second = await append(
        h,
        c.id,
        NewEntry(kind="pi.user", model=[user("a")]),
        NewEntry(kind="pi.user", model=[user("b")]),
    )
    fork = await c.fork(first, BACKGROUND)
    error = await rejected(h, fork.id, summary(second))  # after the fork point
    assert f"entry.head {second} names no fork-visible entry" in str(error)
    await rejected(h, c.id, summary(fork.id))  # a conversation id, not an entry
    [ok] = await append(h, fork.id, summary(first))  # into the parent, before the cut
    assert ok > second
    await h.close(BACKGROUND)


async def test_reset_and_handoff_through_the_handle_pass_the_rules(
    storage_factory: StorageFactory,
) -> None:  # the turn loop's own head writers (idle: written now)
    h, c = await open_root(storage_factory)
    await append(
        h,
        c.id,
        NewEntry(kind="pi.user", model=[user("go")]),
        NewEntry(kind="pi.assistant", model=[assistant("c1")]),
        NewEntry(kind="pi.tool_result", model=[result("c1")]),
    )
    async with h:
        await h.resume(BACKGROUND)
        await c.reset(BACKGROUND)
        await c.reset(BACKGROUND, handoff="carry on")
        entries = await c.entries(BACKGROUND, limit=2)
    assert [e.kind for e in entries] == ["pi.handoff", "pi.reset"]
    assert all(e.head == e.id for e in entries)
