"""Size limits on the source: no module over ~600 lines without a stated reason (issue 22, item 2).

A module of ``packages/*/src`` or ``apps/*/src`` longer than ``MODULE_LIMIT`` lines must say in
its module docstring, in a paragraph beginning "Why one module:", which single concern it holds
and why splitting it would scatter that concern. The kernel's transactions
(``pico3/kernel/tx/``) keep every function and method within ``FUNCTION_LIMIT`` lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE_LIMIT = 600
FUNCTION_LIMIT = 60
REASON = "Why one module:"


def _source_modules() -> list[Path]:
    modules: list[Path] = []
    for top in ("packages", "apps"):
        modules.extend(sorted((ROOT / top).glob("*/src/**/*.py")))
    return modules


def _states_reason(tree: ast.Module) -> bool:
    docstring = ast.get_docstring(tree) or ""
    paragraphs = [p.strip() for p in docstring.split("\n\n")]
    return any(p.startswith(REASON) and len(p) > len(REASON) + 20 for p in paragraphs)


def test_the_source_tree_is_found() -> None:
    modules = _source_modules()
    assert len(modules) > 50, f"expected the packages' source modules under {ROOT}"


def test_every_long_module_states_why_it_is_one_module() -> None:
    offenders: list[str] = []
    for path in _source_modules():
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines <= MODULE_LIMIT:
            continue
        if not _states_reason(ast.parse(text, filename=str(path))):
            offenders.append(f"{path.relative_to(ROOT)} ({lines} lines)")
    assert not offenders, (
        f"modules over {MODULE_LIMIT} lines without a reason: "
        + ", ".join(offenders)
        + f". Split the module, or add a paragraph beginning {REASON!r} to its module "
        "docstring saying which single concern it holds and why splitting would scatter it."
    )


def test_the_kernel_transactions_keep_functions_short() -> None:
    tx = ROOT / "packages/pico3/src/pico3/kernel/tx"
    paths = sorted(tx.rglob("*.py"))
    assert paths, f"no modules under {tx}"
    offenders: list[str] = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                span = node.end_lineno - node.lineno + 1
                if span > FUNCTION_LIMIT:
                    offenders.append(
                        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({span} lines)"
                    )
    assert not offenders, (
        f"functions in pico3/kernel/tx over {FUNCTION_LIMIT} lines: "
        + ", ".join(offenders)
        + ". Move a self-contained step into a helper function of the same module."
    )
