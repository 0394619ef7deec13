"""Owned conversations (subagents): create, send, wait, abort through foreground owners, reach
limited to the owned subtree, config isolation (docs/design/harness.md#owned-conversations, #abort,
docs/design/decisions.md#d8-g5)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from msgspec import UNSET

from chord.context import BACKGROUND, Context
from pico3.harness import Harness
from pico3.kernel.errors import Forbidden
from pico3.kernel.tx import Transaction
from pico3.models.faux import faux_pause, faux_response
from pico3.owned import OwnedConversation, OwnedSpec, create_owned, create_owned_conversation
from pico3.storage.records import Task
from pico3.tasks import Completion, Done, Next, Runtime, Step, TaskInfo, TaskKind, define_task

pytestmark = pytest.mark.anyio
ctx = BACKGROUND
MODEL = {"provider": "faux", "modelId": "faux-1"}


def _field(value: Any) -> Any:
    return None if value is UNSET else value


async def _no_abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
    return lambda tx, current, ctx: None


def supervisor(
    *, abort_child: bool = False, capture: list[OwnedConversation] | None = None
) -> TaskKind:
    """Creates its child atomically with its first checkpoint, asks it one question (with a
    request id, so a re-run sends the same input) and completes with the input's outcome."""

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
        spec = task.input.get("spec")

        async def create(tx: Transaction, current: Task, _ctx: Context) -> dict[str, Any]:
            return {"phase": "asking", "child": await create_owned(tx, current, spec)}

        return Next(create)

    async def asking(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
        assert task.checkpoint is not None
        child = await OwnedConversation.attach(rt, task.checkpoint["child"], ctx)
        if capture is not None:
            capture.append(child)
        sent = await child.send(task.input["question"], ctx, request_id=f"{task.id}:ask")
        if abort_child:
            await child.abort(ctx)
        record = await sent.wait(ctx)
        result = {
            "status": record.status,
            "reason": _field(record.reason),
            "answer": _field(record.answer),
        }
        return Done(lambda tx, cur, c: Completion.completed(result))

    return define_task(
        "test.supervisor", initial=initial, phases={"asking": asking}, abort=_no_abort
    )


def intruder() -> TaskKind:
    """Tries to reach the conversation named in its input; completes with what happened."""

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
        try:
            child = await OwnedConversation.attach(rt, task.input["target"], ctx)
            await child.send("let me in", ctx)
        except Forbidden as exc:
            refused = str(exc)
            return Done(lambda tx, cur, c: Completion.completed({"refused": refused}))
        return Done(lambda tx, cur, c: Completion.completed({"refused": None}))

    return define_task("test.intruder", initial=initial, phases={}, abort=_no_abort)


async def start(h: Harness, kind: TaskKind, input: Any, *, background: bool = False) -> int:
    root = await h.root(ctx)
    return await root.commit(lambda tx, _c: tx.create_task(kind, input, background=background), ctx)


async def child_of(h: Harness, task_id: int, until: Any) -> int:
    async def check() -> int | None:
        task = await h.get_task(task_id, ctx)
        checkpoint = None if task is None else _field(task.checkpoint)
        return None if not checkpoint else checkpoint.get("child")

    return await until(h, check)


async def live_model_call(h: Harness, conversation_id: int, until: Any) -> Task:
    async def check() -> Task | None:
        tasks = await h.kernel.commit(lambda tx, _c: tx.tasks(conversation_id=conversation_id), ctx)
        live = [t for t in tasks if t.kind == "pi.generation" and t.status != "terminal"]
        return live[0] if live else None

    return await until(h, check)


async def entry_text(h: Harness, entry_id: int) -> str:
    entry = await h.kernel.commit(lambda tx, _c: tx.entry(entry_id), ctx)
    return json.dumps(entry.model)


async def test_a_task_creates_an_owned_conversation_sends_and_waits_for_the_answer(
    open_harness: Any,
) -> None:
    kind = supervisor()
    async with open_harness([faux_response("child says hi")], [kind]) as h:
        spec = {"rewindable": {"model": MODEL}}
        task_id = await start(h, kind, {"question": "hello?", "spec": spec})
        task = await h.wait_for_task(task_id, ctx)
        assert task.outcome is not UNSET and task.outcome["status"] == "completed"
        result = task.outcome["result"]
        assert result["status"] == "done"
        assert "child says hi" in await entry_text(h, result["answer"])
        (child,) = task.owns
        assert h.kernel.conversations[child].owner == task_id
        assert await h.conversation(child, ctx) is not None  # the child has its own handle


async def test_an_owned_child_never_inherits_core_rewindable_config(open_harness: Any) -> None:
    # docs/design/decisions.md#d8-g5: the parent's model and thinking level stay behind; without a seeded model the
    # child's generation fails no_model instead of running on the parent's model.
    kind = supervisor()
    async with open_harness([faux_response("never used")], [kind]) as h:
        root = await h.root(ctx)
        await root.set_config({"model": MODEL, "thinkingLevel": "high"}, ctx)
        await root.write("pi.notice", ctx, model=[{"role": "user", "content": "parent fact"}])
        task_id = await start(h, kind, {"question": "q", "spec": {"inherit": True}})
        task = await h.wait_for_task(task_id, ctx)
        assert task.outcome is not UNSET
        assert task.outcome["result"]["status"] == "unanswered"
        child = await h.conversation(task.owns[0], ctx)
        assert child is not None
        config = await child.config(ctx)
        assert "model" not in config
        assert config["thinkingLevel"] == "off"
        assert "parent fact" in json.dumps([m for m in (await child.context(ctx)).messages])


async def test_an_inheriting_child_keeps_plugin_slices_and_its_seed(open_harness: Any) -> None:
    # docs/design/decisions.md#d8-g5: plugin slices are inherited from the fork point; seeded config applies; sticky
    # config starts at its defaults.
    kind = supervisor()
    async with open_harness([faux_response("seeded answer")], [kind]) as h:
        plan = h.namespace("plan", {"rewindable": {"enabled": False}})
        root = await h.root(ctx)
        await root.set_config({"model": {"provider": "elsewhere", "modelId": "x"}}, ctx)
        await root.set_config({"followUpMode": "all"}, ctx)
        await root.commit(lambda tx, _c: tx.plugins(plan).__setitem__("enabled", True), ctx)
        await root.write("pi.notice", ctx, model=[{"role": "user", "content": "context"}])
        spec = OwnedSpec(inherit=True, rewindable={"model": MODEL, "profile": "reviewer"})
        as_json = {"inherit": spec.inherit, "rewindable": dict(spec.rewindable)}
        task_id = await start(h, kind, {"question": "q", "spec": as_json})
        task = await h.wait_for_task(task_id, ctx)
        assert task.outcome is not UNSET and task.outcome["result"]["status"] == "done"
        child = await h.conversation(task.owns[0], ctx)
        assert child is not None
        config = await child.config(ctx)
        assert config["model"] == MODEL
        assert config["profile"] == "reviewer"
        assert config["followUpMode"] == "one-at-a-time"
        assert await child.commit(lambda tx, _c: tx.plugins(plan)["enabled"], ctx) is True


async def test_conversation_abort_reaches_the_subtree_through_a_foreground_owner(
    open_harness: Any, until: Any
) -> None:
    # docs/design/harness.md#abort: marking walks through live foreground owners into owned children.
    gate = anyio.Event()
    kind = supervisor()
    async with open_harness([faux_response(faux_pause(gate), "late")], [kind]) as h:
        task_id = await start(h, kind, {"question": "q", "spec": {"rewindable": {"model": MODEL}}})
        child = await child_of(h, task_id, until)
        generation = await live_model_call(h, child, until)
        root = await h.root(ctx)
        await root.abort(ctx)  # returns once every marked task is terminal
        owner = await h.get_task(task_id, ctx)
        assert owner is not None and owner.outcome == {"status": "aborted", "result": None}
        reached = await h.get_task(generation.id, ctx)
        assert reached is not None and reached.status == "terminal"
        assert reached.outcome is not UNSET and reached.outcome["status"] == "aborted"


async def test_a_background_owner_keeps_its_child_running_through_a_conversation_abort(
    open_harness: Any, until: Any
) -> None:
    gate = anyio.Event()
    kind = supervisor()
    async with open_harness([faux_response(faux_pause(gate), "survived")], [kind]) as h:
        input = {"question": "q", "spec": {"rewindable": {"model": MODEL}}}
        task_id = await start(h, kind, input, background=True)
        child = await child_of(h, task_id, until)
        generation = await live_model_call(h, child, until)
        root = await h.root(ctx)
        await root.abort(ctx)
        still = await h.get_task(generation.id, ctx)
        assert still is not None and still.status != "terminal"
        gate.set()
        task = await h.wait_for_task(task_id, ctx)
        assert task.outcome is not UNSET and task.outcome["result"]["status"] == "done"
        assert "survived" in await entry_text(h, task.outcome["result"]["answer"])


async def test_an_owner_aborting_its_child_resolves_the_input_aborted(
    open_harness: Any,
) -> None:
    gate = anyio.Event()
    kind = supervisor(abort_child=True)
    async with open_harness([faux_response(faux_pause(gate), "never")], [kind]) as h:
        task_id = await start(h, kind, {"question": "q", "spec": {"rewindable": {"model": MODEL}}})
        task = await h.wait_for_task(task_id, ctx)
        assert task.outcome is not UNSET
        assert task.outcome["result"]["status"] == "unanswered"
        assert task.outcome["result"]["reason"] == "aborted"


async def test_a_task_cannot_reach_conversations_outside_its_owned_subtree(
    open_harness: Any,
) -> None:
    # not another task's child, not a sibling conversation, not its own.
    owner_kind, other = supervisor(), intruder()
    async with open_harness([faux_response("mine")], [owner_kind, other]) as h:
        owner = await start(
            h, owner_kind, {"question": "q", "spec": {"rewindable": {"model": MODEL}}}
        )
        done = await h.wait_for_task(owner, ctx)
        root = await h.root(ctx)
        for target in (done.owns[0], root.id):
            task_id = await start(h, other, {"target": target})
            task = await h.wait_for_task(task_id, ctx)
            assert task.outcome is not UNSET
            assert "not owned by task" in task.outcome["result"]["refused"]


async def test_a_captured_owned_handle_rejects_after_its_handler_returned(
    open_harness: Any,
) -> None:
    captured: list[OwnedConversation] = []
    kind = supervisor(capture=captured)
    async with open_harness([faux_response("ok")], [kind]) as h:
        task_id = await start(h, kind, {"question": "q", "spec": {"rewindable": {"model": MODEL}}})
        await h.wait_for_task(task_id, ctx)
        (handle,) = captured
        with pytest.raises(Forbidden):
            await handle.send("too late", ctx)


async def test_create_owned_conversation_from_a_handler_and_bad_specs_reject(
    open_harness: Any,
) -> None:
    seen: dict[str, Any] = {}

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
        spec = {"rewindable": {"thinkingLevel": "low"}, "sticky": {"followUpMode": "all"}}
        child = await create_owned_conversation(rt, spec, ctx)
        seen["child"] = child.id
        bad_specs = (
            {"rewindable": {"nope": 1}},
            {"sticky": {"model": MODEL}},
            {"colour": "red"},
            {"inherit": "yes"},
        )
        for bad in bad_specs:
            try:
                await create_owned_conversation(rt, bad, ctx)
            except ValueError as exc:
                seen.setdefault("errors", []).append(str(exc))
        return Done(lambda tx, cur, c: Completion.completed(None))

    kind = define_task("test.maker", initial=initial, phases={}, abort=_no_abort)
    async with open_harness([], [kind]) as h:
        task_id = await start(h, kind, None)
        task = await h.wait_for_task(task_id, ctx)
        assert task.owns == [seen["child"]]  # the rejected specs created nothing
        child = await h.conversation(seen["child"], ctx)
        assert child is not None
        config = await child.config(ctx)
        assert (config["thinkingLevel"], config["followUpMode"]) == ("low", "all")
    assert len(seen["errors"]) == 4
    assert "config.nope" in seen["errors"][0]
    assert "config.model" in seen["errors"][1]
    assert "colour" in seen["errors"][2]
    assert "inherit" in seen["errors"][3]


async def test_a_reopened_owner_reattaches_and_its_resend_is_the_same_input(
    storage_factory: Any, until: Any
) -> None:
    # The child id lives in the owner's checkpoint; the phase re-runs after the reopen, attaches
    # again and re-sends with its request id, which returns the original input (no duplicate).
    from pico3.handle import HarnessHandle
    from pico3.harness import HarnessOptions
    from pico3.models.faux import FauxProvider
    from pico3.tasks import ManualClock
    from pico3.turn.models import Models

    gate, called = anyio.Event(), anyio.Event()

    def first(_request: Any, _state: Any) -> Any:
        called.set()  # the provider was called: the generation is in `requesting`
        return faux_response(faux_pause(gate), "first")

    faux = FauxProvider([first, faux_response("second")])
    clock = ManualClock()
    options = HarnessOptions(clock=clock, services={"models": Models([faux])})
    kind = supervisor()
    async with HarnessHandle(storage_factory, options) as handle:
        handle.add_registration(lambda h: h.register_task_kind(kind))
        await handle.open(ctx)
        h = handle.harness
        task_id = await start(h, kind, {"question": "q", "spec": {"rewindable": {"model": MODEL}}})
        child = await child_of(h, task_id, until)
        await called.wait()
        await handle.suspend(ctx)
        await handle.reopen(ctx)
        h = handle.harness
        with anyio.fail_after(30):
            await clock.wait_for_sleepers(1)  # the child's generation retries after a backoff
        clock.advance(60_000)
        with anyio.fail_after(30):
            task = await h.wait_for_task(task_id, ctx)
        assert task.outcome is not UNSET and task.outcome["result"]["status"] == "done"
        handle_child = await h.conversation(child, ctx)
        assert handle_child is not None
        users = await handle_child.commit(
            lambda tx, _c: tx.scan_entries(child, limit=10, kind="pi.user"), ctx
        )
        assert len(users) == 1  # the re-send was the same input


async def test_conversation_abort_walks_two_levels_of_foreground_owners(
    open_harness: Any, until: Any
) -> None:
    # docs/design/harness.md#abort: root ─ outer (owns C1) ─ C1 ─ inner supervisor (owns C2) ─ C2 ─ generation.
    gate = anyio.Event()
    inner = supervisor()

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
        async def create(tx: Transaction, current: Task, _ctx: Context) -> dict[str, Any]:
            child = await create_owned(tx, current)
            spec = {"rewindable": {"model": MODEL}}
            nested = tx.create_task(inner, {"question": "q", "spec": spec}, conversation_id=child)
            return {"phase": "holding", "inner": nested}

        return Next(create)

    async def holding(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
        assert task.checkpoint is not None
        await rt.wait_for_task(task.checkpoint["inner"], ctx)
        return Done(lambda tx, cur, c: Completion.completed(None))

    outer = define_task("test.outer", initial=initial, phases={"holding": holding}, abort=_no_abort)
    async with open_harness([faux_response(faux_pause(gate), "never")], [outer, inner]) as h:
        outer_id = await start(h, outer, None)

        async def inner_id() -> int | None:
            task = await h.get_task(outer_id, ctx)
            checkpoint = None if task is None else _field(task.checkpoint)
            return None if not checkpoint else checkpoint.get("inner")

        nested = await until(h, inner_id)
        grandchild = await child_of(h, nested, until)
        generation = await live_model_call(h, grandchild, until)
        root = await h.root(ctx)
        await root.abort(ctx)
        for task_id in (outer_id, nested, generation.id):
            task = await h.get_task(task_id, ctx)
            assert task is not None and task.outcome is not UNSET
            assert task.outcome["status"] == "aborted", task_id
