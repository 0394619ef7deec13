"""pi.tool and pi.post_tools."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from chord.context import BACKGROUND, Context
from pico3.models.faux import faux_pause, faux_response, faux_tool_call
from pico3.tools import OutputBounds, ToolApi, ToolDeclaration, ToolResult
from pico3.turn.post_tools import POST_TOOLS_KIND
from pico3.turn.tool import TOOL_KIND

pytestmark = pytest.mark.anyio

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def declare(name: str, execute: Any, **options: Any) -> ToolDeclaration:
    return ToolDeclaration(
        name, f"{name} tool", SCHEMA if name != "free" else {"type": "object"}, execute, **options
    )


async def echo(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
    return ToolResult.text(f"echo {args['text']}")


def calls(*pairs: tuple[str, dict[str, Any]]) -> Any:
    return faux_response(*(faux_tool_call(name, args) for name, args in pairs))


async def results(s: Any) -> list[Any]:
    return [e for e in await s.entries() if e.kind == "pi.tool_result"]


def role(message: Any) -> str:
    return msgspec.to_builtins(message)["role"]


def text_of(entry: Any) -> str:
    return "".join(b.get("text", "") for b in entry.model[0]["content"])


def tools_session(
    open_session: Any,
    script: list[Any],
    *tools: ToolDeclaration,
    selected: list[str] | None = None,
    setup: Any = None,
) -> Any:
    def install(h: Any) -> None:
        for tool in tools:
            h.register_tool(tool)
        if setup is not None:
            setup(h)

    names = selected if selected is not None else [t.name for t in tools]
    return open_session(script, setup=install, config={"selectedTools": names})


async def test_tool_round_appends_results_in_call_order_and_answers(open_session) -> None:
    # projection orders results by call index
    script = [calls(("echo", {"text": "a"}), ("echo", {"text": "b"})), faux_response("done")]
    async with tools_session(open_session, script, declare("echo", echo)) as s:
        record = await (await s.root.send("go", BACKGROUND)).wait(BACKGROUND)
        assert record.status == "done"
        kinds = [e.kind for e in await s.entries()]
        assert kinds == [
            "pi.user",
            "pi.system",
            "pi.assistant",
            "pi.tool_result",
            "pi.tool_result",
            "pi.assistant",
        ]
        assert [text_of(r) for r in await results(s)] == ["echo a", "echo b"]
        second = s.faux.state.requests[1]
        assert [role(m) for m in second.messages] == [
            "user",
            "assistant",
            "toolResult",
            "toolResult",
        ]
        assert [t.name for t in second.tools] == ["echo"]


async def test_call_to_a_tool_not_offered_is_an_error_result(open_session) -> None:
    # registered but not offered -> "not offered", registry not consulted
    ran: list[str] = []

    async def spy(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        ran.append("x")
        return ToolResult.text("ran")

    script = [calls(("hidden", {"text": "a"})), faux_response("done")]
    async with tools_session(open_session, script, declare("hidden", spy), selected=[]) as s:
        await (await s.root.send("go", BACKGROUND)).wait(BACKGROUND)
        (result,) = await results(s)
        assert result.model[0]["isError"] and "not offered" in text_of(result)
        assert result.data["diagnostics"][0]["code"] == "not_offered"
        assert ran == []


async def test_a_call_by_claude_codes_name_is_told_which_tool_to_call(open_session) -> None:
    # a published command says "use the Task tool"; the model is told the offered tool's name
    script = [
        calls(("Read", {"file_path": "a"}), ("Task", {"text": "a"}), ("AskUserQuestion", {})),
        faux_response("done"),
    ]
    tools = (declare("read", echo), declare("question", echo))
    async with tools_session(open_session, script, *tools) as s:
        await (await s.root.send("go", BACKGROUND)).wait(BACKGROUND)
        read, task, ask = await results(s)
        assert "Claude Code's AskUserQuestion is the 'question' tool here" in text_of(ask)
        assert read.model[0]["isError"] and read.data["diagnostics"][0]["code"] == "not_offered"
        assert text_of(read) == (
            "Tool 'Read' was not offered to the model. Claude Code's Read is the 'read' tool "
            "here: call 'read' instead, with the parameters its definition names."
        )
        assert text_of(task) == "Tool 'Task' was not offered to the model."  # no agent tool


async def test_missing_and_invalid_calls_are_error_results_not_faults(open_session) -> None:
    script = [calls(("echo", {"text": 5}), ("gone", {})), faux_response("done")]

    def unregister_gone(h: Any) -> None:
        h.register_tool(declare("gone", echo))()  # registered then removed: offered by name only

    async with tools_session(
        open_session,
        script,
        declare("echo", echo),
        selected=["echo", "gone"],
        setup=unregister_gone,
    ) as s:
        record = await (await s.root.send("go", BACKGROUND)).wait(BACKGROUND)
        assert record.status == "done"
        invalid, missing = await results(s)
        assert "Invalid arguments" in text_of(invalid) and "arguments.text" in text_of(invalid)
        assert invalid.model[0]["isError"] and missing.model[0]["isError"]
        assert "not offered" in text_of(missing) or "missing" in text_of(missing)
        assert not [r for r in s.reports if "Fault" in type(r).__name__]


async def test_before_tool_block_and_identity_change_block_without_running(open_session) -> None:
    ran: list[str] = []

    async def spy(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        ran.append(args["text"])
        return ToolResult.text("ran")

    def setup(h: Any) -> None:
        first = h.namespace("first")
        second = h.namespace("second")

        def rewrite(call: dict[str, Any], api: Any, ctx: Context) -> Any:
            if call["arguments"]["text"] == "rename":
                return {"call": {**call, "name": "other"}}
            return {"call": {**call, "arguments": {"text": call["arguments"]["text"] + "!"}}}

        def gate(call: dict[str, Any], api: Any, ctx: Context) -> Any:
            if call["arguments"]["text"] == "no!":
                return {"block": "not today"}
            return None

        h.hooks(first, TOOL_KIND, {"before_tool": rewrite})
        h.hooks(second, TOOL_KIND, {"before_tool": gate})

    script = [
        calls(("spy", {"text": "no"}), ("spy", {"text": "rename"}), ("spy", {"text": "yes"})),
        faux_response("done"),
    ]
    async with tools_session(open_session, script, declare("spy", spy), setup=setup) as s:
        await (await s.root.send("go", BACKGROUND)).wait(BACKGROUND)
        blocked, renamed, allowed = await results(s)
        assert "blocked: not today" in text_of(blocked)
        assert "call identity changed" in text_of(renamed)
        assert text_of(allowed) == "ran" and ran == ["yes!"]


async def test_tool_raise_becomes_an_error_result(open_session) -> None:
    async def boom(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        raise RuntimeError("kaput")

    script = [calls(("boom", {"text": "a"})), faux_response("done")]
    async with tools_session(open_session, script, declare("boom", boom)) as s:
        assert (await (await s.root.send("go", BACKGROUND)).wait(BACKGROUND)).status == "done"
        (result,) = await results(s)
        assert result.model[0]["isError"] and "kaput" in text_of(result)
        assert result.data["diagnostics"][0]["code"] == "threw"
        # diagnostics rendered for the model (docs/design/decisions.md#d8-g11)
        assert "<harness>" in text_of(result)


async def test_streamed_output_becomes_content_bounded_with_a_warning(open_session) -> None:
    async def chatty(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        for i in range(50):
            api.stream(f"line {i}\n")
        return ToolResult()

    tool = declare("chatty", chatty, output=OutputBounds(max_bytes=10_000, max_lines=5))
    script = [calls(("chatty", {"text": "a"})), faux_response("done")]
    async with tools_session(open_session, script, tool) as s:
        await (await s.root.send("go", BACKGROUND)).wait(BACKGROUND)
        (result,) = await results(s)
        assert text_of(result).startswith("line 0\nline 1\nline 2\nline 3\nline 4\n")
        assert "line 5" not in text_of(result).split("<harness>")[0]
        assert result.data["diagnostics"][0]["code"] == "truncated"
        assert result.data["truncated"]["lines"] == 45
        assert s.events("warning")[0]["source"] == "tool"
        slot_outputs = [op for e in s.envelopes for op in e.ops if list(op[1])[-1:] == ["output"]]
        assert slot_outputs, "streamed output reaches turn.tools[i].output"


async def test_returned_content_is_bounded_with_truncated_data_and_warning(open_session) -> None:
    # lines first then bytes, tail retention
    async def big(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        return ToolResult.text("\n".join(f"row {i}" for i in range(100)))

    tool = declare("big", big, output=OutputBounds(max_bytes=10_000, max_lines=3, retain="tail"))
    script = [calls(("big", {"text": "a"})), faux_response("done")]
    async with tools_session(open_session, script, tool) as s:
        await (await s.root.send("go", BACKGROUND)).wait(BACKGROUND)
        (result,) = await results(s)
        assert text_of(result).endswith("row 99")
        assert "row 5\n" not in text_of(result)
        assert result.data["truncated"]["lines"] > 0
        assert s.events("warning")[0]["source"] == "tool"


async def test_after_tool_replaces_the_result(open_session) -> None:
    def setup(h: Any) -> None:
        ns = h.namespace("redact")
        h.hooks(
            ns,
            TOOL_KIND,
            {"after_tool": lambda call, result, api, ctx: ToolResult.text("[redacted]")},
        )

    script = [calls(("echo", {"text": "secret"})), faux_response("done")]
    async with tools_session(open_session, script, declare("echo", echo), setup=setup) as s:
        await (await s.root.send("go", BACKGROUND)).wait(BACKGROUND)
        (result,) = await results(s)
        assert text_of(result) == "[redacted]"


def control_tool(name: str, control: dict[str, Any]) -> ToolDeclaration:
    async def run(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        return ToolResult(content=[{"type": "text", "text": name}], control=control)

    return declare(name, run)


async def test_terminate_ends_the_turn_done_with_the_assistant(open_session) -> None:
    script = [calls(("stop", {"text": "a"}))]
    async with tools_session(open_session, script, control_tool("stop", {"terminate": True})) as s:
        record = await (await s.root.send("go", BACKGROUND)).wait(BACKGROUND)
        assistant = next(e for e in await s.entries() if e.kind == "pi.assistant")
        assert record.status == "done" and record.answer == assistant.id
        assert s.faux.state.call_count == 1


async def test_handoff_beats_terminate_and_a_queued_follow_up_starts_fresh(open_session) -> None:
    # the handoff head lands before the final boundary
    gate = anyio.Event()

    async def slow(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        await gate.wait()
        return ToolResult(
            content=[{"type": "text", "text": "h"}], control={"handoff": "Carry on with X."}
        )

    tools = (declare("slow", slow), control_tool("stop", {"terminate": True}))
    script = [
        calls(("stop", {"text": "a"}), ("slow", {"text": "b"})),
        faux_response("fresh answer"),
    ]
    async with tools_session(open_session, script, *tools) as s:
        first = await s.root.send("go", BACKGROUND)
        await s.wait_event("tool.started", 2)
        follow = await s.root.send("next", BACKGROUND)
        gate.set()
        assert (await first.wait(BACKGROUND)).status == "done"
        assert (await follow.wait(BACKGROUND)).status == "done"
        request = s.faux.state.requests[-1]
        texts = [m.content for m in request.messages if role(m) == "user"]
        assert texts == ["Carry on with X.", "next"]
        assert s.view is not None and s.view["entries"][0]["kind"] == "pi.handoff"


async def test_add_tools_appends_in_call_order_with_one_write(open_session) -> None:
    tools = (
        control_tool("a", {"addTools": ["x", "y"]}),
        control_tool("b", {"addTools": ["y", "z"]}),
        declare("x", echo),
        declare("y", echo),
        declare("z", echo),
    )
    script = [calls(("a", {"text": "1"}), ("b", {"text": "2"})), faux_response("done")]
    async with tools_session(open_session, script, *tools, selected=["a", "b"]) as s:
        await (await s.root.send("go", BACKGROUND)).wait(BACKGROUND)
        config = await s.root.config(BACKGROUND)
        assert config["selectedTools"] == ["a", "b", "x", "y", "z"]
        assert len(s.events("config.changed")) == 1  # one write by post_tools
        delta = [e for e in await s.entries() if e.kind == "pi.system"][-1]
        assert delta.model[0]["tools_added"] == ["x", "y", "z"]
        assert [t.name for t in s.faux.state.requests[-1].tools] == ["a", "b", "x", "y", "z"]


async def test_steer_joins_at_post_tools_and_follow_up_waits_for_the_answer(open_session) -> None:
    gate = anyio.Event()

    async def slow(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        await gate.wait()
        return ToolResult.text("slow done")

    script = [
        calls(("slow", {"text": "a"})),
        faux_response("after steer"),
        faux_response("follow answer"),
    ]
    async with tools_session(open_session, script, declare("slow", slow)) as s:
        first = await s.root.send("go", BACKGROUND)
        await s.wait_event("tool.started")
        follow = await s.root.follow_up("later", BACKGROUND)
        steer = await s.root.steer("also this", BACKGROUND)
        gate.set()
        a = await first.wait(BACKGROUND)
        b = await steer.wait(BACKGROUND)
        c = await follow.wait(BACKGROUND)
        assert a.answer == b.answer != c.answer
        second = s.faux.state.requests[1]
        assert [role(m) for m in second.messages][-2:] == ["toolResult", "user"]
        assert second.messages[-1].content == "also this"
        assert s.faux.state.requests[2].messages[-1].content == "later"


async def test_queued_reset_at_post_tools_terminates_the_group(open_session) -> None:
    gate = anyio.Event()

    async def slow(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        await gate.wait()
        return ToolResult.text("slow done")

    script = [calls(("slow", {"text": "a"})), faux_response("fresh")]
    async with tools_session(open_session, script, declare("slow", slow)) as s:
        first = await s.root.send("go", BACKGROUND)
        await s.wait_event("tool.started")
        stale = await s.root.follow_up("before reset", BACKGROUND)
        await s.root.reset(BACKGROUND)
        after = await s.root.follow_up("after reset", BACKGROUND)
        gate.set()
        a = await first.wait(BACKGROUND)
        assert a.status == "unanswered" and a.reason == "terminated"
        assert (await stale.wait(BACKGROUND)).reason == "stale"
        assert (await after.wait(BACKGROUND)).status == "done"
        request = s.faux.state.requests[-1]
        assert [m.content for m in request.messages] == ["after reset"]


async def test_parallel_tools_finishing_in_any_order_run_post_tools_once(open_session) -> None:
    gates = [anyio.Event(), anyio.Event()]

    async def gated(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        await gates[int(args["text"])].wait()
        return ToolResult.text(args["text"])

    script = [calls(("g", {"text": "0"}), ("g", {"text": "1"})), faux_response("done")]
    async with tools_session(open_session, script, declare("g", gated)) as s:
        handle = await s.root.send("go", BACKGROUND)
        await s.wait_event("tool.started", 2)
        gates[1].set()
        await s.wait_event("tool.finished")
        gates[0].set()
        assert (await handle.wait(BACKGROUND)).status == "done"
        assert s.faux.state.call_count == 2
        request = s.faux.state.requests[1]
        assert [m.tool_call_id for m in request.messages if role(m) == "toolResult"] == [
            "call_1_0",
            "call_1_1",
        ]


async def test_aborting_a_tool_appends_an_aborted_result_and_post_tools_continues(
    open_session,
) -> None:
    # an aborted tool has its aborted result; the turn goes on
    async def hang(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        await anyio.sleep_forever()
        raise AssertionError

    script = [calls(("hang", {"text": "a"})), faux_response("done")]
    async with tools_session(open_session, script, declare("hang", hang)) as s:
        handle = await s.root.send("go", BACKGROUND)
        started = await s.wait_event("tool.started")
        assert await s.harness.abort_task(started["taskId"], BACKGROUND) == "marked"
        assert (await handle.wait(BACKGROUND)).status == "done"
        (result,) = await results(s)
        assert result.model[0]["isError"] and "aborted" in text_of(result)
        assert s.events("tool.aborted")[0]["entry"] == result.id


async def test_an_aborted_tool_keeps_the_output_it_had_streamed(open_session) -> None:
    flushed = anyio.Event()

    async def chatty(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        async with api.streaming(ctx):
            api.stream("line one\nline two\n")
            await api.flush(ctx)
            flushed.set()
            await anyio.sleep_forever()
        raise AssertionError

    script = [calls(("chatty", {"text": "a"})), faux_response("done")]
    async with tools_session(open_session, script, declare("chatty", chatty)) as s:
        handle = await s.root.send("go", BACKGROUND)
        started = await s.wait_event("tool.started")
        await flushed.wait()
        assert await s.harness.abort_task(started["taskId"], BACKGROUND) == "marked"
        assert (await handle.wait(BACKGROUND)).status == "done"
        (result,) = await results(s)
        text = text_of(result)
        assert result.model[0]["isError"] and text.startswith("Tool call aborted.")
        assert "Output before it stopped:\nline one\nline two" in text


async def test_a_conversation_abort_keeps_the_output_the_tool_had_streamed(open_session) -> None:
    # Esc in the TUI aborts the conversation, not the one task: the model still sees what ran
    flushed = anyio.Event()

    async def chatty(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        async with api.streaming(ctx):
            api.stream("line one\nline two\n")
            await api.flush(ctx)
            flushed.set()
            await anyio.sleep_forever()
        raise AssertionError

    script = [calls(("chatty", {"text": "a"})), faux_response("done")]
    async with tools_session(open_session, script, declare("chatty", chatty)) as s:
        handle = await s.root.send("go", BACKGROUND)
        await s.wait_event("tool.started")
        await flushed.wait()
        await s.root.abort(BACKGROUND)
        await handle.wait(BACKGROUND)
        (result,) = await results(s)
        text = text_of(result)
        assert result.model[0]["isError"] and text.startswith("Tool call aborted.")
        assert "Output before it stopped:\nline one\nline two" in text


async def test_memos_never_reach_the_view_and_die_with_the_tool(open_session) -> None:
    gate = anyio.Event()
    stored = anyio.Event()

    async def memo_tool(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        await api.memo("k", {"secret": 1}, ctx)
        stored.set()
        await gate.wait()
        return ToolResult.text("ok")

    script = [calls(("m", {"text": "a"})), faux_response("done")]
    async with tools_session(open_session, script, declare("m", memo_tool)) as s:
        handle = await s.root.send("go", BACKGROUND)
        await stored.wait()
        sticky = await s.root.sticky(BACKGROUND)
        assert sticky["turn"]["tools"][0]["memos"] == {"tool:k": {"secret": 1}}
        assert all("memos" not in slot for slot in s.view["turn"]["tools"])
        gate.set()
        await handle.wait(BACKGROUND)
        assert all("secret" not in repr(e.ops) for e in s.envelopes)
        tool_task = s.events("tool.finished")[0]["taskId"]
        assert (await s.harness.get_task(tool_task, BACKGROUND)).status == "terminal"


async def test_tool_abort_marks_owned_foreground_tasks_and_keeps_their_queues(open_session) -> None:
    from pico3.models.faux import faux_pause

    child_gate = anyio.Event()
    sent: dict[str, Any] = {}

    async def delegate(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        child = await api.conversation(
            {"rewindable": {"model": {"provider": "faux", "modelId": "faux-1"}}}, ctx
        )
        sent["child"] = child.id
        sent["first"] = await child.send("child work", ctx)
        sent["queued"] = await child.send("child later", ctx)
        sent["ready"].set()
        await anyio.sleep_forever()
        raise AssertionError

    sent["ready"] = anyio.Event()
    child_streaming = anyio.Event()

    def child_turn(request: Any, state: Any) -> Any:  # the child's generation reached the model
        child_streaming.set()
        return faux_response(faux_pause(child_gate), "never")

    script = [calls(("delegate", {"text": "a"})), child_turn, faux_response("done")]
    async with tools_session(open_session, script, declare("delegate", delegate)) as s:
        handle = await s.root.send("go", BACKGROUND)
        started = await s.wait_event("tool.started")
        await sent["ready"].wait()
        await child_streaming.wait()  # abort only once the child's paused answer is its own
        await s.harness.abort_task(started["taskId"], BACKGROUND)
        assert (await handle.wait(BACKGROUND)).status == "done"
        first = await sent["first"].wait(BACKGROUND)
        assert first.status == "unanswered" and first.reason == "aborted"
        child = await s.harness.conversation(sent["child"], BACKGROUND)
        sticky = await child.sticky(BACKGROUND)
        assert [item["id"] for item in sticky["inbox"]] == [sent["queued"].id]


async def test_waiting_on_is_cleared_with_started_and_with_a_block(open_session) -> None:
    decisions = {"allow": None, "deny": {"block": "denied"}}

    def setup(h: Any) -> None:
        ns = h.namespace("approval")

        async def approve(call: dict[str, Any], api: Any, ctx: Context) -> Any:
            await api.waiting(ctx)
            return decisions[call["arguments"]["text"]]

        h.hooks(ns, TOOL_KIND, {"before_tool": approve})

    script = [calls(("echo", {"text": "allow"}), ("echo", {"text": "deny"})), faux_response("done")]
    async with tools_session(open_session, script, declare("echo", echo), setup=setup) as s:
        await (await s.root.send("go", BACKGROUND)).wait(BACKGROUND)
        waiting = [e for e in s.envelopes if any(v["type"] == "tool.waiting" for v in e.events)]
        assert len(waiting) == 2 and all(e.events[0]["on"] == "approval" for e in waiting)
        started = next(e for e in s.envelopes if any(v["type"] == "tool.started" for v in e.events))
        assert any(op[0] == "d" and list(op[1])[-1] == "waitingOn" for op in started.ops)
        blocked = next(
            e
            for e in s.envelopes
            if any(v["type"] == "tool.finished" and v["isError"] for v in e.events)
        )
        assert any(op[0] == "d" and list(op[1])[-1] == "waitingOn" for op in blocked.ops)


@pytest.mark.parametrize("mode", ["one-at-a-time", "all"])
async def test_steering_mode_selects_one_or_all_steers_at_post_tools(
    open_session, mode: str
) -> None:
    # writes and steers placed in id order; one or all steers per steeringMode
    gate = anyio.Event()

    async def slow(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        await gate.wait()
        return ToolResult.text("slow done")

    script = [calls(("slow", {"text": "a"})), faux_response("after"), faux_response("more")]

    def setup(h: Any) -> None:
        h.register_tool(declare("slow", slow))

    async with open_session(
        script, setup=setup, config={"selectedTools": ["slow"], "steeringMode": mode}
    ) as s:
        first = await s.root.send("go", BACKGROUND)
        await s.wait_event("tool.started")
        s1 = await s.root.steer("s1", BACKGROUND)
        note = await s.root.write(
            "pi.notice", BACKGROUND, model=[{"role": "user", "content": "note", "timestamp": 1}]
        )
        s2 = await s.root.steer("s2", BACKGROUND)
        gate.set()
        await first.wait(BACKGROUND)
        await s.idle()
        second = s.faux.state.requests[1]
        tail = [m.content for m in second.messages if isinstance(getattr(m, "content", None), str)]
        if mode == "all":
            assert tail[-3:] == ["s1", "note", "s2"]
            assert (await s1.wait(BACKGROUND)).answer == (await s2.wait(BACKGROUND)).answer
        else:
            assert tail[-2:] == ["s1", "note"]
            assert (await s2.wait(BACKGROUND)).status == "done"
            assert s.faux.state.requests[2].messages[-1].content == "s2"
        del note


async def test_collapse_never_makes_the_conversation_busy(open_session) -> None:
    gate = anyio.Event()
    script = [faux_response("a1"), faux_response(faux_pause(gate), "S"), faux_response("a2")]
    async with open_session(script, config={"keepRecent": 1}) as s:
        await (await s.root.send("q1", BACKGROUND)).wait(BACKGROUND)
        task_id = await s.root.collapse(BACKGROUND)
        handle = await s.root.send("q2", BACKGROUND)
        assert (await handle.result(BACKGROUND)).status == "placed"
        gate.set()
        await handle.wait(BACKGROUND)
        await s.harness.wait_for_task(task_id, BACKGROUND)


def test_offered_tools_with_a_memo_are_the_fold_of_each_request() -> None:
    from pico3.turn.system import ToolsMemo, request_tools

    def system(added: list[str], removed: list[str] = []) -> dict[str, Any]:  # noqa: B006
        return {"role": "system", "content": "", "tools_added": added, "tools_removed": removed}

    def user(text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    history = [system(["a", "b"]), user("1"), system(["c"], ["a"]), user("2")]
    grown = [*history, user("3"), system(["a"], ["b"])]
    edited = [system(["a", "b"]), user("1"), system(["d"]), user("2")]  # same length, new values
    copied = [dict(m) for m in grown]  # equal values, other objects
    memo = ToolsMemo()
    for messages in (history, grown, history[:2], [user("x")], grown, edited, copied, []):
        with_memo = request_tools(messages, None, ["fallback"], memo=memo)
        assert with_memo == request_tools(messages, None, ["fallback"])
    assert request_tools(grown, None, memo=memo).names == ["c", "a"]
    assert request_tools([user("x")], None, ["f"], memo=memo).names == ["f"]


async def test_a_write_riding_with_the_result_is_written_by_the_result_commit(open_session) -> None:
    """``ToolApi.with_result``: what the builder writes is absent while the call runs and
    present once its result is stored, with no commit of its own."""
    holder: dict[str, Any] = {}
    registered, gate = anyio.Event(), anyio.Event()

    async def stamping(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        ns = holder["ns"]
        api.with_result(lambda tx: tx.plugins(ns)["seen"].__setitem__(args["text"], True))
        registered.set()
        await gate.wait()
        return ToolResult.text("ok")

    def setup(h: Any) -> None:
        holder["ns"] = h.namespace("ledger", {"rewindable": {"seen": {}}})

    async def seen(s: Any) -> Any:
        def read(tx: Any, _ctx: Context) -> Any:
            value = tx.plugins(holder["ns"])["seen"]
            return value.to_plain() if hasattr(value, "to_plain") else dict(value)

        return await s.root.commit(read, BACKGROUND)

    script = [calls(("w", {"text": "a"})), faux_response("done")]
    async with tools_session(open_session, script, declare("w", stamping), setup=setup) as s:
        handle = await s.root.send("go", BACKGROUND)
        await registered.wait()
        assert await seen(s) == {}
        gate.set()
        await handle.wait(BACKGROUND)
        assert await seen(s) == {"a": True}


def interrupted_marks(entries: list[Any]) -> list[Any]:
    """The display-only answers that mark a turn interrupted (``data.reason`` ``aborted``)."""
    return [
        e for e in entries
        if e.kind == "pi.assistant" and isinstance(e.data, dict)
        and e.data.get("reason") == "aborted"
    ]  # fmt: skip


async def test_a_conversation_abort_while_a_tool_runs_marks_the_turn_interrupted_once(
    open_session,
) -> None:
    # Esc while a tool runs: the aborted result, then one interrupted answer after it (no
    # answer was streaming, so only post-tools can mark it), as the model call's abort does
    running = anyio.Event()

    async def slow(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        running.set()
        await anyio.sleep_forever()
        raise AssertionError

    script = [calls(("slow", {"text": "a"}), ("slow", {"text": "b"})), faux_response("done")]
    async with tools_session(open_session, script, declare("slow", slow)) as s:
        handle = await s.root.send("go", BACKGROUND)
        await running.wait()
        await s.root.abort(BACKGROUND)
        record = await handle.wait(BACKGROUND)
        assert (record.status, record.reason) == ("unanswered", "aborted")
        entries = await s.entries()
        kinds = [e.kind for e in entries if e.kind != "pi.system"]
        assert kinds == ["pi.user", "pi.assistant", "pi.tool_result", "pi.tool_result",
                         "pi.assistant"]  # fmt: skip
        (mark,) = interrupted_marks(entries)
        assert mark is entries[-1] and mark.model is msgspec.UNSET  # never sent to the model
        assert mark.data["display"]["stopReason"] == "aborted"
        assert "stoppedBy" not in mark.data  # the user stopped it


async def test_an_abort_after_the_tools_ended_before_the_next_answer_marks_it_too(
    open_session,
) -> None:
    # the boundary: every tool ended, the model is not called yet (post-tools runs its
    # after_tools observers); the abort still leaves one mark, naming who stopped the turn
    observing = anyio.Event()

    async def observe(assistant: int, results: list[int], api: Any, ctx: Context) -> None:
        observing.set()
        await anyio.sleep_forever()

    def setup(h: Any) -> None:
        h.hooks(h.namespace("slow-observer"), POST_TOOLS_KIND, {"after_tools": observe})

    script = [calls(("echo", {"text": "a"})), faux_response("done")]
    async with tools_session(open_session, script, declare("echo", echo), setup=setup) as s:
        handle = await s.root.send("go", BACKGROUND)
        await observing.wait()
        await s.root.abort(BACKGROUND, by="a test")
        record = await handle.wait(BACKGROUND)
        assert (record.status, record.reason) == ("unanswered", "aborted")
        entries = await s.entries()
        (result,) = await results(s)
        assert text_of(result) == "echo a"  # the tool had ended as it should
        (mark,) = interrupted_marks(entries)
        assert mark is entries[-1] and mark.data["stoppedBy"] == "a test"
