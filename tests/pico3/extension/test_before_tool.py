"""``before_tool`` and its BeforeToolApi on a real tool slot (docs/design/harness.md#hook-points,
#before-tool, #memos)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from pico3.harness import Harness
from pico3.hooks import BeforeToolApi, HookRegistration, HookRegistry, HookRunner
from pico3.kernel.errors import StaleDefinition
from pico3.storage import Storage
from pico3.tasks.kinds import define_task
from pico3.tools import MISSING

pytestmark = pytest.mark.anyio
StorageFactory = Callable[[], Storage]


async def _never(*_: Any) -> Any:
    raise AssertionError("not run")


TOOL = define_task("pi.tool", initial=_never, phases={}, abort=_never, core=True, turn=True)
CALL = {"type": "toolCall", "id": "call_1", "name": "bash", "arguments": {"command": "ls"}}


class Env:
    """A harness, its hook registry and one pending tool slot of the root conversation."""

    def __init__(self, h: Harness, slot: Any) -> None:
        self.h = h
        self.slot = slot
        self.registry = HookRegistry(h.kernel.namespaces)
        self.reports: list[BaseException] = []

    @classmethod
    async def open(
        cls, storage_factory: StorageFactory, make_slot: Any, create: bool = True
    ) -> Env:
        h = await Harness.open(storage_factory(), None, BACKGROUND)
        env = cls(h, make_slot(h, (await h.root(BACKGROUND)).id))
        if create:
            await env.slot.create("call_1", "bash")
        return env

    def runner(self) -> HookRunner:
        return HookRunner(
            self.registry,
            TOOL,
            task_id=21,
            conversation_id=self.slot.conversation_id,
            report=self.reports.append,
        )

    async def before_tool(self, call: dict[str, Any] = CALL) -> Any:
        return await self.runner().before_tool(call, self.slot, BACKGROUND)


# -- the chain -------------------------------------------------------------------------------
async def test_rewrites_chain_and_the_first_block_stops_the_chain(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    env = await Env.open(storage_factory, make_slot)
    seen: list[dict[str, Any]] = []

    def quiet(call: dict[str, Any], api: BeforeToolApi, ctx: Context) -> dict[str, Any]:
        seen.append(call)
        return {"call": {**call, "arguments": {"command": call["arguments"]["command"] + " -q"}}}

    def block(call: dict[str, Any], api: BeforeToolApi, ctx: Context) -> dict[str, Any]:
        seen.append(call)
        return {"block": "no listing today"}

    ns = [env.h.namespace(name) for name in ("one", "two", "three", "four")]
    env.registry.register(ns[0], TOOL, {"before_tool": quiet})
    env.registry.register(ns[1], TOOL, {"before_tool": quiet})
    env.registry.register(ns[2], TOOL, {"before_tool": block})
    env.registry.register(ns[3], TOOL, {"before_tool": quiet})
    outcome = await env.before_tool()
    assert outcome.blocked and outcome.block == "no listing today"
    assert [c["arguments"]["command"] for c in seen] == ["ls", "ls -q", "ls -q -q"]
    await env.h.close(BACKGROUND)


async def test_allowed_chain_returns_the_final_call(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    env = await Env.open(storage_factory, make_slot)

    def mutate_in_place(call: dict[str, Any], api: BeforeToolApi, ctx: Context) -> None:
        call["arguments"]["command"] = "rm -rf /"  # a copy: without returning it, nothing changes

    env.registry.register(env.h.namespace("one"), TOOL, {"before_tool": mutate_in_place})
    env.registry.register(
        env.h.namespace("two"),
        TOOL,
        {"before_tool": lambda call, api, ctx: {"call": {**call, "arguments": {"command": "pwd"}}}},
    )
    outcome = await env.before_tool()
    assert not outcome.blocked
    assert outcome.call == {**CALL, "arguments": {"command": "pwd"}}
    await env.h.close(BACKGROUND)


async def test_a_raising_handler_blocks_and_is_reported(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    env = await Env.open(storage_factory, make_slot)
    later: list[str] = []

    def broken(call: dict[str, Any], api: BeforeToolApi, ctx: Context) -> None:
        raise KeyError("policy")

    env.registry.register(env.h.namespace("policy"), TOOL, {"before_tool": broken})
    env.registry.register(
        env.h.namespace("later"), TOOL, {"before_tool": lambda *a: later.append("x")}
    )
    outcome = await env.before_tool()
    assert outcome.block == "policy hook raised KeyError: 'policy'"
    assert later == [] and len(env.reports) == 1
    await env.h.close(BACKGROUND)


@pytest.mark.parametrize(
    "change",
    [{"id": "call_2"}, {"name": "write"}, {"namespace": "mcp"}],
)
async def test_changing_the_call_identity_blocks(
    storage_factory: StorageFactory, make_slot: Any, change: dict[str, Any]
) -> None:
    env = await Env.open(storage_factory, make_slot)
    env.registry.register(
        env.h.namespace("sneaky"),
        TOOL,
        {"before_tool": lambda call, api, ctx: {"call": {**call, **change}}},
    )
    outcome = await env.before_tool()
    assert outcome.block == "call identity changed" and outcome.call == CALL
    await env.h.close(BACKGROUND)


@pytest.mark.parametrize("value", ["allow", {"allow": True}, {}, {"call": CALL, "extra": 1}])
async def test_an_invalid_return_value_blocks(
    storage_factory: StorageFactory, make_slot: Any, value: Any
) -> None:
    env = await Env.open(storage_factory, make_slot)
    env.registry.register(env.h.namespace("odd"), TOOL, {"before_tool": lambda *a: value})
    outcome = await env.before_tool()
    assert (
        outcome.blocked
        and outcome.block is not None
        and "odd hook returned an invalid value" in outcome.block
    )
    await env.h.close(BACKGROUND)


# -- BeforeToolApi -----------------------------------------------------------------------------
async def test_waiting_sets_waiting_on_in_its_own_commit_with_tool_waiting(
    storage_factory: StorageFactory, make_slot: Any, recorder: Any
) -> None:
    env = await Env.open(storage_factory, make_slot)
    watch = await env.h.kernel.views.watch(env.slot.conversation_id, BACKGROUND)
    watch.start(recorder)

    async def waits(call: dict[str, Any], api: BeforeToolApi, ctx: Context) -> None:
        before = env.h.kernel.storage.seq
        await api.waiting(ctx)
        assert env.h.kernel.storage.seq == before + 1  # exactly one commit
        await api.waiting(ctx)  # idempotent: no second commit, no second event
        assert env.h.kernel.storage.seq == before + 1
        assert (await env.slot.read())["waitingOn"] == "approval"

    env.registry.register(env.h.namespace("approval"), TOOL, {"before_tool": waits})
    await env.before_tool()
    [envelope] = recorder.envelopes  # one commit, one envelope: the op and the event together
    assert envelope.to_json()["ops"] == [["s", ["turn", "tools", 0, "waitingOn"], "approval"]]
    assert envelope.events == [
        {"type": "tool.waiting", "taskId": 21, "callId": "call_1", "on": "approval"}
    ]
    await env.h.close(BACKGROUND)


async def test_emit_commits_a_plugin_event(
    storage_factory: StorageFactory, make_slot: Any, recorder: Any
) -> None:
    env = await Env.open(storage_factory, make_slot)
    watch = await env.h.kernel.views.watch(env.slot.conversation_id, BACKGROUND)
    watch.start(recorder)

    async def emits(call: dict[str, Any], api: BeforeToolApi, ctx: Context) -> None:
        await api.emit("checked", {"tool": call["name"]}, ctx)

    env.registry.register(env.h.namespace("audit"), TOOL, {"before_tool": emits})
    await env.before_tool()
    assert recorder.events() == [{"type": "plugin.audit.checked", "data": {"tool": "bash"}}]
    await env.h.close(BACKGROUND)


async def test_two_namespaces_using_one_memo_name_get_independent_values(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    env = await Env.open(storage_factory, make_slot)
    got: dict[str, Any] = {}

    def decide(tag: str) -> Any:
        async def handler(call: dict[str, Any], api: BeforeToolApi, ctx: Context) -> None:
            got[tag] = (await api.memo("decision", ctx), await api.memo("decision", tag, ctx))

        return handler

    env.registry.register(env.h.namespace("first"), TOOL, {"before_tool": decide("first")})
    env.registry.register(env.h.namespace("second"), TOOL, {"before_tool": decide("second")})
    await env.before_tool()
    assert got == {"first": (MISSING, "first"), "second": (MISSING, "second")}
    assert (await env.slot.read())["memos"] == {
        "hook:first:decision": "first",
        "hook:second:decision": "second",
    }
    await env.h.close(BACKGROUND)


async def test_a_stale_namespace_token_rejects_every_api_write(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    env = await Env.open(storage_factory, make_slot)
    errors: list[str] = []
    ns = env.h.namespace("approval")

    async def handler(call: dict[str, Any], api: BeforeToolApi, ctx: Context) -> None:
        ns.unregister()  # the facet is being reloaded while this handler runs
        for attempt in (
            api.waiting(ctx),
            api.memo("d", 1, ctx),
            api.memo("d", ctx),
            api.emit("x", None, ctx),
        ):
            try:
                await attempt
            except StaleDefinition as exc:
                errors.append(str(exc))

    env.registry.register(ns, TOOL, {"before_tool": handler})
    outcome = await env.before_tool()
    assert not outcome.blocked  # the running handler finished
    assert len(errors) == 4 and all("'approval' is stale" in e for e in errors)
    assert "waitingOn" not in await env.slot.read() and "memos" not in await env.slot.read()
    await env.h.close(BACKGROUND)


# -- the approval example of docs/design/harness.md#before-tool, in Python -------------------------------------------------
def install_approval(
    h: Harness, registry: HookRegistry, ask: Callable[[dict[str, Any], Context], Any]
) -> HookRegistration:
    ns = h.namespace("approval", {"sticky": {"autoAllow": []}})  # no view: private

    async def before_tool(call: dict[str, Any], api: BeforeToolApi, ctx: Context) -> Any:
        c = await h.conversation(api.conversation_id, ctx)
        assert c is not None
        auto = await c.commit(lambda tx, _ctx: call["name"] in tx.plugins(ns)["autoAllow"], ctx)
        if auto:
            return None
        decision = await api.memo("decision", ctx)  # decided before a crash / reload?
        if decision is MISSING:
            await api.waiting(ctx)  # view: turn.tools[i].waitingOn = "approval"
            request = {
                "conversationId": c.id,
                "callId": call["id"],
                "taskId": api.task_id,
                "name": call["name"],
                "args": call["arguments"],
            }
            decision = await api.memo("decision", await ask(request, ctx), ctx)  # first writer wins
        if decision["decision"] == "deny":
            return {"block": "denied" + (f" by {decision['by']}" if decision.get("by") else "")}
        return None

    registration = registry.register(ns, TOOL, {"before_tool": before_tool})
    return registration


class Crash(Exception):
    """The process dies here."""


async def test_approval_decision_survives_a_crash_between_waiting_and_started(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    asked: list[dict[str, Any]] = []

    async def ask(request: dict[str, Any], ctx: Context) -> Any:
        asked.append(request)
        return {"decision": "deny", "by": "tui"}

    env = await Env.open(storage_factory, make_slot)
    install_approval(env.h, env.registry, ask)
    first = await env.before_tool()
    assert first.block == "denied by tui" and len(asked) == 1
    assert (await env.slot.read())["waitingOn"] == "approval"
    await env.h.close(BACKGROUND)  # crash before `started`: before_tool runs again on recovery

    env = await Env.open(storage_factory, make_slot, create=False)
    install_approval(env.h, env.registry, ask)  # the new generation's registration
    again = await env.before_tool()
    assert again == first and len(asked) == 1  # not asked twice
    await env.h.close(BACKGROUND)


async def test_approval_is_asked_again_after_a_crash_before_the_decision(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    answers = iter([Crash("died while the dialog was open"), {"decision": "allow"}])

    async def ask(request: dict[str, Any], ctx: Context) -> Any:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    env = await Env.open(storage_factory, make_slot)
    install_approval(env.h, env.registry, ask)
    crashed = await env.before_tool()
    assert crashed.blocked  # (in-process the raise blocks; a real crash just stops here)
    await env.h.close(BACKGROUND)

    env = await Env.open(storage_factory, make_slot, create=False)
    install_approval(env.h, env.registry, ask)
    outcome = await env.before_tool()
    assert not outcome.blocked and outcome.call == CALL
    await env.h.close(BACKGROUND)


async def test_two_clients_deciding_at_once_both_get_the_memo_winner(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    env = await Env.open(storage_factory, make_slot)
    both_asked = anyio.Event()
    pending: list[str] = []

    async def ask(request: dict[str, Any], ctx: Context) -> Any:
        me = "allow" if not pending else "deny"
        pending.append(me)
        if len(pending) == 2:
            both_asked.set()
        await both_asked.wait()
        return {"decision": me}

    install_approval(env.h, env.registry, ask)
    outcomes: list[Any] = []

    async def run() -> None:
        outcomes.append(await env.before_tool())

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        group.start_soon(run)
    assert outcomes[0] == outcomes[1]
    await env.h.close(BACKGROUND)


async def test_auto_allowed_tools_skip_the_question(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    env = await Env.open(storage_factory, make_slot)
    install_approval(env.h, env.registry, _never)
    c = await env.h.root(BACKGROUND)
    ns = env.h.kernel.namespaces.current("approval")
    assert ns is not None
    await c.commit(lambda tx, _ctx: tx.plugins(ns)["autoAllow"].append("bash"), BACKGROUND)
    outcome = await env.before_tool()
    assert not outcome.blocked and "waitingOn" not in await env.slot.read()
    await env.h.close(BACKGROUND)


async def test_memos_never_appear_in_the_view(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    env = await Env.open(storage_factory, make_slot)
    install_approval(env.h, env.registry, lambda request, ctx: _decide())
    await env.before_tool()
    watch = await env.h.kernel.views.watch(env.slot.conversation_id, BACKGROUND)
    text = repr(watch.view)
    assert watch.view["turn"]["tools"][0]["waitingOn"] == "approval"  # the slot is visible...
    assert "memos" not in text and "hook:approval" not in text and "secret-reviewer" not in text
    await env.h.close(BACKGROUND)


async def _decide() -> Any:
    return {"decision": "allow", "by": "secret-reviewer"}


# -- permission_request ----------------------------------------------------------------------
async def test_permission_request_runs_the_point_and_the_first_answer_wins(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    """The approval authority asks ``api.permission_request`` right before its dialog: every
    namespace's ``permission_request`` handler runs in chain order until one answers; a
    handler that raises is reported and skipped (an error never answers)."""
    env = await Env.open(storage_factory, make_slot)
    answers: list[Any] = []
    seen: list[tuple[str, dict[str, Any], str]] = []

    def broken(call: dict[str, Any], api: Any, ctx: Context) -> Any:
        seen.append(("broken", call, api.call_id))
        raise RuntimeError("hook crashed")

    def silent(call: dict[str, Any], api: Any, ctx: Context) -> Any:
        seen.append(("silent", call, api.call_id))
        return None

    async def answers_allow(call: dict[str, Any], api: Any, ctx: Context) -> Any:
        seen.append(("allow", call, api.call_id))
        return {"behavior": "allow", "by": "test"}

    def authority(call: dict[str, Any], api: BeforeToolApi, ctx: Context) -> Any:
        async def ask() -> None:
            answers.append(await api.permission_request(call, ctx))

        return ask()

    ns = [env.h.namespace(name) for name in ("approval", "one", "two", "three", "four")]
    env.registry.register(ns[0], TOOL, {"before_tool": authority})
    env.registry.register(ns[1], TOOL, {"permission_request": broken})
    env.registry.register(ns[2], TOOL, {"permission_request": silent})
    env.registry.register(ns[3], TOOL, {"permission_request": answers_allow})
    env.registry.register(ns[4], TOOL, {"permission_request": _never})  # after the answer
    outcome = await env.before_tool()
    assert not outcome.blocked
    assert answers == [{"behavior": "allow", "by": "test"}]
    assert [(who, call["arguments"], call_id) for who, call, call_id in seen] == [
        ("broken", {"command": "ls"}, "call_1"),
        ("silent", {"command": "ls"}, "call_1"),
        ("allow", {"command": "ls"}, "call_1"),
    ]
    assert [str(error) for error in env.reports] == ["hook crashed"]


async def test_permission_request_without_handlers_answers_nothing(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    env = await Env.open(storage_factory, make_slot)
    answers: list[Any] = []

    async def authority(call: dict[str, Any], api: BeforeToolApi, ctx: Context) -> None:
        answers.append(await api.permission_request(call, ctx))

    env.registry.register(env.h.namespace("approval"), TOOL, {"before_tool": authority})
    await env.before_tool()
    assert answers == [None]
