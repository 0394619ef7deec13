"""The view decoded into typed records (``pico3.ViewDecoder``, docs/design/view.md#typed-records).

The JSON here is what the harness really produces: a turn with a failed attempt (``pi.usage``),
thinking, streamed text, a tool call with progress and details, a notice and a feature's own
entry kind, folded envelope by envelope into the replica a client holds. Every revision decodes
(core kinds into their own records, never the generic one), decoding revisions in any order with
one decoder gives what a fresh decode gives, and the records re-encode to what they decoded from.
"""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chord.context import BACKGROUND, Context
from pico3 import (
    AssistantEntry,
    CustomEntry,
    NoticeEntry,
    SystemEntry,
    ToolResultEntry,
    UsageEntry,
    UserEntry,
    View,
    ViewDecoder,
    ViewEntry,
    view_from_json,
)
from pico3.models import AssistantMessage, TextContent, ThinkingContent, ToolCall
from pico3.models.faux import (
    faux_error,
    faux_response,
    faux_text,
    faux_thinking,
    faux_tool_call,
)
from pico3.session_data import CORE_KINDS
from pico3.tools import ToolApi, ToolDeclaration, ToolResult

pytestmark = pytest.mark.anyio


async def _harness_views(open_session: Any) -> list[Any]:
    """Every revision of the root's view through a turn that touches each record type."""

    async def probe(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        await api.progress(lambda free: free.update(progress="half way"), ctx)
        return ToolResult.text(f"probed {args['path']}", details={"diff": "+new\n-old"})

    def setup(h: Any) -> None:
        schema = {"type": "object", "properties": {"path": {"type": "string"}}}
        h.register_tool(ToolDeclaration("probe", "probe a path", schema, probe, replay="safe"))

    script = [
        faux_error("overloaded", retryable=True),
        faux_response(
            faux_thinking("let me look"),
            faux_text("Looking at " + " ".join(f"w{i}" for i in range(30))),
            faux_tool_call("probe", {"path": "src/app.py"}),
        ),
        faux_response("It is **fine**."),
    ]
    async with open_session(script, setup=setup, config={"selectedTools": ["probe"]}) as s:
        await s.root.write(
            "pi.notice", BACKGROUND, model=[{"role": "user", "content": "build done"}]
        )
        await s.root.write("feature.mark", BACKGROUND, data={"label": "here", "n": [1, 2]})
        handle = await s.root.send("check the app", BACKGROUND)
        await s.clock.wait_for_sleepers(1)  # the failed attempt waits to retry
        s.clock.advance(60_000)
        with anyio.fail_after(30):
            assert (await handle.wait(BACKGROUND)).status == "done"
            await s.idle()
        return list(s.views)


async def test_the_harness_view_decodes_into_records_at_every_revision(open_session: Any) -> None:
    views = await _harness_views(open_session)
    final = view_from_json(views[-1])
    kinds = [entry.kind for entry in final.entries]
    assert kinds == [
        "pi.notice",
        "feature.mark",
        "pi.user",
        "pi.system",
        "pi.usage",
        "pi.assistant",
        "pi.tool_result",
        "pi.assistant",
    ], kinds
    notice, mark, user, system, usage, call, result, answer = final.entries
    assert isinstance(system, SystemEntry) and system.messages
    assert isinstance(notice, NoticeEntry) and notice.user_message is not None
    assert notice.user_message.content == "build done"
    assert isinstance(mark, CustomEntry) and mark.error is None
    assert mark.data == {"label": "here", "n": [1, 2]} and mark.json == views[-1]["entries"][1]
    assert isinstance(user, UserEntry) and user.message is not None
    assert user.message.content in ("check the app", [TextContent("check the app")])
    assert isinstance(usage, UsageEntry) and usage.data.error == "overloaded"
    assert usage.data.attempt == 1
    assert isinstance(call, AssistantEntry) and call.message is not None
    blocks = call.message.content
    assert [type(block) for block in blocks] == [ThinkingContent, TextContent, ToolCall]
    assert isinstance(blocks[2], ToolCall) and blocks[2].arguments == {"path": "src/app.py"}
    assert call.message.stop_reason == "toolUse" and call.data.attempt == 2
    assert isinstance(result, ToolResultEntry) and result.message is not None
    assert result.message.tool_call_id == blocks[2].id and result.diff == "+new\n-old"
    assert isinstance(answer, AssistantEntry) and answer.message is not None
    assert answer.message.content == [TextContent("It is **fine**.")]
    assert final.turn is None and final.inbox == () and final.tasks == {}
    assert final.config["model"] == {"provider": "faux", "modelId": "faux-1"}

    # along the way: a retrying generation, the streaming message, the running slot
    decoded = [view_from_json(view) for view in views]
    turns = [view.turn for view in decoded if view.turn is not None]
    stages = {turn.generation.stage for turn in turns if turn.generation is not None}
    assert {"retrying", "streaming"} <= stages, stages
    retrying = next(t for t in turns if t.generation and t.generation.stage == "retrying")
    assert retrying.generation is not None and retrying.generation.last_error == "overloaded"
    assert retrying.generation.retry_at is not None
    streamed = [t.message for t in turns if t.message is not None]
    assert streamed and all(isinstance(m, AssistantMessage) for m in streamed)
    slots = [slot for turn in turns for slot in turn.tools]
    assert {slot.status for slot in slots} >= {"pending", "running"}
    assert "half way" in {slot.progress for slot in slots}
    assert all(slot.call_id == blocks[2].id and slot.name == "probe" for slot in slots)
    for view in decoded:  # the harness never writes a core entry the records do not fit
        for entry in view.entries:
            assert entry.kind not in CORE_KINDS or not isinstance(entry, CustomEntry), entry


async def test_decoding_in_any_order_equals_a_fresh_decode_and_records_round_trip(
    open_session: Any,
) -> None:
    views = await _harness_views(open_session)
    fresh = [view_from_json(view) for view in views]

    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(st.lists(st.integers(0, len(views) - 1), min_size=1, max_size=40))
    def one_decoder_any_order(order: list[int]) -> None:
        decoder = ViewDecoder()
        for index in order:
            view = decoder.decode(views[index])
            assert view is not None and view == fresh[index]
            for entry in view.entries:
                assert _round_trip(entry) == entry

    one_decoder_any_order()


def _round_trip(entry: ViewEntry) -> ViewEntry:
    """``entry`` encoded to JSON and decoded again (a custom entry from the JSON it kept)."""
    if isinstance(entry, CustomEntry):
        return ViewDecoder().entry(entry.json)
    return ViewDecoder().entry(msgspec.to_builtins(entry))


async def test_what_did_not_change_is_the_same_record(open_session: Any) -> None:
    views = await _harness_views(open_session)
    decoder = ViewDecoder()
    previous: View | None = None
    for value in views:
        view = decoder.decode(value)
        assert view is not None
        if previous is not None:
            old = previous.json
            assert (view.entries is previous.entries) == (value["entries"] is old["entries"])
            if value.get("turn") is old.get("turn"):
                assert view.turn is previous.turn
            shared = {id(e) for e in old["entries"]}
            for raw, entry in zip(value["entries"], view.entries, strict=True):
                if id(raw) in shared:  # an entry already decoded is never decoded again
                    assert any(entry is seen for seen in previous.entries)
        previous = view
    assert decoder.decode(views[-1]) is previous  # the same value: the same view
    again = ViewDecoder()
    rehydrated = msgspec.json.decode(msgspec.json.encode(views[-1]))  # a reconnect's copy
    first = again.decode(views[-1])
    second = again.decode(rehydrated)
    assert first is not None and second is not None and second == first
    assert all(a is b for a, b in zip(first.entries, second.entries, strict=True))


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(
    kind=st.sampled_from(sorted(CORE_KINDS)) | st.text(min_size=1),
    extra=st.dictionaries(
        st.sampled_from(["id", "conversationId", "model", "data", "head", "edits"]), _json
    ),
)
def test_any_entry_json_decodes_and_an_unknown_kind_keeps_its_json(
    kind: str, extra: dict[str, Any]
) -> None:
    value = {"kind": kind, **extra}
    entry = ViewDecoder().entry(value)
    assert isinstance(entry, ViewEntry) and entry.kind == kind
    if kind not in CORE_KINDS:
        assert isinstance(entry, CustomEntry) and entry.error is None and entry.json is value
    elif isinstance(entry, CustomEntry):  # a core kind in a shape that does not fit it
        assert entry.error is not None and kind in entry.error and entry.json is value


def test_a_core_entry_that_does_not_fit_its_kind_is_custom_and_says_why() -> None:
    bad = {"id": 7, "conversationId": 1, "kind": "pi.user", "model": [{"role": "user"}]}
    entry = view_from_json({"entries": [bad, "not an entry"]}).entries
    assert isinstance(entry[0], CustomEntry) and entry[0].id == 7
    assert entry[0].error is not None and "pi.user" in entry[0].error
    assert "content" in entry[0].error and entry[0].json == bad
    assert isinstance(entry[1], CustomEntry) and entry[1].error == "an entry must be an object"


def test_a_live_section_in_the_wrong_shape_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match=r"turn\.tools\[0\]"):
        view_from_json({"turn": {"inputs": [1], "tools": [{"callId": 5}]}})
    with pytest.raises(ValueError, match=r"tasks\['9'\]"):
        view_from_json({"tasks": {"9": {"kind": 3}}})
    with pytest.raises(ValueError, match="a view is a JSON object"):
        ViewDecoder().decode([])  # pyright: ignore[reportArgumentType]
    assert ViewDecoder().decode(None) is None
