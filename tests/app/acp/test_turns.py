"""The ACP session's per-turn records stay bounded however many turns a session runs."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coding_agent.acp.turns import ENDED_KEPT, Recent, TurnWaits

pytestmark = pytest.mark.anyio


async def test_a_prompt_gets_its_outcome_and_nothing_is_kept_after() -> None:
    waits = TurnWaits()
    outcome: list[str] = []

    async def prompt() -> None:
        outcome.append(await waits.wait(7))

    async with anyio.create_task_group() as group:
        group.start_soon(prompt)
        with anyio.fail_after(10):
            while waits.waiting() != [7]:
                await anyio.lowlevel.checkpoint()  # let the prompt start waiting (no time passes)
        waits.ended(7, "failed:error:boom")
        waits.ended(7, "done")  # a later hydrate's guess does not replace the told outcome
    assert outcome == ["failed:error:boom"]
    assert len(waits) == 0 and waits.waiting() == []


async def test_a_turn_that_ended_before_its_prompt_waited_is_answered_at_once() -> None:
    waits = TurnWaits()
    waits.ended(3, "done")
    with anyio.fail_after(10):
        assert await waits.wait(3) == "done"
    assert len(waits) == 0


async def test_thousands_of_turns_nobody_waited_for_keep_only_the_last_few() -> None:
    waits = TurnWaits()
    for input_id in range(5000):  # turns resumed after session/load, or sent by nobody here
        waits.ended(input_id, "done")
    assert len(waits) == ENDED_KEPT
    with anyio.fail_after(10):
        assert await waits.wait(4999) == "done"  # a recent one is still known


@given(st.lists(st.integers(0, 50), max_size=300), st.integers(1, 20))
def test_recent_never_holds_more_than_its_size_and_keeps_the_newest(
    keys: list[int], size: int
) -> None:
    recent: Recent[int, int] = Recent(size)
    for index, key in enumerate(keys):
        recent[key] = index
    assert len(recent) <= size
    newest = list(dict.fromkeys(reversed(keys)))[:size]
    assert set(recent) == set(newest)
    for key in recent:
        assert recent[key] == max(i for i, k in enumerate(keys) if k == key)
