"""No import cycles between our modules, ``TYPE_CHECKING`` imports included (grimp's graph).

A cycle is a strongly connected component of the module import graph. None exists: each one
was removed by moving the protocol a module needed to a leaf module (as
``pico3.kernel.namespaces.SliceSource``, ``pico3.kernel.tx.authority``,
``pico3.kernel.core.KernelCore``, ``pico3.tasks.runtime.RuntimeHost``,
``chord.facets.environment.FacetDefinition`` and ``coding_agent.worker.tools.host`` did), or the
code that needed the other side to a module of its own. The test fails on any cycle.

A cycle that exists only for the type checker still counts: it is an arrow pointing back up,
and the next runtime import along it is a circular import. The probes below show the graph the
test reads has those arrows (``if TYPE_CHECKING:`` and function-level imports alike).
"""

from __future__ import annotations

import textwrap
import tomllib
from pathlib import Path

import grimp
import pytest

PACKAGES = tuple(
    tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["tool"][
        "importlinter"
    ]["root_packages"]
)
"""Every package of ours: import-linter's root packages (scripts/sync_features.py keeps them)."""


def project_graph(*packages: str) -> grimp.ImportGraph:
    """The import graph of ``packages``: every import, ``TYPE_CHECKING`` and function-level ones
    included (no cache, so the graph is always today's code)."""
    return grimp.build_graph(*packages, exclude_type_checking_imports=False, cache_dir=None)


def _imports(graph: grimp.ImportGraph, module: str) -> list[str]:
    return sorted(graph.find_modules_directly_imported_by(module))


def cycles(graph: grimp.ImportGraph) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)

    for root in sorted(graph.modules):
        if root in index:
            continue
        visit(root)
        work: list[tuple[str, list[str]]] = [(root, _imports(graph, root))]
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop()
                if nxt not in index:
                    visit(nxt)
                    work.append((nxt, _imports(graph, nxt)))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for module in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(module)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.x")
    graph.add_import(importer="a.y", imported="a.z")
    assert cycles(graph) == [frozenset({"a.x", "a.y"})]


def _probe_package(root: Path, name: str, modules: dict[str, str]) -> None:
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    for module, source in modules.items():
        (package / f"{module}.py").write_text(textwrap.dedent(source))


def test_a_cycle_only_the_type_checker_sees_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _probe_package(
        tmp_path,
        "probe_typing_cycle",
        {
            "upper": "from probe_typing_cycle.lower import Low\n",
            "lower": """
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from probe_typing_cycle.upper import High
                class Low: ...
            """,
            "apart": "import json\n",
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    found = cycles(project_graph("probe_typing_cycle"))
    assert found == [frozenset({"probe_typing_cycle.upper", "probe_typing_cycle.lower"})]


def test_a_cycle_through_a_function_level_import_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _probe_package(
        tmp_path,
        "probe_late_cycle",
        {
            "a": "from probe_late_cycle import b\n",
            "b": """
                def later():
                    from probe_late_cycle import c
                    return c
            """,
            "c": "import probe_late_cycle.a\n",
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    found = cycles(project_graph("probe_late_cycle"))
    assert found == [frozenset({"probe_late_cycle.a", "probe_late_cycle.b", "probe_late_cycle.c"})]


def test_there_is_no_import_cycle() -> None:
    graph = project_graph(*PACKAGES)
    found = cycles(graph)
    assert not found, "import cycles (TYPE_CHECKING included): " + "; ".join(
        " <-> ".join(sorted(c)) for c in found
    )
