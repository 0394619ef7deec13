"""The worker freezes the heap after each turn (and collects every ``collect_every`` turns), and
keeps the collector off while a session host opens."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from chord.context import BACKGROUND
from coding_agent.sessions import Session
from coding_agent.worker.gc_policy import freeze_after_turns, pause_while_opening
from coding_agent.worker.main import WorkerConfig, open_session_host
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


def test_the_collector_is_off_while_openings_run_and_on_after_the_last() -> None:
    gc.unfreeze()
    assert gc.isenabled()
    first = pause_while_opening()
    second = pause_while_opening()
    assert not gc.isenabled()
    first(True)  # opened: what is alive is frozen, the other opening still runs
    assert gc.get_freeze_count() > 0 and not gc.isenabled()
    first(False)  # a later call (the way out) does nothing
    assert not gc.isenabled()
    second(False)  # failed: nothing more frozen, the collector on again
    assert gc.isenabled()
    gc.unfreeze()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    try:
        done = pause_while_opening()
        done(False)
        assert not gc.isenabled()
    finally:
        gc.enable()


async def test_a_session_host_opens_with_the_collector_paused_and_serves_with_it_on(
    session: Session,
) -> None:
    gc.unfreeze()
    async with open_session_host(WorkerConfig(session)) as runtime:
        assert gc.isenabled() and gc.get_freeze_count() > 0  # the opened session is frozen
        root = await runtime.harness.harness.root(BACKGROUND)
        assert (await root.config(BACKGROUND))["model"] is not None
    assert gc.isenabled() and gc.get_freeze_count() == 0
    with pytest.raises(ValueError, match="cannot read the faux script"):
        async with open_session_host(WorkerConfig(session, faux_script=Path("/nonexistent"))):
            pass  # pragma: no cover - never entered
    assert gc.isenabled()  # a failed opening turns it on again too
