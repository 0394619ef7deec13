"""The fuzzy ranking behind the editor's dropdown (docs/design/agent.md#features: the ``/`` palette, ``@file``)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from coding_agent.tui.complete import match_span, rank_commands, rank_paths

_PART = st.text(alphabet="abc.-_", min_size=1, max_size=5)
_PATH = st.lists(_PART, min_size=1, max_size=4).map("/".join)


def _is_subsequence(query: str, text: str) -> bool:
    chars = iter(text.lower())
    return all(char in chars for char in query.lower())


@settings(max_examples=200, deadline=None)
@given(query=st.text(alphabet="abc./", max_size=4), paths=st.lists(_PATH, max_size=30))
def test_every_ranked_path_contains_the_query_as_a_subsequence(
    query: str, paths: list[str]
) -> None:
    ranked = rank_paths(query, paths, limit=50)
    assert all(_is_subsequence(query, path) for path in ranked)
    matching = [path for path in paths if _is_subsequence(query, path)]
    assert len(ranked) == min(len(matching), 50), "every match is offered, up to the limit"
    assert not Counter(ranked) - Counter(matching)


@settings(max_examples=200, deadline=None)
@given(paths=st.lists(_PATH, min_size=1, max_size=30), pick=st.integers(min_value=0))
def test_an_exact_basename_ranks_first(paths: list[str], pick: int) -> None:
    target = paths[pick % len(paths)]
    basename = target.rsplit("/", 1)[-1]
    best = rank_paths(basename, paths, limit=5)[0]
    assert best.rsplit("/", 1)[-1].lower() == basename.lower()


@settings(max_examples=200, deadline=None)
@given(query=st.text(alphabet="abcd", max_size=4), names=st.lists(st.text("abcd", max_size=6)))
def test_commands_rank_prefix_matches_before_other_matches(query: str, names: list[str]) -> None:
    ranked = rank_commands(query, names)
    assert all(_is_subsequence(query, name) for name in ranked)
    prefixed = [name.startswith(query) for name in ranked]
    assert prefixed == sorted(prefixed, reverse=True), "no prefix match after a non-prefix one"
    if query in names:
        assert ranked[0] == query


def test_match_span_measures_a_tight_window() -> None:
    assert match_span("", "anything") == 0
    assert match_span("ap", "app.py") == 2
    assert match_span("tapy", "tui/app.py") == 10
    assert match_span("ab", "ba") is None


def test_paths_prefer_basename_matches_then_shorter_paths() -> None:
    paths = ["docs/editor-notes.md", "src/tui/widgets/editor.py", "editor.py", "xeditorx.txt"]
    assert rank_paths("editor.py", paths) == ["editor.py", "src/tui/widgets/editor.py"]
    assert rank_paths("edit", paths)[:3] == [
        "editor.py",
        "docs/editor-notes.md",
        "src/tui/widgets/editor.py",
    ]
    assert rank_paths("twe", paths) == ["src/tui/widgets/editor.py"]
    assert rank_paths("", paths, limit=2) == ["editor.py", "xeditorx.txt"]


def test_commands_put_the_exact_name_first_then_prefixes_then_subsequences() -> None:
    names = ["model", "models", "compact", "mode", "help"]
    assert rank_commands("mode", names) == ["mode", "model", "models"]
    assert rank_commands("m", names) == ["mode", "model", "models", "compact"]
    assert rank_commands("", names) == ["compact", "help", "mode", "model", "models"]
