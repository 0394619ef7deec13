"""Benchmark: the session tree (``/tree``) and ``/rewind`` of files, next to a plain fork.

A session of 10,000 entries with 200 branch points is built in a real pico3 harness (JSONL
storage, fsync off): a root conversation and 200 forks, each fork made at an entry of an earlier
branch, every branch a run of turns (a ``pi.user`` prompt, a ``pi.system`` entry, an assistant
answer with its model; every tenth turn a tool call and its result). Then, each the best of five
rounds:

* **tree** — what ``/tree`` costs from the moment it asks: the worker's ``outline()`` (every
  branch's own entries read from the harness, :func:`coding_agent.session_files.tree.build_outline`),
  :func:`~coding_agent.session_files.tree.build_tree`, and rendering it: a Textual ``Tree`` filled with
  every node (all expanded) in a headless app, until the screen is painted;
* **rewind 50 files** — :meth:`FileHistory.plan` and :meth:`FileHistory.restore` of a branch
  whose turns wrote 50 files (each written twice), pre-images fsynced;
* **plain fork** — the baseline measured in the same run: one ``ConversationHandle.fork`` of the
  same session (what ``/fork`` costs the worker).

Targets (issue 17): tree ≤ 150 ms, rewinding 50 files ≤ 200 ms.

Run: ``uv run python benchmarks/session_tree.py [--entries N] [--branches N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from textual.app import App, ComposeResult
from textual.widgets import Tree

from chord.context import BACKGROUND
from coding_agent.session_files.tree import TreeNode, build_tree
from coding_agent.tui.commands.tree import populate_tree
from coding_agent.worker.file_history import FileHistory
from coding_agent.worker.tree_service import _Tree  # pyright: ignore[reportPrivateUsage]
from pico3 import Harness, HarnessOptions, JsonlStorage, NewEntry
from pico3.kernel.tx import Authority

ROUNDS = 5


class _Box:
    """The tiny part of ``pi.harness`` the tree service uses."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness

    async def conversation(self, conversation_id: int, ctx: Any) -> Any:
        return await self.harness.conversation(conversation_id, ctx)


def _user(text: str, stamp: int) -> NewEntry:
    return NewEntry(kind="pi.user", model=[{"role": "user", "content": text, "timestamp": stamp}])


def _assistant(text: str, stamp: int, tool: bool) -> NewEntry:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if tool:
        content.append({"type": "toolCall", "id": f"c{stamp}", "name": "read", "arguments": {}})
    message = {
        "role": "assistant",
        "content": content,
        "provider": "faux",
        "model": "faux-1",
        "timestamp": stamp,
    }
    return NewEntry(kind="pi.assistant", model=[message])


def _system(stamp: int) -> NewEntry:
    return NewEntry(kind="pi.system", model=[{"role": "system", "content": "", "timestamp": stamp}])


def _result(stamp: int) -> NewEntry:
    message = {
        "role": "toolResult",
        "toolCallId": f"c{stamp}",
        "toolName": "read",
        "content": [{"type": "text", "text": "ok"}],
        "isError": False,
        "timestamp": stamp,
    }
    return NewEntry(kind="pi.tool_result", model=[message])


async def build_session(folder: Path, entries: int, branches: int) -> tuple[Harness, list[int]]:
    """A session of about ``entries`` entries in ``branches + 1`` conversations."""
    harness = await Harness.open(
        JsonlStorage(str(folder), fsync=False), HarnessOptions(), BACKGROUND
    )
    kernel = harness.kernel
    root = (await harness.root(BACKGROUND)).id
    conversations = [root]
    per_branch = entries // (branches + 1)
    stamp = 1_796_000_000_000
    made = 0

    async def fill(cid: int, count: int) -> list[int]:
        nonlocal stamp, made
        ids: list[int] = []
        turn = 0
        while count > 0:
            batch = [_user(f"prompt {made} in {cid}", stamp), _system(stamp)]
            tool = turn % 10 == 9
            batch.append(_assistant(f"answer {made}", stamp, tool))
            if tool:
                batch.append(_result(stamp))

            def build(tx: Any, _ctx: Any, batch: list[NewEntry] = batch) -> list[int]:
                return [tx.append_entry(cid, entry).id for entry in batch]

            ids += await kernel.commit(build, BACKGROUND, authority=Authority.CORE)
            count -= len(batch)
            made += len(batch)
            stamp += 1000
            turn += 1
        return ids

    points = await fill(root, per_branch)
    for index in range(branches):
        source = conversations[index // 2]  # a tree, not a chain: forks of forks of the root
        handle = await harness.conversation(source, BACKGROUND)
        assert handle is not None
        own = [
            e for e in await handle.entries(BACKGROUND, limit=400) if e.conversation_id == source
        ]
        at = own[len(own) // 2].id if own else points[len(points) // 2]
        fork = await handle.fork(at, BACKGROUND)
        conversations.append(fork.id)
        await fill(fork.id, per_branch)
    return harness, conversations


class _TreeApp(App[None]):
    def compose(self) -> ComposeResult:
        tree: Tree[TreeNode] = Tree("session", id="tree")
        tree.show_root = False
        yield tree


async def render_once(roots: list[TreeNode], current: int) -> float:
    """Seconds to fill a Textual ``Tree`` with ``roots`` and paint it (headless)."""
    app = _TreeApp()
    async with app.run_test(size=(120, 50)) as pilot:
        tree = app.query_one(Tree)
        started = time.perf_counter()
        populate_tree(tree, roots, current=current)  # type: ignore[arg-type]
        await pilot.pause()  # layout and paint
        return time.perf_counter() - started


async def measure(entries: int, branches: int, folder: Path) -> None:
    harness, conversations = await build_session(folder / "storage", entries, branches)
    total = 0
    for cid in conversations:
        total += len(await _own(harness, cid))
    print(f"session: {total:,} entries, {len(conversations)} branches ({branches} branch points)")
    service = _Tree(_Box(harness), FileHistory(folder / "history"))  # type: ignore[arg-type]
    outline_times, build_times, render_times = [], [], []
    nodes = 0
    for _ in range(ROUNDS):
        started = time.perf_counter()
        outline = await service.outline(BACKGROUND)
        outlined = time.perf_counter()
        roots = build_tree(outline)
        built = time.perf_counter()
        outline_times.append(outlined - started)
        build_times.append(built - outlined)
        render_times.append(await render_once(roots, conversations[-1]))
        nodes = len(outline["prompts"]) + len(outline["conversations"])
    best = [min(outline_times), min(build_times), min(render_times)]
    cold_started = time.perf_counter()
    await _Tree(_Box(harness), FileHistory(folder / "history")).outline(BACKGROUND)  # type: ignore[arg-type]
    cold = time.perf_counter() - cold_started
    empty = min([await render_once([], conversations[-1]) for _ in range(3)])
    print(
        f"tree: {sum(best) * 1000:.1f} ms (outline {best[0] * 1000:.1f} ms, build "
        f"{best[1] * 1000:.1f} ms, render {best[2] * 1000:.1f} ms; {nodes:,} nodes)  target <= 150 ms"
    )
    print(
        f"  the first outline of a worker (nothing cached): {cold * 1000:.1f} ms; painting an "
        f"empty Tree in the same headless app: {empty * 1000:.1f} ms"
    )

    rewinds = []
    for round_ in range(ROUNDS):
        project = folder / f"project-{round_}"
        project.mkdir()
        history = FileHistory(folder / f"history-{round_}", fsync=True)
        for index in range(50):
            path = project / f"file{index:02}.py"
            path.write_text(f"original {index}\n" * 20)
        for step, anchor in ((1, 10), (2, 20)):
            for index in range(50):
                path = project / f"file{index:02}.py"
                data = f"version {step} of {index}\n".encode() * 20
                history.record(path, data, conversation=1, anchor=anchor, tool="write")
                path.write_bytes(data)
        started = time.perf_counter()
        plans = history.plan({1: None}, 5)
        restored, kept = history.restore(plans, conversation=1, anchor=30)
        rewinds.append(time.perf_counter() - started)
        assert len(restored) == 50 and not kept
        assert (project / "file07.py").read_text() == "original 7\n" * 20
    print(
        f"rewind 50 files: {min(rewinds) * 1000:.1f} ms (plan + restore, fsync on)  target <= 200 ms"
    )

    forks = []
    handle = await harness.conversation(conversations[0], BACKGROUND)
    assert handle is not None
    newest = (await handle.entries(BACKGROUND, limit=1))[0].id
    for _ in range(ROUNDS):
        started = time.perf_counter()
        await handle.fork(newest, BACKGROUND)
        forks.append(time.perf_counter() - started)
    print(f"plain fork (baseline, same session): {min(forks) * 1000:.2f} ms")
    await harness.close(BACKGROUND)


async def _own(harness: Harness, cid: int) -> list[Any]:
    handle = await harness.conversation(cid, BACKGROUND)
    assert handle is not None
    out: list[Any] = []
    before = None
    while True:
        page = await handle.entries(BACKGROUND, limit=512, before=before)
        own = [e for e in page if e.conversation_id == cid]
        out += own
        if len(own) < len(page) or len(page) < 512:
            return out
        before = page[-1].id


def main() -> None:
    parser = argparse.ArgumentParser(description="The session tree and rewind benchmark.")
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--branches", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.getcwd(), prefix=".bench-tree-") as folder:
        asyncio.run(measure(args.entries, args.branches, Path(folder)))


if __name__ == "__main__":
    main()
