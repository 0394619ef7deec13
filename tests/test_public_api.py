"""The public API rule, enforced: feature packages and the app import only ``pico3``,
``pico3.models``, ``chord`` and ``chord.textual``.

The rule is the import-linter contract ``public-api`` in the workspace's pyproject.toml; CI runs
it as ``uv run lint-imports`` and this module runs it too, so ``pytest`` alone catches a deep
import. It also shows the contract bites: a probe package with a deep import breaks it, naming the
import, while the same probe with public imports keeps it; and the package ``chord new-facet``
writes (which lives outside this workspace, so outside the contract) imports only public names.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PUBLIC_MODULES = ("pico3.models", "chord.textual")  # besides the top-level pico3 and chord


def _config() -> dict:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["tool"]["importlinter"]


def _contract() -> dict:
    (contract,) = [c for c in _config()["contracts"] if c["id"] == "public-api"]
    return contract


def _lint_imports() -> Path:
    return Path(sys.executable).with_name("lint-imports")


def _consumers() -> list[str]:
    """Every feature package and the app, found on disk (so a new package cannot slip past)."""
    found = [p.parent.name for p in ROOT.glob("packages/facets-*/src/*/__init__.py")]
    found += [p.parent.name for p in ROOT.glob("apps/*/src/*/__init__.py")]
    return sorted(found)


def test_the_workspace_keeps_every_import_contract() -> None:
    result = subprocess.run(
        [str(_lint_imports()), "--no-logo", "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    kept = len(_config()["contracts"])  # every layer rule of docs/architecture.md, checked
    assert f"Contracts: {kept} kept, 0 broken." in result.stdout, result.stdout


def test_the_contract_covers_every_feature_package_and_the_app() -> None:
    config = _config()
    contract = _contract()
    consumers = _consumers()
    assert "coding_agent" in consumers and "facets_approval" in consumers
    assert set(consumers) <= set(config["root_packages"]), "add the package to root_packages"
    assert contract["type"] == "protected"
    assert sorted(contract["protected_modules"]) == ["chord.*", "pico3.*"]
    assert sorted(contract["allowed_importers"]) == ["chord", "pico3"]
    expected = {f"{c}.** -> {m}" for c in consumers for m in PUBLIC_MODULES}
    assert set(contract["ignore_imports"]) == expected


def _probe_config(tmp_path: Path) -> Path:
    """The workspace's contract in INI form, with the probe package as one more consumer."""
    contract = _contract()
    roots = [*_config()["root_packages"], "probe_feature"]
    ignores = [*contract["ignore_imports"], *(f"probe_feature.** -> {m}" for m in PUBLIC_MODULES)]

    def listing(values: list[str]) -> str:
        return "".join(f"\n    {v}" for v in values)

    path = tmp_path / ".importlinter"
    path.write_text(
        f"[importlinter]\nroot_packages ={listing(roots)}\n\n"
        "[importlinter:contract:public-api]\n"
        f"name = {contract['name']}\ntype = protected\n"
        f"protected_modules ={listing(contract['protected_modules'])}\n"
        f"allowed_importers ={listing(contract['allowed_importers'])}\n"
        f"ignore_imports ={listing(ignores)}\n"
        "unmatched_ignore_imports_alerting = none\n"
    )
    return path


def _run_probe(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    package = tmp_path / "probe_feature"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "feature.py").write_text(source)
    config = _probe_config(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run(
        [str(_lint_imports()), "--no-logo", "--no-cache", str(config)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_public_imports_keep_the_contract(tmp_path: Path) -> None:
    result = _run_probe(
        tmp_path,
        "from chord import Context, define_facet\n"
        "from chord.textual import Tui\n"
        "from pico3 import MISSING, HarnessService, ToolDeclaration\n"
        "from pico3.models import FauxProvider\n",
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_deep_import_breaks_the_contract_and_is_named(tmp_path: Path) -> None:
    result = _run_probe(
        tmp_path,
        "from typing import TYPE_CHECKING\n"
        "from pico3 import Harness\n"
        "if TYPE_CHECKING:\n"
        "    from chord.facets.host import FacetHost\n"
        "def later():\n"
        "    from pico3.kernel.tx import Transaction\n"
        "    from pico3.models.faux import FauxToolCall\n",
    )
    assert result.returncode == 1, result.stdout + result.stderr
    for line in (
        "probe_feature.feature -> chord.facets.host (l.4)",
        "probe_feature.feature -> pico3.kernel.tx (l.6)",
        "probe_feature.feature -> pico3.models.faux (l.7)",
    ):
        assert line in result.stdout, result.stdout


def test_the_new_facet_template_imports_only_the_public_api(tmp_path: Path) -> None:
    import ast

    from chord.facet_packages.scaffold import new_facet_package

    target = new_facet_package("probe-feature", tmp_path / "probe-feature")
    sources = sorted(target.rglob("*.py"))
    assert len(sources) >= 5  # contract, session, tui, plugin, tests
    allowed = {"pico3", "chord", *PUBLIC_MODULES}
    deep: list[str] = []
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            deep += [
                f"{path.relative_to(target)}:{node.lineno}: {module}"
                for module in modules
                if module.split(".")[0] in ("pico3", "chord") and module not in allowed
            ]
    assert not deep, "the template imports internal modules:\n" + "\n".join(deep)
