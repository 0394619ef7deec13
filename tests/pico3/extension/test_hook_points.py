"""How each hook point folds its handlers' values, and the execution rules of docs/design/harness.md#hooks
(raises reported and skipped, cancellation always propagates) and docs/design/harness.md#hook-points (the fold table)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context, ContextCancelled, with_cancel
from pico3.hooks import (
    HookApi,
    HookRegistry,
    HookRunner,
    RequestHookApi,
    ResponseHookApi,
    ToolHookApi,
)
from pico3.kernel.namespaces import NamespaceRegistry
from pico3.tasks.kinds import define_task
from pico3.tools import ToolResult
from pico3.turn.sections import SectionDraft, SectionState, define_section, freeze

pytestmark = pytest.mark.anyio


async def _never(*_: Any) -> Any:
    raise AssertionError("not run")


def core(name: str) -> Any:
    return define_task(name, initial=_never, phases={}, abort=_never, core=True)


MODEL_CALL, TOOL, POST_TOOLS, COLLAPSE = (
    core("pi.generation"),
    core("pi.tool"),
    core("pi.post_tools"),
    core("pi.collapse"),
)


class Setup:
    def __init__(self) -> None:
        self.namespaces = NamespaceRegistry()
        self.registry = HookRegistry(self.namespaces)
        self.reports: list[BaseException] = []
        self._count = 0

    def add(self, kind: Any, **handlers: Any) -> None:
        self._count += 1
        ns = self.namespaces.register(f"plugin{self._count}", None)
        self.registry.register(ns, kind, handlers)

    def runner(self, kind: Any) -> HookRunner:
        return HookRunner(
            self.registry, kind, task_id=11, conversation_id=1, report=self.reports.append
        )


def boom(*_: Any) -> Any:
    raise RuntimeError("handler bug")


async def test_observers_all_run_and_a_raise_is_reported_and_skipped() -> None:
    s = Setup()
    seen: list[tuple[Any, Any]] = []
    s.add(MODEL_CALL, after_response=lambda message, api, ctx: seen.append(("first", api)))
    s.add(MODEL_CALL, after_response=boom)

    async def third(message: Any, api: Any, ctx: Context) -> str:
        seen.append(("third", message))
        return "ignored"

    s.add(MODEL_CALL, after_response=third)
    await s.runner(MODEL_CALL).after_response({"role": "assistant"}, 2, BACKGROUND)
    assert [tag for tag, _ in seen] == ["first", "third"]
    assert seen[0][1] == ResponseHookApi("pi.generation", 11, 1, 2)
    assert seen[1][1] == {"role": "assistant"}
    assert [str(e) for e in s.reports] == ["handler bug"]


async def test_before_request_chains_the_request() -> None:
    s = Setup()
    apis: list[Any] = []

    def add_note(request: dict[str, Any], api: Any, ctx: Context) -> dict[str, Any]:
        apis.append(api)
        return {"messages": [*request["messages"], "note"]}

    s.add(MODEL_CALL, before_request=add_note)
    s.add(MODEL_CALL, before_request=lambda request, api, ctx: None)  # keeps it
    s.add(MODEL_CALL, before_request=boom)  # reported, skipped
    s.add(MODEL_CALL, before_request=add_note)
    final = await s.runner(MODEL_CALL).before_request({"messages": ["hi"]}, 5, BACKGROUND)
    assert final == {"messages": ["hi", "note", "note"]}
    assert apis[0] == RequestHookApi("pi.generation", 11, 1, 5)
    assert len(s.reports) == 1


async def test_on_yield_first_answer_wins() -> None:
    s = Setup()
    calls: list[str] = []
    s.add(MODEL_CALL, on_yield=lambda answer, api, ctx: calls.append("a"))
    s.add(MODEL_CALL, on_yield=lambda answer, api, ctx: {"continue": "go on"})
    s.add(MODEL_CALL, on_yield=lambda answer, api, ctx: calls.append("never"))
    assert await s.runner(MODEL_CALL).on_yield(123, BACKGROUND) == {"continue": "go on"}
    assert calls == ["a"]


async def test_before_collapse_first_answer_wins_and_raises_are_skipped() -> None:
    s = Setup()
    s.add(COLLAPSE, before_collapse=boom)
    s.add(COLLAPSE, before_collapse=lambda reason, through, entries, api, ctx: {"decline": True})
    answer = await s.runner(COLLAPSE).before_collapse("manual", 9, [{"id": 1}], BACKGROUND)
    assert answer == {"decline": True} and len(s.reports) == 1


async def test_before_collapse_without_an_answer_is_none() -> None:
    s = Setup()
    s.add(COLLAPSE, before_collapse=lambda *a: None)
    assert await s.runner(COLLAPSE).before_collapse("threshold", 9, [], BACKGROUND) is None


async def test_after_tools_observers_get_the_batch() -> None:
    s = Setup()
    seen: list[Any] = []
    s.add(
        POST_TOOLS,
        after_tools=lambda assistant, results, api, ctx: seen.append((assistant, results, api)),
    )
    await s.runner(POST_TOOLS).after_tools(4, (5, 6), BACKGROUND)
    assert seen == [(4, [5, 6], HookApi("pi.post_tools", 11, 1))]


async def test_after_tool_chains_results_and_ignores_non_results() -> None:
    s = Setup()
    seen: list[Any] = []

    def shout(call: dict[str, Any], result: ToolResult, api: Any, ctx: Context) -> ToolResult:
        seen.append(api)
        return ToolResult.text(result.content[0]["text"].upper())  # type: ignore[index]

    s.add(TOOL, after_tool=shout)
    s.add(TOOL, after_tool=lambda *a: "not a result")
    s.add(
        TOOL,
        after_tool=lambda call, result, api, ctx: ToolResult.text(result.content[0]["text"] + "!"),
    )  # type: ignore[index]
    final = await s.runner(TOOL).after_tool(
        {"id": "call_3", "name": "echo"}, ToolResult.text("hi"), BACKGROUND
    )
    assert final == ToolResult.text("HI!")
    assert seen == [ToolHookApi("pi.tool", 11, 1, "call_3")]
    assert "not a ToolResult" in str(s.reports[0])


async def test_system_instructions_all_run_tools_overrides_chain_and_raises_roll_back() -> None:
    s = Setup()
    identity = define_section("identity", lambda v: f"You are {v}.")
    rules = define_section("rules", lambda v: "\n".join(v))

    def first(payload: dict[str, Any], api: Any, ctx: Context) -> dict[str, Any]:
        payload["sections"].set(identity, "pico")
        return {"tools": ["read"]}

    def broken(payload: dict[str, Any], api: Any, ctx: Context) -> None:
        payload["sections"].set(rules, ["half applied"])
        payload["sections"].delete(identity)
        raise RuntimeError("bug after editing")

    def last(payload: dict[str, Any], api: Any, ctx: Context) -> dict[str, Any]:
        assert payload["sections"].get(identity) == "pico"  # the broken edits were rolled back
        # chained: it starts from the loadout ``first`` left (bash withheld there stays out
        # unless this handler adds it back on purpose)
        assert payload["config"] == {"model": "m"} and payload["tools"] == ["read"]
        payload["sections"].wrap(identity, lambda text: f"<{text}>")
        return {"tools": [*payload["tools"], "grep"]}

    s.add(MODEL_CALL, system_instructions=first)
    s.add(MODEL_CALL, system_instructions=broken)
    s.add(MODEL_CALL, system_instructions=lambda *a: None)
    s.add(MODEL_CALL, system_instructions=last)
    canonical = {"rules": SectionState(["be brief"], "be brief")}
    draft = SectionDraft(canonical)
    tools = await s.runner(MODEL_CALL).system_instructions(
        draft, {"model": "m"}, ["read", "bash"], BACKGROUND
    )
    assert tools == ["read", "grep"]
    assert [str(e) for e in s.reports] == ["bug after editing"]
    desired = freeze(draft, canonical, {"identity": identity, "rules": rules})
    assert desired == {
        "rules": SectionState(["be brief"], "be brief"),
        "identity": SectionState("pico", "<You are pico.>"),
    }


async def test_system_instructions_rejects_a_malformed_return_by_rolling_it_back() -> None:
    s = Setup()

    def wrong(payload: dict[str, Any], api: Any, ctx: Context) -> Any:
        payload["sections"].set("identity", "x")
        return {"tool": ["typo"]}

    s.add(MODEL_CALL, system_instructions=wrong)
    draft = SectionDraft()
    assert await s.runner(MODEL_CALL).system_instructions(draft, {}, [], BACKGROUND) is None
    assert draft.values() == {} and "must return None or {'tools'" in str(s.reports[0])


async def test_a_cancelled_context_propagates_and_is_never_reported() -> None:
    s = Setup()
    ctx, cancel = with_cancel(BACKGROUND)
    ran: list[str] = []

    def cancelled(message: Any, api: Any, hook_ctx: Context) -> None:
        cancel("abort")
        hook_ctx.raise_if_cancelled()

    s.add(MODEL_CALL, after_response=cancelled)
    s.add(MODEL_CALL, after_response=lambda *a: ran.append("next"))
    with pytest.raises(ContextCancelled):
        await s.runner(MODEL_CALL).after_response({}, 1, ctx)
    assert ran == [] and s.reports == []


async def test_anyio_cancellation_propagates_through_a_chain() -> None:
    s = Setup()
    entered = anyio.Event()
    ran: list[str] = []

    async def waits(request: Any, api: Any, ctx: Context) -> None:
        entered.set()
        await anyio.Event().wait()

    s.add(MODEL_CALL, before_request=waits)
    s.add(MODEL_CALL, before_request=lambda *a: ran.append("next"))
    async with anyio.create_task_group() as group:
        group.start_soon(s.runner(MODEL_CALL).before_request, {"messages": []}, None, BACKGROUND)
        await entered.wait()
        group.cancel_scope.cancel()
    assert ran == [] and s.reports == []


async def test_a_runner_refuses_points_of_another_kind() -> None:
    s = Setup()
    with pytest.raises(ValueError, match=r"pi\.tool has no hook point 'on_yield'"):
        await s.runner(TOOL).on_yield("x", BACKGROUND)


async def test_custom_kinds_run_their_points_with_each_and_first() -> None:
    s = Setup()
    indexer = define_task("repo.indexer", initial=_never, phases={}, abort=_never)
    s.add(indexer, before_batch=lambda batch, api, ctx: None)
    s.add(indexer, before_batch=lambda batch, api, ctx: {"skip": batch})
    s.add(indexer, before_batch=lambda batch, api, ctx: {"never": True})
    runner = s.runner(indexer)
    assert await runner.first("before_batch", ("b1",), BACKGROUND) == {"skip": "b1"}
    values: list[Any] = []
    await runner.each(
        "before_batch",
        lambda handler, binding: handler("b2", runner.api(), BACKGROUND),
        BACKGROUND,
        values.append,
    )
    assert values == [{"skip": "b2"}, {"never": True}]
    assert await runner.chain("before_batch", "x", (), BACKGROUND) == {"never": True}
