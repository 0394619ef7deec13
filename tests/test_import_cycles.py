"""No import cycles between our modules, ``TYPE_CHECKING`` imports included (grimp's graph).

A cycle is a strongly connected component of the module import graph. None exists: each one
was removed by moving the protocol a module needed to a leaf module (as
``pico3.kernel.namespaces.SliceSource``, ``pico3.kernel.tx.authority``,
``pico3.kernel.core.KernelCore``, ``pico3.tasks.runtime.RuntimeHost``,
``chord.facets.environment.FacetDefinition`` and ``coding_agent.worker.tools.host`` did), or the
code that needed the other side to a module of its own. The test fails on any cycle.
"""

from __future__ import annotations

import grimp

PACKAGES = (
    "chord",
    "pico3",
    "facets_approval",
    "facets_question",
    "facets_indexer",
    "facets_mcp",
    "facets_subagents",
    "coding_agent",
)


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


def test_there_is_no_import_cycle() -> None:
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False)
    found = cycles(graph)
    assert not found, "import cycles (TYPE_CHECKING included): " + "; ".join(
        " <-> ".join(sorted(c)) for c in found
    )
