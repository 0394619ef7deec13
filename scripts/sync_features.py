"""Register every in-repo feature package from one place: its folder under ``packages/``.

A feature package is a folder ``packages/facets-NAME/`` (made by ``chord new-facet``) holding
``src/facets_NAME/`` with ``contract.py``, ``session.py``, ``tui.py`` and ``plugin.py``. Every
list in the root ``pyproject.toml`` that names the feature packages is derived from those folders
by this script: the workspace's dependencies and sources, ruff's first-party names, and the
import-linter contracts that name each feature (public API, independence, contracts without host
code, sessions without Textual, …). Run it after adding or removing a feature package::

    uv run python scripts/sync_features.py          # rewrite pyproject.toml
    uv run python scripts/sync_features.py --check  # exit 1 and say what is stale (CI's test)

``tests/test_feature_registry.py`` runs the check, so a package added without it fails CI with
this command in the message.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import tomlkit
from tomlkit.items import Array

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
APP = "coding_agent"
BASE = ("chord", "pico3")


@dataclass(frozen=True)
class Feature:
    distribution: str
    """``facets-NAME``: the folder and the distribution."""
    module: str
    """``facets_NAME``: the import name."""


def features(root: Path = ROOT) -> list[Feature]:
    """The feature packages in ``packages/``, in the order their folders sort."""
    found: list[Feature] = []
    for folder in sorted((root / "packages").glob("facets-*")):
        if not (folder / "pyproject.toml").is_file():
            continue
        project = tomlkit.parse((folder / "pyproject.toml").read_text())
        name = str(project["project"]["name"])  # type: ignore[index]
        modules = [p.name for p in (folder / "src").iterdir() if (p / "__init__.py").is_file()]
        if len(modules) != 1:
            raise SystemExit(f"{folder}: expected one package under src/, found {modules}")
        found.append(Feature(name, modules[0]))
    return found


def _array(values: list[str], multiline: bool) -> Array:
    array = tomlkit.array()
    array.extend(values)
    if multiline:
        array.multiline(True)
    return array


def derived(found: list[Feature]) -> dict[str, list[str]]:
    """Every derived list, by a dotted path into pyproject.toml (contracts by their id)."""
    mods = [f.module for f in found]
    dists = [f.distribution for f in found]

    def each(*suffixes: str) -> list[str]:
        return [f"{m}.{s}" for m in mods for s in suffixes]

    return {
        "project.dependencies": ["chord-runtime[textual]", "pico3", *dists, "pico-coding-agent"],
        "tool.ruff.lint.isort.known-first-party": [*BASE, *mods, APP],
        "tool.importlinter.root_packages": [*BASE, *mods, APP],
        "contract:public-api:ignore_imports": [
            *(f"{m}.** -> chord.textual" for m in [*mods, APP]),
            *(f"{m}.** -> pico3.models" for m in [*mods, APP]),
        ],
        "contract:chord-imports-nothing-of-ours:forbidden_modules": ["pico3", *mods, APP],
        "contract:pico3-imports-only-chord:forbidden_modules": [*mods, APP],
        "contract:features-independent:modules": mods,
        "contract:features-never-import-the-app:source_modules": mods,
        "contract:app-imports-no-feature:forbidden_modules": mods,
        "contract:feature-contracts-import-no-host-code:source_modules": each("contract"),
        "contract:feature-contracts-import-no-host-code:forbidden_modules": [
            *each("session", "tui", "plugin"),
            "chord.textual",
            "textual",
            APP,
        ],
        "contract:feature-session-and-tui-apart:modules": each("session", "tui"),
        "contract:feature-sessions-without-textual:source_modules": each("session"),
        "contract:no-package-cycles:ancestors": [*BASE, *mods, APP],
    }


def _sources(document: tomlkit.TOMLDocument, found: list[Feature]) -> dict[str, object]:
    return document["tool"]["uv"]["sources"]  # type: ignore[index,return-value]


def sync(check: bool) -> list[str]:
    """Rewrite (or, with ``check``, only compare) pyproject.toml; returns what was stale."""
    text = PYPROJECT.read_text()
    document = tomlkit.parse(text)
    found = features()
    stale: list[str] = []
    contracts = {str(c["id"]): c for c in document["tool"]["importlinter"]["contracts"]}  # type: ignore[index]
    for path, values in derived(found).items():
        if path.startswith("contract:"):
            _, cid, key = path.split(":")
            table = contracts[cid]
        else:
            *parents, key = path.split(".")
            table = document
            for part in parents:
                table = table[part]  # type: ignore[index,assignment]
        current = [str(v) for v in table.get(key, [])]  # type: ignore[union-attr]
        if current != values:
            stale.append(path)
            table[key] = _array(values, multiline=len(", ".join(values)) > 80)  # type: ignore[index]
    sources = _sources(document, found)
    for feature in found:
        if feature.distribution not in sources:
            stale.append(f"tool.uv.sources.{feature.distribution}")
            table = tomlkit.inline_table()
            table["workspace"] = True
            sources[feature.distribution] = table  # type: ignore[index]
    if stale and not check:
        PYPROJECT.write_text(tomlkit.dumps(document))
    return stale


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = sync(check)
    if not stale:
        print(f"pyproject.toml names the {len(features())} feature packages everywhere")
        return 0
    if check:
        print(
            "pyproject.toml is stale for the feature packages in packages/: "
            + ", ".join(stale)
            + "\nrun: uv run python scripts/sync_features.py",
            file=sys.stderr,
        )
        return 1
    print("updated: " + ", ".join(stale))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
