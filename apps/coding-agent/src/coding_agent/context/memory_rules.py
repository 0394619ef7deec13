"""Claude Code's memory rules: the Markdown files of ``.claude/rules/``, always or per path.

A Claude Code user splits a long ``CLAUDE.md`` into topic files::

    .claude/rules/
        testing.md           # no front matter: read at the start, like .claude/CLAUDE.md
        frontend/react.md    # ---
                             # paths:
                             #   - "src/components/**/*.tsx"
                             # ---
                             # read once the agent works on a file the patterns match

Rule files are found recursively (any ``.md`` under ``rules/``, in path order; hidden folders
are skipped) in ``~/.claude/rules/`` (yours, read after ``~/.claude/CLAUDE.md``) and in the
``.claude/rules/`` of each folder the project's instructions are read from (after that folder's
``.claude/CLAUDE.md``). A rule whose front matter names ``paths`` (one glob or a list) is read
only once a file the agent read, edited or wrote, or a folder it listed, matches one of them:
the patterns are relative to the folder holding ``.claude`` (for your own rules, the project
root); ``*`` stays inside a folder, ``**`` spans folders, ``{a,b}`` is either. The front matter
itself is not shown to the model. Front matter that does not parse skips the file with a reason
(``/context`` lists it); it is never read unscoped by mistake.

:mod:`coding_agent.context.context_files` reads the files (ownership checks, ``@imports``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from coding_agent.context.resources import FrontmatterError, split_frontmatter

__all__ = ["RULES_FOLDER", "glob_pattern", "matching", "rule_files", "rule_scope"]

RULES_FOLDER = "rules"
"""The folder of rule files inside a ``.claude`` folder (``.claude/rules/``)."""


def rule_files(folder: Path) -> list[Path]:
    """The ``.md`` files under ``folder`` (a ``rules`` folder), recursively, in path order;
    hidden files and folders are skipped. ``[]`` when ``folder`` is not a folder."""
    if not folder.is_dir():
        return []
    found: list[Path] = []
    for parent, folders, files in os.walk(folder):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        found += [
            Path(parent) / name
            for name in files
            if name.endswith(".md") and not name.startswith(".")
        ]
    return sorted(found, key=lambda path: path.relative_to(folder).parts)


def glob_pattern(glob: str) -> re.Pattern[str]:
    """``glob`` (Claude Code's ``paths`` syntax) as a regular expression over a ``/``-separated
    relative path: ``**/`` is any number of folders, ``**`` anything, ``*`` anything but ``/``,
    ``?`` one character but ``/``, ``{a,b}`` either; a leading ``./`` or ``/`` is dropped.

    The permission rules' path patterns have a twin translator on purpose
    (``facets_approval.rules._glob``): the same ``**/``, ``**``, ``*`` and ``?``, but
    gitignore's syntax besides (``[abc]`` classes and ``\\`` escapes, no braces: a ``{`` there
    is a literal character) and a ``RuleError`` for a pattern that does not parse, since a
    deny rule must never quietly match less than it says. Here braces are Claude Code's
    ``paths`` syntax (``src/**/*.{ts,tsx}``), and nothing fails: a rule's globs only choose when
    it is read. The app may not import a feature package, so each keeps its own;
    ``tests/app/context/test_memory_rules.py`` checks with generated patterns that the two agree
    wherever both syntaxes do."""
    glob = glob.strip().removeprefix("./").lstrip("/")
    out: list[str] = []
    index, depth = 0, 0
    while index < len(glob):
        char = glob[index]
        if glob.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
            continue
        if glob.startswith("**", index):
            out.append(".*")
            index += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "{":
            out.append("(?:")
            depth += 1
        elif char == "}" and depth:
            out.append(")")
            depth -= 1
        elif char == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(char))
        index += 1
    out.append(")" * depth)
    return re.compile("".join(out))


def rule_scope(text: str) -> tuple[tuple[str, ...], str]:
    """``(paths, body)`` of a rule file's text: its front matter's ``paths`` (``()``: the rule
    always applies) and the text without the front matter. Raises ``ValueError`` naming the
    problem when the front matter does not parse or ``paths`` is neither text nor a list of
    texts."""
    try:
        meta, body = split_frontmatter(text)
    except FrontmatterError as error:
        raise ValueError(str(error)) from None
    paths = meta.get("paths")
    if paths is None:
        return (), body
    if isinstance(paths, str):
        paths = [part for part in paths.split(",") if part.strip()] if "{" not in paths else [paths]
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):  # pyright: ignore[reportUnknownVariableType]
        raise ValueError("'paths' in the front matter must be a glob or a list of globs")
    return tuple(p.strip() for p in paths if p.strip()), body  # pyright: ignore[reportUnknownVariableType, reportUnknownMemberType, reportUnknownArgumentType]


def matching(globs: Iterable[str], base: Path, touched: Iterable[Path]) -> str | None:
    """The first of ``touched`` (absolute paths) under ``base`` that one of ``globs`` matches,
    relative to ``base`` (``None``: none does)."""
    patterns = [glob_pattern(glob) for glob in globs]
    for path in touched:
        if base not in path.parents:
            continue
        relative = path.relative_to(base).as_posix()
        if any(pattern.fullmatch(relative) for pattern in patterns):
            return relative
    return None
