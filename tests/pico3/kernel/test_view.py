"""The conversation view, envelopes and watches (docs/design/view.md)."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from chord.context import BACKGROUND, Context
from chord.delta.apply import apply_immutable
from pico3.harness import ConversationHandle, Harness, HarnessOptions
from pico3.kernel.errors import Closed
from pico3.kernel.tx import Authority, Transaction
from pico3.kernel.view import BUFFER_LIMIT, Envelope
from pico3.session_data.entries import NewEntry
from pico3.storage import Storage

pytestmark = pytest.mark.anyio
StorageFactory = Callable[[], Storage]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 0}


async def open_root(
    storage_factory: StorageFactory, **options: Any
) -> tuple[Harness, ConversationHandle]:
    h = await Harness.open(storage_factory(), HarnessOptions(**options), BACKGROUND)
    return h, await h.root(BACKGROUND)


async def core_append(h: Harness, cid: int, entry: NewEntry) -> int:
    def build(tx: Transaction, ctx: Context) -> int:
        return tx.append_entry(cid, entry).id

    return await h.kernel.commit(build, BACKGROUND, conversation_id=cid, authority=Authority.CORE)


def fold(view: dict[str, Any], envelopes: list[Envelope]) -> dict[str, Any]:
    for envelope in envelopes:
        view = apply_immutable(view, envelope.ops)
    return view


async def test_idle_write_appends_the_entry_with_entry_added(
    storage_factory: StorageFactory,
) -> None:
    h, c = await open_root(storage_factory)
    watch = await c.watch(BACKGROUND)
    got: list[Envelope] = []
    watch.start(got.append)
    input_id = await c.write("ci.note", BACKGROUND, data={"n": 1})
    [envelope] = got
    entry = {"id": input_id + 1, "conversationId": c.id, "kind": "ci.note", "data": {"n": 1}}
    assert envelope.revision == watch.revision + 1
    assert envelope.ops == [("p", ("entries",), 0, 0, [entry])]
    assert envelope.events == [{"type": "entry.added", "entry": entry}]
    assert envelope.to_json()["ops"] == [["p", ["entries"], 0, 0, [entry]]]
    await h.close(BACKGROUND)


async def test_head_entry_truncates_then_appends_with_head_moved(
    storage_factory: StorageFactory,
) -> None:
    h, c = await open_root(storage_factory)
    await c.write("ci.a", BACKGROUND)
    await c.write("ci.b", BACKGROUND)
    watch = await c.watch(BACKGROUND)
    got: list[Envelope] = []
    watch.start(got.append)
    reset = await core_append(h, c.id, NewEntry(kind="pi.reset", head="self"))
    [envelope] = got
    entry = {"id": reset, "conversationId": c.id, "kind": "pi.reset", "head": reset}
    assert envelope.ops == [("p", ("entries",), 0, 2, []), ("p", ("entries",), 0, 0, [entry])]
    assert [e["type"] for e in envelope.events] == ["entry.added", "head.moved"]
    fresh = await c.watch(BACKGROUND)
    assert fresh.view["entries"] == [entry] == fold(watch.view, got)["entries"]
    await h.close(BACKGROUND)


async def test_config_set_and_reset(storage_factory: StorageFactory) -> None:  # 134
    h, c = await open_root(storage_factory)
    watch = await c.watch(BACKGROUND)
    assert "model" not in watch.view["config"]
    got: list[Envelope] = []
    watch.start(got.append)
    model = {"provider": "faux", "modelId": "m1"}
    await c.set_config({"model": model, "thinkingLevel": "high", "followUpMode": "all"}, BACKGROUND)
    await c.reset_config(["model", "thinkingLevel", "followUpMode"], BACKGROUND)
    set_envelope, reset_envelope = got
    assert sorted(set_envelope.ops) == sorted(
        [
            ("s", ("config", "model"), model),
            ("s", ("config", "thinkingLevel"), "high"),
            ("s", ("config", "followUpMode"), "all"),
        ]
    )
    assert set_envelope.events == [
        {"type": "config.changed", "keys": ["model", "thinkingLevel", "followUpMode"]}
    ]
    assert sorted(reset_envelope.ops) == sorted(
        [
            ("d", ("config", "model")),
            ("s", ("config", "thinkingLevel"), "off"),
            ("s", ("config", "followUpMode"), "one-at-a-time"),
        ]
    )
    assert await c.config(BACKGROUND) == watch.view["config"]
    await h.close(BACKGROUND)


async def test_invalid_config_writes_nothing(storage_factory: StorageFactory) -> None:
    from pico3.session_data.config import ConfigRejected

    h, c = await open_root(storage_factory)
    seq = h.kernel.storage.seq
    with pytest.raises(ConfigRejected, match=r"config\.retry"):
        await c.set_config({"thinkingLevel": "high", "retry": {"enabled": True}}, BACKGROUND)
    with pytest.raises(ConfigRejected, match="unknown key"):
        await c.set_config({"bogus": 1}, BACKGROUND)
    assert h.kernel.storage.seq == seq
    assert (await c.config(BACKGROUND))["thinkingLevel"] == "off"
    await h.close(BACKGROUND)


async def test_snapshot_equals_fold_of_all_envelopes(
    storage_factory: StorageFactory,
) -> None:  # 130
    h, c = await open_root(storage_factory)
    plan = h.namespace(
        "plan",
        {"rewindable": {"mode": "off", "items": []}, "session": {"count": 0}},
        view=lambda s: s,
    )
    watch = await c.watch(BACKGROUND)
    got: list[Envelope] = []
    watch.start(got.append)
    rng = random.Random(7)
    for step in range(60):
        choice = rng.randrange(6)
        if choice == 0:
            await c.write("ci.note", BACKGROUND, model=[user(f"m{step}")])
        elif choice == 1:
            await core_append(h, c.id, NewEntry(kind="pi.reset", head="self"))
        elif choice == 2:
            level = rng.choice(["off", "low", "high"])
            await c.set_config({"thinkingLevel": level}, BACKGROUND)
        elif choice == 3:

            def items(tx: Transaction, ctx: Context, n: int = step) -> None:
                xs = tx.plugins(plan)["items"]
                if len(xs) and rng.random() < 0.5:
                    del xs[rng.randrange(len(xs))]
                else:
                    xs.insert(rng.randrange(len(xs) + 1), {"n": n})

            await c.commit(items, BACKGROUND)
        elif choice == 4:

            def count(tx: Transaction, ctx: Context) -> None:
                view = tx.plugins(plan)
                view["count"] = view["count"] + 1
                view["mode"] = view["mode"] + "!"

            await c.commit(count, BACKGROUND)
        else:
            await c.reset_config(["thinkingLevel"], BACKGROUND)
        fresh = await c.watch(BACKGROUND)
        assert fold(watch.view, got) == fresh.view
        assert fresh.revision == watch.revision + len(got)
        fresh.stop()
    assert [e.revision for e in got] == list(range(1, len(got) + 1))
    await h.close(BACKGROUND)


async def test_capture_and_commit_race_leaves_no_gap_or_duplicate(
    storage_factory: StorageFactory,
) -> None:  # 131
    h, c = await open_root(storage_factory)
    watches: list[Any] = []

    async def writer() -> None:
        for n in range(20):
            await c.write("ci.n", BACKGROUND, data={"n": n})

    async def watcher() -> None:
        for _ in range(10):
            watch = await c.watch(BACKGROUND)
            got: list[Envelope] = []
            watch.start(got.append)
            watches.append((watch, got))
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)
        tg.start_soon(watcher)
    final = await c.watch(BACKGROUND)
    for watch, got in watches:
        assert [e.revision for e in got] == list(
            range(watch.revision + 1, watch.revision + 1 + len(got))
        )
        assert fold(watch.view, got) == final.view
    await h.close(BACKGROUND)


async def test_buffer_overflow_before_start_closes_the_watch(
    storage_factory: StorageFactory,
) -> None:  # 132
    h, c = await open_root(storage_factory)
    lazy = await c.watch(BACKGROUND)
    ok = await c.watch(BACKGROUND)
    for n in range(BUFFER_LIMIT):
        await c.write("ci.n", BACKGROUND, data={"n": n})
    got: list[Envelope] = []
    ok.start(got.append)
    assert len(got) == BUFFER_LIMIT
    await c.write("ci.n", BACKGROUND, data={"n": -1})
    assert lazy.closed and not ok.closed
    with pytest.raises(Closed, match="buffered"):
        lazy.start(got.append)
    assert len(got) == BUFFER_LIMIT + 1
    await h.close(BACKGROUND)


async def test_listener_raise_closes_only_that_watch(
    storage_factory: StorageFactory,
) -> None:  # 132
    reported: list[BaseException] = []
    h, c = await open_root(storage_factory, on_report=reported.append)
    bad = await c.watch(BACKGROUND)
    good = await c.watch(BACKGROUND)

    def explode(envelope: Envelope) -> None:
        raise RuntimeError("listener bug")

    got: list[Envelope] = []
    bad.start(explode)
    good.start(got.append)
    await c.write("ci.a", BACKGROUND)
    await c.write("ci.b", BACKGROUND)
    assert bad.closed and not good.closed
    assert len(got) == 2 and got[0] is not got[1]
    assert [type(e) for e in reported] == [RuntimeError]
    bad.stop()
    good.stop()
    good.stop()
    await c.write("ci.c", BACKGROUND)
    assert len(got) == 2  # nothing after stop
    await h.close(BACKGROUND)


async def test_same_envelope_object_fans_out_to_every_watch(
    storage_factory: StorageFactory,
) -> None:
    h, c = await open_root(storage_factory)
    first, second = await c.watch(BACKGROUND), await c.watch(BACKGROUND)
    a: list[Envelope] = []
    b: list[Envelope] = []
    first.start(a.append)
    second.start(b.append)
    await c.write("ci.a", BACKGROUND)
    assert a[0] is b[0]
    await h.close(BACKGROUND)
    assert first.closed and second.closed


async def test_fork_view_includes_inherited_target_and_keeps_both_heads(
    storage_factory: StorageFactory,
) -> None:  # 133
    h, c = await open_root(storage_factory)
    await c.write("ci.p0", BACKGROUND)
    older_head = await core_append(h, c.id, NewEntry(kind="pi.reset", head="self"))
    p2 = (await c.write("ci.p2", BACKGROUND)) + 1
    fork = await c.fork(p2, BACKGROUND)
    await c.write("ci.parent_after_fork", BACKGROUND)  # invisible to the fork
    live = await fork.watch(BACKGROUND)
    got: list[Envelope] = []
    live.start(got.append)
    await fork.write("ci.f1", BACKGROUND)
    handoff = await core_append(
        h, fork.id, NewEntry(kind="pi.handoff", model=[user("h")], head=older_head)
    )
    await fork.write("ci.f2", BACKGROUND)
    captured = await fork.watch(BACKGROUND)
    ids = [e["id"] for e in captured.view["entries"]]
    assert ids[0] == older_head and p2 in ids and handoff in ids
    assert ids == sorted(ids)
    assert all(e["kind"] != "ci.parent_after_fork" for e in captured.view["entries"])
    assert captured.view["conversation"] == {
        "id": fork.id,
        "parent": {"conversationId": c.id, "at": p2},
    }
    assert fold(live.view, got) == captured.view
    await h.close(BACKGROUND)


async def test_raising_projection_is_reported_and_the_commit_stands(
    storage_factory: StorageFactory,
) -> None:
    reported: list[BaseException] = []
    h, c = await open_root(storage_factory, on_report=reported.append)

    def projection(s: dict[str, Any]) -> Any:
        if s["n"] > 0:
            raise ValueError("projection bug")
        return s

    ns = h.namespace("proj", {"sticky": {"n": 0}}, view=projection)
    watch = await c.watch(BACKGROUND)
    assert watch.view["plugins"] == {"proj": {"n": 0}}
    got: list[Envelope] = []
    watch.start(got.append)
    await c.commit(lambda tx, ctx: tx.plugins(ns).__setitem__("n", 1), BACKGROUND)
    assert (await c.sticky(BACKGROUND))["plugins"]["proj"]["n"] == 1
    assert got[0].ops == [("d", ("plugins", "proj"))]
    assert [type(e) for e in reported] == [ValueError]
    await h.close(BACKGROUND)


async def test_events_only_commit_is_one_envelope_without_ops(
    storage_factory: StorageFactory,
) -> None:
    h, c = await open_root(storage_factory)
    ns = h.namespace("evt", {})
    watch = await c.watch(BACKGROUND)
    got: list[Envelope] = []
    watch.start(got.append)

    def both(tx: Transaction, ctx: Context) -> None:
        tx.emit(ns, "first", [1])
        tx.emit_event(c.id, {"type": "warning", "source": "test", "message": "m"})

    with pytest.raises(Exception, match="core authority"):
        await c.commit(both, BACKGROUND)
    await c.commit(lambda tx, ctx: tx.emit(ns, "first", [1]), BACKGROUND)
    await h.kernel.commit(
        lambda tx, ctx: tx.emit_event(c.id, {"type": "warning", "source": "test", "message": "m"}),
        BACKGROUND,
        authority=Authority.CORE,
    )
    assert [(e.ops, e.events) for e in got] == [
        ([], [{"type": "plugin.evt.first", "data": [1]}]),
        ([], [{"type": "warning", "source": "test", "message": "m"}]),
    ]
    with pytest.raises(ValueError, match="event name"):
        await c.commit(lambda tx, ctx: tx.emit(ns, "bad name"), BACKGROUND)
    with pytest.raises(ValueError, match="strict JSON"):
        await c.commit(lambda tx, ctx: tx.emit(ns, "x", {1: 2}), BACKGROUND)
    assert len(got) == 2
    await h.close(BACKGROUND)


async def test_a_commit_to_another_conversation_reaches_only_its_watchers(
    storage_factory: StorageFactory,
) -> None:
    h, c = await open_root(storage_factory)
    other = await c.fork("start", BACKGROUND)
    mine = await c.watch(BACKGROUND)
    theirs = await other.watch(BACKGROUND)
    a: list[Envelope] = []
    b: list[Envelope] = []
    mine.start(a.append)
    theirs.start(b.append)
    await c.commit(lambda tx, ctx: tx.write(other.id, "ci.cross"), BACKGROUND)
    assert a == [] and len(b) == 1 and b[0].events[0]["entry"]["conversationId"] == other.id
    await h.close(BACKGROUND)


async def test_a_watch_snapshot_is_its_own_and_no_later_commit_or_other_holder_reaches_it(
    storage_factory: StorageFactory,
) -> None:
    h, c = await open_root(storage_factory)
    await c.write("ci.a", BACKGROUND, data={"n": 1})
    await c.write("ci.b", BACKGROUND, data={"n": 2})
    first = await c.watch(BACKGROUND)
    second = await c.watch(BACKGROUND)
    before = copy.deepcopy(first.view)
    assert first.view["entries"][-1]["data"] == {"n": 2}
    # a holder that vandalises its snapshot reaches neither another snapshot nor the view
    first.view["entries"][-1]["data"]["n"] = "vandalized"
    first.view["config"]["thinkingLevel"] = "vandalized"
    assert second.view == before
    entry_id = second.view["entries"][-1]["id"]
    stored = await c.commit(lambda tx, ctx: tx.entry(entry_id), BACKGROUND)
    assert stored.data == {"n": 2}
    first.view.clear()
    first.view.update(copy.deepcopy(before))
    # the kernel writes its view in place: a config key, an appended entry, a head that drops
    # every entry before it
    got: list[Envelope] = []
    first.start(got.append)
    await c.set_config({"thinkingLevel": "high"}, BACKGROUND)
    await c.write("ci.c", BACKGROUND)
    reset = await core_append(h, c.id, NewEntry(kind="pi.reset", head="self"))
    assert first.view == before and second.view == before
    later = await c.watch(BACKGROUND)
    assert [entry["id"] for entry in later.view["entries"]] == [reset]
    assert later.view["config"]["thinkingLevel"] == "high"
    assert fold(before, got) == later.view
    await h.close(BACKGROUND)
