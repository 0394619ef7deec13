"""The worker freezes the heap after each turn (and collects every ``collect_every`` turns), and
keeps the collector off while a session host opens."""

from __future__ import annotations

import contextlib
import gc
import json
import subprocess
import sys
import textwrap
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from chord.context import BACKGROUND
from coding_agent.session_files.folders import Session
from coding_agent.worker.gc_policy import (
    freeze_after_turns,
    pause_for_start_up,
    pause_while_opening,
    start_up_done,
)
from coding_agent.worker.main import WorkerConfig, open_session_host
from pico3.harness import Harness, HarnessOptions
from pico3.models import FauxProvider, faux_response
from pico3.storage import MemoryStorage
from pico3.turn.models import Models

sys.path.insert(0, str(Path(__file__).parents[1] / "providers"))
from stub_server import Reply, StubServer, sse

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


class _Cycle:
    def __init__(self) -> None:
        self.me = self


@contextlib.asynccontextmanager
async def _policy_over_a_frozen_heap() -> AsyncIterator[Any]:
    """A harness's root conversation, with the heap frozen as an opening leaves it, the
    collector off (only the policy collects) and the policy on (a look at every turn's end,
    collecting past a quarter's growth)."""
    faux = FauxProvider([faux_response(f"answer {i}") for i in range(3)])
    options = HarnessOptions(services={"models": Models([faux])})
    harness = await Harness.open(MemoryStorage(), options, BACKGROUND)
    gc.collect()
    gc.freeze()  # as an opening leaves it
    was_enabled = gc.isenabled()
    gc.disable()  # only the policy collects
    async with harness:
        root = await harness.root(BACKGROUND)
        await root.set_config({"model": {"provider": "faux", "modelId": "faux-1"}}, BACKGROUND)
        await harness.resume(BACKGROUND)
        stop = freeze_after_turns(harness.kernel, collect_every=1, growth=0.25)
        try:
            yield root
        finally:
            stop()
            if was_enabled:
                gc.enable()
    gc.collect()  # the garbage the test made


async def _turn(root: Any, prompt: str) -> None:
    assert (await (await root.send(prompt, BACKGROUND)).wait(BACKGROUND)).status == "done"


async def test_a_full_collection_waits_for_the_frozen_heap_to_grow_by_a_share() -> None:
    async with _policy_over_a_frozen_heap() as root:
        small = _Cycle()
        kept = weakref.ref(small)
        del small  # garbage, frozen at the turn's end; the heap grew by a little
        await _turn(root, "q0")
        assert kept() is not None  # no full collection: the heap did not grow enough
        big = [_Cycle() for _ in range(gc.get_freeze_count() // 2)]
        del big  # garbage: more than a quarter of the frozen heap
        await _turn(root, "q1")
        assert kept() is None  # a full collection reclaimed what freezing held
        assert gc.get_freeze_count() > 0  # and froze what is alive again


async def test_the_first_look_at_the_frozen_heap_only_takes_its_measure() -> None:
    """A policy that begins over a large frozen heap (a worker the warm start's server forked
    begins with the server's preload frozen) does not walk it then: its first look measures the
    heap, and only growth beyond that measure collects."""
    async with _policy_over_a_frozen_heap() as root:
        big = [_Cycle() for _ in range(gc.get_freeze_count() // 2)]
        kept = weakref.ref(big[0])
        del big  # garbage: more than a quarter of what was frozen when the policy began
        await _turn(root, "q0")
        assert kept() is not None  # the first look only measured
        await _turn(root, "q1")
        assert kept() is not None  # and the heap has not grown by a quarter since


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


def test_the_start_up_pause_is_one_more_opening_and_ends_once() -> None:
    gc.unfreeze()
    pause_for_start_up()
    pause_for_start_up()  # on already: the same pause
    assert not gc.isenabled()
    opening = pause_while_opening()
    start_up_done()  # an opening still runs: frozen, the collector still off
    assert gc.get_freeze_count() > 0 and not gc.isenabled()
    opening(True)
    assert gc.isenabled()
    start_up_done()  # ended already: nothing happens
    assert gc.isenabled()
    gc.unfreeze()
    pause_for_start_up()  # a command line that runs no first request ends it without a freeze
    start_up_done(freeze=False)
    assert gc.isenabled() and gc.get_freeze_count() == 0


_AT_EXIT = """
import atexit, gc, sys
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count() > 0))  # runs last
from coding_agent.cli.main import main
try:
    code = main(["--version"])
except SystemExit as exit:  # argparse's way out of --version
    code = exit.code
print("frozen after main:", gc.get_freeze_count() > 0)
sys.exit(code)
"""


def test_the_command_line_leaves_the_heap_frozen_for_the_interpreters_exit_only(
    project: Path, agent_env: dict[str, str]
) -> None:
    # The exit's full collections walk nothing (~100 ms of a -p run's CPU after its answer);
    # until the interpreter exits, nothing is frozen (a test may call main() in-process).
    done = subprocess.run(
        [sys.executable, "-c", _AT_EXIT], cwd=project, env=agent_env, capture_output=True,
        text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == ["frozen after main: False", "frozen at exit: True"]


_HEADLESS = """
import gc, json, os, sys
collections = []
gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(info["generation"]))
port = int(sys.argv[1])
at_request = {}
def hook(event, args):
    address = args[1] if event == "socket.connect" else None
    if isinstance(address, tuple) and address[1] == port and not at_request:
        later = ("yaml", "pathspec", "xml.sax", "jsonschema", "watchfiles", "difflib")  # only some tools and files need them
        at_request.update(
            collections=list(collections),
            enabled=gc.isenabled(),
            imported=sorted(name for name in later if name in sys.modules),
        )
sys.addaudithook(hook)
from coding_agent.cli.main import main
collections.clear()  # from here on the command line's own start-up
code = main(["-p", "hello", "--model", "openai/gpt-4.1"])
print(json.dumps({"code": code, "at_request": at_request, "enabled": gc.isenabled()}))
"""


def test_a_headless_run_collects_nothing_before_its_first_request(
    project: Path, agent_env: dict[str, str]
) -> None:
    # Everything a -p run allocates before it asks the model lives as long as the process; the
    # SDK client ends the pause, so the request (and the rest of the run) has the collector on.
    # Nor does the run import before it what only some tools and files need (YAML frontmatter,
    # glob patterns, the gitignore walker, an edit's diff).
    chunk = {"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}
    events = [
        sse({"id": "c1", "object": "chat.completion.chunk", "choices": [chunk]}),
        "data: [DONE]\n\n",
    ]
    with StubServer([Reply(events=events)]) as server:
        env = {**agent_env, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": f"{server.url}/v1"}
        port = server.url.rsplit(":", 1)[1]
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(_HEADLESS), port],
            cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    got = json.loads(lines[-1])
    assert lines[0] == "hi"
    assert got == {
        "code": 0,
        "at_request": {"collections": [], "enabled": True, "imported": []},
        "enabled": True,
    }
