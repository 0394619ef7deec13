"""The harness session facet through a loopback binding (docs/design/chord.md#built-in-services, #observe; issue 7 item 1).

A session facet (``harness_session_facet``) and a presentation facet that ``observe``s
``pi.conversation`` run in one facet host; the presentation sees exactly what a remote client
would (replica states, JSON methods). Nothing sleeps: tests wait on deliveries and events.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import pytest

from chord.context import BACKGROUND, Context
from chord.delta.apply import apply_immutable
from chord.facets import FacetEnvironment, FacetHost, create_facet_host, define_facet
from chord.remote import LoopbackServiceSource, ServiceProviderUpdate, ServiceStateUpdate
from chord.state import Delivery
from pico3 import ConversationService, HarnessService, harness_session_facet
from pico3.facets.bridge import BridgeFailure
from pico3.facets.session import SessionHarness
from pico3.harness import Harness
from pico3.kernel.view import Envelope
from pico3.storage.memory import MemoryStorage

TIMEOUT = 10


class Changes:
    """A waitable 'something changed' signal."""

    def __init__(self) -> None:
        self._event = anyio.Event()

    def notify(self) -> None:
        event, self._event = self._event, anyio.Event()
        event.set()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        with anyio.fail_after(TIMEOUT):
            while not predicate():
                await self._event.wait()


@dataclass(eq=False)
class Observed:
    """One instance as a presentation observed it, with every delivery of its view."""

    facade: Any
    changes: Changes
    deliveries: list[tuple[str, int, Any]] = field(default_factory=list[tuple[str, int, Any]])
    closed: bool = False

    def deliver(self, value: Any, ctx: Context, delivery: Delivery) -> None:
        self.deliveries.append((delivery.kind, delivery.sequence, value))
        self.changes.notify()

    @property
    def value(self) -> Any:
        return self.deliveries[-1][2]

    @property
    def conversation_id(self) -> int:
        return self.deliveries[0][2]["conversation"]["id"]

    def updates(self) -> list[tuple[int, Any]]:
        return [(seq, value) for kind, seq, value in self.deliveries if kind == "update"]


class Presentation:
    """A presentation facet that observes ``pi.conversation`` and records what it sees."""

    def __init__(self, facet_id: str = "presentation") -> None:
        self.changes = Changes()
        self.seen: list[Observed] = []
        self.facet = define_facet(facet_id, self._setup)

    def _setup(self, env: FacetEnvironment) -> None:
        async def on_instance(instance: Any, ctx: Context) -> None:
            observed = Observed(instance, self.changes)
            stop = instance.view.subscribe(observed.deliver)  # hydrates inline
            self.seen.append(observed)
            self.changes.notify()
            try:
                await ctx.wait_cancelled()
            finally:
                stop()
                observed.closed = True
                self.changes.notify()

        env.observe(ConversationService, on_instance)

    def live(self, conversation_id: int) -> Observed | None:
        for observed in reversed(self.seen):
            if not observed.closed and observed.conversation_id == conversation_id:
                return observed
        return None

    def incarnations(self, conversation_id: int) -> list[Observed]:
        return [o for o in self.seen if o.conversation_id == conversation_id]

    async def wait_live(self, conversation_id: int, *, nth: int = 1) -> Observed:
        def ready() -> bool:
            return (
                len(self.incarnations(conversation_id)) >= nth
                and self.live(conversation_id) is not None
            )

        await self.changes.wait_for(ready)
        observed = self.live(conversation_id)
        assert observed is not None
        return observed


@dataclass
class Session:
    host: FacetHost
    harness: SessionHarness
    presentation: Presentation
    errors: list[BaseException]

    @property
    def pico(self) -> Harness:
        return self.harness.harness

    async def root_id(self) -> int:
        return (await self.pico.root(BACKGROUND)).id


def _worker(box: dict[str, Any]) -> Any:
    def setup(env: FacetEnvironment) -> None:
        box["harness"] = env.use(HarnessService)

    return define_facet("worker", setup)


@asynccontextmanager
async def session(
    storage: MemoryStorage | None = None, *, queue_limit: int = 256, resume: bool = False
) -> AsyncIterator[Session]:
    storage = storage if storage is not None else MemoryStorage()
    errors: list[BaseException] = []
    presentation = Presentation()
    box: dict[str, Any] = {}
    async with anyio.create_task_group() as group:
        facet = harness_session_facet(
            lambda: storage, task_group=group, queue_limit=queue_limit, on_error=errors.append
        )
        async with create_facet_host(
            [facet, _worker(box), presentation.facet], on_error=errors.append
        ) as host:
            harness = box["harness"]
            if resume:
                await harness.resume(BACKGROUND)
            yield Session(host, harness, presentation, errors)


def _without_commit(view: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in view.items() if key != "commit"}


async def _write_note(pico: Harness, conversation_id: int, text: str) -> int:
    conversation = await pico.conversation(conversation_id, BACKGROUND)
    assert conversation is not None
    return await conversation.write("note", BACKGROUND, data={"text": text})


# -- hydration -------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_a_presentation_observes_the_hydrated_view_of_an_existing_conversation() -> None:
    storage = MemoryStorage()
    pico = await Harness.open(storage, None, BACKGROUND)
    root = await pico.root(BACKGROUND)
    await root.write("note", BACKGROUND, data={"text": "before the worker started"})
    await pico.close(BACKGROUND)

    async with session(storage) as s:
        observed = await s.presentation.wait_live(root.id)
        kind, _sequence, value = observed.deliveries[0]
        assert kind == "hydrate"
        assert value["conversation"] == {"id": root.id}
        assert [entry["data"] for entry in value["entries"]] == [
            {"text": "before the worker started"}
        ]
        assert value["commit"] == {"events": []}
        assert {"config", "inbox", "tasks", "plugins"} <= set(value)


@pytest.mark.anyio
async def test_the_view_equals_a_fresh_watch_snapshot_plus_commit_events() -> None:
    async with session() as s:
        root_id = await s.root_id()
        observed = await s.presentation.wait_live(root_id)
        conversation = await s.pico.conversation(root_id, BACKGROUND)
        assert conversation is not None
        watch = await conversation.watch(BACKGROUND)
        assert _without_commit(observed.value) == watch.view
        watch.stop()


# -- one commit, one sequence (docs/design/chord.md#observe) ----------------------------
@pytest.mark.anyio
async def test_the_view_sequence_advances_by_exactly_one_per_harness_commit() -> None:
    async with session() as s:
        root_id = await s.root_id()
        observed = await s.presentation.wait_live(root_id)
        conversation = await s.pico.conversation(root_id, BACKGROUND)
        assert conversation is not None
        envelopes: list[Envelope] = []
        watch = await conversation.watch(BACKGROUND)
        watch.start(envelopes.append)
        baseline = observed.deliveries[-1][1]
        folded = watch.view

        await observed.facade.write({"kind": "note", "data": {"n": 1}}, BACKGROUND)
        await conversation.write("note", BACKGROUND, data={"n": 2})
        await observed.facade.config_set({"keepRecent": 3}, BACKGROUND)
        await observed.facade.send({"content": "hello"}, BACKGROUND)
        await conversation.write("note", BACKGROUND, data={"n": 3})
        commits = len(envelopes)
        assert commits == 5

        await s.presentation.changes.wait_for(lambda: len(observed.updates()) == commits)
        updates = observed.updates()
        assert [sequence for sequence, _ in updates] == [
            baseline + index for index in range(1, commits + 1)
        ]
        for (_, value), envelope in zip(updates, envelopes, strict=True):
            folded = apply_immutable(folded, list(envelope.ops))
            assert value["commit"]["events"] == envelope.events
            assert _without_commit(value) == folded
        types = [event["type"] for event in updates[3][1]["commit"]["events"]]
        assert "input.placed" in types and "turn.started" in types
        watch.stop()


@pytest.mark.anyio
async def test_a_late_joining_presentation_hydrates_at_the_current_revision() -> None:
    async with session() as s:
        root_id = await s.root_id()
        first = await s.presentation.wait_live(root_id)
        for n in range(3):
            await _write_note(s.pico, root_id, f"early {n}")
        await s.presentation.changes.wait_for(lambda: len(first.updates()) == 3)

        late = Presentation("late")
        async with anyio.create_task_group() as group:
            source = LoopbackServiceSource(s.host.services, task_group=group)
            async with create_facet_host([late.facet], service_sources=[source]):
                joined = await late.wait_live(root_id)
                kind, sequence, value = joined.deliveries[0]
                assert kind == "hydrate"
                assert sequence == first.deliveries[-1][1]
                assert value == first.value
                assert [e["data"]["text"] for e in value["entries"]] == [
                    "early 0",
                    "early 1",
                    "early 2",
                ]
                await _write_note(s.pico, root_id, "after joining")
                await late.changes.wait_for(lambda: len(joined.updates()) == 1)
                assert joined.updates()[0][0] == sequence + 1
                assert joined.value["entries"][-1]["data"] == {"text": "after joining"}


# -- new conversations ----------------------------------------------------------------------------
@pytest.mark.anyio
async def test_a_fork_through_the_service_spawns_a_new_instance_before_returning() -> None:
    async with session() as s:
        root_id = await s.root_id()
        observed = await s.presentation.wait_live(root_id)
        await observed.facade.write({"kind": "note", "data": {"n": 1}}, BACKGROUND)
        await s.presentation.changes.wait_for(lambda: len(observed.value["entries"]) == 1)
        at = observed.value["entries"][0]["id"]

        child_id = await observed.facade.fork(at, {}, BACKGROUND)

        assert s.harness.bridge(child_id) is not None  # spawned before fork returned
        child = await s.presentation.wait_live(child_id)
        assert child.value["conversation"] == {
            "id": child_id,
            "parent": {"conversationId": root_id, "at": at},
        }
        assert [entry["data"] for entry in child.value["entries"]] == [{"n": 1}]
        await child.facade.write({"kind": "note", "data": {"child": True}}, BACKGROUND)
        await s.presentation.changes.wait_for(lambda: len(child.updates()) == 1)
        assert len(observed.updates()) == 1  # the parent saw only its own write


@pytest.mark.anyio
async def test_a_conversation_created_by_a_commit_gets_an_instance() -> None:
    async with session() as s:
        root = await s.pico.root(BACKGROUND)
        forked = await root.fork("start", BACKGROUND)  # straight through the harness
        child = await s.presentation.wait_live(forked.id)
        assert child.value["conversation"]["id"] == forked.id
        assert child.value["entries"] == []


# -- the bounded adapter --------------------------------------------------------------------------
@pytest.mark.anyio
async def test_overflow_closes_and_respawns_the_instance_and_every_commit_stands() -> None:
    async with session(queue_limit=4) as s:
        root_id = await s.root_id()
        first = await s.presentation.wait_live(root_id)
        bridge = s.harness.bridge(root_id)
        assert bridge is not None
        release = bridge.hold()  # the adapter stops publishing; envelopes queue

        ids = [await _write_note(s.pico, root_id, f"burst {n}") for n in range(6)]

        assert len(set(ids)) == 6  # every commit succeeded
        second = await s.presentation.wait_live(root_id, nth=2)
        await s.presentation.changes.wait_for(lambda: first.closed)
        release()
        assert first.updates() == []  # nothing was published by the failed incarnation
        kind, _, value = second.deliveries[0]
        assert kind == "hydrate"
        assert [e["data"]["text"] for e in value["entries"]] == [f"burst {n}" for n in range(6)]
        assert value["commit"] == {"events": []}
        assert bridge.closed and s.harness.bridge(root_id) is not bridge
        failures = [e for e in s.errors if isinstance(e, BridgeFailure)]
        assert len(failures) == 1 and "more than 4 envelopes" in str(failures[0])

        await second.facade.write({"kind": "note", "data": {"text": "after"}}, BACKGROUND)
        await s.presentation.changes.wait_for(lambda: len(second.updates()) == 1)
        assert second.updates()[0][0] == second.deliveries[0][1] + 1


@pytest.mark.anyio
async def test_the_default_bound_is_256_envelopes() -> None:
    async with session() as s:
        root_id = await s.root_id()
        await s.presentation.wait_live(root_id)
        bridge = s.harness.bridge(root_id)
        assert bridge is not None
        release = bridge.hold()
        for n in range(256):
            await _write_note(s.pico, root_id, str(n))
        assert bridge.pending == 256 and not bridge.closed
        await _write_note(s.pico, root_id, "one more")
        assert bridge.closed
        release()
        second = await s.presentation.wait_live(root_id, nth=2)
        assert len(second.value["entries"]) == 257


@pytest.mark.anyio
async def test_a_publish_error_closes_and_respawns_the_instance_and_the_commit_stands() -> None:
    async with session() as s:
        root_id = await s.root_id()
        first = await s.presentation.wait_live(root_id)
        raised: list[ServiceProviderUpdate] = []

        def broken_subscriber(update: ServiceProviderUpdate, ctx: Context) -> None:
            if isinstance(update, ServiceStateUpdate) and not raised:
                raised.append(update)
                raise RuntimeError("subscriber exploded")

        subscription = s.host.services.subscribe("pi.conversation", "keyed", broken_subscriber)
        subscription.activate()

        entry_input = await first.facade.write({"kind": "note", "data": {"n": 1}}, BACKGROUND)

        assert type(entry_input) is int
        second = await s.presentation.wait_live(root_id, nth=2)
        assert [e["data"] for e in second.value["entries"]] == [{"n": 1}]
        assert second.deliveries[0][0] == "hydrate"
        failures = [e for e in s.errors if isinstance(e, BridgeFailure)]
        assert len(failures) == 1 and "subscriber exploded" in str(failures[0])
        await second.facade.write({"kind": "note", "data": {"n": 2}}, BACKGROUND)
        await s.presentation.changes.wait_for(lambda: len(second.updates()) == 1)
        assert [e["data"] for e in second.value["entries"]] == [{"n": 1}, {"n": 2}]
        subscription.close()


# -- methods --------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_methods_reach_the_conversation() -> None:
    async with session() as s:
        root_id = await s.root_id()
        observed = await s.presentation.wait_live(root_id)
        facade = observed.facade

        await facade.write({"kind": "note", "data": {"n": 1}}, BACKGROUND)
        page = await facade.entries({"limit": 10}, BACKGROUND)
        assert [entry["data"] for entry in page] == [{"n": 1}]
        assert await facade.input_abort(10**6, BACKGROUND) == "not_found"

        assert await facade.reset(None, BACKGROUND) is None
        await s.presentation.changes.wait_for(
            lambda: [e["kind"] for e in observed.value["entries"]] == ["pi.reset"]
        )
        await facade.config_set({"keepRecent": 1}, BACKGROUND)
        await s.presentation.changes.wait_for(lambda: observed.value["config"]["keepRecent"] == 1)
        await facade.abort(BACKGROUND)  # nothing live: returns at once


@pytest.mark.anyio
async def test_bad_arguments_are_refused_with_the_field_named_and_nothing_written() -> None:
    async with session() as s:
        root_id = await s.root_id()
        observed = await s.presentation.wait_live(root_id)
        facade = observed.facade
        storage_before = await facade.entries({}, BACKGROUND)

        with pytest.raises(ValueError, match="unsupported field"):
            await facade.write({"kind": "note", "bogus": 1}, BACKGROUND)
        with pytest.raises(ValueError, match="missing required field"):
            await facade.write({"data": {}}, BACKGROUND)
        with pytest.raises(ValueError, match="whenBusy"):
            await facade.send({"content": "hi", "whenBusy": "later"}, BACKGROUND)
        with pytest.raises(ValueError, match="spec has unsupported field"):
            await facade.fork("start", {"seed": []}, BACKGROUND)
        with pytest.raises(ValueError, match=r"spec\.sections: must be a list"):
            await facade.fork("start", {"sections": {}}, BACKGROUND)
        with pytest.raises(ValueError, match=r"spec\.sections\[0\]\.rendered"):
            await facade.fork("start", {"sections": [{"key": "a", "value": 1}]}, BACKGROUND)
        with pytest.raises(ValueError, match=r"spec\.abort must be a boolean"):
            await facade.fork("start", {"abort": "yes"}, BACKGROUND)
        with pytest.raises(ValueError, match=r"scan\.limit"):
            await facade.entries({"limit": 0}, BACKGROUND)

        assert await facade.entries({}, BACKGROUND) == storage_before
        assert observed.updates() == []
        assert s.harness.bridge(root_id + 1) is None  # no fork happened


# -- lifecycle --------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_suspend_closes_instances_and_reopen_respawns_them_with_fresh_views() -> None:
    async with session(resume=True) as s:
        root_id = await s.root_id()
        first = await s.presentation.wait_live(root_id)

        await s.harness.suspend(BACKGROUND)
        await s.presentation.changes.wait_for(lambda: first.closed)
        assert not s.harness.is_open and s.harness.bridge(root_id) is None

        await s.harness.reopen(BACKGROUND)
        second = await s.presentation.wait_live(root_id, nth=2)
        await second.facade.write({"kind": "note", "data": {"n": 1}}, BACKGROUND)
        await s.presentation.changes.wait_for(lambda: len(second.updates()) == 1)


@pytest.mark.anyio
async def test_disposing_the_host_closes_every_instance_and_the_harness() -> None:
    storage = MemoryStorage()
    async with session(storage) as s:
        root_id = await s.root_id()
        observed = await s.presentation.wait_live(root_id)
    assert observed.closed
    reopened = await Harness.open(storage, None, BACKGROUND)  # the storage was released
    await reopened.close(BACKGROUND)


@pytest.mark.anyio
async def test_collapse_returns_a_task_id_and_the_view_shows_the_compaction() -> None:
    async with session() as s:
        root_id = await s.root_id()
        observed = await s.presentation.wait_live(root_id)
        facade = observed.facade
        for n in range(3):
            message = {"role": "user", "content": [{"type": "text", "text": f"m{n}"}]}
            await facade.write({"kind": "note", "model": [{**message, "timestamp": n}]}, BACKGROUND)
        await facade.config_set({"keepRecent": 0}, BACKGROUND)

        task_id = await facade.collapse("keep it short", BACKGROUND)

        assert type(task_id) is int
        await s.presentation.changes.wait_for(lambda: "compaction" in observed.value)
        assert observed.value["compaction"]["taskId"] == task_id
        assert [e["type"] for e in observed.value["commit"]["events"]] == ["compaction.started"]


@pytest.mark.anyio
async def test_a_feature_registers_through_pi_harness_and_again_after_reopen() -> None:
    installs: list[int] = []

    def feature(env: FacetEnvironment) -> None:
        harness = env.use(HarnessService)

        def install(pico: Harness) -> Callable[[], None]:
            installs.append(id(pico))
            token = pico.namespace("demo", {"rewindable": {"on": True}}, view=lambda s: s)
            return token.unregister

        env.on_activate(lambda: env.own(harness.add_registration(install)))

    storage = MemoryStorage()
    presentation = Presentation()
    box: dict[str, Any] = {}
    async with anyio.create_task_group() as group:
        facets = [
            harness_session_facet(lambda: storage, task_group=group),
            _worker(box),
            define_facet("feature", feature),
            presentation.facet,
        ]
        async with create_facet_host(facets):
            harness = box["harness"]
            await harness.resume(BACKGROUND)
            root_id = (await harness.harness.root(BACKGROUND)).id
            await presentation.wait_live(root_id)
            await harness.suspend(BACKGROUND)
            await harness.reopen(BACKGROUND)
            again = await presentation.wait_live(root_id, nth=2)
            assert again.value["plugins"] == {"demo": {"on": True}}
            assert len(installs) == 2 and installs[0] != installs[1]


@pytest.mark.anyio
async def test_reopening_the_raw_handle_respawns_instances_of_the_earlier_opening() -> None:
    async with session(resume=True) as s:
        root_id = await s.root_id()
        first = await s.presentation.wait_live(root_id)
        handle = s.harness.handle  # what pico3.registration_swap.reload() drives

        await handle.suspend(BACKGROUND)
        await handle.reopen(BACKGROUND)

        second = await s.presentation.wait_live(root_id, nth=2)
        assert first.closed
        await second.facade.write({"kind": "note", "data": {"n": 1}}, BACKGROUND)
        await s.presentation.changes.wait_for(lambda: len(second.updates()) == 1)


@pytest.mark.anyio
async def test_concurrent_writers_on_two_conversations_give_contiguous_sequences() -> None:
    async with session() as s:
        root_id = await s.root_id()
        root = await s.presentation.wait_live(root_id)
        child_id = await root.facade.fork("start", {}, BACKGROUND)
        child = await s.presentation.wait_live(child_id)
        views = {root_id: root, child_id: child}

        async def writer(conversation_id: int, name: str) -> None:
            for n in range(15):
                await _write_note(s.pico, conversation_id, f"{name}{n}")

        async with anyio.create_task_group() as group:
            for conversation_id in views:
                for name in "abc":
                    group.start_soon(writer, conversation_id, name)

        for conversation_id, observed in views.items():
            await s.presentation.changes.wait_for(lambda o=observed: len(o.updates()) == 45)
            start = observed.deliveries[0][1]
            assert [seq for seq, _ in observed.updates()] == list(range(start + 1, start + 46))
            conversation = await s.pico.conversation(conversation_id, BACKGROUND)
            assert conversation is not None
            watch = await conversation.watch(BACKGROUND)
            assert _without_commit(observed.value) == watch.view
            watch.stop()
            texts = [entry["data"]["text"] for entry in observed.value["entries"]]
            for name in "abc":
                assert [t for t in texts if t.startswith(name)] == [f"{name}{n}" for n in range(15)]


@pytest.mark.anyio
async def test_a_fork_spec_overrides_the_childs_rewindable_config() -> None:
    async with session() as s:
        root_id = await s.root_id()
        root = await s.presentation.wait_live(root_id)
        child_id = await root.facade.fork(
            "start", {"rewindable": {"keepRecent": 5}, "abort": True}, BACKGROUND
        )
        child = await s.presentation.wait_live(child_id)
        assert child.value["config"]["keepRecent"] == 5
        assert root.value["config"]["keepRecent"] != 5


@pytest.mark.anyio
async def test_a_fork_spec_carries_a_private_section_seed() -> None:
    async with session() as s:
        root_id = await s.root_id()
        root = await s.presentation.wait_live(root_id)
        seed = [{"key": "persona", "value": {"v": 1}, "rendered": "You review code."}]
        child_id = await root.facade.fork("start", {"sections": seed}, BACKGROUND)
        child = await s.presentation.wait_live(child_id)
        handle = await s.pico.conversation(child_id, BACKGROUND)
        assert handle is not None
        record = await handle.commit(lambda tx, _ctx: tx.conversation(child_id), BACKGROUND)
        assert [(x.key, x.value, x.rendered) for x in record.sections] == [
            ("persona", {"v": 1}, "You review code.")
        ]
        assert "You review code." not in json.dumps(child.value)  # private: never in the view
