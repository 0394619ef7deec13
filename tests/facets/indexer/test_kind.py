"""The ``repo.indexer`` kind and the ``code_search`` tool on a real harness (docs/design/harness.md#task-kinds).

A real temporary working tree (with ``.gitignore`` files) is indexed into a real SQLite FTS5 file
in the session's state folder; the model then finds lines through ``code_search`` (a faux model
calls the tool; the result is read from the transcript). Progress is read from the view's
``tasks[id].status`` while the run is parked between a batch write and its commit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND
from facets_indexer.contract import INDEX_FILE_NAME, INDEXER_KIND
from facets_indexer.kind import STATE_DIR_SERVICE, AfterWrite, indexer_kind
from facets_indexer.session import CODE_SEARCH, install_indexer
from facets_indexer.store import IndexStore
from pico3 import Harness
from pico3.handle import HarnessHandle
from pico3.harness import ConversationHandle, HarnessOptions
from pico3.models.faux import FauxProvider, FauxStep, faux_response, faux_tool_call
from pico3.storage import MemoryStorage
from pico3.storage.records import Task
from pico3.tasks import TaskKind
from pico3.turn.models import Models

pytestmark = pytest.mark.anyio

MODEL = {"provider": "faux", "modelId": "faux-1"}


def make_tree(root: Path) -> dict[str, str]:
    """A small repository: seven indexable files, plus ignored and binary ones."""
    files = {
        "README.md": "# Demo\nThe frobnicate helper lives in src.\n",
        "src/app.py": "def frobnicate(x):\n    return x * 2\n",
        "src/util.py": "import os\n\nWIDGET_LIMIT = 42\n",
        "src/nested/deep.py": "# the deep module\nvalue = 'quux'\n",
        "docs/guide.txt": "Call frobnicate twice for a double frob.\n",
        "build.sh": "echo building\n",
        ".gitignore": "*.log\nbuild/\n",
    }
    ignored = {
        "debug.log": "frobnicate in a log\n",
        "build/out.py": "frobnicate = 'generated'\n",
        "src/.gitignore": "secret.py\n",
        "src/secret.py": "frobnicate_secret = 1\n",
    }
    for name, text in {**files, **ignored}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0binary")
    # src/.gitignore is itself a listed file (git lists .gitignore files)
    return {**files, "src/.gitignore": ignored["src/.gitignore"]}


@dataclass
class Session:
    harness: Harness
    root: ConversationHandle
    kind: TaskKind
    state: Path

    async def start(self, tree: Path) -> int:
        kind = self.kind
        return await self.root.commit(
            lambda tx, _c: tx.create_task(kind, {"root": str(tree)}, background=True),
            BACKGROUND,
        )

    async def finish(self, task_id: int) -> Task:
        with anyio.fail_after(60):
            return await self.harness.wait_for_task(task_id, BACKGROUND)

    async def status(self, task_id: int) -> Any:
        watch = await self.root.watch(BACKGROUND)
        watch.stop()
        return watch.view["tasks"][str(task_id)]


@asynccontextmanager
async def session(
    state: Path,
    *,
    script: Sequence[FauxStep] = (),
    batch_size: int = 2,
    after_write: AfterWrite | None = None,
    services: dict[str, Any] | None = None,
) -> AsyncIterator[Session]:
    kind = indexer_kind(batch_size=batch_size, after_write=after_write, use_git=False)
    options = HarnessOptions(
        services={
            STATE_DIR_SERVICE: str(state),
            "models": Models([FauxProvider(list(script))]),
            **(services or {}),
        }
    )
    storage = MemoryStorage()
    async with HarnessHandle(lambda: storage, options) as handle:
        handle.add_registration(lambda h: install_indexer(h, kind))
        await handle.open(BACKGROUND)
        root = await handle.harness.root(BACKGROUND)
        await root.set_config({"model": MODEL, "selectedTools": [CODE_SEARCH]}, BACKGROUND)
        yield Session(handle.harness, root, kind, state)


async def tool_results(root: ConversationHandle) -> list[dict[str, Any]]:
    entries = await root.entries(BACKGROUND, limit=100)
    return [message(e) for e in reversed(entries) if e.kind == "pi.tool_result"]


def message(entry: Any) -> dict[str, Any]:
    """The entry's one model message (asserted present)."""
    assert isinstance(entry.model, list)
    return entry.model[0]


def outcome(task: Task) -> dict[str, Any]:
    assert isinstance(task.outcome, dict)
    return task.outcome


async def test_a_run_indexes_the_tree_with_gitignore_respected(tmp_path: Path) -> None:
    tree = tmp_path / "repo"
    expected = make_tree(tree)
    async with session(tmp_path / "state") as s:
        final = await s.finish(await s.start(tree))
        assert final.outcome == {
            "status": "completed",
            "result": {"files": len(expected), "batches": 4, "removed": 0},
        }
        with IndexStore.open(tmp_path / "state" / INDEX_FILE_NAME) as store:
            assert store.indexed_paths() == sorted(expected)
            assert store.stats().batches == 4
        # The finished run tells the model, and the task left the view.
        entries = await s.root.entries(BACKGROUND, limit=10)
        notice = next(e for e in entries if e.kind == "pi.notice")
        assert (
            message(notice)["content"]
            == f"Indexed {len(expected)} files of {tree} for code_search."
        )
        watch = await s.root.watch(BACKGROUND)
        watch.stop()
        assert str(final.id) not in watch.view["tasks"]


async def test_code_search_finds_indexed_lines_for_the_model(tmp_path: Path) -> None:
    tree = tmp_path / "repo"
    make_tree(tree)
    script = [
        faux_response(faux_tool_call(CODE_SEARCH, {"query": "frobnicate"}, id="call-1")),
        faux_response(faux_tool_call(CODE_SEARCH, {"query": '"WIDGET_LIMIT = 42"'}, id="c2")),
        faux_response(faux_tool_call(CODE_SEARCH, {"query": "zyzzyva"}, id="call-3")),
        faux_response("done"),
    ]
    async with session(tmp_path / "state", script=script) as s:
        await s.finish(await s.start(tree))
        handle = await s.root.send("search", BACKGROUND)
        with anyio.fail_after(60):
            await handle.wait(BACKGROUND)
        first, second, third = await tool_results(s.root)
    text = first["content"][0]["text"]
    assert first["isError"] is False
    assert text.startswith("3 matching lines for 'frobnicate':")
    assert "src/app.py:1: def «frobnicate»(x):" in text
    assert "README.md:2:" in text and "docs/guide.txt:1:" in text
    assert "debug.log" not in text and "build/" not in text and "secret" not in text
    assert second["content"][0]["text"].splitlines()[1] == "src/util.py:3: «WIDGET_LIMIT = 42»"
    assert third["isError"] is False
    assert third["content"][0]["text"] == "No line matches 'zyzzyva' (8 files indexed)."


async def test_code_search_says_what_to_do_without_an_index_or_with_a_bad_query(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "repo"
    make_tree(tree)
    script = [
        faux_response(faux_tool_call(CODE_SEARCH, {"query": "frobnicate"}, id="call-1")),
        faux_response("no index"),
        faux_response(faux_tool_call(CODE_SEARCH, {"query": "***"}, id="call-2")),
        faux_response("bad query"),
    ]
    async with session(tmp_path / "state", script=script) as s:
        for text in ("first", "second"):
            handle = await s.root.send(text, BACKGROUND)
            with anyio.fail_after(60):
                await handle.wait(BACKGROUND)
            if text == "first":
                # searching did not create an index file
                assert not (tmp_path / "state" / INDEX_FILE_NAME).exists()
                await s.finish(await s.start(tree))
        missing, bad = await tool_results(s.root)
    assert missing["isError"] is True
    assert "does not exist yet: ask the user to run /index" in missing["content"][0]["text"]
    assert bad["isError"] is True
    assert "has no letters or digits" in bad["content"][0]["text"]


class Parker:
    """``after_write`` that records attempts and holds the run at chosen attempts (1-based)
    until released (the run is then between a batch write and the commit recording it)."""

    def __init__(self, hold_at: set[int]) -> None:
        self.attempts: list[tuple[str, bool]] = []
        self._parked = {n: anyio.Event() for n in hold_at}
        self._release = {n: anyio.Event() for n in hold_at}

    async def __call__(self, key: str, written: bool) -> None:
        self.attempts.append((key, written))
        n = len(self.attempts)
        if n in self._parked:
            self._parked[n].set()
            await self._release[n].wait()

    async def parked(self, n: int) -> None:
        with anyio.fail_after(60):
            await self._parked[n].wait()

    def release(self, n: int) -> None:
        self._release[n].set()


async def test_describe_publishes_stage_and_counts_as_the_task_status(tmp_path: Path) -> None:
    tree = tmp_path / "repo"
    expected = make_tree(tree)
    parker = Parker({1, 2})
    async with session(tmp_path / "state", after_write=parker) as s:
        task_id = await s.start(tree)
        await parker.parked(1)
        task = await s.status(task_id)
        assert task["kind"] == INDEXER_KIND and task["background"] is True
        assert task["status"] == {
            "stage": "writing",
            "files_total": len(expected),
            "files_indexed": 0,
            "batches_done": 0,
        }
        parker.release(1)
        await parker.parked(2)
        assert (await s.status(task_id))["status"] == {
            "stage": "writing",
            "files_total": len(expected),
            "files_indexed": 2,
            "batches_done": 1,
        }
        parker.release(2)
        await s.finish(task_id)
    assert [written for _key, written in parker.attempts] == [True] * 4


async def test_a_second_run_over_an_unchanged_tree_writes_nothing_and_prunes_removed_files(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "repo"
    expected = make_tree(tree)
    parker = Parker(set())
    async with session(tmp_path / "state", after_write=parker) as s:
        await s.finish(await s.start(tree))
        first = list(parker.attempts)
        assert all(written for _key, written in first)
        parker.attempts.clear()
        await s.finish(await s.start(tree))
        assert parker.attempts == [(key, False) for key, _written in first]  # same keys, held
        (tree / "src" / "nested" / "deep.py").unlink()
        final = await s.finish(await s.start(tree))
    assert outcome(final)["result"] == {"files": len(expected) - 1, "batches": 4, "removed": 1}
    with IndexStore.open(tmp_path / "state" / INDEX_FILE_NAME) as store:
        assert "src/nested/deep.py" not in store.indexed_paths()
        assert store.search("quux") == []


@pytest.mark.parametrize(
    ("services", "input", "reason"),
    [
        ({STATE_DIR_SERVICE: None}, "tree", "has no state folder"),
        ({}, {"root": "/definitely/not/here"}, "not a directory"),
        ({}, {"path": "x"}, "the task input must be {'root': <directory>}"),
    ],
    ids=["no-state-folder", "missing-root", "bad-input"],
)
async def test_a_run_that_cannot_index_fails_with_a_reason(
    tmp_path: Path, services: dict[str, Any], input: Any, reason: str
) -> None:
    tree = tmp_path / "repo"
    make_tree(tree)
    payload = {"root": str(tree)} if input == "tree" else input
    async with session(tmp_path / "state", services=services) as s:
        kind = s.kind
        task_id = await s.root.commit(
            lambda tx, _c: tx.create_task(kind, payload, background=True), BACKGROUND
        )
        final = await s.finish(task_id)
    assert outcome(final)["status"] == "failed"
    assert reason in outcome(final)["failure"]["reason"]


async def test_aborting_a_run_reports_how_far_it_got(tmp_path: Path) -> None:
    tree = tmp_path / "repo"
    make_tree(tree)
    parker = Parker({2})
    async with session(tmp_path / "state", after_write=parker) as s:
        task_id = await s.start(tree)
        await parker.parked(2)
        assert await s.harness.abort_task(task_id, BACKGROUND) in ("marked", "terminal")
        final = await s.finish(task_id)
    assert final.outcome == {"status": "aborted", "result": {"filesIndexed": 2}}


def test_batch_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        indexer_kind(batch_size=0)
