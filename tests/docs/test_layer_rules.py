"""docs/architecture.md's "Layer rules" and the import-linter contracts are the same list.

Every rule on the page names the contract that enforces it by its id, and every contract in the
root pyproject.toml is named on the page, so a rule cannot be stated without being enforced nor a
contract added without being explained. That the contracts are kept is checked by running
lint-imports (tests/test_public_api.py). A contract that lists feature packages lists all of
them, so a new package cannot slip past a rule.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"


def _section(heading: str) -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def named_rules() -> list[str]:
    """The contract ids the rules name: the backticked id that starts each bullet."""
    return re.findall(r"^- `([a-z0-9-]+)`:", _section("Layer rules"), flags=re.MULTILINE)


def contracts() -> list[dict]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["tool"]["importlinter"]["contracts"]


def contract_ids() -> list[str]:
    return [c["id"] for c in contracts()]


def feature_packages() -> set[str]:
    """Every feature package, found on disk."""
    return {p.parent.name for p in ROOT.glob("packages/facets-*/src/*/__init__.py")}


def _top_level_names(values: list[str]) -> set[str]:
    """The root packages a contract field names (``a.b | c`` layer strings included)."""
    names = set()
    for value in values:
        for part in value.split("|"):
            names.add(part.strip().strip("()").split(".")[0])
    return names


def test_the_page_names_rules() -> None:
    rules = named_rules()
    assert len(rules) >= 10, rules
    assert len(rules) == len(set(rules)), f"a rule is named twice: {rules}"


def test_every_rule_on_the_page_is_a_contract() -> None:
    missing = sorted(set(named_rules()) - set(contract_ids()))
    assert not missing, f"docs/architecture.md names rules no contract enforces: {missing}"


def test_every_contract_is_a_rule_on_the_page() -> None:
    unnamed = sorted(set(contract_ids()) - set(named_rules()))
    assert not unnamed, f"contracts docs/architecture.md's 'Layer rules' does not name: {unnamed}"


def test_a_contract_that_lists_feature_packages_lists_every_one() -> None:
    features = feature_packages()
    assert {"facets_approval", "facets_subagents"} <= features
    short: list[str] = []
    for contract in contracts():
        for field, values in contract.items():
            if not isinstance(values, list) or field == "ignore_imports":
                continue
            named = _top_level_names(values)
            if named & features and not features <= named:
                short.append(f"{contract['id']}.{field} lacks {sorted(features - named)}")
    assert not short, "pyproject.toml's import contracts miss feature packages: " + "; ".join(short)
