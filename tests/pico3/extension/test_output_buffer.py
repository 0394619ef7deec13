"""The bounded stream buffer (docs/design/turn.md#tool streaming)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pico3.tools import OutputBounds, OutputBuffer


def test_head_keeps_the_first_bytes_and_counts_the_rest() -> None:
    buffer = OutputBuffer(OutputBounds(max_bytes=5, max_lines=100))
    buffer.push("abc")
    buffer.push("defg\nh")
    assert buffer.text() == "abcde"
    assert buffer.dropped_bytes == 4 and buffer.dropped_lines == 1 and buffer.truncated


def test_head_keeps_the_first_lines() -> None:
    buffer = OutputBuffer(OutputBounds(max_bytes=1000, max_lines=2))
    buffer.push("one\ntwo")
    buffer.push("\nthree\nfour\n")
    assert buffer.text() == "one\ntwo\n"
    assert buffer.dropped_lines == 2 and buffer.dropped_bytes == len("three\nfour\n")


def test_tail_keeps_the_last_bytes() -> None:
    buffer = OutputBuffer(OutputBounds(max_bytes=4, max_lines=100, retain="tail"))
    buffer.push("abcdef")
    buffer.push("gh")
    assert buffer.text() == "efgh" and buffer.dropped_bytes == 4


def test_tail_keeps_the_last_lines() -> None:
    buffer = OutputBuffer(OutputBounds(max_bytes=1000, max_lines=2, retain="tail"))
    for line in ("a\n", "b\n", "c\n", "d"):
        buffer.push(line)
    assert buffer.text() == "c\nd"
    assert buffer.dropped_lines == 2


def test_a_single_oversize_chunk_is_sliced_on_push() -> None:
    buffer = OutputBuffer(OutputBounds(max_bytes=10, max_lines=1000))
    buffer.push("x" * 1_000_000)
    assert buffer.text() == "x" * 10 and buffer.dropped_bytes == 999_990


def test_text_never_splits_a_utf8_character() -> None:
    head = OutputBuffer(OutputBounds(max_bytes=5, max_lines=10))
    head.push("aa€€")  # € is three bytes: the second one is cut in half
    assert head.text() == "aa€"
    tail = OutputBuffer(OutputBounds(max_bytes=4, max_lines=10, retain="tail"))
    tail.push("€€")
    assert tail.text() == "€"


def test_bytes_chunks_are_accepted_and_other_types_rejected() -> None:
    buffer = OutputBuffer()
    buffer.push(b"raw ")
    buffer.push("text")
    assert buffer.text() == "raw text" and buffer.pushed and not buffer.truncated
    try:
        buffer.push(3)  # type: ignore[arg-type]
    except TypeError as exc:
        assert "str or bytes" in str(exc)
    else:
        raise AssertionError("an int chunk was accepted")


def count_lines(text: str) -> int:
    """Lines as the buffer counts them: each newline ends one; a trailing partial line counts."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


chunks = st.lists(st.text(alphabet="ab\n", max_size=30), max_size=20)


@settings(max_examples=200, deadline=None)
@given(chunks=chunks, max_bytes=st.integers(1, 40), max_lines=st.integers(1, 6))
def test_head_retention_is_a_prefix_within_bounds(
    chunks: list[str], max_bytes: int, max_lines: int
) -> None:
    buffer = OutputBuffer(OutputBounds(max_bytes=max_bytes, max_lines=max_lines))
    for chunk in chunks:
        buffer.push(chunk)
    whole = "".join(chunks)
    kept = buffer.text()
    assert whole.startswith(kept)
    assert len(kept) <= max_bytes and count_lines(kept) <= max_lines
    assert len(kept) + buffer.dropped_bytes == len(whole)
    assert kept.count("\n") + buffer.dropped_lines == whole.count("\n")
    # Nothing was dropped that would have fit: the kept prefix is the longest allowed one.
    lines = whole.split("\n")
    longest = "\n".join(lines[:max_lines]) + ("\n" if len(lines) > max_lines else "")
    assert kept == longest[:max_bytes]


@settings(max_examples=200, deadline=None)
@given(chunks=chunks, max_bytes=st.integers(1, 40), max_lines=st.integers(1, 6))
def test_tail_retention_is_a_suffix_within_bounds(
    chunks: list[str], max_bytes: int, max_lines: int
) -> None:
    buffer = OutputBuffer(OutputBounds(max_bytes=max_bytes, max_lines=max_lines, retain="tail"))
    for chunk in chunks:
        buffer.push(chunk)
    whole = "".join(chunks)
    kept = buffer.text()
    assert whole.endswith(kept)
    assert len(kept) <= max_bytes and count_lines(kept) <= max_lines
    assert len(kept) + buffer.dropped_bytes == len(whole)
    parts = whole.splitlines(keepends=True)
    by_lines = "".join(parts[-max_lines:]) if parts else ""
    expected = by_lines[-max_bytes:] if by_lines else ""
    assert kept == expected
