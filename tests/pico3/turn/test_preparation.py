"""Preparation (managed pi.system entries), generation hook points and boundary details
."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from pico3.models import UserMessage
from pico3.models.faux import FauxProvider, faux_error, faux_response
from pico3.models.provider import ModelInfo
from pico3.tools import ToolApi, ToolDeclaration, ToolResult
from pico3.turn.model_call import MODEL_CALL_KIND
from pico3.turn.sections import define_section

pytestmark = pytest.mark.anyio


async def _noop(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
    return ToolResult.text("ok")


def tool(name: str) -> ToolDeclaration:
    return ToolDeclaration(name, f"{name}.", {"type": "object"}, _noop)


async def ask(s: Any, text: str) -> Any:
    return await (await s.root.send(text, BACKGROUND)).wait(BACKGROUND)


async def systems(s: Any) -> list[Any]:
    return [e for e in await s.entries() if e.kind == "pi.system"]


async def test_baseline_then_no_entry_then_delta_with_removals_first(open_session) -> None:
    def setup(h: Any) -> None:
        for name in ("a", "b", "c"):
            h.register_tool(tool(name))

    script = [faux_response("1"), faux_response("2"), faux_response("3")]
    async with open_session(script, setup=setup, config={"selectedTools": ["a", "b"]}) as s:
        await ask(s, "one")
        (baseline,) = await systems(s)
        assert baseline.data["baseline"] is True
        assert baseline.model[0]["tools_added"] == ["a", "b"]
        await ask(s, "two")
        assert len(await systems(s)) == 1  # unchanged draft: no system entry
        await s.root.set_config({"selectedTools": ["b", "c"]}, BACKGROUND)
        await ask(s, "three")
        delta = (await systems(s))[-1]
        assert list(delta.model[0]) == [
            "role",
            "content",
            "timestamp",
            "tools_removed",
            "tools_added",
        ]
        assert delta.model[0]["tools_removed"] == ["a"] and delta.model[0]["tools_added"] == ["c"]
        assert [t.name for t in s.faux.state.requests[-1].tools] == ["b", "c"]


async def test_sections_render_into_the_system_prompt_and_deltas(open_session) -> None:
    section = define_section("persona", lambda value: f"You are {value}.")
    values = ["terse"]

    def setup(h: Any) -> None:
        h.register_section(section)
        ns = h.namespace("persona")

        def instruct(payload: dict[str, Any], api: Any, ctx: Context) -> None:
            payload["sections"].set(section, values[0])

        h.hooks(ns, MODEL_CALL_KIND, {"system_instructions": instruct})

    async with open_session([faux_response("1"), faux_response("2")], setup=setup) as s:
        await ask(s, "one")
        assert s.faux.state.requests[0].system == ["## persona\nYou are terse."]
        values[0] = "kind"
        await ask(s, "two")
        delta = (await systems(s))[-1]
        assert delta.model[0]["content"] == "The persona section now reads:\nYou are kind."
        assert s.faux.state.requests[1].system == [
            "## persona\nYou are terse.",
            "The persona section now reads:\nYou are kind.",
        ]


async def test_preparation_retries_when_the_tool_registry_moves_meanwhile(open_session) -> None:
    calls = []
    holder: dict[str, Any] = {}

    def setup(h: Any) -> None:
        holder["h"] = h
        h.register_tool(tool("a"))
        ns = h.namespace("mover")

        def instruct(payload: dict[str, Any], api: Any, ctx: Context) -> None:
            calls.append(list(payload["tools"]))
            if len(calls) == 1:
                holder["h"].register_tool(tool("b"))

        h.hooks(ns, MODEL_CALL_KIND, {"system_instructions": instruct})

    async with open_session(
        [faux_response("1")], setup=setup, config={"selectedTools": ["a", "b"]}
    ) as s:
        await ask(s, "one")
        assert calls == [["a"], ["a", "b"]]
        (baseline,) = await systems(s)
        assert baseline.model[0]["tools_added"] == ["a", "b"]


async def test_before_request_reruns_on_retry_and_is_never_persisted(open_session) -> None:
    seen: list[int] = []

    def setup(h: Any) -> None:
        ns = h.namespace("rewrite")

        def before(request: dict[str, Any], api: Any, ctx: Context) -> dict[str, Any]:
            seen.append(api.cutoff)
            extra = {"role": "user", "content": "INJECTED", "timestamp": 0}
            return {"messages": [*request["messages"], extra]}

        h.hooks(ns, MODEL_CALL_KIND, {"before_request": before})

    script = [faux_error("flaky", retryable=True), faux_response("ok")]
    async with open_session(script, setup=setup) as s:
        handle = await s.root.send("one", BACKGROUND)
        retry = await s.wait_event("generation.retrying")
        await s.clock.wait_for_sleepers(1)
        s.clock.advance(retry["retryAt"] - s.clock.now())
        await handle.wait(BACKGROUND)
        assert len(seen) == 2 and seen[0] == seen[1]
        assert [m.content for m in s.faux.state.requests[1].messages] == ["one", "INJECTED"]
        assert all("INJECTED" not in repr(e.model) for e in await s.entries())


async def test_a_hook_changes_its_copy_in_place_and_the_next_request_starts_from_the_transcript(
    open_session,
) -> None:
    def setup(h: Any) -> None:
        ns = h.namespace("shout")

        def before(request: dict[str, Any], api: Any, ctx: Context) -> None:
            for message in request["messages"]:
                if message["role"] == "user":
                    message["content"] = f"{message['content']}!"  # in place, returns nothing

        h.hooks(ns, MODEL_CALL_KIND, {"before_request": before})

    async with open_session([faux_response("ok"), faux_response("ok")], setup=setup) as s:
        await ask(s, "one")
        await ask(s, "two")
        users = [
            [m.content for m in request.messages if isinstance(m, UserMessage)]
            for request in s.faux.state.requests
        ]
        assert users == [["one!"], ["one!", "two!"]]
        assert all("!" not in repr(e.model) for e in await s.entries())


async def test_overflow_is_measured_on_the_post_hook_request(open_session) -> None:
    provider = FauxProvider(
        [], models=[ModelInfo(id="faux-1", provider="faux", context_window=60, max_output=10)]
    )

    def setup(h: Any) -> None:
        ns = h.namespace("bloat")
        big = {"role": "user", "content": "x" * 400, "timestamp": 0}
        h.hooks(
            ns,
            MODEL_CALL_KIND,
            {"before_request": lambda r, api, ctx: {"messages": [*r["messages"], big]}},
        )

    async with open_session(provider=provider, setup=setup) as s:
        record = await ask(s, "small")
        assert record.reason == "failed"
        assert s.events("generation.failed")[0]["reason"] == "overflow"


async def test_after_response_runs_once_per_terminal_message(open_session) -> None:
    seen: list[tuple[str, int]] = []

    def setup(h: Any) -> None:
        ns = h.namespace("watcher")
        h.hooks(
            ns,
            MODEL_CALL_KIND,
            {"after_response": lambda m, api, ctx: seen.append((m["stopReason"], api.attempt))},
        )

    script = [faux_error("flaky", retryable=True), faux_response("ok")]
    async with open_session(script, setup=setup) as s:
        handle = await s.root.send("one", BACKGROUND)
        retry = await s.wait_event("generation.retrying")
        await s.clock.wait_for_sleepers(1)
        s.clock.advance(retry["retryAt"] - s.clock.now())
        await handle.wait(BACKGROUND)
        assert seen == [("error", 1), ("stop", 2)]


async def test_yield_continuation_keeps_the_group_and_a_trigger_discards_it(open_session) -> None:
    answers = [{"continue": "keep going"}, None]

    def setup(h: Any) -> None:
        ns = h.namespace("loop")
        h.hooks(
            ns,
            MODEL_CALL_KIND,
            {"on_yield": lambda answer, api, ctx: answers.pop(0) if answers else None},
        )

    async with open_session([faux_response("first"), faux_response("second")], setup=setup) as s:
        handle = await s.root.send("go", BACKGROUND)
        record = await handle.wait(BACKGROUND)
        entries = await s.entries()
        kinds = [e.kind for e in entries]
        assert kinds == ["pi.user", "pi.assistant", "pi.user", "pi.assistant"]
        assert entries[2].data == {"continuation": True, "from": entries[1].id}
        assert record.answer == entries[3].id
        assert len(s.events("turn.ended")) == 1 and len(s.events("turn.started")) == 1


async def test_idle_reset_stales_nothing_and_busy_reset_stales_older_follow_ups(
    open_session,
) -> None:
    gate = anyio.Event()
    from pico3.models.faux import faux_pause

    async with open_session([faux_response(faux_pause(gate), "a"), faux_response("b")]) as s:
        first = await s.root.send("one", BACKGROUND)
        old = await s.root.send("old", BACKGROUND)
        await s.root.reset(BACKGROUND, handoff="Start over with the plan.")
        new = await s.root.send("new", BACKGROUND)
        gate.set()
        await first.wait(BACKGROUND)
        assert (await old.wait(BACKGROUND)).reason == "stale"
        assert (await new.wait(BACKGROUND)).status == "done"
        request = s.faux.state.requests[-1]
        assert [m.content for m in request.messages] == ["Start over with the plan.", "new"]


async def test_entries_scan_pages_newest_first_beyond_the_active_transcript(open_session) -> None:
    async with open_session([faux_response("1"), faux_response("2")]) as s:
        await ask(s, "one")
        await s.root.reset(BACKGROUND)
        await ask(s, "two")
        page = await s.root.entries(BACKGROUND, limit=2)
        assert [e.kind for e in page] == ["pi.assistant", "pi.user"]
        rest = await s.root.entries(BACKGROUND, before=page[-1].id)
        assert [e.kind for e in rest] == ["pi.reset", "pi.assistant", "pi.user"]
        assert [e["kind"] for e in s.view["entries"]] == ["pi.reset", "pi.user", "pi.assistant"]


async def test_fork_at_an_entry_continues_from_there_with_overrides(open_session) -> None:
    async with open_session(
        [faux_response("a1"), faux_response("a2"), faux_response("forked")]
    ) as s:
        await ask(s, "one")
        await ask(s, "two")
        entries = await s.entries()
        fork = await s.root.fork(entries[1].id, BACKGROUND, rewindable={"thinkingLevel": "high"})
        assert (await fork.config(BACKGROUND))["thinkingLevel"] == "high"
        record = await (await fork.send("branch", BACKGROUND)).wait(BACKGROUND)
        assert record.status == "done"
        request = s.faux.state.requests[-1]
        assert [m.content if isinstance(m.content, str) else "" for m in request.messages] == [
            "one",
            "",
            "branch",
        ]
        assert request.thinking_level == "high"


async def test_a_head_past_the_baseline_forces_a_fresh_baseline_omitting_retained_deltas(
    open_session,
) -> None:
    # docs/design/turn.md#model-call system preparation: fresh baseline after a head, omit edits for retained entries
    def setup(h: Any) -> None:
        for name in ("a", "b"):
            h.register_tool(tool(name))

    script = [faux_response("1"), faux_response("2"), faux_response("S"), faux_response("3")]
    async with open_session(
        script, setup=setup, config={"selectedTools": ["a"], "keepRecent": 1}
    ) as s:
        await ask(s, "one")
        await s.root.set_config({"selectedTools": ["a", "b"]}, BACKGROUND)
        await ask(s, "two")
        baseline, delta = await systems(s)
        assert delta.data["base"] == baseline.id and delta.model[0]["tools_added"] == ["b"]
        done = await s.harness.wait_for_task(await s.root.collapse(BACKGROUND), BACKGROUND)
        summary = (await s.entries())[-1]
        assert done.outcome["status"] == "completed" and summary.head <= delta.id
        await ask(s, "three")
        fresh = (await systems(s))[-1]
        assert fresh.data["baseline"] is True and fresh.model[0]["tools_added"] == ["a", "b"]
        assert fresh.edits == [{"target": delta.id, "action": "omit"}]
        request = s.faux.state.requests[-1]
        assert [t.name for t in request.tools] == ["a", "b"]
