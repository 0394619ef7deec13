"""Shared truncation (docs/design/agent.md#tool-output): two caps, whole lines, head for reads, tail for bash."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from coding_agent.worker.tools.truncate import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    format_size,
    split_lines,
    truncate_head,
    truncate_line,
    truncate_tail,
)


def numbered(count: int, width: int = 0) -> str:
    return "\n".join(f"{n:0{width}d}" if width else str(n) for n in range(1, count + 1))


def test_defaults_are_pis() -> None:
    assert DEFAULT_MAX_LINES == 2000
    assert DEFAULT_MAX_BYTES == 50 * 1024


def test_text_within_both_caps_is_untouched() -> None:
    text = numbered(10) + "\n"
    for cut in (truncate_head(text), truncate_tail(text)):
        assert cut.content == text
        assert not cut.truncated
        assert cut.truncated_by is None
        assert cut.total_lines == 10


def test_trailing_newline_does_not_count_as_a_line() -> None:
    assert split_lines("a\nb\n") == ["a", "b"]
    assert split_lines("a\nb") == ["a", "b"]
    assert split_lines("") == []
    assert split_lines("\n") == [""]


def test_head_keeps_the_first_2000_lines() -> None:
    cut = truncate_head(numbered(3000))
    assert cut.truncated_by == "lines"
    assert cut.content.split("\n") == [str(n) for n in range(1, 2001)]
    assert (cut.output_lines, cut.total_lines) == (2000, 3000)


def test_head_stops_at_50kb_with_whole_lines() -> None:
    line = "x" * 99
    cut = truncate_head("\n".join([line] * 1000))
    assert cut.truncated_by == "bytes"
    assert cut.output_bytes <= DEFAULT_MAX_BYTES
    assert all(piece == line for piece in cut.content.split("\n"))
    assert cut.output_lines == (DEFAULT_MAX_BYTES + 1) // 100


def test_head_returns_nothing_when_the_first_line_alone_is_too_big() -> None:
    cut = truncate_head("y" * (DEFAULT_MAX_BYTES + 1) + "\nshort")
    assert cut.content == ""
    assert cut.first_line_exceeds_limit
    assert cut.truncated_by == "bytes"


def test_tail_keeps_the_last_2000_lines() -> None:
    cut = truncate_tail(numbered(3000))
    assert cut.truncated_by == "lines"
    assert cut.content.split("\n") == [str(n) for n in range(1001, 3001)]


def test_tail_keeps_the_end_of_a_single_oversized_last_line() -> None:
    line = "".join(str(n % 10) for n in range(60_000))
    cut = truncate_tail("first\n" + line)
    assert cut.last_line_partial
    assert cut.content == line[-DEFAULT_MAX_BYTES:]
    assert cut.output_lines == 1


def test_tail_partial_line_never_splits_a_utf8_character() -> None:
    cut = truncate_tail("é" * 40_000, max_bytes=1001)
    assert cut.last_line_partial
    assert cut.content == "é" * 500  # 1000 bytes: the half character is dropped
    assert cut.output_bytes == 1000


def test_truncate_line_marks_the_cut() -> None:
    assert truncate_line("abc", 5) == ("abc", False)
    assert truncate_line("abcdefgh", 5) == ("abcde... [truncated]", True)


def test_format_size_matches_pi() -> None:
    assert format_size(512) == "512B"
    assert format_size(DEFAULT_MAX_BYTES) == "50.0KB"
    assert format_size(3 * 1024 * 1024 // 2) == "1.5MB"


lines_text = st.lists(st.text(alphabet="ab é\t", max_size=30), max_size=40).map("\n".join)


@settings(max_examples=200, deadline=None)
@given(text=lines_text, max_lines=st.integers(1, 10), max_bytes=st.integers(1, 120))
def test_head_is_a_prefix_of_whole_lines_within_both_caps(
    text: str, max_lines: int, max_bytes: int
) -> None:
    cut = truncate_head(text, max_lines=max_lines, max_bytes=max_bytes)
    lines = split_lines(text)
    if not cut.truncated:
        assert cut.content == text
        return
    kept = cut.content.split("\n") if cut.output_lines else []
    assert kept == lines[: len(kept)]
    assert cut.output_lines == len(kept) <= max_lines
    assert len(cut.content.encode()) <= max_bytes


@settings(max_examples=200, deadline=None)
@given(text=lines_text, max_lines=st.integers(1, 10), max_bytes=st.integers(4, 120))
def test_tail_is_a_suffix_within_both_caps(text: str, max_lines: int, max_bytes: int) -> None:
    cut = truncate_tail(text, max_lines=max_lines, max_bytes=max_bytes)
    if not cut.truncated:
        assert cut.content == text
        return
    assert len(cut.content.encode()) <= max_bytes
    assert cut.output_lines <= max_lines
    body = "\n".join(split_lines(text))
    assert body.endswith(cut.content)
    if not cut.last_line_partial:
        kept = cut.content.split("\n")
        assert kept == split_lines(text)[-len(kept) :]
