"""The indexer feature through chord: the session facet in a session host, the TUI facet in a
real Textual app (Pilot) joined through chord's loopback source, as a TUI process joins the
session worker.

``/index`` goes through ``pi.indexer``; progress reaches the panel only through
``pi.conversation``'s replicated ``view.tasks[id].status``. Runs are held between a batch write
and its commit by an ``after_write`` gate, so the test sees intermediate progress without timing.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup
from textual.app import App, ComposeResult
from textual.containers import Vertical

from chord.context import BACKGROUND
from chord.facet_packages import installed_facet_packages, load_generation
from chord.facets import FacetEnvironment, FacetHost, create_facet_host, define_facet
from chord.remote import LoopbackServiceSource
from chord.textual import TextualTui, tui_facet
from facets_indexer.contract import INDEX_FILE_NAME, IndexerService, IndexerServiceApi
from facets_indexer.kind import STATE_DIR_SERVICE, WORKSPACE_SERVICE, indexer_kind
from facets_indexer.session import indexer_session_facet
from facets_indexer.store import IndexStore
from facets_indexer.tui import IndexerPanel
from facets_indexer.tui import tui_facet as indexer_tui_facet
from pico3 import HarnessService, HarnessServiceApi, harness_session_facet
from pico3.harness import HarnessOptions
from pico3.storage import MemoryStorage

pytestmark = pytest.mark.anyio

FILES = 9  # eight modules and the .gitignore; batches of 2: five batches


class Gate:
    """``after_write`` holding chosen attempts (1-based) until released."""

    def __init__(self, hold_at: set[int]) -> None:
        self.count = 0
        self._parked = {n: anyio.Event() for n in hold_at}
        self._release = {n: anyio.Event() for n in hold_at}

    async def __call__(self, key: str, written: bool) -> None:
        self.count += 1
        if self.count in self._parked:
            self._parked[self.count].set()
            await self._release[self.count].wait()

    async def parked(self, n: int) -> None:
        with anyio.fail_after(60):
            await self._parked[n].wait()

    def release(self, n: int) -> None:
        self._release[n].set()


class PanelApp(App[None]):
    """A minimal app hosting chord's ``TextualTui`` with a ``#panels`` container."""

    def __init__(self) -> None:
        super().__init__()
        self.tui = TextualTui(self, ready=False)

    def compose(self) -> ComposeResult:
        yield Vertical(id="panels")

    def on_mount(self) -> None:
        self.tui.mark_ready()

    def panel(self) -> IndexerPanel:
        return self.query_one(IndexerPanel)

    async def panel_shows(self, predicate: Callable[[str], bool]) -> str:
        """Wait (on the panel's change notifications, never a timer) until its text holds."""
        panel = self.panel()
        changed = anyio.Event()

        def notify() -> None:
            nonlocal changed
            changed.set()

        stop = panel.progress.listen(notify)
        try:
            with anyio.fail_after(60):
                while not predicate(panel.text):
                    await changed.wait()
                    changed = anyio.Event()
        finally:
            stop()
        return panel.text


def make_tree(root: Path) -> None:
    for i in range(FILES - 1):
        path = root / f"src/m{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"def f{i}():\n    return 'needle{i}'\n")
    (root / ".gitignore").write_text("*.log\n")
    (root / "noise.log").write_text("needle in a log\n")


@dataclass
class Session:
    host: FacetHost
    harness: HarnessServiceApi
    group: TaskGroup


@asynccontextmanager
async def session(tmp_path: Path, gate: Gate) -> AsyncIterator[Session]:
    """The session worker's host: pico3's harness facet, the indexer session facet (batches of 2,
    gated), and the worker's own facet; dispatch resumes once the host is up."""
    options = HarnessOptions(
        services={
            STATE_DIR_SERVICE: str(tmp_path / "state"),
            WORKSPACE_SERVICE: str(tmp_path / "repo"),
        }
    )
    workers: list[HarnessServiceApi] = []

    def worker(env: FacetEnvironment) -> None:
        workers.append(env.use(HarnessService))

    feature = indexer_session_facet(
        lambda: indexer_kind(batch_size=2, after_write=gate, use_git=False)
    )
    storage = MemoryStorage()
    async with anyio.create_task_group() as group:
        harness_facet = harness_session_facet(lambda: storage, options, task_group=group)
        async with create_facet_host(
            [harness_facet, feature, define_facet("test/worker", worker)]
        ) as host:
            (service,) = workers
            await service.resume(BACKGROUND)
            yield Session(host, service, group)
        group.cancel_scope.cancel()


@asynccontextmanager
async def presentation(s: Session, app: PanelApp) -> AsyncIterator[list[IndexerServiceApi]]:
    """The TUI host: chord's ``Tui`` over ``app``, the indexer TUI facet, and a probe facet that
    hands the test the ``pi.indexer`` handle."""
    handles: list[IndexerServiceApi] = []

    def probe(env: FacetEnvironment) -> None:
        handles.append(env.use(IndexerService))

    source = LoopbackServiceSource(s.host.services, task_group=s.group)
    facets = [tui_facet(app.tui), indexer_tui_facet, define_facet("test/probe", probe)]
    async with create_facet_host(facets, service_sources=[source]):
        yield handles


async def live_indexers(s: Session) -> list[int]:
    root = await s.harness.harness.root(BACKGROUND)
    tasks = await root.commit(lambda tx, _c: tx.tasks(kind="repo.indexer"), BACKGROUND)
    return [t.id for t in tasks if t.status != "terminal"]


async def test_slash_index_starts_a_run_and_the_panel_shows_its_progress(tmp_path: Path) -> None:
    make_tree(tmp_path / "repo")
    gate = Gate({1, 3})
    app = PanelApp()
    async with (
        session(tmp_path, gate) as s,
        app.run_test(),
        presentation(s, app),
    ):
        assert app.panel().display is False  # nothing is indexing
        assert "index" in app.tui.commands
        assert await app.tui.run_command("/index", BACKGROUND) is True
        await gate.parked(1)
        (task_id,) = await live_indexers(s)
        text = await app.panel_shows(lambda t: "writing" in t)
        assert text == f"Indexing #{task_id}: writing 0/{FILES} files, 0 batches"
        assert app.panel().display is True
        gate.release(1)
        await gate.parked(3)
        text = await app.panel_shows(lambda t: "4/" in t)
        assert text == f"Indexing #{task_id}: writing 4/{FILES} files, 2 batches"
        assert str(app.panel().content) == text  # what the widget renders
        gate.release(3)
        await app.panel_shows(lambda t: t == "")  # the run ended: its row left the view
        assert app.panel().display is False
    with IndexStore.open(tmp_path / "state" / INDEX_FILE_NAME) as store:
        assert store.stats().files == FILES
        assert [hit.path for hit in store.search("needle3")] == ["src/m3.py"]


async def test_a_tui_that_connects_mid_run_sees_the_progress(tmp_path: Path) -> None:
    make_tree(tmp_path / "repo")
    gate = Gate({2})
    app = PanelApp()
    async with session(tmp_path, gate) as s:
        started = await _start_through_the_service(s, {"root": "."})
        await gate.parked(2)
        async with app.run_test(), presentation(s, app):  # late joiner: hydrated views
            text = await app.panel_shows(lambda t: t != "")
            assert text == f"Indexing #{started['taskId']}: writing 2/{FILES} files, 1 batch"
            gate.release(2)
            await app.panel_shows(lambda t: t == "")


async def _start_through_the_service(s: Session, request: Any) -> Any:
    async with presentation(s, PanelApp()) as handles:
        return await handles[0].start(request, BACKGROUND)


async def test_start_returns_the_live_run_instead_of_starting_a_second(tmp_path: Path) -> None:
    make_tree(tmp_path / "repo")
    gate = Gate({1})
    app = PanelApp()
    async with session(tmp_path, gate) as s, app.run_test(), presentation(s, app) as handles:
        (indexer,) = handles
        first = await indexer.start({}, BACKGROUND)
        assert first["started"] is True
        await gate.parked(1)
        again = await indexer.start({"root": str(tmp_path / "repo")}, BACKGROUND)
        assert again == {"taskId": first["taskId"], "started": False}
        assert await live_indexers(s) == [first["taskId"]]
        gate.release(1)
        with anyio.fail_after(60):
            await s.harness.harness.wait_for_task(first["taskId"], BACKGROUND)


@pytest.mark.parametrize(
    ("request_", "error", "message"),
    [
        ({"path": "."}, ValueError, "unknown request fields ['path']"),
        ({"root": 7}, TypeError, "root must be a non-empty string"),
        ({"root": "missing"}, NotADirectoryError, "not a directory"),
        ({"conversationId": 999}, LookupError, "conversation 999 does not exist"),
        ({"conversationId": "1"}, TypeError, "conversationId must be an integer"),
    ],
    ids=["unknown-field", "root-type", "missing-root", "unknown-conversation", "cid-type"],
)
async def test_start_rejects_bad_requests_and_starts_nothing(
    tmp_path: Path, request_: Any, error: type[Exception], message: str
) -> None:
    make_tree(tmp_path / "repo")
    app = PanelApp()
    async with session(tmp_path, Gate(set())) as s, presentation(s, app) as handles:
        with pytest.raises(error, match=re.escape(message)):
            await handles[0].start(request_, BACKGROUND)
        assert await live_indexers(s) == []
        root = await s.harness.harness.root(BACKGROUND)
        assert await root.commit(lambda tx, _c: tx.tasks(kind="repo.indexer"), BACKGROUND) == []


@pytest.mark.parametrize(
    ("host", "ids"), [("session", ["@pi/indexer"]), ("tui", ["@pi/indexer"]), ("web", [])]
)
def test_the_entry_point_serves_one_facet_per_host(host: str, ids: list[str]) -> None:
    # docs/design/decisions.md#d7: found through the chord.facets entry point, never imported by name
    (package,) = [p for p in installed_facet_packages() if p.distribution == "facets-indexer"]
    assert package.plugin_module == "facets_indexer.plugin"
    generation = load_generation(package, host)
    try:
        assert [facet.id for facet in generation.facets] == ids
    finally:
        generation.purge()
