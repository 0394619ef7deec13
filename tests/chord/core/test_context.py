"""chord.context: immutable contexts, cancellation with reasons, deadlines, typed values."""

from __future__ import annotations

import time

import anyio
import anyio.lowlevel
import pytest

from chord.context import (
    BACKGROUND,
    BACKGROUND_CONTEXT,
    TODO,
    AbortController,
    AbortSignal,
    ContextCancelled,
    DeadlineExceeded,
    await_with_context,
    cancel_scope,
    create_context_key,
    run_with_context,
    with_abort_signal,
    with_cancel,
    with_deadline,
    with_timeout,
    with_value,
    without_abort_signal,
)

NAME = create_context_key("name")
ID = create_context_key("id")


def test_roots_are_distinct_and_empty() -> None:
    assert BACKGROUND is BACKGROUND_CONTEXT
    assert BACKGROUND is not TODO
    assert BACKGROUND.abort_signal is None and TODO.abort_signal is None
    assert BACKGROUND.deadline is None
    assert BACKGROUND.value(NAME) is None
    assert not BACKGROUND.cancelled
    assert str(BACKGROUND) == "[Context BACKGROUND_CONTEXT]"
    assert str(TODO) == "[Context TODO_CONTEXT]"


def test_with_value_layers_without_touching_the_parent() -> None:
    a = with_value(NAME, "outer", BACKGROUND)
    b = with_value(ID, 7, a)
    c = with_value(NAME, "inner", b)
    assert a.value(NAME) == "outer" and a.value(ID) is None
    assert b.value(NAME) == "outer" and b.value(ID) == 7
    assert c.value(NAME) == "inner" and c.value(ID) == 7
    assert str(c) == "[Context BACKGROUND_CONTEXT.WithValue(name).WithValue(id).WithValue(name)]"
    assert BACKGROUND.value(NAME) is None


def test_keys_compare_by_identity() -> None:
    twin = create_context_key("name")
    ctx = with_value(NAME, 1, BACKGROUND)
    assert ctx.value(twin) is None
    assert ctx.has_value(NAME) and not ctx.has_value(twin)
    assert with_value(twin, None, BACKGROUND).has_value(twin)


def test_context_is_immutable() -> None:
    with pytest.raises(AttributeError, match="immutable"):
        BACKGROUND._label = "x"  # type: ignore[misc]


def test_child_cancel_leaves_parent_and_siblings() -> None:
    parent, cancel_parent = with_cancel(BACKGROUND)
    child, cancel_child = with_cancel(parent)
    sibling, _ = with_cancel(parent)
    cancel_child("only me")
    assert child.cancelled and child.reason == "only me"
    assert not parent.cancelled and not sibling.cancelled
    cancel_parent("everyone")
    assert parent.reason == "everyone"
    assert sibling.cancelled and sibling.reason == "everyone"
    assert child.reason == "only me"  # first abort wins


def test_parent_abort_reaches_children_with_its_reason() -> None:
    parent, cancel = with_cancel(BACKGROUND)
    grandchild, _ = with_cancel(with_value(NAME, "x", with_cancel(parent)[0]))
    cancel("shutdown")
    assert grandchild.cancelled and grandchild.reason == "shutdown"
    assert grandchild.value(NAME) == "x"


def test_cancel_without_reason_uses_aborted() -> None:
    ctx, cancel = with_cancel(BACKGROUND)
    cancel()
    assert ctx.reason == "aborted"


def test_without_abort_signal_keeps_values() -> None:
    ctx, cancel = with_cancel(with_value(NAME, "kept", BACKGROUND))
    cancel("x")
    detached = without_abort_signal(ctx)
    assert not detached.cancelled
    assert detached.abort_signal is None
    assert detached.value(NAME) == "kept"


def test_signal_listeners_fire_once_and_removal_works() -> None:
    controller = AbortController()
    seen: list[object] = []
    controller.signal.add_listener(seen.append)
    remove = controller.signal.add_listener(lambda r: seen.append(("removed", r)))
    remove()
    remove()  # idempotent
    controller.abort("a")
    controller.abort("b")
    assert seen == ["a"]
    assert controller.signal.reason == "a"


def test_failing_listener_does_not_stop_others(caplog: pytest.LogCaptureFixture) -> None:
    controller = AbortController()
    seen: list[object] = []

    def boom(_: object) -> None:
        raise RuntimeError("listener bug")

    controller.signal.add_listener(boom)
    controller.signal.add_listener(seen.append)
    controller.abort("go")
    assert seen == ["go"]
    assert "abort listener failed" in caplog.text


def test_signal_any_takes_the_first_reason() -> None:
    a, b = AbortController(), AbortController()
    combined = AbortSignal.any([a.signal, b.signal])
    b.abort("b first")
    a.abort("a later")
    assert combined.aborted and combined.reason == "b first"


def test_with_abort_signal_combines_with_parent() -> None:
    external = AbortController()
    parent, cancel_parent = with_cancel(BACKGROUND)
    ctx = with_abort_signal(external.signal, parent)
    external.abort("external")
    assert ctx.reason == "external" and not parent.cancelled
    ctx2 = with_abort_signal(AbortController().signal, parent)
    cancel_parent("parent")
    assert ctx2.reason == "parent"


def test_deadline_in_the_past_is_cancelled_with_deadline_exceeded() -> None:
    ctx, _ = with_deadline(time.monotonic() - 1, BACKGROUND)
    assert ctx.cancelled
    assert isinstance(ctx.reason, DeadlineExceeded)
    with pytest.raises(DeadlineExceeded):
        ctx.raise_if_cancelled()


def test_child_deadline_never_extends_the_parent() -> None:
    parent, _ = with_deadline(time.monotonic() + 1, BACKGROUND)
    child, _ = with_deadline(time.monotonic() + 100, parent)
    assert child.deadline == parent.deadline


def test_deadline_must_be_finite() -> None:
    with pytest.raises(ValueError, match="finite"):
        with_deadline(float("inf"), BACKGROUND)


@pytest.mark.anyio
async def test_wait_cancelled_returns_the_reason() -> None:
    ctx, cancel = with_cancel(BACKGROUND)
    async with anyio.create_task_group() as tg:
        result: list[object] = []

        async def waiter() -> None:
            result.append(await ctx.wait_cancelled())

        tg.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        cancel("stop")
    assert result == ["stop"]


@pytest.mark.anyio
async def test_wait_cancelled_wakes_at_the_deadline() -> None:
    ctx, _ = with_timeout(0.01, BACKGROUND)
    reason = await ctx.wait_cancelled()
    assert isinstance(reason, DeadlineExceeded)


@pytest.mark.anyio
async def test_cancel_scope_stops_work_and_raises_the_reason() -> None:
    ctx, cancel = with_cancel(BACKGROUND)
    reached = anyio.Event()
    finished = False

    async def work() -> None:
        nonlocal finished
        reached.set()
        await anyio.sleep_forever()
        finished = True

    caught: list[BaseException] = []

    async def guarded() -> None:
        try:
            with cancel_scope(ctx):
                await work()
        except ContextCancelled as exc:
            caught.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(guarded)
        await reached.wait()
        cancel("user pressed esc")
    assert len(caught) == 1 and "user pressed esc" in str(caught[0])
    assert not finished


@pytest.mark.anyio
async def test_cancel_scope_honours_the_deadline() -> None:
    ctx, _ = with_timeout(0.01, BACKGROUND)
    with pytest.raises(DeadlineExceeded), cancel_scope(ctx):
        await anyio.sleep_forever()


@pytest.mark.anyio
async def test_exception_reason_is_raised_as_is() -> None:
    ctx, cancel = with_cancel(BACKGROUND)
    cancel(TimeoutError("provider gone"))
    with pytest.raises(TimeoutError, match="provider gone"), cancel_scope(ctx):
        await anyio.lowlevel.checkpoint()


@pytest.mark.anyio
async def test_outer_anyio_cancellation_is_not_turned_into_context_cancelled() -> None:
    ctx, _ = with_cancel(BACKGROUND)
    with anyio.move_on_after(0.01) as outer:
        with cancel_scope(ctx):
            await anyio.sleep_forever()
    assert outer.cancelled_caught
    assert not ctx.cancelled


@pytest.mark.anyio
async def test_run_with_context_returns_the_result_or_raises() -> None:
    async def add(a: int, b: int) -> int:
        await anyio.lowlevel.checkpoint()
        return a + b

    assert await run_with_context(add, BACKGROUND, 2, 3) == 5
    ctx, cancel = with_cancel(BACKGROUND)
    cancel("nope")
    with pytest.raises(ContextCancelled, match="nope"):
        await run_with_context(add, ctx, 1, 1)


@pytest.mark.anyio
async def test_await_with_context_already_cancelled_raises_immediately() -> None:
    ctx, cancel = with_cancel(BACKGROUND)
    cancel("early")

    async def value() -> int:
        return 1

    with pytest.raises(ContextCancelled, match="early"):
        await await_with_context(value(), ctx)
    assert await await_with_context(value(), BACKGROUND) == 1
