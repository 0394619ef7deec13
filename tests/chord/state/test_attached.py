"""Attached source: exact frames republished as revisions (docs/design/chord.md#replicated-state)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from chord.context import BACKGROUND, Context, create_context_key, with_value
from chord.delta.apply import apply_immutable
from chord.state import (
    Delivery,
    SourceFrame,
    SourceSnapshot,
    is_replicated_state,
    replicated_state_from_source,
)


class LogAttachment:
    def __init__(self, log: CommitLog, snapshot: SourceSnapshot[Any]) -> None:
        self.log = log
        self.snapshot = snapshot
        self.buffer: list[SourceFrame[Any]] = []
        self.listener: Callable[[SourceFrame[Any]], None] | None = None
        self.disposals = 0

    def deliver(self, frame: SourceFrame[Any]) -> None:
        if self.listener is None:
            self.buffer.append(frame)
        else:
            self.listener(frame)

    def activate(self, listener: Callable[[SourceFrame[Any]], None]) -> None:
        assert self.listener is None, "activate is single use"
        self.listener = listener
        while self.buffer:
            listener(self.buffer.pop(0))

    def dispose(self) -> None:
        self.disposals += 1
        if self in self.log.attachments:
            self.log.attachments.remove(self)


class CommitLog:
    """A minimal exact-ops source: each commit is one frame with a gapless cursor."""

    def __init__(self, value: Any, cursor: int = 0) -> None:
        self.value = value
        self.cursor = cursor
        self.attachments: list[LogAttachment] = []
        self.during_attach: Callable[[], None] | None = None

    def commit(self, ops: list[Any], ctx: Context = BACKGROUND, *, cursor: Any = None) -> None:
        self.value = apply_immutable(self.value, ops)
        self.cursor += 1
        frame = SourceFrame(self.cursor if cursor is None else cursor, self.value, tuple(ops), ctx)
        for attachment in list(self.attachments):
            attachment.deliver(frame)

    def attach(self) -> LogAttachment:
        attachment = LogAttachment(self, SourceSnapshot(self.value, self.cursor))
        self.attachments.append(attachment)
        if self.during_attach is not None:
            self.during_attach()
        return attachment


def test_frames_committed_during_attach_drain_in_order_and_sequence_restarts() -> None:
    log = CommitLog({"n": 0}, cursor=41)
    log.during_attach = lambda: (
        log.commit([("s", ("n",), 1)]),
        log.commit([("s", ("n",), 2)]),
    )
    seen: list[tuple[tuple[Any, ...], int]] = []
    state = replicated_state_from_source(log)
    assert is_replicated_state(state)
    assert state.value == {"n": 2} and state.sequence == 2
    state.add_source_listener(lambda ops, seq, ctx: seen.append((ops, seq)))
    log.during_attach = None
    log.commit([("s", ("n",), 3)])
    assert seen == [((("s", ("n",), 3),), 3)]
    deliveries: list[Delivery] = []
    state.subscribe(lambda v, c, d: deliveries.append(d))
    assert deliveries == [Delivery("hydrate", 3)]


def test_exact_value_and_ops_references_are_published() -> None:
    log = CommitLog({"xs": []})
    state = replicated_state_from_source(log)
    published: list[Any] = []
    state.add_source_listener(lambda ops, seq, ctx: published.append(ops))
    values: list[tuple[Any, Context]] = []
    state.subscribe(lambda v, c, d: values.append((v, c)))
    ctx = with_value(create_context_key("k"), 1, BACKGROUND)
    log.commit([("p", ("xs",), 0, 0, [1])], ctx)
    frame_value = log.value
    assert state.value is frame_value
    assert values[-1][0] is frame_value and values[-1][1] is ctx
    assert published == [(("p", ("xs",), 0, 0, [1]),)]


@pytest.mark.parametrize("bad_cursor", [3, 1, "2", True])
def test_a_cursor_gap_is_reported_and_disposes_the_attachment(bad_cursor: Any) -> None:
    errors: list[BaseException] = []
    log = CommitLog({"n": 0})
    state = replicated_state_from_source(log, on_error=errors.append)
    log.commit([("s", ("n",), 1)])
    log.commit([("s", ("n",), 2)], cursor=bad_cursor)
    assert len(errors) == 1 and "cursor gap" in str(errors[0])
    assert state.value == {"n": 1} and state.sequence == 1
    assert state.disposed and log.attachments == []
    log.commit([("s", ("n",), 3)])
    assert state.value == {"n": 1}


def test_listener_errors_go_to_on_error_and_never_reach_the_source() -> None:
    errors: list[BaseException] = []
    log = CommitLog({"n": 0})
    state = replicated_state_from_source(log, on_error=errors.append)

    def broken(value: Any, ctx: Context, delivery: Delivery) -> None:
        raise RuntimeError(f"listener {delivery.sequence}")

    def broken_source(ops: Any, seq: int, ctx: Context) -> None:
        raise RuntimeError(f"source {seq}")

    state.subscribe(broken)
    state.add_source_listener(broken_source)
    log.commit([("s", ("n",), 1)])  # does not raise
    assert [str(e) for e in errors] == ["listener 0", "listener 1", "source 1"]
    assert state.value == {"n": 1}


def test_attachments_are_independent_and_dispose_is_idempotent() -> None:
    log = CommitLog({"n": 0})
    first = replicated_state_from_source(log)
    second = replicated_state_from_source(log)
    attachment = log.attachments[0]
    first.dispose()
    first.dispose()
    assert attachment.disposals == 1
    log.commit([("s", ("n",), 1)])
    assert first.value == {"n": 0} and second.value == {"n": 1}
    assert second.sequence == 1
