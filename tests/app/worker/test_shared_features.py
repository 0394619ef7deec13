"""Feature packages shared by the sessions of a host process (issue 42, a start storm):
:class:`coding_agent.worker.shared_features.SharedFeatures` loads one generation of each
package and lends it to every session, whose facet host sets the facets up for itself; the
sessions do not see each other's state, ``/reload`` reloads one session's packages, a changed
source gives the next session a new generation, and a generation is purged once the last
session holding it gave it back."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from chord import FacetEnvironment, FacetGeneration, define_facet
from chord.context import BACKGROUND
from coding_agent.contracts import APPROVAL_MODE
from coding_agent.session_files.folders import Session, create_session
from coding_agent.worker.main import (
    SessionRuntime,
    WorkerConfig,
    load_features,
    open_session_host,
)
from coding_agent.worker.shared_features import (
    SharedFeatures,
    preload_installed,
    preloaded_sources,
    take_preloaded,
)

pytestmark = pytest.mark.anyio

FEATURES = (
    "facets-approval",
    "facets-hooks",
    "facets-indexer",
    "facets-mcp",
    "facets-question",
    "facets-subagents",
)


@asynccontextmanager
async def hosted(
    session: Session, shared: SharedFeatures, box: dict[str, Any]
) -> AsyncIterator[SessionRuntime]:
    """A session as a host process runs it: the feature packages lent by ``shared``; ``box``
    gets the session's ``approval.mode`` handle."""

    def probe(env: FacetEnvironment) -> None:
        box["mode"] = env.use(APPROVAL_MODE)

    async with open_session_host(
        WorkerConfig(session, env=None),
        extra_facets=[define_facet("test/probe", probe)],
        feature_loader=lambda config: load_features(config, shared),
    ) as runtime:
        yield runtime


def mode(box: dict[str, Any]) -> str:
    return box["mode"].state.value["mode"]


def roots(runtime: SessionRuntime) -> dict[str, str]:
    assert runtime.coordinator is not None
    return {name: g.root for name, g in runtime.coordinator.generations.items()}


def loaded(root: str) -> bool:
    return root in sys.modules


async def test_two_sessions_on_one_shared_generation_keep_their_own_state(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    shared = SharedFeatures()
    projects = [tmp_path / "a", tmp_path / "b"]
    for project in projects:
        project.mkdir()
    first, second = (create_session(project, env=agent_env) for project in projects)
    a: dict[str, Any] = {}
    b: dict[str, Any] = {}
    async with AsyncExitStack() as stack:
        one = await stack.enter_async_context(hosted(first, shared, a))
        two = await stack.enter_async_context(hosted(second, shared, b))
        assert set(FEATURES) <= set(roots(one))
        assert roots(one) == roots(two)  # one generation of each package, loaded once
        assert shared.loads == len(roots(one))
        assert one.coordinator is not None and two.coordinator is not None
        facets_one = [f for g in one.coordinator.generations.values() for f in g.facets]
        facets_two = [f for g in two.coordinator.generations.values() for f in g.facets]
        assert all(x is y for x, y in zip(facets_one, facets_two, strict=True))

        # the permission mode (the approval facet's replicated state and its storage) is each
        # session's own
        assert mode(a) == mode(b) == "ask"
        await a["mode"].set_mode("plan", BACKGROUND)
        assert mode(a) == "plan"
        assert mode(b) == "ask"
        await b["mode"].set_mode("accept-edits", BACKGROUND)
        assert (mode(a), mode(b)) == ("plan", "accept-edits")

        # each harness has its own registry holding the features' tools
        tools_one = one.harness.harness.tools
        tools_two = two.harness.harness.tools
        assert tools_one is not tools_two
        for tool in ("question", "agent", "code_search"):
            assert tools_one.get(tool) is not None and tools_two.get(tool) is not None

        # /reload in one session reloads its packages alone; the other keeps the shared one
        before = roots(two)
        report = await one.coordinator.reload("facets-approval")
        assert report.outcome == "reloaded", report.message
        assert roots(one)["facets-approval"] != before["facets-approval"]
        assert roots(two) == before
        assert shared.loads == len(before)  # the reload's generation is the session's own
        assert loaded(before["facets-approval"])  # still lent to the second session
        assert mode(a) == "plan"  # kept in the session's storage across the reload
        await a["mode"].set_mode("auto", BACKGROUND)
        assert (mode(a), mode(b)) == ("auto", "accept-edits")
        reloaded = roots(one)["facets-approval"]

    assert not loaded(reloaded)  # the reloaded session's own generation went with it
    assert all(loaded(root) for root in before.values())  # the host still holds the shared ones

    # a session started later gets the same generations, and the state it stored
    again: dict[str, Any] = {}
    async with hosted(second, shared, again) as three:
        assert roots(three) == before
        assert mode(again) == "accept-edits"
    assert shared.loads == len(before)
    shared.close()
    assert not any(loaded(root) for root in before.values())


GREETER = """
from chord import define_facet, hookimpl

GREETING = {greeting!r}

def _setup(env):
    pass

@hookimpl
def chord_facets(host):
    return [define_facet("test/greeter", _setup)] if host == "session" else []
"""


def greeter(folder: Path, greeting: str) -> Path:
    package = folder / "greeter"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(GREETER.format(greeting=greeting))
    return package


def greeting(generation: FacetGeneration) -> str:
    return generation.module("greeter").GREETING


def test_a_changed_source_gives_the_next_session_a_new_generation(
    tmp_path: Path, session: Session
) -> None:
    package = greeter(tmp_path / "facets", "hello")
    config = WorkerConfig(session, facets_dirs=(package,), installed_features=False)
    shared = SharedFeatures()
    [first] = load_features(config, shared)
    [second] = load_features(config, shared)
    assert first.root == second.root and greeting(first) == "hello"
    assert shared.loads == 1

    greeter(tmp_path / "facets", "bonjour")  # an edit, same size or not: the text decides
    [third] = load_features(config, shared)
    assert third.root != first.root and greeting(third) == "bonjour"
    assert shared.loads == 2
    assert loaded(first.root)  # two sessions still hold the old one
    first.purge()
    second.purge()
    second.purge()  # giving back twice gives back once
    assert not loaded(first.root)  # the last holder gave it back: purged
    assert loaded(third.root)
    third.purge()
    assert loaded(third.root)  # the host's current generation
    shared.close()
    assert not loaded(third.root)


def test_an_unchanged_package_is_not_read_again_once_its_files_are_old(
    tmp_path: Path, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from coding_agent.worker import shared_features

    package = greeter(tmp_path / "facets", "hello")
    old = 1_000_000_000  # files last changed long before they were read
    os.utime(package / "__init__.py", (old, old))
    config = WorkerConfig(session, facets_dirs=(package,), installed_features=False)
    shared = SharedFeatures()
    reads: list[Path] = []
    real = shared_features.source_fingerprint

    def counted(folder: Path) -> bytes:
        reads.append(folder)
        return real(folder)

    monkeypatch.setattr(shared_features, "source_fingerprint", counted)
    for _ in range(3):
        for generation in load_features(config, shared):
            generation.purge()
    assert len(reads) == 1
    (package / "__init__.py").write_text(GREETER.format(greeting="hallo"))  # now: recent
    for _ in range(2):
        [generation] = load_features(config, shared)
        assert greeting(generation) == "hallo"
        generation.purge()
    assert len(reads) == 3  # changed, then too recent to trust its stat: read each time
    shared.close()


def test_a_package_installed_while_the_host_runs_is_found_by_the_next_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    shared = SharedFeatures()
    errors: list[object] = []

    def names() -> list[str]:
        found = shared.discover((), installed=True, on_error=errors.append)
        return [package.name for package in found]

    before = names()
    assert "greeter" not in before
    assert names() == before  # nothing changed: the same packages
    greeter(site, "hello")  # installed as an installer would: the package, then its .dist-info
    info = site / "greeter-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: greeter\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[chord.facets]\ngreeter = greeter\n")
    assert names() == sorted([*before, "greeter"])
    for child in sorted(info.iterdir()):
        child.unlink()
    info.rmdir()  # uninstalled
    assert names() == before
    assert errors == []


def _generation_roots() -> set[str]:
    return {name for name in sys.modules if name.startswith("__chord_gen_") and "." not in name}


def test_a_warm_start_child_adopts_the_preloaded_generations_once(session: Session) -> None:
    """The warm start's fork server preloads a generation of every installed package; the first
    ``load_features`` of a forked child (here, this process) takes them, and from then on they
    are the session's alone: purged when it lets them go, and the next load makes its own."""
    before = _generation_roots()
    preload_installed()
    try:
        preloaded = _generation_roots() - before
        assert len(preloaded) >= len(FEATURES)
        # the server's fingerprint covers the packages' files, those only compiled too
        assert any(path.endswith("facets_question/tui.py") for path in preloaded_sources())
        config = WorkerConfig(session, env=None)
        generations = load_features(config)
    finally:
        leftover = take_preloaded()  # a failure above must not leave them to another test
        if leftover is not None:
            leftover.close()
    assert set(FEATURES) <= {generation.package.name for generation in generations}
    assert {generation.root for generation in generations} == preloaded  # none loaded again
    assert preloaded_sources() == []  # taken once
    for generation in generations:
        generation.purge()
    assert not any(loaded(root) for root in preloaded)  # the server's hold went with them
    again = load_features(config)
    try:
        assert not {generation.root for generation in again} & preloaded
    finally:
        for generation in again:
            generation.purge()
