"""Fuzzy matching for the prompt editor's dropdown: commands and file paths.

A candidate *matches* a query when the query's characters appear in it in order, not
necessarily next to each other (a case-insensitive subsequence): ``tapy`` matches
``tui/app.py``. Matching decides membership; ranking decides order, and ranking is where the
intuition lives. Candidates fall into *tiers*, best first, and only within a tier do finer
measures break ties:

* commands: names starting with the query (the exact name first), then the other matches;
* paths: exact basename, basename prefix, basename substring, path substring, subsequence of the
  basename, subsequence of the whole path.

Inside a tier a tighter match wins (the shortest stretch of the candidate holding the query's
characters), then a shorter candidate, then alphabetical order, so results are deterministic.
Tiers make the important promise easy to keep and to test: typing a file's exact name puts
that file first, however many longer paths happen to contain the same letters.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

__all__ = ["match_span", "rank_commands", "rank_paths"]


def match_span(query: str, text: str) -> int | None:
    """Length of a tight stretch of ``text`` holding ``query`` in order, or ``None`` if absent.

    Both strings are compared as given (callers lowercase them for a case-insensitive match).
    The stretch ends where the earliest complete match ends and starts as late as possible
    before that, which is the shortest window for that end. An empty query spans 0.
    """
    if not query:
        return 0
    position = -1
    for char in query:
        position = text.find(char, position + 1)
        if position < 0:
            return None
    end = position
    for char in reversed(query):
        position = text.rfind(char, 0, position + 1)
        position -= 1
    return end - position


def rank_commands(query: str, names: Iterable[str]) -> list[str]:
    """Command names matching ``query``: prefix matches (exact first), then the others."""
    needle = query.lower()
    prefixed: list[tuple[bool, str]] = []
    others: list[tuple[int, int, str]] = []
    for name in names:
        folded = name.lower()
        if folded.startswith(needle):
            prefixed.append((folded != needle, name))
            continue
        span = match_span(needle, folded)
        if span is not None:
            others.append((span, len(name), name))
    return [name for _, name in sorted(prefixed)] + [name for *_, name in sorted(others)]


def _path_key(needle: str, path: str) -> tuple[int, int, int, str] | None:
    folded = path.lower()
    span = match_span(needle, folded)
    if span is None:
        return None
    base = folded.rsplit("/", 1)[-1]
    if base == needle:
        tier = 0
    elif base.startswith(needle):
        tier = 1
    elif needle in base:
        tier = 2
    elif needle in folded:
        tier = 3
    else:
        base_span = match_span(needle, base)
        if base_span is not None:
            tier, span = 4, base_span
        else:
            tier = 5
    return (tier, span, len(path), path)


def rank_paths(query: str, paths: Iterable[str], *, limit: int = 10) -> list[str]:
    """The best ``limit`` of ``paths`` (``/``-separated) matching ``query``, best first."""
    needle = query.lower()
    keyed = (key for path in paths if (key := _path_key(needle, path)) is not None)
    return [key[-1] for key in heapq.nsmallest(limit, keyed)]
