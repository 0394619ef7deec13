"""Inputs, queued writes, request keys, capabilities, fork-aware reads and rewindable history."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from chord.context import BACKGROUND, Context
from pico3.harness import ConversationHandle, Harness
from pico3.kernel.errors import Forbidden, ReadAfterWrite
from pico3.kernel.tx import Authority, Transaction
from pico3.kernel.view import Envelope
from pico3.session_data.context import MISSING_RESULT_TEXT
from pico3.session_data.entries import NewEntry
from pico3.storage import Storage
from pico3.storage.records import Input

pytestmark = pytest.mark.anyio
StorageFactory = Callable[[], Storage]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 0}


async def open_root(storage_factory: StorageFactory) -> tuple[Harness, ConversationHandle]:
    h = await Harness.open(storage_factory(), None, BACKGROUND)
    return h, await h.root(BACKGROUND)


async def core(h: Harness, cid: int, build: Callable[[Transaction, Context], Any]) -> Any:
    return await h.kernel.commit(build, BACKGROUND, conversation_id=cid, authority=Authority.CORE)


async def test_busy_write_is_queued_in_the_inbox(storage_factory: StorageFactory) -> None:
    h, c = await open_root(storage_factory)
    busy = {c.id}
    h.kernel.set_busy_probe(lambda tx, cid: cid in busy)
    watch = await c.watch(BACKGROUND)
    got: list[Envelope] = []
    watch.start(got.append)
    input_id = await c.write("ci.note", BACKGROUND, data={"n": 1})
    item = {"id": input_id, "mode": "write", "entry": {"kind": "ci.note", "data": {"n": 1}}}
    [envelope] = got
    assert envelope.ops == [("p", ("inbox",), 0, 0, [item])]
    assert envelope.events == [{"type": "input.queued", "input": input_id, "mode": "write"}]
    record = await c.commit(lambda tx, ctx: tx.input(input_id), BACKGROUND)
    assert record.status == "queued"
    assert (await c.sticky(BACKGROUND))["inbox"] == [item]
    second = await c.write("ci.note", BACKGROUND, data={"n": 2})
    assert got[1].ops == [
        (
            "p",
            ("inbox",),
            1,
            0,
            [{**item, "id": second, "entry": {"kind": "ci.note", "data": {"n": 2}}}],
        )
    ]
    assert second > input_id
    busy.clear()
    await c.write("ci.idle", BACKGROUND)
    assert got[2].events[0]["type"] == "entry.added"
    await h.close(BACKGROUND)


async def test_request_keys_are_per_conversation_and_see_the_batch(
    storage_factory: StorageFactory,
) -> None:
    h, c = await open_root(storage_factory)

    async def admit(tx: Transaction, ctx: Context) -> int:
        assert await tx.input_by_request(c.id, "r1") is None
        record = Input(
            id=h.kernel.mint_id(), conversation_id=c.id, status="queued", request_id="r1"
        )
        tx.put_input(record)
        found = await tx.input_by_request(c.id, "r1")
        assert found is record
        return record.id

    input_id = await core(h, c.id, admit)
    other = await c.fork("start", BACKGROUND)
    assert await c.commit(lambda tx, ctx: tx.input_by_request(other.id, "r1"), BACKGROUND) is None
    found = await c.commit(lambda tx, ctx: tx.input_by_request(c.id, "r1"), BACKGROUND)
    assert found is not None and found.id == input_id
    await h.close(BACKGROUND)


async def test_host_transactions_cannot_use_core_methods(storage_factory: StorageFactory) -> None:
    h, c = await open_root(storage_factory)
    seq = h.kernel.storage.seq
    record = Input(id=10_000, conversation_id=c.id, status="done")
    attempts: list[Callable[[Transaction, Context], Any]] = [
        lambda tx, ctx: tx.append_entry(c.id, NewEntry(kind="pi.reset", head="self")),
        lambda tx, ctx: tx.put_input(record),
        lambda tx, ctx: tx.document("sticky"),
        lambda tx, ctx: tx.emit_event(c.id, {"type": "turn.started", "inputs": []}),
    ]
    for attempt in attempts:
        with pytest.raises(Forbidden, match="core authority"):
            await c.commit(attempt, BACKGROUND)
    assert h.kernel.storage.seq == seq
    await h.close(BACKGROUND)


async def test_rewindable_history_is_commit_granular(storage_factory: StorageFactory) -> None:
    h, c = await open_root(storage_factory)

    def same_commit(tx: Transaction, ctx: Context) -> int:
        tx.config(c.id).set({"thinkingLevel": "low"})
        input_id = tx.write(c.id, "ci.x")
        tx.config(c.id).set({"thinkingLevel": "high"})  # after the append, same commit
        return input_id + 1

    at = await c.commit(same_commit, BACKGROUND)
    await c.set_config({"thinkingLevel": "max"}, BACKGROUND)
    as_of = await c.commit(lambda tx, ctx: tx.rewindable_as_of(c.id, at), BACKGROUND)
    assert as_of["thinkingLevel"] == "high"
    fork = await c.fork(at, BACKGROUND)
    assert (await fork.config(BACKGROUND))["thinkingLevel"] == "high"
    assert (await c.config(BACKGROUND))["thinkingLevel"] == "max"
    await h.close(BACKGROUND)


async def test_fork_rejects_points_it_cannot_see(storage_factory: StorageFactory) -> None:
    h, c = await open_root(storage_factory)
    at = (await c.write("ci.a", BACKGROUND)) + 1
    fork = await c.fork(at, BACKGROUND)
    later = (await c.write("ci.b", BACKGROUND)) + 1
    with pytest.raises(ValueError, match="not fork-visible"):
        await fork.fork(later, BACKGROUND)
    with pytest.raises(ValueError, match="not fork-visible"):
        await c.fork(99_999, BACKGROUND)

    def fork_same_batch(tx: Transaction, ctx: Context) -> Any:
        entry_id = tx.write(c.id, "ci.c") + 1
        return tx.create_conversation(fork=(c.id, entry_id))

    with pytest.raises(ReadAfterWrite):
        await c.commit(fork_same_batch, BACKGROUND)
    await h.close(BACKGROUND)


async def test_fork_cut_inside_a_tool_exchange_repairs_context(
    storage_factory: StorageFactory,
) -> None:
    h, c = await open_root(storage_factory)
    calls = [
        {"type": "toolCall", "id": "c1", "name": "read", "arguments": {}},
        {"type": "toolCall", "id": "c2", "name": "read", "arguments": {}},
    ]
    assistant = {"role": "assistant", "content": calls, "timestamp": 1}

    def result(call: str) -> dict[str, Any]:
        return {
            "role": "toolResult",
            "toolCallId": call,
            "toolName": "read",
            "content": [],
            "isError": False,
        }

    def exchange(tx: Transaction, ctx: Context) -> int:
        tx.append_entry(c.id, NewEntry(kind="pi.user", model=[user("go")]))
        tx.append_entry(c.id, NewEntry(kind="pi.assistant", model=[assistant]))
        cut = tx.append_entry(c.id, NewEntry(kind="pi.tool_result", model=[result("c2")]))
        tx.append_entry(c.id, NewEntry(kind="pi.tool_result", model=[result("c1")]))
        return cut.id

    cut = await core(h, c.id, exchange)
    full = await c.context(BACKGROUND)
    assert [m.get("toolCallId") for m in full.messages[2:]] == ["c1", "c2"]
    fork = await c.fork(cut, BACKGROUND)
    derived = await fork.context(BACKGROUND)
    assert derived.messages[2]["toolCallId"] == "c1"
    assert derived.messages[2]["content"] == [{"type": "text", "text": MISSING_RESULT_TEXT}]
    assert derived.messages[3] == result("c2")
    at_assistant = await c.commit(lambda tx, ctx: tx.context(c.id, cut - 1), BACKGROUND)
    assert len(at_assistant.messages) == 4  # user, assistant, two synthesized results
    await h.close(BACKGROUND)


async def test_context_starts_at_a_head_pointing_into_the_parent(
    storage_factory: StorageFactory,
) -> None:
    h, c = await open_root(storage_factory)
    first = (await c.write("pi.notice", BACKGROUND, model=[user("p1")])) + 1
    second = (await c.write("pi.notice", BACKGROUND, model=[user("p2")])) + 1
    fork = await c.fork(second, BACKGROUND)

    def summary(tx: Transaction, ctx: Context) -> None:
        tx.append_entry(
            fork.id,
            NewEntry(kind="pi.summary", model=[user("S")], head=second, data={"through": first}),
        )

    await core(h, fork.id, summary)
    derived = await fork.context(BACKGROUND)
    assert derived.messages == [user("S"), user("p2")]
    await h.close(BACKGROUND)


async def test_unset_config_reads_defaults_and_seeds_are_validated(
    storage_factory: StorageFactory,
) -> None:  # 135
    from pico3.session_data.config import ConfigRejected

    h, c = await open_root(storage_factory)

    def read(tx: Transaction, ctx: Context) -> tuple[Any, Any, Any]:
        config = tx.config(c.id)
        return config.get("followUpMode"), config.get("model"), config.get("retry")

    follow, model, retry = await c.commit(read, BACKGROUND)
    assert follow == "one-at-a-time" and model is None and retry["maxRetries"] == 3
    seq = h.kernel.storage.seq
    for seed in ({"thinkingLevel": "bogus"}, {"retry": {}}, {"plugins": {}}):
        with pytest.raises(ConfigRejected):
            await c.commit(lambda tx, ctx, s=seed: tx.create_conversation(rewindable=s), BACKGROUND)
    assert h.kernel.storage.seq == seq
    child = await c.commit(
        lambda tx, ctx: tx.create_conversation(rewindable={"thinkingLevel": "low"}), BACKGROUND
    )
    handle = await h.conversation(child, BACKGROUND)
    assert handle is not None
    assert (await handle.config(BACKGROUND))["thinkingLevel"] == "low"
    await h.close(BACKGROUND)


async def test_other_conversations_documents_load_on_request(
    storage_factory: StorageFactory,
) -> None:
    h, c = await open_root(storage_factory)
    other = await c.fork("start", BACKGROUND)
    await h.close(BACKGROUND)
    h = await Harness.open(storage_factory(), None, BACKGROUND)
    c = await h.root(BACKGROUND)
    with pytest.raises(RuntimeError, match=r"tx\.load"):
        await c.commit(lambda tx, ctx: tx.config(other.id).set({"profile": "p"}), BACKGROUND)

    async def set_other(tx: Transaction, ctx: Context) -> None:
        await tx.load(other.id)
        tx.config(other.id).set({"profile": "p"})

    await c.commit(set_other, BACKGROUND)
    reopened = await h.conversation(other.id, BACKGROUND)
    assert reopened is not None and (await reopened.config(BACKGROUND))["profile"] == "p"
    await h.close(BACKGROUND)
