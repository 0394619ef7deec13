"""The worker freezes the heap after each turn (and collects every ``collect_every`` turns)."""

from __future__ import annotations

import gc

import pytest

from chord.context import BACKGROUND
from coding_agent.worker.gc_policy import freeze_after_turns
from pico3.harness import Harness, HarnessOptions
from pico3.models import FauxProvider, faux_response
from pico3.storage import MemoryStorage
from pico3.turn.models import Models

pytestmark = pytest.mark.anyio


async def test_each_turn_end_freezes_the_heap_and_stopping_unfreezes() -> None:
    faux = FauxProvider([faux_response(f"answer {i}") for i in range(3)])
    options = HarnessOptions(services={"models": Models([faux])})
    harness = await Harness.open(MemoryStorage(), options, BACKGROUND)
    gc.unfreeze()
    async with harness:
        root = await harness.root(BACKGROUND)
        await root.set_config({"model": {"provider": "faux", "modelId": "faux-1"}}, BACKGROUND)
        await harness.resume(BACKGROUND)
        stop = freeze_after_turns(harness.kernel, collect_every=2)
        try:
            await root.write("bench.note", BACKGROUND, data={"n": 1})  # no turn: nothing frozen
            assert gc.get_freeze_count() == 0
            for i in range(3):
                record = await (await root.send(f"q{i}", BACKGROUND)).wait(BACKGROUND)
                assert record.status == "done"
                assert gc.get_freeze_count() > 0
        finally:
            stop()
        assert gc.get_freeze_count() == 0
