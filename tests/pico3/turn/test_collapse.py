"""pi.collapse, threshold and overflow."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from pico3.models.faux import FauxProvider, faux_error, faux_pause, faux_response, faux_tool_call
from pico3.models.provider import ModelInfo
from pico3.turn.collapse import COLLAPSE_KIND, CollapseInProgress, NothingToCollapse, choose_through

pytestmark = pytest.mark.anyio


async def converse(s: Any, *texts: str) -> None:
    for text in texts:
        await (await s.root.send(text, BACKGROUND)).wait(BACKGROUND)
    await s.idle()


def context_texts(request: Any) -> list[str]:
    out = []
    for message in request.messages:
        content = message.content
        out.append(
            content
            if isinstance(content, str)
            else "".join(getattr(b, "text", "") for b in content)
        )
    return out


async def test_manual_collapse_summarizes_and_moves_the_head(open_session) -> None:
    # tool-free summarizer request; head = first retained entry after through
    script = [
        faux_response("answer one"),
        faux_response("answer two"),
        faux_response("SUMMARY"),
        faux_response("three"),
    ]
    async with open_session(script, config={"keepRecent": 5}) as s:
        await converse(s, "q1", "q2")
        entries = await s.entries()
        task_id = await s.root.collapse(BACKGROUND)
        task = await s.harness.wait_for_task(task_id, BACKGROUND)
        assert task.outcome["status"] == "completed", task.outcome
        summarizer = s.faux.state.requests[2]
        assert summarizer.tools == []
        assert context_texts(summarizer)[:2] == ["q1", "answer one"]
        summary = (await s.entries())[-1]
        assert summary.kind == "pi.summary" and summary.data == {"through": entries[1].id}
        assert summary.head == entries[2].id
        assert [e["id"] for e in s.view["entries"]] == [entries[2].id, entries[3].id, summary.id]
        assert s.events("compaction.finished")[0]["summary"] == summary.id
        assert "compaction" not in s.view
        await converse(s, "q3")
        assert context_texts(s.faux.state.requests[-1]) == ["SUMMARY", "q2", "answer two", "q3"]


async def test_manual_collapse_rejects_nothing_to_collapse_and_in_progress(open_session) -> None:
    gate = anyio.Event()
    script = [faux_response("a1"), faux_response(faux_pause(gate), "S")]
    async with open_session(script) as s:
        await converse(s, "q1")
        count = len(s.envelopes)
        with pytest.raises(NothingToCollapse):
            await s.root.collapse(BACKGROUND)
        assert len(s.envelopes) == count
        await s.root.set_config({"keepRecent": 1}, BACKGROUND)
        task_id = await s.root.collapse(BACKGROUND)
        assert s.view["compaction"]["taskId"] == task_id
        count = len(s.envelopes)
        with pytest.raises(CollapseInProgress):
            await s.root.collapse(BACKGROUND)
        assert len(s.envelopes) == count
        gate.set()
        await s.harness.wait_for_task(task_id, BACKGROUND)


async def test_a_competing_head_stales_the_collapse(open_session) -> None:
    gate = anyio.Event()
    script = [faux_response("a1"), faux_response(faux_pause(gate), "S")]
    async with open_session(script, config={"keepRecent": 1}) as s:
        await converse(s, "q1")
        task_id = await s.root.collapse(BACKGROUND)
        await s.wait_view(lambda view: view.get("compaction", {}).get("attempt") == 1)
        await s.root.reset(BACKGROUND)
        gate.set()
        task = await s.harness.wait_for_task(task_id, BACKGROUND)
        assert task.outcome == {
            "status": "failed",
            "failure": {"reason": "stale", "detail": "the head moved"},
        }
        assert s.events("compaction.failed")[0]["reason"] == "stale"


async def test_before_collapse_decline_and_summary(open_session) -> None:
    answers: list[Any] = [{"decline": True}, {"summary": "HOOKED"}]

    def setup(h: Any) -> None:
        ns = h.namespace("policy")
        h.hooks(
            ns,
            COLLAPSE_KIND,
            {"before_collapse": lambda reason, through, entries, api, ctx: answers.pop(0)},
        )

    async with open_session([faux_response("a1")], config={"keepRecent": 1}, setup=setup) as s:
        await converse(s, "q1")
        declined = await s.harness.wait_for_task(await s.root.collapse(BACKGROUND), BACKGROUND)
        assert declined.outcome["failure"]["reason"] == "declined"
        done = await s.harness.wait_for_task(await s.root.collapse(BACKGROUND), BACKGROUND)
        assert done.outcome["status"] == "completed"
        assert s.faux.state.call_count == 1  # the hook's summary needed no provider call
        summary = (await s.entries())[-1]
        assert summary.model[0]["content"] == "HOOKED"


async def test_collapse_without_a_model_fails_no_model(open_session) -> None:
    async with open_session([], model=False, config={"keepRecent": 1}) as s:
        for text in ("one", "two"):
            await s.root.write(
                "pi.notice", BACKGROUND, model=[{"role": "user", "content": text, "timestamp": 1}]
            )
        task = await s.harness.wait_for_task(await s.root.collapse(BACKGROUND), BACKGROUND)
        assert task.outcome["failure"]["reason"] == "no_model"


async def test_summarizer_tool_calls_are_a_retryable_failure(open_session) -> None:
    script = [faux_response("a1"), faux_response(faux_tool_call("x", {})), faux_response("S")]
    async with open_session(script, config={"keepRecent": 1}) as s:
        await converse(s, "q1")
        task_id = await s.root.collapse(BACKGROUND)
        retrying = await s.wait_event("compaction.retrying")
        assert "tool calls" in retrying["error"]
        assert s.view["compaction"]["stage"] == "retrying"
        await s.clock.wait_for_sleepers(1)
        s.clock.advance(retrying["retryAt"] - s.clock.now())
        task = await s.harness.wait_for_task(task_id, BACKGROUND)
        assert task.outcome["status"] == "completed"


async def test_threshold_creates_a_foreground_collapse_and_the_generation_completes(
    open_session,
) -> None:
    script = [faux_response("a1"), faux_response("a long enough answer"), faux_response("S")]
    async with open_session(script, config={"keepRecent": 1}) as s:
        await converse(s, "q1")
        await s.root.set_config({"threshold": 1}, BACKGROUND)
        record = await (await s.root.send("q2", BACKGROUND)).wait(BACKGROUND)
        assert record.status == "done"
        started = await s.wait_event("compaction.started")
        assert started["reason"] == "threshold"
        envelope = next(
            e for e in s.envelopes if any(v["type"] == "compaction.started" for v in e.events)
        )
        assert any(v["type"] == "generation.completed" for v in envelope.events)
        await s.harness.wait_for_task(started["taskId"], BACKGROUND)
        assert (await s.entries())[-1].kind == "pi.summary"


def small_model(window: int) -> FauxProvider:
    return FauxProvider(
        [],
        models=[
            ModelInfo(
                id="faux-1", provider="faux", api="faux", context_window=window, max_output=10
            )
        ],
    )


async def test_overflow_with_nothing_collapsible_notices_immediately(open_session) -> None:
    provider = small_model(60)
    async with open_session(provider=provider) as s:
        record = await (await s.root.send("x" * 400, BACKGROUND)).wait(BACKGROUND)
        assert record.status == "unanswered" and record.reason == "failed"
        assert s.events("generation.failed")[0]["reason"] == "overflow"
        notice = (await s.entries())[-1]
        assert notice.kind == "pi.notice" and "nothing to compact" in notice.model[0]["content"]
        assert (await s.root.sticky(BACKGROUND)).get("inbox", []) == []
        assert provider.state.call_count == 0


async def test_overflow_collapses_and_a_replacement_generation_answers(open_session) -> None:
    provider = small_model(120)
    provider.set_responses([faux_response("short"), faux_response("S"), faux_response("fits now")])
    async with open_session(provider=provider, config={"keepRecent": 60}) as s:
        await converse(s, "y" * 300)
        handle = await s.root.send("z" * 300, BACKGROUND)
        record = await handle.wait(BACKGROUND)
        assert record.status == "done"
        assert [e["reason"] for e in s.events("generation.failed")] == ["overflow"]
        assert s.events("compaction.started")[0]["reason"] == "overflow"
        waiting = s.view_after("compaction.started")["turn"]["generation"]
        assert waiting == {"stage": "waiting", "on": "compaction"}
        assert context_texts(provider.state.requests[-1]) == ["S", "z" * 300]


async def test_overflow_replacement_fails_with_a_notice_when_the_collapse_failed(
    open_session,
) -> None:
    # docs/design/decisions.md#d8-g13
    provider = small_model(120)
    provider.set_responses([faux_response("short"), faux_error("summarizer down")])
    async with open_session(provider=provider, config={"keepRecent": 60}) as s:
        await converse(s, "y" * 300)
        record = await (await s.root.send("z" * 300, BACKGROUND)).wait(BACKGROUND)
        assert record.status == "unanswered" and record.reason == "failed"
        assert s.events("compaction.failed")[0]["reason"] == "provider"
        notice = [e for e in await s.entries() if e.kind == "pi.notice"][-1]
        assert notice.model[0]["content"] == "compaction failed: provider"
        assert provider.state.call_count == 2


def test_choose_through_keeps_exchanges_whole() -> None:
    from pico3.storage.records import Entry

    def entry(i: int, kind: str, text: str) -> Entry:
        role = {"pi.user": "user", "pi.assistant": "assistant", "pi.tool_result": "toolResult"}[
            kind
        ]
        message: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}]}
        if role == "toolResult":
            message.update(toolCallId="c", toolName="t", isError=False)
        return Entry(id=i, conversation_id=1, kind=kind, model=[message])

    entries = [
        entry(1, "pi.user", "u" * 40),
        entry(2, "pi.assistant", "a" * 40),
        entry(3, "pi.tool_result", "r" * 40),
        entry(4, "pi.user", "v" * 8),
    ]
    assert choose_through(entries, 1000) is None
    assert choose_through(entries, 1) == 3  # the newest alone is too big: keep just it
    assert choose_through(entries, 21) == 3  # the assistant+result exchange does not fit whole
    assert choose_through(entries, 30) == 1
