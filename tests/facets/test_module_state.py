"""The feature packages keep no state in their modules (issue 42): a host process of many
sessions lends one generation of each package to all its sessions
(:mod:`coding_agent.worker.shared_features`), so anything a module kept would be seen by every
session. A facet's state belongs in what its ``setup(env)`` makes (its services, replicated
state, registrations).

Checked on the source (every module, the TUI's too: docs/authoring-facets.md asks it of all):

* no ``global`` statement;
* a module-level container (``{}``, ``[]``, ``set()``, ``dict(...)``...) is a constant: named in
  capitals, and nothing in the package changes it (no item assignment or deletion, no mutating
  method, no augmented assignment);
* no class attribute is written at run time (``cls.x = ...``, ``SomeClass.x = ...``,
  ``type(self).x = ...``);
* the module-level caches and per-thread or per-task holders are the reviewed ones below, each
  a pure function of its key or a holder that is the same for every session; a new one must be
  reviewed and added here with its reason.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "packages"
PACKAGES = ("approval", "hooks", "indexer", "mcp", "question", "subagents")

REVIEWED = {
    # keyed by the rule's text; returns a frozen Rule
    ("facets_approval/rules.py", "_parse"),
    # keyed by the pattern, the project root and the home folder (a session's own are its key)
    ("facets_approval/rules.py", "_path_regex"),
    # the bash grammar: the same for everyone
    ("facets_approval/shell.py", "_language"),
    # one tree-sitter parser per thread, used synchronously (a parse never yields)
    ("facets_approval/shell.py", "_parsers"),
    # the command being analysed, per task (a ContextVar)
    ("facets_approval/shell.py", "_SOURCE"),
    # how deep in nested command strings (bash -c '…') the analysis is, per task (a ContextVar)
    ("facets_approval/shell.py", "_DEPTH"),
    # the transport class, defined on first use: the same for everyone
    ("facets_mcp/http_bound.py", "_transport_class"),
}
"""(module, name) of the module-level caches and holders, with why each may be shared."""

_CONTAINERS = frozenset({"dict", "list", "set", "defaultdict", "OrderedDict", "deque", "Counter"})
_HOLDERS = frozenset({"local", "ContextVar", "WeakKeyDictionary", "WeakValueDictionary"})
_CACHES = frozenset({"cache", "lru_cache", "cached"})
_MUTATORS = frozenset(
    {"append", "extend", "insert", "update", "add", "pop", "popitem", "clear", "setdefault",
     "remove", "discard", "sort", "reverse", "appendleft", "popleft"}
)  # fmt: skip


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for name in PACKAGES:
        folder = ROOT / f"facets-{name}" / "src" / f"facets_{name}"
        for path in sorted(folder.rglob("*.py")):
            yield path.relative_to(folder.parent).as_posix(), ast.parse(path.read_text())


def _called(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Subscript):  # list[str]()
            func = func.value
        if isinstance(func, ast.Attribute):
            return func.attr
        if isinstance(func, ast.Name):
            return func.id
    return None


def _problems() -> list[str]:
    found: list[str] = []
    for module, tree in _modules():
        constants: set[str] = set()
        classes = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
        for node in tree.body:
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                value = node.value
                container = isinstance(value, ast.Dict | ast.List | ast.Set) or (
                    _called(value) in _CONTAINERS
                )
                for name in names:
                    if container and name != "__all__":
                        constants.add(name)
                        if name.lstrip("_") != name.lstrip("_").upper():
                            found.append(f"{module}: module-level container {name} (state?)")
                    if _called(value) in _HOLDERS and (module, name) not in REVIEWED:
                        found.append(f"{module}: module-level {_called(value)} {name}")
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for decorator in node.decorator_list:
                    target = decorator.func if isinstance(decorator, ast.Call) else decorator
                    named = (
                        target.attr
                        if isinstance(target, ast.Attribute)
                        else target.id
                        if isinstance(target, ast.Name)
                        else None
                    )
                    if named in _CACHES and (module, node.name) not in REVIEWED:
                        found.append(f"{module}: module-level cache {node.name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                found.append(f"{module}:{node.lineno}: global {', '.join(node.names)}")
            if isinstance(node, ast.Assign | ast.Delete):
                targets = node.targets
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            else:
                targets = []
            line = getattr(node, "lineno", 0)
            for target in targets:
                changed = target.value if isinstance(target, ast.Subscript) else target
                augmented = isinstance(node, ast.AugAssign) or changed is not target
                if augmented and isinstance(changed, ast.Name) and changed.id in constants:
                    found.append(f"{module}:{line}: changes {changed.id}")
                if isinstance(target, ast.Attribute):
                    owner = target.value
                    if isinstance(owner, ast.Name) and (owner.id == "cls" or owner.id in classes):
                        found.append(
                            f"{module}:{line}: writes class attribute {owner.id}.{target.attr}"
                        )
                    if _called(owner) == "type":
                        found.append(f"{module}:{line}: writes a class attribute through type()")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in constants
                and node.func.attr in _MUTATORS
            ):
                found.append(f"{module}:{node.lineno}: changes {node.func.value.id}")
    return found


def test_the_feature_packages_keep_no_state_in_their_modules() -> None:
    assert _problems() == []


def test_the_check_finds_module_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check itself: a package that keeps state in a module in each way it looks for."""
    folder = tmp_path / "facets-approval" / "src" / "facets_approval"
    folder.mkdir(parents=True)
    (folder / "leaky.py").write_text(
        "import functools\n"
        "seen = {}\n"
        "CALLS = []\n"
        "COUNT = 0\n"
        "class Box:\n"
        "    items = None\n"
        "    @classmethod\n"
        "    def fill(cls): cls.items = []\n"
        "def note(x):\n"
        "    global COUNT\n"
        "    seen[x] = 1\n"
        "    del CALLS[0]\n"
        "    CALLS.append(x)\n"
        "    Box.items = x\n"
        "@functools.lru_cache\n"
        "def remembered(x): return x\n"
    )
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    monkeypatch.setattr(f"{__name__}.PACKAGES", ("approval",))
    problems = "\n".join(_problems())
    for expected in (
        "module-level container seen",
        "global COUNT",
        "changes CALLS",
        "changes seen",
        "writes class attribute cls.items",
        "writes class attribute Box.items",
        "module-level cache remembered",
    ):
        assert expected in problems
