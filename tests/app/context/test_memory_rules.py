"""Claude Code's ``.claude/rules/`` memory files: always-on rules read like ``.claude/CLAUDE.md``,
path-scoped ones (``paths:`` front matter) once the agent works on a matching file, your own
``~/.claude/rules/`` first; a rule whose front matter does not parse is skipped with the reason."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from coding_agent.context.context_files import scan_context_files, touched_paths
from coding_agent.context.memory_rules import glob_pattern, rule_scope
from facets_approval.rules import _glob  # pyright: ignore[reportPrivateUsage] - its twin


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "home").mkdir()
    (tmp_path / "config").mkdir()
    return {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config")}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    return repo.resolve()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def read(tmp_path: Path, repo: Path, env: dict[str, str], **kwargs: Any) -> list[tuple[str, str]]:
    scanned = scan_context_files(repo, env=env, **kwargs)
    root = str(tmp_path) + "/"
    return [
        (f.path.removeprefix(root), f.content.strip())
        for f in scanned.files
        if f.path.startswith(root)
    ]


def reading(path: str) -> list[dict[str, Any]]:
    """An assistant message whose tool call read ``path``."""
    call = {"type": "toolCall", "id": "1", "name": "read", "arguments": {"path": path}}
    return [{"role": "assistant", "content": [call]}]


def test_rules_without_paths_are_read_after_claude_md_and_yours_first(
    tmp_path: Path, repo: Path, home: dict[str, str]
) -> None:
    write(tmp_path / "home/.claude/CLAUDE.md", "my memory\n")
    write(tmp_path / "home/.claude/rules/style.md", "my style rule\n")
    write(repo / ".claude/CLAUDE.md", "project memory\n")
    write(repo / ".claude/rules/testing.md", "run pytest -x\n")
    write(repo / ".claude/rules/frontend/react.md", "use hooks\n")
    write(repo / ".claude/rules/.hidden.md", "not a rule\n")
    write(repo / ".claude/rules/notes.txt", "not markdown\n")
    write(repo / "CLAUDE.local.md", "local notes\n")
    assert read(tmp_path, repo, home) == [
        ("home/.claude/CLAUDE.md", "my memory"),
        ("home/.claude/rules/style.md", "my style rule"),
        ("repo/.claude/CLAUDE.md", "project memory"),
        ("repo/.claude/rules/frontend/react.md", "use hooks"),
        ("repo/.claude/rules/testing.md", "run pytest -x"),
        ("repo/CLAUDE.local.md", "local notes"),
    ]


def test_a_path_scoped_rule_waits_for_a_matching_file_and_its_front_matter_is_not_shown(
    tmp_path: Path, repo: Path, home: dict[str, str]
) -> None:
    write(
        repo / ".claude/rules/api.md",
        '---\npaths:\n  - "src/api/**/*.ts"\n  - "lib/*.{ts,tsx}"\n---\nValidate every input.\n',
    )
    write(tmp_path / "home/.claude/rules/py.md", "---\npaths: '**/*.py'\n---\nType hints.\n")
    assert read(tmp_path, repo, home) == []
    other = touched_paths(reading("src/web/page.ts"), repo)
    assert read(tmp_path, repo, home, touched=other) == []
    api = touched_paths(reading("src/api/v1/users.ts"), repo)
    assert api == {str(repo / "src/api/v1/users.ts")}
    assert read(tmp_path, repo, home, touched=api) == [
        ("repo/.claude/rules/api.md", "Validate every input.")
    ]
    scanned = scan_context_files(repo, env=home, touched=api)
    assert scanned.files[-1].reason.endswith("for src/api/v1/users.ts")
    both = api | touched_paths(reading("tool.py"), repo)
    assert [path for path, _ in read(tmp_path, repo, home, touched=both)] == [
        "home/.claude/rules/py.md",
        "repo/.claude/rules/api.md",
    ]


def test_a_rule_whose_front_matter_does_not_parse_is_skipped_with_the_reason(
    repo: Path, home: dict[str, str]
) -> None:
    write(repo / ".claude/rules/broken.md", "---\npaths: [unclosed\n---\nsecret rule\n")
    write(repo / ".claude/rules/open.md", "---\npaths: x\nno closing line\n")
    write(repo / ".claude/rules/number.md", "---\npaths: 3\n---\nbody\n")
    scanned = scan_context_files(repo, env=home)
    assert not [f for f in scanned.files if f.path.startswith(str(repo))]
    reasons = {Path(s.path).name: s.reason for s in scanned.skipped}
    assert reasons["broken.md"].startswith("a rule file, but the frontmatter is not valid YAML")
    assert "never closed" in reasons["open.md"]
    assert "'paths' in the front matter must be a glob or a list of globs" in reasons["number.md"]


def test_globs_follow_claude_codes_paths_syntax() -> None:
    assert glob_pattern("**/*.ts").fullmatch("a.ts")
    assert glob_pattern("**/*.ts").fullmatch("src/deep/a.ts")
    assert not glob_pattern("src/*.ts").fullmatch("src/deep/a.ts")
    assert glob_pattern("src/**").fullmatch("src/deep/a.ts")
    assert glob_pattern("./src/*.{ts,tsx}").fullmatch("src/a.tsx")
    assert not glob_pattern("src/*.{ts,tsx}").fullmatch("src/a.js")
    assert glob_pattern("a?.md").fullmatch("ab.md") and not glob_pattern("a.md").fullmatch("aXmd")
    assert rule_scope("---\npaths: a/*.py, b/*.py\n---\nx\n") == (("a/*.py", "b/*.py"), "x\n")
    assert rule_scope("no front matter\n") == ((), "no front matter\n")


_COMMON = st.lists(
    st.sampled_from(["a", "b", ".", "/", ",", "}", "*", "?", "**", "**/"]), max_size=8
)
"""Glob pieces both translators read alike: no ``{``, ``[`` or ``\\`` (module docstrings)."""
_PATHS = st.text(alphabet="ab./,}", max_size=10)


@given(_COMMON.map("".join), _PATHS)
def test_globs_agree_with_the_permission_rules_twin_where_both_syntaxes_do(
    glob: str, path: str
) -> None:
    """``glob_pattern`` and the permission rules' ``_glob`` are twins on purpose (each
    docstring says why they stay apart): on a pattern both syntaxes read alike, they match the
    same paths."""
    assume(glob == glob.strip().removeprefix("./").lstrip("/"))  # glob_pattern drops those
    memory = glob_pattern(glob).fullmatch(path) is not None
    permission = re.fullmatch(_glob(glob, glob), path, re.DOTALL) is not None
    assert memory == permission


def test_where_the_glob_twins_differ_on_purpose() -> None:
    """Braces are Claude Code's ``paths`` syntax; a permission rule's path is gitignore's:
    classes and escapes, and a ``{`` is a literal character."""
    assert glob_pattern("*.{ts,tsx}").fullmatch("a.tsx")
    assert not re.fullmatch(_glob("*.{ts,tsx}", "x"), "a.tsx")
    assert re.fullmatch(_glob("*.{ts,tsx}", "x"), "a.{ts,tsx}")
    assert re.fullmatch(_glob("[ab].md", "x"), "a.md") and not glob_pattern("[ab].md").fullmatch(
        "a.md"
    )
    assert re.fullmatch(_glob("\\*.md", "x"), "*.md") and not re.fullmatch(
        _glob("\\*.md", "x"), "a.md"
    )
