"""A feature package is registered in one place: its folder under ``packages/``.

Every list of the root pyproject.toml that names the feature packages is derived from those
folders by ``scripts/sync_features.py``; these tests fail when one is stale, with the command that
fixes it, and check that the script's derivation names a new package everywhere.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "sync_features.py"


def _module():
    spec = importlib.util.spec_from_file_location("sync_features", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sync_features"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_pyproject_names_every_feature_package_in_packages() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_a_new_feature_folder_is_named_by_every_derived_list(tmp_path: Path) -> None:
    sync = _module()
    shutil.copytree(
        ROOT / "packages" / "facets-hooks",
        tmp_path / "packages" / "facets-hooks",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    new = tmp_path / "packages" / "facets-cost"
    (new / "src" / "facets_cost").mkdir(parents=True)
    (new / "src" / "facets_cost" / "__init__.py").write_text("")
    (new / "pyproject.toml").write_text('[project]\nname = "facets-cost"\nversion = "0"\n')
    found = sync.features(tmp_path)
    assert [f.module for f in found] == ["facets_cost", "facets_hooks"]
    lists = sync.derived(found)
    for path, values in lists.items():
        assert any("facets_cost" in v or "facets-cost" in v for v in values), path
    assert (
        "facets_cost.session" in lists["contract:feature-sessions-without-textual:source_modules"]
    )
    assert "facets-cost" in lists["project.dependencies"]


def test_the_check_names_the_command_when_a_list_is_stale(tmp_path: Path) -> None:
    stale = tmp_path / "repo"
    (stale / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, stale / "scripts" / "sync_features.py")
    text = (ROOT / "pyproject.toml").read_text().replace('    "facets_mcp",\n', "", 1)
    (stale / "pyproject.toml").write_text(text)
    shutil.copytree(
        ROOT / "packages",
        stale / "packages",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "node_modules"),
    )
    result = subprocess.run(
        [sys.executable, str(stale / "scripts" / "sync_features.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert "run: uv run python scripts/sync_features.py" in result.stderr
    assert "known-first-party" in result.stderr
