"""Fuzzed storage damage through the full harness: commit, corrupt, reopen.

Issue 9 item 2 ("JSONL storage: random truncation and byte corruption of each file → open
either yields a prefix of the committed batches or fails with a clear error; never a half
commit"). ``tests/pico3/storage/test_storage_fuzz.py`` proves it for the storage layer with
hand-made batches; this module proves it end to end, for what a *harness* writes and shows:

1. a reference session is built once through :class:`~pico3.Harness` on JSONL storage: host
   commits of entries, namespace slices in the rewindable, sticky and session documents, config,
   events and a fork, several of them touching many records at once. After every acknowledged
   commit the *observable state* is recorded: each conversation's view snapshot and its entries;
2. each example copies the session, truncates or overwrites bytes of random files, and opens a
   new harness on the copy;
3. the open either raises :class:`~pico3.storage.CorruptStorage` naming the damaged file, or it
   shows exactly one recorded state (a prefix of the acknowledged commits, never half of one),
   the view agrees with storage (its ``entries`` are the stored transcript), and the harness is
   usable: a new commit lands and survives another reopen.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from chord.context import BACKGROUND
from chord.json import copy_json
from pico3 import Harness, Namespace, Transaction
from pico3.session_data.json_shapes import entry_json
from pico3.storage import CorruptStorage, JsonlStorage

ctx = BACKGROUND
DEFAULTS = {
    "rewindable": {"mode": "off"},
    "sticky": {"cache": {}},
    "session": {"runs": 0},
}

State = dict[int, dict[str, Any]]


def _register(harness: Harness) -> Namespace:
    return harness.namespace(
        "fuzz", DEFAULTS, view=lambda s: {"mode": s["mode"], "runs": s["runs"]}
    )


async def observe(harness: Harness) -> State:
    """Every conversation's view snapshot and stored entries (oldest first)."""
    out: State = {}
    for cid in sorted(harness.kernel.conversations):
        conversation = await harness.conversation(cid, ctx)
        assert conversation is not None
        watch = await conversation.watch(ctx)
        view = copy_json(watch.view)
        watch.stop()
        stored = await conversation.entries(ctx, limit=1000)
        out[cid] = {"view": view, "entries": [copy_json(entry_json(e)) for e in reversed(stored)]}
    return out


async def build(directory: Path) -> list[State]:
    """Write the reference session; returns the state after open and after every commit."""
    harness = await Harness.open(JsonlStorage(directory, fsync=False), None, ctx)
    ns = _register(harness)
    root = await harness.root(ctx)
    states = [await observe(harness)]

    async def commit(builder: Any, conversation: Any = root) -> Any:
        result = await conversation.commit(builder, ctx)
        states.append(await observe(harness))
        return result

    def note(n: int) -> Any:
        return lambda tx, _c: tx.write(root.id, "note", data={"n": n})

    def many(tx: Transaction, _c: Any) -> int:
        slice_ = tx.plugins(ns)
        slice_["mode"] = "plan"
        slice_["cache"]["k1"] = "x" * 40
        slice_["runs"] = 1
        tx.emit(ns, "toggled", {"mode": "plan"})
        tx.config(root.id).set({"keepRecent": 7})
        tx.write(root.id, "note", data={"n": 2})
        return tx.write(root.id, "note", model=[{"role": "user", "content": "m", "timestamp": 1}])

    await commit(note(1))
    await commit(many)
    entries = await root.entries(ctx, limit=10)
    fork = await root.fork(entries[0].id, ctx)
    states.append(await observe(harness))
    await commit(lambda tx, _c: tx.write(fork.id, "note", data={"in": "fork"}), fork)
    for n in range(3, 6):
        await commit(note(n))

    def sticky_rewrite(tx: Transaction, _c: Any) -> None:
        cache = tx.plugins(ns)["cache"]
        for key in list(cache):
            del cache[key]
        cache["k2"] = list(range(20))
        tx.plugins(ns)["runs"] = 2

    await commit(sticky_rewrite)
    await commit(lambda tx, _c: tx.plugins(ns).__setitem__("mode", "off"), fork)
    await harness.close(ctx)
    return states


@pytest.fixture(scope="module")
def reference() -> Iterator[tuple[Path, list[State], list[str]]]:
    scratch = Path(tempfile.mkdtemp(prefix="reliability-harness-fuzz-"))
    try:
        directory = scratch / "session"
        states = anyio.run(build, directory)
        yield directory, states, sorted(os.listdir(directory))
    finally:
        shutil.rmtree(scratch)


async def reopen(directory: Path) -> tuple[State, State] | CorruptStorage:
    """Open the damaged copy; return what it shows, then what a reopen shows after one more
    commit (or the open's ``CorruptStorage``)."""
    try:
        harness = await Harness.open(JsonlStorage(directory, fsync=False), None, ctx)
    except CorruptStorage as exc:
        return exc
    _register(harness)
    state = await observe(harness)
    root = await harness.root(ctx)
    await root.write("note", ctx, data={"after": "damage"})
    await harness.close(ctx)
    again = await Harness.open(JsonlStorage(directory, fsync=False), None, ctx)
    _register(again)
    later = await observe(again)
    await again.close(ctx)
    return state, later


damage = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0, 1), st.just(0)),
    st.tuples(st.just("byte"), st.floats(0, 1), st.integers(0, 255)),
)


def test_the_reference_session_spans_several_files_and_states(reference: Any) -> None:
    _directory, states, files = reference
    assert "main.jsonl" in files and len(files) >= 2, files
    assert len(states) >= 10
    assert len({repr(state) for state in states}) == len(states)  # every commit is visible


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data(), damages=st.lists(damage, min_size=1, max_size=3))
def test_a_damaged_session_opens_to_an_acknowledged_state_or_fails_clearly(
    reference: Any, data: st.DataObject, damages: list[tuple[str, float, int]]
) -> None:
    directory, states, files = reference
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "session"
        shutil.copytree(directory, copy)
        for kind, where, value in damages:
            path = copy / data.draw(st.sampled_from(files))
            size = path.stat().st_size
            offset = min(int(where * size), max(size - 1, 0))
            if kind == "truncate":
                os.truncate(path, offset)
            elif size:
                raw = bytearray(path.read_bytes())
                raw[offset] = value
                path.write_bytes(bytes(raw))
        outcome = anyio.run(reopen, copy)
        if isinstance(outcome, CorruptStorage):
            event("refused: CorruptStorage")
            assert outcome.path.startswith(str(copy)), outcome
            assert str(outcome).startswith(outcome.path) and outcome.reason
            return
        state, later = outcome
        event(f"opened at state {states.index(state) if state in states else 'none'}")
        assert state in states, "the reopened session shows a state no commit produced"
        for shown in state.values():
            assert shown["view"]["entries"] == shown["entries"], "view and storage disagree"
        root = min(state)
        assert later[root]["entries"][:-1] == state[root]["entries"]
        assert later[root]["entries"][-1]["data"] == {"after": "damage"}
