"""docs/architecture.md's folder layout and turn diagram name only things that exist.

The layout replaced a drifting hand-written plan, so it is checked: every folder and module the
tree names must exist, and every Python package folder of every workspace member must be in the
tree. Every ``*.py`` path and folder the data-flow diagram names must exist too. When this fails
after a rename, update docs/architecture.md with the code.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"

_CONTINUATION = 26
"""Lines indented this far continue the description of the entry above them."""


def _block(heading: str) -> list[str]:
    """The lines of the first code block under ``## heading``."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"## {heading}\n")
    fence = text.index("```", start)
    body_start = text.index("\n", fence) + 1
    return text[body_start : text.index("```", body_start)].splitlines()


def _exists(path: Path) -> bool:
    if path.exists():
        return True
    # a module that became a package (x.py -> x/) is still the same place
    return path.suffix == ".py" and path.with_suffix("").is_dir()


def layout_entries() -> list[Path]:
    """Every path the layout tree names, resolved through its indentation."""
    entries: list[Path] = []
    stack: list[tuple[int, Path]] = []
    for line in _block("Folder layout"):
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent >= _CONTINUATION:
            continue
        name = line.split()[0]
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = (stack[-1][1] if stack else ROOT) / name.rstrip("/")
        entries.append(path)
        if name.endswith("/"):
            stack.append((indent, path))
    return entries


def test_every_path_in_the_layout_exists() -> None:
    entries = layout_entries()
    assert len(entries) > 30, f"the layout tree names only {len(entries)} paths"
    missing = [str(p.relative_to(ROOT)) for p in entries if not _exists(p)]
    assert not missing, f"docs/architecture.md's layout names paths that do not exist: {missing}"


def test_every_package_folder_is_in_the_layout() -> None:
    listed = {p.with_suffix("") if p.suffix == ".py" else p for p in layout_entries()}
    folders = [
        init.parent
        for pattern in ("packages/*/src/**/__init__.py", "apps/*/src/**/__init__.py")
        for init in ROOT.glob(pattern)
        if "template" not in init.parts
    ]
    assert folders
    unlisted = sorted(str(f.relative_to(ROOT)) for f in folders if f not in listed)
    assert not unlisted, f"docs/architecture.md's layout does not show {unlisted}"


def test_every_module_in_the_turn_diagram_exists() -> None:
    roots = [
        ROOT,
        *ROOT.glob("packages/*/src"),
        *ROOT.glob("packages/*/src/*"),
        *ROOT.glob("apps/*/src/*"),
    ]
    named = set()
    for line in _block("A turn, end to end"):
        named.update(re.findall(r"(?<![\w/.])((?:[a-z_]+/)+(?:[a-z_]+\.py)?|[a-z_]+\.py)\b", line))
    assert len(named) > 15, f"the diagram names only {sorted(named)}"

    def found(name: str) -> bool:
        if "/" not in name:  # a sibling named after a full path (``anthropic.py (or openai.py)``)
            return any(ROOT.glob(f"packages/*/src/**/{name}")) or any(
                ROOT.glob(f"apps/*/src/**/{name}")
            )
        return any(_exists(root / name.rstrip("/")) for root in roots)

    missing = sorted(name for name in named if not found(name))
    assert not missing, f"docs/architecture.md's turn diagram names what does not exist: {missing}"
