"""Namespaces (docs/design/harness.md#namespaces, #entries)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from chord.context import BACKGROUND, Context
from pico3.harness import ConversationHandle, Harness
from pico3.kernel.documents import memo_once
from pico3.kernel.errors import StaleDefinition
from pico3.kernel.tx import Transaction
from pico3.session_data.entries import EntryRejected, define_entry
from pico3.storage import Storage

pytestmark = pytest.mark.anyio
StorageFactory = Callable[[], Storage]
USER = {"role": "user", "content": "note", "timestamp": 0}
PLAN = {"rewindable": {"planMode": {"enabled": False}}, "sticky": {"cache": {}}}


async def open_root(storage_factory: StorageFactory) -> tuple[Harness, ConversationHandle]:
    h = await Harness.open(storage_factory(), None, BACKGROUND)
    return h, await h.root(BACKGROUND)


def set_key(token: Any, key: str, value: Any) -> Callable[[Transaction, Context], None]:
    def build(tx: Transaction, ctx: Context) -> None:
        tx.plugins(token)[key] = value

    return build


def test_namespace_registration_validates_names_and_keys() -> None:
    from pico3.kernel.namespaces import NamespaceRegistry

    registry = NamespaceRegistry()
    for bad in ("pi.mine", "PI.x", "9abc", "has space", ""):
        with pytest.raises(ValueError):
            registry.register(bad, {})
    with pytest.raises(ValueError, match="exactly one document"):
        registry.register("dup", {"rewindable": {"k": 1}, "sticky": {"k": 2}})
    with pytest.raises(ValueError, match="unknown document"):
        registry.register("docs", {"global": {"k": 1}})
    with pytest.raises(ValueError, match="strict JSON"):
        registry.register("nan", {"sticky": {"k": float("nan")}})
    registry.register("ok", {})
    with pytest.raises(ValueError, match="already registered"):
        registry.register("ok", {})


async def test_writes_outside_the_namespace_slice_reject(
    storage_factory: StorageFactory,
) -> None:  # 18
    h, c = await open_root(storage_factory)
    plan = h.namespace("plan", PLAN)
    h.namespace("other", {"sticky": {"secret": 1}})
    seq = h.kernel.storage.seq
    with pytest.raises(KeyError, match="declares no key 'unknown'"):
        await c.commit(set_key(plan, "unknown", 1), BACKGROUND)
    with pytest.raises(KeyError, match="declares no key 'secret'"):
        await c.commit(set_key(plan, "secret", 1), BACKGROUND)
    with pytest.raises(KeyError, match="declares no key 'thinkingLevel'"):
        await c.commit(set_key(plan, "thinkingLevel", "high"), BACKGROUND)
    with pytest.raises(TypeError, match="keys are fixed"):
        await c.commit(lambda tx, ctx: tx.plugins(plan).__delitem__("cache"), BACKGROUND)
    assert h.kernel.storage.seq == seq
    await h.close(BACKGROUND)


async def test_stale_namespace_token_rejects(storage_factory: StorageFactory) -> None:  # 19
    h, c = await open_root(storage_factory)
    old = h.namespace("plan", PLAN)
    old.unregister()
    with pytest.raises(StaleDefinition):
        await c.commit(lambda tx, ctx: tx.plugins(old), BACKGROUND)
    with pytest.raises(StaleDefinition):
        await c.commit(lambda tx, ctx: tx.emit(old, "x", 1), BACKGROUND)
    replaced = h.namespace("plan", PLAN)
    replaced_again = replaced
    replaced.unregister()
    newest = h.namespace("plan", PLAN)
    with pytest.raises(StaleDefinition):
        await c.commit(lambda tx, ctx: tx.plugins(replaced_again), BACKGROUND)
    await c.commit(lambda tx, ctx: tx.emit(newest, "ok"), BACKGROUND)
    await h.close(BACKGROUND)


async def test_a_token_retained_inside_a_builder_goes_stale_when_replaced(
    storage_factory: StorageFactory,
) -> None:  # 19
    h, c = await open_root(storage_factory)
    first = h.namespace("plan", PLAN)

    def builder(tx: Transaction, ctx: Context) -> None:
        view = tx.plugins(first)
        first.unregister()
        h.namespace("plan", PLAN)
        view["cache"] = {"x": "1"}

    with pytest.raises(StaleDefinition):
        await c.commit(builder, BACKGROUND)
    await h.close(BACKGROUND)


async def test_unregister_twice_is_harmless_and_spares_a_newer_registration(
    storage_factory: StorageFactory,
) -> None:  # 20
    h, c = await open_root(storage_factory)
    first = h.namespace("plan", PLAN)
    first.unregister()
    second = h.namespace("plan", PLAN)
    first.unregister()
    first.unregister()
    assert second.alive and not first.alive
    await c.commit(set_key(second, "cache", {"k": "v"}), BACKGROUND)
    second.unregister()
    second.unregister()
    assert h.kernel.namespaces.current("plan") is None
    await h.close(BACKGROUND)


async def test_reregistering_keeps_values_and_memos_and_seeds_new_keys(
    storage_factory: StorageFactory,
) -> None:  # 21
    h, c = await open_root(storage_factory)
    first = h.namespace("plan", PLAN)

    def write(tx: Transaction, ctx: Context) -> Any:
        tx.plugins(first)["planMode"]["enabled"] = True
        return memo_once(tx.plugins(first)["cache"], "decision", "approved")

    assert await c.commit(write, BACKGROUND) == "approved"
    first.unregister()
    await h.close(BACKGROUND)

    h = await Harness.open(storage_factory(), None, BACKGROUND)
    c = await h.root(BACKGROUND)
    second = h.namespace(
        "plan",
        {"rewindable": {"planMode": {"enabled": False}, "level": None}, "sticky": {"cache": {}}},
    )

    def read(tx: Transaction, ctx: Context) -> Any:
        view = tx.plugins(second)
        return (
            view["planMode"].to_plain(),
            view["level"],
            memo_once(view["cache"], "decision", "denied"),
        )

    assert await c.commit(read, BACKGROUND) == ({"enabled": True}, None, "approved")
    rewindable = await c.rewindable(BACKGROUND)
    assert rewindable["plugins"]["plan"] == {"planMode": {"enabled": True}, "level": None}
    await h.close(BACKGROUND)


async def test_removed_keys_stay_as_inert_stored_data(storage_factory: StorageFactory) -> None:
    h, c = await open_root(storage_factory)
    first = h.namespace("plan", {"sticky": {"old": 1, "kept": 2}})
    await c.commit(set_key(first, "old", 10), BACKGROUND)
    first.unregister()
    second = h.namespace("plan", {"sticky": {"kept": 2}})
    with pytest.raises(KeyError):
        await c.commit(lambda tx, ctx: tx.plugins(second)["old"], BACKGROUND)
    assert (await c.sticky(BACKGROUND))["plugins"]["plan"]["old"] == 10
    await h.close(BACKGROUND)


async def test_memo_once_stores_none_as_a_value(storage_factory: StorageFactory) -> None:  # 2
    h, c = await open_root(storage_factory)
    ns = h.namespace("memo", {"sticky": {"slot": {}}})

    def memo(candidate: Any) -> Callable[[Transaction, Context], Any]:
        return lambda tx, ctx: memo_once(tx.plugins(ns)["slot"], "k", candidate)

    assert await c.commit(memo(None), BACKGROUND) is None
    assert await c.commit(memo("later"), BACKGROUND) is None
    assert (await c.sticky(BACKGROUND))["plugins"]["memo"]["slot"]["memos"] == {"k": None}
    await h.close(BACKGROUND)


async def test_memo_once_concurrent_writers_share_one_winner(
    storage_factory: StorageFactory,
) -> None:  # 1
    import anyio

    h, c = await open_root(storage_factory)
    ns = h.namespace("memo", {"sticky": {"slot": {}}})
    results: list[Any] = []

    async def race(candidate: str) -> None:
        results.append(
            await c.commit(
                lambda tx, ctx: memo_once(tx.plugins(ns)["slot"], "k", candidate), BACKGROUND
            )
        )

    async with anyio.create_task_group() as tg:
        for name in ("a", "b", "c"):
            tg.start_soon(race, name)
    assert len(results) == 3 and len(set(results)) == 1
    await h.close(BACKGROUND)


async def test_only_the_view_projection_reaches_the_view(
    storage_factory: StorageFactory,
) -> None:  # 22
    h, c = await open_root(storage_factory)
    plan = h.namespace("plan", PLAN, view=lambda s: {"planMode": s["planMode"]})
    h.namespace("hidden", {"sticky": {"secret": "k"}})
    watch = await c.watch(BACKGROUND)
    assert watch.view["plugins"] == {"plan": {"planMode": {"enabled": False}}}
    envelopes: list[Any] = []
    watch.start(envelopes.append)

    def build(tx: Transaction, ctx: Context) -> None:
        tx.plugins(plan)["cache"] = {"token": "s3cret"}
        tx.plugins(plan)["planMode"]["enabled"] = True
        tx.emit(plan, "toggled", {"enabled": True})

    await c.commit(build, BACKGROUND)
    [envelope] = envelopes
    assert envelope.ops == [("s", ("plugins", "plan", "planMode", "enabled"), True)]
    assert envelope.events == [{"type": "plugin.plan.toggled", "data": {"enabled": True}}]
    assert "s3cret" not in repr(envelope) and "hidden" not in repr(watch.view)
    await c.commit(set_key(plan, "cache", {"token": "other"}), BACKGROUND)
    assert len(envelopes) == 1  # an unprojected change is invisible: no envelope at all
    await h.close(BACKGROUND)


async def test_rewindable_slice_is_inherited_by_a_fork_and_readable_at_an_entry(
    storage_factory: StorageFactory,
) -> None:  # 23
    h, c = await open_root(storage_factory)
    plan = h.namespace("plan", PLAN)

    def toggle(value: bool) -> Callable[[Transaction, Context], int]:
        def build(tx: Transaction, ctx: Context) -> int:
            tx.plugins(plan)["planMode"]["enabled"] = value
            return tx.write(c.id, "ci.mark")

        return build

    await c.commit(toggle(True), BACKGROUND)
    at = (await c.commit(lambda tx, ctx: tx.newest_entry(c.id), BACKGROUND)).id
    await c.commit(toggle(False), BACKGROUND)

    as_of = await c.commit(lambda tx, ctx: tx.rewindable_as_of(c.id, at), BACKGROUND)
    assert as_of["plugins"]["plan"]["planMode"] == {"enabled": True}
    fork = await c.fork(at, BACKGROUND)
    assert fork.id != c.id
    enabled = await fork.commit(lambda tx, ctx: tx.plugins(plan)["planMode"]["enabled"], BACKGROUND)
    assert enabled is True
    sticky = await fork.sticky(BACKGROUND)  # fresh: only declared defaults, nothing inherited
    assert sticky["plugins"] == {"plan": {"cache": {}}}
    assert sticky["followUpMode"] == "one-at-a-time" and "inbox" not in sticky
    assert [e.id for e in (await fork.context(BACKGROUND)).entries][-1] == at
    await h.close(BACKGROUND)
    h2 = await Harness.open(storage_factory(), None, BACKGROUND)
    reopened = await h2.conversation(fork.id, BACKGROUND)
    assert reopened is not None
    assert (await reopened.rewindable(BACKGROUND))["plugins"]["plan"]["planMode"] == {
        "enabled": True
    }
    await h2.close(BACKGROUND)


async def test_write_of_reserved_kinds_rejects_even_when_types_are_bypassed(
    storage_factory: StorageFactory,
) -> None:  # 25
    h, c = await open_root(storage_factory)
    seq = h.kernel.storage.seq
    for kind in ("pi.user", "pi.assistant", "pi.reset", "pi.summary", "pi.nope"):
        with pytest.raises(EntryRejected, match="reserved for core"):
            await c.write(kind, BACKGROUND, model=[USER])
    fake = define_entry("ci.ok")
    fake.kind = "pi.user"  # a cast/monkeypatch past the witness
    with pytest.raises(EntryRejected):
        await c.write(fake, BACKGROUND, model=[USER])
    assert h.kernel.storage.seq == seq
    notice = await c.write("pi.notice", BACKGROUND, model=[USER])
    assert notice > 0
    await h.close(BACKGROUND)


async def test_pi_notice_with_head_or_edits_rejects(storage_factory: StorageFactory) -> None:  # 26
    h, c = await open_root(storage_factory)
    seq = h.kernel.storage.seq
    attempts: list[dict[str, Any]] = [
        {"model": [USER], "head": "self"},
        {"model": [USER], "edits": [{"target": 1, "action": "omit"}]},
        {"model": [USER, USER]},
        {},
    ]
    for fields in attempts:
        with pytest.raises(EntryRejected):
            await c.commit(lambda tx, ctx, f=fields: tx.write(c.id, "pi.notice", **f), BACKGROUND)
    assert h.kernel.storage.seq == seq
    await h.close(BACKGROUND)


async def test_newest_entry_filters_by_witness(storage_factory: StorageFactory) -> None:
    h, c = await open_root(storage_factory)
    ci = define_entry("ci.result")
    await c.write(ci, BACKGROUND, data={"run": 812, "ok": False}, model=[USER])
    await c.write("ci.other", BACKGROUND)
    last = await c.commit(lambda tx, ctx: tx.newest_entry(c.id, ci), BACKGROUND)
    assert last is not None and ci.is_(last) and last.data == {"run": 812, "ok": False}
    await h.close(BACKGROUND)
