"""ToolApi on a real tool slot: memos (docs/design/harness.md#memos), progress,
streaming flushes (docs/design/turn.md#tool)."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from pico3.harness import Harness
from pico3.kernel.tx import Transaction
from pico3.storage import Storage
from pico3.tools import (
    MISSING,
    SlotRejected,
    ToolApi,
    ToolDeclaration,
    ToolResult,
    memo_key,
    slot_memo,
)

pytestmark = pytest.mark.anyio
StorageFactory = Callable[[], Storage]


async def open_slot(storage_factory: StorageFactory, make_slot: Any) -> tuple[Harness, Any]:
    h = await Harness.open(storage_factory(), None, BACKGROUND)
    slot = make_slot(h, (await h.root(BACKGROUND)).id)
    return h, slot


def api_for(slot: Any, **options: Any) -> ToolApi:
    return ToolApi(
        task_id=99, conversation_id=slot.conversation_id, call_id="call_1", slot=slot, **options
    )


async def test_two_concurrent_memo_writers_receive_the_same_winner(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    h, slot = await open_slot(storage_factory, make_slot)
    await slot.create("call_1", "question")
    api = api_for(slot)
    results: dict[str, Any] = {}

    async def write(candidate: str) -> None:
        results[candidate] = await api.memo("answer", {"answer": candidate}, BACKGROUND)

    async with anyio.create_task_group() as group:
        group.start_soon(write, "yes")
        group.start_soon(write, "no")
    assert results["yes"] == results["no"]
    assert (await api.memo("answer", BACKGROUND)) == results["yes"]
    await h.close(BACKGROUND)


async def test_none_is_a_stored_memo_value(storage_factory: StorageFactory, make_slot: Any) -> None:
    h, slot = await open_slot(storage_factory, make_slot)
    await slot.create("call_1", "question")
    api = api_for(slot)
    assert await api.memo("answer", BACKGROUND) is MISSING
    assert await api.memo("answer", None, BACKGROUND) is None
    assert await api.memo("answer", "later", BACKGROUND) is None
    assert await api.memo("answer", BACKGROUND) is None
    await h.close(BACKGROUND)


async def test_a_memo_read_persists_nothing(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    h, slot = await open_slot(storage_factory, make_slot)
    await slot.create("call_1", "question")
    before = h.kernel.storage.seq
    assert await api_for(slot).memo("answer", BACKGROUND) is MISSING
    assert h.kernel.storage.seq == before
    await h.close(BACKGROUND)


async def test_tool_and_hook_memos_with_one_name_do_not_collide(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    h, slot = await open_slot(storage_factory, make_slot)
    await slot.create("call_1", "question")
    api = api_for(slot)
    await api.memo("decision", "tool's", BACKGROUND)
    hook = await slot(
        lambda _tx, s: slot_memo(s, memo_key("hook", "approval", "decision"), "hook's"), BACKGROUND
    )
    assert hook == "hook's"
    assert await api.memo("decision", BACKGROUND) == "tool's"
    stored = await slot.read()
    assert stored["memos"] == {"tool:decision": "tool's", "hook:approval:decision": "hook's"}
    await h.close(BACKGROUND)


async def test_a_non_json_candidate_rejects_and_stores_nothing(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    h, slot = await open_slot(storage_factory, make_slot)
    await slot.create("call_1", "question")
    api = api_for(slot)
    with pytest.raises(ValueError, match="memo 'tool:answer': non-finite number nan"):
        await api.memo("answer", float("nan"), BACKGROUND)
    assert await api.memo("answer", BACKGROUND) is MISSING
    with pytest.raises(TypeError, match=r"memo takes \(name, ctx\)"):
        await api.memo("answer")  # type: ignore[call-overload]
    await h.close(BACKGROUND)


# -- the question tool of docs/design/harness.md#tools, in Python ----------------------------------------------------
QUESTION_PARAMS = {
    "type": "object",
    "properties": {"question": {"type": "string"}},
    "required": ["question"],
}


def question_tool(ask: Callable[[dict[str, Any], ToolApi, Context], Any]) -> ToolDeclaration:
    async def execute(params: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        response = await api.memo("answer", ctx)  # answered before a crash?
        if response is MISSING:
            candidate = await ask(params, api, ctx)  # may wait a long time
            response = await api.memo("answer", candidate, ctx)  # first writer wins
        if response["outcome"] == "cancelled":
            return ToolResult.text("User cancelled", is_error=True)
        return ToolResult.text(
            f"User answered: {response['answer']}", details={**params, "answer": response["answer"]}
        )

    return ToolDeclaration("question", "Ask the user.", QUESTION_PARAMS, execute, replay="safe")


class Crash(Exception):
    """Stands in for the process dying at this point."""


async def test_question_tool_is_not_asked_again_after_a_crash_after_the_memo(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    asked: list[str] = []

    async def ask(params: dict[str, Any], api: ToolApi, ctx: Context) -> Any:
        asked.append(params["question"])
        return {"outcome": "answered", "answer": "blue"}

    tool = question_tool(ask)
    h, slot = await open_slot(storage_factory, make_slot)
    await slot.create("call_1", "question")
    first = await tool.execute({"question": "Colour?"}, api_for(slot), BACKGROUND)
    await h.close(BACKGROUND)  # the result was never recorded: recovery re-invokes the safe tool

    h, slot = await open_slot(storage_factory, make_slot)
    again = await tool.execute({"question": "Colour?"}, api_for(slot), BACKGROUND)
    assert asked == ["Colour?"]
    assert again == first and again.details == {"question": "Colour?", "answer": "blue"}
    await h.close(BACKGROUND)


async def test_question_tool_asks_again_after_a_crash_before_the_memo(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    asked: list[int] = []

    async def ask(params: dict[str, Any], api: ToolApi, ctx: Context) -> Any:
        asked.append(len(asked))
        if len(asked) == 1:
            raise Crash("the process died while the user was looking at the question")
        return {"outcome": "cancelled"}

    tool = question_tool(ask)
    h, slot = await open_slot(storage_factory, make_slot)
    await slot.create("call_1", "question")
    with pytest.raises(Crash):
        await tool.execute({"question": "Colour?"}, api_for(slot), BACKGROUND)
    await h.close(BACKGROUND)

    h, slot = await open_slot(storage_factory, make_slot)
    result = await tool.execute({"question": "Colour?"}, api_for(slot), BACKGROUND)
    assert asked == [0, 1]
    assert result.is_error and result.content == [{"type": "text", "text": "User cancelled"}]
    await h.close(BACKGROUND)


# -- progress ------------------------------------------------------------------------------------
async def test_progress_changes_only_the_free_fields(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    h, slot = await open_slot(storage_factory, make_slot)
    await slot.create("call_1", "question")
    api = api_for(slot)

    def first(free: dict[str, Any]) -> None:
        assert free == {}
        free["progress"] = "half way"
        free["details"] = {"done": 5}
        free["continuedBy"] = 42

    await api.progress(first, BACKGROUND)

    def second(free: dict[str, Any]) -> None:
        assert free == {"progress": "half way", "details": {"done": 5}, "continuedBy": 42}
        del free["continuedBy"]
        free["progress"] = "done"

    await api.progress(second, BACKGROUND)
    stored = await slot.read()
    assert stored == {
        "callId": "call_1",
        "name": "question",
        "args": {},
        "status": "pending",
        "progress": "done",
        "details": {"done": 5},
    }
    await h.close(BACKGROUND)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda free: free.__setitem__("output", "forged"),
            r"protected or unknown slot field\(s\): \['output'\]",
        ),
        (lambda free: free.__setitem__("callId", "other"), r"\['callId'\]"),
        (lambda free: free.__setitem__("memos", {}), r"\['memos'\]"),
        (lambda free: free.__setitem__("progress", 3), "slot.progress must be a str"),
        (lambda free: free.__setitem__("continuedBy", "7"), "slot.continuedBy must be a task id"),
        (lambda free: free.__setitem__("details", {1: 2}), "details"),
    ],
)
async def test_progress_rejects_protected_fields_and_bad_values_without_half_applying(
    storage_factory: StorageFactory,
    make_slot: Any,
    change: Callable[[dict[str, Any]], None],
    message: str,
) -> None:
    h, slot = await open_slot(storage_factory, make_slot)
    await slot.create("call_1", "question")
    before = await slot.read()

    def update(free: dict[str, Any]) -> None:
        free["progress"] = "would be applied"
        change(free)

    with pytest.raises(SlotRejected, match=message):
        await api_for(slot).progress(update, BACKGROUND)
    assert await slot.read() == before
    await h.close(BACKGROUND)


# -- streaming -----------------------------------------------------------------------------------
async def test_stream_output_is_flushed_during_the_body_and_at_the_end(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    h, slot = await open_slot(storage_factory, make_slot)
    await slot.create("call_1", "bash")
    flushed = anyio.Event()
    outputs: list[str] = []

    async def watching(
        fn: Callable[[Transaction, MutableMapping[str, Any]], Any], ctx: Context
    ) -> Any:
        result = await slot(fn, ctx)
        current = (await slot.read()).get("output")
        if current is not None and (not outputs or outputs[-1] != current):
            outputs.append(current)
            flushed.set()
        return result

    api = ToolApi(
        task_id=1,
        conversation_id=slot.conversation_id,
        call_id="c",
        slot=watching,
        flush_interval=0,
    )
    async with api.streaming(BACKGROUND):
        api.stream("line 1\n")
        await flushed.wait()  # the flusher wrote it while the tool is still running
        assert outputs == ["line 1\n"]
        api.stream("line 2\n")
    assert outputs[-1] == "line 1\nline 2\n"
    assert (await slot.read())["output"] == "line 1\nline 2\n"
    assert api.streamed
    await h.close(BACKGROUND)


async def test_a_flush_failure_is_raised_not_swallowed(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    h, slot = await open_slot(storage_factory, make_slot)
    await slot.create("call_1", "bash")
    failed = anyio.Event()

    async def broken(
        fn: Callable[[Transaction, MutableMapping[str, Any]], Any], ctx: Context
    ) -> Any:
        failed.set()
        raise OSError("disk full")

    api = ToolApi(
        task_id=1, conversation_id=slot.conversation_id, call_id="c", slot=broken, flush_interval=0
    )
    with pytest.raises(OSError, match="disk full"):
        async with api.streaming(BACKGROUND):
            api.stream("x")
            await failed.wait()
    await h.close(BACKGROUND)


async def test_a_tool_that_never_streams_writes_no_output(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    h, slot = await open_slot(storage_factory, make_slot)
    await slot.create("call_1", "bash")
    api = api_for(slot)
    async with api.streaming(BACKGROUND):
        pass
    assert "output" not in await slot.read()
    assert not api.streamed
    await h.close(BACKGROUND)


async def test_task_helpers_need_a_runtime(storage_factory: StorageFactory, make_slot: Any) -> None:
    h, slot = await open_slot(storage_factory, make_slot)
    with pytest.raises(RuntimeError, match="wait_for_task needs a task runtime"):
        await api_for(slot).wait_for_task(5, BACKGROUND)
    await h.close(BACKGROUND)


async def test_a_tool_error_leaves_streaming_as_itself(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    h, slot = await open_slot(storage_factory, make_slot)
    await slot.create("call_1", "bash")
    api = api_for(slot)
    with pytest.raises(KeyError, match="tool bug"):  # not wrapped in an ExceptionGroup
        async with api.streaming(BACKGROUND):
            api.stream("partial")
            raise KeyError("tool bug")
    await h.close(BACKGROUND)


async def test_cancellation_unwinds_streaming_without_a_final_flush_error(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    h, slot = await open_slot(storage_factory, make_slot)
    await slot.create("call_1", "bash")
    api = api_for(slot)
    after: list[str] = []
    with anyio.CancelScope() as scope:
        async with api.streaming(BACKGROUND):
            api.stream("partial")
            scope.cancel()
            await anyio.Event().wait()
        after.append("not reached")
    assert scope.cancelled_caught and after == []
    await h.close(BACKGROUND)


async def test_progress_refuses_an_async_update(
    storage_factory: StorageFactory, make_slot: Any
) -> None:
    h, slot = await open_slot(storage_factory, make_slot)
    await slot.create("call_1", "question")

    async def update(free: dict[str, Any]) -> None:
        free["progress"] = "never applied"

    with pytest.raises(TypeError, match="plain \\(non-async\\) function"):
        await api_for(slot).progress(update, BACKGROUND)
    assert "progress" not in await slot.read()
    await h.close(BACKGROUND)
