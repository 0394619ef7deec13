"""Every design reference in the repository leads into the repository.

Code, tests and docs cite the rules they follow as ``docs/design/<page>.md#<anchor>`` (more
anchors of the same page may follow as ``, #<anchor>``). This test reads every text file git
knows about (tracked, or new and not ignored) and fails, naming the file and line, when one

* cites a design document that is not in the repository (the names of the original design notes,
  a ``../shared`` or absolute ``/work`` path, a bare ``§`` section number, a bare decision number
  such as ``D4`` or ``G9``), or
* cites a page under ``docs/design/`` that does not exist, or an anchor that page does not have
  (Markdown links are checked the same way).

Issue references (``issue 8 §4``) are not design references and are allowed.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design"

_SKIP_SUFFIXES = {".lock", ".svg", ".png", ".jpg", ".gif", ".ico", ".pyc", ".whl", ".gz", ".zip"}

OUTSIDE: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"seed-plugins|\b[Ss]eed §|the seed's (?:table|rule|feature|custom-kind|confirm)"
            r"|the seed describes|(?:written|as) in the seed\b|forbidden writes? of the seed"
        ),
        "the seed design note",
    ),
    (re.compile(r"pico3-spec"), "the pico3 spec"),
    (re.compile(r"chord-spec"), "the chord spec"),
    (re.compile(r"python-stack"), "the python-stack note"),
    (re.compile(r"agent-features"), "the agent-features note"),
    (re.compile(r"LAYOUT\.md"), "LAYOUT.md"),
    (re.compile(r"DECISIONS(?:\.md| D\d)"), "DECISIONS.md"),
    (re.compile(r"hardening-handoff|view-and-events|pico-handoff"), "an upstream design note"),
    (re.compile(r"\.\./shared/|shared/design/|/work/(?:shared|notes|main|wt)\b"), "a path outside"),
)
"""Documents that are not in the repository, and how each is recognised."""

_BARE_SECTION = re.compile(r"§\s*\d")
_ISSUE_SECTION = re.compile(r"\bissues? \d+[^\n]{0,60}$")
_BARE_DECISION = re.compile(
    r"(?<![\w#/-])(?:D(?:10|[1-9])(?:\s+G\d{1,2})?|G(?:[4-9]|1[0-7]|2[12]))(?![\w.-])"
)
_DESIGN_REF = re.compile(r"docs/design/([\w.-]+\.md)((?:#[\w-]+)(?:,\s*#[\w-]+)*)?")
_MD_LINK = re.compile(r"\]\(([^)\s#]*)(#[^)\s]*)?\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces as '-'."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    """The heading anchors of a Markdown page (headings inside code fences do not count)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fenced or match is None:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def problems_in(text: str, where: Path) -> Iterator[str]:
    """What is wrong with the design references in ``text`` (a file at ``where``)."""
    in_design = where.is_absolute() and where.is_relative_to(DESIGN)
    for number, line in enumerate(text.splitlines(), 1):
        at = f"{where.relative_to(ROOT) if where.is_absolute() else where}:{number}"
        for pattern, name in OUTSIDE:
            if pattern.search(line):
                yield f"{at}: cites {name}, which is not in the repository: {line.strip()}"
        for match in _BARE_SECTION.finditer(line):
            if not _ISSUE_SECTION.search(line[: match.start()]):
                yield f"{at}: a bare '§' section of a document not in the repository: {line.strip()}"
        for match in _BARE_DECISION.finditer(line) if not in_design else ():
            yield (
                f"{at}: bare decision {match.group(0)!r}; cite docs/design/decisions.md#<id>: "
                f"{line.strip()}"
            )
        for match in _DESIGN_REF.finditer(line):
            page = DESIGN / match.group(1)
            if not page.is_file():
                yield f"{at}: docs/design/{match.group(1)} does not exist"
                continue
            for anchor in re.findall(r"#([\w-]+)", match.group(2) or ""):
                if anchor not in anchors(page):
                    yield f"{at}: docs/design/{match.group(1)} has no heading #{anchor}"
        if where.suffix == ".md" and where.is_absolute():
            yield from _link_problems(line, where, at)


def _link_problems(line: str, where: Path, at: str) -> Iterator[str]:
    """Relative Markdown links of a page must reach a file (and a heading, for a page)."""
    for match in _MD_LINK.finditer(line):
        target, fragment = match.group(1), (match.group(2) or "")[1:]
        if re.match(r"[a-z]+:", target):
            continue
        path = (where.parent / target).resolve() if target else where
        if not path.exists():
            yield f"{at}: link to {target}, which does not exist"
        elif (
            fragment
            and path.suffix == ".md"
            and path.is_relative_to(DESIGN)
            and fragment not in anchors(path)
        ):
            yield f"{at}: link to {target or where.name}#{fragment}, which has no such heading"


_NOT_SOURCE = {
    ".git",
    ".venv",
    "node_modules",
    "__pycache__",
    "site",
    "build",
    "dist",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
    ".mypy_cache",
}


def repository_files() -> list[Path]:
    """Every file git tracks, plus new files it does not ignore (outside a git checkout: every
    file but virtualenvs, caches and build output)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"],
            cwd=ROOT,
            capture_output=True,
            check=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return [
            path
            for path in ROOT.rglob("*")
            if not _NOT_SOURCE.intersection(path.relative_to(ROOT).parts)
            and not any(part.endswith(".egg-info") for part in path.parts)
        ]
    return [ROOT / name for name in listed.split("\0") if name]


def test_every_design_reference_leads_into_the_repository() -> None:
    found: list[str] = []
    checked = 0
    for path in repository_files():
        if path.suffix in _SKIP_SUFFIXES or path == Path(__file__) or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        checked += 1
        found.extend(problems_in(text, path))
    assert checked > 100, f"only {checked} files were read from {ROOT}"
    assert not found, f"{len(found)} design references lead nowhere:\n" + "\n".join(found)


def test_the_design_index_lists_every_page() -> None:
    index = (DESIGN / "README.md").read_text(encoding="utf-8")
    pages = sorted(p.name for p in DESIGN.glob("*.md") if p.name != "README.md")
    assert pages, "docs/design has no pages"
    missing = [name for name in pages if f"]({name})" not in index]
    assert not missing, f"docs/design/README.md does not list {missing}"


def test_the_checker_catches_what_it_is_for() -> None:
    here = Path("example.py")

    def flagged(text: str) -> list[str]:
        return list(problems_in(text, here))

    assert flagged("The rule (pico3-spec §3.4) says so.")
    assert flagged("as in seed-plugins §6.1")
    assert flagged("the worst case the seed describes")
    assert flagged("see ../shared/design/LAYOUT.md")
    assert flagged("retire first (DECISIONS D4)")
    assert flagged("hook order (D8 G9)")
    assert flagged("hook order (G9 order)")
    assert flagged("# §9 item 83")
    assert flagged("docs/design/storage.md#no-such-heading")
    assert flagged("docs/design/storage.md#publication-point, #nowhere")
    assert flagged("docs/design/nowhere.md#d4")
    assert not flagged("docs/design/storage.md#publication-point, #recovery")
    assert not flagged("docs/design/decisions.md#d8-g5 and docs/authoring-facets.md")
    assert not flagged("The app's commands (issue 8 §4, §5).")
    assert not flagged("a 3D model, ID2, D2D, item G12x, UTF-16, generation G1")
    assert slug("D8-G5") == "d8-g5"
    assert slug("Publication point") == "publication-point"
    assert slug("Grep, find, ls") == "grep-find-ls"
